"""bfloat16 on CPUs whose AMX is advertised but unusable (this project's Xeon machines): `import rnnt`
keeps oneDNN off it, so that bf16 training runs instead of dying with SIGILL."""

import os
import subprocess
import sys

from rnnt.cpu_isa import VARIABLE, bf16_lstm_problem, cpu_facts

BF16_STEP = """
import rnnt, torch
lstm, linear = torch.nn.LSTM(64, 64, batch_first=True), torch.nn.Linear(64, 32)
x = torch.randn(4, 50, 64)
with torch.autocast("cpu", dtype=torch.bfloat16):
    y = linear(lstm(x)[0])
assert y.dtype == torch.bfloat16
y.float().sum().backward()
print(float(lstm.weight_ih_l0.grad.abs().sum()) > 0)
"""


def python(code: str, **env: str) -> subprocess.CompletedProcess:
    environment = {k: v for k, v in os.environ.items() if k != VARIABLE}
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          env={**environment, **env}, timeout=300)


def test_a_bf16_training_step_runs_after_import_rnnt(tmp_path):
    """Where oneDNN has bfloat16 LSTMs; where it has none (AVX2-only CPUs), the step fails as the probe said."""
    out = python(BF16_STEP, XDG_CACHE_HOME=str(tmp_path))
    problem = bf16_lstm_problem()
    if problem is None:
        assert out.returncode == 0, f"exit {out.returncode}: {out.stderr[-2000:]}"
        assert out.stdout.strip() == "True"
    else:
        assert out.returncode == 1 and problem in out.stderr, out.stderr[-2000:]
    _, flags = cpu_facts()
    cached = list((tmp_path / "rnnt").glob("amx-usable-*")) if (tmp_path / "rnnt").exists() else []
    if "amx_tile" in flags and "avx512_bf16" in flags:  # probed once, the answer kept
        assert len(cached) == 1 and cached[0].read_text().strip() in ("yes", "no")
    else:
        assert not cached


def test_a_users_own_isa_choice_is_left_alone(tmp_path):
    out = python(f"import os, rnnt; print(os.environ['{VARIABLE}'])", XDG_CACHE_HOME=str(tmp_path),
                 **{VARIABLE: "AVX2"})
    assert out.returncode == 0 and out.stdout.strip() == "AVX2"
    assert not (tmp_path / "rnnt").exists()


def test_importing_rnnt_bounds_onednns_kernel_cache_unless_the_user_chose():
    """oneDNN keeps a kernel for each input shape it has seen, up to 1024 (each padded batch length is one: +680 MB
    over 2000 lengths of a small transducer's step); rnnt keeps 32 unless ONEDNN_PRIMITIVE_CACHE_CAPACITY is set."""
    from conftest import ROOT

    ask = "import os, rnnt; print(os.environ.get('ONEDNN_PRIMITIVE_CACHE_CAPACITY'))"
    names = ("ONEDNN_PRIMITIVE_CACHE_CAPACITY", "DNNL_PRIMITIVE_CACHE_CAPACITY")
    env = {k: v for k, v in os.environ.items() if k not in names}
    for given, seen in (({}, "32"), ({names[0]: "256"}, "256"), ({names[1]: "64"}, "None")):  # the older name kept
        out = subprocess.run([sys.executable, "-c", ask], capture_output=True, text=True, cwd=ROOT,
                             env={**env, **given})
        assert out.stdout.strip() == seen, out.stderr


def test_the_bf16_probe_leaves_torchs_generator_as_it_was():
    """Its LSTM's weights were drawn from the global generator: a training seeded before the first probe of the
    process drew other dropout masks than the same one seeded after it (two Trainers of one config in one process
    differed in 23 of 26 tensors under bf16 with dropout)."""
    import torch

    bf16_lstm_problem.cache_clear()
    torch.manual_seed(0)
    state = torch.get_rng_state()
    bf16_lstm_problem()
    assert torch.equal(torch.get_rng_state(), state)


def test_a_cpu_advertising_amx_it_cannot_run_keeps_onednn_off_it_and_remembers(tmp_path, monkeypatch):
    """This CPU has no AMX, so the guard's branch is driven with its facts stood in: a CPU that reports amx_tile
    and avx512_bf16 gets its probe run once in a child; where the child dies (SIGILL, as on the Xeon machines),
    ONEDNN_MAX_CPU_ISA keeps oneDNN on AVX-512 and the answer is cached, so the next import asks no child; where
    it lives, oneDNN is left free."""
    from rnnt import cpu_isa

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    monkeypatch.setattr(cpu_isa.platform, "machine", lambda: "x86_64")
    monkeypatch.setattr(cpu_isa.sys, "platform", "linux")
    for child_exit, usable in ((-4, False), (0, True)):  # -4: killed by SIGILL
        model = f"Xeon that exits {child_exit}"
        monkeypatch.setattr(cpu_isa, "cpu_facts", lambda: (model, {"avx512_bf16", "amx_tile", "avx512f"}))
        probes = []

        def child(argv, **kwargs):
            probes.append(argv)
            return subprocess.CompletedProcess(argv, child_exit, b"", b"")

        monkeypatch.setattr(cpu_isa.subprocess, "run", child)
        for _ in range(2):
            monkeypatch.setenv(VARIABLE, "set before")
            monkeypatch.delenv(VARIABLE)
            cpu_isa.avoid_unusable_amx()
            assert os.environ.get(VARIABLE) == (None if usable else cpu_isa.WITHOUT_AMX)
        assert len(probes) == 1 and probes[0][-1] == cpu_isa.PROBE  # the second import read the cache
        assert open(cpu_isa.cache_file(model)).read() == ("yes\n" if usable else "no\n")
