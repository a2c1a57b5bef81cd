"""rnnt.training.trainer_checkpoints through a real Trainer (a small yesno model, real audio, real optimiser
steps) in this process: what a checkpoint holds, which step files are kept and which epoch files slimmed,
what resume() picks and restores, what it refuses, and a fresh start from another experiment's weights."""

import copy
import dataclasses
import json
import random
import re
import shutil
from pathlib import Path

import pytest
import torch
import yaml

from conftest import ROOT
from rnnt.data.loader import LoaderPosition
from rnnt.training import checkpoint
from rnnt.training.experiment import load_experiment
from rnnt.training.stop import StopTraining
from rnnt.training.trainer import Trainer
from rnnt.training.trainer_checkpoints import saved_positions

CONFIG = ROOT / "egs" / "yesno" / "conf" / "tiny.yaml"


@pytest.fixture
def yesno_small(tmp_path, test_data):
    """A raw list of 4 yesno recordings (their names spell the words, 1 YES, 0 NO), each cut to its first 2 s
    (of 6: the steps need a real loss, not a right one, and the LSTMs' time is most of this module's), and
    word units. The trainers built on it flush subnormal floats; after the test they are kept again."""
    waves = sorted((test_data / "waves_yesno").glob("*.wav"))[:4]
    words = {"0": "NO", "1": "YES"}
    (tmp_path / "train.list").write_text("".join(
        json.dumps({"key": w.stem, "wav": str(w), "txt": " ".join(words[d] for d in w.stem.split("_")),
                    "start": 0.0, "end": 2.0}) + "\n" for w in waves))
    lang = tmp_path / "lang"
    lang.mkdir()
    (lang / "units.txt").write_text("<blank> 0\n<unk> 1\nNO 2\nYES 3\n")
    (lang / "units.json").write_text(json.dumps({"type": "word"}))
    yield tmp_path
    torch.set_flush_denormal(False)  # the trainers built here flush subnormals; later tests keep them


def make_trainer(root: Path, name: str, data=None, **train) -> Trainer:
    """The yesno recipe's tiny config with a smaller model, batches of 2 (2 an epoch), the train keys given."""
    values = yaml.safe_load(CONFIG.read_text())
    values["model"]["encoder"]["hidden"] = values["model"]["joiner"]["hidden"] = 32
    values["data"] = {**values["data"], "batch": {"type": "static", "batch_size": 2}, **(data or {})}
    values["train"] = {**values["train"], "log_every": 1000, **train}
    path = root / f"{name}.yaml"
    path.write_text(yaml.safe_dump(values))
    experiment = load_experiment(str(path), train_list=str(root / "train.list"), lang_dir=str(root / "lang"))
    return Trainer(experiment, str(root / name))


def train_steps(trainer: Trainer, n: int) -> None:
    """n optimiser steps of one batch each, through the trainer's own loader and step (a new epoch starts
    with a new position, as in Trainer.train_epoch)."""
    if trainer.batch == 0:
        trainer.position = LoaderPosition(trainer.experiment.data.num_workers)
    trainer.loader.dataset.set_epoch(trainer.epoch, trainer.position if trainer.batch else None)
    for _, batch in zip(range(n), trainer.loader):
        trainer.train_batch(batch, 1.0, delivered=batch)
        assert trainer.optimizer_step() is not None


def end_epoch(trainer: Trainer) -> None:
    trainer.batch, trainer.epoch = 0, trainer.epoch + 1
    trainer.save(checkpoint.name("epoch", trainer.epoch))


def names(exp: Path) -> list[str]:
    return sorted(p.name for p in exp.glob("*.pt"))


def equal_states(a: dict, b: dict) -> bool:
    return a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)


