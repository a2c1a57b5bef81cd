"""Start a training run from another experiment's weights (a model pretrained on another corpus).

train.init_from names a checkpoint (epoch-N.pt, avg-N.pt) inside that experiment's dir. Tensors of the
same name and shape are copied (its EMA weights when it kept them). The tensors with a row per unit
(the output layers, the prediction network's embedding) are copied row by row, by unit name, from the
units of its lang/ to this run's: a unit this run has and that one lacks keeps its initialisation, so
a model over AN4's 35 phones starts one over speechocean762's 41. Nothing else is taken: optimiser,
schedule and data position start afresh.
"""

from __future__ import annotations

import logging
import os

import torch

from rnnt.data.tokenizer import lang_unit_type, read_units
from rnnt.training import checkpoint

log = logging.getLogger("rnnt.train")


def unit_tensor_names(model) -> set[str]:
    """Names of the tensors with a row per unit (Transducer.unit_layers)."""
    return {f"{name}.{tensor}" for name, layer in model.unit_layers().items()
            for tensor, _ in layer.named_parameters(recurse=False)}


def initialise_from(model, path: str, units: dict[str, int], unit_type: str = "") -> str:
    """Copies what fits of the checkpoint at path into model (in place); returns a one-line summary.
    units: this run's unit inventory; unit_type (its units.json type), to warn when the other's differs."""
    lang = os.path.join(os.path.dirname(os.path.abspath(path)), "lang", "units.txt")
    if not os.path.isfile(path):
        raise FileNotFoundError(f"train.init_from: no checkpoint {path}")
    if not os.path.isfile(lang):
        raise FileNotFoundError(f"train.init_from: {path} has no units beside it ({lang}): name a checkpoint "
                                "inside an experiment dir")
    state = checkpoint.load(path)
    source = state["ema"] if state.get("ema") is not None else state["model"]
    source_units = read_units(lang)
    source_type = lang_unit_type(os.path.dirname(lang))
    if unit_type and source_type and unit_type != source_type:
        log.warning("train.init_from: %s is over %s units, this run over %s: units are matched by name only",
                    path, source_type, unit_type)
    shared = [(units[name], source_units[name]) for name in units if name in source_units]
    to_rows = torch.tensor([row for row, _ in shared], dtype=torch.long)
    from_rows = torch.tensor([row for _, row in shared], dtype=torch.long)
    per_unit = unit_tensor_names(model)
    copied, mismatched = [], []
    with torch.no_grad():
        for name, tensor in model.state_dict().items():
            value = source.get(name)
            if value is None:
                continue
            if name in per_unit and value.dim() >= 1 and value.shape[1:] == tensor.shape[1:]:
                if len(shared) and int(from_rows.max()) >= value.shape[0]:
                    raise ValueError(f"train.init_from: {lang} has {len(source_units)} units, but {name} of {path} "
                                     f"has {value.shape[0]} rows")
                tensor[to_rows.to(tensor.device)] = value[from_rows].to(tensor)  # the model may be on a GPU
                copied.append(name)
            elif value.shape == tensor.shape:
                tensor.copy_(value)
                copied.append(name)
            else:
                mismatched.append(name)
    if not copied:
        raise ValueError(f"train.init_from: {path} shares no tensor of the same name and shape with this model")
    total = len(model.state_dict())
    absent = total - len(copied) - len(mismatched)
    summary = (f"initialised {len(copied)} of {total} tensors from {path} ({len(shared)} of {len(units)} units "
               f"by name; {absent} it lacks and {len(mismatched)} of another shape left as they were"
               + (f": {', '.join(mismatched[:5])}" if mismatched else "") + ")")
    # a tensor of its name in another shape: the two configs differ where they were meant to agree
    log.log(logging.WARNING if mismatched else logging.INFO, "%s", summary)
    return summary
