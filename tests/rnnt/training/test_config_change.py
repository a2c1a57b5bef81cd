"""A resumed experiment whose config changed starts over, the old one set aside; what a resume honours resumes."""

import dataclasses
import json
import os

import pytest
import torch
import yaml

from conftest import run_tool
from rnnt.data.specaugment import SpecAugmentConfig
from rnnt.training import checkpoint
from rnnt.data.list_fingerprint import list_fingerprint
from rnnt.training.config_change import changes_to_restart, config_changes, flat, set_aside, training_data_of
from rnnt.training.experiment import load_experiment
from rnnt.training.stop import StopTraining
from yesno_training import CONFIG, config_file, train_args


def with_train(experiment, **values):
    return dataclasses.replace(experiment, train=dataclasses.replace(experiment.train, **values))


def test_changes_name_the_dotted_keys_that_differ():
    old = load_experiment(str(CONFIG))
    new = with_train(old, optimizer=dataclasses.replace(old.train.optimizer, lr=0.002), log_every=1)
    assert [str(c) for c in config_changes(old, new)] == ["train.log_every: 10 -> 1",
                                                           "train.optimizer.lr: 0.005 -> 0.002"]
    assert [c.key for c in changes_to_restart(old, new, {"epoch": 3}, "data")] == ["train.optimizer.lr"]
    more = with_train(old, epochs=20, checkpoint_every=5)
    assert changes_to_restart(old, more, {"epoch": 10, "train_data": "data"}, "data") == []
    assert changes_to_restart(old, more, {"epoch": 10}, "data") == []  # a checkpoint from before data was recorded
    fewer = changes_to_restart(old, with_train(old, epochs=5), {"epoch": 10}, "data")
    assert [str(c) for c in fewer] == ["train.epochs: '10 trained' -> 5"]
    # weights trained past the new end: into the epoch after the last, or beyond a step limit
    into_next = changes_to_restart(old, with_train(old, epochs=1), {"epoch": 1, "batch": 37, "step": 43}, "data")
    assert [str(c) for c in into_next] == ["train.epochs: '1 and 37 batches trained' -> 1"]
    assert changes_to_restart(old, with_train(old, epochs=1), {"epoch": 1, "batch": 0, "step": 6}, "data") == []
    past_limit = changes_to_restart(old, with_train(old, max_steps=100), {"epoch": 3, "step": 500}, "data")
    assert [str(c) for c in past_limit] == ["train.max_steps: '500 steps trained' -> 100"]
    assert changes_to_restart(old, with_train(old, max_steps=600), {"epoch": 3, "step": 500}, "data") == []
    # decoding's tail silence trains nothing: resumed (it retrained from scratch to identical weights)
    silence = dataclasses.replace(old, data=dataclasses.replace(old.data, tail_silence=0.3))
    assert changes_to_restart(old, silence, {"epoch": 3, "train_data": "data"}, "data") == []
    other_data = changes_to_restart(old, old, {"epoch": 3, "train_data": "data"}, "other")
    assert [c.key for c in other_data] == ["the training data"]
    assert flat({"a": {"b": 1, "c": {}}, "d": [1]}) == {"a.b": 1, "a.c": {}, "d": [1]}


def test_a_new_checkpoint_to_start_from_restarts_unless_the_old_config_predates_its_digest_or_it_is_gone():
    old = with_train(load_experiment(str(CONFIG)), init_from="/x/avg-5.pt", init_from_sha256="aa")
    new = with_train(old, init_from_sha256="bb")
    assert [str(c) for c in changes_to_restart(old, new, {"epoch": 3}, "")] == ["train.init_from_sha256: 'aa' -> 'bb'"]
    saved_before = with_train(old, init_from_sha256="")  # config.yaml written before the key existed
    assert changes_to_restart(saved_before, new, {"epoch": 3}, "") == []
    gone = with_train(old, init_from_sha256="")  # the checkpoint started from deleted since: a resume never reads it
    assert changes_to_restart(new, gone, {"epoch": 3}, "") == []
    # the same checkpoint at another path (the checkout moved: every path in config.yaml is absolute) resumes, as
    # its training list at another path does; another path to other content, or where no digest says, restarts
    moved = with_train(old, init_from="/y/avg-5.pt")
    assert changes_to_restart(old, moved, {"epoch": 3}, "") == []
    assert [c.key for c in changes_to_restart(old, with_train(moved, init_from_sha256="bb"), {"epoch": 3}, "")] == [
        "train.init_from", "train.init_from_sha256"]
    assert [c.key for c in changes_to_restart(saved_before, moved, {"epoch": 3}, "")] == ["train.init_from"]