def test_a_checkpoint_holds_everything_an_exact_resume_needs(yesno_small):
    trainer = make_trainer(yesno_small, "exp", ema_decay=0.9)
    train_steps(trainer, 1)
    trainer.valid_result = {"valid_loss": 1.5, "valid_wer": 75.0}
    trainer.save("step-1.pt")
    state = checkpoint.load(str(yesno_small / "exp" / "step-1.pt"))
    assert set(state) == {"model", "ema", "optimizer", "scheduler", "scaler", "rng", "meta"}
    assert equal_states(state["model"], trainer.model.state_dict())
    assert equal_states(state["ema"], trainer.ema.state_dict()) and not equal_states(state["ema"], state["model"])
    assert len(state["optimizer"]["state"]) == len(list(trainer.model.parameters()))  # Adam's moments, each
    assert state["scheduler"]["last_epoch"] == 1
    assert len(state["rng"]) == 1 and torch.equal(state["rng"][0]["torch"], torch.get_rng_state())
    meta = state["meta"]
    assert (meta["step"], meta["epoch"], meta["batch"]) == (1, 0, 1)
    assert meta["loader_positions"] == [{"counts": [1], "cycle": [0], "next": 0}]  # one a rank
    assert meta["train_data"] == trainer.train_data and meta["bad_in_row"] == 0
    assert (meta["valid_loss"], meta["valid_wer"]) == (1.5, 75.0)
    assert "saved step-1.pt (after 0 epochs and 1 batches, step 1)" in (yesno_small / "exp" / "train.log").read_text()


def test_only_the_newest_step_checkpoints_are_kept(yesno_small):
    trainer = make_trainer(yesno_small, "exp", keep_checkpoints=2, keep_whole_epochs=0)
    exp = yesno_small / "exp"
    for step in range(1, 6):
        trainer.step = step
        trainer.save(checkpoint.name("step", step))
        assert names(exp) == [f"step-{s}.pt" for s in range(max(1, step - 1), step + 1)]
    trainer.step = 6
    end_epoch(trainer)  # epoch files are not step files: none removed for it, none counted
    trainer.step = 7
    trainer.save("step-7.pt")
    assert names(exp) == ["epoch-1.pt", "step-5.pt", "step-7.pt"]


def test_epochs_before_the_newest_kept_whole_keep_their_weights_alone(yesno_small):
    trainer = make_trainer(yesno_small, "exp", keep_whole_epochs=2, ema_decay=0.9)
    exp = yesno_small / "exp"
    weights = {}
    for epoch in (1, 2, 3):
        train_steps(trainer, 1)
        trainer.save(checkpoint.name("step", trainer.step))  # a step file alone slims nothing
        assert not any(checkpoint.load_meta(str(p)).get("slimmed") for p in exp.glob("epoch-*.pt"))
        end_epoch(trainer)
        weights[epoch] = {k: v.clone() for k, v in trainer.model.state_dict().items()}
    first = checkpoint.load(str(exp / "epoch-1.pt"))
    assert sorted(first) == ["ema", "meta", "model"] and first["meta"]["slimmed"] is True
    assert equal_states(first["model"], weights[1]) and first["meta"]["step"] == 1  # what averaging reads
    for epoch in (2, 3):
        whole = checkpoint.load(str(exp / f"epoch-{epoch}.pt"))
        assert {"optimizer", "scheduler", "scaler", "rng"} <= whole.keys() and "slimmed" not in whole["meta"]
        assert equal_states(whole["model"], weights[epoch])


