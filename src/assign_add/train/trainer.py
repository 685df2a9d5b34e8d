"""The training loop (SPEC section 4).

Fresh batches every step (the batch for step ``s`` is a pure function of the data seed and ``s``;
``train.init_seed`` / ``train.data_seed`` set the weights' and the data order's seeds apart, both
``train.seed`` by default),
AdamW, loss on the answer position only, through the exact fast forward of
:mod:`assign_add.model.fast`.  Every ``eval_every`` steps one JSON record goes to
``metrics.jsonl``; checkpoints follow :func:`checkpoint_schedule`; the optimiser state is saved
every ``state_every`` steps so a killed run resumes to bit-identical weights
(:mod:`assign_add.train.resume` opens a new or saved run and reads and writes that state).
"""

from __future__ import annotations

import contextlib
import math
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import torch

from assign_add.config import RunConfig, TrainConfig, settle_precision
from assign_add.io import append_jsonl, append_line
from assign_add.lock import RunLock
from assign_add.model.fast import (
    answer_loss,
    compiled_answer_logits,
    fast_answer_logits,
)
from assign_add.model.hooked import AssignAddTransformer
from assign_add.provenance import machine_record
from assign_add.run import RunDir, RunError, save_checkpoint
from assign_add.task.evalsets import live
from assign_add.task.generator import Sampler
from assign_add.train.evaluate import Evaluator, evaluate
from assign_add.train.loggers import PhaseMarks, open_sinks
from assign_add.train.resume import load_state, prepare_run_dir, save_state, truncate_metrics

def checkpoint_schedule(total_steps: int, every: int = 0, early_every: int = 0, early_until: int = 0) -> list[int]:
    """Steps at which a checkpoint is written (always 0 and the last step).

    ``every > 0``: every ``every`` steps.  Default (0): dense early and around the phases:
    powers of two up to 512, every 100 steps up to 10,000 (the resolution of the authors' checkpoints
    around their spike, so that rates over the addition and binding windows compare over equal
    intervals on every source), every 250 up to 20,000, then every 1,000 (171 checkpoints, about
    190 MB, for the paper's 40,000 steps).  ``early_every > 0`` adds one every ``early_every`` steps up to
    ``early_until``.
    """
    if every > 0:
        steps = set(range(0, total_steps + 1, every))
    else:
        steps = {0} | {2**i for i in range(10)}
        steps |= set(range(100, min(total_steps, 10_000) + 1, 100))
        steps |= set(range(10_250, min(total_steps, 20_000) + 1, 250))
        steps |= set(range(21_000, total_steps + 1, 1000))
    if early_every > 0:
        steps |= set(range(0, early_until + 1, early_every))
    return sorted(s for s in steps | {total_steps} if s <= total_steps)


def resolve_device(name: str) -> torch.device:
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if name.startswith("cuda") and not torch.cuda.is_available():
        raise RunError(f"train.device={name} but CUDA is not available on this machine")
    return torch.device(name)


QK_WEIGHTS = ("attn.W_Q", "attn.W_K")  # the parameters ``train.qk_lr_scale`` applies to


def param_groups(model: torch.nn.Module, t: TrainConfig) -> list[dict]:
    """One group of every parameter, or (``qk_lr_scale`` != 1) the others then the attention QK weights."""
    if t.qk_lr_scale == 1.0:
        return [{"params": list(model.parameters())}]
    named = list(model.named_parameters())
    qk = [p for n, p in named if n.endswith(QK_WEIGHTS)]
    return [{"params": [p for n, p in named if not n.endswith(QK_WEIGHTS)]},
            {"params": qk, "lr": t.lr * t.qk_lr_scale}]


def lr_factor(t: TrainConfig, step: int) -> float:
    """The multiple of each group's learning rate used by update ``step`` (0-based): 1, except in a warm
    restart's ``lr_restart_steps`` updates from ``lr_restart_at``, where it falls from ``lr_restart_peak`` to 1
    along a half cosine."""
    k = step - t.lr_restart_at
    if t.lr_restart_at <= 0 or not 0 <= k < t.lr_restart_steps:
        return 1.0
    return 1.0 + (t.lr_restart_peak - 1.0) * 0.5 * (1.0 + math.cos(math.pi * k / t.lr_restart_steps))


