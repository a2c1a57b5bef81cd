"""Word edit distances as Kaldi counts and aligns them, tie for tie: compute-wer's counts of insertions,
deletions and substitutions (LevenshteinEditDistance, src/util/edit-distance-inl.h), and align-text's
alignment behind the per-utterance details (LevenshteinAlignment). Both find a minimum edit script; where
several exist they pick differently (Kaldi's own WER line and its per-utterance details can split the
same total otherwise), and each is followed here as Kaldi follows it.
"""

from __future__ import annotations


def error_counts(reference: list[str], hypothesis: list[str]) -> tuple[int, int, int]:
    """(insertions, deletions, substitutions) as compute-wer counts them: along the hypothesis, a substitution
    (or match) where strictly cheaper than both others, else a deletion where strictly cheaper than an
    insertion, else an insertion."""
    # previous[r]: (cost, ins, del, sub) of aligning the hypothesis so far with reference[:r]
    previous = [(r, 0, r, 0) for r in range(len(reference) + 1)]
    for word in hypothesis:
        cost, ins, dels, sub = previous[0]
        current = [(cost + 1, ins + 1, dels, sub)]
        for r, ref_word in enumerate(reference, 1):
            ins_cost = previous[r][0] + 1
            del_cost = current[r - 1][0] + 1
            sub_cost = previous[r - 1][0] + (word != ref_word)
            if sub_cost < ins_cost and sub_cost < del_cost:
                cost, ins, dels, sub = previous[r - 1]
                current.append((sub_cost, ins, dels, sub + (word != ref_word)))
            elif del_cost < ins_cost:
                cost, ins, dels, sub = current[r - 1]
                current.append((del_cost, ins, dels + 1, sub))
            else:
                cost, ins, dels, sub = previous[r]
                current.append((ins_cost, ins + 1, dels, sub))
        previous = current
    return previous[-1][1], previous[-1][2], previous[-1][3]


DIAGONAL, UP, LEFT = 0, 1, 2  # a match or substitution, a deletion, an insertion


def alignment(reference: list[str], hypothesis: list[str]) -> list[tuple[str | None, str | None]]:
    """(reference word or None, hypothesis word or None) pairs as align-text aligns them: the edit-distance
    table traced back from the end, a match or substitution preferred on ties, then a deletion. The table
    keeps a byte a cell, the step the trace takes from it (a two-hour reference against its hypothesis: some
    GB as Python integers), and two rows of costs."""
    rows, cols = len(reference), len(hypothesis)
    steps = bytearray(LEFT for _ in range(cols + 1)) * (rows + 1)  # row 0 goes left; column 0 goes up
    previous = list(range(cols + 1))
    for m in range(1, rows + 1):
        current = [m]
        steps[m * (cols + 1)] = UP
        for n in range(1, cols + 1):
            diagonal = previous[n - 1] + (reference[m - 1] != hypothesis[n - 1])
            up, left = previous[n] + 1, current[n - 1] + 1
            current.append(min(diagonal, up, left))
            steps[m * (cols + 1) + n] = DIAGONAL if diagonal <= min(up, left) else UP if up <= left else LEFT
        previous = current
    pairs: list[tuple[str | None, str | None]] = []
    m, n = rows, cols
    while m or n:
        step = steps[m * (cols + 1) + n]
        if step == DIAGONAL:
            m, n = m - 1, n - 1
            pairs.append((reference[m], hypothesis[n]))
        elif step == UP:
            m -= 1
            pairs.append((reference[m], None))
        else:
            n -= 1
            pairs.append((None, hypothesis[n]))
    return pairs[::-1]
