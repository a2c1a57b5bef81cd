"""Every stage tool of steps/ ends the same way (rnnt.cli.run_tool): missing input is one line on standard
error, 'tool.py: ' and the missing file, exit status 1, never a traceback; success is 'tool.py: SUMMARY'."""

import sys

import pytest

from conftest import ROOT, run_tool

# Each tool with arguments naming files that do not exist, and the file its message must name.
MISSING = {
    "augment_data_dir.py": (["--noise-scp", "{m}/noise.scp", "{m}/data", "{m}/noisy"], "{m}/data"),
    "average_checkpoints.py": (["--last", "2", "{m}/exp"], "{m}/exp"),
    "build_lexicon.py": (["{m}/data", "{m}/lang"], "{m}/data/text"),
    "build_ngram_lm.py": (["{m}/data", "{m}/lang", "{m}/lm.arpa"], "{m}/lang/units.json"),
    "build_units.py": (["{m}/data", "{m}/lang"], "{m}/data/text"),
    "calibrate_confidence.py": (["{m}/exp", "{m}/dev.list"], "{m}/dev.list"),
    "combine_nbest.py": (["--system", "{m}/a", "{m}/a/avg-5.pt", "{m}/a/decode", "--system", "{m}/b", "{m}/b/avg-5.pt",
                          "{m}/b/decode", "--lm-fusion", "{m}/lm.yaml", "--tune", "{m}/dev.list", "{m}/out"],
                         "{m}/dev.list"),
    "compute_cmvn_stats.py": (["{m}/data.list", "{m}/cmvn"], "{m}/data.list"),
    "decode.py": (["{m}/exp", "{m}/data.list", "test"], "{m}/exp is not there: give the experiment folder"),
    "decode_sherpa_onnx.py": (["{m}/onnx", "{m}/data.list", "{m}/out"], "{m}/onnx/sherpa-onnx.json"),
    "export_onnx.py": (["{m}/exp", "{m}/out"], "{m}/exp is not there: give the experiment folder"),
    "import_data_dir.py": (["{m}/kaldi", "{m}/data"], "{m}/kaldi"),
    "make_raw_list.py": (["{m}/data", "{m}/data.list"], "{m}/data/text"),
    "make_shards.py": (["{m}/data", "{m}/shards", "{m}/shards.list"], "{m}/data/text"),
    "plot_training.py": (["{m}/training.png", "{m}/exp"], "{m}/exp/train.log"),
    "tune.py": (["--config", "{m}/conf.yaml", "--search", "{m}/search.yaml", "--exp-dir", "{m}/exp"], "{m}/conf.yaml"),
    "tune_lm_fusion.py": (["--arpa", "{m}/lm.arpa", "{m}/exp", "{m}/dev.list"],
                          "{m}/exp is not there: give the experiment folder"),
}


# The tools of steps/ that end their own way, and why: their standard output is their product, not a
# summary line, or their exit status says more than 0 or 1.
OWN_ENDING = {
    "score.py": "standard output is the scoring report (its first line the %WER line)",
    "train.py": "exit status 143 after SIGTERM (a checkpoint holds the position); its summary is in train.log",
    "transcribe.py": "standard output is the transcripts, a line or a JSON object per file",
}


def test_every_stage_tool_ends_through_run_tool_or_is_listed_with_its_reason():
    tools = {p.name: p.read_text() for p in (ROOT / "steps").glob("*.py")}
    users = sorted(name for name, text in tools.items() if "run_tool(main)" in text)
    assert users == sorted(MISSING)
    assert sorted(set(tools) - set(users)) == sorted(OWN_ENDING)


@pytest.mark.parametrize("tool", sorted(MISSING))
def test_missing_input_is_one_line_naming_the_file(tool, tmp_path):
    missing = tmp_path / "missing"
    args, named = MISSING[tool]
    out = run_tool(sys.executable, ROOT / "steps" / tool, *(a.format(m=missing) for a in args))
    lines = [line for line in out.stderr.splitlines() if line.strip()]
    assert out.returncode == 1, out.stderr
    assert "Traceback" not in out.stderr, out.stderr
    assert lines and lines[-1].startswith(f"{tool}: ") and named.format(m=missing) in lines[-1], out.stderr
    assert not (tmp_path / "missing").exists(), "a failed tool must not leave outputs behind"


def test_success_is_the_summary_line_on_standard_output(tmp_path, test_data):
    waves = sorted((test_data / "waves_yesno").glob("*.wav"))[:2]
    data = tmp_path / "data"
    data.mkdir()
    keys = [f"yesno-{w.stem}" for w in waves]
    (data / "wav.scp").write_text("".join(f"{k} {w}\n" for k, w in zip(keys, waves)))
    (data / "text").write_text("".join(f"{k} {w.stem.replace('_', ' ')}\n" for k, w in zip(keys, waves)))
    (data / "utt2dur").write_text("".join(f"{k} 1800.0\n" for k in keys))
    out = run_tool(sys.executable, ROOT / "steps" / "make_raw_list.py", data, tmp_path / "data.list")
    assert out.returncode == 0, out.stderr
    assert out.stdout == f"make_raw_list.py: {tmp_path / 'data.list'}: 2 utterances, 1.00 h; skipped 0\n"
    assert len((tmp_path / "data.list").read_text().splitlines()) == 2


def test_a_checkpoint_given_for_its_experiment_folder_is_told_what_is_wanted(tmp_path):
    """README names exp/<name>/model.pt, and a user gave transcribe.py that: '[Errno 20] Not a directory:
    .../model.pt/config.yaml'."""
    (tmp_path / "model.pt").write_bytes(b"weights")
    out = run_tool(sys.executable, ROOT / "steps" / "transcribe.py", tmp_path / "model.pt", tmp_path / "a.wav")
    assert out.returncode == 1 and out.stderr == (
        f"transcribe.py: {tmp_path / 'model.pt'} is a file (a checkpoint?): give the experiment folder steps/train.py "
        "trained into (holding config.yaml, exp/<name>), and a checkpoint of it, where not its model.pt, with "
        "--checkpoint\n")
