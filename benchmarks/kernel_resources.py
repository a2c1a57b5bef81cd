#!/usr/bin/env python3
"""What the fused joiner + loss kernels (rnnt.loss.joint_kernels) take from a GPU, without one: each is
compiled ahead of time for a CUDA architecture (Triton's own compiler and ptxas, as a launch would) with
the launch constants joint_triton would pick for the joiner width and dtype, or with --launches, and
ptxas reports its registers a thread and the bytes it spills to local memory; Triton reports its shared
memory. A kernel that does not compile, or asks for more shared memory than the architecture has, fails
here as it would at its first launch. Prints a markdown table; exit status 1 when a kernel does not fit.
Run without TRITON_INTERPRET (the interpreter's kernels do not compile).
"""

from __future__ import annotations

import argparse
import inspect
import os
import re
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

SHARED_BYTES = {80: 166912, 86: 101376, 89: 101376, 90: 232448}  # the most a block may opt into, per compute capability
KERNELS = ("joint_stats_kernel", "joint_hidden_grad_kernel", "joint_weight_grad_kernel")
FLOAT32_ARGUMENTS = {"lse", "blank_lp", "label_lp", "gamma_blank", "gamma_label", "scale", "grad_enc", "grad_pred",
                     "grad_weight", "grad_bias"}


def signature(kernel, dtype: str, constants: dict) -> dict:
    """Triton's signature of kernel's arguments: the joiner's tensors in dtype, the lattice's in float32."""
    types = {}
    for name in inspect.signature(kernel.fn).parameters:
        if name in constants:
            types[name] = "constexpr"
        elif name in ("enc", "pred", "weight", "bias"):
            types[name] = f"*{dtype}"
        elif name in FLOAT32_ARGUMENTS:
            types[name] = "*fp32"
        elif name in ("cell_labels", "logit_lengths", "target_lengths"):
            types[name] = "*i64"
        else:
            types[name] = "fp32" if name == "tiny" else "i32"
    return types


def compile_for(kernel, dtype: str, constants: dict, capability: int):
    """(shared bytes, registers a thread, spilled bytes) of kernel compiled for sm_<capability>."""
    import triton
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    launch = {key: constants[key] for key in ("num_warps", "num_stages")}
    constexprs = {key: value for key, value in constants.items() if key not in launch}
    types = signature(kernel, dtype, constexprs)
    names = list(types)
    source = ASTSource(fn=kernel, signature=types, constexprs={(names.index(k),): v for k, v in constexprs.items()})
    compiled = triton.compile(source, target=GPUTarget("cuda", capability, 32), options=launch)
    ptxas = os.path.join(os.path.dirname(triton.__file__), "backends", "nvidia", "bin", "ptxas")
    arch = f"sm_{capability}a" if capability == 90 else f"sm_{capability}"
    with tempfile.TemporaryDirectory() as folder:
        ptx = os.path.join(folder, "kernel.ptx")
        with open(ptx, "w") as f:
            f.write(compiled.asm["ptx"])
        report = subprocess.run([ptxas, f"-arch={arch}", "-v", ptx, "-o", os.devnull], capture_output=True,
                                text=True, check=True).stderr
    registers = int(re.search(r"Used (\d+) registers", report).group(1))
    spilled = int(re.search(r"(\d+) bytes spill stores", report).group(1))
    return compiled.metadata.shared, registers, spilled


def launch_constants(hidden: int, dtype: str, launch: str | None) -> dict:
    """joint_triton's constants for a joiner this wide in this dtype (U + 1 of 64), or those of
    CELLSxCOLUMNSxWARPS[xCHUNK]."""
    import torch

    from rnnt.loss import joint_triton

    if launch:
        joint_triton.use_launch(launch)
    torch_dtype = {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}[dtype]
    enc = torch.empty(1, 1, hidden, dtype=torch_dtype, device="meta")
    constants, _, _ = joint_triton._geometry(enc, torch.empty(1, 64, hidden, device="meta"), "tanh")
    return {**constants, "HAS_BIAS": True, "CHUNK": min(joint_triton.WEIGHT_GRAD_CHUNK, constants["HIDDEN"])}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--capabilities", nargs="+", type=int, default=[80, 90], choices=sorted(SHARED_BYTES),
                        help="CUDA compute capabilities (80 A100, 90 H100)")
    parser.add_argument("--dtypes", nargs="+", default=["fp32", "bf16"], choices=["fp32", "bf16", "fp16"])
    parser.add_argument("--hidden", nargs="+", type=int, default=[256, 512], help="joiner widths")
    parser.add_argument("--launches", nargs="+", default=[None],
                        help="CELLSxCOLUMNSxWARPS[xCHUNK] (default: joint_triton's)")
    args = parser.parse_args()
    from rnnt.loss import joint_kernels

    fits = True
    print("| sm | dtype | hidden | launch | kernel | shared (KiB) | registers | spilled (bytes) |")
    print("|---|---|---|---|---|---|---|---|")
    for capability in args.capabilities:
        for dtype in args.dtypes:
            for hidden in args.hidden:
                for launch in args.launches:
                    constants = launch_constants(hidden, dtype, launch)
                    shape = f"{constants['ROWS']}x{constants['COLUMNS']}x{constants['num_warps']}x{constants['CHUNK']}"
                    for name in KERNELS:
                        kernel = getattr(joint_kernels, name)
                        taken = {k: v for k, v in constants.items()
                                 if k in inspect.signature(kernel.fn).parameters or k.startswith("num_")}
                        shared, registers, spilled = compile_for(kernel, dtype, taken, capability)
                        fits &= shared <= SHARED_BYTES[capability]
                        print(f"| {capability} | {dtype} | {hidden} | {shape} | {name} | {shared / 1024:.0f} | "
                              f"{registers} | {spilled} |", flush=True)
    return 0 if fits else 1


if __name__ == "__main__":
    sys.exit(main())
