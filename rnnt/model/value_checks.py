"""Checks of a model config's values that every part shares, each problem a sentence naming its key: a size
that must be at least 1 (0 built a layer of nothing: a joiner whose logits were its output bias whatever its
input, trained without a word), or at least 0 for a count of layers, and a dropout rate that must lie in [0, 1)."""

from __future__ import annotations


def size_problems(section: str, minimum: int = 1, **sizes: int) -> list[str]:
    """Each of `sizes` under `minimum` (layer counts may be 0: a part of no layers passes its input through)."""
    return [f"model.{section}.{key} must be at least {minimum}, got {value}"
            for key, value in sizes.items() if value < minimum]


def dropout_problems(section: str, **rates: float | None) -> list[str]:
    return [f"model.{section}.{key} is a dropout rate, from 0 up to (not including) 1, got {value}"
            for key, value in rates.items() if value is not None and not 0 <= value < 1]
