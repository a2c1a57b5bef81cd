#!/usr/bin/env python3
"""Training-step benchmark on the CPU or a CUDA device (--device cuda), float32 and bfloat16 autocast,
synthetic batches of realistic shape.

A batch holds utterances of unequal length, as a sorted batch does (the longest 12 s, the others down
to 10.2 s). For each configuration: audio seconds trained per wall second; the share of a step spent
in the encoder (forward + backward), the joint network + loss (forward + backward, encoder output
given) and the optimiser step, each timed alone; model FLOP/s (LSTM and joiner matmuls, backward
counted as twice the forward; n/a for the Conformer, not counted) over the machine's float32 matmul FLOP/s
measured in the same run.
StackTime 8 against 2 also prints where the step's time goes at each factor (the LSTM layers before
StackTime and the first layer after it, which reads the stacked frames, timed alone) and the speed-up
the factor would give if the rest of the step took a quarter of its time, or none.
Each configuration runs in float32 and under bfloat16 autocast (as train.precision: bf16 does); the
bf16 rows give their speed-up over float32 and the matmul peak they are compared with is bfloat16's.
On a CUDA device every timed call ends with a synchronisation, and the matmul peaks are measured there
(float32 with TF32 off, as PyTorch's default for matmuls; the cuDNN LSTMs follow torch's cuDNN defaults).
Prints markdown tables.
"""

from __future__ import annotations

import dataclasses
import os
import statistics
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

import rnnt  # noqa: F401  (first: keeps oneDNN off an AMX unit the machine cannot run)
import torch

from rnnt.cli import tool_parser
from rnnt.model.transducer import ModelConfig, Transducer
from rnnt.training.experiment import OptimizerConfig, TrainConfig, build_optimizer, load_experiment

def recipe(path: str, **loss) -> tuple[ModelConfig, int]:
    """The model of egs/<path>.yaml with its loss settings overridden, and the fbank frames its data pipeline
    puts in one input frame (data.subsample)."""
    experiment = load_experiment(os.path.join(ROOT, "egs", f"{path}.yaml"))
    model = experiment.model
    return dataclasses.replace(model, loss=dataclasses.replace(model.loss, **loss)), experiment.data.subsample


