"""Validation: mean loss and greedy-search WER over a data list (CTC greedy search for a CTC model); under
torchrun each rank decodes its part of the list and the sums are added over the ranks. The result names the dev
set it was measured on (dev_set: the utterances' count and a sum of a hash of each one's key and transcript, the
same whatever the ranks and order), so that results of another dev set are never ranked with it."""

from __future__ import annotations

import dataclasses
import hashlib
import logging

import torch

from rnnt.data.config import FilterConfig
from rnnt.data.pipeline import Pipeline
from rnnt.scoring import ErrorCounts, count_errors
from rnnt.ctc_search import ctc_greedy_search
from rnnt.search import greedy_search
from rnnt.training.accumulation import is_out_of_memory
from rnnt.training.distributed import World, sum_over_ranks
from rnnt.training.stop import StopTraining


log = logging.getLogger("rnnt.train")
NO_USABLE_UTTERANCE = ("no usable utterance in the validation list (the data report above names what was left "
                       "out)")


def validation_pipeline(experiment, tokenizer, lengths: dict, audio_cache) -> Pipeline | None:
    """The validation list's pipeline (None: no list): the training front end without augmentation, and without
    data.filter, so that the validation loss and WER are over the utterances decoding reads (those a lattice cannot
    hold aside: lengths' units_per_frame). A list of which no utterance is usable stops the run now, not after
    the first epoch's training, which its end could not save."""
    if not experiment.paths.valid_list:
        return None
    data = dataclasses.replace(experiment.data, filter=FilterConfig())
    pipeline = Pipeline(experiment.paths.valid_list, data, tokenizer, False, **lengths, audio_cache=audio_cache)
    if next(iter(pipeline.batches()), None) is None:
        raise StopTraining(f"{experiment.paths.valid_list}: {NO_USABLE_UTTERANCE}")
    return pipeline


def utterance_hash(key: str, text: str) -> int:
    """32 bits of an utterance's key and transcript: a dev set's hashes summed stay exact in float64 (sum_over_ranks)
    up to two million utterances."""
    return int.from_bytes(hashlib.sha256(f"{key}\t{text}".encode("utf-8")).digest()[:4], "big")


def batch_loss_and_hypotheses(model, batch: dict, device: torch.device, wer: bool):
    """The batch's mean loss (float64) and, with wer, its greedy search's hypotheses."""
    feats, feat_lens = batch["feats"].to(device), batch["feat_lens"].to(device)
    tokens, token_lens = batch["tokens"].to(device), batch["token_lens"].to(device)
    enc, enc_lens = model.encode(feats, feat_lens)  # once, for the loss and for the search
    loss = model.loss(enc, enc_lens, tokens, token_lens)["loss"].double()
    search = greedy_search if model.is_transducer else ctc_greedy_search
    return loss, search(model, enc, enc_lens) if wer else []


@torch.no_grad()
def validate(model, batches, tokenizer, device: torch.device, wer: bool = True, world: World = World()
             ) -> dict[str, float]:
    """batches: this rank's part of the list (all of it in a world of one); every rank calls this together."""
    was_training = model.training
    model.eval()
    total_loss, utterances, skipped = torch.zeros((), dtype=torch.float64, device=device), 0, 0
    errors, hashes = ErrorCounts(), 0
    for batch in batches:
        hashes += sum(utterance_hash(key, text) for key, text in zip(batch["keys"], batch["texts"]))
        try:
            loss, hypotheses = batch_loss_and_hypotheses(model, batch, device, wer)
        except RuntimeError as error:  # a long dev utterance (data.filter is not applied here) out of memory:
            if not is_out_of_memory(error):  # left out, counted, rather than the epoch's end lost with the run
                raise
            log.warning("validation: out of memory on a batch of feats %s (%s, ...): left out",
                        tuple(batch["feats"].shape), batch["keys"][0])
            skipped += len(batch["keys"])
            continue
        total_loss += loss * len(batch["keys"])
        utterances += len(batch["keys"])
        for hyp, text in zip(hypotheses, batch["texts"]):
            errors.add(count_errors(text, tokenizer.text(hyp)))
    model.train(was_training)
    loss, utterances, skipped, hashes, *counts = sum_over_ranks(
        world, [float(total_loss), utterances, skipped, hashes, errors.substitutions, errors.deletions,
                errors.insertions, errors.reference_words])
    if not utterances:
        raise StopTraining(f"validation: {NO_USABLE_UTTERANCE}")
    result = {"loss": loss / utterances, "utterances": int(utterances),
              "dev_set": f"{int(utterances + skipped)}-{int(hashes):x}",
              **({"skipped_out_of_memory": int(skipped)} if skipped else {})}
    if wer:
        result["wer"] = ErrorCounts(*(int(c) for c in counts)).wer
    return result
