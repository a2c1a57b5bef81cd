"""Hotwords (contextual biasing): phrases a beam search favours, as sherpa-onnx's --hotwords-file does, from a
file as sherpa-onnx reads one (a phrase a line, optionally its own score after it: 'NEW YORK :3.0'). Each
phrase's units are a path in a trie with Aho-Corasick fallback links; a hypothesis's state is its node (and
bank), each unit that goes deeper adds its score (the phrase's, or the largest of the phrases that share the
unit's prefix), and one that breaks a partial match takes back what it had added (down to the longest suffix
that still begins a phrase), but what a phrase completed within it had earned. A completed phrase keeps its
bonus: matching starts again, or, where a longer phrase goes on from it (CENTRE in CENTRE AVE), the match goes
on with the completed phrase's bonus banked in the state, and the suffix a break falls back to holds all of the
banked phrase or none of it (no unit earns twice: with NEW YORK banked, NEW YORK CITY does not pay YORK again to
YORK CITY); a phrase left incomplete when the hypothesis ends is taken back. Letters and sounds match whole words
only (HotwordGraph's boundary). It is a rnnt.lm.fusion.Fusion, alone (searches without an LM) or over an LM's
fusion (the *_lm and *_lodr methods)."""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field

from rnnt.data.tokenizer import SPACE
from rnnt.counting import counted
from rnnt.datadir.table import kaldi_fields, left_out
from rnnt.lm.fusion import UNK


@dataclass
class Node:
    bonus: float = 0.0  # what the units of its path earn (word boundaries nothing)
    children: dict[int, int] = field(default_factory=dict)
    fail: int = 0  # the deepest node whose path is a proper suffix of this one's
    depth: int = 0  # the units of its path
    matched: int = 0  # the node of the longest phrase that ends this node's path (0: none)