def test_resume_takes_the_checkpoint_with_the_most_steps_and_restores_all_of_it(yesno_small):
    first = make_trainer(yesno_small, "exp", keep_checkpoints=5)
    exp = yesno_small / "exp"
    train_steps(first, 2)
    end_epoch(first)  # epoch-1.pt: step 2
    train_steps(first, 1)
    torch.rand(7), random.random()  # what dropout and the pipeline would have drawn
    first.bad_batches.skip("non-finite loss")  # a batch skipped just before: train.max_bad_steps counts on
    first.save("step-3.pt")  # inside epoch 2, after its first batch
    saved = {"model": {k: v.clone() for k, v in first.model.state_dict().items()},
             "optimizer": copy.deepcopy(first.optimizer.state_dict()), "rng": torch.get_rng_state(),
             "python_rng": random.getstate()}
    train_steps(first, 1)  # step 4, never saved
    old = exp / "step-1.pt"  # an older step file written last: the steps decide, not the file's time
    shutil.copy(exp / "step-3.pt", old)
    state = checkpoint.load(str(old))
    checkpoint.save(str(old), {**state, "meta": {**state["meta"], "step": 1}})

    second = make_trainer(yesno_small, "exp", keep_checkpoints=5)  # a new process: its RNGs elsewhere
    random.seed(123)
    assert not torch.equal(torch.get_rng_state(), saved["rng"]) and random.getstate() != saved["python_rng"]
    assert not equal_states(second.model.state_dict(), saved["model"])
    assert second.resume() is True
    assert (second.step, second.epoch, second.batch) == (3, 1, 1)
    assert equal_states(second.model.state_dict(), saved["model"])
    moments = second.optimizer.state_dict()["state"]
    assert all(equal_states(moments[i], saved["optimizer"]["state"][i]) for i in moments) and moments
    assert second.scheduler.last_epoch == 3
    assert (second.bad_batches.in_row, second.bad_batches.counts["non-finite loss"]) == (1, 1)
    assert second.position.state_dict() == {"counts": [1], "cycle": [0], "next": 0}
    assert torch.equal(torch.get_rng_state(), saved["rng"]) and random.getstate() == saved["python_rng"]
    assert re.search(r"resumed from .*/exp/step-3\.pt: after 1 epochs and 1 batches, step 3",
                     (exp / "train.log").read_text())

    train_steps(second, 1)  # the step the first run took from there, taken again: the same weights
    assert equal_states(second.model.state_dict(), first.model.state_dict())


def test_nothing_to_resume_leaves_the_fresh_start(yesno_small):
    trainer = make_trainer(yesno_small, "exp")
    fresh = {k: v.clone() for k, v in trainer.model.state_dict().items()}
    (yesno_small / "exp" / "step-9.pt").write_bytes(b"not a checkpoint")  # unreadable: not one to resume
    assert trainer.resume() is False
    assert (trainer.step, trainer.epoch, trainer.batch) == (0, 0, 0)
    assert equal_states(trainer.model.state_dict(), fresh)


def test_a_slimmed_epoch_cannot_be_resumed_from(yesno_small):
    trainer = make_trainer(yesno_small, "exp", keep_whole_epochs=1)
    train_steps(trainer, 1)
    end_epoch(trainer)
    end_epoch(trainer)  # an epoch of no steps: epoch-1 slimmed, epoch-2 whole with the same step
    assert checkpoint.latest(str(yesno_small / "exp")).endswith("epoch-2.pt")
    (yesno_small / "exp" / "epoch-2.pt").unlink()
    with pytest.raises(StopTraining, match=r"epoch-1\.pt holds the weights alone .* train\.init_from"):
        make_trainer(yesno_small, "exp", keep_whole_epochs=1).resume()


def test_a_checkpoint_of_other_units_or_another_model_is_not_resumed(yesno_small):
    """Checkpoints copied into an exp dir without its config.yaml (nothing to compare a config with): one trained
    with other units resumed in silence (and the next checkpoint recorded the new units), one of another model's
    shapes was torch's traceback."""
    trainer = make_trainer(yesno_small, "exp")
    train_steps(trainer, 1)
    end_epoch(trainer)
    (yesno_small / "lang" / "units.txt").write_text("<blank> 0\n<unk> 1\nYES 2\nNO 3\n")  # the same size
    with pytest.raises(StopTraining, match=r"epoch-1\.pt was trained with other units than .*lang's units\.txt"):
        make_trainer(yesno_small, "exp").resume()
    (yesno_small / "lang" / "units.txt").write_text("<blank> 0\n<unk> 1\nNO 2\nYES 3\n")
    path = yesno_small / "exp" / "epoch-1.pt"
    state = checkpoint.load(str(path))
    name = next(iter(state["model"]))
    state["model"][name] = torch.zeros(3)
    checkpoint.save(str(path), state)
    with pytest.raises(StopTraining, match=rf"epoch-1\.pt holds another model than this config's \(.*{name}"):
        make_trainer(yesno_small, "exp").resume()


