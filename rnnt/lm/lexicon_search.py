"""A word n-gram LM in CTC prefix beam search, through a lexicon: hypotheses may only spell words of the
LM's vocabulary, unit by unit, and the LM scores each word when the word boundary (SPACE) or the end
of the utterance completes it. Units are characters (a word is its spelling) or phones (a word is any
of its pronunciations in the lang dir's lexicon.txt; homophones branch into one hypothesis each).

The units of a word are walked in a prefix tree of every word's units. Each node carries the best
unigram log-probability of the words below it, and a hypothesis is scored with it as it enters the
node (LM look-ahead), so that partly spelt words compete fairly with whole ones; completing a word
swaps the look-ahead for the word's n-gram log-probability. Per word: weight * (that) + length_bonus.
A hypothesis's state is (the words so far, as an rnnt.label_path.LabelPath: a word added, or the state
hashed, costs the same after a thousand words as after one; its tree node); the searches key their beams by
labels and state.
"""

from __future__ import annotations

import math
import os
import sys

from rnnt.data.tokenizer import SPACE, UNK
from rnnt.label_path import LabelPath
from rnnt.lm.fusion import LN10, NgramScorer
from rnnt.lm.kneser_ney import BOS, EOS

WordState = tuple[LabelPath, int]  # (the words so far, the prefix-tree node of the word being spelt)


class LexiconTree:
    """A prefix tree over the unit-id sequences of words; node 0 is the root."""

    def __init__(self, spellings: dict[str, list[tuple[int, ...]]], unigram_log10):
        self.children: list[dict[int, int]] = [{}]
        self.words: list[list[str]] = [[]]  # the words whose units end at each node
        for word, variants in spellings.items():
            for units in variants:
                node = 0
                for unit in units:
                    if unit not in self.children[node]:
                        self.children[node][unit] = len(self.children)
                        self.children.append({})
                        self.words.append([])
                    node = self.children[node][unit]
                self.words[node].append(word)
        self.best = [-math.inf] * len(self.children)  # look-ahead: the best unigram below each node
        for node in range(len(self.children) - 1, -1, -1):  # children are numbered after their parents
            below = [self.best[child] for child in self.children[node].values()]
            self.best[node] = max(below + [unigram_log10(word) for word in self.words[node]])
        self.best[0] = 0.0  # a word's look-ahead starts with its first unit, and its total is its own score


class WordLexiconFusion:
    """Shallow fusion of a word LM through a lexicon, for rnnt.ctc_search.ctc_prefix_beam_search."""

    def __init__(self, lm: NgramScorer, tree: LexiconTree, space: int, weight: float = 0.5,
                 length_bonus: float = 0.0):
        self.lm, self.tree, self.space = lm, tree, space
        self.weight, self.length_bonus = weight, length_bonus
        # at each node: the units that go on spelling a word, and the word boundary where a word ends
        self.next_units = [frozenset(children) | ({space} if words else set())
                           for children, words in zip(tree.children, tree.words)]

    def start(self) -> WordState:
        return LabelPath(), 0

    def allowed(self, state: WordState) -> frozenset[int]:
        return self.next_units[state[1]]

    def _history(self, words: LabelPath) -> tuple[str, ...]:
        if self.lm.order == 1:
            return ()
        history = words.last(self.lm.order - 1)
        return history if len(history) == self.lm.order - 1 else (BOS,) + history

    def _complete(self, words: LabelPath, node: int) -> list[tuple[float, LabelPath]]:
        """Each word that ends at node: the score that completing it adds, and the words after it."""
        history = self._history(words)
        return [(self.weight * LN10 * (self.lm.log10_prob(history, word) - self.tree.best[node]) + self.length_bonus,
                 words.extended(word)) for word in self.tree.words[node]]

    def expansions(self, state: WordState, token: int) -> list[tuple[float, WordState]]:
        """The states a unit can lead to from `state`, each with the score it adds; none if no word goes on so."""
        words, node = state
        if token == self.space:
            return [(score, (after, 0)) for score, after in self._complete(words, node)]
        child = self.tree.children[node].get(token)
        if child is None:
            return []
        return [(self.weight * LN10 * (self.tree.best[child] - self.tree.best[node]), (words, child))]

    def finish(self, state: WordState) -> list[tuple[float, list[str]]]:
        """The score that ending the utterance in `state` adds (the last word completed, then </s>), with
        the words; none if it ends inside a word or after a word boundary (no transcript ends in one)."""
        words, node = state
        if node == 0 and words:
            return []
        endings = [(0.0, words)] if node == 0 else self._complete(words, node)
        return [(score + self.weight * LN10 * self.lm.log10_prob(self._history(after), EOS), after.tokens())
                for score, after in endings]