class HotwordGraph:
    def __init__(self, phrases: list[list[int]], score: float, boundary: int | None = None,
                 scores: list[float | None] | None = None):
        """Each unit of a phrase earns `score`, or the phrase's own in `scores` (None: `score`). boundary: the unit
        between words where units spell words letter by letter or sound by sound (char and phone units' ▁): each
        phrase is then matched as whole words, a boundary before and after it (the hypothesis's start and end
        counting as boundaries), which earn nothing. Without one (BPE pieces carry the word start, word units are
        words) phrases are matched as they are."""
        self.boundary = boundary
        self.nodes = [Node()]
        own = scores or [None] * len(phrases)
        for units, phrase_score in zip(([boundary, *p, boundary] for p in phrases) if boundary is not None
                                        else phrases, own):
            unit_score, at = score if phrase_score is None else phrase_score, 0
            for unit in units:
                if unit not in self.nodes[at].children:
                    self.nodes[at].children[unit] = len(self.nodes)
                    self.nodes.append(Node(-1.0, depth=self.nodes[at].depth + 1))
                at = self.nodes[at].children[unit]
                node = self.nodes[at]  # the bonus of its own unit for now: summed along the paths below
                node.bonus = max(node.bonus, 0.0 if unit == boundary else unit_score)
            self.nodes[at].matched = at
        self._sum_bonuses()
        queue = deque(self.nodes[0].children.values())  # fallbacks breadth first: each from shallower ones
        while queue:
            node = self.nodes[queue.popleft()]
            for unit, child in node.children.items():
                back = node.fail
                while back and unit not in self.nodes[back].children:
                    back = self.nodes[back].fail
                fail = self.nodes[back].children.get(unit, 0)
                self.nodes[child].fail = fail if fail != child else 0
                self.nodes[child].matched = self.nodes[child].matched or self.nodes[self.nodes[child].fail].matched
                queue.append(child)
        self.first = self.nodes[0].children.get(boundary, 0) if boundary is not None else 0  # after a boundary

    def _sum_bonuses(self) -> None:
        """Each node's bonus from its own unit's to its whole path's (iteratively: paths are as long as phrases)."""
        stack = [0]
        while stack:
            node = self.nodes[stack.pop()]
            for child in node.children.values():
                self.nodes[child].bonus += node.bonus
                stack.append(child)

    def start(self) -> tuple[int, float, int, int]:
        """A hypothesis's state: its node; what a phrase completed within the match there has earned (banked: kept
        when the match breaks); and where in the node's path that phrase starts and ends (its first and last
        unit's depth; 0, 0: none banked). It starts at a word's start."""
        return self.first, 0.0, 0, 0

    def step(self, state: tuple[int, float, int, int], unit: int) -> tuple[float, tuple[int, float, int, int]]:
        """The score a unit adds after `state`, and the state after it. A match the unit breaks falls back to the
        longest suffix that begins a phrase and holds all of the banked phrase, which goes on banked, or none of
        it (its last unit a boundary, which earns nothing, shared), which keeps the bank and takes back the rest.
        A completed phrase keeps its bonus (at least its bank's): matching starts again, or goes on banking it
        where a longer phrase can follow."""
        at, banked, first, last = state
        base = self.nodes[at].bonus  # what the match has added so far
        to = self.nodes[at].children.get(unit)
        if to is None:  # broken
            to = self._fallback(at, unit, first, last)
            cut = self.nodes[at].depth + 1 - self.nodes[to].depth  # the units it leaves behind
            if first > cut:  # the bank's phrase within the new match: the match goes on from the suffix
                first, last = first - cut, last - cut
            else:  # the bank kept, the rest taken back, a new match
                base, banked, first, last = base - banked, 0.0, 0, 0
        added, matched = self.nodes[to].bonus - base, self.nodes[to].matched
        if matched and self.nodes[matched].bonus > banked:
            last = self.nodes[to].depth
            banked, first = self.nodes[matched].bonus, last - self.nodes[matched].depth + 1
        if not matched or self.nodes[to].children:
            return added, (to, banked, first, last)
        return added + banked - self.nodes[to].bonus, (self.first if unit == self.boundary else 0, 0.0, 0, 0)

    def _fallback(self, at: int, unit: int, first: int, last: int) -> int:
        """The node of the longest proper suffix of `at`'s path, `unit` after it, that begins a phrase and holds all
        or none of the banked phrase at depths `first` to `last` (0: none banked; its last unit a boundary that
        may be shared); the root where none is."""
        ends = self.nodes[at].depth + 1  # the depth of `unit` in at's path
        after = ends - last + (self.boundary is not None)  # the longest suffix that holds none of the phrase
        back = self.nodes[at].fail
        while True:
            child = self.nodes[back].children.get(unit)
            if child is not None and (not last or not after < self.nodes[child].depth <= ends - first):
                return child
            if not back:
                return 0
            back = self.nodes[back].fail

    def end(self, state: tuple[int, float, int, int]) -> float:
        """What a hypothesis ending in `state` adds: its end is a boundary (which may complete a phrase), then
        what is left incomplete is taken back (but the bank)."""
        added = 0.0
        if self.boundary is not None:
            added, state = self.step(state, self.boundary)
        at, banked, *_ = state
        return added + banked - self.nodes[at].bonus


@dataclass
class HotwordFusion:
    """The Fusion of hotwords over an LM's (inner; None: hotwords alone): the state is the pair of theirs."""

    graph: HotwordGraph
    inner: object | None = None

    def start(self) -> tuple:
        return self.graph.start(), self.inner.start() if self.inner else None

    def allowed(self, state: tuple):
        return self.inner.allowed(state[1]) if self.inner else None

    def expansions(self, state: tuple, token: int) -> list[tuple[float, tuple]]:
        bonus, at = self.graph.step(state[0], token)
        if self.inner is None:
            return [(bonus, (at, None))]
        return [(score + bonus, (at, after)) for score, after in self.inner.expansions(state[1], token)]

    def finish(self, state: tuple) -> list[tuple[float, list[str] | None]]:
        taken_back = self.graph.end(state[0])
        return [(score + taken_back, words) for score, words in self.inner.finish(state[1])] if self.inner \
            else [(taken_back, None)]


MAX_PRONUNCIATIONS = 64  # of one phrase, its words' variants combined


def pronunciations(tokenizer, text: str) -> list[list[int]]:
    """A phrase in phone units, once for each combination of its words' pronunciations in the lexicon (up to
    MAX_PRONUNCIATIONS); a word it lacks is <unk>."""
    spellings: list[list[str]] = [[]]
    for word in kaldi_fields(text):
        variants = tokenizer.lexicon.get(word) or [(UNK,)]
        spellings = [done + ([SPACE] if done else []) + list(phones) for done in spellings for phones in variants]
        spellings = spellings[:MAX_PRONUNCIATIONS]
    return [[tokenizer.units.get(phone, tokenizer.units[UNK]) for phone in spelling] for spelling in spellings]