def test_inside_an_epoch_other_workers_resume_from_the_epoch_checkpoint_before(yesno_small, caplog):
    """A step checkpoint's data position holds for its workers only: another number of them resumes from the newest
    epoch checkpoint, saying so (a run restarted on other nodes after a preemption was refused until the step files
    were deleted by hand); with none, refused."""
    trainer = make_trainer(yesno_small, "exp")
    train_steps(trainer, 1)
    trainer.save("step-1.pt")  # one worker (in the training process), at batch 1
    other = make_trainer(yesno_small, "exp", data={"num_workers": 2})
    with pytest.raises(StopTraining, match="stopped inside epoch 1 with 1 ranks of 1 data workers, this run has 1 of "
                                           "2, and there is no epoch checkpoint; resume with those"):
        other.resume()
    train_steps(trainer, 1)
    end_epoch(trainer)  # at an epoch's end there is no position to keep: any number of workers resumes
    other = make_trainer(yesno_small, "exp", data={"num_workers": 2})
    assert other.resume() and (other.step, other.epoch, other.batch) == (2, 1, 0)
    assert other.position.counts == [0, 0]  # a fresh position for the next epoch
    train_steps(trainer, 1)
    trainer.save("step-3.pt")
    other = make_trainer(yesno_small, "exp", data={"num_workers": 2})
    assert other.resume() and (other.step, other.epoch, other.batch) == (2, 1, 0)
    assert "step-3.pt stopped inside epoch 2 with 1 ranks of 1 data workers, this run has 1 of 2: resuming from " \
           f"{yesno_small / 'exp' / 'epoch-1.pt'} instead" in caplog.text
    # the step checkpoint passed over set aside: newer than this run's own, it would have outranked them (pruned
    # them as they were written, been resumed and decoded in their place)
    assert "1 newer step checkpoints set aside as step-N.pt.set-aside" in caplog.text
    assert sorted(p.name for p in (yesno_small / "exp").glob("step-*")) == ["step-1.pt", "step-3.pt.set-aside"]
    train_steps(other, 1)
    other.save("step-3.pt")  # this run's own, of its two workers
    newest = checkpoint.latest(str(yesno_small / "exp"))
    assert newest.endswith("step-3.pt") and len(saved_positions(checkpoint.load_meta(newest))[0]["counts"]) == 2


def test_inside_an_epoch_each_rank_takes_its_own_position_and_the_ranks_must_be_as_many(yesno_small):
    """A checkpoint holds every rank's data position (each reads its own part; torchrun's test resumes ranks from
    theirs); a run with another number of ranks does not take it, as their parts differ. A checkpoint from before
    positions were kept per rank (one 'loader_position') still resumes in one process."""
    trainer = make_trainer(yesno_small, "exp")
    train_steps(trainer, 1)
    trainer.save("step-1.pt")
    path = yesno_small / "exp" / "step-1.pt"
    state = checkpoint.load(str(path))
    two_ranks = copy.deepcopy(state)
    two_ranks["rng"] = state["rng"] * 2
    other_rank = {"counts": [5], "cycle": [0], "next": 0}
    two_ranks["meta"]["loader_positions"] = state["meta"]["loader_positions"] + [other_rank]
    checkpoint.save(str(path), two_ranks)
    other = make_trainer(yesno_small, "exp")
    with pytest.raises(StopTraining, match="inside epoch 1 with 2 ranks of 1 data workers, this run has 1 of 1"):
        other.resume()
    old = copy.deepcopy(state)
    old["meta"]["loader_position"] = old["meta"].pop("loader_positions")[0]
    checkpoint.save(str(path), old)
    other = make_trainer(yesno_small, "exp")
    assert other.resume() and other.position.counts == [1] and other.batch == 1


