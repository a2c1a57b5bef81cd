"""The prediction network: the label history -> a vector per position u = 0..U.

Position u sees the blank (the start symbol) followed by the first u labels. One class per kind, each
with the same interface (forward for training; initial_state, step, select/merge/stack states for
the searches):
  lstm:      embedding -> LSTM layers (the MLPerf prediction network, with embed_dropout 0; its start
             symbol is a vector of zeros, here blank's embedding);
  stateless: embedding -> a causal depthwise convolution over the last `context` labels -> ReLU
             (no recurrent state: decoding needs only the last labels).
A new kind is a subclass registered in KINDS.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass

import torch

from rnnt.model.dropout import Dropout
from rnnt.model.value_checks import dropout_problems, size_problems


@dataclass(frozen=True)
class PredictorConfig:
    kind: str = "lstm"  # the prediction network: lstm or stateless (see the module docstring)
    embed_dim: int = 320  # label embedding width (stateless: also the output width)
    hidden: int = 320  # lstm: units of each LSTM layer, the output width
    layers: int = 2  # lstm: LSTM layers
    context: int = 2  # stateless: labels seen (the convolution's width)
    dropout: float = 0.1  # on the label embeddings (lstm: also between the layers and on the output)
    embed_dropout: float | None = None  # on the label embeddings, where it differs from dropout (the MLPerf
    # reference has none there: 0)

    def problems(self) -> list[str]:
        """The values no prediction network of its kind can be built with, each a sentence naming its key (a
        stateless one of context 0 built, then failed in its first convolution; 0 LSTM layers in torch's
        constructor)."""
        if self.kind not in KINDS:
            return [f"model.predictor.kind must be one of {sorted(KINDS)}, got '{self.kind}'"]
        kind_sizes = {"hidden": self.hidden, "layers": self.layers} if self.kind == "lstm" else \
            {"context": self.context}
        return size_problems("predictor", embed_dim=self.embed_dim, **kind_sizes) + \
            dropout_problems("predictor", dropout=self.dropout, embed_dropout=self.embed_dropout)


class Predictor(torch.nn.Module):
    """What every kind shares: the embedding of labels, the start symbol, dropout on the embeddings."""

    history = 1  # start symbols put before the labels in forward()

    def __init__(self, config: PredictorConfig, vocab_size: int, blank: int = 0):
        super().__init__()
        self.config, self.blank = config, blank
        self.embedding = torch.nn.Embedding(vocab_size, config.embed_dim)
        embed_dropout = config.dropout if config.embed_dropout is None else config.embed_dropout
        self.embed_dropout = Dropout(embed_dropout)

    @property
    def output_dim(self) -> int:
        raise NotImplementedError

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        """tokens (B, U) -> (B, U+1, output_dim); position 0 sees only the start symbol (blank), as in step()."""
        start = torch.full((tokens.shape[0], self.history), self.blank, dtype=tokens.dtype, device=tokens.device)
        return self.run(self.embed_dropout(self.embedding(torch.cat([start, tokens], dim=1))))

    def run(self, embedded: torch.Tensor) -> torch.Tensor:
        """(B, history + U, embed_dim) -> (B, U+1, output_dim)."""
        raise NotImplementedError

    def initial_state(self, batch: int, device: torch.device):
        raise NotImplementedError

    def step(self, tokens: torch.Tensor, state) -> tuple[torch.Tensor, object]:
        """One label per sequence: tokens (B,) and the state -> (B, output_dim) output and the new state."""
        raise NotImplementedError

    def select_state(self, state, index: torch.Tensor):
        """The states of the sequences at `index` (for beam search)."""
        raise NotImplementedError

    def merge_state(self, new, old, take_new: torch.Tensor):
        """Per sequence, the new state where take_new (B,) is true, else the old one."""
        raise NotImplementedError

    def stack_states(self, states: list):
        """One batched state from the states of single sequences."""
        raise NotImplementedError

    def unstack_states(self, state) -> list:
        """The state of each sequence of a batched state, as select_state gives one: views, no copies (each
        keeps its batch's tensor alive while it lives; the searches' batches are one frame's hypotheses)."""
        raise NotImplementedError


@contextlib.contextmanager
def one_step_lstm(device: torch.device):
    """Where an LSTM runs one step at a time: on the CPU, PyTorch's own kernel, not oneDNN's, which lays the
    weights out again at every call (a step of 8 x 320 units: 0.33 ms against 1.33; the searches step the
    prediction network once a frame or more). oneDNN is off for the process meanwhile (torch's switch is global;
    its flags() context also sets TF32, which warns of Intel GPUs on every exit)."""
    if device.type != "cpu":
        yield
        return
    was = torch.backends.mkldnn.enabled
    torch.backends.mkldnn.enabled = False
    try:
        yield
    finally:
        torch.backends.mkldnn.enabled = was


class LSTMPredictor(Predictor):
    """State: (h, c), each (layers, B, hidden)."""

    def __init__(self, config: PredictorConfig, vocab_size: int, blank: int = 0):
        super().__init__(config, vocab_size, blank)
        self.lstm = torch.nn.LSTM(config.embed_dim, config.hidden, config.layers, batch_first=True,
                                  dropout=config.dropout if config.layers > 1 else 0.0)
        self.dropout = Dropout(config.dropout)  # on the output

    @property
    def output_dim(self) -> int:
        return self.config.hidden

    def run(self, embedded: torch.Tensor) -> torch.Tensor:
        out, _ = self.lstm(embedded)
        return self.dropout(out)

    def initial_state(self, batch: int, device: torch.device):
        zeros = torch.zeros(self.config.layers, batch, self.config.hidden, device=device)
        return zeros, zeros.clone()

    def step(self, tokens: torch.Tensor, state) -> tuple[torch.Tensor, object]:
        embedded = self.embedding(tokens)[:, None, :]
        with one_step_lstm(embedded.device):
            out, state = self.lstm(embedded, state)
        return out[:, 0], state

    def select_state(self, state, index: torch.Tensor):
        return state[0][:, index], state[1][:, index]

    def merge_state(self, new, old, take_new: torch.Tensor):
        mask = take_new[None, :, None]
        return torch.where(mask, new[0], old[0]), torch.where(mask, new[1], old[1])

    def stack_states(self, states: list):
        return torch.cat([s[0] for s in states], dim=1), torch.cat([s[1] for s in states], dim=1)

    def unstack_states(self, state) -> list:
        return list(zip(state[0].split(1, dim=1), state[1].split(1, dim=1)))


class StatelessPredictor(Predictor):
    """State: the last `context` labels, (B, context)."""

    def __init__(self, config: PredictorConfig, vocab_size: int, blank: int = 0):
        super().__init__(config, vocab_size, blank)
        self.history = config.context
        self.conv = torch.nn.Conv1d(config.embed_dim, config.embed_dim, config.context, groups=config.embed_dim,
                                    bias=False)

    @property
    def output_dim(self) -> int:
        return self.config.embed_dim

    def run(self, embedded: torch.Tensor) -> torch.Tensor:
        return torch.relu(self.conv(embedded.transpose(1, 2))).transpose(1, 2)

    def initial_state(self, batch: int, device: torch.device):
        return torch.full((batch, self.config.context), self.blank, dtype=torch.long, device=device)

    def step(self, tokens: torch.Tensor, state) -> tuple[torch.Tensor, object]:
        history = torch.cat([state[:, 1:], tokens[:, None]], dim=1)
        return self.from_history(history), history

    def from_history(self, history: torch.Tensor) -> torch.Tensor:
        """The output after the last `context` labels (B, context), oldest first -> (B, output_dim)."""
        x = self.embedding(history).transpose(1, 2)  # (B, E, context)
        return torch.relu(self.conv(x))[:, :, 0]

    def select_state(self, state, index: torch.Tensor):
        return state[index]

    def merge_state(self, new, old, take_new: torch.Tensor):
        return torch.where(take_new[:, None], new, old)

    def stack_states(self, states: list):
        return torch.cat(states, dim=0)

    def unstack_states(self, state) -> list:
        return list(state.split(1))


KINDS = {"lstm": LSTMPredictor, "stateless": StatelessPredictor}


def build_predictor(config: PredictorConfig, vocab_size: int, blank: int = 0) -> Predictor:
    if problems := config.problems():
        raise ValueError("; ".join(problems))
    return KINDS[config.kind](config, vocab_size, blank)
