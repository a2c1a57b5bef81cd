"""Config mistakes refused when the config is loaded or before training, by key, with the fix and no traceback."""

import json
import shutil
import sys

import pytest
import torch
import yaml

from conftest import ROOT, run_tool
from rnnt.data.config import data_config
from rnnt.data.pipeline import Pipeline
from rnnt.data.tokenizer import Tokenizer
from rnnt.model.conformer import ConformerConfig
from rnnt.model.lstm_encoder import LSTMEncoderConfig
from rnnt.training.config_checks import frame_ms
from rnnt.training.experiment import load_experiment
from yesno_training import CONFIG, train_args


def write_config(tmp_path, edit):
    values = yaml.safe_load(CONFIG.read_text())
    edit(values)
    path = tmp_path / "conf.yaml"
    path.write_text(yaml.safe_dump(values))
    return path


def load_error(path) -> str:
    try:
        load_experiment(str(path))
    except ValueError as error:
        return str(error)
    return ""


def test_input_dim_must_be_the_features_times_stacking(tmp_path):
    def eighty_bins(values):
        values["data"]["features"]["num_mel_bins"] = 80
    error = load_error(write_config(tmp_path, eighty_bins))
    assert error.startswith(f"{tmp_path / 'conf.yaml'}: model.encoder.input_dim is 120, but a frame the pipeline "
                            "makes has data.features.num_mel_bins 80 x data.stack 3 = 240 features"), error
    assert "set model.encoder.input_dim: 240" in error


def test_a_conv_front_end_too_narrow_for_its_layers_is_refused(tmp_path):
    def narrow(values):
        values["data"].update(stack=1, subsample=1, features={"preset": "kaldi", "num_mel_bins": 6})
        values["model"]["encoder"].update(input_dim=6, conv_channels=4, conv_layers=2)
    error = load_error(write_config(tmp_path, narrow))
    assert "model.encoder.conv_layers 2 strided convolutions need a wider input than model.encoder.input_dim 6" in error


def test_a_share_of_the_utterance_as_a_fixed_time_mask_width_is_refused(tmp_path):
    """time_width 0.05 counts frames without adaptive: int(0.05) = 0, every time mask 0 frames wide, in silence."""
    def share(values):
        values["data"]["spec_augment"] = {"freq_masks": 2, "freq_width": 10, "time_masks": 2, "time_width": 0.05}
    error = load_error(write_config(tmp_path, share))
    assert "data.spec_augment.time_width counts frames unless adaptive: true, got 0.05" in error, error

    def adaptive(values):
        values["data"]["spec_augment"] = {"freq_masks": 2, "freq_width": 10, "adaptive": True, "time_width": 0.05}
    assert load_error(write_config(tmp_path, adaptive)) == ""


def test_the_recipes_configs_pass():
    for path in sorted(ROOT.glob("egs/*/conf/*.yaml")):
        values = yaml.safe_load(path.read_text())
        if set(values) <= {"model", "data", "train", "paths"}:  # not a search space (tune.yaml)
            assert load_error(path) == "", path


def test_output_frames_equal_the_encoders_real_lengths():
    for config in (LSTMEncoderConfig(input_dim=8, hidden=4, pre_layers=1, post_layers=1, stack_time=2),
                   LSTMEncoderConfig(input_dim=16, hidden=4, pre_layers=1, post_layers=0, stack_time=1,
                                     conv_channels=2),
                   LSTMEncoderConfig(input_dim=16, hidden=4, pre_layers=1, post_layers=1, stack_time=3,
                                     conv_channels=2, conv_layers=1),
                   ConformerConfig(input_dim=16, conv_channels=2, dim=8, layers=1, heads=2, kernel_size=3)):
        encoder = config.build().eval()
        frames = [1, 2, 3, 6, 7, 8, 31, 64]  # one padded batch, as training sees them
        _, lengths = encoder(torch.zeros(len(frames), 64, config.input_dim), torch.tensor(frames))
        assert [config.output_frames(n) for n in frames] == lengths.tolist(), config


