"""docs/design.md's table of top-level modules names every one of rnnt/ (two were missing from it)."""

import re

from conftest import ROOT


def test_every_top_level_module_has_its_row_in_the_design_map():
    rows = set(re.findall(r"^\| `([a-z_]+\.py)` \|", (ROOT / "docs" / "design.md").read_text(), re.MULTILINE))
    modules = {path.name for path in (ROOT / "rnnt").glob("*.py") if path.name != "__init__.py"}
    assert modules - rows == set(), "modules without a row in docs/design.md's table"
    assert rows - modules == set(), "rows of docs/design.md's table naming no module"
