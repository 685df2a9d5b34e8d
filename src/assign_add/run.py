"""The run directory: one folder per run, everything an analysis needs to rebuild the run.

::

    runs/NAME/
      config.toml            resolved configuration
      status.json            {"state": "running" | "complete", "step": ..., "source": ...}
      data/partitions.json   training / held-out pairs, restrictions
      data/evalsets.npz      the curated evaluation sets (tokens, answers, operands)
      metrics.jsonl          one JSON record per evaluation (training runs)
      evals.jsonl            per-checkpoint accuracies computed by `assign-add eval`
      provenance.jsonl       one record per training segment: commit, CPU, torch, threads
      checkpoints/step_XXXXXX.safetensors   TransformerLens parameter names, no pickle
      state.safetensors      latest optimiser state, for --resume
      train.log              human-readable log

A directory is created complete or not at all: it is assembled under a temporary name, locked
(:mod:`assign_add.lock`) and renamed into place, so it is never visible unlocked or half-written.
``--force`` replaces only a directory that is a run of ours (:func:`check_replaceable`).
"""

from __future__ import annotations

import glob
import json
import os
import re
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import torch
from safetensors.torch import load_file, save_file

from assign_add import config as config_mod
from assign_add.config import RunConfig
from assign_add.io import atomic_write, atomic_write_json, read_jsonl
from assign_add.lock import RunLock, is_locked
from assign_add.model.hooked import AssignAddTransformer, HookedConfig
from assign_add.task.evalsets import build_eval_sets, load_eval_sets, save_eval_sets
from assign_add.task.generator import Batch
from assign_add.task.partitions import Partitions, build_partitions
from assign_add.task.vocab import Vocab


class RunError(RuntimeError):
    """A problem with a run directory that the user can fix (message is one line)."""


CKPT_RE = re.compile(r"^step_(\d+)\.safetensors$")


def step_name(step: int) -> str:
    """The one name of a training step in file and folder names (checkpoints, branch folders, saved states):
    ``step_000500``, zero-padded so that names sort by step."""
    return f"step_{step:06d}"


def seed_dir(root: Path | str, seed: int) -> Path:
    """The folder of one seed's run in a many-seed experiment: ``ROOT/seed-N``."""
    return Path(root) / f"seed-{seed}"


