"""The analyses, by name: each a function of the saved run only.

An analysis reads the run's checkpoints, ``data/partitions.json``, ``data/evalsets.npz``, its
metrics and ``analysis_inputs.npz`` (the sampled batches, drawn once and saved so a re-analysis is
exact).  It has up to two parts, run by :mod:`assign_add.analysis.suite` in this order:

- ``each(view, ctx)``: one checkpoint's numbers (``by_step``); ``view`` holds the probe batch's
  activations from one forward pass shared by every per-checkpoint analysis;
- ``finish(ctx, section)``: whole-run numbers (the final model, the early checkpoints), added to
  the analysis's section.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Callable

import numpy as np
import torch

from assign_add.analysis import (
    attention,
    causal,
    circuits,
    criteria,
    dynamics,
    figures,
    fourier,
    gradients,
    probes,
    representation,
    spike,
    trajectory,
    weights,
)
from assign_add.analysis.positions import constant_form
from assign_add.config import RunConfig
from assign_add.model.hooked import AssignAddTransformer
from transformer_lens import ActivationCache
from assign_add.run import RunDir
from assign_add.task.evalsets import live, load_eval_sets, save_eval_sets
from assign_add.task.generator import Batch, Sampler
from assign_add.task.vocab import Vocab
from assign_add.train.checkpoint_eval import evaluate_checkpoints

PROBE_SEQUENCES = 1000  # per query form, for the per-checkpoint data measures
GRADIENT_CHECKPOINTS = 8  # checkpoints of the full-mixture gradient figure
MIXTURE_BATCH = 2048  # sequences of the full-mixture gradient figure
# Sequences per curated set for the ablations and patching of the final model (the first of each
# pool): the standard error of an accuracy is at most 1.6 points at 1,000, and the effects measured
# are tens of points (ablating the layer-1 head takes 1-var held-out from 0.99 to 0.17).  Half the
# pools' 2,000 halves the causal analysis, the largest single part of a run's analysis.
CAUSAL_SEQUENCES = 1000
INPUTS_FILE = "analysis_inputs.npz"


def probe_batch(sets: dict[str, Batch], n: int = PROBE_SEQUENCES) -> Batch:
    """The per-checkpoint measures' sequences: the first ``n`` of the 1-var and 2-var training pools."""
    parts = [sets[k].take(slice(0, n)) for k in ("1var_train", "2var_train") if k in sets]
    return Batch.concat(parts)


def pools(sets: dict[str, Batch]) -> dict[str, Batch]:
    """The curated pools (the exhaustive 2-var union is evaluated only at the final step)."""
    return live(sets)


def sampled_inputs(run: RunDir, cfg: RunConfig, vocab: Vocab, write: bool = True) -> dict[str, Batch]:
    """The gradient analysis's sequences: read from ``analysis_inputs.npz``, drawn (from fixed seeds)
    and saved the first time (``write``), or drawn and kept in memory (not ``write``)."""
    path = run.root / INPUTS_FILE
    if path.is_file():
        return load_eval_sets(path)
    theory = gradients.one_var_samples(cfg.task, run.partitions(), vocab)
    drawn = {f"theory_{i}": b for i, b in enumerate(theory)}
    drawn["mixture"] = Sampler(cfg.task, seed=gradients.THEORY_SEED).batch(0, MIXTURE_BATCH)
    if not write:
        return drawn
    save_eval_sets(drawn, path)
    return load_eval_sets(path)


@dataclass
class Context:
    """What every analysis may read: the saved run and what is derived from it once."""

    run: RunDir
    cfg: RunConfig
    vocab: Vocab
    steps: list[int]
    sets: dict[str, Batch]
    probe: Batch
    records: list[dict]
    records_source: str
    phases: dynamics.Phases
    curves: dynamics.Curves
    write: bool = True  # False: a read-only measurement (nothing cached into the run)
    _final_model: AssignAddTransformer | None = field(default=None, repr=False)
    _final_grids: dict[str, np.ndarray] | None = field(default=None, repr=False)

    @property
    def final(self) -> int:
        return self.steps[-1]

    @property
    def final_model(self) -> AssignAddTransformer:
        if self._final_model is None:
            self._final_model = self.run.load_model(self.final)
        return self._final_model


