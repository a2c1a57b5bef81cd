"""Shared fixtures: the project root, the real test data, and a Kaldi data dir built from it."""

from __future__ import annotations

import dataclasses
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from tool_runs import python_on_path, run_python_tool
from triton_interpreter import patch_interpreter

ROOT = Path(__file__).resolve().parents[1]
# Without a GPU the Triton kernels run in Triton's interpreter, on CPU tensors: the variable must be set
# before triton is first imported (rnnt.loss imports it only when the Triton backend is asked for).
if not torch.cuda.is_available():
    os.environ.setdefault("TRITON_INTERPRET", "1")
if os.environ.get("TRITON_INTERPRET") == "1":
    patch_interpreter()
# where a test's tensors for the Triton backend go: CUDA where there is a GPU (the interpreter is off there),
# else the CPU
TRITON_DEVICE = "cuda" if torch.cuda.is_available() else "cpu"
# The tools under test run as a user runs them after path.sh: this environment's python first on PATH (it
# finds the rnnt package through the .pth file tools/install.sh writes; no script edits sys.path).
os.environ["PATH"] = os.pathsep.join([os.path.dirname(sys.executable), os.environ.get("PATH", "")])
# Under pytest-xdist (tools/run_tests.sh starts a worker per core) each worker and every tool it starts
# computes in one thread: two workers' OpenMP threads spinning on the same two cores made a training 3x slower.
if os.environ.get("PYTEST_XDIST_WORKER"):
    os.environ["OMP_NUM_THREADS"] = "1"
    torch.set_num_threads(1)
# A Python tool a test starts itself (subprocess, not run_tool): the python3 first on PATH, a fork of the tests'
# fork server (tests/tool_runs.py) when it runs. TORCHRUN's launcher is one, and so its ranks (started with the
# launcher's sys.executable). A test that kills its tool by SIGKILL starts sys.executable instead: the tool then
# ends at once, not once the server sees its client gone.
PYTHON = "python3"
TORCHRUN = [PYTHON, "-m", "torch.distributed.run", "--standalone"]
pytest_plugins = ["http_server"]  # the `server` fixture: an HTTP server on 127.0.0.1


@pytest.fixture(scope="session", autouse=True)
def python_tools_forked(tmp_path_factory):
    """Every Python tool the tests start, themselves or through a recipe or script, a fork of the tests' fork
    server (tests/tool_runs.py), which imported torch once."""
    python_on_path(tmp_path_factory.mktemp("python_on_path"))


@pytest.fixture
def device_asserts(monkeypatch):
    """The errors a check on the device raises here: torch._assert_async's RuntimeError, and, where Triton runs
    in its interpreter, its kernels' tl.device_assert (the interpreter compiles without debug, which drops them;
    on a GPU rnnt.loss.check_kernel is built with it), raised as Triton's InterpreterError."""
    try:
        from triton.runtime import errors, interpreter
    except ImportError:
        return (RuntimeError,)
    builder = interpreter.interpreter_builder
    monkeypatch.setattr(builder, "options", dataclasses.replace(builder.options, debug=True))
    return (RuntimeError, errors.InterpreterError)


def pytest_collection_modifyitems(items):
    """The files with a slow test first, each file's tests together and in order (its module fixtures built
    once): under pytest-xdist, which tools/run_tests.sh keeps in this order, the longest (the AN4 recipe:
    15 minutes on one thread) start at once beside the rest instead of running alone at the end."""
    slow_files = {item.path for item in items if item.get_closest_marker("slow")}
    items.sort(key=lambda item: item.path not in slow_files)


@pytest.fixture(scope="session")
def test_data() -> Path:
    """../shared/data or $RNNT_TEST_DATA; a missing dir fails the test (never a silent skip)."""
    path = Path(os.environ.get("RNNT_TEST_DATA", ROOT.parent / "shared" / "data")).resolve()
    if not (path / "librispeech_samples").is_dir():
        pytest.fail(f"test data not found at {path}: set RNNT_TEST_DATA to the shared data dir")
    return path


def librispeech_utterances(test_data: Path) -> list[tuple[str, str, str]]:
    """(utterance id, flac path, transcript) for every sample, from the corpus's own .trans.txt files."""
    rows = []
    for trans in sorted((test_data / "librispeech_samples" / "LibriSpeech").glob("*/*/*/*.trans.txt")):
        for line in trans.read_text().splitlines():
            utt, text = line.split(maxsplit=1)
            rows.append((utt, str(trans.parent / f"{utt}.flac"), text))
    return sorted(rows)


@pytest.fixture(scope="session")
def short_fbanks(test_data: Path) -> list:
    """80-bin Kaldi fbank (no dither) of the first 0.61, 0.93 and 0.37 s of three LibriSpeech samples: 59, 91
    and 35 frames of 10 ms, a ragged batch of real speech."""
    from rnnt.data.audio import load_audio, to_mono
    from rnnt.data.features import fbank

    out = []
    for (_, flac, _), seconds in zip(librispeech_utterances(test_data), (0.61, 0.93, 0.37)):
        waveform, rate = load_audio(flac, 0.0, seconds)
        out.append(fbank(to_mono(waveform), rate, "kaldi", 80, dither=0.0))
    return out