@dataclass(frozen=True)
class RunDir:
    root: Path

    @property
    def config_path(self) -> Path:
        return self.root / "config.toml"

    @property
    def status_path(self) -> Path:
        return self.root / "status.json"

    @property
    def partitions_path(self) -> Path:
        return self.root / "data" / "partitions.json"

    @property
    def evalsets_path(self) -> Path:
        return self.root / "data" / "evalsets.npz"

    @property
    def metrics_path(self) -> Path:
        return self.root / "metrics.jsonl"

    @property
    def evals_path(self) -> Path:
        return self.root / "evals.jsonl"

    @property
    def checkpoint_dir(self) -> Path:
        return self.root / "checkpoints"

    @property
    def state_path(self) -> Path:
        return self.root / "state.safetensors"

    @property
    def log_path(self) -> Path:
        return self.root / "train.log"

    @property
    def provenance_path(self) -> Path:
        """One record per training segment: commit, CPU, torch, threads (``assign_add.provenance``)."""
        return self.root / "provenance.jsonl"

    def checkpoint_path(self, step: int) -> Path:
        return self.checkpoint_dir / f"{step_name(step)}.safetensors"

    # ---- reading
    def exists(self) -> bool:
        return self.config_path.is_file()

    def config(self) -> RunConfig:
        return config_mod.load(self.config_path)

    def status(self) -> dict:
        if not self.status_path.is_file():
            return {}
        try:
            status = json.loads(self.status_path.read_text(encoding="utf-8"))
        except (json.JSONDecodeError, UnicodeDecodeError):
            raise RunError(f"{self.status_path}: corrupt (not JSON); the run directory is damaged") from None
        if not isinstance(status, dict):
            raise RunError(f"{self.status_path}: corrupt (expected a JSON object)")
        return status

    def set_status(self, **fields) -> None:
        status = self.status()
        status.update(fields)
        atomic_write_json(self.status_path, status)

    def checkpoint_steps(self) -> list[int]:
        if not self.checkpoint_dir.is_dir():
            return []
        steps = [int(m.group(1)) for p in self.checkpoint_dir.iterdir() if (m := CKPT_RE.match(p.name))]
        return sorted(steps)

    def metrics(self) -> list[dict]:
        return read_jsonl(self.metrics_path)

    def eval_sets(self) -> dict[str, Batch]:
        if not self.evalsets_path.is_file():
            raise RunError(f"{self.evalsets_path}: missing; the run directory is damaged")
        try:
            return load_eval_sets(self.evalsets_path)
        except Exception as exc:  # noqa: BLE001 - any unreadable archive is a damaged run
            raise RunError(f"{self.evalsets_path}: unreadable ({type(exc).__name__}); the run directory is damaged") from None

    def partitions(self) -> Partitions:
        """The saved ``data/partitions.json`` (rebuilt from the config only for a run without one)."""
        if self.partitions_path.is_file():
            return Partitions.load(self.partitions_path, self.config().task)
        return build_partitions(self.config().task)

    def vocab(self) -> Vocab:
        return Vocab.from_task(self.config().task)

    def check_step(self, step: int, steps: list[int] | None = None) -> int:
        """``step`` if the run has a checkpoint there (``steps``: its checkpoint steps, if known), else a
        one-line error naming the nearest one."""
        steps = self.checkpoint_steps() if steps is None else steps
        if step not in steps:
            near = min(steps, key=lambda s: abs(s - step))
            raise RunError(f"{self.root} has no checkpoint at step {step} (nearest: {near})")
        return step

    def load_model(self, step: int | None = None, device: str = "cpu") -> AssignAddTransformer:
        steps = self.checkpoint_steps()
        if not steps:
            raise RunError(f"{self.root} has no checkpoints")
        if step is None:
            step = steps[-1]
        self.check_step(step, steps)
        cfg = self.config()
        model = AssignAddTransformer(HookedConfig.build(cfg.model, cfg.task), Vocab.from_task(cfg.task))
        path = self.checkpoint_path(step)
        tensors = read_checkpoint(path)
        check_tensors(tensors, model.state_dict(), str(path))
        model.load_state_dict(tensors)
        return model.to(device).eval()


def open_run(path: Path | str) -> RunDir:
    run = RunDir(Path(path))
    if not run.exists():
        raise RunError(f"{path} is not a run directory (no config.toml)")
    return run


def save_checkpoint(model: torch.nn.Module, path: Path, step: int) -> None:
    tensors = {k: v.detach().to("cpu", torch.float32).contiguous() for k, v in model.state_dict().items()}
    atomic_write(path, lambda tmp: save_file(tensors, str(tmp), metadata={"step": str(step)}))


def check_tensor(key: str, value: object, expected: torch.Tensor, source: str) -> None:
    """One parameter against the model's own: a finite floating-point tensor of the same shape, else a
    one-line :class:`RunError` naming ``source`` and the parameter."""
    if not isinstance(value, torch.Tensor):
        raise RunError(f"{source}: {key} is a {type(value).__name__}, not a tensor; not a model state dict")
    if tuple(value.shape) != tuple(expected.shape):
        raise RunError(f"{source}: {key} has shape {tuple(value.shape)}, expected {tuple(expected.shape)}")
    if not value.is_floating_point():
        raise RunError(f"{source}: {key} has dtype {value.dtype}, expected a floating-point tensor")
    if not bool(torch.isfinite(value).all()):
        raise RunError(f"{source}: {key} holds NaN or infinite values")


def check_tensors(tensors: dict[str, torch.Tensor], expected: dict[str, torch.Tensor], source: str) -> None:
    """A checkpoint's tensors against a model's state dict: the same names, each as :func:`check_tensor`."""
    unexpected = sorted(set(tensors) - set(expected))
    if unexpected:
        raise RunError(f"{source}: unexpected parameter {unexpected[0]}; not a checkpoint of this run's model")
    missing = sorted(set(expected) - set(tensors))
    if missing:
        raise RunError(f"{source}: missing parameters {', '.join(missing)}")
    for key, value in tensors.items():
        check_tensor(key, value, expected[key], source)