def test_ema_kept_is_restored_and_ema_switched_on_starts_from_the_resumed_weights(yesno_small):
    with_ema = make_trainer(yesno_small, "ema", ema_decay=0.9)
    train_steps(with_ema, 2)
    with_ema.save("step-2.pt")
    resumed = make_trainer(yesno_small, "ema", ema_decay=0.9)
    assert resumed.resume()
    assert equal_states(resumed.ema.state_dict(), with_ema.ema.state_dict())
    assert not equal_states(resumed.ema.state_dict(), resumed.model.state_dict())

    plain = make_trainer(yesno_small, "plain")
    train_steps(plain, 2)
    plain.save("step-2.pt")
    switched_on = make_trainer(yesno_small, "plain", ema_decay=0.9)
    assert switched_on.resume()
    assert equal_states(switched_on.ema.state_dict(), plain.model.state_dict())


def test_a_fresh_start_from_another_experiments_weights(yesno_small):
    source = make_trainer(yesno_small, "source")
    train_steps(source, 1)
    shutil.copytree(yesno_small / "lang", yesno_small / "source" / "lang")  # as a trained experiment holds it
    end_epoch(source)
    target = make_trainer(yesno_small, "target", ema_decay=0.9)
    target.start_from(str(yesno_small / "source" / "epoch-1.pt"))
    assert equal_states(target.model.state_dict(), source.model.state_dict())
    assert equal_states(target.ema.state_dict(), source.model.state_dict())  # the EMA starts from them
    assert target.step == 0 and not target.optimizer.state_dict()["state"]  # nothing else is taken
    with pytest.raises(StopTraining, match=r"train.init_from: no checkpoint .*/source/epoch-9\.pt"):
        target.start_from(str(yesno_small / "source" / "epoch-9.pt"))


def test_an_epoch_or_a_validation_with_no_usable_utterance_stops_training(yesno_small):
    """A training list of unreadable audio stops training with a message instead of running no step and saving
    checkpoints; a validation list of it, instead of a WER of 0% over 0. (A raw list naming only files that are gone
    is refused before: rnnt.training.config_change.training_data_of.)"""
    from rnnt.data.pipeline import Pipeline
    from rnnt.training.validation import validate

    root = yesno_small / "unreadable"
    shutil.copytree(yesno_small / "lang", root / "lang")
    (root / "elsewhere").mkdir()
    for wav in re.findall(r'"wav": "[^"]*/([^"/]*)"', (yesno_small / "train.list").read_text()):
        (root / "elsewhere" / wav).write_bytes(b"not audio")
    (root / "train.list").write_text(re.sub(r'"wav": "[^"]*/', f'"wav": "{root}/elsewhere/',
                                            (yesno_small / "train.list").read_text()))
    trainer = make_trainer(root, "exp", epochs=1)
    with pytest.raises(StopTraining, match=f"^epoch 1: no usable utterance in {root / 'train.list'}$"):
        trainer.train_epoch()
    for gone in (root / "elsewhere").iterdir():
        gone.unlink()
    with pytest.raises(StopTraining, match=f"^{root / 'train.list'} names 4 file\\(s\\) that are gone, the first at "
                                           f"{root / 'train.list'}:1 \\({root}/elsewhere/.*, ...\\): make the list"):
        make_trainer(root, "exp2", epochs=1)
    nothing = Pipeline(str(root / "train.list"), trainer.experiment.data, trainer.tokenizer, False).batches()
    with pytest.raises(StopTraining, match="^validation: no usable utterance in the validation list"):
        validate(trainer.model, nothing, trainer.tokenizer, torch.device("cpu"))
    # a validation list of which nothing is usable stops the run before it trains, not after the first epoch (whose
    # end validates before it saves: the epoch was lost)
    for wav in re.findall(r'"wav": "[^"]*/([^"/]*)"', (yesno_small / "train.list").read_text()):
        (root / "elsewhere" / wav).write_bytes(b"not audio")
    experiment = load_experiment(str(root / "exp.yaml"), train_list=str(yesno_small / "train.list"),
                                 valid_list=str(root / "train.list"), lang_dir=str(root / "lang"))
    with pytest.raises(StopTraining, match=f"^{root / 'train.list'}: no usable utterance in the validation list"):
        Trainer(experiment, str(root / "exp3"))


