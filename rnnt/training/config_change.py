"""A resumed experiment whose config, training data or units changed: weights are never kept under a config,
data or units they were not trained with.

A rerun of steps/train.py --resume compares its resolved config with the experiment's config.yaml, the
training data (the list and the files it names, a shard by its content: list_fingerprint) with the one its
checkpoints were trained on, and the units with those it kept (<exp-dir>/lang). Keys a resume can honour
(RESUMABLE: more epochs, logging, checkpoint keeping, the device, loader workers) resume. Any other
difference starts the experiment over: the old one is set aside whole as <exp-dir>.N (its checkpoints,
config.yaml, decode dirs, exports; its logs and stage markers copied), and training begins anew, so nothing
decoded or exported afterwards mixes the two.
"""

from __future__ import annotations

import dataclasses
import filecmp
import hashlib
import os
import shutil

from rnnt.atomic_write import write_atomically
from rnnt.config import to_dict
from rnnt.data.cmvn_file import cmvn_source
from rnnt.data.list_fingerprint import list_fingerprint, missing_lines
from rnnt.data.sources import list_kind, read_list
from rnnt.data.tokenizer import read_lang_config, read_units
from rnnt.training import checkpoint
from rnnt.training.stop import StopTraining

MISSING_NAMED = 10  # a raw list's missing recordings named one by one; the rest counted

# What a resume can honour: how long to train, what is logged and kept, where it runs. Fewer epochs than
# the experiment already trained is not among them (its newest checkpoints would outlast the config).
RESUMABLE = frozenset({
    "train.epochs", "train.max_steps", "train.log_every", "train.checkpoint_every", "train.keep_checkpoints",
    "train.keep_whole_epochs", "train.max_bad_steps", "train.valid_wer", "train.valid_every", "train.patience",
    "train.device",
    "data.num_workers", "data.prefetch_factor", "data.pin_memory", "data.cache_audio_mb",
    "data.noise.cache_mb", "data.reverb.cache_mb",  # memory: the noise cut from it or from the file the same (an
    # Ogg Opus file's within its decoder's warm-up after a seek)
    "paths.train_list", "paths.valid_list", "paths.lang_dir",  # the units themselves: units_differ
    "data.features.cmvn",  # the statistics themselves: compared with the experiment's copy (CMVN_NAME)
    "data.tail_silence",  # decoding's and validation's (the recipes' decode stages take config.yaml among their
    # inputs; validation names it in its dev set, valid_dev_set: patience and --best rank no result measured otherwise)
})
CMVN_NAME = "global_cmvn.json"  # the experiment's copy of data.features.cmvn
# Keys recorded since some experiments were saved: one saved before (no value) is taken to have had the new one.
RECORDED_LATER = frozenset({"train.init_from_sha256", "data.noise.wav_scp_sha256", "data.reverb.wav_scp_sha256"})
# Paths whose files' content the config records: the same content at another path (the checkout moved, which
# makes every path of a saved config another) is the same config.
DIGESTED = {"train.init_from": "train.init_from_sha256", "data.noise.wav_scp": "data.noise.wav_scp_sha256",
            "data.reverb.wav_scp": "data.reverb.wav_scp_sha256"}
KEPT_IN_PLACE = ("log", ".stages")  # the running recipe stage writes its log and marker there
ASIDE_JOURNAL = ".setting-aside"  # set_aside's, in the exp dir while it moves the experiment out


@dataclasses.dataclass(frozen=True)
class Change:
    key: str
    old: object
    new: object

    def __str__(self) -> str:
        return f"{self.key}: {self.old!r} -> {self.new!r}"


def flat(values: dict, prefix: str = "") -> dict:
    """{'train.optimizer.lr': 0.001, ...} from nested mappings."""
    out = {}
    for key, value in values.items():
        if isinstance(value, dict) and value:
            out.update(flat(value, f"{prefix}{key}."))
        else:
            out[f"{prefix}{key}"] = value
    return out


def config_changes(old, new) -> list[Change]:
    """The keys whose values differ between two Experiments (a section present in one only counts as its keys)."""
    before, after = flat(to_dict(old)), flat(to_dict(new))
    return [Change(k, before.get(k), after.get(k)) for k in sorted(before.keys() | after.keys())
            if before.get(k) != after.get(k)]