def set_learning_rate(opt: torch.optim.Optimizer, t: TrainConfig, step: int) -> None:
    """Each group's learning rate for update ``step`` (a function of the step alone, so resuming keeps it)."""
    if t.lr_restart_at <= 0:
        return
    scales = [1.0] if len(opt.param_groups) == 1 else [1.0, t.qk_lr_scale]
    for group, scale in zip(opt.param_groups, scales):
        group["lr"] = t.lr * scale * lr_factor(t, step)


def make_optimizer(model: torch.nn.Module, cfg: RunConfig) -> torch.optim.AdamW:
    """AdamW with its fused kernel (one pass over all parameters; on this CPU 1.1 ms per step against
    3.1 ms for the multi-tensor ``foreach`` one, single thread, the same update up to float rounding)."""
    t = cfg.train
    return torch.optim.AdamW(
        param_groups(model, t), lr=t.lr, betas=(t.beta1, t.beta2), weight_decay=t.weight_decay, fused=True
    )


@dataclass
class TrainResult:
    run: RunDir
    final_step: int
    final_metrics: dict
    seconds: float


ProgressFn = Callable[[int, int, dict | None], None]


def _norms(model: torch.nn.Module) -> tuple[dict, dict]:
    weights = {n: float(p.detach().norm()) for n, p in model.named_parameters()}
    grads = {n: float(p.grad.norm()) if p.grad is not None else 0.0 for n, p in model.named_parameters()}
    return weights, grads


def live_sets(all_sets: dict, names: list[str], root: Path) -> dict:
    """The sets evaluated during training: ``names``, or every set but the 2-var union."""
    if not names:
        return live(all_sets)
    unknown = [n for n in names if n not in all_sets]
    if unknown:
        raise RunError(f"{root}: train.eval_sets names unknown set(s) {', '.join(unknown)} "
                       f"(known: {', '.join(all_sets)})")
    return {n: all_sets[n] for n in names}


class RunWriter:
    """One run's bookkeeping: evaluation records, checkpoints, optimiser state, status, log."""

    def __init__(self, run: RunDir, cfg: RunConfig, elapsed_before: float = 0.0, lock: RunLock | None = None,
                 start: int = 0, phase_marks: PhaseMarks | None = None) -> None:
        self.run = run
        self.phase_marks = phase_marks
        self.lock = lock  # held from opening the run until close()
        self.cfg = cfg
        all_sets = run.eval_sets()
        self.final_sets = all_sets
        self.live_sets = live_sets(all_sets, cfg.train.eval_sets, run.root)
        # the evaluations during training through the compiled engine too (one shape: chunks of 4096)
        self.evaluate_live = Evaluator(self.live_sets, compiled_answer_logits() if cfg.train.compile
                                       else fast_answer_logits)
        self.schedule = set(checkpoint_schedule(cfg.train.steps, cfg.train.checkpoint_every,
                                                     cfg.train.early_checkpoint_every, cfg.train.early_checkpoint_until))
        self.loss_sum, self.loss_count = 0.0, 0
        self.t0 = time.perf_counter() - elapsed_before
        self.last_record: dict = {}
        self.sinks = open_sinks(run.root, cfg, start)  # TensorBoard / W&B beside metrics.jsonl

    def add_loss(self, value: float, step: int) -> None:
        if not math.isfinite(value):
            raise RunError(f"{self.run.root}: training diverged at step {step} (loss {value}); lower train.lr")
        self.loss_sum += value
        self.loss_count += 1

    def record(self, model: torch.nn.Module, step: int) -> dict:
        """Evaluate every curated set (the 2-var union only at the last step) and append a record."""
        model.eval()
        res = self.evaluate_live(model)
        if step == self.cfg.train.steps:  # and the sets kept for the end (the exhaustive 2-var union)
            rest = evaluate(model, {k: v for k, v in self.final_sets.items() if k not in self.live_sets})
            res = {part: {**res[part], **rest[part]} for part in ("acc", "loss")}
        model.train()
        weights, grads = _norms(model)
        rec = {
            "step": step,
            "time": round(time.perf_counter() - self.t0, 3),
            "train_loss": (self.loss_sum / self.loss_count) if self.loss_count else None,
            **res,
            "weight_norm": weights,
            "grad_norm": grads,
        }
        append_jsonl(self.run.metrics_path, rec)
        for sink in self.sinks:
            sink.log(rec)
        accs = " ".join(f"{k}={v:.3f}" for k, v in res["acc"].items())
        append_line(self.run.log_path, f"step {step} loss {rec['train_loss']} {accs}")
        self.loss_sum, self.loss_count = 0.0, 0
        self.last_record = rec
        return rec

    def needs(self, done: int, end: int) -> bool:
        """Whether :meth:`after_step` has anything to do after update number ``done``."""
        t = self.cfg.train
        return (done % t.eval_every == 0 or done in self.schedule or done % t.state_every == 0
                or done == t.steps or done == end)

    def after_step(self, model: torch.nn.Module, opt: torch.optim.Optimizer, done: int, end: int) -> dict | None:
        """Evaluate, checkpoint and save state as the schedules say, after update number ``done``."""
        t = self.cfg.train
        rec = self.record(model, done) if done % t.eval_every == 0 or done == t.steps else None
        if done in self.schedule:
            save_checkpoint(model, self.run.checkpoint_path(done), done)
        if done % t.state_every == 0 or done == t.steps or done == end:
            extra = {"loss_sum": self.loss_sum, "loss_count": self.loss_count, "elapsed": time.perf_counter() - self.t0}
            save_state(self.run.state_path, model, opt, done, extra)
            self.run.set_status(state="running", step=done)
        return rec

    def finish(self, end: int) -> None:
        if end == self.cfg.train.steps:
            self.run.set_status(state="complete", step=end)
        if self.sinks and self.phase_marks is not None:  # the phase marks, from the records so far
            marks = self.phase_marks(self.run.metrics())
            for sink in self.sinks:
                sink.marks(marks, end)

    def close(self) -> None:
        """Close the log sinks and release the run's lock (another process may then write to it)."""
        for sink in self.sinks:
            sink.close()
        self.sinks = []
        if self.lock is not None:
            self.lock.release()