def model_tensors(cfg: RunConfig) -> dict[str, torch.Tensor]:
    """The state dict of ``cfg``'s model (names, shapes, dtypes a checkpoint of it must have)."""
    return AssignAddTransformer(HookedConfig.build(cfg.model, cfg.task), Vocab.from_task(cfg.task)).state_dict()


def read_checkpoint(path: Path) -> dict[str, torch.Tensor]:
    """A checkpoint's tensors, or a one-line :class:`RunError` if the file is truncated or corrupt."""
    try:
        return load_file(str(path))
    except Exception as exc:  # noqa: BLE001 - safetensors raises several types for a damaged file
        raise RunError(f"{path}: unreadable checkpoint ({type(exc).__name__}: {str(exc)[:80]})") from None


# Entries a run directory of ours may hold (anything else makes --force refuse).
RUN_ENTRIES = {"config.toml", "status.json", "data", "metrics.jsonl", "evals.jsonl", "checkpoints",
               "state.safetensors", "branch.json", "train.log", "provenance.jsonl", "analysis.json", "analysis_inputs.npz", "figures", ".lock"}


def check_replaceable(out: Path) -> None:
    """Refuse (one line) unless ``--force`` may delete ``out``: absent, empty, or a run of ours.

    Never the current directory or one of its parents; never a folder with files we did not write.
    """
    out = Path(out)
    if not out.exists():
        return
    if not out.is_dir():
        raise RunError(f"--force: {out} is a file, not a run directory; refusing to delete it")
    here = Path.cwd().resolve()
    if out.resolve() == here or out.resolve() in here.parents:
        raise RunError(f"--force: {out} is the current directory or a parent of it; refusing to delete it")
    entries = [p.name for p in out.iterdir() if not (p.name.startswith(".") and p.name.endswith(".tmp"))]
    if not entries:
        return
    if not (out / "config.toml").is_file() or not (out / "status.json").is_file():
        raise RunError(f"--force: {out} is not a run directory (no config.toml/status.json); refusing to delete it")
    foreign = sorted(set(entries) - RUN_ENTRIES)
    if foreign:
        raise RunError(f"--force: {out} holds files that are not part of a run ({', '.join(foreign[:3])}); "
                       "refusing to delete it")


def check_folder_out(out: Path, command: str, entries: set[str], pattern: str | None = None) -> None:
    """An ``--out`` of a command that writes a folder of many files (``reproduce``, ``sweep``, …): absent,
    empty, or holding only the ``entries`` that command writes (or names matching ``pattern``), so that
    a rerun resumes its own folder and never writes into someone else's.  Else one line naming a
    foreign entry."""
    out = Path(out)
    check_out_path(out)
    if not out.is_dir():
        return
    ours = re.compile(pattern) if pattern else None
    foreign = sorted(p.name for p in out.iterdir()
                     if p.name not in entries and not (ours and ours.fullmatch(p.name))
                     and not (p.name.startswith(".") and p.name.endswith(".tmp")))
    if foreign:
        article = "an" if command[0] in "aeiolu" else "a"  # "an llc folder"
        raise RunError(f"--out {out}: exists and is not {article} {command} folder (it holds {', '.join(foreign[:3])}); "
                       "choose another --out")


def check_new_run_out(out: Path) -> None:
    """``out`` may receive a new run: absent or empty.  One wording for every command that creates a
    run: a folder holding a run, and a folder holding anything else, are named as what they are."""
    out = Path(out)
    check_out_path(out)
    if out.is_dir() and any(p for p in out.iterdir() if not p.name.endswith(".tmp")):
        if RunDir(out).exists():
            raise RunError(f"--out {out}: already holds a run; choose another --out (or pass --force, where the "
                           "command has it, to replace it)")
        raise RunError(f"--out {out}: exists and is not a run directory; choose another --out")


