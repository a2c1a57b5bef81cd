"""utils/combination.sh: the systems a recipe's --combine default names, and the mistakes in a --combine
list that stop run.sh with a message before anything runs."""

import os
import subprocess
import sys

import pytest

from conftest import ROOT

FROM_CTC = "egs/an4/conf/transducer_conv_pruned_from_ctc.yaml"  # train.init_from: starts from DeepSpeech 2
ALONE = "egs/an4/conf/deepspeech.yaml"


def sourced(script: str, *args: str) -> subprocess.CompletedProcess:
    """SCRIPT run by bash with the recipe's helpers sourced, as run.sh does after path.sh."""
    env = dict(os.environ, PATH=f"{os.path.dirname(sys.executable)}:{os.environ['PATH']}")
    helpers = ". utils/stages.sh; . utils/decoding.sh; . utils/combination.sh; . utils/training.sh; . utils/units.sh"
    return subprocess.run(["bash", "-c", f"set -euo pipefail; stage=0 stop_stage=100; {helpers}; {script}",
                           "combination", *args], cwd=ROOT, capture_output=True, text=True, env=env)


def default_of(train_config: str, methods: str, combine: str = "default", other_seeds: str = "",
               companion: str = "", init_config: str = "conf/d.yaml") -> str:
    """--combine default's systems; companion: run.sh's --companion-config, trained into exp/c; init_config: its
    --init-config, trained into exp/d."""
    out = sourced('combine=$1 train_config=$2 methods=$3 exp=exp/t average=10 init_exp=exp/d init_average=5; '
                  'companion_config=$5 companion_exp=exp/c init_config=$6; read -ra other_seeds <<< "$4"; '
                  'default_combination; echo "[$combine]"', combine, train_config, methods, other_seeds, companion,
                  init_config)
    assert out.returncode == 0, out.stderr
    return out.stdout.strip()


def test_the_default_combines_the_model_with_the_one_it_starts_from():
    # the model searched by its first LM-fused method, DeepSpeech 2 by its CTC prefix search with the LM
    assert default_of(FROM_CTC, "greedy modified_beam_lm pooled_beam_lm") == \
        "[exp/t:modified_beam_lm:10 exp/d:ctc_prefix_beam_lm:5]"
    assert default_of(FROM_CTC, "greedy modified_beam") == "[exp/t:modified_beam:10 exp/d:ctc_prefix_beam_lm:5]"
    # with --seeds, the chosen seed first, the other seeds' models after it (utils/training.sh other_seeds)
    assert default_of(FROM_CTC, "greedy pooled_beam_lm", other_seeds="exp/t_seed1 exp/t_seed2") == \
        "[exp/t:pooled_beam_lm:10 exp/t_seed1:pooled_beam_lm:10 exp/t_seed2:pooled_beam_lm:10 " \
        "exp/d:ctc_prefix_beam_lm:5]"
    # with --companion-config, the companion after the seeds, searched as the model is
    assert default_of(FROM_CTC, "greedy pooled_beam_lm", other_seeds="exp/t_seed1", companion="conf/c.yaml") == \
        "[exp/t:pooled_beam_lm:10 exp/t_seed1:pooled_beam_lm:10 exp/c:pooled_beam_lm:10 exp/d:ctc_prefix_beam_lm:5]"
    assert default_of(FROM_CTC, "greedy", companion="conf/c.yaml") == \
        "[exp/t:greedy:10 exp/c:greedy:10 exp/d:ctc_prefix_beam_lm:5]"
    assert default_of(ALONE, "ctc_prefix_beam_lm") == "[]"  # nothing it starts from: no combination
    assert default_of(ALONE, "greedy", companion="conf/c.yaml") == "[]"  # nor a companion
    assert default_of(FROM_CTC, "greedy", combine="") == "[]"  # --combine "": none
    # --init-config "": no model started from was trained (nor its companion): none, where the stage failed after
    # the training ('no model of exp/c')
    assert default_of(FROM_CTC, "greedy pooled_beam_lm", companion="conf/c.yaml", init_config="") == "[]"
    assert default_of(FROM_CTC, "greedy", combine="exp/a:greedy:0 exp/b:beam_lm:3") == \
        "[exp/a:greedy:0 exp/b:beam_lm:3]"  # a list given is kept


