"""The optimiser side of training: LAMB, the learning-rate schedules, the EMA, and the trainer's rules
for steps that must not happen (nothing kept in a group, a non-finite gradient)."""

import dataclasses
import math
import platform

import pytest
import torch

from conftest import ROOT
from host_read_counter import HostReads
from rnnt import host_reads
from rnnt.training.ema import EMA
from rnnt.training.lamb import Lamb
from rnnt.training.experiment import OptimizerConfig, TrainConfig, build_optimizer, load_experiment
from rnnt.training.schedules import ScheduleConfig, lr_multiplier
from rnnt.training.stop import StopTraining
from rnnt.training.trainer import Trainer


def test_lamb_step_is_the_adam_direction_scaled_by_the_trust_ratio():
    g = torch.Generator().manual_seed(3)
    w0, grad = torch.randn(7, 5, generator=g), torch.randn(7, 5, generator=g)
    w = torch.nn.Parameter(w0.clone())
    lr, wd, eps, (b1, b2) = 0.01, 0.1, 1e-6, (0.9, 0.999)
    optimizer = Lamb([w], lr=lr, betas=(b1, b2), eps=eps, weight_decay=wd)
    m = v = torch.zeros_like(w0)
    expected = w0.clone()
    for step in (1, 2):
        w.grad = grad * step
        optimizer.step()
        m = b1 * m + (1 - b1) * grad * step
        v = b2 * v + (1 - b2) * (grad * step) ** 2
        update = (m / (1 - b1 ** step)) / ((v / (1 - b2 ** step)).sqrt() + eps) + wd * expected
        expected = expected - lr * expected.norm() / update.norm() * update
        torch.testing.assert_close(w.detach(), expected)
    # the trust ratio makes the step's size lr * ||w||, whatever the gradient's scale
    before = w.detach().clone()
    w.grad = grad * 1e6
    optimizer.step()
    assert math.isclose(float((w.detach() - before).norm()), lr * float(before.norm()), rel_tol=1e-5)


def test_lamb_leaves_zero_weights_to_move_by_the_plain_update():
    w = torch.nn.Parameter(torch.zeros(4))
    optimizer = Lamb([w], lr=0.1)
    w.grad = torch.tensor([1.0, -2.0, 0.5, 0.0])
    optimizer.step()
    torch.testing.assert_close(w.detach(), -0.1 * torch.tensor([1.0, -1.0, 1.0, 0.0]), atol=1e-5, rtol=0)


@pytest.mark.parametrize("kind", ["adam", "adamw"])
def test_adam_runs_fused_and_steps_as_torch_s_own_loop(kind):
    """build_optimizer's Adam is torch's fused kernel (5x faster on the CPU): the same update as its loop."""
    g = torch.Generator().manual_seed(5)
    shapes = [(6, 4), (4,), (3, 2, 2)]
    weights = [torch.randn(shape, generator=g) for shape in shapes]
    grads = [[torch.randn(shape, generator=g) for shape in shapes] for _ in range(3)]
    settings = OptimizerConfig(type=kind, lr=0.01, weight_decay=0.1)
    fused_params = [torch.nn.Parameter(w.clone()) for w in weights]
    optimizer, _ = build_optimizer(TrainConfig(optimizer=settings), fused_params)
    assert optimizer.param_groups[0]["fused"] is True
    loop_params = [torch.nn.Parameter(w.clone()) for w in weights]
    lr = optimizer.param_groups[0]["lr"]  # the schedule's first step
    loop = {"adam": torch.optim.Adam, "adamw": torch.optim.AdamW}[kind](
        loop_params, lr=lr, weight_decay=0.1, foreach=False)
    for step_grads in grads:
        for params, opt in ((fused_params, optimizer), (loop_params, loop)):
            for p, grad in zip(params, step_grads):
                p.grad = grad.clone()
            opt.step()
    for fused, looped, start in zip(fused_params, loop_params, weights):
        assert not torch.equal(fused.detach(), start)
        torch.testing.assert_close(fused.detach(), looped.detach(), rtol=1e-6, atol=1e-7)


def test_lamb_is_not_fused():
    lamb = TrainConfig(optimizer=OptimizerConfig(type="lamb"))
    optimizer, _ = build_optimizer(lamb, [torch.nn.Parameter(torch.ones(3))])
    assert isinstance(optimizer, Lamb) and "fused" not in optimizer.param_groups[0]