def test_one_symbol_per_frame_against_the_units_rate_is_refused_before_training(yesno, tmp_path):
    """Characters at about 15 a second over yesno's 60 ms frames (16.7 a second): refused by train.py with the
    keys to change; the same transcripts at 10 a second pass."""
    conf = write_config(tmp_path, lambda values: None)
    assert frame_ms(load_experiment(str(conf))) == 60
    lang = tmp_path / "lang"
    shutil.copytree(yesno / "lang", lang)
    (lang / "unit_rate.json").write_text(json.dumps({"units_per_second": [10.0] * 90 + [17.5] * 10}))
    args = train_args(yesno, tmp_path / "exp", conf)
    args[args.index("--lang-dir") + 1] = str(lang)
    out = run_tool(*args)
    assert out.returncode == 1 and "Traceback" not in out.stderr, out.stderr[-2000:]
    assert ("model.loss.one_sym_per_frame: the encoder has 16.7 frames a second (10 ms features x data.subsample 3 "
            "x model.encoder.stack_time 2 = 60 ms a frame), but 10 of 100 training transcripts (10%) have more units "
            "a second") in out.stderr, out.stderr
    assert ("A frame of at most 57 ms holds them (the time reduction divided by 2 or more): lower data.subsample or "
            "the encoder's (model.encoder.stack_time") in out.stderr  # how far: 'lower' left a newcomer guessing
    assert not (tmp_path / "exp").exists()
    for damaged in ('{"units_per_second": [10.0, ', '{"units_per_second": ["a"]}', "[1, 2]"):  # tracebacks before
        (lang / "unit_rate.json").write_text(damaged)
        out = run_tool(*args)
        assert out.returncode == 1 and "Traceback" not in out.stderr, out.stderr[-2000:]
        assert f"{lang / 'unit_rate.json'}: not the units a second of the training transcripts (" in out.stderr


def test_build_units_writes_each_transcripts_rate(yesno, tmp_path):
    out = run_tool(sys.executable, ROOT / "steps" / "build_units.py", "--unit-type", "char",
                   yesno / "data" / "train_yesno", tmp_path / "lang")
    assert out.returncode == 0, out.stderr
    rates = json.loads((tmp_path / "lang" / "unit_rate.json").read_text())["units_per_second"]
    assert len(rates) == 30 and rates == sorted(rates)
    durations = dict(line.split() for line in (yesno / "data" / "train_yesno" / "utt2dur").read_text().splitlines())
    texts = dict(line.split(maxsplit=1) for line in (yesno / "data" / "train_yesno" / "text").read_text().splitlines())
    tokenizer = Tokenizer(str(tmp_path / "lang"))
    expected = sorted(round(len(tokenizer.encode(texts[u])) / float(d), 3) for u, d in durations.items())
    assert rates == expected and "units a second: median" in out.stdout


def test_the_pipeline_filter_drops_what_one_symbol_per_frame_cannot_train(yesno):
    """yesno's tiny model with StackTime 16 (480 ms frames): 8 words in 6 s need 8 of 13 frames: all kept;
    with StackTime 64 (1.9 s frames) none fits."""
    experiment = load_experiment(str(CONFIG))
    tokenizer = Tokenizer(str(yesno / "lang"))
    data = data_config({**yaml.safe_load(CONFIG.read_text())["data"], "shuffle_buffer": 0})
    for stack_time, expected in (16, 5), (64, 0):
        encoder = LSTMEncoderConfig(**{**vars(experiment.model.encoder), "stack_time": stack_time})
        pipeline = Pipeline(str(yesno / "five.list"), data, tokenizer, True, encoder.output_frames,
                            (1.0, "one symbol per frame", False))
        assert sum(len(b["keys"]) for b in pipeline.batches()) == expected


