"""The data pipeline from a list to padded batches, as one readable chain of generator stages.

  source (raw list or shards; this rank's and worker's part; order shuffled per epoch)
  -> audio length from its header (audio kept across epochs: data.cache_audio_mb) -> speed factor drawn
  -> tokenise -> filter -> shuffle buffer -> sort buffer -> batch (static or dynamic)   [or MLPerf buckets]
  -> skip batches already trained on (resume)
  -> decode -> mono -> resample -> speed perturb -> reverberation, noise -> fbank -> CMVN -> SpecAugment
  -> frame stacking -> pad

Audio is decoded after batching: the batches depend only on lengths, which the headers give, so resuming at
batch k decodes and featurises none of batches 0..k-1, and the output is identical to an uninterrupted
epoch. Bucketed batches are cut from the list's durations before any header is read.
Each batch carries its position: the batches planned up to it, one that came out empty included (a bucket
batch whose every utterance was dropped), which is what a resume skips.
"""

from __future__ import annotations

import functools
import logging
import math
import os
import random
from typing import Callable, Iterator

from rnnt.data import batching, stages
from rnnt.data.audio_cache import AudioCache
from rnnt.data.bucketing import bucket_batches, with_durations
from rnnt.data.config import DataConfig
from rnnt.data.features import check_mel_bins
from rnnt.data.noise import Augmenter, training_augmenter
from rnnt.data.report import DataReport
from rnnt.data.shard_reading import shard_records
from rnnt.data.sources import each_listed_once, list_kind, numbered_copies, raw_records, read_list
from rnnt.data.splitting import Reader, part

log = logging.getLogger(__name__)