def test_a_noise_list_saved_before_its_digest_resumes_and_an_edited_one_restarts():
    from rnnt.data.noise_config import NoiseConfig

    base = load_experiment(str(CONFIG))

    def noisy(digest):
        return dataclasses.replace(base, data=dataclasses.replace(base.data, noise=NoiseConfig("/x/n.scp", 0.5,
                                                                                                wav_scp_sha256=digest)))
    assert changes_to_restart(noisy(""), noisy("aa"), {"epoch": 3}, "") == []  # config.yaml from before the key
    assert [c.key for c in changes_to_restart(noisy("aa"), noisy("bb"), {"epoch": 3}, "")] == [
        "data.noise.wav_scp_sha256"]
    moved = dataclasses.replace(base, data=dataclasses.replace(base.data, noise=NoiseConfig("/y/n.scp", 0.5,
                                                                                            wav_scp_sha256="aa")))
    assert changes_to_restart(noisy("aa"), moved, {"epoch": 3}, "") == []  # the same list elsewhere


def test_the_edits_a_resume_honours_are_named_but_not_the_experiments_own_copies():
    """The saved config names the experiment's copies of the units and statistics (compared by content): the
    recipe's paths to them are no edit."""
    from rnnt.training.config_change import honoured_changes

    old = load_experiment(str(CONFIG))
    saved = dataclasses.replace(old, paths=dataclasses.replace(old.paths, lang_dir="/exp/lang"),
                                data=dataclasses.replace(old.data, features=dataclasses.replace(
                                    old.data.features, cmvn="/exp/global_cmvn.json")))
    new = with_train(old, epochs=20, init_from="/y/avg.pt", init_from_sha256="aa")
    new = dataclasses.replace(new, paths=dataclasses.replace(new.paths, lang_dir="data/lang"), data=dataclasses.replace(
        new.data, num_workers=3, features=dataclasses.replace(new.data.features, cmvn="data/train/cmvn.json")))
    saved = with_train(saved, init_from="/x/avg.pt", init_from_sha256="aa")
    assert [str(c) for c in honoured_changes(saved, new)] == [
        "data.num_workers: 0 -> 3", "train.epochs: 10 -> 20", "train.init_from: '/x/avg.pt' -> '/y/avg.pt'"]


def test_a_section_switched_on_counts_as_its_keys():
    old = load_experiment(str(CONFIG))
    new = dataclasses.replace(old, data=dataclasses.replace(old.data, spec_augment=SpecAugmentConfig(freq_masks=1)))
    assert "data.spec_augment.freq_masks" in [c.key for c in changes_to_restart(old, new, {"epoch": 0}, "")]


def test_set_aside_moves_the_experiment_and_keeps_the_running_stage_in_place(tmp_path):
    exp = tmp_path / "tiny"
    (exp / "log").mkdir(parents=True)
    (exp / ".stages").mkdir()
    (exp / "decode-test-greedy-epoch-2").mkdir()
    for name in ("epoch-2.pt", "log/4.train.log", "log/6.decode.log", ".stages/6.decode.done",
                 ".stages/4.train.done.pending", "decode-test-greedy-epoch-2/wer"):
        (exp / name).write_text(name)
    (exp / "config.yaml").write_text(f"paths:\n  lang_dir: {exp}/lang\n  train_list: {tmp_path}/tiny.list\n")
    (tmp_path / "tiny.1").mkdir()  # taken: the next free number is used
    aside = set_aside(str(exp) + "/")
    assert aside == str(tmp_path / "tiny.2")
    assert sorted(p.name for p in exp.iterdir()) == [".stages", "log"]
    assert sorted(p.name for p in (exp / ".stages").iterdir()) == ["4.train.done.pending"]
    assert (exp / "log" / "6.decode.log").is_file()  # logs are copied: the running stage appends to its own
    old = tmp_path / "tiny.2"
    assert (old / "epoch-2.pt").read_text() == "epoch-2.pt" and (old / "decode-test-greedy-epoch-2" / "wer").is_file()
    assert sorted(p.name for p in (old / ".stages").iterdir()) == ["6.decode.done"]
    assert sorted(p.name for p in (old / "log").iterdir()) == ["4.train.log", "6.decode.log"]
    # its own units (and CMVN copy) there: decoding the old experiment never reads the new one's
    assert (old / "config.yaml").read_text() == f"paths:\n  lang_dir: {old}/lang\n  train_list: {tmp_path}/tiny.list\n"