def changes_to_restart(old, new, meta: dict, train_data: str) -> list[Change]:
    """The changes a resume cannot honour: config keys (not a DIGESTED path to the same content), fewer epochs
    than the newest checkpoint (meta) has trained, other training data than its (train_data: training_data_of's;
    checkpoints from before it was recorded are taken to have been trained on the same, as configs from before a
    RECORDED_LATER key)."""
    before, after = flat(to_dict(old)), flat(to_dict(new))
    changes = [c for c in config_changes(old, new)
               if c.key not in RESUMABLE and not (c.key in RECORDED_LATER and not c.old)
               and not (c.key == "train.init_from_sha256" and not c.new)  # the start is gone: never read again
               and not (c.key in DIGESTED and before.get(DIGESTED[c.key]) and
                        before.get(DIGESTED[c.key]) == after.get(DIGESTED[c.key]))]
    if new.train.epochs < meta["epoch"] or (new.train.epochs == meta["epoch"] and meta.get("batch", 0) > 0):
        batches = f" and {meta['batch']} batches" if meta.get("batch") else ""
        changes.append(Change("train.epochs", f"{meta['epoch']}{batches} trained", new.train.epochs))
    if 0 < new.train.max_steps < meta.get("step", 0):
        changes.append(Change("train.max_steps", f"{meta['step']} steps trained", new.train.max_steps))
    trained_on = meta.get("train_data", train_data)
    if trained_on != train_data and not (os.path.isfile(new.paths.train_list) and  # a value of before shards' digests
                                         trained_on == list_fingerprint(new.paths.train_list, by_content=False)):
        changes.append(Change("the training data", "as trained", f"rewritten since ({new.paths.train_list})"))
    return changes


def training_data_of(list_path: str) -> tuple[str, list[str]]:
    """The training list's list_fingerprint, which every checkpoint records, and warnings for the log. A shard list
    naming a shard that is gone is refused before anything is set aside: trained on, it would start over on a part.
    A raw list's missing recordings are named by line and skipped, as the pipeline skips unreadable audio (one
    deleted recording refused a list of thousands); a raw list of which every recording is gone is refused."""
    missing = missing_lines(list_path) if os.path.isfile(list_path) else []
    warnings = []
    if missing:
        where = f"{list_path}:{missing[0][0]} ({missing[0][1]}{', ...' if len(missing) > 1 else ''})"
        entries = read_list(list_path, quiet=True)
        if list_kind(entries) != "raw" or len(missing) >= len(entries):
            raise StopTraining(f"{list_path} names {len(missing)} file(s) that are gone, the first at {where}: "
                               "make the list again (a recipe's shards stage)")
        warnings = [f"{list_path}:{number}: {path} is gone; its utterance is skipped"
                    for number, path in missing[:MISSING_NAMED]]
        warnings.append(f"{list_path}: {len(missing)} of its {len(entries)} recordings are gone "
                        f"({min(len(missing), MISSING_NAMED)} named above), skipped; the rest are trained on")
    return list_fingerprint(list_path), warnings


def units_digest(lang_dir: str) -> str:
    """A digest of a lang dir's units.txt (the ids the model's outputs mean), kept in every checkpoint's meta: a
    checkpoint decoded with other units of its size (another experiment's, an edited units.txt) is refused. Of the
    units as read, '<symbol> <id>' lines in id order: the bytes of the file steps/build_units.py writes, and the same
    for a copy whose line ends or spacing an editor changed (refused as other units)."""
    units = read_units(os.path.join(lang_dir, "units.txt"))
    canonical = "".join(f"{symbol} {unit}\n" for symbol, unit in sorted(units.items(), key=lambda item: item[1]))
    return hashlib.sha256(canonical.encode("utf-8")).hexdigest()[:16]


