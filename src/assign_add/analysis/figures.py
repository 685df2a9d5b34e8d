"""Figures from a saved ``analysis.json`` (never from live state): PNG + plotly fragments."""

from __future__ import annotations

from pathlib import Path
from typing import Callable

import numpy as np

from assign_add.analysis import criteria, spike
from assign_add.charts import Bars, Chart, Heat, Line, render

CURVE_SETS = ("0var_train", "0var_heldout", "1var_train", "1var_heldout", "2var_heldout",
              "1var_forbidden", "2var_forbidden1", "2var_forbidden2", "1var_b_right")


SPIKE_WINDOW = 1500  # steps either side of the binding step in the aligned figure


def phase_markers(analysis: dict) -> dict[str, float]:
    phases = analysis.get("dynamics", {}).get("phases", {})
    names = {"addition": "addition", "binding": "binding", "refinement": "refinement"}
    return {label: phases[key] for key, label in names.items() if phases.get(key) is not None}


def _by_step(analysis: dict, name: str, keys: list[str], title: str, ylabel: str) -> Line:
    by = analysis[name]["by_step"]
    steps = sorted(int(s) for s in by)
    present = [k for k in keys if all(k in by[str(s)] for s in steps)]  # older analyses lack newer measures
    series = {k: [by[str(s)][k] for s in steps] for k in present}
    return Line(title, steps, series, ylabel=ylabel, markers=phase_markers(analysis))


def trajectory_charts(t: dict, markers: dict[str, float]) -> dict[str, Chart]:
    """Essential dynamics: the top components over steps, and the path in the PC1-PC2 plane."""
    pcs = {f"PC{i + 1} ({r:.0%})": p for i, (r, p) in enumerate(zip(t["explained"], t["projections"]))}
    out: dict[str, Chart] = {"trajectory": Line(
        f"Essential dynamics: answer logits on {t['sequences']:,} curated sequences, top components", t["steps"], pcs,
        ylabel="coordinate", markers=markers)}
    if t.get("speed"):
        out["trajectory_speed"] = Line("Essential dynamics: logit distance per 100 steps between checkpoints (compare "
                                       "intervals of equal spacing: training noise makes short ones look fast)",
                                       t["speed_steps"], {"speed": t["speed"]}, ylabel="distance per 100 steps",
                                       markers=markers)
    if len(t["projections"]) >= 2:
        out["trajectory_plane"] = Line("Essential dynamics: the path in the PC1–PC2 plane (from the first checkpoint)",
                                       t["projections"][0], {"PC2": t["projections"][1]}, xlabel="PC1", ylabel="PC2")
    return out


def dynamics_charts(analysis: dict, markers: dict[str, float]) -> dict[str, Chart]:
    d = analysis["dynamics"]
    out: dict[str, Chart] = {}
    series = {k: d["acc"][k] for k in CURVE_SETS if k in d["acc"]}
    out["accuracy"] = Line("Accuracy on the curated sets", d["steps"], series, ylabel="accuracy",
                           markers=markers, ylim=(0, 1.02))
    per_var = {k: v for k, v in d["acc"].items() if k.startswith("1var_") and k.endswith(("_left", "_right"))}
    if per_var:
        out["refinement"] = Line("Restricted variables in their forbidden positions", d["steps"], per_var,
                                 ylabel="accuracy", markers=markers, ylim=(0, 1.02))
    return out


def attention_charts(analysis: dict, markers: dict[str, float]) -> dict[str, Chart]:
    out: dict[str, Chart] = {"attention": _by_step(
        analysis, "attention", ["prev_token", "eq_to_left", "eq_to_right", "routing_acc", "routing_mass",
                                   "summand_routing"],
        "Attention: layer-1 previous-token, layer-1 = → each operand, layer-2 routing (bound values; summands)",
        "score")}
    ex = analysis["attention"].get("example")
    if ex:
        for layer, pattern in enumerate(ex["patterns"]):
            out[f"pattern_layer{layer + 1}"] = Heat(f"Layer-{layer + 1} attention (step {ex['step']})", pattern,
                                                    ex["tokens"], ex["tokens"], xlabel="key", ylabel="query")
    return out