def test_a_setting_aside_killed_half_way_is_finished_into_the_same_dir_by_the_next_run(tmp_path, monkeypatch):
    """Killed between two moves, the experiment was split: its first entries in exp.1, the rest (config.yaml, moved
    last) set aside again by the next run into exp.2, neither of which decoded; killed after the checkpoints, the
    next run trained anew beside the old logs. A journal names the destination: the next run finishes there."""
    from rnnt.training.config_change import ASIDE_JOURNAL, finish_setting_aside

    exp = tmp_path / "exp"
    (exp / "lang").mkdir(parents=True)
    (exp / ".stages").mkdir()
    for name in ("config.yaml", "epoch-1.pt", "epoch-2.pt", "train.log", ".stages/6.decode.done"):
        (exp / name).write_text(name)
    calls, real_replace = [], os.replace

    def killed_at_the_third(source, target):  # the journal's write, epoch-1.pt, then the kill
        calls.append(os.path.basename(source))
        if len(calls) == 3:
            raise KeyboardInterrupt
        real_replace(source, target)

    monkeypatch.setattr(os, "replace", killed_at_the_third)
    with pytest.raises(KeyboardInterrupt):
        set_aside(str(exp))
    monkeypatch.undo()
    aside = tmp_path / "exp.1"
    assert (exp / ASIDE_JOURNAL).read_text() == str(aside)
    assert sorted(p.name for p in aside.iterdir()) == [".stages", "epoch-1.pt"]
    assert finish_setting_aside(str(exp)) == f"{exp}: a setting aside stopped half way was finished: the old " \
                                              f"experiment is whole in {aside}"
    assert sorted(p.name for p in exp.iterdir()) == [".stages"] and not list((exp / ".stages").iterdir())
    assert sorted(p.name for p in aside.iterdir()) == [".stages", "config.yaml", "epoch-1.pt", "epoch-2.pt", "lang",
                                                       "train.log"]
    assert finish_setting_aside(str(exp)) is None and not (tmp_path / "exp.2").exists()


def test_train_py_without_resume_finishes_a_setting_aside_a_killed_run_left(yesno, tmp_path):
    """Only a --resume run finished it: one without trained anew beside the old experiment's rest, whose files a
    later setting aside moved over the old experiment's own."""
    from rnnt.training.config_change import ASIDE_JOURNAL

    exp, aside = tmp_path / "exp", tmp_path / "exp.1"
    aside.mkdir()
    exp.mkdir()
    (aside / "epoch-1.pt").write_text("moved before the kill")
    (exp / "config.yaml").write_text("the old experiment's, not moved yet")
    (exp / ASIDE_JOURNAL).write_text(str(aside))
    out = run_tool(*train_args(yesno, exp, config_file(tmp_path, epochs=1)))
    assert out.returncode == 0, out.stderr[-2000:]
    assert (aside / "config.yaml").read_text() == "the old experiment's, not moved yet"
    assert not (exp / ASIDE_JOURNAL).exists() and (exp / "epoch-1.pt").is_file()
    assert "a setting aside stopped half way was finished" in (exp / "train.log").read_text()


def lr_of(exp_dir) -> float:
    return yaml.safe_load((exp_dir / "config.yaml").read_text())["train"]["optimizer"]["lr"]