def recipe_batch(name: str, seconds: float) -> int:
    """How many utterances of `seconds` one batch of egs/librispeech/conf/<name>.yaml holds (its dynamic
    batches count padded 10 ms frames before stacking)."""
    batch = load_experiment(os.path.join(ROOT, "egs", "librispeech", "conf", f"{name}.yaml")).data.batch
    return min(batch.max_frames // int(seconds * 100), batch.max_batch_size) if batch.type == "dynamic" \
        else batch.batch_size


# name -> (model and its input frames' subsampling, batch, seconds per utterance, tokens per utterance,
# vocabulary): LibriSpeech-like utterances of 12 s with 40 BPE-500 tokens. "small (pruned loss), the recipe's
# batch" is small.yaml as its recipe trains it: its own loss (pruned) and batch size (its utterances' number at
# --seconds' length). The Conformer is AN4's
# (egs/an4/conf/transducer_conformer.yaml: 8 blocks of width 144 over 40 ms frames, the pruned loss) at that shape.
CONFIGS = {
    "tiny (full loss)": (recipe("librispeech/conf/tiny", type="full"), 8, 12.0, 40, 500),
    "tiny (fused loss)": (recipe("librispeech/conf/tiny", type="fused"), 8, 12.0, 40, 500),
    "small (full loss)": (recipe("librispeech/conf/small", type="full"), 8, 12.0, 40, 500),
    "small (pruned loss)": (recipe("librispeech/conf/small", type="pruned"), 8, 12.0, 40, 500),
    "mlperf (full loss)": (recipe("librispeech/conf/mlperf", type="full"), 4, 12.0, 40, 1024),
    "small (pruned loss), the recipe's batch": (recipe("librispeech/conf/small"),  # at --seconds' utterances
                                                lambda seconds: recipe_batch("small", seconds), 12.0, 40, 500),
    "an4 Conformer (pruned loss)": (recipe("an4/conf/transducer_conformer"), 8, 12.0, 40, 500),
}


DEVICE = torch.device("cpu")  # set by --device


def synchronize() -> None:
    """Waits for the device's queued work (nothing to wait for on the CPU)."""
    if DEVICE.type == "cuda":
        torch.cuda.synchronize(DEVICE)


def median_time(fn, runs: int) -> float:
    fn()
    synchronize()
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        fn()
        synchronize()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def machine_flops(dtype: torch.dtype = torch.float32, sizes: tuple[int, ...] = ()) -> float:
    """The device's matmul peak in dtype: the fastest of 5 products of n x n matrices, n 2048 and 4096 on
    the CPU (oneDNN is faster on the larger), 8192 on a GPU; or of the sizes given."""
    best = 0.0
    for n in sizes or ((2048, 4096) if DEVICE.type == "cpu" else (8192,)):
        a, b = torch.randn(n, n, dtype=dtype, device=DEVICE), torch.randn(n, n, dtype=dtype, device=DEVICE)
        a @ b
        synchronize()
        for _ in range(5):
            start = time.perf_counter()
            a @ b
            synchronize()
            best = max(best, 2 * n ** 3 / (time.perf_counter() - start))
    return best


def model_flops(config: ModelConfig, B: int, T: int, U: int, V: int) -> float | None:
    """Forward + backward (3x forward) multiply-adds x 2 of the LSTMs, projections and joiner (None: an encoder
    other than the LSTMs, not counted)."""
    e, p, j = config.encoder, config.predictor, config.joiner
    if e.kind != "lstm":
        return None

    def lstm(layers, inp, hid, steps):
        return sum(8 * hid * ((inp if i == 0 else hid) + hid) for i in range(layers)) * steps

    T2 = -(-T // e.stack_time)
    post_input = (e.hidden if e.pre_layers else e.input_dim) * e.stack_time
    enc = lstm(e.pre_layers, e.input_dim, e.hidden, T) + lstm(e.post_layers, post_input, e.hidden, T2)
    pred = lstm(p.layers, p.embed_dim, p.hidden, U + 1) if p.kind == "lstm" else 0
    pred_out = p.hidden if p.kind == "lstm" else p.embed_dim
    pruned = config.loss.type == "pruned"
    cells = T2 * config.loss.s_range if pruned else T2 * (U + 1)
    joint = 2 * cells * j.hidden * V + 2 * T2 * e.hidden * j.hidden + 2 * (U + 1) * pred_out * j.hidden
    simple = 2 * (T2 * e.hidden + (U + 1) * pred_out) * V if pruned else 0  # the additive am / lm projections
    ctc = 2 * T2 * e.hidden * V if config.loss.ctc_weight > 0 else 0
    return 3 * B * (enc + pred + joint + simple + ctc)


def measure(name: str, config: ModelConfig, B: int, seconds: float, U: int, V: int, runs: int,
            flops: float, subsample: int = 3, stack_time_parts: bool = False, bf16: bool = False,
            fp32_step: float = 0.0) -> tuple[str, float, dict[str, float]]:
    """The table row, the step's median time, and its parts' times (forward + backward; with
    stack_time_parts also the LSTM layers before StackTime and the first LSTM layer after it); with
    bf16 everything but the optimiser runs under bfloat16 autocast, and fp32_step (the same step in
    float32) gives the speed-up column. An input frame is `subsample` 10 ms fbank frames."""
    torch.manual_seed(0)
    T = int(seconds * 100 / subsample)  # input frames (the LSTM configs: 3 fbank frames stacked, 30 ms)
    autocast = torch.autocast(DEVICE.type, dtype=torch.bfloat16, enabled=bf16)
    model = Transducer(config, V).to(DEVICE)
    # the optimiser as training builds it (torch's fused AdamW on the CPU and CUDA)
    optimizer, _ = build_optimizer(TrainConfig(optimizer=OptimizerConfig("adamw", 1e-4)), model.parameters())
    feats = torch.randn(B, T, config.encoder.input_dim, device=DEVICE)
    feat_lens = torch.linspace(T, 0.85 * T, B).long().to(DEVICE)  # a sorted batch: lengths within 15% of the longest
    tokens = torch.randint(1, V, (B, U), device=DEVICE)
    token_lens = torch.linspace(U, 0.85 * U, B).long().to(DEVICE)
    host_lengths = (feat_lens.tolist(), token_lens.tolist())  # as training has them from the batch

    def step():
        optimizer.zero_grad(set_to_none=True)
        with autocast:
            loss = model(feats, feat_lens, tokens, token_lens, host_lengths=host_lengths)["loss"].float()
        loss.backward()
        optimizer.step()

    def encoder_only():
        with autocast:
            enc, _ = model.encode(feats, feat_lens)
        enc.backward(torch.ones_like(enc))

    with autocast:
        enc_out, enc_lens = model.encode(feats, feat_lens)
    enc_out = enc_out.detach().requires_grad_(True)
    # the encoder's frames as the host knows them (Transducer.forward's own mapping): no read of the device
    enc_host_lengths = ([model.config.encoder.output_frames(n) for n in host_lengths[0]], host_lengths[1])

    def joint_and_loss():
        with autocast:
            loss = model.loss(enc_out, enc_lens, tokens, token_lens, host_lengths=enc_host_lengths)["loss"].float()
        loss.backward()

    full = median_time(step, runs)
    parts = {"encoder": median_time(encoder_only, runs), "joint+loss": median_time(joint_and_loss, runs),
             "optimizer": median_time(optimizer.step, runs)}
    total = sum(parts.values())
    share = " / ".join(f"{100 * v / total:.0f}%" for v in parts.values())
    step_flops = model_flops(config, B, T, U, V)
    utilisation = "n/a" if step_flops is None else f"{100 * step_flops / full / flops:.0f}%"
    audio = seconds * float(feat_lens.sum()) / T
    speed_up = f"{fp32_step / full:.2f}x" if fp32_step else ""
    row = (f"| {name} | {'bf16' if bf16 else 'fp32'} | {B} x {0.85 * seconds:.1f}-{seconds:.0f} s, U={U}, V={V} | "
           f"{full:.4g} | {speed_up} | {audio / full:.1f} | {share} | {utilisation} |")
    if stack_time_parts:
        parts.update(stack_time_parts_timed(model, feats, feat_lens, enc_out.shape[1], runs))
    return row, full, parts


def stack_time_parts_timed(model: Transducer, feats: torch.Tensor, feat_lens: torch.Tensor, frames: int,
                           runs: int) -> dict[str, float]:
    """An LSTM encoder's layers before StackTime, and its first layer after it over `frames` stacked frames,
    each timed alone (forward + backward)."""
    encoder = model.encoder

    def before_stack_time():
        encoder.pre(feats, feat_lens).sum().backward()

    # requires grad: in the step this layer's input gradient flows back to the layers before StackTime
    stacked = torch.randn(feats.shape[0], frames, encoder.post.lstms[0].input_size, device=DEVICE,
                          requires_grad=True)

    def first_after_stack_time():
        encoder.post.norms[0](encoder.post.lstms[0](stacked)[0]).sum().backward()

    return {"before StackTime": median_time(before_stack_time, runs),
            "first after": median_time(first_after_stack_time, runs)}


def main() -> int:
    parser = tool_parser(__doc__)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--device", default="cpu", help="cpu (default) or a CUDA device such as cuda")
    parser.add_argument("--batch-scale", type=int, default=1,
                        help="multiplies every configuration's batch (a GPU needs more than a CPU to be busy)")
    parser.add_argument("--seconds", type=float, default=0.0,
                        help="every utterance's length instead of the configurations' (12 s; a quick check: 1), its "
                        "tokens as many a second")
    parser.add_argument("--peak-sizes", type=lambda text: tuple(int(n) for n in text.split(",")), default=(),
                        help="the matmul sizes the peak is measured at (default 2048,4096 on a CPU, 8192 on a GPU)")
    parser.add_argument("--configs", nargs="+", choices=list(CONFIGS), default=list(CONFIGS), metavar="NAME",
                        help="the configurations to run (default all: " + "; ".join(CONFIGS) + "); the StackTime "
                        "comparison runs for the small and mlperf full-loss ones among them")
    args = parser.parse_args()
    from machine import machine_line  # benchmarks/, the script's folder
    print(machine_line(args.device) + "\n")  # benchmarks/machine.py: where the table was measured
    global DEVICE
    DEVICE = torch.device(args.device)
    flops, bf16_flops = machine_flops(sizes=args.peak_sizes), machine_flops(torch.bfloat16, args.peak_sizes)
    if DEVICE.type == "cpu":
        isa = os.environ.get("ONEDNN_MAX_CPU_ISA", "oneDNN's choice")
        where = f"CPU, torch {torch.__version__}, {torch.get_num_threads()} threads, ONEDNN_MAX_CPU_ISA {isa}"
    else:
        where = (f"{torch.cuda.get_device_name(DEVICE)}, torch {torch.__version__}, "
                 f"cuDNN {torch.backends.cudnn.version()}")
    print(f"{where}; matmul peak measured here: float32 {flops / 1e9:.0f} GFLOP/s, bfloat16 {bf16_flops / 1e9:.0f} "
          "GFLOP/s. Full loss: joiner logits built, gradient written over them.\n")
    print("| config | precision | batch | step (s) | bf16 speed-up | audio s / s | encoder / joint+loss / optimizer | "
          "model FLOP/s vs matmul |")
    print("|---|---|---|---|---|---|---|---|")
    configs = {name: (config, (B(args.seconds or seconds) if callable(B) else B) * args.batch_scale,
                      args.seconds or seconds,  # as many tokens a second
                      max(1, round(U * args.seconds / seconds)) if args.seconds else U, V)
               for name, (config, B, seconds, U, V) in CONFIGS.items() if name in args.configs}
    scaled = "" if args.batch_scale == 1 else f" x {args.batch_scale}"  # "the recipe's batch" x 4 is not the recipe's
    for name, ((config, subsample), B, seconds, U, V) in configs.items():
        row, fp32_step, _ = measure(name + scaled, config, B, seconds, U, V, args.runs, flops, subsample)
        print(row, flush=True)
        print(measure(name + scaled, config, B, seconds, U, V, args.runs, bf16_flops, subsample, bf16=True,
                      fp32_step=fp32_step)[0], flush=True)
    stack_time_configs = [name for name in ("small (full loss)", "mlperf (full loss)") if name in configs]
    if not stack_time_configs:
        return 0
    results = {}
    for name in stack_time_configs:
        (base, subsample), B, seconds, U, V = configs[name]
        for factor in (2, 8):
            config = dataclasses.replace(base, encoder=dataclasses.replace(base.encoder, stack_time=factor))
            row, step, parts = measure(f"{name}, StackTime {factor}", config, B, seconds, U, V, args.runs, flops,
                                       subsample, stack_time_parts=True)
            print(row, flush=True)
            results[name, factor] = (step, parts)
    print("\nStackTime 8 against 2: where a step's time goes (each part timed alone, forward + backward). The "
          "LSTM layers before StackTime run at the input frame rate whatever the factor: the same work at 2 and "
          "8, timed at both, the faster kept. The first layer after it sees 4x fewer frames at factor 8, but "
          "each is 4x wider: its input weights (4 hidden x factor hidden) grow 4x, and their products with the "
          "frames and with the gradients cost as much per second of audio at any factor. The optimiser step "
          "grows with those weights. The rest (the other layers after StackTime, the predictor, joint + loss) "
          "sees 4x fewer frames; \"with the rest / 4\" is the speed-up if it took exactly a quarter of its time: "
          "step(2) / (before + first after(8) + optimiser(8) + rest(2) / 4), an estimate, not a bound. Even with "
          "the rest free, the factor could give no more than step(2) / (before + first after(8) + optimiser(8)).\n")
    print("| config | step, factor 2 -> 8 (s) | before StackTime | first layer after, 2 -> 8 | optimiser, 2 -> 8 | "
          "rest, 2 -> 8 | speed-up | with the rest / 4 | with the rest free |")
    print("|---|---|---|---|---|---|---|---|---|")
    for name in stack_time_configs:
        (t2, parts2), (t8, parts8) = results[name, 2], results[name, 8]
        before = min(parts2["before StackTime"], parts8["before StackTime"])
        first2, first8 = parts2["first after"], parts8["first after"]
        opt2, opt8 = parts2["optimizer"], parts8["optimizer"]
        rest2, rest8 = (max(0.0, t - before - first - opt)
                        for t, first, opt in ((t2, first2, opt2), (t8, first8, opt8)))
        print(f"| {name} | {t2:.4g} -> {t8:.4g} | {before:.4g} | {first2:.4g} -> {first8:.4g} | "  # a GPU's ms too
              f"{opt2:.4g} -> {opt8:.4g} | {rest2:.4g} -> {rest8:.4g} | {t2 / t8:.2f}x | "
              f"{t2 / (before + first8 + opt8 + rest2 / 4):.2f}x | {t2 / (before + first8 + opt8):.2f}x |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
