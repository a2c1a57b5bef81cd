"""Every tool of utils/ answers --help with a usage and exits 0. The data-dir tools' own tests are in the test
module of the package module each runs: test_speakers, test_filter_scp, test_split_scp, test_subset, test_combine,
test_fix, test_copy_dir (and test_validate_data_dir, test_bytes_kept)."""

import os

import pytest

from conftest import UTILS, run_tool


@pytest.mark.parametrize("tool", sorted(p.name for p in UTILS.iterdir() if os.access(p, os.X_OK)))
def test_every_tool_has_help(tool):
    out = run_tool(UTILS / tool, "--help")
    assert out.returncode == 0 and "usage" in out.stdout.lower(), out.stderr
