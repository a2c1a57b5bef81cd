"""rnnt: RNN-Transducer speech recognition: data pipeline, model, loss, search, training."""

__version__ = "0.1.0"

from rnnt.cpu_isa import avoid_unusable_amx

avoid_unusable_amx()  # before any oneDNN call in this process