@pytest.mark.slow
def test_a_wrong_combination_stops_with_a_message(tmp_path):
    for name in ("a", "c"):
        (tmp_path / name).mkdir()
        (tmp_path / name / "epoch-1.pt").write_bytes(b"")
    cases = {
        f"{tmp_path}/a:greedy:0": "needs two systems or more",
        f"{tmp_path}/a:greedy {tmp_path}/b:beam_lm:0": f"EXP:METHOD:AVERAGE (exp/a:pooled_beam_lm:5), got "
                                                     f"'{tmp_path}/a:greedy'",
        f"{tmp_path}/a:greedy:0 {tmp_path}/b:beam_lm:0": f"no model of {tmp_path}/b: train it first",
        f"{tmp_path}/a:greedy:x {tmp_path}/a:beam:0": "got '" + f"{tmp_path}/a:greedy:x'",
    }
    for systems, message in cases.items():
        out = sourced('combine_stages 5 6 9 "$1" data/lang_phone "dev test"', systems)
        assert out.returncode != 0 and message in out.stderr, (systems, out.stderr)
    out = sourced('combine_stages 5 6 9 "$1" data/lang_phone "dev test"', f"{tmp_path}/a:greedy:0 {tmp_path}/c:beam:0")
    assert out.returncode != 0 and "needs an LM-fused method (*_lm, *_lodr) among" in out.stderr, out.stderr
    assert not (tmp_path / "a" / "log").exists()  # nothing decoded
    for systems, message in {**cases, f"{tmp_path}/a:greedy:0 {tmp_path}/b:gredy_lm:0": "no decoding method 'gredy_lm'",
                             f"{tmp_path}/a:greedy:0 {tmp_path}/c:beam:0": "needs an LM-fused method",
                             # combine_nbest.py refused it at stage 9, after every training and decode
                             f"{tmp_path}/a:greedy:0 {tmp_path}/a/:beam_lm:0": "takes each experiment once"}.items():
        if "no model of" not in message:  # run.sh's check before any stage: before the training, not after it
            out = sourced('check_combine "$1"', systems)
            assert out.returncode != 0 and message in out.stderr, (systems, out.stderr)
    assert sourced('check_combine "$1"', f"{tmp_path}/a:greedy:0 {tmp_path}/b:beam_lm:0").returncode == 0
    # --combine default with an exp dir holding a blank: refused at run.sh's start, not after the training
    out = sourced('exp="exp/my model" init_exp=exp/d; check_combine default')
    assert out.returncode == 1 and "'exp/my model' holds a blank" in out.stderr, out.stderr
    assert sourced('exp=exp/t init_exp=exp/d; check_combine default').returncode == 0
    # run.sh's check and the stage's of the same systems: one Python (torch's import) between them, not two
    once = 'check_combine "$1" && python3() { return 9; } && check_combine "$1" && echo checked once'
    out = sourced(once, f"{tmp_path}/a:greedy:0 {tmp_path}/b:beam_lm:0")
    assert out.returncode == 0 and "checked once" in out.stdout, out.stderr
    out = sourced(once.replace('check_combine "$1" && echo', 'check_combine "$1 $1" && echo'),
                  f"{tmp_path}/a:greedy:0 {tmp_path}/b:beam_lm:0")
    assert out.returncode != 0 and "checked once" not in out.stdout  # other systems: checked again
    out = sourced('stop_stage=5; combine_stages 5 6 9 "$1" data/lang_phone "dev test"',
                  f"{tmp_path}/a:greedy:0 {tmp_path}/b:beam_lm:0")
    assert out.returncode == 0, out.stderr  # --stop-stage before the decoding: nothing wanted, nothing checked


def test_the_name_says_which_models_and_searches():
    out = sourced('combination_name "$1"',
                  "exp/transducer_from_ctc_phone:pooled_beam_lm:5 exp/deepspeech_phone:ctc_prefix_beam_lm:0")
    # no models in the repo's exp: the tags are empty, the names and methods remain
    assert out.returncode == 0 and out.stdout.strip() == \
        "transducer_from_ctc_phone-pooled_beam_lm-+deepspeech_phone-ctc_prefix_beam_lm-", out.stderr