def final_grids(ctx: Context) -> dict[str, np.ndarray]:
    """The final model's MLP₂ pre-activations and the residual before MLP₂ over the N x N grid of a 0-var
    template (the first four 0-var training sequences), from one forward pass each, shared by the Fourier
    and the causal analyses: {"pre": …, "resid": …}."""
    if ctx._final_grids is None:
        model = ctx.final_model
        pre, resid = fourier.preactivation_name(model), circuits.before_mlp2(model)
        grids = fourier.final_position_grids(model, ctx.vocab, ctx.sets["0var_train"], [pre, resid], stop_at=pre)
        ctx._final_grids = {"pre": grids[pre], "resid": grids[resid]}
    return ctx._final_grids


@dataclass
class CheckpointView:
    """One checkpoint and the probe batch's activations from one forward pass (and one of its constant form)."""

    step: int
    model: AssignAddTransformer
    cache: ActivationCache  # from cache_until: the probe batch up to the last layer's resid_mid
    const_resid: np.ndarray  # [B, d_model] final position before the last MLP, constant form

    @property
    def first(self) -> np.ndarray:  # [B, q, k] layer-1 pattern, head-averaged
        return self.cache["blocks.0.attn.hook_pattern"].mean(dim=1).numpy()

    @property
    def last(self) -> np.ndarray:  # [B, q, k] last layer's pattern, head-averaged
        return self.cache[f"blocks.{self.model.cfg.n_layers - 1}.attn.hook_pattern"].mean(dim=1).numpy()

    @property
    def var_resid(self) -> np.ndarray:  # [B, d_model]
        return self.cache[representation.before_mlp(self.model)][:, -1].numpy()


@torch.no_grad()
def checkpoint_view(step: int, model: AssignAddTransformer, ctx: Context) -> CheckpointView:
    layers = model.cfg.n_layers
    names = probes.probe_hooks(layers) | {f"blocks.{i}.attn.hook_pattern" for i in (0, layers - 1)}
    # every measure reads activations up to the last layer's resid_mid: its MLP is never run here
    cache = model.cache_until(torch.as_tensor(ctx.probe.tokens), names, stop_at=representation.before_mlp(model))
    const = representation.resid_before_mlp(model, constant_form(ctx.probe, ctx.vocab))
    return CheckpointView(step, model, cache, const)


# ---- per-checkpoint parts -------------------------------------------------------------------

def _attention_each(v: CheckpointView, ctx: Context) -> dict:
    return attention.scores_from_patterns(v.first, v.last, ctx.probe, ctx.vocab).to_json()


RESTRICTED_ROUTING_SEQUENCES = 300  # per restricted set and checkpoint: a share's standard error ≤ 2.9 points


def restricted_sets(sets: dict[str, Batch]) -> dict[str, Batch]:
    """The restricted (variable, side) sets, e.g. ``1var_b_right``: one variable at one side it never
    takes in training."""
    return {k: b.take(slice(0, RESTRICTED_ROUTING_SEQUENCES)) for k, b in sets.items()
            if re.match(r"^1var_[a-z]+_(left|right)$", k)}


def _restricted_routing_each(v: CheckpointView, ctx: Context) -> dict:
    """On the common 1,000-step grid only (the grid C3b reads, as C2b): {} at the checkpoints between."""
    if not len(spike.on_grid([v.step], [0.0])[0]):
        return {}
    return {name: attention.summand_routing(v.model, batch, ctx.vocab) for name, batch in restricted_sets(ctx.sets).items()}


def _weights_each(v: CheckpointView, ctx: Context) -> dict:
    return weights.weight_measures(v.model, ctx.vocab).to_json()


def _probes_each(v: CheckpointView, ctx: Context) -> dict:
    return probes.probes_from_activations(v.cache, ctx.probe, ctx.vocab, v.model.cfg.n_layers).to_json()


def _representation_each(v: CheckpointView, ctx: Context) -> dict:
    res = representation.compare_forms(v.var_resid, v.const_resid, ctx.probe)
    return {"matched_mean": res.matched_mean, "shuffled_mean": res.shuffled_mean}


# ---- whole-run parts ------------------------------------------------------------------------

def _dynamics_finish(ctx: Context, section: dict) -> None:
    section.update(source=ctx.records_source, steps=ctx.curves.steps, acc=ctx.curves.acc, phases=ctx.phases.to_json())
    exhaustive = {k: ctx.sets[k] for k in ("0var_heldout_all", "2var_union") if k in ctx.sets}
    acc = evaluate_checkpoints(ctx.run, [ctx.final], list(exhaustive), lock=False,
                               write=ctx.write)[0]["acc"] if exhaustive else {}
    section["final_exhaustive"] = {"step": ctx.final, **acc}


