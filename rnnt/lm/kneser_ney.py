"""An n-gram language model estimated with interpolated Kneser-Ney smoothing (Chen and Goodman 1998,
one discount per order, D = n1 / (n1 + 2 n2)), in the backoff form an ARPA file holds.

Sentences are padded with <s> and </s>. The highest order counts n-grams; a lower order counts the
distinct words seen before each n-gram (its continuation count), except for n-grams that begin with
<s>, which nothing precedes: those keep their counts. For a history h and word w,

    p(w | h) = max(c(h w) - D, 0) / c(h .) + D * types(h .) / c(h .) * p(w | h minus its first word),

down to the unigrams, which interpolate with the uniform distribution over the vocabulary (every unit
the model has and </s>; never <s>). The interpolation weight D * types(h .) / c(h .) is h's backoff
weight: for a word never seen after h, p(w | h) = backoff(h) * p(w | shorter h), as ARPA readers compute.
"""

from __future__ import annotations

import math
from collections import Counter, defaultdict
from typing import Iterable

BOS, EOS = "<s>", "</s>"
IMPOSSIBLE = -99.0  # the log10 probability of what cannot happen (<s> as a word), as SRILM and KenLM write it
Ngram = tuple[str, ...]


def count_ngrams(sentences: Iterable[list[str]], order: int) -> list[Counter]:
    """counts[k][ngram]: how often each (k+1)-gram ending in a predicted word (never <s>) occurs."""
    counts = [Counter() for _ in range(order)]
    for words in sentences:
        padded = [BOS, *words, EOS]
        for end in range(1, len(padded)):
            for k in range(min(order, end + 1)):
                counts[k][tuple(padded[end - k:end + 1])] += 1
    return counts


def kneser_ney_counts(counts: list[Counter]) -> list[Counter]:
    """The counts KN estimates from: raw at the highest order and for n-grams that begin with <s>,
    continuation counts (distinct preceding words) for the rest."""
    adjusted = [Counter() for _ in counts]
    adjusted[-1] = Counter(counts[-1])
    for k in range(len(counts) - 2, -1, -1):
        for ngram in counts[k + 1]:  # each distinct (k+2)-gram is one more word seen before its suffix
            adjusted[k][ngram[1:]] += 1
        for ngram, count in counts[k].items():
            if ngram[0] == BOS:
                adjusted[k][ngram] = count
    return adjusted


def discount(adjusted: Counter) -> float:
    n1 = sum(1 for c in adjusted.values() if c == 1)
    n2 = sum(1 for c in adjusted.values() if c == 2)
    return n1 / (n1 + 2 * n2) if n1 and n2 else 0.5


def estimate(sentences: Iterable[list[str]], order: int, vocabulary: Iterable[str]) -> dict[Ngram, tuple[float, float]]:
    """{ngram: (log10 probability, log10 backoff weight)} for every order from 1 to `order`; unigrams for
    every word of `vocabulary` (seen or not), </s> and <s> (probability 0, written as -99)."""
    if order < 1:
        raise ValueError(f"order must be at least 1, got {order}")
    sentences = list(sentences)
    if any(word in (BOS, EOS) for words in sentences for word in words):
        raise ValueError(f"a sentence holds {BOS} or {EOS}: the estimate adds them to each sentence itself")
    adjusted = kneser_ney_counts(count_ngrams(sentences, order))
    words = sorted((set(vocabulary) | {w for (w,) in adjusted[0]} | {EOS}) - {BOS})
    probs: dict[Ngram, float] = {}
    backoffs: dict[Ngram, float] = {}
    for k, table in enumerate(adjusted):
        d = discount(table)
        totals: dict[Ngram, float] = defaultdict(float)
        types: dict[Ngram, int] = defaultdict(int)
        for ngram, count in table.items():
            totals[ngram[:-1]] += count
            types[ngram[:-1]] += 1
        for history in totals:
            backoffs[history] = d * types[history] / totals[history]
        if k == 0:
            for word in words:
                probs[(word,)] = max(table.get((word,), 0) - d, 0) / totals[()] + backoffs[()] / len(words)
            continue
        for ngram, count in table.items():
            probs[ngram] = (count - d) / totals[ngram[:-1]] + backoffs[ngram[:-1]] * probs[ngram[1:]]
    model = {ngram: (math.log10(p), 0.0) for ngram, p in probs.items()}
    model[(BOS,)] = (IMPOSSIBLE, 0.0)
    for history, weight in backoffs.items():
        if history and history in model:
            model[history] = (model[history][0], math.log10(weight))
    return model
