"""Small random CTC models, and the exact probability of a label sequence under them (torch's CTC loss):
the references the CTC searches are checked against."""

import torch

from rnnt.model.lstm_encoder import LSTMEncoderConfig
from rnnt.model.transducer import LossConfig, ModelConfig, Transducer


def ctc_model(seed: int, vocab_size: int = 3) -> Transducer:
    torch.manual_seed(seed)
    config = ModelConfig(encoder=LSTMEncoderConfig(input_dim=4, hidden=6, pre_layers=1, post_layers=0, stack_time=1),
                         loss=LossConfig(ctc_weight=0.5))
    model = Transducer(config, vocab_size).eval()
    with torch.no_grad():
        model.ctc.weight.mul_(4.0)  # peaky, as trained CTC heads are
    return model


def sequence_log_prob(model, enc: torch.Tensor, tokens: list[int]) -> float:
    """log P(tokens) over every CTC path, by torch's own CTC loss."""
    with torch.no_grad():
        log_probs = torch.log_softmax(model.ctc(enc).double(), dim=-1)[:, None]
    target = torch.tensor([tokens or [0]], dtype=torch.long)
    return -float(torch.nn.functional.ctc_loss(log_probs, target, torch.tensor([enc.shape[0]]),
                                               torch.tensor([len(tokens)]), reduction="sum"))