def test_values_are_checked_against_their_keys_types_and_ranges_naming_the_file(tmp_path):
    """Each mistake one message naming the file and the dotted key (or the YAML line), never a traceback or a
    value carried into training: a wrong type, a scalar for a section, a string for a list, zero counts, an
    unknown device, a clip of 0, a schedule that decays over 0 steps (a division by zero at the end of the
    warm-up) or by a rate of 0, adaptive SpecAugment with a width in frames (40: masks as long as the
    utterance); a key given twice; broken YAML. A number YAML reads as a string (1e-5) is
    the number a float key wants."""
    cases = {
        "train:\n  epochs: three\n": "train.epochs: expected a whole number, got 'three'",
        "train:\n  valid_wer: 1\n": "train.valid_wer: expected true or false, got 1",
        "model:\n  encoder: lstm\n": "model.encoder: expected a mapping, got 'lstm'",
        "data:\n  spec_augment: true\n": "data.spec_augment: expected a mapping or nothing, got True",
        "data:\n  speed_perturb: '0.9,1.1'\n": "data.speed_perturb: expected a list, got '0.9,1.1'",
        "data:\n  speed_perturb: [0.9, fast]\n": "data.speed_perturb[1]: expected a number, got 'fast'",
        "data:\n  batch: {type: static, batch_size: 0}\n": "data.batch.batch_size must be at least 1, got 0",
        "data:\n  sample_rate: 0\n": "data.sample_rate must be at least 1, got 0",
        "data:\n  speed_perturb: [0.9, 0, 1.1]\n": "data.speed_perturb factors must be positive and finite, got [0.9",
        "data:\n  speed_perturb: [.inf]\n": "data.speed_perturb factors must be positive and finite, got [inf]",
        "data:\n  shuffle_buffer: -1\n": "data.shuffle_buffer must be 0 or more and finite, got -1",
        "data:\n  tail_silence: .inf\n": "data.tail_silence must be 0 or more and finite, got inf",
        "data:\n  tail_silence: 1e9\n": "data.tail_silence is seconds of silence after each utterance decoded, "
                                          "at most 10, got 1e+09",
        "data:\n  spec_augment: {freq_masks: -2}\n": "data.spec_augment.freq_masks must be 0 or more and finite, "
                                                      "got -2",  # (range(-2): no mask, silently)
        # NaN passed every range check (a comparison with it is false): a grad_clip of NaN made every weight NaN
        "train:\n  grad_clip: .nan\n": "train.grad_clip: expected a number, got nan",
        "train:\n  grad_clip: nan\n": "train.grad_clip: expected a number, got nan",
        "data:\n  speed_perturb: [.nan]\n": "data.speed_perturb[0]: expected a number, got nan",
        "train:\n  epochs: 0\n  accum_steps: 0\n": "train.epochs must be at least 1, got 0; train.accum_steps must",
        "train:\n  device: gpu\n": "train.device must be one of auto, cpu, cuda, got 'gpu'",
        "train:\n  grad_clip: 0\n": "train.grad_clip must be above 0",
        "train:\n  max_steps: -1\n": "train.max_steps must be 0 (none) or more, got -1",  # it trained nothing
        "train:\n  log_every: 0\n": "train.log_every must be at least 1, got 0",  # a division by zero
        "train:\n  keep_checkpoints: 0\n": "train.keep_checkpoints must be at least 1, got 0",  # 0 kept them all
        "train:\n  ema_decay: 1.0\n": "train.ema_decay must be at least 0 (no EMA) and below 1, got 1.0",
        "data:\n  spec_augment: {adaptive: true}\n": "data.spec_augment.time_width is a share of the utterance when "
                                                   "adaptive (0.05: 5%), got 40",
        "data:\n  spec_augment: {max_time_share: 1.5}\n": "data.spec_augment.max_time_share is a share of the "
                                                        "utterance, above 0 and at most 1, got 1.5",
        "train:\n  schedule: {decay_steps: 0}\n": "train.schedule.decay_steps must be at least 1, got 0",
        "train:\n  schedule: {decay_rate: 0}\n": "train.schedule.decay_rate must be above 0 and at most 1, got 0",
        # these were a traceback of the trainer (an IndexError in Adam), a message without the file, or a
        # schedule that jumped down in silence
        "train:\n  optimizer: {lr: -0.001}\n": "train.optimizer.lr must be 0 (the weights held) or more, got -0.001",
        "train:\n  optimizer: {betas: [0.9]}\n": "train.optimizer.betas must be two numbers, each at least 0 and "
                                                 "below 1, got (0.9,)",
        "train:\n  optimizer: {type: sgd}\n": "train.optimizer.type must be one of adam, adamw, lamb, got 'sgd'",
        "train:\n  optimizer: {eps: 0}\n": "train.optimizer.eps must be above 0, got 0",
        "train:\n  schedule: {type: cosine}\n": "train.schedule.type must be one of mlperf, noam, constant, got",
        "train:\n  schedule: {hold_steps: -8}\n": "train.schedule.hold_steps must be 0 (none) or more, got -8",
        "train:\n  schedule: {min_lr: -1}\n": "train.schedule.min_lr must be 0 (none) or more, got -1",
        "train:\n  max_bad_steps: 0\n": "train.max_bad_steps must be at least 1, got 0",
        "train:\n  epoch: 3\n": "train: unknown keys ['epoch']",
        "train:\n  epochs: 30\ndata: {}\ntrain:\n  epochs: 5\n":
            ":4:1: not valid YAML (the key 'train' is given twice)",
        "train:\n  epochs: 3\n   lr: 2\n": ":3:6: not valid YAML (mapping values are not allowed here)",
    }
    for number, (text, message) in enumerate(cases.items()):
        path = tmp_path / f"{number}.yaml"
        path.write_text(text)
        error = load_error(path)
        assert error.startswith(str(path)) and message in error, (text, error)
    path = tmp_path / "cp1252.yaml"  # a comment saved in another encoding: named by line, not a bare codec error
    path.write_bytes(b"train:\n  epochs: 3\n  # caf\xe9\n")
    assert load_error(path) == f"{path}:3: byte 0xe9 is not UTF-8; save the file as UTF-8"
    path = tmp_path / "numbers.yaml"
    path.write_text("model:\n  encoder:\ntrain:\n  optimizer: {lr: 2e-3}\n  schedule: {min_lr: 1e-5}\n")
    experiment = load_experiment(str(path))
    assert (experiment.train.optimizer.lr, experiment.train.schedule.min_lr) == (0.002, 1e-5)
    assert experiment.model.encoder == LSTMEncoderConfig()  # a section with its keys commented out: the defaults