def test_lamb_at_lr_0_holds_the_weights_as_the_config_checks_let_it():
    """The config checks take lr 0 (the weights held); LAMB refused it, in the trainer, after those checks."""
    weight = torch.nn.Parameter(torch.ones(3))
    optimizer, _ = build_optimizer(TrainConfig(optimizer=OptimizerConfig(type="lamb", lr=0.0)), [weight])
    weight.grad = torch.ones(3)
    optimizer.step()
    assert torch.equal(weight.detach(), torch.ones(3))


def test_mlperf_schedule_warms_up_holds_then_halves_every_decay_steps():
    f = lr_multiplier(ScheduleConfig("mlperf", warmup_steps=4, hold_steps=3, decay_steps=10, decay_rate=0.5,
                                     min_lr=1e-4), base_lr=1e-2)
    # LambdaLR passes 0 for the first update: it is step 1
    assert [f(s) for s in range(4)] == [0.25, 0.5, 0.75, 1.0]
    assert [f(s) for s in range(4, 7)] == [1.0, 1.0, 1.0]
    assert math.isclose(f(6 + 10), 0.5) and math.isclose(f(6 + 20), 0.25)
    assert f(10**6) == pytest.approx(1e-4 / 1e-2)  # never below min_lr


def test_the_staircase_falls_at_the_first_step_of_each_period_as_the_mlperf_reference_each_epoch():
    """MLPerf RNN-T's lr_policy: gamma ** (epoch - warmup_epochs - hold_epochs), 1-based epochs: the rate of the
    first decayed epoch is base * gamma, held all epoch (the continuous decay reached it only at its end)."""
    config = ScheduleConfig("mlperf", warmup_steps=3, hold_steps=6, decay_steps=3, decay_rate=0.5, min_lr=0.1,
                            staircase=True)
    f = lr_multiplier(config, base_lr=1.0)
    assert [f(s) for s in range(9, 18)] == [0.5] * 3 + [0.25] * 3 + [0.125] * 3  # steps 10-18: epochs 4-6
    assert [f(s) for s in range(3, 9)] == [1.0] * 6 and f(30) == 0.1
    continuous = lr_multiplier(dataclasses.replace(config, staircase=False), base_lr=1.0)
    assert continuous(9) == pytest.approx(0.5 ** (1 / 3))


def test_a_base_rate_under_min_lr_is_never_raised_to_it():
    """Fine-tuning at 5e-6 with the default min_lr of 1e-5: the decay holds the base rate, not double it."""
    f = lr_multiplier(ScheduleConfig("mlperf", warmup_steps=2, hold_steps=2, decay_steps=2), base_lr=5e-6)
    assert [f(s) for s in range(8)] == [0.5, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0]


def test_a_base_rate_of_0_decays_without_dividing_by_it():
    """lr 0 holds the weights (a run that checks its starting point); past the hold it was a ZeroDivisionError."""
    f = lr_multiplier(ScheduleConfig("mlperf", warmup_steps=0, hold_steps=1, decay_steps=1), base_lr=0.0)
    assert [f(s) for s in range(3)] == [1.0, 0.5, 0.25]


def test_noam_schedule_peaks_at_the_base_rate_at_the_end_of_warmup():
    f = lr_multiplier(ScheduleConfig("noam", warmup_steps=100), base_lr=1.0)
    values = [f(s) for s in range(1000)]
    assert max(values) == pytest.approx(1.0) and values.index(max(values)) == 99
    assert f(399) == pytest.approx(0.5)  # step 400: (100 / 400) ** 0.5
    assert f(9) == pytest.approx(0.1)  # linear in the warmup


def test_unknown_schedule_is_refused():
    with pytest.raises(ValueError, match="train.schedule.type"):
        lr_multiplier(ScheduleConfig("cosine"), 1.0)


def test_ema_is_the_exponential_average_and_applied_only_inside_its_context():
    model = torch.nn.Linear(3, 2)
    ema = EMA(model, decay=0.9)
    start = {k: v.clone() for k, v in model.state_dict().items()}
    with torch.no_grad():
        model.weight.add_(1.0)
    ema.update(model)
    torch.testing.assert_close(ema.state_dict()["weight"], start["weight"] + 0.1)
    trained = model.weight.detach().clone()
    with ema.applied(model):
        torch.testing.assert_close(model.weight.detach(), start["weight"] + 0.1)
    torch.testing.assert_close(model.weight.detach(), trained)


