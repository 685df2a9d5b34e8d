"""The run directory: one folder per run, everything an analysis needs to rebuild the run.

::

    runs/NAME/
      config.toml            resolved configuration
      status.json            {"state": "running" | "complete", "step": ..., "source": ...}
      data/partitions.json   training / held-out pairs, restrictions
      data/evalsets.npz      the curated evaluation sets (tokens, answers, operands)
      metrics.jsonl          one JSON record per evaluation (training runs)
      evals.jsonl            per-checkpoint accuracies computed by `assign-add eval`
      checkpoints/step_XXXXXX.safetensors   TransformerLens parameter names, no pickle
      state.safetensors      latest optimiser state, for --resume
      train.log              human-readable log

A directory is created complete or not at all: it is assembled under a temporary name and
renamed into place.
"""

from __future__ import annotations

import json
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
from assign_add.model.hooked import AssignAddTransformer, HookedConfig
from assign_add.task.evalsets import build_eval_sets, load_eval_sets, save_eval_sets
from assign_add.task.generator import Batch
from assign_add.task.partitions import Partitions, build_partitions
from assign_add.task.vocab import Vocab


class RunError(RuntimeError):
    """A problem with a run directory that the user can fix (message is one line)."""


CKPT_RE = re.compile(r"^step_(\d+)\.safetensors$")


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

    def checkpoint_path(self, step: int) -> Path:
        return self.checkpoint_dir / f"step_{step:06d}.safetensors"

    # ---- reading
    def exists(self) -> bool:
        return self.config_path.is_file()

    def config(self) -> RunConfig:
        return config_mod.load(self.config_path)

    def status(self) -> dict:
        if not self.status_path.is_file():
            return {}
        return json.loads(self.status_path.read_text())

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
        return load_eval_sets(self.evalsets_path)

    def partitions(self) -> Partitions:
        return build_partitions(self.config().task)

    def vocab(self) -> Vocab:
        return Vocab.from_task(self.config().task)

    def load_model(self, step: int | None = None, device: str = "cpu") -> AssignAddTransformer:
        steps = self.checkpoint_steps()
        if not steps:
            raise RunError(f"{self.root} has no checkpoints")
        if step is None:
            step = steps[-1]
        if step not in steps:
            near = min(steps, key=lambda s: abs(s - step))
            raise RunError(f"{self.root} has no checkpoint at step {step} (nearest: {near})")
        cfg = self.config()
        model = AssignAddTransformer(HookedConfig.build(cfg.model, cfg.task), Vocab.from_task(cfg.task))
        model.load_state_dict(load_file(str(self.checkpoint_path(step))))
        return model.to(device).eval()


def open_run(path: Path | str) -> RunDir:
    run = RunDir(Path(path))
    if not run.exists():
        raise RunError(f"{path} is not a run directory (no config.toml)")
    return run


def save_checkpoint(model: torch.nn.Module, path: Path, step: int) -> None:
    tensors = {k: v.detach().to("cpu", torch.float32).contiguous() for k, v in model.state_dict().items()}
    atomic_write(path, lambda tmp: save_file(tensors, str(tmp), metadata={"step": str(step)}))


def create_run_dir(
    root: Path, cfg: RunConfig, status: dict, populate: Callable[[RunDir], None] | None = None
) -> RunDir:
    """Write config, partitions, evaluation sets (and ``populate``'s files) under a temporary name, then rename."""
    root = Path(root)
    root.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{root.name}.", suffix=".tmp", dir=root.parent))
    try:
        tmp.chmod(0o755)
        staged = RunDir(tmp)
        config_mod.save(cfg, staged.config_path)
        parts = build_partitions(cfg.task)
        parts.save(staged.partitions_path, cfg.task)
        save_eval_sets(build_eval_sets(cfg.task, parts), staged.evalsets_path)
        staged.checkpoint_dir.mkdir()
        atomic_write_json(staged.status_path, status)
        if populate is not None:
            populate(staged)
        if root.exists():
            shutil.rmtree(root)
        tmp.rename(root)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return RunDir(root)


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
