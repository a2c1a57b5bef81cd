"""utils/parse_options.sh follows Kaldi's semantics."""

import subprocess

import pytest

from conftest import ROOT

SCRIPT = f"""#!/usr/bin/env bash
set -euo pipefail
stage=0
use_gpu=false
foo_bar=default
help_message="Usage: demo.sh [--stage N] [--use-gpu true|false] <in> <out>"
. {ROOT}/utils/parse_options.sh
echo "stage=$stage use_gpu=$use_gpu foo_bar=$foo_bar n=$# args=$*"
"""


@pytest.fixture
def demo(tmp_path):
    path = tmp_path / "demo.sh"
    path.write_text(SCRIPT)
    path.chmod(0o755)

    def run(*args):
        return subprocess.run([str(path), *args], capture_output=True, text=True)

    return run


def test_dashes_become_underscores_and_positionals_stay(demo):
    out = demo("--stage", "3", "--foo-bar", "two words", "in", "out")
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "stage=3 use_gpu=false foo_bar=two words n=2 args=in out"


def test_equals_form(demo):
    assert demo("--stage=4", "x").stdout.strip() == "stage=4 use_gpu=false foo_bar=default n=1 args=x"


def test_boolean_takes_only_true_or_false(demo):
    assert "use_gpu=true" in demo("--use-gpu", "true").stdout
    out = demo("--use-gpu", "yes")
    assert out.returncode != 0
    assert "--use-gpu" in out.stderr and "true or false" in out.stderr


def test_a_whole_number_takes_only_a_whole_number(demo):
    """--average abc reached a Python tool as a traceback-like message ("invalid literal for int()")."""
    assert "stage=12" in demo("--stage", "12").stdout
    assert "stage=8 " in demo("--stage", "08").stdout  # not octal: 08 failed in the recipes' arithmetic
    for value in ("abc", "", "-1", "2.5"):
        out = demo("--stage", value)
        assert out.returncode == 1 and f"demo.sh: option '--stage' takes a whole number of at least 0, not " \
            f"'{value}'" in out.stderr


def test_an_option_where_a_value_belongs_is_a_missing_value(demo):
    """--stage --foo-bar x set stage to '--foo-bar' and left x as a stray word."""
    out = demo("--foo-bar", "--stage", "3")
    assert out.returncode == 1
    assert "demo.sh: option '--foo-bar' needs a value (the next word is the option '--stage')" in out.stderr
    assert "foo_bar=--other" in demo("--foo-bar", "--other").stdout  # not an option of the script: a value


def test_unknown_option_is_an_error_naming_it(demo):
    out = demo("--no-such-thing", "1", "a")
    assert out.returncode != 0
    # after the help, the last line a terminal shows (a recipe's 40 lines of help scrolled it away)
    assert out.stderr.startswith("Usage: demo.sh") and "--no-such-thing" in out.stderr.splitlines()[-1]


def test_an_environment_variable_is_no_option(demo):
    """--PATH /nowhere was taken (the name is set): the next command was not found, far from the typo."""
    out = demo("--PATH", "/nowhere", "a")
    assert out.returncode != 0 and "'PATH' is an environment variable, not an option of the script" in out.stderr
    assert demo("--foo-bar", "x", "a").stdout.startswith("stage=0 use_gpu=false foo_bar=x")


def test_missing_value_is_an_error(demo):
    out = demo("--stage")
    assert out.returncode != 0 and "--stage" in out.stderr


def test_help_prints_help_message(demo):
    out = demo("--help")
    assert out.returncode == 0
    assert out.stdout.strip() == "Usage: demo.sh [--stage N] [--use-gpu true|false] <in> <out>"


def test_config_file_sets_variables_and_command_line_wins(demo, tmp_path):
    cfg = tmp_path / "opts.conf"
    cfg.write_text("stage=7\nfoo_bar=from_config\n")
    out = demo("--stage", "2", "--config", str(cfg), "p")
    assert out.stdout.strip() == "stage=2 use_gpu=false foo_bar=from_config n=1 args=p"
    missing = demo("--config", str(tmp_path / "nope.conf"))
    assert missing.returncode != 0 and "nope.conf" in missing.stderr
    model = tmp_path / "tiny.yaml"  # a slip for --train-config: its lines ran as commands ("model:: not found")
    model.write_text("model:\n  encoder: {hidden: 8}\n")
    out = demo("--config", str(model))
    assert out.returncode == 1 and f"--config {model}: --config takes a file of shell assignments" in out.stderr