def test_the_units_are_compared_only_with_those_a_checkpoint_was_trained_with(tmp_path):
    """A run stopped while copying the lang dir left part of exp/lang: with no checkpoint nothing was trained
    with it, so the next run copies the units again (it refused them as different before); once a checkpoint
    exists, other units are refused, and with --resume the experiment is set aside and starts anew, as under
    another config (the recipes: another --vocab-size reruns just the stages it changes)."""
    from rnnt.training import checkpoint
    from rnnt.training.distributed import World
    from rnnt.training.config_change import start_over_if_changed
    from rnnt.training.experiment import adopt_inputs
    from rnnt.training.stop import StopTraining

    lang, exp = tmp_path / "lang", tmp_path / "exp"
    lang.mkdir()
    (lang / "units.txt").write_text("<blank> 0\n<unk> 1\nNO 2\nYES 3\n")
    (lang / "units.json").write_text(json.dumps({"type": "word"}))
    (exp / "lang").mkdir(parents=True)
    (exp / "lang" / "units.txt").write_text("<blank> 0\n")  # the part a stopped copy wrote
    experiment = load_experiment(str(CONFIG), lang_dir=str(lang))
    adopt_inputs(experiment, str(exp), World())
    assert sorted(p.name for p in (exp / "lang").iterdir()) == ["units.json", "units.txt"]
    assert (exp / "lang" / "units.txt").read_text() == (lang / "units.txt").read_text()
    assert yaml.safe_load((exp / "config.yaml").read_text())["paths"]["lang_dir"] == str(exp / "lang")
    torch.save({"model": {}, "meta": {"step": 3, "epoch": 0, "batch": 3}}, exp / "step-3.pt")
    assert checkpoint.latest(str(exp)) == str(exp / "step-3.pt")
    (lang / "units.txt").write_text("<blank> 0\n<unk> 1\nYES 2\nNO 3\n")
    with pytest.raises(StopTraining, match=f"{exp} was trained with other units or CMVN statistics: {lang}/units.txt "
                                           r"differ from its copies; use those, --resume \(it starts the experiment "
                                           r"over, the old one set aside\), or another"):
        adopt_inputs(experiment, str(exp), World())
    # --resume: start_over_if_changed sets it aside before adopt_inputs compares
    message = start_over_if_changed(experiment, str(exp), load_experiment, "")
    assert message.startswith(f"the config or data differ from those {exp} was trained with (the units: 'as trained "
                              f"({exp / 'lang'})' -> 'other units.txt ({lang})')")
    assert (tmp_path / "exp.1" / "step-3.pt").is_file() and not (exp / "lang").exists()


