"""Hotwords (contextual biasing): phrases a beam search favours, as sherpa-onnx's --hotwords-file does. Each
phrase's units are a path in a trie with Aho-Corasick fallback links; a hypothesis's state is its node, each unit
that goes deeper adds `score`, and one that breaks a partial match takes back what it had added (down to the
longest suffix that still begins a phrase). A completed phrase keeps its bonus and matching starts again (a
phrase that ends inside a longer one's match ends that match: list the longer alone); a phrase left incomplete
when the hypothesis ends is taken back. Letters and sounds match whole words only (HotwordGraph's boundary).
It is a rnnt.lm.fusion.Fusion, alone (searches without an LM) or over an LM's fusion (the *_lm and *_lodr
methods)."""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field

from rnnt.data.tokenizer import SPACE
from rnnt.lm.fusion import UNK


@dataclass
class Node:
    weight: int = 0  # the units of its path that earn the score (all but word boundaries)
    children: dict[int, int] = field(default_factory=dict)
    fail: int = 0  # the deepest node whose path is a proper suffix of this one's
    matched: int = 0  # the weight of the longest phrase that ends this node's path (0: none)


class HotwordGraph:
    def __init__(self, phrases: list[list[int]], score: float, boundary: int | None = None):
        """boundary: the unit between words where units spell words letter by letter or sound by sound (char and
        phone units' ▁): each phrase is then matched as whole words, a boundary before and after it (the
        hypothesis's start and end counting as boundaries), which earn nothing. Without one (BPE pieces carry the
        word start, word units are words) phrases are matched as they are."""
        self.score, self.boundary = score, boundary
        self.nodes = [Node()]
        for units in ([boundary, *p, boundary] for p in phrases) if boundary is not None else phrases:
            at = 0
            for unit in units:
                if unit not in self.nodes[at].children:
                    self.nodes[at].children[unit] = len(self.nodes)
                    self.nodes.append(Node(self.nodes[at].weight + (unit != boundary)))
                at = self.nodes[at].children[unit]
            self.nodes[at].matched = self.nodes[at].weight
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

    def start(self) -> int:
        return self.first  # a hypothesis starts at a word's start

    def step(self, at: int, unit: int) -> tuple[float, int]:
        """The score a unit adds after node `at`, and the node after it: a completed phrase keeps its bonus (the
        units before it in a partial match of a longer one are taken back) and matching starts again."""
        to = at
        while to and unit not in self.nodes[to].children:
            to = self.nodes[to].fail
        to = self.nodes[to].children.get(unit, 0)
        if self.nodes[to].matched:
            return self.score * (self.nodes[to].matched - self.nodes[at].weight), \
                self.first if unit == self.boundary else 0
        return self.score * (self.nodes[to].weight - self.nodes[at].weight), to

    def end(self, at: int) -> float:
        """What a hypothesis ending at node `at` adds: its end is a boundary (which may complete a phrase), then
        what is left incomplete is taken back."""
        added = 0.0
        if self.boundary is not None:
            added, at = self.step(at, self.boundary)
        return added - self.score * self.nodes[at].weight


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
    for word in text.split():
        variants = tokenizer.lexicon.get(word) or [(UNK,)]
        spellings = [done + ([SPACE] if done else []) + list(phones) for done in spellings for phones in variants]
        spellings = spellings[:MAX_PRONUNCIATIONS]
    return [[tokenizer.units.get(phone, tokenizer.units[UNK]) for phone in spelling] for spelling in spellings]


def hotword_graph(tokenizer, path: str, score: float) -> HotwordGraph:
    """The hotwords of a file (one phrase a line) in the model's units, each unit of them worth score; whole words
    of char and phone units (their ▁ between words the boundary)."""
    boundary = tokenizer.units.get(SPACE) if tokenizer.kind in ("char", "phone") else None
    return HotwordGraph(read_hotwords(path, tokenizer), score, boundary)


def read_hotwords(path: str, tokenizer) -> list[list[int]]:
    """The phrases of a hotwords file (one a line, as the transcripts are written; blank lines skipped) as the
    model's units (phones: each pronunciation the lexicon gives; a word spelt like a more common one is written
    as that one all the same, as any phone model's output is); a phrase the units cannot spell (a word the phone
    lexicon lacks, a unit the model has not) is a ValueError naming its line."""
    phrases = []
    with open(path, encoding="utf-8") as f:
        for number, line in enumerate(f, 1):
            text = " ".join(line.split())
            if not text:
                continue
            spellings = pronunciations(tokenizer, text) if tokenizer.kind == "phone" else [tokenizer.encode(text)]
            if any(tokenizer.units[UNK] in units for units in spellings):
                raise ValueError(f"{path}:{number}: '{text}' holds what the model's units cannot spell (" + (
                    "a word its lexicon lacks" if tokenizer.kind == "phone" else "<unk>") + ")")
            phrases += spellings
    if not phrases:
        raise ValueError(f"{path}: no hotword in it (one phrase a line)")
    return phrases
