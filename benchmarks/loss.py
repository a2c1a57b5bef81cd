#!/usr/bin/env python3
"""Transducer loss benchmark: forward + backward time and peak memory, joiner included, float32 on the CPU
or a CUDA device (--device cuda).

Each (shape, method) runs in two fresh processes. The first measures memory: the kernel's peak resident
set size during one step (VmHWM after resetting it through /proc/self/clear_refs) minus the resident
size before it, so it counts everything the step allocates. That step follows a warm-up step, so code
pages and thread pools loaded once per process are not counted, and glibc is told to map every block
of 128 KB or more on its own (MALLOC_MMAP_THRESHOLD_), so memory freed by the warm-up goes back to the
kernel and is counted again when the step takes it. The second process, with glibc's defaults (which
keep and reuse freed blocks, as training does), times --runs steps after one warm-up: the median.
The memory process also runs one step under the PyTorch profiler and replays its allocation events:
the peak of the bytes held in tensors, exact and free of the allocator's and the kernel's rounding
(the resident-set peak moves by about half a MiB from run to run).
On a CUDA device the step is timed between synchronisations, and memory is the allocator's: the peak of
the bytes held in tensors (max_memory_allocated) and of the memory reserved from the device, each beyond
what was held before the step.
The loss alone (--loss-alone, the default on the CPU): a third process times the loss of logits made once before
the steps and its gradient with respect to them, the joiner left out, for the methods that take logits (the
fused and pruned losses make theirs inside; padded-reuse writes its gradient over them): on the CPU, torchaudio's
rows run under another torch (its venv's), whose joiner may take another time than ours.
Prints a markdown table. On the CPU torchaudio runs from benchmarks/venv-torchaudio
(make_torchaudio_venv.sh); with --device cuda from this interpreter (a CUDA torchaudio beside its torch).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SHAPES = {"B8-T200-U50-V500": (8, 200, 50, 500), "B4-T400-U100-V1000": (4, 400, 100, 1000),
          "B30-T440-U104-V500": (30, 440, 104, 500)}  # the last: transducer-loss-benchmarking's, for a GPU
CPU_SHAPES = ["B8-T200-U50-V500", "B4-T400-U100-V1000"]  # the third's logits alone take 2.8 GB
HIDDEN = 512
S_RANGE = 5
METHODS = {
    "torchaudio": "torchaudio.functional.rnnt_loss (fused log-softmax)",
    "naive": "autograd: log_softmax + gather + diagonal recursion",
    "padded": "ours, padded logits",
    "padded-reuse": "ours, padded, gradient written over the logits",
    "packed": "ours, packed logits",
    "fused": "ours, fused joiner + loss",
    "pruned": f"ours, pruned (simple loss + s_range={S_RANGE})",
}


def memory_kb(field: str) -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    raise RuntimeError(f"{field} not in /proc/self/status")


def select_device(device: str) -> None:
    """Makes cuda:N the current device, so that the memory and synchronisation calls without a device
    (torch.cuda.max_memory_allocated(), synchronize(), ...) read it, not cuda:0."""
    import torch

    if device.startswith("cuda") and not torch.cuda.is_available():  # (a raw error from deep inside the step)
        raise SystemExit(f"{os.path.basename(sys.argv[0])}: --device {device}: this machine's torch sees no CUDA "
                         "device")
    if device.startswith("cuda") and torch.device(device).index is not None:
        torch.cuda.set_device(torch.device(device))


def tensor_peak_bytes(step) -> int:
    """The most bytes held in tensors at once during step(), beyond what was held before it, from the
    profiler's allocation and free events in the order they happened."""
    from torch.profiler import ProfilerActivity, profile

    step.clear()  # freed inside the profile, gradients made before it would count as new (unknown size) or not
    with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
        step()
    events = sorted((e for e in prof.profiler.kineto_results.events() if e.name() == "[memory]"),
                    key=lambda e: e.start_ns())
    held = peak = 0
    for event in events:
        held += event.nbytes()
        peak = max(peak, held)
    return peak