@pytest.fixture
def trainer(yesno, tmp_path):
    """The yesno recipe's trainer, built in this process (which flushes subnormal floats while it lives)."""
    experiment = load_experiment(str(ROOT / "egs" / "yesno" / "conf" / "tiny.yaml"),
                                 train_list=str(yesno / "train.list"), lang_dir=str(yesno / "lang"))
    yield Trainer(experiment, str(tmp_path / "exp"))
    torch.set_flush_denormal(False)  # the later tests of this process keep them, as they expect


@pytest.mark.skipif(platform.machine() not in ("x86_64", "AMD64"), reason="flushing subnormals is an x86 switch")
def test_a_training_process_flushes_subnormal_floats(trainer):
    """Subnormals (under 1.2e-38) take the CPU's slow path; a trainer's process reads and makes them as 0."""
    subnormal = torch.tensor([1e-39, -3e-40], dtype=torch.float32)
    assert torch.equal(subnormal * 1.0, torch.zeros(2))
    assert float(torch.tensor([1e-20]) * 1e-20) == 0.0
    assert float(torch.tensor([1e-19]) * 1e-19) == pytest.approx(1e-38)  # normal floats as before


def test_a_group_with_every_batch_skipped_takes_no_step_even_with_loss_scaling(trainer):
    """With float16 loss scaling, stepping on a group that kept nothing made GradScaler raise."""
    trainer.scaler = torch.amp.GradScaler("cpu", enabled=True)
    weights = {k: v.clone() for k, v in trainer.model.state_dict().items()}
    for p in trainer.model.parameters():
        p.grad = torch.ones_like(p)  # left over from a skipped batch's partial backward
    assert trainer.optimizer_step() is None
    assert trainer.step == 0 and trainer.scheduler.last_epoch == 0
    assert all(p.grad is None for p in trainer.model.parameters())
    assert all(torch.equal(v, weights[k]) for k, v in trainer.model.state_dict().items())


def test_a_non_finite_gradient_is_not_applied(trainer):
    weights = {k: v.clone() for k, v in trainer.model.state_dict().items()}
    for p in trainer.model.parameters():
        p.grad = torch.full_like(p, float("nan"))
    trainer.group.add(synced=False)
    assert trainer.optimizer_step() is None
    assert trainer.step == 0 and trainer.bad_batches.counts["non-finite gradient"] == 1
    assert all(torch.equal(v, weights[k]) for k, v in trainer.model.state_dict().items())
    for p in trainer.model.parameters():
        p.grad = torch.ones_like(p)
    trainer.group.add(synced=False)
    assert trainer.optimizer_step() is not None
    assert trainer.step == 1 and trainer.bad_batches.in_row == 0


def test_a_batch_skipped_for_its_loss_leaves_the_batchnorm_statistics_as_they_were(trainer):
    """Its forward pass had folded the batch into the running mean and variance before the loss was found
    non-finite: one inf (an fp16 overflow) left them NaN for good, and every validation, decode and export NaN."""
    from rnnt.training.trainer_steps import running_statistics

    batch = next(iter(trainer.loader))
    statistics = [(buffer, buffer.clone()) for buffer in running_statistics(trainer.model)]
    assert len(statistics) == 3  # the tiny encoder's input BatchNorm: mean, variance, count
    bad = {**batch, "feats": batch["feats"].clone()}
    bad["feats"][0, 0, 0] = float("inf")
    assert trainer.forward_backward(bad, sync=True) is None and trainer.bad_batches.counts["non-finite loss"] == 1
    assert all(torch.equal(buffer, before) for buffer, before in statistics)
    assert trainer.forward_backward(batch, sync=True) is not None  # a usable batch's are kept
    assert not torch.equal(*statistics[0]) and all(torch.isfinite(buffer).all() for buffer, _ in statistics)