def restricted_routing_charts(analysis: dict, markers: dict[str, float]) -> dict[str, Chart]:
    by = {s: row for s, row in analysis["restricted_routing"]["by_step"].items() if row}  # the grid's checkpoints
    names = sorted({k for row in by.values() for k in row})
    if not names:
        return {}
    steps = sorted(int(s) for s in by)
    return {"restricted_routing": Line("Layer-2 routing onto both summands, restricted variables at their forbidden "
                                       "side (every 1,000 steps)", steps,
                                       {k: [by[str(s)].get(k) for s in steps] for k in names},
                                       ylabel="share of sequences", markers=phase_markers(analysis))}


def spike_charts(analysis: dict, markers: dict[str, float]) -> dict[str, Chart]:
    if not analysis.get("spike"):
        return {}
    binding = analysis["spike"]["binding"]
    x, series = spike.aligned_series(analysis, binding)
    keep = [i for i, v in enumerate(x) if abs(v) <= SPIKE_WINDOW]
    return {"spike": Line(f"Progress measures around the binding step ({binding:,} = 0), each scaled to its range",
                          [x[i] for i in keep], {k: [v[i] for i in keep] for k, v in series.items()},
                          xlabel="step − binding step", ylabel="fraction of range", markers={"binding": 0.0})}


def weights_charts(analysis: dict, markers: dict[str, float]) -> dict[str, Chart]:
    out: dict[str, Chart] = {"weights": _by_step(analysis, "weights", ["ov_mlp_addition_acc", "pos_prev_token",
                                                                        "qk2_identity"],
                                                 "Weight-only progress measures", "score")}
    fq = analysis["weights"].get("final_qk2")
    if fq:
        out["qk2"] = Heat(f"QK₂ over variables through OV₁ (step {fq['step']})", fq["matrix"], fq["variables"],
                          fq["variables"], xlabel="key variable", ylabel="query variable", symmetric=True)
    return out


def probes_charts(analysis: dict, markers: dict[str, float]) -> dict[str, Chart]:
    return {"probes": _by_step(analysis, "probes", ["operand_n", "operand_m", "bound_variable"],
                               "Linear probes (held-out accuracy)", "accuracy")}


def representation_charts(analysis: dict, markers: dict[str, float]) -> dict[str, Chart]:
    out: dict[str, Chart] = {"cosine_by_step": _by_step(
        analysis, "representation", ["matched_mean", "shuffled_mean"],
        "Cosine: variable vs constant form before the layer-2 MLP", "cosine")}
    fin = analysis["representation"].get("final")
    if fin:
        centres = [f"{(a + b) / 2:.2f}" for a, b in zip(fin["bins"][:-1], fin["bins"][1:])]
        out["cosine_hist"] = Bars(f"Cosine distribution (step {fin['step']})", centres,
                                  {"same sum": fin["matched_hist"], "shuffled": fin["shuffled_hist"]}, ylabel="count")
    return out


def fourier_charts(analysis: dict, markers: dict[str, float]) -> dict[str, Chart]:
    f = analysis["fourier"]
    ks = [str(k) for k in range(1, len(f["spectrum"]) + 1)]
    out: dict[str, Chart] = {"fourier_spectrum": Bars(
        f"Mean fraction of MLP₂ pre-activation variance per frequency (step {f['step']})", ks,
        {"fraction of variance": f["spectrum"]}, ylabel="fraction")}
    counts = f["frequency_counts"]
    if counts:
        out["fourier_neurons"] = Bars(f"Frequency neurons (FVE > {criteria.FOURIER_NEURON_FVE:g}) per frequency",
                                      list(counts), {"neurons": list(counts.values())}, ylabel="neurons")
    for j, grid in list(f.get("example_grids", {}).items())[:1]:
        n = f["neurons"][int(j)]
        labels = [str(i) for i in range(len(grid))]
        out["fourier_neuron"] = Heat(f"Neuron {j}: k={n['frequency']}, FVE={n['fve']:.3f}", grid, labels, labels,
                                     xlabel="m", ylabel="n", symmetric=True)
    return out