def naive_loss(logits, targets, T_b, U_b):
    """Autograd through everything: what a straightforward PyTorch implementation does."""
    import torch

    log_probs = logits.log_softmax(-1)
    B, T, U1, _ = log_probs.shape
    blank = log_probs[..., 0]
    labels = torch.nn.functional.pad(targets, (0, 1))[:, None, :, None].expand(B, T, U1, 1)
    label = log_probs.gather(3, labels).squeeze(3)
    neg_inf = torch.tensor(float("-inf"), device=logits.device)
    alpha = [[None] * U1 for _ in range(T)]
    for n in range(T + U1 - 1):  # anti-diagonals; every cell a separate autograd node
        for u in range(max(0, n - T + 1), min(n, U1 - 1) + 1):
            t = n - u
            if t == 0 and u == 0:
                alpha[t][u] = torch.zeros(B, device=logits.device)
                continue
            from_blank = alpha[t - 1][u] + blank[:, t - 1, u] if t > 0 else neg_inf.expand(B)
            from_label = alpha[t][u - 1] + label[:, t, u - 1] if u > 0 else neg_inf.expand(B)
            alpha[t][u] = torch.logaddexp(from_blank, from_label)
    final = torch.stack([alpha[T_b[b] - 1][U_b[b]][b] + blank[b, T_b[b] - 1, U_b[b]] for b in range(B)])
    return -final.mean()


SEPARABLE = ("torchaudio", "naive", "padded", "packed")  # a loss of the logits a joiner made, left as they were


def make_step(method, B, T, U, V, device="cpu", backend="auto", chunk_elements=None, kernels=False,
              loss_only=False):
    """One forward + backward step of method at shape (B, T, U, V). loss_only (a SEPARABLE method): the loss of
    logits made once, before the steps, and its gradient with respect to them: the joiner left out."""
    import torch

    torch.manual_seed(0)
    enc = torch.randn(B, T, HIDDEN, device=device, requires_grad=True)
    pred = torch.randn(B, U + 1, HIDDEN, device=device, requires_grad=True)
    joiner = torch.nn.Linear(HIDDEN, V).to(device)
    targets = torch.randint(1, V, (B, U), device=device)
    T_b = torch.full((B,), T, device=device)
    U_b = torch.full((B,), U, device=device)
    host_lengths = ([T] * B, [U] * B)  # as training passes them: no read of the device for its blocks

    made = {}  # loss_only: the logits, made once before the steps, a leaf whose gradient each step computes

    def logits_padded():
        if made:
            return made["logits"]
        return joiner(torch.tanh(enc[:, :, None] + pred[:, None]))

    def packed_logits():
        from rnnt.loss import pack_joiner_input

        if made:
            return made["logits"]
        return joiner(torch.tanh(pack_joiner_input(enc, pred, T_b, U_b)))

    if loss_only:
        if method not in SEPARABLE:
            raise ValueError(f"{method}: no loss alone (its logits are made inside it, or overwritten by it)")
        with torch.no_grad():
            made["logits"] = (packed_logits() if method == "packed" else logits_padded()).requires_grad_()

    if method == "torchaudio":
        import torchaudio.functional

        def loss():
            return torchaudio.functional.rnnt_loss(logits_padded(), targets.int(), T_b.int(), U_b.int(), blank=0)
    elif method == "naive":
        def loss():
            return naive_loss(logits_padded(), targets, T_b.tolist(), U_b.tolist())
    elif method == "padded":
        from rnnt.loss import transducer_loss

        def loss():
            return transducer_loss(logits_padded(), targets, T_b, U_b, backend=backend)
    elif method == "padded-reuse":
        from rnnt.loss import transducer_loss

        def loss():
            return transducer_loss(logits_padded(), targets, T_b, U_b, reuse_logits_for_grad=True, backend=backend)
    elif method == "packed":
        from rnnt.loss import transducer_loss

        def loss():
            return transducer_loss(packed_logits(), targets, T_b, U_b, backend=backend)
    elif method == "fused":
        from rnnt.loss import fused_joiner_loss

        def loss():
            return fused_joiner_loss(enc, pred, joiner.weight, joiner.bias, targets, T_b, U_b, backend=backend,
                                     chunk_elements=chunk_elements, kernels=kernels, host_lengths=host_lengths)
    elif method == "pruned":
        from rnnt.loss import prune, prune_ranges, simple_loss
        from rnnt.loss.options import LatticeOptions
        from rnnt.loss.pruned import banded_loss

        am_proj, lm_proj = torch.nn.Linear(HIDDEN, V).to(device), torch.nn.Linear(HIDDEN, V).to(device)

        def loss():
            simple, (gamma_blank, gamma_label) = simple_loss(am_proj(enc), lm_proj(pred), targets, T_b, U_b,
                                                             return_posteriors=True, backend=backend)
            ranges = prune_ranges(gamma_blank, gamma_label, T_b, U_b, S_RANGE, backend=backend)
            enc_pruned, pred_pruned = prune(enc, pred, ranges)
            logits = joiner(torch.tanh(enc_pruned + pred_pruned))
            # as the model does: simple_loss checked targets and lengths, the band's loss does not again
            return 0.5 * simple + banded_loss(logits, targets, ranges, T_b, U_b, 0,
                                              options=LatticeOptions(backend=backend))
    else:
        raise ValueError(method)

    def clear():
        enc.grad = pred.grad = None
        if made:
            made["logits"].grad = None
        for module in (joiner, *([am_proj, lm_proj] if method == "pruned" else [])):
            module.zero_grad(set_to_none=True)

    def step():
        clear()
        value = loss()
        value.backward()
        return float(value.detach())  # waits for the device: the backward pass ran before it on the same stream

    step.clear = clear  # the memory measures clear the last step's gradients before they start
    return step