def test_an_out_of_memory_batch_is_skipped_and_only_a_broken_gradient_dropped(trainer, monkeypatch):
    batch = next(iter(trainer.loader))
    assert trainer.forward_backward(batch, sync=True) is not None and trainer.group.kept == 1
    model = trainer.ddp

    def out_of_memory(*args, **kwargs):
        raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB")

    monkeypatch.setattr(trainer, "ddp", out_of_memory)  # in the forward pass: the kept gradient stays
    assert trainer.forward_backward(batch, sync=True) is None
    assert trainer.group.kept == 1
    assert trainer.bad_batches.counts["out of memory"] == 1 and trainer.bad_batches.in_row == 1
    assert all(p.grad is not None for p in trainer.model.parameters() if p.requires_grad)

    class FailingBackward:
        def __init__(self, loss):
            self.loss = loss

        def backward(self):
            self.loss.backward()  # part of the gradient is written, then memory runs out
            out_of_memory()

    from rnnt.training.trainer_steps import running_statistics

    monkeypatch.setattr(trainer, "ddp", model)
    monkeypatch.setattr(trainer.scaler, "scale", FailingBackward)  # in the backward pass: the group is dropped
    statistics = [(buffer, buffer.clone()) for buffer in running_statistics(trainer.model)]
    assert trainer.forward_backward(batch, sync=True) is None
    assert all(torch.equal(buffer, before) for buffer, before in statistics)  # its forward pass's went with it
    assert trainer.group.kept == 0
    assert trainer.bad_batches.counts["out of memory"] == 2 and trainer.bad_batches.in_row == 2
    assert all(p.grad is None for p in trainer.model.parameters())


def test_an_fp16_overflow_counts_no_step_and_lowers_the_scale(trainer):
    """A step the loss scaler skips (a gradient that overflowed at its scale) is no step: the schedule, the EMA
    and the step count wait, and the scale falls. While it is above 1 that is the scale's probing down from
    2^16 (a run's first steps overflow by design: about 7 at initial gradients near 80, which counted toward
    train.max_bad_steps' 10); from 1 on, a non-finite gradient counts like any other, so a diverged float16
    run stops instead of skipping to its end."""
    trainer.scaler = torch.amp.GradScaler("cpu", init_scale=8.0, enabled=True)
    trainer.scaler.scale(torch.ones(()))  # as a backward pass under the scaler would: its scale is made
    weights = {k: v.clone() for k, v in trainer.model.state_dict().items()}

    def overflow():
        for p in trainer.model.parameters():
            p.grad = torch.full_like(p, float("inf"))
        trainer.group.add(synced=False)
        return trainer.optimizer_step()
    for number in range(1, 4):  # 8, 4, 2: probing, not counted
        assert overflow() is None and (trainer.step, trainer.scheduler.last_epoch, trainer.bad_batches.in_row) == \
            (0, 0, 0)
        assert trainer.scaler.get_scale() == 8.0 / 2 ** number
    for number in range(1, trainer.experiment.train.max_bad_steps):
        assert overflow() is None and (trainer.step, trainer.scheduler.last_epoch, trainer.bad_batches.in_row) == \
            (0, 0, number)
    assert all(torch.equal(v, weights[k]) for k, v in trainer.model.state_dict().items())
    with pytest.raises(StopTraining, match="batches in a row had a non-finite loss or gradient"):
        overflow()


def test_a_step_reports_the_rate_it_was_taken_at(trainer):
    """The rate logged with a step is the one its update used (the scheduler has moved on to the next)."""
    rates = []
    for _ in range(3):
        for p in trainer.model.parameters():
            p.grad = torch.ones_like(p)
        trainer.group.add(synced=False)
        rates.append(trainer.optimizer.param_groups[0]["lr"])
        assert trainer.optimizer_step() is not None
        assert trainer.step_lr == rates[-1] != trainer.optimizer.param_groups[0]["lr"]


def test_a_training_step_reads_the_device_twice(trainer, monkeypatch):
    """On a GPU each read of a device value stalls the host: a step reads its loss once (to skip a non-finite
    one before its backward pass) and its gradient norm once; it read the loss twice before, and the input's
    batch norm the number of valid frames. The lengths it reads are the batch's before it goes to the device."""
    monkeypatch.setattr(host_reads, "free", lambda device: False)
    batch = next(iter(trainer.loader))
    with HostReads() as counter:
        loss = trainer.forward_backward(batch, sync=True)
        grad_norm = trainer.optimizer_step()
    assert counter.reads == ["tolist", "tolist", "__float__", "__float__"]
    assert math.isfinite(loss) and loss > 0 and grad_norm > 0 and trainer.step == 1


def test_the_gradient_is_clipped_to_train_grad_clip_and_its_norm_before_reported(trainer, monkeypatch):
    clip = trainer.experiment.train.grad_clip
    parameters = [p for p in trainer.model.parameters() if p.requires_grad]
    for p in parameters:
        p.grad = torch.full_like(p, 10.0)
    norm = 10.0 * math.sqrt(sum(p.numel() for p in parameters))
    assert norm > 10 * clip
    stepped = []
    original = trainer.scaler.step
    monkeypatch.setattr(trainer.scaler, "step", lambda optimizer: (
        stepped.append(float(torch.cat([p.grad.flatten() for p in parameters]).double().norm())), original(optimizer)))
    trainer.group.add(synced=False)
    assert trainer.optimizer_step() == pytest.approx(norm, rel=1e-5)
    assert stepped == [pytest.approx(clip, rel=1e-4)]