def units_differ(lang_dir: str, kept: str) -> list[str]:
    """The unit files of lang_dir that differ from those of an experiment's kept lang dir (or are missing):
    the inventory, and what maps text to it where units.json names it: a phone lexicon (a word's phones
    changed under the same phone set are other targets), a sentencepiece model's pieces and scores."""
    try:  # the units as read, as a checkpoint's digest compares them (a copy with CRLF line ends is the same)
        differ = [] if units_digest(lang_dir) == units_digest(kept) else ["units.txt"]
    except (OSError, ValueError):
        differ = ["units.txt"]
    _, mismatch, errors = filecmp.cmpfiles(lang_dir, kept, ["units.json"], shallow=False)
    if differ or mismatch or errors:
        return differ + mismatch + errors
    config = read_lang_config(lang_dir)
    lexicon, model = config.get("lexicon"), config.get("model")
    if lexicon and not same_file(os.path.join(lang_dir, lexicon), os.path.join(kept, lexicon)):
        return [lexicon]
    if model and piece_scores(os.path.join(lang_dir, model)) != piece_scores(os.path.join(kept, model)):
        return [model]
    return []


def same_file(path: str, other: str) -> bool:
    try:
        return filecmp.cmp(path, other, shallow=False)
    except OSError:  # one is missing
        return False


def piece_scores(model_path: str) -> list[tuple[str, float]] | None:
    """A sentencepiece model's pieces and scores, which decide how it splits text (its bytes also hold the
    path it was trained from); None where it cannot be read."""
    import sentencepiece

    try:
        model = sentencepiece.SentencePieceProcessor(model_file=model_path)
    except (OSError, RuntimeError):
        return None
    return [(model.id_to_piece(i), model.get_score(i)) for i in range(model.get_piece_size())]


def aside_name(exp_dir: str) -> str:
    """<exp-dir>.N, the first N free."""
    base, n = os.path.normpath(exp_dir), 1
    while os.path.exists(f"{base}.{n}"):
        n += 1
    return f"{base}.{n}"


def set_aside(exp_dir: str, aside: str | None = None) -> str:
    """Moves the experiment to <exp-dir>.N (or `aside`) and returns that name; its logs and stage markers are
    copied, the markers of finished stages removed from exp-dir (their outputs moved with the rest) and the
    running stage's from the copy. Its config.yaml then names its own lang dir and CMVN statistics in
    <exp-dir>.N. A journal in exp-dir (ASIDE_JOURNAL, naming the destination) lasts from before the first move to
    after the last step: killed half way, the next run finishes the moves into the same dir
    (finish_setting_aside), where it had split the experiment between two dirs neither of which decoded."""
    exp_dir = os.path.normpath(exp_dir)
    aside = aside or aside_name(exp_dir)
    os.makedirs(aside, exist_ok=True)
    journal = os.path.join(exp_dir, ASIDE_JOURNAL)
    write_atomically(journal, lambda f: f.write(os.path.abspath(aside)))  # a rerun may start in another folder
    # config.yaml last: whatever remains beside it is still the old experiment's
    for entry in sorted(set(os.listdir(exp_dir)) - {ASIDE_JOURNAL}, key=lambda name: (name == "config.yaml", name)):
        path = os.path.join(exp_dir, entry)
        if entry in KEPT_IN_PLACE:
            shutil.copytree(path, os.path.join(aside, entry), symlinks=True, dirs_exist_ok=True)
        else:
            os.replace(path, os.path.join(aside, entry))
    moved_config = os.path.join(aside, "config.yaml")
    if os.path.isfile(moved_config):  # its lang dir and CMVN copy moved with it: config.yaml names them there
        with open(moved_config, encoding="utf-8") as f:
            text = f.read().replace(os.path.abspath(exp_dir) + os.sep, os.path.abspath(aside) + os.sep)
        write_atomically(moved_config, lambda f: f.write(text))
    for marks, unfinished in (os.path.join(exp_dir, ".stages"), False), (os.path.join(aside, ".stages"), True):
        for mark in os.listdir(marks) if os.path.isdir(marks) else ():
            if mark.endswith(".pending") == unfinished:  # exp-dir keeps the running stage's, the old one the rest
                os.remove(os.path.join(marks, mark))
    os.remove(journal)
    return aside


def finish_setting_aside(exp_dir: str) -> str | None:
    """Where a run was killed setting the experiment aside (its journal left): the moves finished into the dir the
    journal names, and a message saying so; else None."""
    journal = os.path.join(exp_dir, ASIDE_JOURNAL)
    if not os.path.isfile(journal):
        return None
    with open(journal, encoding="utf-8") as f:
        aside = set_aside(exp_dir, f.read().strip() or None)
    return f"{exp_dir}: a setting aside stopped half way was finished: the old experiment is whole in {aside}"