def hotword_graph(tokenizer, path: str, score: float) -> HotwordGraph:
    """The hotwords of a file (one phrase a line, its own ':score' after it or `score`) in the model's units; whole
    words of char and phone units (their ▁ between words the boundary). A line left out is named on standard error
    under the tool's name, and counted."""
    boundary = tokenizer.units.get(SPACE) if tokenizer.kind in ("char", "phone") else None
    skipped: list[str] = []
    phrases, lines = read_hotwords(path, tokenizer, skipped)
    for message in skipped:
        left_out(message, None)
    if skipped:
        left_out(f"{path}: {counted(lines, 'hotword')} kept, {len(skipped)} left out (named above)", None)
    return HotwordGraph([units for units, _ in phrases], score, boundary, [own for _, own in phrases])


def phrase_and_score(text: str, where: str) -> tuple[str, float | None]:
    """A hotwords line's phrase and its own score (None: the default), as sherpa-onnx reads them: the score a last
    word ':S', finite and not negative, ':0' the default as there. Stricter than sherpa-onnx, which skips a line of a
    score alone and takes the last of several: a ':' word but last, or a score alone, is a ValueError naming
    where."""
    words = kaldi_fields(text)
    if any(word.startswith(":") for word in words[:-1]):
        raise ValueError(f"{where}: '{text}': a phrase's score (':S') comes last on its line")
    if not words[-1].startswith(":"):
        return text, None
    try:
        score = float(words[-1][1:])
    except ValueError:
        score = float("nan")
    if not 0 <= score < float("inf"):
        raise ValueError(f"{where}: '{text}': the score '{words[-1]}' is not a finite number of at least 0")
    if len(words) == 1:
        raise ValueError(f"{where}: '{text}': a score and no phrase")
    return " ".join(words[:-1]), score or None


def hotword_lines(path: str, skipped: list[str]):
    """Each phrase line of a hotwords file (blank lines skipped): 'file:line', the line with single spaces, its phrase
    and its own score (phrase_and_score); a line that cannot be read (not UTF-8, a score out of place) is named in
    skipped instead, and the rest read on."""
    with open(path, "rb") as f:
        for number, raw in enumerate(f, 1):
            where = f"{path}:{number}"
            try:
                line = raw.decode("utf-8-sig" if number == 1 else "utf-8")  # a BOM (Notepad's) is no text
            except UnicodeDecodeError:  # a list saved in another encoding (cp1252's é)
                skipped.append(f"{where}: not UTF-8 (save the file as UTF-8); left out")
                continue
            if words := kaldi_fields(line):
                text = " ".join(words)
                try:
                    yield (where, text, *phrase_and_score(text, where))
                except ValueError as error:
                    skipped.append(f"{error}; left out")


def read_hotwords(path: str, tokenizer, skipped: list[str]) -> tuple[list[tuple[list[int], float | None]], int]:
    """The phrases of a hotwords file (one a line, as the transcripts are written, its own score after it as
    sherpa-onnx reads one: 'NEW YORK :3'; blank lines skipped) as the model's units, each with its own score (None:
    the default), and the number of lines they came from; a phone model's phrase once for each pronunciation the
    lexicon gives (a word spelt like a more common one is written as that one all the same, as any phone model's
    output is). A phrase the units cannot spell (a word the phone lexicon lacks, a unit the model has not) or a line
    that cannot be read is named in skipped, by its line, and the rest kept (decode_sherpa_onnx.py's hotwords do
    so too); none kept is a ValueError."""
    phrases, lines = [], 0
    for where, _, text, score in hotword_lines(path, skipped):
        spellings = pronunciations(tokenizer, text) if tokenizer.kind == "phone" else [tokenizer.encode(text)]
        if any(tokenizer.units[UNK] in units for units in spellings):
            skipped.append(f"{where}: '{text}' holds what the model's units cannot spell (" + (
                "a word its lexicon lacks" if tokenizer.kind == "phone" else "<unk>") + "); left out")
            continue
        phrases += [(units, score) for units in spellings]
        lines += 1
    if not phrases:
        raise ValueError(f"{path}: no hotword in it (one phrase a line)" + (
            f"; its {counted(len(skipped), 'line')} left out:\n  " + "\n  ".join(skipped) if skipped else ""))
    return phrases, lines
