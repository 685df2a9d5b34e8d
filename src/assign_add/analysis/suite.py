"""Run every analysis on a run directory: ``RUN/analysis.json`` and ``RUN/figures/``.

Per checkpoint: accuracy on the curated pools (read from ``metrics.jsonl`` for a training run,
computed from the checkpoints for an imported one), attention measures, weight-only measures,
probes and the matched/shuffled cosine.  On the final checkpoint: the full cosine distribution,
the Fourier analysis, causal checks and the exhaustive sets.  On early checkpoints (up to the
binding step): the gradient analysis, against the final QK₂ pattern.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Callable

import numpy as np

from assign_add.analysis import (
    attention,
    causal,
    dynamics,
    fourier,
    gradients,
    probes,
    representation,
    spike,
    weights,
)
from assign_add.config import ConfigError
from assign_add.io import atomic_write_json
from assign_add.lock import run_lock
from assign_add.run import RunDir, RunError
from assign_add.task.generator import Batch, Sampler
from assign_add.task.vocab import Vocab
from assign_add.train.checkpoint_eval import evaluate_checkpoints

ANALYSES = ("dynamics", "attention", "weights", "probes", "representation", "fourier", "gradients", "causal")
PER_CHECKPOINT = ("attention", "weights", "probes", "representation")
PROBE_SEQUENCES = 1000  # per query form, for the per-checkpoint data measures
GRADIENT_CHECKPOINTS = 8

Progress = Callable[[str, int, int], None]


def probe_batch(sets: dict[str, Batch], n: int = PROBE_SEQUENCES) -> Batch:
    """The per-checkpoint measures' sequences: the first ``n`` of the 1-var and 2-var training pools."""
    parts = [sets[k].take(slice(0, n)) for k in ("1var_train", "2var_train") if k in sets]
    return Batch.concat(parts)


def _pools(sets: dict[str, Batch]) -> dict[str, Batch]:
    return {k: v for k, v in sets.items() if k != "2var_union"}


def accuracy_records(run: RunDir, steps: list[int]) -> tuple[list[dict], str]:
    """Per-step accuracies: training metrics when present, else computed from checkpoints."""
    metrics = run.metrics()
    if metrics:
        return metrics, "metrics.jsonl"
    names = list(_pools(run.eval_sets()))
    return evaluate_checkpoints(run, steps, names, lock=False), "checkpoints"


def analyze(
    run: RunDir, only: list[str] | None = None, steps: list[int] | None = None, progress: Progress | None = None
) -> dict:
    """Every analysis in ``only`` (default all); holds the run's lock while it reads and writes."""
    with run_lock(run.root):
        return _analyze(run, only, steps, progress)


