"""Where a run's evaluation records go besides ``metrics.jsonl``: TensorBoard and Weights & Biases.

``train.log_to`` names the sinks (``["jsonl"]`` by default; ``metrics.jsonl`` is always written, as
the run's own record that resume, analysis and the explorer read).  Each sink receives the same
scalars as ``metrics.jsonl`` (training loss, every curated set's accuracy and loss, weight and
gradient norms, wall time) under the names ``train_loss``, ``acc/<set>``, ``loss/<set>``,
``weight_norm/<part>``, ``grad_norm/<part>``, ``time``; at the end of training, when the caller
gives a phase detector (the CLI and ``reproduce`` give :func:`assign_add.analysis.dynamics.phase_marks`),
the phase marks ``phase/addition``, ``phase/binding``, ``phase/refinement``: the step each was
detected at.
"""

from __future__ import annotations

import os
from dataclasses import asdict
from pathlib import Path
from typing import Callable, Protocol

from assign_add.config import RunConfig

PhaseMarks = Callable[[list[dict]], dict[str, int | None]]  # metrics records -> {phase: step or None}
TENSORBOARD_DIR = "tensorboard"  # inside the run directory
WANDB_DIR = "wandb"


def scalars(rec: dict) -> dict[str, float]:
    """The numbers of one ``metrics.jsonl`` record, flat, by the names above (missing values left out)."""
    out: dict[str, float] = {}
    for key, value in rec.items():
        if key == "step" or value is None:
            continue
        if isinstance(value, dict):
            out.update({f"{key}/{k}": float(v) for k, v in value.items() if v is not None})
        else:
            out[key] = float(value)
    return out


class Sink(Protocol):
    def log(self, rec: dict) -> None: ...
    def marks(self, phases: dict[str, int | None], step: int) -> None: ...
    def close(self) -> None: ...


class TensorBoardSink:
    """Event files under ``RUN/tensorboard``; on resume, events at or after the resumed step are dropped
    (``purge_step``), as ``metrics.jsonl`` is truncated there."""

    def __init__(self, root: Path, start: int) -> None:
        try:
            from torch.utils.tensorboard import SummaryWriter
        except ImportError:
            raise RuntimeError("train.log_to tensorboard needs tensorboard: pip install 'assign-add[logs]'") from None
        self.writer = SummaryWriter(str(root / TENSORBOARD_DIR), purge_step=start + 1 if start else None)

    def log(self, rec: dict) -> None:
        for name, value in scalars(rec).items():
            self.writer.add_scalar(name, value, rec["step"])

    def marks(self, phases: dict[str, int | None], step: int) -> None:
        for name, at in phases.items():
            if at is not None:
                self.writer.add_scalar(f"phase/{name}", at, step)
        self.writer.add_text("phases", ", ".join(f"{k}: {v if v is not None else '—'}" for k, v in phases.items()),
                             step)

    def close(self) -> None:
        self.writer.close()


class WandbSink:
    """A W&B run under ``RUN/wandb``, its id derived from the run directory so a resumed run continues it.
    W&B's own settings apply (``WANDB_MODE=offline`` keeps it off the network; the tests use it)."""

    def __init__(self, root: Path, cfg: RunConfig, start: int) -> None:
        try:
            import wandb
        except ImportError:
            raise RuntimeError("train.log_to wandb needs wandb: pip install wandb") from None
        import hashlib

        (root / WANDB_DIR).mkdir(exist_ok=True)
        run_id = hashlib.sha1(str(root.resolve()).encode()).hexdigest()[:12]
        self.run = wandb.init(project=os.environ.get("WANDB_PROJECT", "assign-add"), dir=str(root), id=run_id,
                              name=root.name, config=asdict(cfg), resume="allow", reinit="create_new")

    def log(self, rec: dict) -> None:
        self.run.log(scalars(rec), step=rec["step"])

    def marks(self, phases: dict[str, int | None], step: int) -> None:
        self.run.summary.update({f"phase/{k}": v for k, v in phases.items()})

    def close(self) -> None:
        self.run.finish()


def open_sinks(root: Path, cfg: RunConfig, start: int) -> list[Sink]:
    """The sinks ``cfg.train.log_to`` names beyond ``metrics.jsonl`` (written by the trainer itself)."""
    sinks: list[Sink] = []
    for name in cfg.train.log_to:
        if name == "tensorboard":
            sinks.append(TensorBoardSink(root, start))
        elif name == "wandb":
            sinks.append(WandbSink(root, cfg, start))
    return sinks
