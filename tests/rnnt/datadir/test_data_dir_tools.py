"""Every tool of utils/ answers --help with a usage and exits 0. The data-dir tools' own tests are in the test
module of the package module each runs: test_speakers, test_filter_scp, test_split_scp, test_subset, test_combine,
test_fix, test_copy_dir (and test_validate_data_dir, test_bytes_kept)."""

import os

import pytest

from conftest import ROOT, UTILS, run_tool


@pytest.mark.parametrize("tool", sorted(p.name for p in UTILS.iterdir() if os.access(p, os.X_OK)))
def test_every_tool_has_help(tool):
    out = run_tool(UTILS / tool, "--help")
    assert out.returncode == 0 and "usage" in out.stdout.lower(), out.stderr


def test_the_data_dir_tools_run_from_a_recipe_without_its_environment(librispeech_dir, tmp_path):
    """As Kaldi's utils run from a recipe folder before anything is sourced: with the system's Python, no
    PYTHONPATH and no virtual environment (each ended in ModuleNotFoundError: rnnt, or tqdm), every data-dir tool
    works on a real data dir; get_utt2dur.sh, which reads audio, says what it needs instead of a traceback."""
    import subprocess

    recipe = ROOT / "egs" / "yesno"
    (librispeech_dir / "utt2dur").unlink()
    commands = [
        "utils/validate_data_dir.sh --no-feats {d}",
        "utils/fix_data_dir.sh {d}",
        "utils/subset_data_dir.sh --first {d} 2 {out}/first",
        "utils/copy_data_dir.sh --utt-prefix a- --spk-prefix a- {d} {out}/copy",
        "utils/combine_data.sh {out}/both {out}/first {out}/copy",
        "utils/filter_scp.py {out}/first/utt2spk {d}/text",
        "utils/split_scp.py {d}/text {out}/t1 {out}/t2",
        "utils/utt2spk_to_spk2utt.py {d}/utt2spk",
        "utils/spk2utt_to_utt2spk.py {d}/spk2utt",
    ]
    bare = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path)}
    for command in commands:
        out = subprocess.run(command.format(d=librispeech_dir, out=tmp_path), shell=True, cwd=recipe, env=bare,
                             capture_output=True, text=True)
        assert out.returncode == 0, (command, out.stderr)
    utterances = len((librispeech_dir / "utt2spk").read_text().splitlines())
    assert len((tmp_path / "both" / "utt2spk").read_text().splitlines()) == 2 + utterances  # the first 2, a copy
    out = subprocess.run(["utils/get_utt2dur.sh", str(librispeech_dir)], cwd=recipe, env=bare, capture_output=True,
                         text=True)
    assert out.returncode == 1 and out.stderr == (
        "get_utt2dur.sh: measuring the recordings' durations reads audio with soundfile, which the project's "
        "environment has: source a recipe's path.sh (after tools/install.sh)\n"), out.stderr
