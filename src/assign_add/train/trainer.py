"""The training loop (SPEC section 4).

Fresh batches every step (the batch for step ``s`` is a pure function of ``(train.seed, s)``),
AdamW, loss on the answer position only, through the exact fast forward of
:mod:`assign_add.model.fast`.  Every ``eval_every`` steps one JSON record goes to
``metrics.jsonl``; checkpoints follow :func:`checkpoint_schedule`; the optimiser state is saved
every ``state_every`` steps so a killed run resumes to bit-identical weights.
"""

from __future__ import annotations

import contextlib
import json
import math
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import torch
from safetensors.torch import load_file, save_file

from assign_add.config import RunConfig
from assign_add.io import append_jsonl, append_line, atomic_write, clean_orphans
from assign_add.lock import RunLock
from assign_add.model.fast import (
    answer_loss,
    compiled_answer_logits,
    fast_answer_logits,
)
from assign_add.model.hooked import AssignAddTransformer
from assign_add.run import (
    RunDir,
    RunError,
    check_out_path,
    check_replaceable,
    config_differences,
    create_run_dir,
    read_checkpoint,
    save_checkpoint,
)
from assign_add.task.generator import Sampler
from assign_add.train.evaluate import evaluate

# Fields that may change when resuming a run (they do not change its numbers).
RESUMABLE_CHANGES = {"train.steps", "train.device", "train.threads"}


def checkpoint_schedule(total_steps: int, every: int = 0) -> list[int]:
    """Steps at which a checkpoint is written (always 0 and the last step).

    ``every > 0``: every ``every`` steps.  Default (0): dense early and around the phases:
    powers of two up to 512, every 250 steps up to 20,000, then every 1,000 (112 checkpoints,
    about 125 MB, for the paper's 40,000 steps).
    """
    if every > 0:
        steps = set(range(0, total_steps + 1, every))
    else:
        steps = {0} | {2**i for i in range(10)}
        steps |= set(range(250, min(total_steps, 20_000) + 1, 250))
        steps |= set(range(21_000, total_steps + 1, 1000))
    return sorted(s for s in steps | {total_steps} if s <= total_steps)


def resolve_device(name: str) -> torch.device:
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if name.startswith("cuda") and not torch.cuda.is_available():
        raise RunError(f"train.device={name} but CUDA is not available on this machine")
    return torch.device(name)


def make_optimizer(model: torch.nn.Module, cfg: RunConfig) -> torch.optim.AdamW:
    t = cfg.train
    return torch.optim.AdamW(
        model.parameters(), lr=t.lr, betas=(t.beta1, t.beta2), weight_decay=t.weight_decay, foreach=True
    )


# --------------------------------------------------------------------------- optimiser state


def save_state(path: Path, model: torch.nn.Module, opt: torch.optim.Optimizer, step: int, extra: dict) -> None:
    names = [n for n, _ in model.named_parameters()]
    tensors = {f"param/{n}": p.detach().cpu().contiguous() for n, p in model.named_parameters()}
    for i, n in enumerate(names):
        st = opt.state.get(opt.param_groups[0]["params"][i], {})
        for key, value in st.items():
            tensors[f"{key}/{n}"] = torch.as_tensor(value).detach().cpu().contiguous().reshape(-1) if key == "step" else value.detach().cpu().contiguous()
    meta = {"step": str(step), "extra": json.dumps(extra)}
    atomic_write(path, lambda tmp: save_file(tensors, str(tmp), metadata=meta))


def load_state(path: Path, model: torch.nn.Module, opt: torch.optim.Optimizer) -> tuple[int, dict]:
    from safetensors import safe_open

    try:
        with safe_open(str(path), framework="pt") as fh:
            meta = fh.metadata()
        tensors = load_file(str(path))
    except Exception as exc:  # noqa: BLE001 - a damaged state file is a user-facing error
        raise RunError(f"{path}: unreadable optimiser state ({type(exc).__name__}); "
                       "pass --force to delete the run and start over") from None
    device = next(model.parameters()).device
    with torch.no_grad():
        for n, p in model.named_parameters():
            p.copy_(tensors[f"param/{n}"])
    state = {}
    for i, (n, p) in enumerate(model.named_parameters()):
        if f"exp_avg/{n}" not in tensors:
            continue
        state[i] = {
            "step": tensors[f"step/{n}"].reshape(()).clone(),
            "exp_avg": tensors[f"exp_avg/{n}"].to(device),
            "exp_avg_sq": tensors[f"exp_avg_sq/{n}"].to(device),
        }
    sd = opt.state_dict()
    sd["state"] = state
    opt.load_state_dict(sd)
    return int(meta["step"]), json.loads(meta.get("extra", "{}"))


# --------------------------------------------------------------------------- run directory


