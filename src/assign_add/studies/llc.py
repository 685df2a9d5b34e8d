"""The local learning coefficient (LLC) of a checkpoint, estimated with devinterp's SGLD sampler.

devinterp (Timaeus; PyPI ``devinterp``, optional extra ``assign-add[llc]``) is built for language
models: it feeds ``input_ids`` and scores next-token loss at every position, and it treats any model
with ``cfg.n_heads`` as a TransformerLens model.  Our model is trained on one token, the answer.  The
adapter:

- **data**: each sequence's ``input_ids`` are its prompt tokens followed by its answer (``n_ctx + 1``);
- **loss**: the sequence's answer loss (cross-entropy of the answer at the final position, the
  training objective), repeated at each of its ``n_ctx`` positions, so devinterp's mean over
  positions is the per-sequence loss and the estimate ``n_beta · (E_w[L(w)] − L(w*))`` is per
  sequence (not diluted by ``n_ctx``);
- **model**: wrapped in a plain module, so devinterp's TransformerLens branch does not apply.

SGLD samples ``w`` from ``exp(−n_beta·L(w) − γ/2·|w − w*|²)`` near the checkpoint ``w*``.  The
defaults (:data:`DEFAULTS`) are where ``assign-add llc --calibrate-lrs`` settles on the released run;
the per-chain estimates give the spread the estimate is reported with.
"""

from __future__ import annotations

import math
import tempfile
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np
import torch

from assign_add.task.generator import Batch


@dataclass(frozen=True)
class LLCSettings:
    # chosen by calibrate()'s rule on the released run (steps 1001, 5401, 40000; results/llc-calibration):
    # lr 1e-4 with localisation 1,000 is the only cell of the 3 x 4 grid that passes at all three
    lr: float = 1e-4
    localization: float = 1000.0
    batch_size: int = 256
    n_beta: float = 0.0  # 0: devinterp's default, batch_size / log(batch_size)
    num_chains: int = 4
    num_draws: int = 200
    num_burnin_steps: int = 50  # steps left out of the estimate while the chains move away from w*
    seed: int = 100

    def resolved_n_beta(self) -> float:
        return self.n_beta if self.n_beta > 0 else self.batch_size / math.log(self.batch_size)


DEFAULTS = LLCSettings()
# what an llc folder holds
OUT_ENTRIES = {"llc.json", "llc.png", "llc.html", "calibration.json", "traces.png", "traces.html"}


@dataclass
class LLCEstimate:
    llc_mean: float
    llc_std: float  # over chains
    per_chain: list[float]
    init_loss: float
    trace: list[list[float]]  # [chain][step] mean sampling loss
    settings: dict

    def to_json(self) -> dict:
        return asdict(self)


class AnswerLossModel(torch.nn.Module):
    """A model giving logits ``[B, n_ctx, vocab]``, seen by devinterp as a plain module."""

    def __init__(self, model: torch.nn.Module) -> None:
        super().__init__()
        self.inner = model

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        return self.inner(tokens)


def answer_token_loss(model: torch.nn.Module, input_ids: torch.Tensor) -> torch.Tensor:
    """devinterp's per-token loss ``[B, seq − 1]``: each sequence's answer loss at every position."""
    from assign_add.model import AssignAddTransformer, fast_answer_logits

    prompt, answer = input_ids[:, :-1], input_ids[:, -1]
    inner = model.inner if isinstance(model, AnswerLossModel) else model
    if isinstance(inner, AssignAddTransformer):  # the final position only: the training step's forward
        logits = fast_answer_logits(inner, prompt).float()
    else:  # any other module giving [B, n_ctx, vocab] (a planted model in the tests)
        logits = inner(prompt)[:, -1].float()
    loss = torch.nn.functional.cross_entropy(logits, answer, reduction="none")
    return loss[:, None].expand(-1, prompt.shape[1])


def sequences_dataset(batch: Batch):
    """The HuggingFace dataset devinterp samples from: prompt tokens + answer per row."""
    from datasets import Dataset

    rows = np.concatenate([batch.tokens, batch.answers[:, None]], axis=1).astype(np.int64)
    ds = Dataset.from_dict({"input_ids": rows.tolist()})
    return ds.with_format("torch")