def test_parsing_stops_at_first_positional_or_double_dash(demo):
    assert demo("a", "--stage", "5").stdout.strip() == "stage=0 use_gpu=false foo_bar=default n=3 args=a --stage 5"
    assert demo("--stage", "1", "--", "--x").stdout.strip() == "stage=1 use_gpu=false foo_bar=default n=1 args=--x"


def test_a_config_file_assigning_no_option_of_the_script_is_refused_by_its_line(demo, tmp_path):
    """A typo in a --config file (stage_typo=7) set a variable nothing read: the run went on with the default, as
    the same typo on the command line is refused; an environment variable is no option either."""
    for line in ("stage_typo=7", "  PATH=/nowhere"):
        cfg = tmp_path / "opts.conf"
        cfg.write_text(f"# my options\nfoo_bar=from_config\n{line}\n")
        out = demo("--config", str(cfg), "p")
        name = line.split("=")[0].strip()
        assert out.returncode == 1 and out.stderr.splitlines()[-1] == (
            f"demo.sh: {cfg}:3: '{name}' is no option of the script (no variable of that name is defined in it)")


def test_a_script_variable_named_config_is_refused(tmp_path):
    """--config sources a file, so a script's own `config` variable could never be set from the command line:
    parse_options.sh refuses the script at once (egs/an4/tune.sh once had one)."""
    path = tmp_path / "demo.sh"
    path.write_text(SCRIPT.replace("stage=0", "stage=0\nconfig=conf/x.yaml"))
    path.chmod(0o755)
    out = subprocess.run([str(path), "in"], capture_output=True, text=True)
    assert out.returncode == 1 and "defines a variable 'config'" in out.stderr and out.stdout == ""


def test_what_an_option_takes_is_the_scripts_default_not_a_config_files_or_an_earlier_value(demo, tmp_path):
    """foo_bar=0 in a --config file, or --foo-bar 1 given before, made --foo-bar 0.5 'not a whole number' (the
    options given on the command line win); a whole-number option stays one whatever a config file set."""
    (tmp_path / "my.conf").write_text("foo_bar=0\nstage=abc\n")
    out = demo("--config", str(tmp_path / "my.conf"), "--foo-bar", "0.5", "x")
    assert out.returncode == 0 and "foo_bar=0.5 " in out.stdout, out.stderr
    assert "foo_bar=0.5 " in demo("--foo-bar", "1", "--foo-bar", "0.5").stdout
    out = demo("--config", str(tmp_path / "my.conf"), "--stage", "x2")
    assert out.returncode == 1 and "option '--stage' takes a whole number of at least 0, not 'x2'" in out.stderr


@pytest.mark.parametrize("name", ["opt", "value", "var", "current"])
def test_an_option_of_a_name_the_parser_uses_inside_is_set(tmp_path, name):
    """The parser's locals hid a script's options of their names: --value 42 left value at its default, exit 0."""
    path = tmp_path / "named.sh"
    path.write_text(f"set -euo pipefail\n{name}=default\n. {ROOT}/utils/parse_options.sh\necho \"${{{name}}}\"\n")
    out = subprocess.run(["bash", str(path), f"--{name}", "42"], capture_output=True, text=True)
    assert out.returncode == 0 and out.stdout == "42\n", out.stderr


def test_a_bare_config_file_name_is_the_file_here_not_one_on_path(demo, tmp_path):
    """. FILE looks a name without a slash up in $PATH first: the file sourced was not the one checked."""
    (tmp_path / "bin").mkdir()
    (tmp_path / "bin" / "opts.conf").write_text("foo_bar=FROM_PATH\n")
    (tmp_path / "opts.conf").write_text("foo_bar=HERE\n")
    import os

    out = subprocess.run([str(tmp_path / "demo.sh"), "--config", "opts.conf"], capture_output=True, text=True,
                         cwd=tmp_path, env={**os.environ, "PATH": f"{tmp_path / 'bin'}:{os.environ['PATH']}"})
    assert out.returncode == 0 and "foo_bar=HERE " in out.stdout, out.stdout + out.stderr