class Pipeline:
    def __init__(self, list_path: str, config: DataConfig, tokenizer, train: bool,
                 output_frames: Callable[[int], int] = lambda frames: frames,
                 units_per_frame: tuple[float, str, bool] = (math.inf, "", False),
                 audio_cache: AudioCache | None = None, augmenter: Augmenter | None = None):
        """output_frames and units_per_frame come from the model (the encoder config's output_frames, the loss's
        units_per_frame()): the filter counts units against the encoder's real output frames and what the
        loss's lattice can carry (rnnt.data.stages.filter_utterances). audio_cache: another pipeline's of the
        same data config, which then keeps this one's audio too within its one budget (training's and
        validation's); None: its own, as the config says. augmenter: data.noise and data.reverb's, read before
        (training_augmenter); None: its own, for training, where the config has them."""
        self.list_path, self.config, self.tokenizer, self.train = list_path, config, tokenizer, train
        self.output_frames, self.units_per_frame = output_frames, units_per_frame
        self.entries = read_list(list_path)
        if not self.entries:
            raise ValueError(f"{list_path}: the data list is empty")
        self.kind = list_kind(self.entries)
        self.repeats = 0  # lines repeating a key or shard, left out before the split (counted in rank 0's report)
        if not train:
            self.entries, self.repeats = each_listed_once(self.entries, self.kind, os.path.basename(list_path))
        self.entries = numbered_copies(self.entries, self.kind)
        self.buckets = config.buckets if train else 0  # a training order: validation reads every utterance
        if self.buckets and self.kind != "raw":
            raise ValueError(f"{list_path}: bucketing needs a raw list (durations per utterance); this is a shard list")
        if self.buckets:
            self.entries = with_durations(self.entries, list_path)
        check_mel_bins(config.features.preset, config.sample_rate, config.features.num_mel_bins)
        self.cmvn = stages.load_cmvn(config)
        # Worker processes start afresh every epoch: there a cache would hold one epoch's audio for nothing.
        keep = config.cache_audio_mb > 0 and config.num_workers == 0
        own = AudioCache(config.cache_audio_mb * 2**20) if keep and audio_cache is None else None
        self.audio_cache = audio_cache if audio_cache is not None else own
        if augmenter is None and train and (augmenter := training_augmenter(config)):
            augmenter.log_warnings()
        self.augmenter = augmenter

    def _records(self, entries: list[str], epoch: int, report: DataReport) -> Iterator[dict]:
        config = self.config
        records = raw_records(entries, self.list_path) if self.kind == "raw" else \
            shard_records(entries, report, self.audio_cache)
        if not self.train:
            records = stages.first_of_each_key(records, os.path.basename(self.list_path), report)
        records = stages.audio_lengths(records, config.sample_rate, report, self.audio_cache)
        if self.train:
            records = stages.speed_perturb(records, config.speed_perturb, config.seed, epoch)
        else:
            records = stages.append_silence(records, config.tail_silence)
        records = stages.tokenize(records, self.tokenizer, report)
        return stages.filter_utterances(records, config, report, self.output_frames, self.units_per_frame)

    def report(self, epoch: int, reader: Reader) -> DataReport:
        where = os.path.basename(self.list_path) + (f", epoch {epoch + 1}" if self.train else "")  # as logs name it
        if reader.world_size > 1:
            where += f", rank {reader.rank}"
        if reader.num_workers > 1:
            where += f", worker {reader.worker}"
        report = DataReport(where, self.config.sample_rate)
        if self.repeats and reader.rank == reader.worker == 0:
            report.dropped["a key read before" if self.kind == "raw" else "a shard listed before"] += self.repeats
        return report

    def _batches(self, epoch: int, reader: Reader, skip: int) -> Iterator[tuple[int, list[dict]]]:
        """(position, batch) of one pass, past position `skip`; its report is logged when the pass ends."""
        report = self.report(epoch, reader)
        planned = self._bucket_batches(epoch, reader, report, skip) if self.buckets else (
            (position, batch) for position, batch in enumerate(self._batches_reported(epoch, reader, report), 1)
            if position > skip)
        augment = functools.partial(self._augmented, epoch=epoch, report=report) if self.augmenter else None
        for position, batch in planned:
            batch = stages.with_waveforms(batch, report, self.audio_cache, augment)
            if batch or self.buckets:  # a bucketed slice emptied still holds its place (batches)
                yield position, batch
        report.log()

    def _augmented(self, record: dict, waveform, epoch: int, report: DataReport):
        """The waveform reverberated and with noise as the utterance's generator draws them (data.reverb, noise)."""
        generator = stages.utterance_generator(self.config.seed + 2, epoch, record)
        waveform, done = self.augmenter.augment(waveform, generator)
        report.augmented.update(done)
        return waveform

    def _bucket_batches(self, epoch: int, reader: Reader, report: DataReport,
                        skip: int) -> Iterator[tuple[int, list[dict]]]:
        """The bucketed batches past position `skip` (those before are never read), an empty one included."""
        planned = bucket_batches(self.entries, self.buckets, self.config.batch.batch_size, self.config.seed, epoch,
                                 reader)
        for position, lines in enumerate(planned[skip:], skip + 1):
            yield position, list(self._records(lines, epoch, report))

    def _batches_reported(self, epoch: int, reader: Reader, report: DataReport) -> Iterator[list[dict]]:
        config = self.config
        entries = part(self.entries, config.seed, epoch, reader, shuffle=self.train,
                       share_leftovers=self.kind == "shard")
        records = self._records(entries, epoch, report)
        if self.train:
            rng = random.Random(f"shuffle:{config.seed}:{epoch}:{reader.rank}:{reader.worker}")
            records = batching.shuffle_buffer(records, config.shuffle_buffer, rng)
        records = batching.sort_buffer(records, config.sort_buffer)
        if config.batch.type == "static":
            yield from batching.static_batches(records, config.batch.batch_size)
        else:
            yield from batching.dynamic_batches(records, config.batch.max_frames, config.batch.max_batch_size,
                                                report.batched_alone)

    def batches(self, epoch: int = 0, reader: Reader = Reader(), skip: int = 0) -> Iterator[dict]:
        """Padded batches of one reader in one epoch, each with its "position", from position `skip` on; bucketed,
        a slice whose every utterance was dropped as {"keys": [], "position"}: a place held, which the trainer runs
        with weight 0 (rnnt.training.distributed.batches_of_every_rank), so the ranks stay on one global batch."""
        config = self.config
        for position, batch in self._batches(epoch, reader, skip):
            if not batch:  # a place held: the ranks take slices of the same global batch in a step
                yield {"keys": [], "position": position}
                continue
            feats = stages.features_of_batch(batch, config, self.cmvn, self.train, config.seed, epoch)
            yield {**batching.pad_batch([r["key"] for r in batch], feats, [r["tokens"] for r in batch],
                                        [r["txt"] for r in batch],
                                        [(r["samples"] - r.get("silence", 0)) / r["sample_rate"] for r in batch]),
                   "position": position}
