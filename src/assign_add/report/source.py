"""One column of the claims table (:class:`Source`) and how its runs were trained, beside the authors' protocol."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from assign_add import config as config_mod
from assign_add.report.claims import PAPER_STEPS, Aggregate, ClaimResult

PRECISION_WORDS = {"bf16": "bf16 autocast", "fp32": "float32"}
AUTHORS_PROTOCOL = ("40,000 steps in bf16 autocast on a GPU (sweeps: 30,000 per point); bf16 autocast here is CPU "
                    "autocast with the softmaxes kept in float32 as CUDA's does (README \"Precision\")")


@dataclass
class Source:
    """One column of the claims table: the released checkpoints, or our runs (one per seed)."""

    name: str
    runs: list[Path]  # run directories (each with analysis.json and figures/)
    results: list[dict[str, ClaimResult]]
    aggregate: dict[str, Aggregate] | None  # for several seeds
    configs: list[str]
    claim_figures: dict[str, list[Path]] | None = None  # claim -> figure paths without suffix (e.g. a sweep's)
    steps: int | None = None  # training steps of these runs: fewer than the paper's is said beside every verdict

    def protocol(self) -> str:
        """"at N of the paper's 40,000 steps" when these runs are shorter than the authors' run."""
        if self.steps is None or self.steps >= PAPER_STEPS:
            return ""
        return f"at {self.steps:,} of the paper's {PAPER_STEPS:,} steps"

    def training(self) -> str:
        """How these runs were trained, from their configs: "3 runs: 40,000 steps, bf16 autocast"."""
        runs = f"{len(self.runs)} run{'s' if len(self.runs) > 1 else ''}"
        cfgs = [config_mod.loads(c).train for c in self.configs]
        if not cfgs:
            return runs
        steps = "/".join(f"{s:,}" for s in sorted({t.steps for t in cfgs}))
        precision = "/".join(PRECISION_WORDS.get(p, p) for p in sorted({t.precision for t in cfgs}))
        return f"{runs}: {steps} steps, {precision}"
