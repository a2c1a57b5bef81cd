"""rnnt.cli: --help prints a tool's docstring line for line with its example after it, and run_tool ends a
stage tool with 'tool.py: SUMMARY' and exit 0, or 'tool.py: MESSAGE' on standard error and exit 1; glued_values
lets an option take a value that starts with '-', as Kaldi's parse_options.sh does; at_least and above refuse a number
out of its range as a usage error naming the option."""

import os
import subprocess
import sys

import pytest

from conftest import ROOT
from rnnt.cli import ToolError, above, at_least, glued_values, parse_intermixed, run_tool, tool_parser

DOC = """Makes shards of a data dir.

  The indented lines
      keep their own layout,
  which argparse's default formatter would rewrap into one paragraph."""


def test_help_prints_the_docstring_as_written_then_the_example(capsys):
    parser = tool_parser(DOC, "steps/make_shards.py data/train shards train.list", prog="make_shards.py")
    with pytest.raises(SystemExit) as stop:
        parser.parse_args(["--help"])
    assert stop.value.code == 0
    help_text = capsys.readouterr().out
    assert help_text.startswith("usage: make_shards.py [-h]\n\n")
    assert DOC + "\n" in help_text  # every line and indent of the docstring, unwrapped
    assert help_text.rstrip("\n").endswith("\n\nexample: steps/make_shards.py data/train shards train.list")


def test_help_without_an_example_has_no_example_line(capsys):
    with pytest.raises(SystemExit):
        tool_parser(DOC, prog="tool.py").parse_args(["-h"])
    help_text = capsys.readouterr().out
    assert "example:" not in help_text
    assert help_text.rstrip("\n").endswith("-h, --help  show this help message and exit")


def test_prog_defaults_to_the_script_name(monkeypatch, capsys):
    monkeypatch.setattr("sys.argv", ["/somewhere/steps/score.py"])
    parser = tool_parser(DOC)
    parser.add_argument("ref")
    assert parser.parse_args(["data/text"]).ref == "data/text"
    with pytest.raises(SystemExit) as stop:
        parser.parse_args([])
    assert stop.value.code == 2
    assert capsys.readouterr().err.startswith("usage: score.py [-h] ref\n")


def test_success_prints_the_summary_after_the_tool_name_and_exits_0(monkeypatch, capsys):
    monkeypatch.setattr("sys.argv", ["/work/steps/make_raw_list.py", "data", "data.list"])
    with pytest.raises(SystemExit) as stop:
        run_tool(lambda: "data.list: 2 utterances")
    assert stop.value.code == 0
    out = capsys.readouterr()
    assert (out.out, out.err) == ("make_raw_list.py: data.list: 2 utterances\n", "")


def test_a_tool_error_is_one_line_on_stderr_and_exit_1(monkeypatch, capsys):
    monkeypatch.setattr("sys.argv", ["steps/build_units.py"])

    def main():
        raise ToolError("data/train/text:3: no transcript after the key")

    with pytest.raises(SystemExit) as stop:
        run_tool(main)
    assert stop.value.code == 1
    out = capsys.readouterr()
    assert (out.out, out.err) == ("", "build_units.py: data/train/text:3: no transcript after the key\n")


def test_other_exceptions_are_not_swallowed(monkeypatch, capsys):
    """Only ToolError is a user's mistake told in one line; a bug keeps its traceback."""
    monkeypatch.setattr("sys.argv", ["steps/decode.py"])

    def main():
        raise KeyError("model")

    with pytest.raises(KeyError, match="model"):
        run_tool(main)
    assert capsys.readouterr().out == ""


def test_a_shortened_option_is_refused_as_kaldis_scripts_refuse_it(tmp_path):
    """subset_data_dir.sh --short ran as --shortest, validate_data_dir.sh --no-f as --no-feats."""
    for tool, argv in (("subset_data_dir.sh", ["--short", "d", "2", "out"]), ("validate_data_dir.sh", ["--no-f", "d"])):
        out = subprocess.run([str(ROOT / "utils" / tool), *argv], cwd=tmp_path, capture_output=True, text=True)
        assert out.returncode == 2 and f"{tool}: error: unrecognized arguments: {argv[0]}" in out.stderr, out.stderr


