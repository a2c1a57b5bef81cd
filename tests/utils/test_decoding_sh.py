"""utils/decoding.sh: the LM's weights are tuned per model, so that decoding one model never takes another's."""

import os
import subprocess
import sys

import pytest

from conftest import ROOT

TUNE = """#!/usr/bin/env bash
# stands in for steps/tune_lm_fusion.py: the weights name the checkpoint they were tuned on
set -euo pipefail
echo "$*" >> tunes.log
while [ "$1" != --checkpoint ]; do shift; done
mkdir -p "$3/lm"
echo "weights of $2" > "$3/lm/modified_beam_lm.yaml"
"""
DECODE = """#!/usr/bin/env bash
# stands in for steps/decode.py: writes which weights it decoded with
set -euo pipefail
method=$2
while [ "$1" != --lm-fusion ]; do shift; done
fusion=$2
while [ "$1" != --nbest ]; do shift; done
mkdir -p "$2/decode-$4-$TAG" "$2/decode-$4-$method-$TAG"
cat "$fusion" > "$2/decode-$4-$TAG/used"
echo "%WER 0.00 [ 0 / 1, 0 ins, 0 del, 0 sub ]" > "$2/decode-$4-$method-$TAG/wer"
echo "$TAG" >> decodes.log
"""
PLAIN_DECODE = """#!/usr/bin/env bash
# stands in for steps/decode.py of a method without an LM: writes its wer
set -euo pipefail
method=$2
while [ "$1" != --tag ]; do shift; done
tag=$2
while [ "$1" != --nbest ]; do shift; done
mkdir -p "$2/decode-$4-$method-$tag"
echo "%WER 0.00 [ 0 / 1, 0 ins, 0 del, 0 sub ]" > "$2/decode-$4-$method-$tag/wer"
"""
CALIBRATE = """#!/usr/bin/env bash
# stands in for steps/calibrate_confidence.py: writes down the checkpoint it calibrates the confidences of
set -euo pipefail
while [ "$1" != --checkpoint ]; do shift; done
echo "$2" >> calibrations.log
printf 'fitted with %s\n' "$2" > "$3/confidence_calibration.json"
"""


def decode(tmp_path, tag: str, grid: str = "", then: str = "") -> subprocess.CompletedProcess:
    """decode_stages of modified_beam_lm on dev, with run.sh's variables (and `grid`'s: lm_weights=..., or
    lm_order=..., stop_stage=...), and `then` after it."""
    env = dict(os.environ, PATH=f"{os.path.dirname(sys.executable)}:{os.environ['PATH']}", ROOT=str(ROOT), TAG=tag)
    script = (f'set -euo pipefail; stage=0 stop_stage=100 lm_order=3 lm_over=words {grid}; '
              '. "$ROOT/utils/stages.sh"; . "$ROOT/utils/decoding.sh"\n'
              'checkpoint_of() { echo "$1/$2.pt"; }; ngram_stage() { :; }; lm_beam_of() { echo 8; }\n'
              f'decode_stages 6 exp "$TAG" data/lang modified_beam_lm dev\n{then}')
    return subprocess.run(["bash", "-c", script], cwd=tmp_path, capture_output=True, text=True, env=env)


def stand_ins(tmp_path) -> None:
    """The stand-ins for the tools, a dev set and an experiment with models avg10 and avg15."""
    (tmp_path / "steps").mkdir()
    for name, text in (("tune_lm_fusion.py", TUNE), ("decode.py", DECODE), ("calibrate_confidence.py", CALIBRATE)):
        (tmp_path / "steps" / name).write_text(text)
        (tmp_path / "steps" / name).chmod(0o755)
    (tmp_path / "data" / "dev").mkdir(parents=True)
    for name in ("data.list", "text"):
        (tmp_path / "data" / "dev" / name).write_text("a\n")
    exp = tmp_path / "exp"
    exp.mkdir()
    for tag in ("avg10", "avg15"):
        (exp / f"{tag}.pt").write_text(tag)