def test_a_changed_lexicon_or_sentencepiece_model_are_other_units_though_the_inventory_is_the_same(tmp_path):
    """Phones: the same phone set with a word's phones changed maps the same text to other targets; a
    sentencepiece model trained again from the same text, elsewhere (its bytes hold the path), splits text
    as the kept one does, and one that cannot be read differs."""
    from rnnt.training.config_change import units_differ

    data = tmp_path / "data"
    data.mkdir()
    (data / "text").write_text("".join(f"u{i:02d} {'NO YES' if i % 2 else 'YES NO NO'}\n" for i in range(20)))
    for name, lexicon in (("lang", "NO n o\nYES y e s\n"), ("other", "NO o n\nYES s e y\n")):
        (tmp_path / name).mkdir()
        (tmp_path / name / "lexicon.txt").write_text(lexicon)
        out = run_tool(sys.executable, ROOT / "steps" / "build_units.py", "--unit-type", "phone", data, tmp_path / name)
        assert out.returncode == 0, out.stderr
    assert (tmp_path / "lang" / "units.txt").read_text() == (tmp_path / "other" / "units.txt").read_text()
    assert units_differ(str(tmp_path / "lang"), str(tmp_path / "lang")) == []
    crlf = tmp_path / "crlf"  # units.txt with CRLF line ends: the same units, as the checkpoint's digest says
    crlf.mkdir()
    for name in ("units.json", "lexicon.txt"):
        (crlf / name).write_bytes((tmp_path / "lang" / name).read_bytes())
    (crlf / "units.txt").write_bytes((tmp_path / "lang" / "units.txt").read_bytes().replace(b"\n", b"\r\n"))
    assert units_differ(str(crlf), str(tmp_path / "lang")) == []
    assert units_differ(str(tmp_path / "other"), str(tmp_path / "lang")) == ["lexicon.txt"]
    assert Tokenizer(str(tmp_path / "other")).encode("NO") != Tokenizer(str(tmp_path / "lang")).encode("NO")
    for name in ("bpe", "bpe_again"):
        out = run_tool(sys.executable, ROOT / "steps" / "build_units.py", "--unit-type", "bpe", "--vocab-size", "12",
                       data, tmp_path / name)
        assert out.returncode == 0, out.stderr
    bpe, again = tmp_path / "bpe", tmp_path / "bpe_again"
    assert (bpe / "bpe.model").read_bytes() != (again / "bpe.model").read_bytes()
    assert units_differ(str(again), str(bpe)) == []
    (again / "bpe.model").write_bytes(b"damaged")
    assert units_differ(str(again), str(bpe)) == ["bpe.model"]


def test_the_cmvn_statistics_are_kept_in_the_experiment_and_compared_as_the_units(tmp_path):
    """data.features.cmvn is copied into <exp>/global_cmvn.json, which config.yaml names (a recomputed file in
    data/ changed a trained model's inputs in silence, in training resumed and in every later decode); once a
    checkpoint exists, other statistics are refused, and --resume sets the experiment aside."""
    import dataclasses

    from rnnt.training import checkpoint
    from rnnt.training.config_change import start_over_if_changed
    from rnnt.training.distributed import World
    from rnnt.training.experiment import adopt_inputs
    from rnnt.training.stop import StopTraining

    lang, exp, cmvn = tmp_path / "lang", tmp_path / "exp", tmp_path / "global_cmvn.json"
    lang.mkdir()
    (lang / "units.txt").write_text("<blank> 0\n<unk> 1\nNO 2\nYES 3\n")
    (lang / "units.json").write_text(json.dumps({"type": "word"}))
    cmvn.write_text(json.dumps({"mean": [0.0] * 80, "std": [1.0] * 80}))
    experiment = load_experiment(str(CONFIG), lang_dir=str(lang))
    features = dataclasses.replace(experiment.data.features, cmvn=str(cmvn))
    experiment = dataclasses.replace(experiment, data=dataclasses.replace(experiment.data, features=features))
    adopt_inputs(experiment, str(exp), World())
    saved = load_experiment(str(exp / "config.yaml"))
    assert saved.data.features.cmvn == str(exp / "global_cmvn.json")
    assert (exp / "global_cmvn.json").read_text() == cmvn.read_text()
    torch.save({"model": {}, "meta": {"step": 3, "epoch": 0, "batch": 3}}, exp / "step-3.pt")
    assert checkpoint.latest(str(exp)) and start_over_if_changed(experiment, str(exp), load_experiment, "") is None
    cmvn.write_text(json.dumps({"mean": [1.0] * 80, "std": [2.0] * 80}))  # recomputed
    with pytest.raises(StopTraining, match=f"CMVN statistics: {cmvn} differ from its copies"):
        adopt_inputs(experiment, str(exp), World())
    message = start_over_if_changed(experiment, str(exp), load_experiment, "")
    assert f"(the CMVN statistics: 'as trained ({exp / 'global_cmvn.json'})' -> '{cmvn}')" in message
    assert (tmp_path / "exp.1" / "global_cmvn.json").is_file()
    without = dataclasses.replace(experiment, data=dataclasses.replace(  # trained without statistics, resumed with
        experiment.data, features=dataclasses.replace(features, cmvn=None)))
    adopt_inputs(without, str(exp), World())
    torch.save({"model": {}, "meta": {"step": 3, "epoch": 0, "batch": 3}}, exp / "step-3.pt")
    message = start_over_if_changed(experiment, str(exp), load_experiment, "")
    assert f"(the CMVN statistics: 'as trained (none)' -> '{cmvn}')" in message
    # a Kaldi matrix (compute_cmvn_stats.py's OUT, the JSON it reads beside it): the same statistics on resume
    # (the matrix was compared with the experiment's copy of the JSON: every --resume set the experiment aside)
    matrix = tmp_path / "global_cmvn"  # beside cmvn, global_cmvn.json
    matrix.write_bytes(b"\0BFM " + bytes(40))
    from_matrix = dataclasses.replace(experiment, data=dataclasses.replace(
        experiment.data, features=dataclasses.replace(features, cmvn=str(matrix))))
    shutil.rmtree(exp)
    adopt_inputs(from_matrix, str(exp), World())
    torch.save({"model": {}, "meta": {"step": 3, "epoch": 0, "batch": 3}}, exp / "step-3.pt")
    assert start_over_if_changed(from_matrix, str(exp), load_experiment, "") is None


