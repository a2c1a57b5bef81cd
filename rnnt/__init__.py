"""rnnt: RNN-Transducer speech recognition: data pipeline, model, loss, search, training."""

__version__ = "0.1.0"

import os

from rnnt.cpu_isa import avoid_unusable_amx

avoid_unusable_amx()  # before any oneDNN call in this process
# oneDNN keeps a compiled kernel for every input shape it has seen, up to 1024 of them: each batch padded to its own
# length is a new one (0.3 MB each for an LSTM of 16 units, 2-5 MB for 1024; +680 MB over 2000 lengths of a small
# transducer's training step). 32 of them: +57 MB there, the step's time unchanged. Read at oneDNN's first call.
if "DNNL_PRIMITIVE_CACHE_CAPACITY" not in os.environ:  # oneDNN's older name for it, read after this one
    os.environ.setdefault("ONEDNN_PRIMITIVE_CACHE_CAPACITY", "32")