def test_another_average_tunes_its_own_weights_and_leaves_the_first_models_decode_as_it_was(tmp_path):
    stand_ins(tmp_path)
    exp = tmp_path / "exp"
    for tag in ("avg10", "avg15", "avg10"):  # --average 10, then 15, then 10 again
        out = decode(tmp_path, tag)
        assert out.returncode == 0, out.stderr
    assert (exp / "decode-dev-avg10" / "used").read_text() == "weights of exp/avg10.pt\n"
    assert (exp / "decode-dev-avg15" / "used").read_text() == "weights of exp/avg15.pt\n"
    assert (tmp_path / "decodes.log").read_text().split() == ["avg10", "avg15"]  # the third: done before
    # each model's words' confidences calibrated on dev before it is decoded; the one file calibrated for avg15
    # since, avg10's again (its stage was done before, and its decodes of other methods went uncalibrated)
    assert (tmp_path / "calibrations.log").read_text().split() == ["exp/avg10.pt", "exp/avg15.pt", "exp/avg10.pt"]
    assert (exp / "confidence_calibration.json").read_text() == "fitted with exp/avg10.pt\n"
    assert decode(tmp_path, "avg10").returncode == 0  # and once
    assert (tmp_path / "calibrations.log").read_text().count("avg10") == 2
    assert (exp / "lm" / "modified_beam_lm.yaml").read_text() == "weights of exp/avg15.pt\n"  # the newest tuning


def test_a_train_stage_in_an_exp_dir_whose_path_has_spaces_is_marked_done(tmp_path):
    """The train stage's outputs (config.yaml, the newest epoch) each one word, whatever spaces the exp dir's
    path holds (they split into words, 'exp/my, an output ..., was not made', and no rerun got past it)."""
    exp = tmp_path / "exp" / "my model"
    exp.mkdir(parents=True)
    for name in ("config.yaml", "epoch-3.pt"):
        (exp / name).write_text("x")
    env = dict(os.environ, PATH=f"{os.path.dirname(sys.executable)}:{os.environ['PATH']}", ROOT=str(ROOT))
    script = ('set -euo pipefail; stage=0 stop_stage=100; . "$ROOT/utils/stages.sh"; . "$ROOT/utils/decoding.sh"\n'
              'model_tag_of() { echo epoch-3; }; checkpoint_of() { echo "$1/$2.pt"; }\n'
              'exp="exp/my model"; stage_wanted 4 train "$exp" && trained_done 4 train "$exp"\n'
              'if stage_wanted 4 train "$exp"; then echo wanted; else echo done; fi\n'
              'rm "$exp/epoch-3.pt"; if stage_wanted 4 train "$exp"; then echo wanted; else echo done; fi')
    out = subprocess.run(["bash", "-c", script], cwd=tmp_path, capture_output=True, text=True, env=env)
    assert out.returncode == 0, out.stderr
    answers = [line for line in out.stdout.splitlines() if line in ("done", "wanted")]
    assert answers == ["done", "wanted"], out.stdout  # and a checkpoint gone since runs the stage again
    assert "its output exp/my model/epoch-3.pt is gone or changed" in out.stdout
    script = ('set -euo pipefail; stage=0 stop_stage=100; . "$ROOT/utils/stages.sh"; . "$ROOT/utils/decoding.sh"\n'
              'model_tag_of() { echo; }; trained_done 4 train exp/short; echo marked')  # max_steps in epoch 1
    out = subprocess.run(["bash", "-c", script, "run.sh"], cwd=tmp_path, capture_output=True, text=True, env=env)
    assert out.returncode == 1 and "marked" not in out.stdout, out.stdout
    assert out.stderr.startswith("run.sh: stage 4 (train): the training left no epoch checkpoint in exp/short")
    failing = script.replace("model_tag_of() { echo; }", "model_tag_of() { echo 'cannot read exp/short' >&2; false; }")
    out = subprocess.run(["bash", "-c", failing, "run.sh"], cwd=tmp_path, capture_output=True, text=True, env=env)
    assert out.returncode == 1 and out.stderr == "cannot read exp/short\n", out.stderr  # its own message alone


@pytest.mark.slow  # (an integration run: the full suite's)
def test_run_sh_lm_weights_and_bonuses_are_the_grid_and_another_grid_tunes_again(tmp_path):
    """run.sh's --lm-weights and --lm-bonuses reach the tuning, and another grid tunes again; none set, the tool's
    own grid, and a model tuned before they existed is not tuned again."""
    stand_ins(tmp_path)
    for grid in ("", "", "lm_weights=0.2,0.4 lm_bonuses=0,1", "lm_weights=0.2,0.4 lm_bonuses=0,1",
                 "lm_weights=0.4 lm_bonuses=0,1", ""):
        out = decode(tmp_path, "avg10", grid)
        assert out.returncode == 0, out.stderr
    tunes = [line.split(" --checkpoint")[0].split("--beam 8")[1] for line in
             (tmp_path / "tunes.log").read_text().splitlines()]
    assert tunes == ["", " --weights 0.2,0.4 --bonuses 0,1", " --weights 0.4 --bonuses 0,1", ""], tunes
    assert (tmp_path / "decodes.log").read_text().split() == ["avg10"]  # the stand-in's weights never change