def _trajectory_finish(ctx: Context, section: dict) -> None:
    """Essential dynamics: PCA of every checkpoint's answer logits on the curated pools."""
    batch = Batch.concat([b.take(slice(0, trajectory.SEQUENCES_PER_SET)) for b in pools(ctx.sets).values()])
    models = (ctx.run.load_model(s) for s in ctx.steps)
    section.update(trajectory.trajectory(models, batch, ctx.steps).to_json())


def _weights_finish(ctx: Context, section: dict) -> None:
    qk = weights.variable_qk_matrix(ctx.final_model, ctx.vocab)
    section["final_qk2"] = {"step": ctx.final, "matrix": qk.tolist(), "variables": list(ctx.vocab.variables)}


def _attention_finish(ctx: Context, section: dict) -> None:
    example = ctx.sets["2var_train"].tokens[0] if "2var_train" in ctx.sets else ctx.probe.tokens[0]
    pats = attention.example_patterns(ctx.final_model, example)
    section["example"] = {"step": ctx.final, "tokens": [ctx.vocab.token_str(t) for t in example],
                          "patterns": [p.tolist() for p in pats]}


def _representation_finish(ctx: Context, section: dict) -> None:
    held = [ctx.sets[k].take(slice(0, PROBE_SEQUENCES)) for k in ("1var_heldout", "2var_heldout") if k in ctx.sets]
    if held:  # the same comparison on sums never trained in any form
        section["final_heldout"] = representation.shared_representation(
            ctx.final_model, Batch.concat(held), ctx.vocab).to_json()
    res = representation.shared_representation(ctx.final_model, ctx.probe, ctx.vocab)
    section["final"] = {**res.to_json(), "step": ctx.final}


def _fourier_finish(ctx: Context, section: dict) -> None:
    forms = {"0var": ctx.sets["0var_train"]}
    for name in ("1var_train", "2var_train"):
        if name in ctx.sets:
            forms[name[:4]] = ctx.sets[name]
    res, raw = fourier.fourier_analysis(ctx.final_model, ctx.vocab, forms, {"0var": final_grids(ctx)["pre"]})
    best = np.argsort(-raw["fit"].fve)[:2]
    section.update(step=ctx.final, **res.to_json())
    # the null: the same measure on the first checkpoint (the initial weights)
    first = ctx.steps[0]
    null = fourier.fit_neurons(fourier.preactivation_grid(ctx.run.load_model(first), ctx.vocab, forms["0var"]))
    strong = null.fve > criteria.FOURIER_NEURON_FVE
    section["initial"] = {"step": first, "n_frequency_neurons": int(strong.sum()), "n_neurons": int(len(null.fve)),
                          "mean_fve": float(null.fve.mean())}
    section["example_grids"] = {str(int(j)): raw["grid"][:, :, j].round(4).tolist() for j in best}


def _causal_finish(ctx: Context, section: dict) -> None:
    sets = {k: b.take(slice(0, CAUSAL_SEQUENCES)) for k, b in pools(ctx.sets).items()}
    res = causal.causal_checks(ctx.final_model, sets, ctx.vocab)
    section.update(step=ctx.final, sequences_per_set=CAUSAL_SEQUENCES, **res.to_json())
    if "0var_heldout" in sets:
        section["circuits"] = _circuits(ctx, sets)


def circuit_checkpoints(steps: list[int], phases: dynamics.Phases) -> dict[str, int]:
    """The checkpoints the causal claims read: the first at or after the addition step, the last before
    binding (the spike's end, or reaching the binding level if earlier), and the last."""
    out: dict[str, int] = {}
    if phases.addition is not None:
        after = [s for s in steps if s >= phases.addition]
        if after:
            out["addition"] = after[0]
    marks = [s for s in (phases.binding, phases.binding_reached) if s is not None]
    if marks:
        before = [s for s in steps if s < min(marks)]
        if before:
            out["before_binding"] = before[-1]
    out["end"] = steps[-1]
    return out