def cuda_memory(step) -> dict:
    """The step's peak bytes in tensors and reserved from the device, beyond those held before it (MiB)."""
    import torch

    step.clear()  # as tensor_peak_bytes: from no gradients held, the step's own
    torch.cuda.synchronize()
    torch.cuda.empty_cache()  # the warm-up's cached blocks go back, so the step's reservations count again
    held, reserved = torch.cuda.memory_allocated(), torch.cuda.memory_reserved()
    torch.cuda.reset_peak_memory_stats()
    value = step()
    return {"loss": value, "peak_mb": (torch.cuda.max_memory_reserved() - reserved) / 2**20,
            "tensor_peak_mb": (torch.cuda.max_memory_allocated() - held) / 2**20}


def worker(method: str, shape: str, runs: int, measure: str, device: str, backend: str) -> None:
    """Prints the step's memory ("memory") or times ("time"; "loss-time": the loss alone) as JSON."""
    select_device(device)
    step = make_step(method, *SHAPES[shape], device=device, backend=backend, loss_only=measure == "loss-time")
    step()  # warm-up: loads code pages, starts thread pools (on a GPU: loads kernels, creates handles)
    if measure == "memory" and device != "cpu":
        print(json.dumps(cuda_memory(step)))
        return
    if measure == "memory":
        step.clear()  # the warm-up's gradients freed first: below a baseline taken with them, the step's were lost
        base = memory_kb("VmRSS")
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")  # reset the peak resident set size (VmHWM) to the current size
        value = step()
        peak_mb = (memory_kb("VmHWM") - base) / 1024
        print(json.dumps({"loss": value, "peak_mb": peak_mb, "tensor_peak_mb": tensor_peak_bytes(step) / 2**20}))
        return
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        step()
        times.append(time.perf_counter() - start)
    print(json.dumps({"median": statistics.median(times), "min": min(times), "max": max(times)}))


