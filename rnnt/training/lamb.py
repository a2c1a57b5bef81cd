"""LAMB (You et al. 2019): Adam's update rescaled per parameter tensor by the trust ratio ||w|| / ||update||."""

from __future__ import annotations

import torch


class Lamb(torch.optim.Optimizer):
    def __init__(self, params, lr: float = 1e-3, betas=(0.9, 0.999), eps: float = 1e-6, weight_decay: float = 0.0):
        if lr < 0 or eps <= 0 or not 0 <= betas[0] < 1 or not 0 <= betas[1] < 1:  # lr 0: the weights held
            raise ValueError(f"invalid LAMB settings lr={lr} betas={betas} eps={eps}")
        super().__init__(params, dict(lr=lr, betas=tuple(betas), eps=eps, weight_decay=weight_decay))

    @torch.no_grad()
    def step(self, closure=None):
        loss = None
        if closure is not None:
            with torch.enable_grad():
                loss = closure()
        for group in self.param_groups:
            beta1, beta2 = group["betas"]
            for p in group["params"]:
                if p.grad is None:
                    continue
                state = self.state[p]
                if not state:
                    state["step"] = torch.zeros((), dtype=torch.float64)
                    state["exp_avg"] = torch.zeros_like(p)
                    state["exp_avg_sq"] = torch.zeros_like(p)
                state["step"] += 1
                step = float(state["step"])
                exp_avg, exp_avg_sq = state["exp_avg"], state["exp_avg_sq"]
                exp_avg.mul_(beta1).add_(p.grad, alpha=1 - beta1)
                exp_avg_sq.mul_(beta2).addcmul_(p.grad, p.grad, value=1 - beta2)
                update = (exp_avg / (1 - beta1 ** step)) / (
                    (exp_avg_sq / (1 - beta2 ** step)).sqrt_().add_(group["eps"]))
                if group["weight_decay"]:
                    update.add_(p, alpha=group["weight_decay"])
                weight_norm, update_norm = p.norm(), update.norm()
                trust = torch.where((weight_norm > 0) & (update_norm > 0), weight_norm / update_norm,
                                    torch.ones_like(weight_norm))
                p.sub_(update * (group["lr"] * trust))
        return loss
