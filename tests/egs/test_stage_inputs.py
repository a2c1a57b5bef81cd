"""A recipe stage's local/ scripts are inputs of the stage (utils/stages.sh: an input changed since runs the stage
again): each one the stage runs, and each local module those import. yesno's stage 1 listed synthesize.py but not
word_segments.py, which cuts the words every synthesised recording is built from: an edit to it left the data,
the training and the WER of the old cut, the stage "done before; skipped"."""

import ast
import re

from conftest import ROOT

STAGE = re.compile(r"stage_wanted (\S+) (\S+) -- (.*?); then(.*?)(?:stage_done \1 |data_done\n)", re.S)


def local_imports(script) -> set[str]:
    """local/M.py of each module M the script imports that its folder holds."""
    tree = ast.parse(script.read_text())
    modules = {node.module for node in ast.walk(tree) if isinstance(node, ast.ImportFrom) and node.module} | \
        {alias.name for node in ast.walk(tree) if isinstance(node, ast.Import) for alias in node.names}
    return {f"local/{name}.py" for name in modules if (script.parent / f"{name}.py").is_file()}


def test_the_local_scripts_a_stage_runs_and_what_they_import_are_its_inputs():
    checked, missing = [], []
    for run in sorted(ROOT.glob("egs/*/run.sh")):
        for stage, name, call, body in STAGE.findall(run.read_text().replace("\\\n", " ")):
            inputs = set(re.findall(r"local/\w+\.py", call))
            ran = set(re.findall(r"local/\w+\.py", body))
            needed = ran | {module for script in ran | inputs for module in local_imports(run.parent / script)}
            checked += [f"{run.parent.name} {stage} {name}"] if ran else []
            missing += [f"{run.parent.name}/run.sh stage {stage} {name}: {script}" for script in needed - inputs]
    assert not missing, missing
    # the stages that run local scripts were all found (a pattern that matched none would pass)
    assert {entry.split()[0] for entry in checked} >= {"TEMPLATE", "an4", "fsdd", "librispeech", "speechocean762",
                                                       "yesno"}, checked