def test_a_training_logs_each_bad_line_and_missing_recording_of_its_list_once(yesno_small):
    """A raw list's bad line was printed three times (the list read for its fingerprint, the files it names and its
    utterances), twice before train.log began; one missing recording refused the whole list."""
    lines = (yesno_small / "train.list").read_text().splitlines()
    gone = json.loads(lines[1])["wav"].replace(".wav", "_gone.wav")
    lines[1] = json.dumps({**json.loads(lines[1]), "wav": gone})
    (yesno_small / "train.list").write_text("\n".join(lines[:1] + ["{not json"] + lines[1:]) + "\n")
    trainer = make_trainer(yesno_small, "exp", epochs=1)
    trainer.train_epoch()
    log = (yesno_small / "exp" / "train.log").read_text()
    assert log.count(f"{yesno_small / 'train.list'}:2: skipped, not a {{key, wav, txt}} object") == 1, log
    assert log.count(f"{yesno_small / 'train.list'}:3: {gone} is gone; its utterance is skipped") == 1, log
    assert f"{yesno_small / 'train.list'}: 1 of its 4 recordings are gone (1 named above), skipped" in log


def test_validation_reads_what_decoding_reads_whatever_data_filter_leaves_out_of_training(yesno_small):
    """data.filter (max_duration 16.7 s in an MLPerf config) left dev's long utterances out of the validation loss
    and WER, which the best epochs are chosen by, while decoding reads them all."""
    from rnnt.training.validation import validation_pipeline

    trainer = make_trainer(yesno_small, "exp", data={"filter": {"max_duration": 1.0}})  # yesno's are ~6 s
    experiment = dataclasses.replace(trainer.experiment, paths=dataclasses.replace(
        trainer.experiment.paths, valid_list=str(yesno_small / "train.list")))
    lengths = {"output_frames": experiment.model.encoder.output_frames,
               "units_per_frame": experiment.model.loss.units_per_frame()}
    valid = validation_pipeline(experiment, trainer.tokenizer, lengths, None)
    keys = [key for batch in valid.batches() for key in batch["keys"]]
    assert len(keys) == len((yesno_small / "train.list").read_text().splitlines())
    assert not list(trainer.train_pipeline.batches())  # training: every one longer than data.filter.max_duration


def test_a_validation_batch_out_of_memory_is_left_out_and_counted(yesno_small, monkeypatch, caplog):
    """Validation takes dev's longest utterances (no data.filter): one out of memory ended the run at the epoch's
    end, before its checkpoint, and every resume met it again."""
    from rnnt.training import validation

    trainer = make_trainer(yesno_small, "exp")
    experiment = dataclasses.replace(trainer.experiment, paths=dataclasses.replace(
        trainer.experiment.paths, valid_list=str(yesno_small / "train.list")))
    lengths = {"output_frames": experiment.model.encoder.output_frames,
               "units_per_frame": experiment.model.loss.units_per_frame()}
    batches = list(validation.validation_pipeline(experiment, trainer.tokenizer, lengths, None).batches())
    assert len(batches) > 1
    whole = validation.validate(trainer.model, batches, trainer.tokenizer, torch.device("cpu"))
    real, calls = validation.batch_loss_and_hypotheses, []

    def out_of_memory_once(model, batch, device, wer):
        calls.append(batch["keys"])
        if len(calls) == 1:
            raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 20.00 GiB")
        return real(model, batch, device, wer)

    monkeypatch.setattr(validation, "batch_loss_and_hypotheses", out_of_memory_once)
    result = validation.validate(trainer.model, batches, trainer.tokenizer, torch.device("cpu"))
    assert result["skipped_out_of_memory"] == len(batches[0]["keys"])
    assert result["utterances"] == whole["utterances"] - len(batches[0]["keys"])
    assert "validation: out of memory on a batch of feats" in caplog.text
    trainer.progress.validated(1, 5, result, ema=False)
    assert f"({len(batches[0]['keys'])} left out: out of memory)" in caplog.text