def check_new_file_out(out: Path | None) -> None:
    """An ``--out`` FILE that a command writes once: absent (a user's file is never overwritten), under a
    writable folder."""
    if out is None:
        return
    out = Path(out)
    if out.is_dir():
        raise RunError(f"--out {out}: exists and is not a file (a folder); give the name of a new file")
    if out.exists():
        raise RunError(f"--out {out}: already exists; give the name of a new file (nothing is overwritten)")
    check_out_path(out.parent)


def check_out_path(out: Path) -> None:
    """A one-line error when ``out`` cannot be a directory we create (a file, under a file, read-only)."""
    out = Path(out)
    if out.exists() and not out.is_dir():
        raise RunError(f"--out {out}: is a file")
    parent = out
    while not parent.exists():
        parent = parent.parent
    if not parent.is_dir():
        raise RunError(f"--out {out}: {parent} is a file, not a directory")
    if not os.access(parent if parent != out else out, os.W_OK | os.X_OK):
        raise RunError(f"--out {out}: {parent} is not writable")


def create_run_dir(
    root: Path, cfg: RunConfig, status: dict, populate: Callable[[RunDir], None] | None = None,
    replace: bool = False,
) -> tuple[RunDir, RunLock]:
    """Write config, partitions, evaluation sets (and ``populate``'s files) under a temporary name,
    lock it, and rename it into place; returns the run and its held lock (release it when done).

    ``replace``: ``root`` may hold a run (the caller checked it with :func:`check_replaceable`); it is
    locked, moved aside and deleted only once the new run is in place.
    """
    root = Path(root)
    cfg = config_mod.settle_precision(cfg)  # a run records fp32 or bf16, never "auto"
    check_out_path(root) if replace else check_new_run_out(root)
    root.parent.mkdir(parents=True, exist_ok=True)
    _remove_orphan_dirs(root)
    old_lock = RunLock(root) if replace and root.is_dir() and any(root.iterdir()) else None
    tmp = Path(tempfile.mkdtemp(prefix=f".{root.name}.", suffix=".tmp", dir=root.parent))
    lock = None
    try:
        tmp.chmod(0o755)
        lock = RunLock(tmp)  # the lock file travels with the directory when it is renamed
        staged = RunDir(tmp)
        config_mod.save(cfg, staged.config_path)
        parts = build_partitions(cfg.task)
        parts.save(staged.partitions_path, cfg.task)
        save_eval_sets(build_eval_sets(cfg.task, parts), staged.evalsets_path)
        staged.checkpoint_dir.mkdir()
        atomic_write_json(staged.status_path, status)
        if populate is not None:
            populate(staged)
        trash = None
        if old_lock is not None:
            trash = root.parent / f".{root.name}.replaced.{os.getpid()}.tmp"
            root.rename(trash)
        try:
            tmp.rename(root)  # replaces an empty directory; fails if a run appeared meanwhile
        except OSError:
            if trash is not None:
                trash.rename(root)
            raise RunError(f"{root} was created by another process meanwhile; nothing written") from None
        if trash is not None:
            shutil.rmtree(trash, ignore_errors=True)
    except BaseException:
        if lock is not None:
            lock.release()
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    finally:
        if old_lock is not None:
            old_lock.release()
    return RunDir(root), lock


def _remove_orphan_dirs(root: Path) -> None:
    """Remove ``.NAME.*.tmp`` directories beside ``root`` left by creators that were killed."""
    for tmp in root.parent.glob(f".{glob.escape(root.name)}.*.tmp"):
        if tmp.is_dir() and not is_locked(tmp):
            shutil.rmtree(tmp, ignore_errors=True)


def config_differences(a: RunConfig, b: RunConfig) -> list[str]:
    """Dotted names of the fields that differ between two configs."""
    flat_a, flat_b = _flatten(config_mod.to_dict(a)), _flatten(config_mod.to_dict(b))
    return [k for k in flat_a if flat_a.get(k) != flat_b.get(k)]


def _flatten(d: dict, prefix: str = "") -> dict:
    out = {}
    for k, v in d.items():
        if isinstance(v, dict):
            out.update(_flatten(v, f"{prefix}{k}."))
        else:
            out[f"{prefix}{k}"] = v
    return out