def test_glued_values_let_a_value_start_with_a_dash():
    argv = ["--utt-suffix", "-x", "--validate-opts", "--no-wav --no-text", "src", "--spk-prefix", "-a-", "dest"]
    glued = glued_values(argv, ("--utt-suffix", "--spk-prefix", "--validate-opts"))
    assert glued == ["--utt-suffix=-x", "--validate-opts=--no-wav --no-text", "src", "--spk-prefix=-a-", "dest"]
    parser = tool_parser(DOC)
    for option in ("--utt-suffix", "--spk-prefix", "--validate-opts"):
        parser.add_argument(option)
    parser.add_argument("src")
    parser.add_argument("dest")
    args = parser.parse_args(glued)
    assert (args.utt_suffix, args.spk_prefix, args.validate_opts) == ("-x", "-a-", "--no-wav --no-text")
    assert glued_values(["--utt-suffix"], ("--utt-suffix",)) == ["--utt-suffix="]  # a last option without a value



@pytest.mark.parametrize("argv, exp_dir, audio, stream", [
    (["exp", "--stream", "a.wav", "b.wav"], "exp", ["a.wav", "b.wav"], True),
    (["--", "exp", "-dash.wav"], "exp", ["-dash.wav"], False),  # was: unrecognized arguments: -dash.wav
    (["--stream", "--", "-exp", "-", "--stream"], "-exp", ["-", "--stream"], True),
    (["exp", "--stream", "a.wav", "--", "-b.wav"], "exp", ["a.wav", "-b.wav"], True),
])
def test_intermixed_options_and_every_word_after_a_double_dash_a_positional(argv, exp_dir, audio, stream):
    parser = tool_parser("A tool.")
    parser.add_argument("--stream", action="store_true")
    parser.add_argument("exp_dir")
    parser.add_argument("audio", nargs="*")
    args = parse_intermixed(parser, argv)
    assert (args.exp_dir, args.audio, args.stream) == (exp_dir, audio, stream)


def test_a_number_option_out_of_its_range_is_a_usage_error_naming_it(capsys):
    parser = tool_parser(DOC, prog="tool.py")
    parser.add_argument("--threads", type=at_least(0), default=0)
    parser.add_argument("--tail-seconds", type=at_least(0.0))
    parser.add_argument("--chunk-seconds", type=above(0))
    args = parser.parse_args(["--threads", "3", "--tail-seconds", "0", "--chunk-seconds", "0.05"])
    assert (args.threads, args.tail_seconds, args.chunk_seconds) == (3, 0.0, 0.05)
    assert isinstance(args.threads, int) and isinstance(args.tail_seconds, float)
    for option, value, message in [("--threads", "-1", "expected a whole number at least 0, got '-1'"),
                                   ("--threads", "1.5", "expected a whole number at least 0, got '1.5'"),
                                   ("--tail-seconds", "-0.5", "expected a number at least 0, got '-0.5'"),
                                   ("--tail-seconds", "nan", "expected a number at least 0, got 'nan'"),
                                   ("--chunk-seconds", "0", "expected a number above 0, got '0'")]:
        with pytest.raises(SystemExit) as stop:
            parser.parse_args([option, value])
        assert stop.value.code == 2
        assert capsys.readouterr().err.endswith(f"tool.py: error: argument {option}: {message}\n")


@pytest.mark.parametrize("tool", ["utils/copy_data_dir.sh", "steps/augment_data_dir.py"])
def test_an_id_prefix_with_whitespace_is_refused_before_anything_is_written(tool, tmp_path):
    """It split every line it went into: copy_data_dir.sh said 'copied 6 utterances', then 29 validation errors
    and a broken copy; augment_data_dir.py wrote the audio first."""
    extra = ["--noise-scp", "n.scp"] if tool.endswith(".py") else []
    out = subprocess.run([*([sys.executable] if tool.endswith(".py") else []), str(ROOT / tool), *extra,
                          "--utt-prefix", "a b-", "src", "dest"], cwd=tmp_path, capture_output=True, text=True,
                         env={**os.environ, "PATH": f"{os.path.dirname(sys.executable)}:{os.environ['PATH']}"})
    assert out.returncode == 2 and "argument --utt-prefix: 'a b-' holds whitespace, which no Kaldi id may" in \
        out.stderr, out.stderr
    assert not (tmp_path / "dest").exists()


