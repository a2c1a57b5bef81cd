"""The error that ends a training run with a message (no traceback): what went wrong and what to do."""


class StopTraining(RuntimeError):
    """Training cannot go on; the message says why and what to do."""
