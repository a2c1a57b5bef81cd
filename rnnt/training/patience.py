"""Early stopping: training ends once the dev set has not improved for train.patience epochs (ESPnet's
patience): the dev WER where validation decodes (train.valid_wer), else the dev loss. The best epoch so far
is kept in every checkpoint, so a resumed run counts on from it, unless it validates on another dev set (the list
edited, or another --valid-list: validation's dev_set, a digest of its utterances' keys and transcripts), whose
results are not comparable with the best's: that one's first result is the best then."""

from __future__ import annotations

import logging
import math
from dataclasses import asdict, dataclass


@dataclass
class Best:
    epoch: int  # counted from 1, as epoch-N.pt
    metric: str  # valid_wer or valid_loss
    value: float
    dev_set: str = ""  # validation's digest of the dev set ("": kept before 12-02, taken to be any)


log = logging.getLogger("rnnt.train")


class Patience:
    def __init__(self, patience: int, use_wer: bool):
        self.patience, self.metric = patience, "valid_wer" if use_wer else "valid_loss"
        self.best: Best | None = None

    def validated(self, epoch: int, result: dict) -> None:
        """Takes epoch's validation result ({'valid_loss', 'valid_wer'?, 'valid_dev_set'?}); a better value is the
        new best. A best of another metric (train.valid_wer changed on a resume) or of another dev set counts from
        this epoch on; a value that is not finite is none (a NaN best, as a checkpoint from before may hold, is
        bettered by any)."""
        value, dev_set = result.get(self.metric), result.get("valid_dev_set", "")
        if value is None or not math.isfinite(value):  # no better than any: a NaN best was never bettered
            return
        other_set = self.best is not None and "" not in (dev_set, self.best.dev_set) and dev_set != self.best.dev_set
        if other_set:
            log.warning("the dev set is not the one epoch %d's best (%.4g) was validated on: the best counts from "
                        "epoch %d's result on it", self.best.epoch, self.best.value, epoch)
        if self.best is None or self.best.metric != self.metric or other_set or not value >= self.best.value:
            self.best = Best(epoch, self.metric, float(value), dev_set)

    def ends(self, epoch: int) -> bool:
        """Whether training ends after epoch: patience epochs since the best."""
        return (bool(self.patience) and self.best is not None and self.best.metric == self.metric
                and epoch - self.best.epoch >= self.patience)

    def why(self, epoch: int) -> str:
        wer = self.best.metric == "valid_wer"
        return (f"no better {'dev WER' if wer else 'dev loss'} in the {epoch - self.best.epoch} epochs since epoch "
                f"{self.best.epoch} ({self.best.value:.4g}{'%' if wer else ''}): training ends (train.patience "
                f"{self.patience})")

    def meta(self) -> dict:
        return {"best_valid": asdict(self.best)} if self.best else {}

    def load_meta(self, meta: dict) -> None:
        self.best = Best(**meta["best_valid"]) if meta.get("best_valid") else None