def word_spellings(tokenizer, words) -> dict[str, list[tuple[int, ...]]]:
    """Each word's unit-id sequences: its pronunciations for phone units, its spelling for characters;
    words the units cannot spell (a character or a pronunciation missing) are left out."""
    if tokenizer.kind not in ("char", "phone"):
        raise ValueError(f"a word LM needs character or phone units with a word boundary, not '{tokenizer.kind}' "
                         "(an LM over the units themselves fits any: run.sh --lm-over units)")
    if SPACE not in tokenizer.units:  # a corpus of one word an utterance: no transcript held a space
        raise ValueError(f"a word LM needs a word boundary among the units ({SPACE}): these {tokenizer.kind} units "
                         "have none, as no training transcript holds two words (an LM over the units themselves "
                         "needs none: run.sh --lm-over units)")
    unk = tokenizer.units[UNK]
    spellings = {}
    for word in words:
        if tokenizer.kind == "phone":
            variants = [tuple(tokenizer.units.get(p, unk) for p in phones)
                        for phones in tokenizer.lexicon.get(word, [])]
        else:
            variants = [tuple(tokenizer.encode(word))]
        variants = [units for units in variants if units and unk not in units]
        if variants:
            spellings[word] = variants
    return spellings


def load_word_fusion(model: dict, tokenizer, source: str, weight: float, length_bonus: float) -> WordLexiconFusion:
    """The fusion of a word LM (an ARPA model read by rnnt.lm.arpa) for a model with `tokenizer`'s units."""
    lm = NgramScorer(model, {}, source)  # (first: it reads the CMU toolkit's <UNK> as <unk>, which spells no word)
    vocabulary = [ngram[0] for ngram in lm.model if len(ngram) == 1 and ngram[0] not in (BOS, EOS, UNK)]
    units = sum(word in tokenizer.units for word in vocabulary)
    # the word boundary a word, or every word a unit: a words LM may hold letters (AN4's spelt words), not only them
    if SPACE in vocabulary or units == len(vocabulary):
        raise ValueError(f"{source}: {units} of the LM's {len(vocabulary)} words are the model's units: it is an LM "
                         "over the units; give it with --over units (steps/tune_lm_fusion.py, "
                         "steps/build_ngram_lm.py), not words")
    spellings = word_spellings(tokenizer, vocabulary)
    if not spellings:
        raise ValueError(f"{source}: none of the LM's {len(vocabulary)} words can be spelt in the model's units")
    if unspelt := [word for word in vocabulary if word not in spellings]:  # words the search can never give
        print(f"{os.path.basename(sys.argv[0])}: {source}: {len(unspelt)} of the LM's {len(vocabulary)} words have "
              f"no {'pronunciation in the lexicon' if tokenizer.kind == 'phone' else 'spelling in the units'}, and "
              f"the search never gives them: {' '.join(unspelt[:8])}{' ...' if len(unspelt) > 8 else ''}",
              file=sys.stderr)
    tree = LexiconTree(spellings, lambda word: lm.log10_prob((), word))
    return WordLexiconFusion(lm, tree, tokenizer.units[SPACE], weight, length_bonus)