@pytest.mark.parametrize("key, value, message", [
    ("predictor", {"kind": "lsmt"}, "model.predictor.kind must be one of ['lstm', 'stateless'], got 'lsmt'"),
    ("joiner", {"activation": "gelu"}, "model.joiner.activation must be relu or tanh, got 'gelu'"),
    ("loss", {"type": "fulll"}, "model.loss.type must be one of ('full', 'fused', 'pruned', 'ctc'), got 'fulll'"),
    ("loss", {"type": "pruned", "warmup_steps": -1}, "model.loss.warmup_steps must be >= 0, got -1"),
    # these loaded: s_range failed at the first step without its key, a negative or NaN ctc_weight built no CTC
    # head saying nothing, and a negative simple_scale trained the simple loss upside down
    ("loss", {"type": "pruned", "s_range": 1}, "model.loss.s_range must be at least 2 (a band needs room for a "
                                              "label arc), got 1"),
    ("loss", {"ctc_weight": -0.3}, "model.loss.ctc_weight must be a finite weight, at least 0, got -0.3"),
    ("loss", {"ctc_weight": float("nan")}, "model.loss.ctc_weight: expected a number, got nan"),
    ("loss", {"type": "pruned", "simple_scale": -1.0}, "model.loss.simple_scale must be a finite weight, at least "
                                                      "0, got -1.0"),
])
def test_a_model_no_run_can_build_is_refused_at_loading_naming_the_file(tmp_path, key, value, message):
    """They were raised by the model's construction, without the config file's name, after the data was read."""
    path = write_config(tmp_path, lambda values: values["model"].setdefault(key, {}).update(value))
    assert load_error(path) == f"{path}: {message}"


def test_yaml_merge_keys_are_read_and_a_key_written_twice_still_refused(tmp_path):
    """`<<: *anchor` was refused as 'not valid YAML' (no constructor for the merge tag), where YAML's readers take
    it; the keys written beside it win over the merged ones, and a key written twice is still refused."""
    from rnnt.config import read_yaml

    path = tmp_path / "merged.yaml"
    path.write_text("base: &base {epochs: 30, log_every: 5}\ntrain:\n  <<: *base\n  epochs: 3\n")
    assert read_yaml(str(path)) == {"base": {"epochs": 30, "log_every": 5}, "train": {"epochs": 3, "log_every": 5}}
    path.write_text("base: &base {epochs: 30}\ntrain:\n  <<: *base\n  epochs: 3\n  epochs: 4\n")
    with pytest.raises(ValueError, match="the key 'epochs' is given twice"):
        read_yaml(str(path))


def test_a_model_too_large_for_memory_is_named_not_the_allocators_traceback(tmp_path):
    """model.encoder.hidden 1280000 (a typo for 128) was torch's allocator's traceback of 26 TB asked for."""
    from rnnt.model.transducer import built_model

    path = write_config(tmp_path, lambda values: values["model"].setdefault("encoder", {}).update(hidden=10 ** 9))
    with pytest.raises(ValueError, match=r"^the model the config's model section describes cannot be built \("):
        built_model(load_experiment(str(path)).model, 10)