def test_another_lm_with_the_decodes_left_out_marks_the_printed_results_as_old(tmp_path):
    """--lm-order 4 with --stop-stage 5: the 3-gram's decode is printed, but said to be from before the change; a
    decode the LM does not enter (greedy) is not (the note stood under every result line)."""
    stand_ins(tmp_path)
    (tmp_path / "exp" / "decode-dev-greedy-avg10").mkdir()
    (tmp_path / "exp" / "decode-dev-greedy-avg10" / "wer").write_text("%WER 9.00 [ 9 / 100, 0 ins, 0 del, 9 sub ]\n")
    result = ('decode_result "an4 dev modified_beam_lm" exp "$TAG" dev modified_beam_lm\n'
              'decode_result "an4 dev greedy" exp "$TAG" dev greedy')
    out = decode(tmp_path, "avg10", then=result)
    assert out.returncode == 0 and "%WER 0.00" in out.stdout and "from before" not in out.stdout, out.stderr
    out = decode(tmp_path, "avg10", "lm_order=4 stop_stage=5", then=result)
    assert out.returncode == 0, out.stderr
    assert "(from before your changes: stage 6 (decode-dev-modified_beam_lm-avg10 in exp)" in out.stdout, out.stdout
    assert out.stdout.splitlines()[-1] == "an4 dev greedy %WER 9.00 [ 9 / 100, 0 ins, 0 del, 9 sub ]", out.stdout
    out = decode(tmp_path, "avg10", then=result)  # the 3-gram again: its results are today's
    assert out.returncode == 0 and "from before" not in out.stdout and "skipped" in out.stdout, out.stdout


def test_a_recipe_without_an_lm_stage_refuses_an_lm_fused_method_before_training():
    """yesno and fsdd build no LM: --method modified_beam_lm trained, then failed at the decode stage, or used
    weights left in the exp by hand (tuned on test, say) without a word."""
    for method, refused in (("greedy modified_beam", False), ("modified_beam_lm", True), ("pooled_beam_lm", True),
                            ("modified_beam_lodr", True)):
        out = subprocess.run(["bash", "-c", f'set -euo pipefail; . utils/decoding.sh; check_no_lm_methods "{method}"; '
                              'echo reached'], cwd=ROOT, capture_output=True, text=True)
        assert (out.returncode != 0) == refused and ("reached" in out.stdout) != refused, (method, out.stderr)
        if refused:
            assert f"--method {method} fuses an n-gram LM, which this recipe does not build" in out.stderr


def test_the_leading_method_whatever_blanks_are_around_the_methods():
    """--methods "greedy modified_beam " led with no method (decode-dev--avg3-...: 'run stage 6 for it first')."""
    for methods, leading in (("greedy modified_beam ", "modified_beam"), ("greedy\nbeam", "beam"),
                             (" greedy  pooled_beam_lm beam", "pooled_beam_lm"), ("greedy", "greedy")):
        out = subprocess.run(["bash", "-c", '. utils/stages.sh; . utils/decoding.sh; leading_method "$1"', "x",
                              methods], cwd=ROOT, capture_output=True, text=True)
        assert out.returncode == 0 and out.stdout == f"{leading}\n", (methods, out.stdout, out.stderr)


