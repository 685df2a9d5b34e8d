"""Vectorised ensembles: K runs that share an architecture, trained in lockstep in one process.

Parameters of the K models are stacked along a leading dimension and the exact fast forward
runs under ``torch.func.vmap``; each member keeps its own data stream (its own task, seed and
partitions), its own run directory, metrics, checkpoints and resumable state, in the same
formats as a single run.  AdamW is elementwise, so one optimiser over the stacked tensors makes
the same update as K separate ones; the members' results equal single runs up to float32
rounding in the batched matrix products (checked by ``tests/test_sweep.py``).
"""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np
import torch
from torch import nn
from torch.func import functional_call, vmap

from assign_add.config import RunConfig
from assign_add.model.fast import answer_loss, fast_answer_logits
from assign_add.run import RunError
from assign_add.task.generator import Sampler
from assign_add.train.trainer import TrainResult, open_for_training, resolve_device

SHARED_FIELDS = ("model", "train.steps", "train.batch_size", "train.lr", "train.weight_decay", "train.beta1",
                 "train.beta2", "train.eval_every", "train.checkpoint_every", "train.state_every", "train.precision",
                 "task.n_ctx", "task.modulus", "task.variables", "task.layout")


class _FastHead(nn.Module):
    def __init__(self, model: nn.Module) -> None:
        super().__init__()
        self.model = model

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        return fast_answer_logits(self.model, tokens)


def check_compatible(cfgs: list[RunConfig]) -> None:
    def get(cfg: RunConfig, dotted: str):
        obj = cfg
        for part in dotted.split("."):
            obj = getattr(obj, part)
        return obj

    for f in SHARED_FIELDS:
        if any(get(c, f) != get(cfgs[0], f) for c in cfgs[1:]):
            raise RunError(f"ensemble members must share {f}")


def stack_parameters(models: list[nn.Module], t) -> tuple[list[str], list[torch.Tensor], torch.optim.AdamW]:
    """(parameter names, stacked leaf tensors [K, ...], one AdamW over them) for K same-shaped models."""
    names = [n for n, _ in models[0].named_parameters()]
    stacked = [torch.stack([dict(m.named_parameters())[n].detach() for m in models]).requires_grad_() for n in names]
    opt = torch.optim.AdamW(stacked, lr=t.lr, betas=(t.beta1, t.beta2), weight_decay=t.weight_decay, foreach=True)
    return names, stacked, opt


def ensemble_logits(head: _FastHead, names: list[str], stacked: list[torch.Tensor], tokens: torch.Tensor) -> torch.Tensor:
    """[K, batch, N] answer logits of K stacked models on their own batches [K, batch, T]."""

    def one(params: tuple[torch.Tensor, ...], tok: torch.Tensor) -> torch.Tensor:
        return functional_call(head, {f"model.{n}": p for n, p in zip(names, params)}, (tok,))

    return vmap(one)(tuple(stacked), tokens)


def train_ensemble(cfgs: list[RunConfig], outs: list[Path], resume: bool = False, force: bool = False) -> list[TrainResult]:
    """Train K runs at once; each ``outs[k]`` becomes an ordinary run directory."""
    if len(cfgs) != len(outs) or not cfgs:
        raise RunError("train_ensemble needs one output directory per config")
    check_compatible(cfgs)
    t = cfgs[0].train
    device = resolve_device(t.device)
    members = []
    try:
        for c, o in zip(cfgs, outs):
            members.append(open_for_training(c, o, resume, force, device))
        return _train_members(cfgs, members, device)
    finally:
        for writer, *_ in members:
            writer.close()


def _train_members(cfgs: list[RunConfig], members: list, device: torch.device) -> list[TrainResult]:
    t = cfgs[0].train
    starts = {m[3] for m in members}
    if len(starts) != 1:
        raise RunError(f"ensemble members are at different steps {sorted(starts)}; resume them separately")
    start = starts.pop()
    models = [m[1] for m in members]
    names, stacked, opt = stack_parameters(models, t)
    if start > 0:
        for i, n in enumerate(names):
            states = [m[2].state[dict(m[1].named_parameters())[n]] for m in members]
            opt.state[stacked[i]] = {
                "step": states[0]["step"].clone(),
                "exp_avg": torch.stack([s["exp_avg"] for s in states]),
                "exp_avg_sq": torch.stack([s["exp_avg_sq"] for s in states]),
            }
    samplers = [Sampler(c.task, c.train.seed, m[0].run.partitions()) for c, m in zip(cfgs, members)]
    head = _FastHead(models[0])
    t0 = time.perf_counter()
    for step in range(start, t.steps):
        batches = [s.batch(step, t.batch_size) for s in samplers]
        tokens = torch.as_tensor(np.stack([b.tokens for b in batches]), device=device)
        answers = torch.as_tensor(np.stack([b.answers for b in batches]), device=device)
        logits = ensemble_logits(head, names, stacked, tokens)
        losses = torch.stack([answer_loss(logits[k], answers[k]) for k in range(len(cfgs))])
        opt.zero_grad(set_to_none=True)
        losses.sum().backward()
        opt.step()
        done = step + 1
        for k, (writer, model, member_opt, _) in enumerate(members):
            writer.add_loss(float(losses[k].detach()), done)
            if writer.needs(done, t.steps):
                _sync_member(k, names, stacked, opt, model, member_opt)
                writer.after_step(model, member_opt, done, t.steps)
    for writer, *_ in members:
        writer.finish(t.steps)
    seconds = time.perf_counter() - t0
    return [TrainResult(w.run, t.steps, w.last_record, seconds) for w, *_ in members]


@torch.no_grad()
def _sync_member(k: int, names: list[str], stacked: list[torch.Tensor], opt: torch.optim.Optimizer,
                 model: nn.Module, member_opt: torch.optim.Optimizer) -> None:
    """Copy member ``k``'s slice of the stacked parameters, gradients and AdamW state into its own model."""
    params = dict(model.named_parameters())
    for i, n in enumerate(names):
        p = params[n]
        p.copy_(stacked[i][k])
        p.grad = None if stacked[i].grad is None else stacked[i].grad[k].clone()
        st = opt.state.get(stacked[i], {})
        if st:
            member_opt.state[p] = {"step": st["step"].clone(), "exp_avg": st["exp_avg"][k].clone(),
                                   "exp_avg_sq": st["exp_avg_sq"][k].clone()}