@pytest.mark.parametrize("tool, option, argv", [
    ("decode.py", "--threads", ["-1", "exp", "data.list", "test"]),  # torch's RuntimeError traceback
    ("decode_sherpa_onnx.py", "--tail-seconds", ["-1", "onnx", "data.list", "out"]),  # numpy's negative dimensions
    ("transcribe.py", "--chunk-seconds", ["0", "--stream", "exp", "a.wav"]),  # one-sample chunks, silently
    ("transcribe.py", "--chunk-seconds", ["1e9", "--stream", "exp", "-"]),  # a chunk read whole: a MemoryError
    ("make_shards.py", "--nj", ["0", "data", "shards", "data.list"]),
    ("make_shards.py", "--resample", ["1", "data", "shards", "data.list"]),  # a 1 Hz shard, 7 samples an utterance
    ("compute_cmvn_stats.py", "--sample-rate", ["40", "data.list", "cmvn"]),  # a ZeroDivisionError
])
def test_the_tools_refuse_a_number_out_of_range_before_they_start(tool, option, argv, tmp_path):
    out = subprocess.run([sys.executable, str(ROOT / "steps" / tool), option, *argv], cwd=tmp_path,
                         capture_output=True, text=True)
    assert out.returncode == 2 and "Traceback" not in out.stderr, out.stderr
    assert f"{tool}: error: argument {option}: expected " in out.stderr, out.stderr


def test_make_shards_refuses_a_prefix_holding_a_folder_before_it_starts(tmp_path):
    """--prefix x/y failed writing its first shard and left a plan that refused the next run of the right prefix."""
    out = subprocess.run([sys.executable, str(ROOT / "steps" / "make_shards.py"), "--prefix", "x/y", "data", "shards",
                          "data.list"], cwd=tmp_path, capture_output=True, text=True)
    assert out.returncode == 2 and "argument --prefix: 'x/y' is not a part of a file name" in out.stderr, out.stderr
    assert not (tmp_path / "shards").exists()


def test_export_refuses_chunk_frames_without_streaming(tmp_path):
    """--chunk-frames alone wrote an offline export, silently ignored."""
    out = subprocess.run([sys.executable, str(ROOT / "steps" / "export_onnx.py"), "--chunk-frames", "6", "exp",
                          "onnx"], cwd=tmp_path, capture_output=True, text=True)
    assert out.returncode == 2 and "--chunk-frames sets a streaming export's chunks: add --streaming" in out.stderr


def test_combine_nbest_refuses_an_out_dir_that_is_a_file_before_scoring(tmp_path):
    """It scored every system's n-best first, then FileExistsError's traceback."""
    (tmp_path / "taken").write_text("")
    systems = [word for name in ("a", "b") for word in ("--system", name, f"{name}/m.pt", f"{name}/decode")]
    out = subprocess.run([sys.executable, str(ROOT / "steps" / "combine_nbest.py"), *systems, "--lm-fusion", "f.yaml",
                          "--tune", "dev.list", "taken"],
                         cwd=tmp_path, capture_output=True, text=True)
    assert out.returncode == 1 and "combine_nbest.py: taken: exists and is not a folder" in out.stderr, out.stderr