def test_every_decode_of_an_experiment_calibrates_the_head_of_run_sh_methods_first(tmp_path):
    """A seed's or a combination's decodes pass their leading method alone: with --methods "ctc_greedy
    pooled_beam_lm" the two heads' stages took turns fitting the one calibration file, every run; and through
    decode_stages, whose METHODS, a local named methods, hid run.sh's from confidence_stage, they still did."""
    stand_ins(tmp_path)
    (tmp_path / "steps" / "decode.py").write_text(PLAIN_DECODE)
    (tmp_path / "exp" / "config.yaml").write_text("model: {loss: {type: full, ctc_weight: 0.3}}\n")  # both heads
    env = dict(os.environ, PATH=f"{os.path.dirname(sys.executable)}:{os.environ['PATH']}", ROOT=str(ROOT))
    script = ('set -euo pipefail; stage=0 stop_stage=100 methods="ctc_greedy greedy"; '
              '. "$ROOT/utils/stages.sh"; . "$ROOT/utils/decoding.sh"; checkpoint_of() { echo "$1/$2.pt"; }\n'
              'confidence_stage 6 exp avg10 "$methods"; confidence_stage 6 exp avg10 greedy\n'
              'decode_stages 6 exp avg10 data/lang "$methods" dev; decode_stages 6 exp avg10 data/lang greedy dev')
    for _ in range(2):
        out = subprocess.run(["bash", "-c", script], cwd=tmp_path, capture_output=True, text=True, env=env)
        assert out.returncode == 0, out.stderr
    assert (tmp_path / "calibrations.log").read_text().split() == ["exp/avg10.pt"]  # once, for the CTC head
    assert out.stdout.count("stage 6 (confidence-ctc_greedy-avg10): done before") == 4, out.stdout
    # a model without the head of run.sh's first method (a CTC companion of a transducer's run; a transducer
    # without a CTC head): its own methods' head (greedy's was asked of a CTC model, and the stage failed)
    for config, own, head in (("{loss: {type: ctc}}", "ctc_greedy", "ctc_greedy"), ("{}", "greedy", "greedy")):
        companion = tmp_path / f"companion-{head}"
        companion.mkdir()
        (companion / "avg10.pt").write_text("avg10")
        (companion / "config.yaml").write_text(f"model: {config}\n")
        methods = "greedy beam" if head == "ctc_greedy" else "ctc_greedy greedy"
        script = ('set -euo pipefail; stage=0 stop_stage=100; '
                  '. "$ROOT/utils/stages.sh"; . "$ROOT/utils/decoding.sh"; checkpoint_of() { echo "$1/$2.pt"; }\n'
                  f'methods="{methods}"; confidence_stage 6 {companion.name} avg10 {own}')
        out = subprocess.run(["bash", "-c", script], cwd=tmp_path, capture_output=True, text=True, env=env)
        assert out.returncode == 0 and f"stage 6 (confidence-{head}-avg10)" in out.stdout, out.stdout + out.stderr


@pytest.mark.slow  # (an integration run: the full suite's)
def test_a_calibration_fitted_again_decodes_every_set_again(tmp_path):
    """The calibration is fitted on dev: dev's text edited, dev was decoded again, but test's decode was skipped,
    its ctm and confidences of the old calibration, which its confidence file said was the new one."""
    stand_ins(tmp_path)
    (tmp_path / "steps" / "decode.py").write_text(PLAIN_DECODE)
    with open(tmp_path / "steps" / "calibrate_confidence.py", "a") as f:  # a fit of what dev's text says
        f.write('cat data/dev/text >> "$3/confidence_calibration.json"\n')
    (tmp_path / "data" / "test").mkdir()
    for name in ("data.list", "text"):
        (tmp_path / "data" / "test" / name).write_text("b\n")
    env = dict(os.environ, PATH=f"{os.path.dirname(sys.executable)}:{os.environ['PATH']}", ROOT=str(ROOT))
    script = ('set -euo pipefail; stage=0 stop_stage=100 methods=greedy; '
              '. "$ROOT/utils/stages.sh"; . "$ROOT/utils/decoding.sh"; checkpoint_of() { echo "$1/$2.pt"; }\n'
              'decode_stages 6 exp avg10 data/lang greedy "dev test"')
    first = subprocess.run(["bash", "-c", script], cwd=tmp_path, capture_output=True, text=True, env=env)
    assert first.returncode == 0, first.stderr
    (tmp_path / "data" / "dev" / "text").write_text("a corrected\n")
    again = subprocess.run(["bash", "-c", script], cwd=tmp_path, capture_output=True, text=True, env=env)
    assert again.returncode == 0, again.stderr
    assert (tmp_path / "calibrations.log").read_text().split() == ["exp/avg10.pt"] * 2
    assert "stage 6 (decode-test-greedy-avg10): done before" not in again.stdout, again.stdout
    assert "stage 6 (decode-test-greedy-avg10)" in again.stdout, again.stdout
    # data.tail_silence edited (a resume takes it, the checkpoint unchanged): the fit decodes dev with it, and was
    # skipped, the decodes and exports after it taking the old fit as the new setting's
    (tmp_path / "exp" / "config.yaml").write_text("data: {tail_silence: 0.3}\n")
    edited = subprocess.run(["bash", "-c", script], cwd=tmp_path, capture_output=True, text=True, env=env)
    assert edited.returncode == 0, edited.stderr
    assert (tmp_path / "calibrations.log").read_text().split() == ["exp/avg10.pt"] * 3, edited.stdout