def _analyze(run: RunDir, only: list[str] | None, steps: list[int] | None, progress: Progress | None) -> dict:
    only = list(ANALYSES) if not only else only
    unknown = [a for a in only if a not in ANALYSES]
    if unknown:
        raise ConfigError("--only", f"unknown analysis {', '.join(unknown)}; choose from {', '.join(ANALYSES)}")
    cfg = run.config()
    vocab = Vocab.from_task(cfg.task)
    available = run.checkpoint_steps()
    if not available:
        raise RunError(f"{run.root} has no checkpoints to analyse")
    steps = available if steps is None else sorted(steps)
    missing = [s for s in steps if s not in available]
    if missing:
        raise RunError(f"{run.root} has no checkpoint at step(s) {', '.join(map(str, missing))}")
    final = steps[-1]
    sets = run.eval_sets()
    t0 = time.perf_counter()
    out: dict = {"run": str(run.root), "source": run.status().get("source"), "steps": steps, "final_step": final}
    tick = progress or (lambda *_: None)

    records, origin = accuracy_records(run, steps)
    curves = dynamics.curves_from_records(records)
    phases = dynamics.detect_phases(curves)
    if "dynamics" in only:
        out["dynamics"] = {"source": origin, "steps": curves.steps, "acc": curves.acc, "phases": phases.to_json()}

    var_batch = probe_batch(sets)
    per_step = [a for a in PER_CHECKPOINT if a in only]
    for a in per_step:
        out[a] = {"by_step": {}}
    for i, step in enumerate(steps if per_step else []):
        model = run.load_model(step)
        if "attention" in only:
            out["attention"]["by_step"][str(step)] = attention.attention_scores(model, var_batch, vocab).to_json()
        if "weights" in only:
            out["weights"]["by_step"][str(step)] = weights.weight_measures(model, vocab).to_json()
        if "probes" in only:
            out["probes"]["by_step"][str(step)] = probes.probe_checkpoint(model, var_batch, vocab).to_json()
        if "representation" in only:
            res = representation.shared_representation(model, var_batch, vocab)
            out["representation"]["by_step"][str(step)] = {"matched_mean": res.matched_mean, "shuffled_mean": res.shuffled_mean}
        tick("checkpoints", i + 1, len(steps))

    if "dynamics" in only and per_step:
        table = spike.spike_table(out)
        out["spike"] = table.to_json() if table is not None else None

    final_model = run.load_model(final)
    if "weights" in only:
        qk = weights.variable_qk_matrix(final_model, vocab)
        out["weights"]["final_qk2"] = {"step": final, "matrix": qk.tolist(), "variables": list(vocab.variables)}
    if "attention" in only:
        example = sets["2var_train"].tokens[0] if "2var_train" in sets else var_batch.tokens[0]
        pats = attention.example_patterns(final_model, example)
        out["attention"]["example"] = {
            "step": final, "tokens": [vocab.token_str(t) for t in example], "patterns": [p.tolist() for p in pats],
        }
    if "representation" in only:
        out["representation"]["final"] = representation.shared_representation(final_model, var_batch, vocab).to_json()
        out["representation"]["final"]["step"] = final
    if "fourier" in only:
        forms = {"0var": sets["0var_train"]}
        for name in ("1var_train", "2var_train"):
            if name in sets:
                forms[name[:4]] = sets[name]
        res, raw = fourier.fourier_analysis(final_model, vocab, forms)
        out["fourier"] = {"step": final, **res.to_json()}
        best = np.argsort(-raw["fit"].fve)[:2]
        out["fourier"]["example_grids"] = {str(int(j)): raw["grid"][:, :, j].round(4).tolist() for j in best}
        tick("fourier", 1, 1)
    if "gradients" in only:
        out["gradients"] = _gradients(run, steps, phases.binding, final_model, vocab)
        tick("gradients", 1, 1)
    if "causal" in only:
        res = causal.causal_checks(final_model, _pools(sets), vocab)
        out["causal"] = {"step": final, **res.to_json()}
        tick("causal", 1, 1)
    if "dynamics" in only:
        final_sets = {k: sets[k] for k in ("0var_heldout_all", "2var_union") if k in sets}
        final_acc = evaluate_checkpoints(run, [final], list(final_sets), lock=False)[0]["acc"] if final_sets else {}
        out["dynamics"]["final_exhaustive"] = {"step": final, **final_acc}
    out["seconds"] = round(time.perf_counter() - t0, 2)
    atomic_write_json(run.root / "analysis.json", _clean(out))
    from assign_add.analysis.figures import write_figures

    write_figures(out, run.root / "figures")
    return out


def _gradients(run: RunDir, steps: list[int], binding: int | None, final_model, vocab: Vocab) -> dict:
    """−∇QK₂ before binding: under the theory's preconditions (every pre-binding checkpoint, three
    disjoint samples), and on the full training mixture at up to GRADIENT_CHECKPOINTS checkpoints."""
    cfg = run.config()
    until = binding if binding is not None else steps[-1]
    early = [s for s in steps if s < until] or steps[:1]
    later = weights.variable_qk_matrix(final_model, vocab)
    samples = gradients.one_var_samples(cfg.task, run.partitions(), vocab)
    chosen = {early[int(round(x))] for x in np.linspace(0, len(early) - 1, min(GRADIENT_CHECKPOINTS, len(early)))}
    batch = Sampler(cfg.task, seed=gradients.THEORY_SEED).batch(0, 2048)
    theory: dict = {"preconditions": {}, "by_step": {}}
    full: dict = {}
    for s in early:  # each checkpoint loaded once for both measurements
        model = run.load_model(s)
        pre, masks = gradients.preconditions(model, samples, vocab)
        theory["preconditions"][str(s)] = pre.to_json()
        if pre.carried_min >= gradients.MIN_SEQUENCES:
            res = gradients.theory_gradients(model, samples, masks, vocab, later)
            theory["by_step"][str(s)] = [r.to_json() for r in res]
        if s in chosen:
            full[str(s)] = gradients.gradient_analysis(model, batch, vocab, later).to_json()
    theory["summary"] = gradients.summarize_theory(theory)
    return {"reference_step": steps[-1], "binding": binding, "by_step": full, "theory": theory}


def _clean(obj):
    """JSON-safe: NaN -> None, numpy scalars -> Python."""
    if isinstance(obj, dict):
        return {str(k): _clean(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_clean(v) for v in obj]
    if isinstance(obj, (np.floating, float)):
        return None if not np.isfinite(obj) else float(obj)
    if isinstance(obj, np.integer):
        return int(obj)
    return obj


def load_analysis(run: RunDir) -> dict:
    import json

    path = Path(run.root) / "analysis.json"
    if not path.is_file():
        raise RunError(f"{run.root} has no analysis.json; run `assign-add analyze {run.root}` first")
    return json.loads(path.read_text())