def gradients_charts(analysis: dict, markers: dict[str, float]) -> dict[str, Chart]:
    by = analysis["gradients"]["by_step"]
    steps = sorted(int(s) for s in by)
    out: dict[str, Chart] = {"gradients": Line(
        "−∇QK₂ in the variable basis", steps,
        {"diag mean": [by[str(s)]["diag_mean"] for s in steps],
         "off-diag mean": [by[str(s)]["offdiag_mean"] for s in steps],
         "corr with final QK₂": [by[str(s)]["corr_with_later_qk"] for s in steps]}, markers=markers)}
    theory = analysis["gradients"].get("theory", {}).get("by_step", {})
    if theory:
        ts = sorted(int(t) for t in theory)
        mean = lambda key, t: float(np.nanmean([np.nan if r[key] is None else r[key] for r in theory[str(t)]]))  # noqa: E731
        out["gradients_theory"] = Line(
            "−∇QK₂ under the theory's preconditions (1-var sequences whose = carries the variable; mean of 3 samples)",
            ts, {"diag mean": [mean("diag_mean", t) for t in ts], "off-diag mean": [mean("offdiag_mean", t) for t in ts],
                 "corr with final QK₂": [mean("corr_with_later_qk", t) for t in ts],
                 "rows with diagonal max": [mean("diag_argmax", t) for t in ts]},
            markers={k: v for k, v in markers.items() if k == "binding"})
    if steps:
        last = by[str(steps[-1])]
        labels = [str(i) for i in range(len(last["matrix"]))]
        out["gradient_matrix"] = Heat(f"−∇QK₂ over variables (step {steps[-1]})", last["matrix"], labels, labels,
                                      symmetric=True)
    return out


def causal_charts(analysis: dict, markers: dict[str, float]) -> dict[str, Chart]:
    c = analysis["causal"]
    names = list(c["baseline"])
    series = {"baseline": [c["baseline"][n] for n in names]}
    series.update({k: [v[n] for n in names] for k, v in c["ablations"].items()})
    out: dict[str, Chart] = {"ablations": Bars(f"Head ablations (step {c['step']})", names, series, ylabel="accuracy")}
    if c["patching"]:
        pn = list(c["patching"])
        out["patching"] = Bars("Patching resid_mid (final position) from constant into variable form", pn,
                               {k: [c["patching"][n][k] for n in pn] for k in ("variable", "constant", "patched")},
                               ylabel="accuracy")
    return out


def trajectory_section_charts(analysis: dict, markers: dict[str, float]) -> dict[str, Chart]:
    return trajectory_charts(analysis["trajectory"], markers) if analysis.get("trajectory") else {}


ChartsFn = Callable[[dict, dict[str, float]], dict[str, Chart]]


def charts(analysis: dict) -> dict[str, Chart]:
    """Every figure of a saved analysis: each analysis in the registry draws its own (``Analysis.charts``),
    in registry order, the spike figure after the attention ones."""
    from assign_add.analysis.registry import REGISTRY

    markers = phase_markers(analysis)
    out: dict[str, Chart] = {}
    for name, entry in REGISTRY.items():
        if name in analysis and entry.charts is not None:
            out.update(entry.charts(analysis, markers))
        if name == "attention":
            out.update(spike_charts(analysis, markers))
    return out


def write_figures(analysis: dict, directory: Path) -> list[Path]:
    written: list[Path] = []
    for name, chart in charts(analysis).items():
        written += render(chart, Path(directory), name)
    return written