def prepare_run_dir(out: Path, cfg: RunConfig, resume: bool, force: bool) -> tuple[RunDir, RunLock, bool]:
    """Create or reopen ``out`` and lock it; returns (run, held lock, resuming from a saved state)."""
    out = Path(out)
    run = RunDir(out)
    new_status = {"state": "running", "step": 0, "source": "train"}
    if resume and not force:
        if not run.exists():
            raise RunError(f"{out}: no run to resume (no config.toml); leave out --resume to start one")
        lock = RunLock(out)
        try:
            resuming = check_resumable(run, cfg)
            clean_orphans(out)
        except BaseException:
            lock.release()
            raise
        return run, lock, resuming
    if force:
        check_replaceable(out)
        run, lock = create_run_dir(out, cfg, new_status, replace=True)
        return run, lock, False
    if run.exists():
        status = run.status()
        diff = config_differences(run.config(), cfg)
        if diff:
            raise RunError(f"{out} holds a different run ({', '.join(diff[:4])} differ); choose another --out, "
                           "or pass --force to delete it and start over")
        raise RunError(f"{out} already holds this run ({status.get('state', '?')} at step {status.get('step', 0)}); "
                       "pass --resume to continue it or --force to delete it and start over")
    check_out_path(out)
    if out.is_dir() and any(p for p in out.iterdir() if not p.name.endswith(".tmp")):
        raise RunError(f"{out} exists and is not a run directory; choose another --out")
    run, lock = create_run_dir(out, cfg, new_status)
    return run, lock, False


def check_resumable(run: RunDir, cfg: RunConfig) -> bool:
    """Refuse to resume a run that is not whole; returns whether a saved state exists to resume from.

    Checked: the config differs only in :data:`RESUMABLE_CHANGES`; ``train.steps`` is not below the
    step reached; the optimiser state is present (unless the run never saved one) and readable; the
    latest checkpoint up to that step is readable; ``metrics.jsonl`` is intact and has the record of
    the last evaluation at or before that step.
    """
    from assign_add import config as config_mod

    out = run.root
    diff = config_differences(run.config(), cfg)
    fixed = [d for d in diff if d not in RESUMABLE_CHANGES]
    if fixed:
        raise RunError(f"{out} holds a run with a different {', '.join(fixed)}; cannot resume it with this config")
    reached = int(run.status().get("step", 0))
    if not run.state_path.is_file():
        if reached > 0:
            raise RunError(f"{run.state_path} is missing: cannot resume from step {reached} "
                           "(pass --force to delete the run and start over)")
        state_step = 0
    else:
        state_step = read_state_step(run.state_path)
    if cfg.train.steps < max(reached, state_step):
        raise RunError(f"train.steps={cfg.train.steps} is below step {max(reached, state_step)}, "
                       "which the run has already reached")
    done = [s for s in run.checkpoint_steps() if s <= state_step]
    if done:
        read_checkpoint(run.checkpoint_path(done[-1]))
    records = run.metrics()  # raises on a corrupt line before the last
    if state_step > 0:
        last_eval = state_step - state_step % cfg.train.eval_every
        if not any(r.get("step") == last_eval for r in records):
            raise RunError(f"{run.metrics_path} has no record for step {last_eval} although the saved state is at "
                           f"step {state_step}; the run is inconsistent (pass --force to start over)")
    if diff:
        config_mod.save(cfg, run.config_path)
    return run.state_path.is_file()


def read_state_step(path: Path) -> int:
    """The step stored in ``state.safetensors`` (a one-line error if it is unreadable)."""
    from safetensors import safe_open

    try:
        with safe_open(str(path), framework="pt") as fh:
            meta = fh.metadata() or {}
        return int(meta["step"])
    except Exception as exc:  # noqa: BLE001 - a damaged state file is a user-facing error
        raise RunError(f"{path}: unreadable optimiser state ({type(exc).__name__}); "
                       "pass --force to delete the run and start over") from None


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
        return {k: v for k, v in all_sets.items() if k != "2var_union"}
    unknown = [n for n in names if n not in all_sets]
    if unknown:
        raise RunError(f"{root}: train.eval_sets names unknown set(s) {', '.join(unknown)} "
                       f"(known: {', '.join(all_sets)})")
    return {n: all_sets[n] for n in names}