def patience_ended_before(exp_dir: str, train, newest: dict) -> int | None:
    """The epoch after which train.patience would have ended the training, where the newest checkpoint (its meta)
    trained past it: a patience lowered, or switched on, on a resume (it was resumable, and the epochs after it were
    averaged and decoded as this config's). Read from each epoch checkpoint's best dev result; None: none."""
    metric = "valid_wer" if train.valid_wer else "valid_loss"
    for path in checkpoint.numbered(exp_dir, "epoch") if train.patience else []:
        meta = checkpoint.load_meta(path)
        best, epoch = meta.get("best_valid") or {}, meta["epoch"]
        past = epoch < newest["epoch"] or (epoch == newest["epoch"] and newest.get("batch", 0) > 0)
        if best.get("metric") == metric and epoch - best["epoch"] >= train.patience and past:
            return epoch
    return None


def honoured_changes(old, new) -> list[Change]:
    """The edits a resume honours, for its log: RESUMABLE keys, and DIGESTED paths to the same content; not the
    lang dir and CMVN statistics, which the saved config names as the experiment's own copies (their content is
    compared: units_differ, CMVN_NAME)."""
    return [c for c in config_changes(old, new) if (c.key in RESUMABLE or c.key in DIGESTED)
            and c.key not in ("paths.lang_dir", "data.features.cmvn")]


def start_over_if_changed(experiment, exp_dir: str, load_saved, train_data: str,
                          honoured: list[Change] | None = None) -> str | None:
    """Sets the experiment aside when its config.yaml and checkpoints were made under another config or
    training data than `experiment`'s; returns a message saying what changed and where the old one went
    (None: nothing done; then the edits the resume honours are added to `honoured`, where given). load_saved(path)
    reads a config.yaml (a ValueError if this version cannot); train_data is the training data's training_data_of."""
    finished = finish_setting_aside(exp_dir)
    saved, newest = os.path.join(exp_dir, "config.yaml"), checkpoint.latest(exp_dir)
    if newest is None or not os.path.isfile(saved):  # checkpoints copied in to resume from: no config to compare
        return finished
    with open(saved, "rb") as f:
        if not f.read().strip():  # an empty YAML is the default experiment: every setting would count as changed
            raise ValueError("empty (its write cut short?): put back the config it was trained with to resume it")
    old = load_saved(saved)
    meta = checkpoint.load_meta(newest)
    changes = changes_to_restart(old, experiment, meta, train_data)
    if old.train.patience != experiment.train.patience and \
            (ended := patience_ended_before(exp_dir, experiment.train, meta)) is not None:
        changes.append(Change("train.patience", f"{old.train.patience} (trained past epoch {ended}, where "
                              f"{experiment.train.patience} ends it)", experiment.train.patience))
    kept, lang_dir = os.path.join(os.path.abspath(exp_dir), "lang"), experiment.paths.lang_dir
    if os.path.isdir(kept) and os.path.abspath(lang_dir) != kept and (differ := units_differ(lang_dir, kept)):
        changes.append(Change("the units", f"as trained ({kept})", f"other {', '.join(differ)} ({lang_dir})"))
    # the statistics trained with: the experiment's copy (CMVN_NAME), or in one saved before copies, the file (a
    # dir moved since names a file gone: new statistics then went unseen, and the copy's check refused the resume)
    trained_with, cmvn = old.data.features.cmvn, experiment.data.features.cmvn
    own = os.path.join(exp_dir, CMVN_NAME)
    compared = own if trained_with and os.path.isfile(own) else trained_with
    if bool(trained_with) != bool(cmvn) or (cmvn and os.path.isfile(compared)
                                            and not filecmp.cmp(cmvn_source(cmvn), compared, False)):
        changes.append(Change("the CMVN statistics", f"as trained ({trained_with or 'none'})", cmvn or "none"))
    if not changes:
        if honoured is not None:
            honoured.extend(honoured_changes(old, experiment))
        return None
    aside = set_aside(exp_dir)
    return (f"the config or data differ from those {exp_dir} was trained with ({'; '.join(map(str, changes))}): "
            f"that experiment is set aside whole as {aside}, and training starts anew with this config")
