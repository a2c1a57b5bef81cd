"""The label sequences of the host-side searches (beam search, the LM-fused modified beam search, CTC prefix
beam search), kept so that a frame's work does not grow with the labels found so far.

A LabelPath is a label, the frame it was emitted at and the path it extends: extending one is a new node
pointing at its parent, so every hypothesis shares its prefix with the one it came from. Its length and a
polynomial hash of its labels are computed once, when the node is made, so paths are dict keys at no cost
per label. Two paths are equal when their labels are (frames aside: they are alignments of the same labels);
equality compares length and hash, then labels back to the first node the two share, a few steps where
one came from the other. Labels and frames are spelled out as lists once, when the search ends. A word LM's
state keeps its words so too (rnnt.lm.lexicon_search: the labels are words, with no frames).

A SearchHypothesis is one hypothesis of those searches on such a path: its score, the prediction network's
state and projected output (the state before its last label, and no output, until it is stepped), and an
LM-fused search's LM state.
"""

from __future__ import annotations

HASH_MODULUS = 2**61 - 1
HASH_BASE = 1_000_003


class LabelPath:
    __slots__ = ("parent", "token", "frame", "length", "hash")

    def __init__(self, parent: LabelPath | None = None, token=-1, frame: int = -1):
        """The empty path, or parent extended by token (a unit's id, or a word) at frame."""
        self.parent, self.token, self.frame = parent, token, frame
        if parent is None:
            self.length, self.hash = 0, 0
        else:
            self.length = parent.length + 1
            self.hash = (parent.hash * HASH_BASE + hash(token) + 1) % HASH_MODULUS

    def extended(self, token, frame: int = -1) -> LabelPath:
        return LabelPath(self, token, frame)

    def __len__(self) -> int:
        return self.length

    def __hash__(self) -> int:
        return self.hash

    def __eq__(self, other) -> bool:
        if self is other:
            return True
        if not isinstance(other, LabelPath):
            return NotImplemented
        if self.length != other.length or self.hash != other.hash:
            return False
        mine, theirs = self, other
        while mine is not theirs:  # back to the node both share (None, past the first label, at worst)
            if mine.token != theirs.token:
                return False
            mine, theirs = mine.parent, theirs.parent
        return True

    def tokens(self) -> list:
        return [node.token for node in self._nodes()]

    def last(self, n: int) -> tuple:
        """The last n labels (fewer if the path is shorter), the earliest first."""
        labels, node = [], self
        while node.length and len(labels) < n:
            labels.append(node.token)
            node = node.parent
        return tuple(labels[::-1])

    def frames(self) -> list[int]:
        return [node.frame for node in self._nodes()]

    def _nodes(self) -> list[LabelPath]:
        """The path's nodes, first label first."""
        nodes, node = [], self
        while node.length:
            nodes.append(node)
            node = node.parent
        return nodes[::-1]

    def __repr__(self) -> str:
        return f"LabelPath({self.tokens()})"


class SearchHypothesis:
    __slots__ = ("path", "score", "state", "pred_proj", "lm_state")

    def __init__(self, path: LabelPath, score: float, state=None, pred_proj=None, lm_state=None):
        self.path, self.score, self.state, self.pred_proj, self.lm_state = path, score, state, pred_proj, lm_state

    @property
    def key(self) -> tuple:
        """What makes two hypotheses one: their labels and, in an LM-fused search, their LM state (a word
        LM's homophones stay apart)."""
        return self.path, self.lm_state

    def with_score(self, score: float) -> SearchHypothesis:
        return SearchHypothesis(self.path, score, self.state, self.pred_proj, self.lm_state)

    def extended(self, path: LabelPath, score: float, lm_state) -> SearchHypothesis:
        """The hypothesis on path (this one's extended by a label) with its state before that label."""
        return SearchHypothesis(path, score, self.state, None, lm_state)