@pytest.mark.slow
def test_train_py_resumes_what_it_can_and_starts_over_otherwise(yesno, tmp_path):
    """Through steps/train.py --resume on yesno: a learning-rate change and a layer-size change start over
    (the weights then equal a fresh run's with the new config), more epochs resume."""
    exp = tmp_path / "exp"
    first = config_file(tmp_path, epochs=1)
    assert run_tool(*train_args(yesno, exp, first), "--resume").returncode == 0
    trained = checkpoint.load(str(exp / "epoch-1.pt"))["model"]
    before = sorted(p.name for p in exp.iterdir())
    typo = yaml.safe_load(first.read_text())
    typo["train"]["optimizer"]["type"] = "adamW"  # refused by the optimiser: before the experiment is set aside
    (tmp_path / "typo.yaml").write_text(yaml.safe_dump(typo))
    out = run_tool(*train_args(yesno, exp, tmp_path / "typo.yaml"), "--resume")
    assert out.returncode == 1 and "train.optimizer.type must be one of" in out.stderr, out.stderr[-2000:]
    assert not (tmp_path / "exp.1").exists() and sorted(p.name for p in exp.iterdir()) == before

    values = yaml.safe_load(first.read_text())
    values["train"]["optimizer"]["lr"] = 0.002
    lr_changed = tmp_path / "lr.yaml"
    lr_changed.write_text(yaml.safe_dump(values))
    out = run_tool(*train_args(yesno, exp, lr_changed), "--resume")
    assert out.returncode == 0, out.stderr[-2000:]
    assert "train.optimizer.lr: 0.005 -> 0.002" in out.stderr and f"set aside whole as {exp}.1" in out.stderr
    assert lr_of(exp) == 0.002 and lr_of(tmp_path / "exp.1") == 0.005
    aside = checkpoint.load(str(tmp_path / "exp.1" / "epoch-1.pt"))["model"]
    assert all(torch.equal(trained[k], aside[k]) for k in trained)
    fresh = tmp_path / "fresh"
    assert run_tool(*train_args(yesno, fresh, lr_changed)).returncode == 0
    restarted, straight = (checkpoint.load(str(d / "epoch-1.pt"))["model"] for d in (exp, fresh))
    assert all(torch.equal(restarted[k], straight[k]) for k in straight)
    assert "resumed from" not in (exp / "train.log").read_text()

    values["train"]["epochs"] = 2
    more = tmp_path / "more.yaml"
    more.write_text(yaml.safe_dump(values))
    out = run_tool(*train_args(yesno, exp, more), "--resume")
    assert out.returncode == 0 and "set aside" not in out.stderr, out.stderr[-2000:]
    assert "resumed from" in (exp / "train.log").read_text() and (exp / "epoch-2.pt").is_file()
    honoured = "resuming with the config's edits a resume honours: train.epochs: 1 -> 2\n"
    assert honoured in (exp / "train.log").read_text()
    assert not (tmp_path / "exp.2").exists()

    values["model"]["encoder"]["hidden"] = 64
    wider = tmp_path / "wider.yaml"
    wider.write_text(yaml.safe_dump(values))
    out = run_tool(*train_args(yesno, exp, wider), "--resume")
    assert out.returncode == 0, out.stderr[-2000:]
    assert "model.encoder.hidden: 128 -> 64" in out.stderr and "Traceback" not in out.stderr
    assert (tmp_path / "exp.2" / "epoch-2.pt").is_file() and (exp / "epoch-2.pt").is_file()
    assert yaml.safe_load((exp / "config.yaml").read_text())["model"]["encoder"]["hidden"] == 64


def test_train_py_seed_overrides_the_configs_seed(yesno, tmp_path):
    """--seed N trains what train.seed: N in the config trains, records it in config.yaml, and another seed
    trains other weights (a recipe's --seeds trains one model a seed from one config)."""
    trained = {}
    for name, seed_option, config_seed in (("option", ["--seed", "3"], 0), ("config", [], 3), ("default", [], 0)):
        directory = tmp_path / name
        directory.mkdir()
        conf = config_file(directory, epochs=1, seed=config_seed)
        out = run_tool(*train_args(yesno, directory / "exp", conf), *seed_option)
        assert out.returncode == 0, out.stderr[-2000:]
        trained[name] = checkpoint.load(str(directory / "exp" / "epoch-1.pt"))["model"]
        assert yaml.safe_load((directory / "exp" / "config.yaml").read_text())["train"]["seed"] == (
            0 if name == "default" else 3)
    assert all(torch.equal(trained["option"][k], trained["config"][k]) for k in trained["config"])
    assert not all(torch.equal(trained["option"][k], trained["default"][k]) for k in trained["default"])


