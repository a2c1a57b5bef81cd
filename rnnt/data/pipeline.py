"""The data pipeline from a list to padded batches, as one readable chain of generator stages.

  source (raw list or shards; this rank's and worker's part; order shuffled per epoch)
  -> decode -> mono -> resample -> speed perturb -> tokenise -> filter
  -> shuffle buffer -> sort buffer -> batch (static or dynamic)          [or MLPerf buckets, raw lists]
  -> skip batches already trained on (resume)
  -> fbank -> CMVN -> SpecAugment -> frame stacking -> pad

Features come after batching: the batches depend only on lengths, so resuming at batch k skips the
feature work of batches 0..k-1, and the output is identical to an uninterrupted epoch.
"""

from __future__ import annotations

import logging
import random
from typing import Iterator

from rnnt.data import batching, stages
from rnnt.data.bucketing import bucket_batches
from rnnt.data.config import DataConfig
from rnnt.data.sources import list_kind, raw_records, read_list, shard_records
from rnnt.data.splitting import Reader, part

log = logging.getLogger(__name__)


class Pipeline:
    def __init__(self, list_path: str, config: DataConfig, tokenizer, train: bool):
        self.list_path, self.config, self.tokenizer, self.train = list_path, config, tokenizer, train
        self.entries = read_list(list_path)
        if not self.entries:
            raise ValueError(f"{list_path}: the data list is empty")
        self.kind = list_kind(self.entries)
        if config.buckets and self.kind != "raw":
            raise ValueError(f"{list_path}: bucketing needs a raw list (durations per utterance); this is a shard list")
        self.cmvn = stages.load_cmvn(config.features.cmvn)
        self.dropped: dict[str, int] = {}

    def _records(self, entries: list[str], epoch: int) -> Iterator[dict]:
        config = self.config
        records = raw_records(entries, self.list_path) if self.kind == "raw" else shard_records(entries)
        records = stages.decode(records)
        records = stages.resample_to(records, config.sample_rate)
        if self.train:
            records = stages.speed_perturb(records, config.speed_perturb, config.seed, epoch)
        else:
            records = stages.append_silence(records, config.tail_silence)
        records = stages.tokenize(records, self.tokenizer)
        return stages.filter_utterances(records, config, self.dropped)

    def _batches(self, epoch: int, reader: Reader) -> Iterator[list[dict]]:
        config = self.config
        if config.buckets:
            for lines in bucket_batches(self.entries, config.buckets, config.batch.batch_size, config.seed, epoch,
                                        reader):
                batch = list(self._records(lines, epoch))
                if batch:
                    yield batch
            return
        entries = part(self.entries, config.seed, epoch, reader, shuffle=self.train,
                       share_leftovers=self.kind == "shard")
        records = self._records(entries, epoch)
        if self.train:
            rng = random.Random(f"shuffle:{config.seed}:{epoch}:{reader.rank}:{reader.worker}")
            records = batching.shuffle_buffer(records, config.shuffle_buffer, rng)
        records = batching.sort_buffer(records, config.sort_buffer)
        if config.batch.type == "static":
            yield from batching.static_batches(records, config.batch.batch_size)
        else:
            yield from batching.dynamic_batches(records, config.batch.max_frames, config.batch.max_batch_size)

    def batches(self, epoch: int = 0, reader: Reader = Reader(), skip: int = 0) -> Iterator[dict]:
        """Padded batches of one reader in one epoch, after skipping the first `skip` of them."""
        config = self.config
        for index, batch in enumerate(self._batches(epoch, reader)):
            if index < skip:
                continue
            feats = [stages.features_of(r, config, self.cmvn, self.train, config.seed, epoch) for r in batch]
            yield batching.pad_batch([r["key"] for r in batch], feats, [r["tokens"] for r in batch],
                                     [r["txt"] for r in batch])
