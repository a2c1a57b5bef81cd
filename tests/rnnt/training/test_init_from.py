"""train.init_from: a run starts from another experiment's weights, its units matched by name."""

import hashlib
import json
import logging
import shutil

import pytest
import torch
import yaml
from conftest import run_tool
from yesno_training import config_file, train_args

from rnnt.model.transducer import JoinerConfig, LossConfig, ModelConfig, Transducer
from rnnt.training import checkpoint
from rnnt.training.init_from import initialise_from, unit_tensor_names


def test_a_run_starts_from_another_experiments_weights_with_units_matched_by_name(yesno, tmp_path):
    source_exp = tmp_path / "source"
    out = run_tool(*train_args(yesno, source_exp, config_file(tmp_path, epochs=1)))
    assert out.returncode == 0, out.stderr
    source = checkpoint.load(str(source_exp / "epoch-1.pt"))["model"]

    # the target's units: YES and NO swapped, and one the source never had
    lang = tmp_path / "lang"
    shutil.copytree(yesno / "lang", lang)
    (lang / "units.txt").write_text("<blank> 0\n<unk> 1\nYES 2\nMAYBE 3\nNO 4\n")
    source_units = dict(line.split() for line in (source_exp / "lang" / "units.txt").read_text().splitlines())
    assert source_units["NO"] == "2" and source_units["YES"] == "3"
    conf = config_file(tmp_path, epochs=1, init_from=str(source_exp / "epoch-1.pt"),
                       optimizer={"type": "adam", "lr": 0.0})  # lr 0: epoch-1.pt holds the starting weights
    target_exp = tmp_path / "target"
    args = train_args(yesno, target_exp, conf)
    out = run_tool(*args[:args.index("--lang-dir") + 1], str(lang), *args[args.index("--lang-dir") + 2:])
    assert out.returncode == 0, out.stderr
    log = (target_exp / "train.log").read_text()
    assert "4 of 5 units by name; 0 it lacks and 0 of another shape left as they were)" in log
    target = checkpoint.load(str(target_exp / "epoch-1.pt"))["model"]

    # parameters, not the input batch norm's running statistics, which training at lr 0 still moves
    shared = [k for k in target if k in source and target[k].shape == source[k].shape and "running" not in k
              and "num_batches" not in k]
    assert len(shared) > 10 and any(k.startswith("encoder.") for k in shared)
    for name in shared:
        torch.testing.assert_close(target[name], source[name], msg=name)
    rows = {"<blank>": (0, 0), "<unk>": (1, 1), "YES": (2, 3), "NO": (4, 2)}
    for layer in ("ctc.weight", "ctc.bias", "joiner.output.weight", "joiner.output.bias", "predictor.embedding.weight"):
        assert target[layer].shape[0] == 5 and source[layer].shape[0] == 4
        for unit, (to_row, from_row) in rows.items():
            torch.testing.assert_close(target[layer][to_row], source[layer][from_row], msg=f"{layer} {unit}")
        assert not any(torch.equal(target[layer][3], source[layer][row]) for row in range(4))  # MAYBE: fresh


@pytest.mark.slow
def test_a_resumed_run_keeps_its_own_weights(yesno, tmp_path):
    source_exp = tmp_path / "source"
    assert run_tool(*train_args(yesno, source_exp, config_file(tmp_path, epochs=1))).returncode == 0
    conf = config_file(tmp_path, epochs=2, init_from=str(source_exp / "epoch-1.pt"))
    values = yaml.safe_load(conf.read_text())
    values["train"]["epochs"] = 1
    first = tmp_path / "first.yaml"
    first.write_text(yaml.safe_dump(values))
    exp = tmp_path / "exp"
    assert run_tool(*train_args(yesno, exp, first)).returncode == 0
    out = run_tool(*train_args(yesno, exp, conf), "--resume")
    assert out.returncode == 0, out.stderr
    log = (exp / "train.log").read_text()
    assert log.count("initialised") == 1 and "resumed from" in log  # the weights of its own epoch 1
    assert checkpoint.load_meta(str(exp / "epoch-2.pt"))["epoch"] == 2