def test_validation_runs_on_the_ema_weights_and_the_ema_follows_integer_buffers(trainer, monkeypatch):
    """The averaged weights are the ones validated (and saved as epoch-N.pt's 'ema'); integer buffers (a batch
    norm's count) are not averaged but copied; the trained weights come back after validation."""
    import rnnt.training.trainer as trainer_module

    trainer.ema = EMA(trainer.model, 0.5)
    batch = next(iter(trainer.loader))
    trainer.forward_backward(batch, sync=True)
    trainer.optimizer_step()
    model_state = {k: v.clone() for k, v in trainer.model.state_dict().items()}
    counts = [k for k, v in model_state.items() if not v.dtype.is_floating_point]
    assert counts and all(torch.equal(trainer.ema.shadow[k], model_state[k]) for k in counts)
    floats = [k for k, v in model_state.items() if v.dtype.is_floating_point and not torch.equal(
        trainer.ema.shadow[k], v)]
    assert floats  # the average is half way between the start and the stepped weights
    validated = []
    monkeypatch.setattr(trainer_module, "validate", lambda model, *args: (
        validated.append({k: v.clone() for k, v in model.state_dict().items()}),
        {"loss": 1.0, "utterances": 1})[1])
    monkeypatch.setattr(trainer, "valid_pipeline", type("Valid", (), {"batches": lambda self, reader: []})())
    monkeypatch.setattr(trainer, "save", lambda name: None)
    trainer.end_epoch()
    assert all(torch.equal(validated[0][k], trainer.ema.shadow[k]) for k in floats)
    assert all(torch.equal(v, model_state[k]) for k, v in trainer.model.state_dict().items())


def test_validation_gives_the_mean_loss_and_the_wer_of_its_greedy_transcripts(trainer):
    """The validation WER is tune.py's objective and the target-WER stop's measure: recounted here by a plain
    edit distance over the greedy search's words, and the loss as the per-utterance mean of the model's."""
    from rnnt.search import greedy_search
    from rnnt.training.validation import validate

    def distance(ref: list[str], hyp: list[str]) -> int:
        row = list(range(len(hyp) + 1))
        for i, r in enumerate(ref, 1):
            new = [i]
            for j, h in enumerate(hyp, 1):
                new.append(min(row[j] + 1, new[j - 1] + 1, row[j - 1] + (r != h)))
            row = new
        return row[-1]

    for _, batch in zip(range(60), trainer.loader):  # a model that gets some words right: an epoch's steps
        trainer.forward_backward(batch, sync=True)
        trainer.optimizer_step()
    batches = [batch for _, batch in zip(range(3), trainer.loader)]
    result = validate(trainer.model, batches, trainer.tokenizer, torch.device("cpu"))
    trainer.model.eval()
    errors = words = losses = 0.0
    utterances = 0
    with torch.no_grad():
        for batch in batches:
            enc, enc_lens = trainer.model.encode(batch["feats"], batch["feat_lens"])
            losses += float(trainer.model.loss(enc, enc_lens, batch["tokens"], batch["token_lens"])["loss"]) * len(
                batch["keys"])
            utterances += len(batch["keys"])
            for hyp, text in zip(greedy_search(trainer.model, enc, enc_lens), batch["texts"]):
                errors += distance(text.split(), trainer.tokenizer.text(hyp).split())
                words += len(text.split())
    assert result["utterances"] == utterances and result["loss"] == pytest.approx(losses / utterances, rel=1e-6)
    assert 0 < errors < words and result["wer"] == pytest.approx(100 * errors / words)


def test_a_training_that_ends_inside_its_warmup_is_told_so():
    """A short test run of a config made for a larger corpus (21 steps of a 200-step warmup) learnt nothing, and
    only the lr logged said why."""
    from rnnt.training.schedules import ScheduleConfig, warmup_unfinished

    schedule = ScheduleConfig(type="noam", warmup_steps=200)
    assert warmup_unfinished(schedule, 21).startswith("the training ended at step 21, inside "
                                                      "train.schedule.warmup_steps 200: its learning rate never")
    assert warmup_unfinished(schedule, 200) == "" and warmup_unfinished(ScheduleConfig(), 3) == ""
