"""Validation: mean loss and greedy-search WER over a data list (CTC greedy search for a CTC model); under
torchrun each rank decodes its part of the list and the sums are added over the ranks."""

from __future__ import annotations

import dataclasses

import torch

from rnnt.data.config import FilterConfig
from rnnt.data.pipeline import Pipeline
from rnnt.scoring import ErrorCounts, count_errors
from rnnt.ctc_search import ctc_greedy_search
from rnnt.search import greedy_search
from rnnt.training.distributed import World, sum_over_ranks
from rnnt.training.stop import StopTraining


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


@torch.no_grad()
def validate(model, batches, tokenizer, device: torch.device, wer: bool = True, world: World = World()
             ) -> dict[str, float]:
    """batches: this rank's part of the list (all of it in a world of one); every rank calls this together."""
    was_training = model.training
    model.eval()
    total_loss, utterances = torch.zeros((), dtype=torch.float64, device=device), 0
    errors = ErrorCounts()
    for batch in batches:
        feats, feat_lens = batch["feats"].to(device), batch["feat_lens"].to(device)
        tokens, token_lens = batch["tokens"].to(device), batch["token_lens"].to(device)
        n = len(batch["keys"])
        enc, enc_lens = model.encode(feats, feat_lens)  # once, for the loss and for the search
        total_loss += model.loss(enc, enc_lens, tokens, token_lens)["loss"].double() * n
        utterances += n
        if wer:
            search = greedy_search if model.is_transducer else ctc_greedy_search
            for hyp, text in zip(search(model, enc, enc_lens), batch["texts"]):
                errors.add(count_errors(text, tokenizer.text(hyp)))
    model.train(was_training)
    loss, utterances, *counts = sum_over_ranks(world, [float(total_loss), utterances, errors.substitutions,
                                                       errors.deletions, errors.insertions, errors.reference_words])
    if not utterances:
        raise StopTraining(f"validation: {NO_USABLE_UTTERANCE}")
    result = {"loss": loss / utterances, "utterances": int(utterances)}
    if wer:
        result["wer"] = ErrorCounts(*(int(c) for c in counts)).wer
    return result