@pytest.fixture
def librispeech_dir(tmp_path: Path, test_data: Path) -> Path:
    """A Kaldi data dir (wav.scp, text, utt2spk, spk2utt, utt2dur) of the LibriSpeech samples.

    Speaker is reader-chapter, as in Kaldi's LibriSpeech recipe.
    """
    import soundfile

    d = tmp_path / "librispeech"
    d.mkdir()
    rows = librispeech_utterances(test_data)
    spk = {utt: "-".join(utt.split("-")[:2]) for utt, _, _ in rows}
    (d / "wav.scp").write_text("".join(f"{u} {p}\n" for u, p, _ in rows))
    (d / "text").write_text("".join(f"{u} {t}\n" for u, _, t in rows))
    (d / "utt2spk").write_text("".join(f"{u} {spk[u]}\n" for u, _, _ in rows))
    (d / "utt2dur").write_text("".join(f"{u} {soundfile.info(p).duration:.3f}\n" for u, p, _ in rows))
    spk2utt: dict[str, list[str]] = {}
    for u, _, _ in rows:
        spk2utt.setdefault(spk[u], []).append(u)
    (d / "spk2utt").write_text("".join(f"{s} {' '.join(us)}\n" for s, us in sorted(spk2utt.items())))
    return d


def run_tool(*args: str | os.PathLike, stdin: str | None = None, check: bool = False) -> subprocess.CompletedProcess:
    """Runs one of the project's command-line tools from the project root and captures its output; a Python
    tool (this interpreter and a .py file) as a fork of the tests' fork server (tests/tool_runs.py)."""
    argv = [str(a) for a in args]
    out = None
    if len(argv) > 1 and argv[0] == sys.executable and argv[1].endswith(".py"):
        out = run_python_tool(argv, stdin, ROOT)
    if out is None:
        out = subprocess.run(argv, input=stdin, capture_output=True, text=True, cwd=ROOT)
    if check:
        out.check_returncode()
    return out


UTILS = ROOT / "utils"


@pytest.fixture
def speechocean_dir(tmp_path: Path, test_data: Path) -> Path:
    """A writable copy of the real speechocean762 train dir: text, wav.scp, utt2spk, spk2utt, spk2gender, spk2age
    (tab-separated but for utt2spk and spk2utt; 2500 utterances, 125 speakers of 20 each, sorted)."""
    d = tmp_path / "speechocean762"
    d.mkdir()
    for source in (test_data / "speechocean762" / "train").iterdir():  # the copies writable, unlike the originals
        (d / source.name).write_bytes(source.read_bytes())
    return d


def keys(path: Path) -> list[str]:
    """The first field of each non-blank line of a table file, in file order."""
    return [line.split()[0] for line in path.read_text().splitlines() if line.strip()]


def write_flac_of_no_length(path: Path, samples, rate: int) -> None:
    """A FLAC as a writer to a pipe leaves it: the total sample count in its header 0 (unknown), for which
    libsndfile counts 2^63 - 1 frames. STREAMINFO follows "fLaC" and its block header (8 bytes); the count
    is its 36 bits from the low 4 of byte 13."""
    import io

    import soundfile

    buffer = io.BytesIO()
    soundfile.write(buffer, samples, rate, format="FLAC")
    flac = bytearray(buffer.getvalue())
    flac[8 + 13] &= 0xF0
    flac[8 + 14:8 + 18] = bytes(4)
    path.write_bytes(flac)


def assert_valid(d: Path) -> None:
    """utils/validate_data_dir.sh --no-feats accepts the dir."""
    out = run_tool(UTILS / "validate_data_dir.sh", "--no-feats", d)
    assert out.returncode == 0, out.stderr


@pytest.fixture(scope="session")
def yesno(tmp_path_factory, test_data) -> Path:
    """yesno as shards (train_yesno, test_yesno lists), a raw list of the first 5 training utterances,
    and word units."""
    import sys

    root = tmp_path_factory.mktemp("yesno")
    steps = [
        (ROOT / "egs" / "yesno" / "local" / "data_prep.py", test_data / "waves_yesno", root / "data"),
        (ROOT / "steps" / "make_shards.py", "--utts-per-shard", "10", root / "data" / "train_yesno", root / "shards",
         root / "train.list"),
        (ROOT / "steps" / "make_shards.py", "--utts-per-shard", "10", root / "data" / "test_yesno",
         root / "test_shards", root / "test.list"),
        (ROOT / "steps" / "build_units.py", "--unit-type", "word", root / "data" / "train_yesno", root / "lang"),
    ]
    for step in steps:
        out = run_tool(sys.executable, *step)
        assert out.returncode == 0, out.stderr
    out = run_tool(ROOT / "utils" / "subset_data_dir.sh", "--first", root / "data" / "train_yesno", "5", root / "five")
    assert out.returncode == 0, out.stderr
    out = run_tool(sys.executable, ROOT / "steps" / "make_raw_list.py", root / "five", root / "five.list")
    assert out.returncode == 0, out.stderr
    return root
