"""Keeps oneDNN off AMX where the CPU advertises it but cannot run it.

Some virtual machines report AMX (amx_tile in /proc/cpuinfo) and the kernel grants the permission,
yet the first tile instruction faults: every bfloat16 matmul, linear or LSTM layer kills the process
with SIGILL (seen on this project's 2-core Xeon machines). So, where the CPU reports AMX and the user
has not chosen ONEDNN_MAX_CPU_ISA, one small bfloat16 matmul runs in a child process first (once per
CPU model, kernel and torch version: the answer is cached); where the child dies,
ONEDNN_MAX_CPU_ISA=AVX512_CORE_BF16 keeps oneDNN on the AVX-512 bfloat16 instructions. It must run
before this process's first oneDNN call, which is why `import rnnt` does it.

And on CPUs whose oneDNN has no bfloat16 LSTM at all, bf16 training is refused with the way out
(bf16_refusal) instead of failing at its first batch.
"""

from __future__ import annotations

import functools
import hashlib
import os
import platform
import subprocess
import sys

VARIABLE = "ONEDNN_MAX_CPU_ISA"
WITHOUT_AMX = "AVX512_CORE_BF16"
PROBE = "import torch; a = torch.ones(64, 64, dtype=torch.bfloat16); assert float((a @ a)[0, 0]) == 64"


def cpu_facts() -> tuple[str, set[str]]:
    """The CPU's model name and flags from /proc/cpuinfo ('' and none elsewhere)."""
    try:
        with open("/proc/cpuinfo") as f:
            lines = f.read().splitlines()
    except OSError:
        return "", set()
    fields = dict(line.split(":", 1) for line in lines if ":" in line)
    fields = {k.strip(): v.strip() for k, v in fields.items()}
    return fields.get("model name", ""), set(fields.get("flags", "").split())


def cache_file(model: str) -> str:
    import importlib.metadata

    try:
        torch_version = importlib.metadata.version("torch")
    except importlib.metadata.PackageNotFoundError:
        torch_version = "none"
    key = hashlib.sha1(f"{model}|{platform.release()}|{torch_version}".encode()).hexdigest()[:16]
    root = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(root, "rnnt", f"amx-usable-{key}")


def amx_usable(model: str) -> bool:
    """Whether a bfloat16 matmul survives in a child process with oneDNN free to use AMX; cached."""
    path = cache_file(model)
    try:
        with open(path) as f:
            return f.read().strip() == "yes"
    except OSError:
        pass
    env = {k: v for k, v in os.environ.items() if k != VARIABLE}
    child = subprocess.run([sys.executable, "-c", PROBE], env=env, capture_output=True, timeout=300)
    usable = child.returncode == 0
    try:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(f"{path}.{os.getpid()}", "w") as f:
            f.write("yes\n" if usable else "no\n")
        os.replace(f"{path}.{os.getpid()}", path)
    except OSError:
        pass  # an unwritable cache only costs the probe again next time
    return usable


def avoid_unusable_amx() -> None:
    if VARIABLE in os.environ or sys.platform != "linux" or platform.machine() not in ("x86_64", "AMD64"):
        return
    model, flags = cpu_facts()
    if "amx_tile" in flags and "avx512_bf16" in flags and not amx_usable(model):
        os.environ[VARIABLE] = WITHOUT_AMX


@functools.cache
def bf16_lstm_problem() -> str | None:
    """Why this CPU cannot run an LSTM under bfloat16 autocast (oneDNN's first line), or None where it can.
    oneDNN, which runs the CPU's LSTMs, builds no bfloat16 LSTM on some CPUs without AVX-512 (seen on an
    AVX2-only AMD EPYC machine: 'could not create a primitive descriptor for the LSTM forward propagation
    primitive'); the failure is an exception, so one tiny LSTM in this process tells. Its weights are drawn on a
    fork of torch's generator: drawn from it, a training seeded before the first ask drew other dropout masks than
    one seeded after it."""
    import torch

    try:
        with torch.random.fork_rng(devices=[]), torch.autocast("cpu", dtype=torch.bfloat16):
            torch.nn.LSTM(8, 8, batch_first=True)(torch.zeros(1, 2, 8))
    except RuntimeError as error:
        return str(error).splitlines()[0]
    return None


def bf16_refusal(model, device, precision: str) -> str | None:
    """The reason to refuse train.precision bf16 for a model with LSTMs on a CPU that cannot run them so."""
    import torch

    if precision != "bf16" or device.type != "cpu" or not any(
            isinstance(m, torch.nn.LSTM) for m in model.modules()):
        return None
    problem = bf16_lstm_problem()
    return None if problem is None else (
        f"train.precision bf16: this CPU cannot run the model's LSTMs in bfloat16 (oneDNN: {problem}; it needs "
        "AVX-512); use precision: fp32 here, or bf16 on a CPU with AVX-512 or a GPU")
