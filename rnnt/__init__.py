"""rnnt: RNN-Transducer speech recognition: data pipeline, model, loss, search, training."""

__version__ = "0.1.0"