@pytest.mark.slow
def test_a_new_checkpoint_to_start_from_trains_anew(yesno, tmp_path):
    """The checkpoint init_from names trained again (the same path, new weights): the run that started from
    the old one is set aside and training starts anew from the new one, not resumed; its SHA-256 is in
    config.yaml."""
    source_exp, source_conf = tmp_path / "source", tmp_path / "source_conf"
    source_conf.mkdir()
    assert run_tool(*train_args(yesno, source_exp, config_file(source_conf, epochs=1))).returncode == 0
    init = source_exp / "epoch-1.pt"
    conf = config_file(tmp_path, epochs=1, init_from=str(init))
    exp = tmp_path / "exp"
    assert run_tool(*train_args(yesno, exp, conf)).returncode == 0
    saved = yaml.safe_load((exp / "config.yaml").read_text())["train"]
    assert saved["init_from_sha256"] == hashlib.sha256(init.read_bytes()).hexdigest()
    out = run_tool(*train_args(yesno, exp, conf), "--resume")  # nothing new: complete, nothing retrained
    assert out.returncode == 0 and not (tmp_path / "exp.1").exists(), out.stderr
    shutil.rmtree(source_exp)
    assert run_tool(*train_args(yesno, source_exp, config_file(source_conf, epochs=1, seed=5))).returncode == 0
    out = run_tool(*train_args(yesno, exp, conf), "--resume")
    assert out.returncode == 0, out.stderr
    assert "train.init_from_sha256" in out.stderr + (exp / "train.log").read_text()
    assert (tmp_path / "exp.1" / "epoch-1.pt").is_file()  # the old run, set aside whole
    assert "initialised" in (exp / "train.log").read_text()
    saved = yaml.safe_load((exp / "config.yaml").read_text())["train"]
    assert saved["init_from_sha256"] == hashlib.sha256(init.read_bytes()).hexdigest()


def test_a_missing_checkpoint_stops_the_run_with_its_name(yesno, tmp_path):
    conf = config_file(tmp_path, epochs=1, init_from=str(tmp_path / "nowhere" / "avg-5.pt"))
    out = run_tool(*train_args(yesno, tmp_path / "exp", conf))
    assert out.returncode == 1
    assert "no checkpoint" in out.stderr and "nowhere/avg-5.pt" in out.stderr


@pytest.mark.parametrize("loss", ["full", "pruned"])
def test_unit_tensors_are_found_by_layer_not_by_size(loss):
    # a joiner as wide as the vocabulary: its projections are not per unit, though sized like it
    model = Transducer(ModelConfig(joiner=JoinerConfig(hidden=16), loss=LossConfig(type=loss, ctc_weight=0.5)), 16)
    names = unit_tensor_names(model)
    expected = {"ctc.weight", "ctc.bias", "joiner.output.weight", "joiner.output.bias", "predictor.embedding.weight"}
    if loss == "pruned":
        expected |= {"simple_am.weight", "simple_am.bias", "simple_lm.weight", "simple_lm.bias"}
    assert names == expected
    assert model.joiner.enc_proj.out_features == 16


def source_experiment(tmp_path, units: list[str], unit_type: str = "phone", ema: bool = False):
    """An experiment dir holding avg-1.pt of a small CTC model over `units` (after <blank> and <unk>)."""
    torch.manual_seed(1)
    model = Transducer(ModelConfig(loss=LossConfig(type="ctc")), len(units) + 2)
    weights = model.state_dict()
    state = {"model": weights, "meta": {}, "ema": {k: v + 1 for k, v in weights.items()} if ema else None}
    (tmp_path / "lang").mkdir()
    names = ["<blank>", "<unk>", *units]
    (tmp_path / "lang" / "units.txt").write_text("".join(f"{u} {i}\n" for i, u in enumerate(names)))
    (tmp_path / "lang" / "units.json").write_text(json.dumps({"type": unit_type}))
    checkpoint.save(str(tmp_path / "avg-1.pt"), state)
    return tmp_path / "avg-1.pt", state


def test_the_ema_weights_are_taken_when_the_checkpoint_kept_them(tmp_path):
    path, state = source_experiment(tmp_path, ["AA", "B"], ema=True)
    torch.manual_seed(2)
    model = Transducer(ModelConfig(loss=LossConfig(type="ctc")), 4)
    initialise_from(model, str(path), {"<blank>": 0, "<unk>": 1, "B": 2, "AA": 3})
    torch.testing.assert_close(model.ctc.weight[2], state["ema"]["ctc.weight"][3])
    torch.testing.assert_close(model.ctc.weight[3], state["ema"]["ctc.weight"][2])
    name = "encoder.pre.lstms.0.weight_ih_l0"
    torch.testing.assert_close(model.state_dict()[name], state["ema"][name])


def test_a_units_file_longer_than_the_checkpoint_is_refused_with_both_names(tmp_path):
    path, _ = source_experiment(tmp_path, ["AA", "B"])
    with open(tmp_path / "lang" / "units.txt", "a") as f:
        f.write("CH 4\n")
    model = Transducer(ModelConfig(loss=LossConfig(type="ctc")), 5)
    with pytest.raises(ValueError, match=r"units.txt has 5 units, but ctc\.weight .* has 4 rows"):
        initialise_from(model, str(path), {"<blank>": 0, "<unk>": 1, "AA": 2, "B": 3, "CH": 4})


def test_units_of_another_type_are_matched_with_a_warning(tmp_path, caplog):
    path, _ = source_experiment(tmp_path, ["A", "B"], unit_type="char")
    model = Transducer(ModelConfig(loss=LossConfig(type="ctc")), 4)
    with caplog.at_level(logging.WARNING, logger="rnnt.train"):
        summary = initialise_from(model, str(path), {"<blank>": 0, "<unk>": 1, "A": 2, "B": 3}, "phone")
    assert "4 of 4 units by name" in summary
    assert "over char units, this run over phone" in caplog.text
