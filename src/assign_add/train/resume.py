"""Where training starts from: a new run directory, or the saved state of one to resume.

The optimiser state (``state.safetensors``: parameters, AdamW moments and step, elapsed time) is
written atomically every ``state_every`` steps; resuming checks the run is whole first
(:func:`check_resumable`) and cuts the append-only logs back to the state's step
(:func:`truncate_metrics`), so a killed run continues to bit-identical weights and metrics.
"""

from __future__ import annotations

import json
from pathlib import Path

import torch
from safetensors.torch import load_file, save_file

from assign_add.config import RunConfig
from assign_add.io import atomic_write, clean_orphans
from assign_add.lock import RunLock
from assign_add.run import (
    RunDir,
    RunError,
    check_replaceable,
    config_differences,
    create_run_dir,
    read_checkpoint,
)

# Fields that may change when resuming a run (they do not change its numbers).
RESUMABLE_CHANGES = {"train.steps", "train.device", "train.threads", "train.log_to"}


# --------------------------------------------------------------------------- optimiser state


def save_state(path: Path, model: torch.nn.Module, opt: torch.optim.Optimizer, step: int, extra: dict) -> None:
    tensors = {f"param/{n}": p.detach().cpu().contiguous() for n, p in model.named_parameters()}
    for n, p in model.named_parameters():
        st = opt.state.get(p, {})
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
    # the optimiser's state dict numbers parameters in the order of its groups (not always the model's)
    index = {id(p): i for i, p in enumerate(p for g in opt.param_groups for p in g["params"])}
    state = {}
    for n, p in model.named_parameters():
        if f"exp_avg/{n}" not in tensors:
            continue
        state[index[id(p)]] = {
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
    run, lock = create_run_dir(out, cfg, new_status)  # refuses a folder that is not empty
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


def truncate_metrics(run: RunDir, step: int) -> None:
    """Drop records after ``step`` (and a partial last line) before resuming from ``step``."""
    from assign_add.io import atomic_write_text, read_jsonl

    kept = [r for r in read_jsonl(run.metrics_path) if r["step"] <= step]  # raises on a corrupt line
    atomic_write_text(run.metrics_path, "".join(json.dumps(r) + "\n" for r in kept))
    if run.log_path.is_file():
        lines = [ln for ln in run.log_path.read_text().splitlines() if not ln.startswith("step ") or int(ln.split()[1]) <= step]
        atomic_write_text(run.log_path, "".join(ln + "\n" for ln in lines))

