"""utils/training.sh: a recipe's --seeds, the same model trained with several seeds and the best on dev kept."""

import os
import subprocess
import sys

from conftest import ROOT

STUBS = """
train_stage() { echo "train $3 seed[${6:-}] from[$5]"; }
average_stage() { echo "average $2 $3"; }
model_tag_of() { echo avg2-epoch-3; }
decode_stages() {  # the dev WER of each model, from $WERS (name=wer ...)
  local wer
  echo "decode $2 $3 $5 [$6]"
  wer=$(tr ' ' '\\n' <<< "$WERS" | sed -n "s|^$(basename "$2")=||p")
  mkdir -p "$2/decode-$6-$5-$3"
  echo "%WER $wer [ 1 / 10, 0 ins, 0 del, 1 sub ]" > "$2/decode-$6-$5-$3/wer"
}
"""


def sourced(script: str, **env: str) -> subprocess.CompletedProcess:
    """SCRIPT run by bash in the repo with the recipe helpers seed_stages needs sourced, as run.sh does."""
    env = dict(os.environ, PATH=f"{os.path.dirname(sys.executable)}:{os.environ['PATH']}", **env)
    helpers = ". utils/stages.sh; . utils/decoding.sh; . utils/training.sh"
    return subprocess.run(["bash", "-c", f"set -euo pipefail; {helpers}\n{script}"], cwd=ROOT, capture_output=True,
                          text=True, env=env)


def run_seed_stages(tmp_path, seeds, wers: str, stop_stage: int = 100) -> subprocess.CompletedProcess:
    return sourced(f'stage=0 stop_stage={stop_stage}\n{STUBS}\nexp={tmp_path}/m; seed_stages 4 5 6 conf/t.yaml '
                   f'"$exp" data/lang init.pt {seeds} 2 modified_beam_lm; echo "exp=$exp"', WERS=wers)


def chosen(tmp_path, seeds: int, wers: str, stop_stage: int = 100):
    out = run_seed_stages(tmp_path, seeds, wers, stop_stage)
    assert out.returncode == 0, out.stderr
    lines = [line.replace(str(tmp_path) + "/", "") for line in out.stdout.splitlines()]
    return lines[:-1], lines[-1].removeprefix("exp=")


def test_one_seed_trains_the_model_alone(tmp_path):
    steps, exp = chosen(tmp_path, 1, "")
    assert steps == ["train m seed[] from[init.pt]"] and exp == "m"


def test_several_seeds_train_one_model_each_and_dev_chooses(tmp_path):
    steps, exp = chosen(tmp_path, 3, "m=6.70 m_seed1=5.53 m_seed2=9.05")
    assert steps[:3] == ["train m seed[] from[init.pt]", "train m_seed1 seed[1] from[init.pt]",
                         "train m_seed2 seed[2] from[init.pt]"]
    assert steps[3:9] == [line for name in ("m", "m_seed1", "m_seed2")
                          for line in (f"average {name} 2", f"decode {name} avg2-epoch-3 modified_beam_lm [dev]")]
    assert exp == "m_seed1" and "m_seed1 is the best on dev (modified_beam_lm, %WER: m 6.70 m_seed1 5.53 m_seed2 " \
        "9.05)" in steps[9]
    assert chosen(tmp_path, 2, "m=6.37 m_seed1=6.37")[1] == "m"  # a tie: the first
    assert chosen(tmp_path, 2, "m=10.2 m_seed1=9.8")[1] == "m_seed1"  # compared as numbers, not as text


def test_without_the_decoding_stage_nothing_is_chosen(tmp_path):
    steps, exp = chosen(tmp_path, 2, "m=6.70 m_seed1=5.53", stop_stage=5)
    assert steps == ["train m seed[] from[init.pt]", "train m_seed1 seed[1] from[init.pt]"] and exp == "m"


def test_a_seed_without_its_dev_decode_stops_with_a_message(tmp_path):
    out = sourced("train_stage() { :; }; average_stage() { :; }; decode_stages() { :; }\n"
                  "model_tag_of() { echo epoch-3; }\n"
                  f"stage=7 stop_stage=100; seed_stages 4 5 6 c.yaml {tmp_path}/m lang '' 2 0 greedy")
    assert out.returncode == 1 and f"{tmp_path}/m/decode-dev-greedy-epoch-3/wer missing: run stage 6" in out.stderr


def test_a_wrong_number_of_seeds_stops_before_training(tmp_path):
    for seeds in ("0", "two", "-1"):
        out = run_seed_stages(tmp_path, seeds, "")
        assert out.returncode == 1 and f"--seeds takes a number of 1 or more, got '{seeds}'" in out.stderr
        assert "train" not in out.stdout