def estimate_llc(model: torch.nn.Module, batch: Batch, settings: LLCSettings = DEFAULTS,
                 device: str = "cpu") -> LLCEstimate:
    """The LLC of ``model`` at its current weights on the sequences of ``batch`` (the model is not changed)."""
    try:
        from devinterp.slt.llc import llc
    except ImportError:
        raise RuntimeError("the LLC needs devinterp: pip install 'assign-add[llc]'") from None
    import contextlib
    import copy
    import io

    wrapped = AnswerLossModel(copy.deepcopy(model))
    # devinterp draws a progress bar per chain on stderr
    with contextlib.redirect_stderr(io.StringIO()), tempfile.TemporaryDirectory() as tmp:
        res = llc(wrapped, sequences_dataset(batch), {}, lr=settings.lr, n_beta=settings.resolved_n_beta(),
                  loss_fn=answer_token_loss, localization=settings.localization,
                  batch_size=settings.batch_size, num_chains=settings.num_chains, num_draws=settings.num_draws,
                  num_burnin_steps=settings.num_burnin_steps, init_seed=settings.seed, device=device,
                  output_path=Path(tmp) / "samples.zarr")
        trace = np.asarray(res["loss_trace"].values, dtype=float)  # [chain, step], burn-in first
        init = float(res["init_loss"].values)
    return from_trace(trace, init, settings)


def from_trace(trace: np.ndarray, init_loss: float, settings: LLCSettings) -> LLCEstimate:
    """``n_beta · (mean sampled loss − L(w*))`` per chain over the steps after burn-in.  (devinterp's own
    ``compute_llc`` averages over every step, burn-in included, which biases the estimate towards 0
    while the chains are still leaving w*.)"""
    kept = trace[:, settings.num_burnin_steps:]
    per_chain = (settings.resolved_n_beta() * (kept.mean(axis=1) - init_loss)).tolist()
    return LLCEstimate(float(np.mean(per_chain)), float(np.std(per_chain)), per_chain, init_loss,
                       trace.tolist(), {**asdict(settings), "n_beta": settings.resolved_n_beta()})