def _circuits(ctx: Context, sets: dict[str, Batch]) -> dict:
    """C12, C13 and C1b (:mod:`assign_add.analysis.circuits`): the final model's ablations and
    interchanges, and the binding ablations on 0-var held-out at the addition step and before binding."""
    model = ctx.final_model
    grids = final_grids(ctx)
    keys, _, strong = fourier.key_frequencies(fourier.fit_neurons(grids["pre"]))
    at = circuit_checkpoints(ctx.steps, ctx.phases)
    out: dict = {"checkpoints": at, "key_frequencies": keys, "modulus": ctx.vocab.modulus,
                 "composition": circuits.composition(model, sets, ctx.vocab, np.nonzero(strong)[0], ctx.final).to_json()}
    adder = circuits.adder(model, sets, ctx.vocab, keys, ctx.final, grids["resid"])
    independence = {}
    for label, step in at.items():
        m = model if step == ctx.final else ctx.run.load_model(step)
        independence[label] = circuits.independence(m, sets["0var_heldout"], step).to_json()
        if label == "before_binding":
            adder.before_binding = circuits.adder_before_binding(m, sets, ctx.vocab, step)
    out["adder"] = adder.to_json()
    out["independence"] = independence
    return out


def _gradients_finish(ctx: Context, section: dict) -> None:
    """−∇QK₂ before binding: under the theory's preconditions (every pre-binding checkpoint, three
    disjoint samples), and on the full training mixture at up to GRADIENT_CHECKPOINTS checkpoints."""
    binding = ctx.phases.binding
    if binding is None:  # not bound: C11 is not judged, so only the figure's GRADIENT_CHECKPOINTS over the run
        early = sorted({ctx.steps[int(round(x))] for x in np.linspace(0, len(ctx.steps) - 1,
                                                                        min(GRADIENT_CHECKPOINTS, len(ctx.steps)))})
    else:
        early = [s for s in ctx.steps if s < binding] or ctx.steps[:1]
    reference = weights.variable_qk_matrix(ctx.final_model, ctx.vocab)
    drawn = sampled_inputs(ctx.run, ctx.cfg, ctx.vocab, ctx.write)
    samples = [drawn[k] for k in sorted(drawn) if k.startswith("theory_")]
    chosen = {early[int(round(x))] for x in np.linspace(0, len(early) - 1, min(GRADIENT_CHECKPOINTS, len(early)))}
    theory: dict = {"preconditions": {}, "by_step": {}}
    full: dict = {}
    for s in early:  # each checkpoint loaded once for both measurements
        model = ctx.run.load_model(s)
        pre, masks = gradients.preconditions(model, samples, ctx.vocab)
        theory["preconditions"][str(s)] = pre.to_json()
        if pre.carried_min >= gradients.MIN_SEQUENCES:
            theory["by_step"][str(s)] = [r.to_json() for r in gradients.theory_gradients(model, samples, masks, ctx.vocab, reference)]
        if s in chosen or pre.hold:  # the full mixture in the theory's window too, in the same basis
            full[str(s)] = gradients.gradient_analysis(model, drawn["mixture"], ctx.vocab, reference).to_json()
    theory["summary"] = gradients.summarize_theory(theory)
    window = (theory["summary"]["window"] or {}).get("steps", [])
    if window:
        theory["summary"]["full_mixture_window"] = gradients.window_stats({s: [full[s]] for s in map(str, window)},
                                                                          window)
    section.update(reference_step=ctx.final, binding=binding, by_step=full, theory=theory)


@dataclass(frozen=True)
class Analysis:
    name: str
    each: Callable[[CheckpointView, Context], dict] | None = None
    finish: Callable[[Context, dict], None] | None = None
    charts: figures.ChartsFn | None = None  # its figures, from the saved analysis.json


REGISTRY: dict[str, Analysis] = {a.name: a for a in (
    Analysis("dynamics", finish=_dynamics_finish, charts=figures.dynamics_charts),
    Analysis("trajectory", finish=_trajectory_finish, charts=figures.trajectory_section_charts),
    Analysis("attention", _attention_each, _attention_finish, figures.attention_charts),
    Analysis("restricted_routing", _restricted_routing_each, charts=figures.restricted_routing_charts),
    Analysis("weights", _weights_each, _weights_finish, figures.weights_charts),
    Analysis("probes", _probes_each, charts=figures.probes_charts),
    Analysis("representation", _representation_each, _representation_finish, figures.representation_charts),
    Analysis("fourier", finish=_fourier_finish, charts=figures.fourier_charts),
    Analysis("gradients", finish=_gradients_finish, charts=figures.gradients_charts),
    Analysis("causal", finish=_causal_finish, charts=figures.causal_charts),
)}