def test_a_number_list_takes_finite_numbers_within_its_bound():
    """combine_nbest.py --grid nan,0.2 searched a nan point (every total nan, the first hypothesis always chosen)
    and wrote .nan weights; tune_lm_fusion.py's check that weights are at least 0 let nan through (nan < 0 is
    false)."""
    import argparse

    from rnnt.cli import number_list

    assert number_list(0)("0,0.2,1") == [0.0, 0.2, 1.0] and number_list()("-2,0,1.5") == [-2.0, 0.0, 1.5]
    for text in ("nan,0.2", "inf", "0.2,x", "", "-0.1,0.2"):
        with pytest.raises(argparse.ArgumentTypeError, match=f"finite numbers of at least 0 separated by commas, got "
                                                                f"'{text}'"):
            number_list(0)(text)
    with pytest.raises(argparse.ArgumentTypeError, match="expected finite numbers separated by commas"):
        number_list()("1,-inf")


def test_a_filter_whose_reader_stops_early_ends_quietly_with_sigpipes_status(tmp_path):
    """utils/filter_scp.py (and the other tools that print their results) | head: a BrokenPipeError traceback
    before; now status 141, as Kaldi's Perl filters end under a shell's pipefail, and nothing on standard error."""
    table = tmp_path / "text"
    table.write_text("".join(f"utt{i:06d} some words\n" for i in range(200000)))
    out = subprocess.run(["bash", "-c", f"set -o pipefail; {sys.executable} utils/filter_scp.py {table} {table} "
                          "| head -1"], capture_output=True, text=True, cwd=ROOT,
                         env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(ROOT)})
    assert (out.returncode, out.stdout, out.stderr) == (141, "utt000000 some words\n", "")


def test_an_os_error_of_a_file_is_said_as_the_shell_says_it(tmp_path):
    """'decode.py: [Errno 2] No such file or directory: 'x.list'' was Python's form, in every tool that stops on it."""
    from rnnt.cli import error_line

    with pytest.raises(OSError) as missing:
        open(tmp_path / "x.list")
    assert error_line(missing.value) == f"{tmp_path / 'x.list'}: No such file or directory"
    with pytest.raises(OSError) as moved:
        os.rename(tmp_path / "a", tmp_path / "b")
    assert error_line(moved.value) == f"{tmp_path / 'a'} -> {tmp_path / 'b'}: No such file or directory"
    assert error_line(ValueError("x.list:3: not a number")) == "x.list:3: not a number"
    out = subprocess.run([sys.executable, str(ROOT / "steps" / "decode.py"), "exp", "none.list", "test"],
                         cwd=tmp_path, capture_output=True, text=True)
    assert out.returncode == 1 and "Errno" not in out.stderr, out.stderr


@pytest.mark.parametrize("tool", ["validate_data_dir.sh", "fix_data_dir.sh", "copy_data_dir.sh", "combine_data.sh",
                                  "subset_data_dir.sh", "get_utt2dur.sh"])
def test_a_data_dir_table_that_cannot_be_read_is_one_line_naming_it(tool, tmp_path):
    """validate_data_dir.sh, fix_data_dir.sh and combine_data.sh of a dir whose text has no read permission: a
    PermissionError traceback (the other tools said 'FILE: Permission denied'). Run without root's override of
    file permissions, as a user is."""
    source = tmp_path / "d"
    source.mkdir()
    for name, content in (("text", "u1 A\n"), ("wav.scp", "u1 a.wav\n"), ("utt2spk", "u1 s\n"),
                          ("spk2utt", "s u1\n"), ("utt2dur", "u1 x\n")):
        (source / name).write_text(content)
    locked = source / {"subset_data_dir.sh": "utt2spk", "get_utt2dur.sh": "wav.scp"}.get(tool, "text")
    locked.chmod(0)
    args = {"copy_data_dir.sh": [source, tmp_path / "out"], "combine_data.sh": [tmp_path / "out", source],
            "subset_data_dir.sh": [source, "1", tmp_path / "out"], "validate_data_dir.sh": ["--no-feats", source]
            }.get(tool, [source])
    as_a_user = ["setpriv", "--bounding-set=-dac_override,-dac_read_search", "--"] if os.geteuid() == 0 else []
    out = subprocess.run([*as_a_user, str(ROOT / "utils" / tool), *map(str, args)], capture_output=True, text=True)
    assert out.returncode == 1 and "Traceback" not in out.stderr, out.stderr
    assert f"{locked}: Permission denied" in out.stderr, out.stderr