def run_worker(method, shape, runs, python, measure, device, backend) -> dict | None:
    env = {**os.environ, "PYTHONPATH": ROOT}
    if measure == "memory":  # fixed thresholds: freed blocks of 128 KB or more go back to the kernel at once
        env.update(MALLOC_MMAP_THRESHOLD_="131072", MALLOC_TRIM_THRESHOLD_="131072")
    cmd = [python, os.path.abspath(__file__), "--worker", method, "--shape", shape, "--runs", str(runs),
           "--measure", measure, "--device", device, "--backend", backend]
    out = subprocess.run(cmd, capture_output=True, text=True, env=env)
    if out.returncode != 0:
        print(f"loss.py: {method} {shape} failed:\n{out.stderr[-2000:]}", file=sys.stderr)
        return None
    return json.loads(out.stdout.strip().splitlines()[-1])


def run_one(method, shape, runs, python, device, backend, loss_alone) -> dict | None:
    memory = run_worker(method, shape, runs, python, "memory", device, backend)
    timing = run_worker(method, shape, runs, python, "time", device, backend)
    alone = {}
    if loss_alone and method in SEPARABLE:
        alone = run_worker(method, shape, runs, python, "loss-time", device, backend)
    return {**memory, **timing, "loss_median": (alone or {}).get("median")} if memory and timing else None


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],  # the first paragraph
                                     epilog="Prints a markdown table.")
    parser.add_argument("--shapes", nargs="+", choices=list(SHAPES),
                        help=f"default: {' '.join(CPU_SHAPES)} on the CPU, all three on a GPU")
    parser.add_argument("--methods", nargs="+", default=list(METHODS), choices=list(METHODS))
    parser.add_argument("--runs", type=int, default=5, help="timed steps per configuration (default 5)")
    parser.add_argument("--torchaudio-python",
                        default=os.path.join(ROOT, "benchmarks", "venv-torchaudio", "bin", "python"),
                        help="interpreter with torchaudio on the CPU (default: benchmarks/venv-torchaudio)")
    parser.add_argument("--device", default="cpu", help="cpu (default) or a CUDA device such as cuda or cuda:1")
    parser.add_argument("--backends", nargs="+", default=["auto"], choices=["auto", "torch", "triton"],
                        help="where our losses run their lattice passes; each method runs once per backend "
                             "(default auto: Triton on CUDA, PyTorch on the CPU)")
    parser.add_argument("--loss-alone", action=argparse.BooleanOptionalAction,
                        help="also time the loss of logits made before the step, without the joiner, where the "
                             "method takes logits (default: on the CPU only: a GPU's run stays in its time limit)")
    parser.add_argument("--backend", default="auto", help=argparse.SUPPRESS)
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    parser.add_argument("--shape", help=argparse.SUPPRESS)
    parser.add_argument("--measure", choices=["memory", "time", "loss-time"], help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        worker(args.worker, args.shape, args.runs, args.measure, args.device, args.backend)
        return 0
    if "triton" in args.backends and not args.device.startswith("cuda"):
        parser.error("--backends triton runs on a CUDA device (--device cuda); on the CPU only in Triton's "
                     "interpreter, whose time means nothing (tests/ run it there for its numerics)")
    from machine import machine_line  # benchmarks/, the script's folder
    print(machine_line(args.device) + "\n")  # benchmarks/machine.py: where the table was measured

    import torch

    on_cpu = args.device == "cpu"
    peer = []  # torch's and torchaudio's versions in the peer venv, where it imports both
    if on_cpu:
        peer = subprocess.run([args.torchaudio_python, "-c", "import torch, torchaudio; print(torch.__version__, "
                               "torchaudio.__version__)"], capture_output=True, text=True).stdout.split() \
            if os.path.exists(args.torchaudio_python) else []
        if len(peer) == 2:  # its rows run in its own venv, joiner and all: another torch
            print(f"torchaudio's rows: torchaudio {peer[1]} on torch {peer[0]} (benchmarks/venv-torchaudio).")
        print(f"CPU float32, torch {torch.__version__}, {torch.get_num_threads()} threads, joiner tanh + "
              f"Linear({HIDDEN} -> V) inside the step; median of {args.runs} forward+backward steps; "
              f"peak RSS = extra resident memory during one step after a warm-up step; tensor peak = the most "
              f"bytes held in tensors at once during a step, from the profiler's allocation events.\n")
    else:
        print(f"{torch.cuda.get_device_name(args.device)} float32 (TF32 off), torch {torch.__version__}, joiner "
              f"tanh + Linear({HIDDEN} -> V) inside the step; median of {args.runs} forward+backward steps after a "
              f"warm-up step; reserved = extra device memory the caching allocator took during one step; tensor "
              f"peak = the most bytes held in tensors at once during it (max_memory_allocated).\n")
    memory_name = "peak RSS" if on_cpu else "reserved"
    print(f"| shape | method | time (s) median [min-max] | {memory_name} (MiB) | tensor peak (MiB) | "
          f"time vs torchaudio | {memory_name} vs torchaudio | tensor peak vs torchaudio | loss alone (s) | "
          "loss alone vs torchaudio | loss |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    failed = 0
    for shape in args.shapes or (CPU_SHAPES if on_cpu else list(SHAPES)):
        results = {}
        for method in args.methods:
            if method == "torchaudio" and on_cpu and len(peer) != 2:  # a venv whose build failed (offline) too
                print(f"loss.py: {args.torchaudio_python} cannot import torch and torchaudio: its rows are left out "
                      "(run benchmarks/make_torchaudio_venv.sh)", file=sys.stderr)
                continue
            if method == "naive" and shape != "B8-T200-U50-V500":
                continue  # tens of thousands of autograd nodes per step: minutes at the large shape
            python = args.torchaudio_python if method == "torchaudio" and on_cpu else sys.executable
            ours = method not in ("torchaudio", "naive")
            for backend in args.backends if ours else ["auto"]:
                name = (f"{METHODS[method]}, {backend} backend" if ours and args.backends != ["auto"]
                        else METHODS[method])
                results[name] = run_one(method, shape, args.runs, python, args.device, backend,
                                        on_cpu if args.loss_alone is None else args.loss_alone)
                failed += results[name] is None  # named on stderr by run_worker
                if results[name] is not None:  # each row as it is measured: a part cut by its time limit keeps
                    print_row(shape, name, results[name], results.get(METHODS["torchaudio"]))  # those before
    return 1 if failed else 0


def print_row(shape: str, name: str, r: dict, ref: dict | None) -> None:
    """A row of the table; its columns against torchaudio's where torchaudio was measured before it (the methods'
    order: torchaudio first)."""
    vs_time = f"{r['median'] / ref['median']:.2f}x" if ref else "-"
    vs_peak = f"{r['peak_mb'] / ref['peak_mb']:.3f}x" if ref and ref['peak_mb'] else "-"
    vs_tensors = f"{r['tensor_peak_mb'] / ref['tensor_peak_mb']:.3f}x" if ref and ref['tensor_peak_mb'] else "-"
    alone = f"{r['loss_median']:.4g}" if r["loss_median"] else "-"
    vs_alone = f"{r['loss_median'] / ref['loss_median']:.2f}x" if r["loss_median"] and ref and \
        ref["loss_median"] else "-"
    print(f"| {shape} | {name} | {r['median']:.4g} [{r['min']:.4g}-{r['max']:.4g}] | "  # a GPU's ms too
          f"{r['peak_mb']:.1f} | {r['tensor_peak_mb']:.1f} | {vs_time} | {vs_peak} | {vs_tensors} | "
          f"{alone} | {vs_alone} | {r['loss']:.4f} |", flush=True)


if __name__ == "__main__":
    sys.exit(main())