def trace_drift(est: LLCEstimate) -> float:
    """How far the chains still move after burn-in: |mean of the last quarter − mean of the first quarter| of
    the mean loss trace after burn-in, in units of the loss gap (E[L] − L(w*)); small once the chains have settled."""
    t = np.asarray(est.trace).mean(axis=0)[est.settings["num_burnin_steps"]:]
    q = max(1, len(t) // 4)
    gap = abs(t.mean() - est.init_loss)
    return float(abs(t[-q:].mean() - t[:q].mean()) / gap) if gap > 0 else float("inf")


# ---- over a run's checkpoints -----------------------------------------------------------------

DATA_SEED = 2024  # the sequences the LLC is measured on: the run's training distribution, this seed
DATA_SIZE = 4096
DRIFT_MAX = 0.2  # calibration: the chains' loss may still move by at most this share of the loss gap
CHAIN_CV_MAX = 0.2  # calibration: the chains' spread (std / mean) at most this


def llc_batch(run) -> Batch:
    from assign_add.task.generator import Sampler

    return Sampler(run.config().task, DATA_SEED, run.partitions()).batch(0, DATA_SIZE)


def llc_over_steps(run, steps: list[int], settings: LLCSettings = DEFAULTS, progress=None) -> dict:
    """The LLC at each checkpoint in ``steps`` (same sequences, same settings), beside the run's phases."""
    from assign_add.analysis.dynamics import curves_from_records, detect_phases
    from assign_add.train.checkpoint_eval import accuracy_records

    batch = llc_batch(run)
    rows = []
    for i, step in enumerate(steps):
        est = estimate_llc(run.load_model(step), batch, settings)
        rows.append({"step": step, "llc": est.llc_mean, "llc_std": est.llc_std, "per_chain": est.per_chain,
                     "init_loss": est.init_loss, "drift": trace_drift(est)})
        if progress:
            progress(i + 1, len(steps))
    records, _ = accuracy_records(run, run.checkpoint_steps(), write=False)
    phases = detect_phases(curves_from_records(records)).to_json()
    return {"run": str(run.root), "settings": {**asdict(settings), "n_beta": settings.resolved_n_beta()},
            "data": {"seed": DATA_SEED, "sequences": DATA_SIZE}, "rows": rows, "phases": phases,
            "landmarks": landmarks(rows, phases)}


def landmarks(rows: list[dict], phases: dict) -> dict:
    """Where the LLC curve moves, beside the phases: its largest rise and fall between consecutive
    checkpoints, and for each detected phase the estimates at the checkpoints either side of its step
    (the last before it, the first at or after it)."""
    pairs = [(a["step"], b["step"], b["llc"] - a["llc"]) for a, b in zip(rows, rows[1:])]
    as_dict = lambda p: None if p is None else {"from": p[0], "to": p[1], "change": p[2]}  # noqa: E731
    out: dict = {"largest_rise": as_dict(max(pairs, key=lambda p: p[2], default=None)),
                 "largest_fall": as_dict(min(pairs, key=lambda p: p[2], default=None)), "at_phases": {}}
    for name in ("addition", "binding", "refinement"):
        at = phases.get(name)
        before = [r for r in rows if r["step"] < at] if at is not None else []
        after = [r for r in rows if r["step"] >= at] if at is not None else []
        if before and after:
            b, a = before[-1], after[0]
            out["at_phases"][name] = {"step": at, "before": [b["step"], b["llc"]], "after": [a["step"], a["llc"]],
                                      "change": a["llc"] - b["llc"]}
    return out


def landmark_lines(marks: dict) -> list[str]:
    """:func:`landmarks` as sentences."""
    lines = []
    for key, word in (("largest_rise", "largest rise"), ("largest_fall", "largest fall")):
        m = marks.get(key)
        if m:
            lines.append(f"{word}: {m['change']:+.1f} between steps {m['from']:,} and {m['to']:,}")
    for name, m in marks.get("at_phases", {}).items():
        lines.append(f"{name} at {m['step']:,}: LLC {m['before'][1]:.1f} at {m['before'][0]:,} -> {m['after'][1]:.1f} "
                     f"at {m['after'][0]:,} ({m['change']:+.1f})")
    return lines


def calibrate(run, steps: list[int], lrs: list[float], localizations: list[float],
              settings: LLCSettings = DEFAULTS, progress=None) -> dict:
    """Every (step size, localisation) on the checkpoints in ``steps``: the estimate, the chains' spread and
    whether their loss has settled (:func:`trace_drift`).  The chosen cell is the largest step size, then the
    smallest localisation, whose estimates are positive with drift ≤ DRIFT_MAX and chain spread
    ≤ CHAIN_CV_MAX at every checkpoint (a fixed rule: the fastest mixing that still passes both checks)."""
    from dataclasses import replace

    batch = llc_batch(run)
    cells, k, total = [], 0, len(lrs) * len(localizations) * len(steps)
    for lr in lrs:
        for loc in localizations:
            st = replace(settings, lr=lr, localization=loc)
            per_step = []
            for step in steps:
                est = estimate_llc(run.load_model(step), batch, st)
                cv = est.llc_std / abs(est.llc_mean) if est.llc_mean else float("inf")
                per_step.append({"step": step, "llc": est.llc_mean, "llc_std": est.llc_std, "chain_cv": cv,
                                 "drift": trace_drift(est), "trace": est.trace})
                k += 1
                if progress:
                    progress(k, total)
            ok = all(r["llc"] > 0 and r["drift"] <= DRIFT_MAX and r["chain_cv"] <= CHAIN_CV_MAX for r in per_step)
            cells.append({"lr": lr, "localization": loc, "passes": ok, "steps": per_step})
    passing = [c for c in cells if c["passes"]]
    chosen = max(passing, key=lambda c: (c["lr"], -c["localization"]), default=None)
    return {"run": str(run.root), "settings": {**asdict(settings), "n_beta": settings.resolved_n_beta()},
            "rule": {"drift_max": DRIFT_MAX, "chain_cv_max": CHAIN_CV_MAX}, "cells": cells,
            "chosen": None if chosen is None else {"lr": chosen["lr"], "localization": chosen["localization"]}}


def llc_chart(result: dict):
    from assign_add.charts import Line

    rows = result["rows"]
    marks = {k: float(v) for k, v in result["phases"].items() if k in ("addition", "binding", "refinement") and v}
    return Line("Local learning coefficient across training", [r["step"] for r in rows],
                {"LLC (mean over chains)": [r["llc"] for r in rows]}, ylabel="LLC (per sequence)", markers=marks)


def trace_chart(calibration: dict):
    """The mean sampled loss per step (over chains) of every calibration cell at its first checkpoint."""
    from assign_add.charts import Line

    series = {}
    for c in calibration["cells"]:
        first = c["steps"][0]
        series[f"lr {c['lr']:g}, γ {c['localization']:g}"] = np.asarray(first["trace"]).mean(axis=0).tolist()
    n = max(len(v) for v in series.values())
    return Line(f"SGLD loss traces at step {calibration['cells'][0]['steps'][0]['step']}", list(range(n)), series,
                xlabel="SGLD step", ylabel="mean sampled loss")