def test_an_averaging_that_fails_is_not_marked_done_where_the_caller_tests_its_status(tmp_path):
    """`average_stage ... || return` (combine_stages') ran it where bash ignores set -e: the averaging failed, an
    older avg-2.pt of other epochs was marked as the average of these, decoded and combined, and every run after
    skipped the stage. Each library's command now returns its failure."""
    (tmp_path / "steps").mkdir()
    (tmp_path / "steps" / "average_checkpoints.py").write_text("#!/bin/sh\necho 'No space left on device' >&2\n"
                                                                "exit 1\n")
    (tmp_path / "steps" / "average_checkpoints.py").chmod(0o755)
    (tmp_path / "exp").mkdir()
    for n in range(1, 5):
        (tmp_path / "exp" / f"epoch-{n}.pt").write_text("")
    (tmp_path / "exp" / "avg-2.pt").write_text("the average of epochs 1 and 2")
    env = dict(os.environ, PATH=f"{os.path.dirname(sys.executable)}:{os.environ['PATH']}", ROOT=str(ROOT),
               PYTHONPATH=str(ROOT))
    script = ('set -euo pipefail; stage=0 stop_stage=100; . "$ROOT/utils/stages.sh"; . "$ROOT/utils/decoding.sh"\n'
              'averaged() { average_stage 5 exp 2 || return; echo "went on to decode"; }\naveraged || echo "stopped"')
    out = subprocess.run(["bash", "-c", script], cwd=tmp_path, capture_output=True, text=True, env=env)
    assert "stopped" in out.stdout and "went on" not in out.stdout, out.stdout + out.stderr
    assert not list((tmp_path / "exp" / ".stages").glob("*.done"))


def test_an_average_made_at_another_stage_is_the_average_a_later_stage_asks_for(tmp_path):
    """The model a training starts from, and a companion, are averaged at the training stage (4); combine_stages
    asks for the average at stage 5: run.sh --stage 6 --combine default refused it ('run stage 5 first'), which
    redid every average and decode. One made at another stage, of the same epochs, is taken; one of other epochs
    is not."""
    (tmp_path / "steps").mkdir()
    (tmp_path / "steps" / "average_checkpoints.py").write_text(
        "#!/bin/sh\necho \"$*\" >> averages.log\necho averaged > exp/avg-2.pt\n")
    (tmp_path / "steps" / "average_checkpoints.py").chmod(0o755)
    (tmp_path / "exp").mkdir()
    for n in range(1, 5):
        (tmp_path / "exp" / f"epoch-{n}.pt").write_text(f"epoch {n}")
    env = dict(os.environ, PATH=f"{os.path.dirname(sys.executable)}:{os.environ['PATH']}", ROOT=str(ROOT),
               PYTHONPATH=str(ROOT))

    def run(stages: str, command: str) -> subprocess.CompletedProcess:
        script = (f'set -euo pipefail; {stages}; . "$ROOT/utils/stages.sh"; . "$ROOT/utils/decoding.sh"\n'
                  f'{command}')
        return subprocess.run(["bash", "-c", script], cwd=tmp_path, capture_output=True, text=True, env=env)

    out = run("stage=0 stop_stage=4", "average_stage 4 exp 2")
    assert out.returncode == 0 and (tmp_path / "exp" / ".stages" / "4.average-2-epoch-4.done").is_file(), out.stderr
    out = run("stage=6 stop_stage=100", "average_stage 5 exp 2 && echo taken")
    assert out.returncode == 0 and out.stdout.strip().endswith("taken"), out.stdout + out.stderr
    assert (tmp_path / "averages.log").read_text().count("\n") == 1  # not averaged again
    (tmp_path / "exp" / "epoch-4.pt").write_text("epoch 4, trained again")  # the same name, other weights
    out = run("stage=6 stop_stage=100", "average_stage 5 exp 2 && echo taken")
    assert out.returncode == 1 and "run stage 5 first" in out.stderr, out.stdout + out.stderr
    out = run("stage=5 stop_stage=5", "average_stage 5 exp 0")  # the stage alone ran nothing, in silence
    assert out.returncode == 0 and out.stdout.endswith(" stage 5 (average): --average 0: epoch-4 alone, nothing to "
                                                       "average\n"), out.stdout + out.stderr
    assert run("stage=6 stop_stage=100", "average_stage 5 exp 0").stdout == ""  # (a stage not asked for: nothing)