def test_a_batch_of_weight_0_moves_no_batch_norm_statistics(yesno_small):
    """A rank that has run out repeats a batch with weight 0 while the others finish the epoch: its gradient
    is 0, and its input batch norm's running statistics stay as they were (rank 0's are every rank's and
    saved); a batch of weight 1 moves them."""
    trainer = make_trainer(yesno_small, "exp")
    trainer.position = LoaderPosition(trainer.experiment.data.num_workers)
    trainer.loader.dataset.set_epoch(0, None)
    batch = next(iter(trainer.loader))
    before = {k: v.clone() for k, v in trainer.model.state_dict().items() if "running" in k}
    assert before
    trainer.train_batch(batch, 0.0)
    assert all(torch.equal(trainer.model.state_dict()[k], v) for k, v in before.items()) and trainer.model.training
    trainer.train_batch(batch, 1.0)
    assert not all(torch.equal(trainer.model.state_dict()[k], v) for k, v in before.items())


def test_a_ranks_cuda_generator_is_saved_alone_and_restored_on_fewer_visible_devices(monkeypatch):
    """Every device's state was saved and restored by index: a resume on a machine with fewer GPUs visible (8
    saved, 4 now) raised IndexError. (Stands in for CUDA: the calls are torch.cuda's, their states tensors.)"""
    from rnnt.training import checkpoint

    devices = [torch.full((4,), float(i)) for i in range(4)]  # the generators of 4 visible devices
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "current_device", lambda: 2)
    monkeypatch.setattr(torch.cuda, "get_rng_state", lambda: devices[2].clone())
    monkeypatch.setattr(torch.cuda, "set_rng_state", lambda state: devices.__setitem__(2, state))
    saved = checkpoint.rng_state()
    assert torch.equal(saved["cuda"], torch.full((4,), 2.0))
    devices[2] = torch.zeros(4)
    checkpoint.set_rng_state(saved)
    assert torch.equal(devices[2], torch.full((4,), 2.0))
    before = dict(saved, cuda=[torch.full((4,), 10.0 + i) for i in range(8)])  # as saved before: all 8 devices
    checkpoint.set_rng_state(before)
    assert torch.equal(devices[2], torch.full((4,), 12.0))  # the saving rank's own device's, by index
    checkpoint.set_rng_state(dict(saved, cuda=[torch.zeros(4)]))  # its device not among them: left as it is
    assert torch.equal(devices[2], torch.full((4,), 12.0))


def test_a_run_ended_by_max_steps_inside_an_epoch_says_its_last_batches_are_in_no_epoch_checkpoint(yesno_small):
    """It said 'training done' alone: a recipe then averaged and decoded the epochs before, without those batches."""
    trainer = make_trainer(yesno_small, "exp", max_steps=3, epochs=5)  # 2 steps an epoch
    assert trainer.run() == 0
    assert sorted(p.name for p in (yesno_small / "exp").glob("*.pt")) == ["epoch-1.pt", "step-3.pt"]
    log = (yesno_small / "exp" / "train.log").read_text()
    assert ("training done: 3 steps, 1 epochs and 1 batches of epoch 2, kept in step-3.pt alone (epoch checkpoints, "
            "which averaging and the recipes decode, hold none of them)") in log
    trainer = make_trainer(yesno_small, "every3", max_steps=3, epochs=5, checkpoint_every=3)
    assert trainer.run() == 0  # the stop's checkpoint is checkpoint_every's: saved once, not twice
    assert (yesno_small / "every3" / "train.log").read_text().count("saved step-3.pt") == 1