def test_a_name_of_many_systems_is_cut_to_a_file_names_length_with_a_hash():
    """--seeds 3 beside --combine default named its stage marker past 255 characters: the stage was skipped."""
    systems = " ".join(f"exp/transducer_conv_pruned_from_ctc_phone_seed{k}:pooled_beam_lm:5" for k in range(4))
    names = [sourced('combination_name "$1"', value).stdout.strip()
             for value in (systems, systems + " exp/d:beam_lm:5")]
    assert all(len(name) == 113 and name.startswith("transducer_conv_pruned_from_ctc_phone_seed0-") for name in names)
    assert names[0] != names[1] and names[0] == sourced('combination_name "$1"', systems).stdout.strip()


def test_each_system_decodes_dev_first_and_every_set(tmp_path):
    """The decodes asked of decode_stages (stubbed here: no models to run), dev first whatever the order of
    the sets, and with dev alone (speechocean762 without its test half)."""
    for name in ("a", "b"):
        (tmp_path / name).mkdir()
        (tmp_path / name / "epoch-2.pt").write_bytes(b"")
    systems = f"{tmp_path}/a:modified_beam_lm:0 {tmp_path}/b:ctc_prefix_beam_lm:0"
    stubs = ('decode_stages() { echo "decode $2 $3 $5 [$6]"; }; stage_wanted() { return 1; }; '
             'average_stage() { echo "average $1 $2 $3"; }; ')
    for sets, expected in (("test dev", "[dev test]"), ("dev", "[dev ]")):
        out = sourced(stubs + 'combine_stages 5 6 9 "$1" data/lang_phone "$2"', systems, sets)
        assert out.returncode == 0, out.stderr
        # each system's average made first, at the average stage (an avg-N.pt written by hand before more epochs
        # were trained was decoded under the newer tag)
        assert out.stdout.splitlines() == [f"average 5 {tmp_path}/a 0",
                                           f"decode {tmp_path}/a epoch-2 modified_beam_lm {expected}",
                                           f"average 5 {tmp_path}/b 0",
                                           f"decode {tmp_path}/b epoch-2 ctc_prefix_beam_lm {expected}"]
    # --stop-stage before the decoding: the stages are still asked about (out of the run, stage_wanted only notes
    # one whose inputs changed, and the results printed say they are from before the changes); they were not
    asked = 'stage_wanted() { echo "asked $2"; return 1; }; stop_stage=5; combine_stages 5 6 9 "$1" data/lang_phone dev'
    out = sourced(stubs.replace("stage_wanted() { return 1; }; ", "") + asked, systems)
    assert out.returncode == 0 and out.stdout.splitlines()[-1].startswith("asked combine-dev-a-modified_beam_lm-"), \
        out.stdout + out.stderr


def test_the_results_name_each_system_then_the_combination(tmp_path):
    """combination_results: per set, each system's own line (but run.sh's $exp searched by one of its
    --methods: run.sh prints that one), then the combination's."""
    searches = {"a": "pooled_beam_lm", "b": "pooled_beam_lm", "d": "ctc_prefix_beam_lm"}
    for name, method in searches.items():
        (tmp_path / name).mkdir()
        (tmp_path / name / "epoch-2.pt").write_bytes(b"")
        for set_name in ("dev", "test"):
            (tmp_path / name / f"decode-{set_name}-{method}-epoch-2").mkdir()
            (tmp_path / name / f"decode-{set_name}-{method}-epoch-2" / "wer").write_text(f"%WER {name} {set_name}\n")
    systems = " ".join(f"{tmp_path}/{name}:{method}:0" for name, method in searches.items())
    combined = "a-pooled_beam_lm-epoch-2+b-pooled_beam_lm-epoch-2+d-ctc_prefix_beam_lm-epoch-2"
    out = sourced('exp=$2 methods="greedy pooled_beam_lm"; combination_results corpus "$1" "dev test"', systems,
                  f"{tmp_path}/a")
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines() == [line for set_name in ("dev", "test") for line in (
        f"corpus {set_name} pooled_beam_lm (b epoch-2): %WER b {set_name}",
        f"corpus {set_name} ctc_prefix_beam_lm (d epoch-2): %WER d {set_name}",
        f"corpus {set_name} combined ({combined}): not decoded yet "
        f"(exp/combination/decode-{set_name}-combined-{combined}/wer missing)")]
