"""What a checkpoint's weights were trained under, kept in its meta and checked where they are read (decoding,
transcription, export, tuning, combination): the units (a digest of units.txt) and the inference settings (the
model's and the front end's), so that an experiment's config.yaml edited after training is named, not decoded
silently into other results."""

from __future__ import annotations

from rnnt.config import to_dict
from rnnt.training.config_change import flat, units_digest

INFERENCE_DATA = ("data.sample_rate", "data.features.preset", "data.features.num_mel_bins", "data.stack",
                  "data.subsample")


def inference_settings(experiment) -> dict:
    """The settings a checkpoint's weights are read under (a checkpoint's meta 'inference'): the model's but its
    dropouts, initialisation and training loss (the one-symbol lattice aside, which decoding follows), and the
    front end's. An edit of one of them after training decoded silently into other results."""
    return {key: value for key, value in flat(to_dict(experiment)).items()
            if key in INFERENCE_DATA or key == "model.loss.one_sym_per_frame" or key.startswith("model.")
            and not key.startswith("model.loss.") and "dropout" not in key and key != "model.mlperf_init"}


def check_trained_under(path: str, meta: dict, experiment, exp_dir: str) -> None:
    """ValueError where the checkpoint at path (its meta) was trained with other units, or under other inference
    settings, than exp_dir's config.yaml gives (its config edited since, or another experiment's checkpoint);
    a checkpoint saved before they were kept is not checked."""
    if meta.get("units") and meta["units"] != units_digest(experiment.paths.lang_dir):
        raise ValueError(f"{path}: trained with other units than {experiment.paths.lang_dir}/units.txt (its ids "
                         "would name other units: another experiment's checkpoint, or units.txt edited since)")
    now = inference_settings(experiment)
    changed = [f"{key}: {value} -> {now.get(key)}" for key, value in (meta.get("inference") or {}).items()
               if now.get(key) != value]
    if changed:
        raise ValueError(f"{path}: trained under other settings than {exp_dir}/config.yaml gives ("
                         + "; ".join(changed) + "): its weights would be read otherwise than they were trained "
                         "(config.yaml edited since: put the settings back, or train anew)")