@pytest.mark.slow
def test_a_config_this_version_cannot_read_stops_before_touching_anything(yesno, tmp_path):
    exp = tmp_path / "exp"
    conf = config_file(tmp_path, epochs=1)
    assert run_tool(*train_args(yesno, exp, conf)).returncode == 0
    saved = yaml.safe_load((exp / "config.yaml").read_text())
    saved["model"]["encoder"]["retired_key"] = 1
    (exp / "config.yaml").write_text(yaml.safe_dump(saved))
    before = sorted(p.name for p in exp.iterdir())
    out = run_tool(*train_args(yesno, exp, conf), "--resume")
    assert out.returncode == 1 and "retired_key" in out.stderr and "new --exp-dir" in out.stderr, out.stderr
    assert "Traceback" not in out.stderr and sorted(p.name for p in exp.iterdir()) == before


def test_the_training_data_fingerprint_follows_the_list_and_its_files(tmp_path):
    shards = [tmp_path / f"shards_{i}.tar" for i in range(2)]
    for shard in shards:
        shard.write_bytes(b"x")
    shard_list = tmp_path / "data.list"
    shard_list.write_text("".join(f"{s}\n" for s in shards))
    before = list_fingerprint(str(shard_list))
    assert list_fingerprint(str(shard_list)) == before
    os.utime(shards[1], ns=(1, 1))  # rewritten: another time
    assert list_fingerprint(str(shard_list)) != before
    raw = tmp_path / "raw.list"
    raw.write_text(json.dumps({"key": "a", "wav": str(shards[0]), "txt": "A"}) + "\n")
    first = list_fingerprint(str(raw))
    shards[0].write_bytes(b"longer")
    assert list_fingerprint(str(raw)) != first


def test_a_raw_lists_missing_recordings_are_named_by_line_and_skipped_but_a_missing_shard_is_refused(tmp_path):
    """One deleted recording refused a raw list of thousands, naming no line; now it is skipped as unreadable audio
    is. A missing shard (thousands of utterances) and a raw list with nothing left are still refused."""
    waves = [tmp_path / f"{key}.wav" for key in "abc"]
    for wave in waves[:2]:
        wave.write_bytes(b"x")
    raw = tmp_path / "raw.list"
    raw.write_text("".join(json.dumps({"key": w.stem, "wav": str(w), "txt": "A"}) + "\n" for w in waves))
    assert training_data_of(str(raw)) == (list_fingerprint(str(raw)), [
        f"{raw}:3: {waves[2]} is gone; its utterance is skipped",
        f"{raw}: 1 of its 3 recordings are gone (1 named above), skipped; the rest are trained on"])
    # a line the pipeline skips (no "txt") naming a recording that is gone is not one of the list's: the one
    # recording left is trained on (a second reader of lists counted that line and refused the list)
    bad = tmp_path / "bad.list"
    bad.write_text(json.dumps({"key": "a", "wav": str(waves[0]), "txt": "A"}) + "\n" +
                   json.dumps({"key": "c", "wav": str(waves[2])}) + "\n")
    assert training_data_of(str(bad)) == (list_fingerprint(str(bad)), [])
    for wave in waves[:2]:
        wave.unlink()
    with pytest.raises(StopTraining, match=f"names 3 file\\(s\\) that are gone, the first at {raw}:1 \\({waves[0]}, "):
        training_data_of(str(raw))
    shard_list = tmp_path / "data.list"
    (tmp_path / "shards_0.tar").write_bytes(b"x")
    shard_list.write_text(f"{tmp_path}/shards_0.tar\n{tmp_path}/shards_1.tar\n")
    with pytest.raises(StopTraining, match=f"^{shard_list} names 1 file\\(s\\) that are gone, the first at "
                                           f"{shard_list}:2 \\({tmp_path}/shards_1.tar\\)"):
        training_data_of(str(shard_list))