def check_eval_sets(cfg: RunConfig) -> None:
    """``train.eval_sets`` must name sets this task has (checked before anything is written)."""
    from assign_add.config import ConfigError
    from assign_add.task.evalsets import set_names
    from assign_add.task.partitions import build_partitions

    if not cfg.train.eval_sets:
        return
    known = set_names(cfg.task, build_partitions(cfg.task))
    unknown = [n for n in cfg.train.eval_sets if n not in known]
    if unknown:
        raise ConfigError("train.eval_sets", f"unknown set(s) {', '.join(unknown)}; this task has {', '.join(known)}")


def open_for_training(cfg: RunConfig, out: Path, resume: bool, force: bool, device: torch.device,
                      phase_marks: PhaseMarks | None = None):
    """(writer, model, optimiser, start step) for a new or resumed run."""
    check_eval_sets(cfg)
    run, lock, resuming = prepare_run_dir(out, cfg, resume, force)
    writer = None
    try:
        model = AssignAddTransformer.from_config(cfg.model, cfg.task, seed=cfg.train.weights_seed).to(device)
        opt = make_optimizer(model, cfg)
        start, extra = 0, {}
        if resuming:
            start, extra = load_state(run.state_path, model, opt)
        truncate_metrics(run, start if resuming else -1)  # a run killed before its first state starts over
        writer = RunWriter(run, cfg, extra.get("elapsed", 0.0), lock, start, phase_marks)
        writer.loss_sum, writer.loss_count = extra.get("loss_sum", 0.0), extra.get("loss_count", 0)
        if start == 0:
            save_checkpoint(model, run.checkpoint_path(0), 0)
            writer.record(model, 0)
    except BaseException:
        if writer is not None:
            writer.close()
        else:
            lock.release()
        raise
    return writer, model, opt, start


def autocast_for(cfg: RunConfig, device: torch.device):
    return precision_context(cfg.train.precision, device)


def precision_context(precision: str, device: torch.device):
    """bf16 autocast on ``device`` for ``precision == "bf16"``, else nothing (settle ``auto`` first)."""
    if precision == "auto":
        raise ValueError("precision 'auto' must be settled for this machine first (config.settle_precision)")
    if precision == "bf16":
        return torch.autocast(device_type=device.type, dtype=torch.bfloat16)
    return contextlib.nullcontext()