class RunWriter:
    """One run's bookkeeping: evaluation records, checkpoints, optimiser state, status, log."""

    def __init__(self, run: RunDir, cfg: RunConfig, elapsed_before: float = 0.0, lock: RunLock | None = None) -> None:
        self.run = run
        self.lock = lock  # held from opening the run until close()
        self.cfg = cfg
        all_sets = run.eval_sets()
        self.final_sets = all_sets
        self.live_sets = live_sets(all_sets, cfg.train.eval_sets, run.root)
        self.schedule = set(checkpoint_schedule(cfg.train.steps, cfg.train.checkpoint_every))
        self.loss_sum, self.loss_count = 0.0, 0
        self.t0 = time.perf_counter() - elapsed_before
        self.last_record: dict = {}

    def add_loss(self, value: float, step: int) -> None:
        if not math.isfinite(value):
            raise RunError(f"{self.run.root}: training diverged at step {step} (loss {value}); lower train.lr")
        self.loss_sum += value
        self.loss_count += 1

    def record(self, model: torch.nn.Module, step: int) -> dict:
        """Evaluate every curated set (the 2-var union only at the last step) and append a record."""
        sets = self.final_sets if step == self.cfg.train.steps else self.live_sets
        model.eval()
        res = evaluate(model, sets)
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

    def close(self) -> None:
        """Release the run's lock (another process may then write to it)."""
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


def open_for_training(cfg: RunConfig, out: Path, resume: bool, force: bool, device: torch.device):
    """(writer, model, optimiser, start step) for a new or resumed run."""
    check_eval_sets(cfg)
    run, lock, resuming = prepare_run_dir(out, cfg, resume, force)
    try:
        model = AssignAddTransformer.from_config(cfg.model, cfg.task, seed=cfg.train.seed).to(device)
        opt = make_optimizer(model, cfg)
        start, extra = 0, {}
        if resuming:
            start, extra = load_state(run.state_path, model, opt)
        _truncate_metrics(run, start if resuming else -1)  # a run killed before its first state starts over
        writer = RunWriter(run, cfg, extra.get("elapsed", 0.0), lock)
        writer.loss_sum, writer.loss_count = extra.get("loss_sum", 0.0), extra.get("loss_count", 0)
        if start == 0:
            save_checkpoint(model, run.checkpoint_path(0), 0)
            writer.record(model, 0)
    except BaseException:
        lock.release()
        raise
    return writer, model, opt, start


def autocast_for(cfg: RunConfig, device: torch.device):
    if cfg.train.precision == "bf16":
        return torch.autocast(device_type=device.type, dtype=torch.bfloat16)
    return contextlib.nullcontext()


def train(
    cfg: RunConfig,
    out: Path,
    resume: bool = False,
    force: bool = False,
    progress: ProgressFn | None = None,
    stop_after: int | None = None,
) -> TrainResult:
    """Train ``cfg`` into run directory ``out``.  ``stop_after`` ends early (for tests/benchmarks)."""
    t = cfg.train
    device = resolve_device(t.device)
    if t.threads > 0:
        torch.set_num_threads(t.threads)
    writer, model, opt, start = open_for_training(cfg, out, resume, force, device)
    try:
        return _train_loop(cfg, writer, model, opt, start, device, progress, stop_after)
    finally:
        writer.close()


def _train_loop(cfg: RunConfig, writer: RunWriter, model: AssignAddTransformer, opt: torch.optim.Optimizer,
                start: int, device: torch.device, progress: ProgressFn | None, stop_after: int | None) -> TrainResult:
    t = cfg.train
    sampler = Sampler(cfg.task, t.seed, writer.run.partitions())
    autocast = autocast_for(cfg, device)
    forward = compiled_answer_logits() if t.compile else fast_answer_logits
    if progress and start == 0:
        progress(0, t.steps, writer.last_record)
    end = t.steps if stop_after is None else min(t.steps, stop_after)
    model.train()
    for step in range(start, end):
        batch = sampler.batch(step, t.batch_size)
        tokens = torch.as_tensor(batch.tokens, device=device)
        answers = torch.as_tensor(batch.answers, device=device)
        with autocast:
            logits = forward(model, tokens)
        loss = answer_loss(logits, answers)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        writer.add_loss(float(loss.detach()), step + 1)
        rec = writer.after_step(model, opt, step + 1, end)
        if progress:
            progress(step + 1, t.steps, rec)
    writer.finish(end)
    return TrainResult(writer.run, end, writer.last_record, time.perf_counter() - writer.t0)


def _truncate_metrics(run: RunDir, step: int) -> None:
    """Drop records after ``step`` (and a partial last line) before resuming from ``step``."""
    from assign_add.io import atomic_write_text, read_jsonl

    kept = [r for r in read_jsonl(run.metrics_path) if r["step"] <= step]  # raises on a corrupt line
    atomic_write_text(run.metrics_path, "".join(json.dumps(r) + "\n" for r in kept))
    if run.log_path.is_file():
        lines = [ln for ln in run.log_path.read_text().splitlines() if not ln.startswith("step ") or int(ln.split()[1]) <= step]
        atomic_write_text(run.log_path, "".join(ln + "\n" for ln in lines))