def test_an_empty_config_yaml_beside_checkpoints_is_refused_not_taken_for_the_defaults(tmp_path):
    """An empty YAML is the default experiment: a config.yaml cut short by a full disk made a resume set the
    experiment aside as trained under another config."""
    from rnnt.training.config_change import start_over_if_changed

    exp = tmp_path / "exp"
    exp.mkdir()
    checkpoint.save(str(exp / "epoch-1.pt"), {"model": {}, "meta": {"step": 3, "epoch": 1, "batch": 0}})
    (exp / "config.yaml").write_text("\n")
    experiment = load_experiment(str(CONFIG))
    with pytest.raises(ValueError, match="empty .*put back the config it was trained with"):
        start_over_if_changed(experiment, str(exp), load_experiment, "data")
    assert sorted(p.name for p in exp.iterdir()) == ["config.yaml", "epoch-1.pt"]  # nothing set aside


def test_config_yaml_is_written_whole_or_not_at_all(tmp_path, monkeypatch):
    from rnnt.training.experiment import save_experiment

    experiment = load_experiment(str(CONFIG))
    path = tmp_path / "config.yaml"
    save_experiment(experiment, str(path))
    before = path.read_text()

    def cut_short(data, stream, **kwargs):
        stream.write("model:\n  enc")
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(yaml, "safe_dump", cut_short)
    with pytest.raises(OSError, match="No space left"):
        save_experiment(dataclasses.replace(experiment, train=dataclasses.replace(experiment.train, epochs=99)),
                        str(path))
    assert path.read_text() == before and sorted(p.name for p in tmp_path.iterdir()) == ["config.yaml"]


def test_a_patience_lowered_or_switched_on_past_where_it_ends_the_training_starts_over(tmp_path):
    """Four epochs, the dev result best at epoch 1 and never since: patience 1 would have ended the training after
    epoch 2. Resumed (a resumable key), epochs 3 and 4 were averaged and decoded as that config's."""
    from rnnt.training.config_change import start_over_if_changed

    exp = tmp_path / "exp"
    exp.mkdir()
    values = yaml.safe_load(CONFIG.read_text())
    values["train"]["patience"] = 0
    (exp / "config.yaml").write_text(yaml.safe_dump(values))
    for epoch in range(1, 5):
        checkpoint.save(str(exp / f"epoch-{epoch}.pt"), {"model": {}, "meta": {
            "step": 3 * epoch, "epoch": epoch, "batch": 0,
            "best_valid": {"epoch": 1, "metric": "valid_wer", "value": 40.0}}})
    experiment = load_experiment(str(exp / "config.yaml"))
    assert experiment.train.valid_wer
    assert start_over_if_changed(with_train(experiment, patience=3), str(exp), load_experiment, "data") is None
    message = start_over_if_changed(with_train(experiment, patience=1), str(exp), load_experiment, "data")
    assert message and "train.patience: '0 (trained past epoch 2, where 1 ends it)' -> 1" in message, message
    assert (tmp_path / "exp.1" / "epoch-4.pt").exists()


def test_an_experiment_moved_since_compares_new_statistics_with_its_own_copy(tmp_path):
    """config.yaml names the statistics where they were, gone with the move: other statistics went unseen here,
    and the copy's own check then refused the resume for good, advising the --resume given."""
    from rnnt.training.config_change import CMVN_NAME, start_over_if_changed

    exp = tmp_path / "exp"
    exp.mkdir()
    values = yaml.safe_load(CONFIG.read_text())
    values["data"]["features"]["cmvn"] = str(tmp_path / "gone" / "cmvn.json")
    (exp / "config.yaml").write_text(yaml.safe_dump(values))
    (exp / CMVN_NAME).write_text('{"mean": [0.0], "std": [1.0]}\n')
    checkpoint.save(str(exp / "epoch-1.pt"), {"model": {}, "meta": {"step": 3, "epoch": 1, "batch": 0}})
    experiment = load_experiment(str(exp / "config.yaml"))
    for content, changed in (('{"mean": [0.0], "std": [1.0]}\n', False), ('{"mean": [5.0], "std": [2.0]}\n', True)):
        (tmp_path / "new.json").write_text(content)
        features = dataclasses.replace(experiment.data.features, cmvn=str(tmp_path / "new.json"))
        now = dataclasses.replace(experiment, data=dataclasses.replace(experiment.data, features=features))
        message = start_over_if_changed(now, str(exp), load_experiment, "data")
        assert (message is not None and "the CMVN statistics" in message) == changed, message
