"""Validation: mean loss and greedy-search WER over a data list (CTC greedy search for a CTC model)."""

from __future__ import annotations

import torch

from rnnt.scoring import ErrorCounts, count_errors
from rnnt.ctc_search import ctc_greedy_search
from rnnt.search import greedy_search


@torch.no_grad()
def validate(model, batches, tokenizer, device: torch.device, wer: bool = True) -> dict[str, float]:
    was_training = model.training
    model.eval()
    total_loss, utterances = 0.0, 0
    errors = ErrorCounts()
    for batch in batches:
        feats, feat_lens = batch["feats"].to(device), batch["feat_lens"].to(device)
        tokens, token_lens = batch["tokens"].to(device), batch["token_lens"].to(device)
        n = len(batch["keys"])
        enc, enc_lens = model.encode(feats, feat_lens)  # once, for the loss and for the search
        total_loss += float(model.loss(enc, enc_lens, tokens, token_lens)["loss"]) * n
        utterances += n
        if wer:
            search = greedy_search if model.is_transducer else ctc_greedy_search
            for hyp, text in zip(search(model, enc, enc_lens), batch["texts"]):
                errors.add(count_errors(text, tokenizer.text(hyp)))
    model.train(was_training)
    result = {"loss": total_loss / max(utterances, 1), "utterances": utterances}
    if wer:
        result["wer"] = errors.wer
    return result