def test_a_global_batch_its_filters_empty_is_no_step_and_its_place_is_recorded(yesno_small):
    """Bucketed, batches of 2 in one process: 2 global batches an epoch, one of them all unreadable audio. Its
    place is held (ranks stay on the same global batch), a step of weight 0 on the other batch: the group of no
    batch of weight 1 takes no optimiser step (it divided by the count of 0), and the position is the epoch's end."""
    from rnnt.data.bucketing import bucket_batches

    lines = [json.dumps({**json.loads(line), "duration": 2.0}) for line in
             (yesno_small / "train.list").read_text().splitlines()]
    (yesno_small / "train.list").write_text("".join(line + "\n" for line in lines))
    trainer = make_trainer(yesno_small, "exp", data={"buckets": 1})
    first = set(bucket_batches(lines, 1, 2, trainer.experiment.data.seed, 0)[0])
    (yesno_small / "bad.wav").write_bytes(b"RIFF, but no audio")
    (yesno_small / "train.list").write_text("".join(
        json.dumps({**json.loads(line), "wav": str(yesno_small / "bad.wav")}) + "\n" if line in first else line + "\n"
        for line in lines))
    trainer = make_trainer(yesno_small, "exp", data={"buckets": 1})
    assert trainer.train_epoch()
    assert trainer.step == 1 and trainer.position is not None and trainer.position.counts == [2]


def test_an_epoch_whose_last_group_is_skipped_after_a_validation_is_validated_again(yesno_small, monkeypatch):
    """Batches of 1, groups of 2, validation every step, no EMA: the epoch's second group has a non-finite
    gradient (no step). Its forward passes moved batch norm's statistics, yet the epoch reused the validation of
    step 1: epoch-1.pt carried the dev loss of weights it no longer has (patience and --best rank by it)."""
    from rnnt.data.splitting import Reader
    from rnnt.training.validation import validate

    values = yaml.safe_load(CONFIG.read_text())
    values["model"]["encoder"]["hidden"] = values["model"]["joiner"]["hidden"] = 32
    values["data"]["batch"] = {"type": "static", "batch_size": 1}
    values["train"] = {**values["train"], "epochs": 1, "accum_steps": 2, "valid_every": 1, "ema_decay": 0.0,
                       "log_every": 1000}
    (yesno_small / "stale.yaml").write_text(yaml.safe_dump(values))
    experiment = load_experiment(str(yesno_small / "stale.yaml"), train_list=str(yesno_small / "train.list"),
                                 valid_list=str(yesno_small / "train.list"), lang_dir=str(yesno_small / "lang"))
    trainer = Trainer(experiment, str(yesno_small / "exp"))
    real, calls = torch.nn.utils.clip_grad_norm_, []

    def second_not_finite(parameters, max_norm):
        calls.append(1)
        norm = real(parameters, max_norm)
        return torch.tensor(float("nan")) if len(calls) == 2 else norm

    monkeypatch.setattr(torch.nn.utils, "clip_grad_norm_", second_not_finite)
    trainer.run()
    saved = checkpoint.load(str(yesno_small / "exp" / "epoch-1.pt"))
    assert saved["meta"]["step"] == 1 and len(calls) == 2
    trainer.model.load_state_dict(saved["model"])
    again = validate(trainer.model, trainer.valid_pipeline.batches(reader=Reader()), trainer.tokenizer,
                     torch.device("cpu"), experiment.train.valid_wer)
    assert saved["meta"]["valid_loss"] == again["loss"]
