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
import shutil
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import torch
from safetensors.torch import load_file, save_file

from assign_add.config import RunConfig
from assign_add.io import atomic_write
from assign_add.model.fast import answer_loss, fast_answer_logits
from assign_add.model.hooked import AssignAddTransformer
from assign_add.run import RunDir, RunError, config_differences, create_run_dir, save_checkpoint
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

    with safe_open(str(path), framework="pt") as fh:
        meta = fh.metadata()
    tensors = load_file(str(path))
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


def prepare_run_dir(out: Path, cfg: RunConfig, resume: bool, force: bool) -> tuple[RunDir, bool]:
    """Create or reopen ``out``; returns (run, resuming)."""
    run = RunDir(Path(out))
    if run.exists() and not force:
        old = run.config()
        diff = config_differences(old, cfg)
        if resume:
            fixed = [d for d in diff if d not in RESUMABLE_CHANGES]
            if fixed:
                raise RunError(f"{out} holds a run with a different {', '.join(fixed)}; cannot resume it with this config")
            if diff:
                from assign_add import config as config_mod

                config_mod.save(cfg, run.config_path)
            return run, run.state_path.is_file()
        status = run.status()
        if diff:
            raise RunError(
                f"{out} holds a different run ({', '.join(diff[:4])} differ); choose another --out or pass --force"
            )
        raise RunError(
            f"{out} already holds this run ({status.get('state', '?')} at step {status.get('step', 0)}); "
            "pass --resume to continue it or --force to start over"
        )
    if Path(out).exists() and not force and any(Path(out).iterdir()):
        raise RunError(f"{out} exists and is not a run directory; choose another --out or pass --force")
    if force and Path(out).exists():
        shutil.rmtree(out)
    return create_run_dir(Path(out), cfg, {"state": "running", "step": 0, "source": "train"}), False


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
    run, resuming = prepare_run_dir(out, cfg, resume, force)
    parts = run.partitions()
    sampler = Sampler(cfg.task, t.seed, parts)
    all_sets = run.eval_sets()
    live_sets = {k: v for k, v in all_sets.items() if k != "2var_union"}

    model = AssignAddTransformer.from_config(cfg.model, cfg.task, seed=t.seed).to(device)
    opt = make_optimizer(model, cfg)
    schedule = set(checkpoint_schedule(t.steps, t.checkpoint_every))
    start, loss_sum, loss_count = 0, 0.0, 0
    elapsed_before = 0.0
    if resuming:
        start, extra = load_state(run.state_path, model, opt)
        loss_sum, loss_count = extra.get("loss_sum", 0.0), extra.get("loss_count", 0)
        elapsed_before = extra.get("elapsed", 0.0)
        _truncate_metrics(run, start)
    else:
        _truncate_metrics(run, -1)  # a run killed before its first saved state starts over
    autocast = (
        torch.autocast(device_type=device.type, dtype=torch.bfloat16)
        if t.precision == "bf16"
        else contextlib.nullcontext()
    )
    t0 = time.perf_counter() - elapsed_before
    last_record: dict = {}

    def record(step: int, sets: dict) -> dict:
        nonlocal loss_sum, loss_count, last_record
        model.eval()
        res = evaluate(model, sets)
        model.train()
        weights, grads = _norms(model)
        rec = {
            "step": step,
            "time": round(time.perf_counter() - t0, 3),
            "train_loss": (loss_sum / loss_count) if loss_count else None,
            **res,
            "weight_norm": weights,
            "grad_norm": grads,
        }
        with open(run.metrics_path, "a") as fh:
            fh.write(json.dumps(rec) + "\n")
        loss_sum, loss_count = 0.0, 0
        last_record = rec
        with open(run.log_path, "a") as fh:
            accs = " ".join(f"{k}={v:.3f}" for k, v in res["acc"].items())
            fh.write(f"step {step} loss {rec['train_loss']} {accs}\n")
        return rec

    if start == 0:
        save_checkpoint(model, run.checkpoint_path(0), 0)
        rec = record(0, live_sets)
        if progress:
            progress(0, t.steps, rec)
    end = t.steps if stop_after is None else min(t.steps, stop_after)
    model.train()
    for step in range(start, end):
        batch = sampler.batch(step, t.batch_size)
        tokens = torch.as_tensor(batch.tokens, device=device)
        answers = torch.as_tensor(batch.answers, device=device)
        with autocast:
            logits = fast_answer_logits(model, tokens)
        loss = answer_loss(logits, answers)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        value = float(loss.detach())
        if not math.isfinite(value):
            raise RunError(f"training diverged at step {step + 1} (loss {value}); lower train.lr")
        loss_sum += value
        loss_count += 1
        done = step + 1
        rec = None
        if done % t.eval_every == 0 or done == t.steps:
            rec = record(done, all_sets if done == t.steps else live_sets)
        if done in schedule:
            save_checkpoint(model, run.checkpoint_path(done), done)
        if done % t.state_every == 0 or done == t.steps or done == end:
            extra = {"loss_sum": loss_sum, "loss_count": loss_count, "elapsed": time.perf_counter() - t0}
            save_state(run.state_path, model, opt, done, extra)
            run.set_status(state="running", step=done)
        if progress:
            progress(done, t.steps, rec)
    final = end
    if final == t.steps:
        run.set_status(state="complete", step=final)
    return TrainResult(run, final, last_record, time.perf_counter() - t0)


def _truncate_metrics(run: RunDir, step: int) -> None:
    """Drop records after ``step`` (and a partial last line) before resuming from ``step``."""
    from assign_add.io import atomic_write_text, read_jsonl

    kept = [r for r in read_jsonl(run.metrics_path) if r["step"] <= step]
    atomic_write_text(run.metrics_path, "".join(json.dumps(r) + "\n" for r in kept))
    if run.log_path.is_file():
        lines = [ln for ln in run.log_path.read_text().splitlines() if not ln.startswith("step ") or int(ln.split()[1]) <= step]
        atomic_write_text(run.log_path, "".join(ln + "\n" for ln in lines))

