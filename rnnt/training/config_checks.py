"""Checks of an experiment's config that need no data: what must agree between its sections, each problem
named by its keys with the fix, so that a mistake stops before training instead of as a traceback in it.

check_shapes: the features the pipeline makes against what the encoder reads.
check_unit_rate: with one symbol per frame, the encoder's frame rate against the units' rate in the
training transcripts (<lang>/unit_rate.json, written by steps/build_units.py from the data dir's utt2dur).
device_refusal: train.device and train.precision against this machine.
patience_refusal: train.patience without a dev list.
training_refusals: what steps/train.py refuses before it builds the model (the three above).
"""

from __future__ import annotations

import json
import math
import os

from rnnt.data.fbank_presets import PRESETS

UNIT_RATE_FILE = "unit_rate.json"
MAX_SHARE_DROPPED = 0.01  # more training utterances than this too fast for one symbol per frame: refused


def check_shapes(experiment) -> list[str]:
    """Problems between data and model.encoder (empty: none)."""
    data, encoder = experiment.data, experiment.model.encoder
    problems = []
    feature_dim = data.features.num_mel_bins * data.stack
    if encoder.input_dim != feature_dim:
        problems.append(
            f"model.encoder.input_dim is {encoder.input_dim}, but a frame the pipeline makes has data.features."
            f"num_mel_bins {data.features.num_mel_bins} x data.stack {data.stack} = {feature_dim} features: set "
            f"model.encoder.input_dim: {feature_dim} (or change num_mel_bins or stack to match)")
    problems += encoder.problems()
    if data.subsample < 1 or data.stack < 1:
        problems.append("data.stack and data.subsample must each be at least 1")
    return problems


def frame_ms(experiment) -> float:
    """Milliseconds of audio per encoder output frame: the fbank shift times every reduction after it."""
    data, encoder = experiment.data, experiment.model.encoder
    return PRESETS[data.features.preset].shift_ms * data.subsample * encoder.time_reduction


def reductions(experiment) -> str:
    data = experiment.data
    return (f"{PRESETS[data.features.preset].shift_ms:g} ms features x data.subsample {data.subsample} x "
            f"{experiment.model.encoder.time_reduction_text}")


def check_unit_rate(experiment) -> list[str]:
    """With model.loss.one_sym_per_frame, the share of training transcripts with more units a second than
    the encoder has frames (after the fastest speed perturbation) must be at most MAX_SHARE_DROPPED."""
    path = os.path.join(experiment.paths.lang_dir, UNIT_RATE_FILE)
    if not experiment.model.loss.one_sym_per_frame or not os.path.isfile(path):
        return []
    try:
        with open(path, encoding="utf-8") as f:
            rates = json.load(f)["units_per_second"]
        if not isinstance(rates, list) or not all(isinstance(r, (int, float)) and not isinstance(r, bool)
                                                  for r in rates):
            raise ValueError("units_per_second is not a list of numbers")
    except (OSError, ValueError, KeyError, TypeError) as error:  # cut short, or damaged by hand
        return [f"{path}: not the units a second of the training transcripts ({type(error).__name__}: {error}); "
                "write it again with steps/build_units.py"]
    rates = sorted(rates)
    if not rates:
        return []
    speed = max(experiment.data.speed_perturb or (1.0,))
    frames_per_second = 1000.0 / frame_ms(experiment)
    too_fast = sum(rate * speed > frames_per_second for rate in rates)
    if too_fast <= MAX_SHARE_DROPPED * len(rates):
        return []
    sped = f" at data.speed_perturb {speed:g}" if speed != 1.0 else ""
    longest_ms = 1000.0 / (rates[len(rates) - int(MAX_SHARE_DROPPED * len(rates)) - 1] * speed)  # all but the share
    return [f"model.loss.one_sym_per_frame: the encoder has {frames_per_second:.1f} frames a second "
            f"({reductions(experiment)} = {frame_ms(experiment):g} ms a frame), but {too_fast} of {len(rates)} "
            f"training transcripts ({100 * too_fast / len(rates):.0f}%) have more units a second{sped} (median "
            f"{rates[len(rates) // 2]:.1f}, max {rates[-1]:.1f}; {path}): they could not be trained on. A frame of "
            f"at most {longest_ms:.0f} ms holds them (the time reduction divided by "
            f"{math.ceil(frame_ms(experiment) / longest_ms)} or more): lower data.subsample or the encoder's "
            "(model.encoder.stack_time or conv_layers), use larger units (bpe), or set "
            "model.loss.one_sym_per_frame: false"]


def device_refusal(experiment) -> str | None:
    """Why the experiment cannot train on its device here (train.device, train.precision), or None."""
    import torch  # here: steps/build_units.py reads this module without torch

    from rnnt.devices import auto_device, cuda_missing

    device = experiment.train.device
    if device == "cuda" and not torch.cuda.is_available():
        return f"train.device cuda: {cuda_missing()}; use auto or cpu"
    on_cuda = auto_device(device) == "cuda"
    if experiment.train.precision == "fp16" and not on_cuda:
        return ("train.precision fp16 needs a CUDA device (the CPU's LSTM kernels have no float16); on the CPU use "
                "precision: bf16")
    return None


def patience_refusal(experiment) -> str | None:
    """train.patience without a dev list to count its epochs on."""
    if experiment.train.patience and not experiment.paths.valid_list:
        return (f"train.patience {experiment.train.patience} ends training after epochs without a better dev "
                "result: give a dev list (--valid-list, paths.valid_list) or set it to 0")
    return None


def training_refusals(experiment) -> list[str]:
    """Why steps/train.py refuses the experiment before building its model (empty: it does not): the device and
    precision here, the frame rate against the transcripts' units a second, early stopping without a dev list.
    (The trainer refuses bf16 LSTMs a CPU cannot run once it has the model: rnnt.cpu_isa.bf16_refusal.)"""
    refusals = (device_refusal(experiment), *check_unit_rate(experiment), patience_refusal(experiment))
    return [refusal for refusal in refusals if refusal]