def train(
    cfg: RunConfig,
    out: Path,
    resume: bool = False,
    force: bool = False,
    progress: ProgressFn | None = None,
    stop_after: int | None = None,
    phase_marks: PhaseMarks | None = None,
) -> TrainResult:
    """Train ``cfg`` into run directory ``out``.  ``stop_after`` ends early (for tests/benchmarks).
    ``phase_marks`` (records → {phase: step}) gives the phase marks sent to TensorBoard / W&B at the end
    (``assign_add.analysis.dynamics.phase_marks``; training itself detects no phases)."""
    cfg = settle_precision(cfg)  # recorded as fp32 or bf16, never "auto"
    t = cfg.train
    device = resolve_device(t.device)
    if t.threads > 0:
        torch.set_num_threads(t.threads)
    writer, model, opt, start = open_for_training(cfg, out, resume, force, device, phase_marks)
    try:
        append_jsonl(writer.run.provenance_path, machine_record(start, str(device)))
        return _train_loop(cfg, writer, model, opt, start, device, progress, stop_after)
    finally:
        writer.close()


def train_step(model: torch.nn.Module, opt: torch.optim.Optimizer, sampler: Sampler, step: int, batch_size: int,
               forward: Callable, autocast, device: torch.device) -> float:
    """One AdamW update on the batch of ``step``; returns its loss."""
    batch = sampler.batch(step, batch_size)
    tokens = torch.as_tensor(batch.tokens, device=device)
    answers = torch.as_tensor(batch.answers, device=device)
    with autocast:
        logits = forward(model, tokens)
    loss = answer_loss(logits, answers)
    opt.zero_grad(set_to_none=True)
    loss.backward()
    opt.step()
    return float(loss.detach())


def replay(cfg: RunConfig, partitions, until: int, device: torch.device,
           at: Callable[[int, torch.nn.Module, torch.optim.Optimizer], None] | None = None,
           ) -> tuple[AssignAddTransformer, torch.optim.Optimizer]:
    """The model and optimiser of run ``cfg`` after ``until`` updates, recomputed from its seeds with
    the same step as :func:`train` (evaluations and checkpoints do not touch the numbers), so on the
    device that trained it the weights are the run's own, bit for bit.  ``at(step, model, opt)`` is
    called after every update and before the first."""
    cfg = settle_precision(cfg)
    t = cfg.train
    model = AssignAddTransformer.from_config(cfg.model, cfg.task, seed=t.weights_seed).to(device)
    opt = make_optimizer(model, cfg)
    sampler = Sampler(cfg.task, t.order_seed, partitions)
    forward = compiled_answer_logits() if t.compile else fast_answer_logits
    autocast = autocast_for(cfg, device)
    model.train()
    if at:
        at(0, model, opt)
    for step in range(until):
        set_learning_rate(opt, t, step)
        loss = train_step(model, opt, sampler, step, t.batch_size, forward, autocast, device)
        if not math.isfinite(loss):
            raise RunError(f"replaying the run diverged at step {step + 1} (loss {loss})")
        if at:
            at(step + 1, model, opt)
    return model, opt


def _train_loop(cfg: RunConfig, writer: RunWriter, model: AssignAddTransformer, opt: torch.optim.Optimizer,
                start: int, device: torch.device, progress: ProgressFn | None, stop_after: int | None) -> TrainResult:
    t = cfg.train
    sampler = Sampler(cfg.task, t.order_seed, writer.run.partitions())
    autocast = autocast_for(cfg, device)
    forward = compiled_answer_logits() if t.compile else fast_answer_logits
    if progress and start == 0:
        progress(0, t.steps, writer.last_record)
    end = t.steps if stop_after is None else min(t.steps, stop_after)
    model.train()
    for step in range(start, end):
        set_learning_rate(opt, t, step)
        writer.add_loss(train_step(model, opt, sampler, step, t.batch_size, forward, autocast, device), step + 1)
        rec = writer.after_step(model, opt, step + 1, end)
        if progress:
            progress(step + 1, t.steps, rec)
    writer.finish(end)
    return TrainResult(writer.run, end, writer.last_record, time.perf_counter() - writer.t0)
