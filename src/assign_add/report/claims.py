"""Claims C1-C11 of the paper as measured quantities with written criteria.

Each claim is a function from one source's ``analysis.json`` (a retrained run, or the imported
released checkpoints) to a :class:`ClaimResult`: the measured value, a readable detail, and a
verdict computed here from the claim's criterion -- never written by hand.  A claim whose inputs
are missing is "not measured", with the reason.  Every cut is stated once, with its basis, in
:mod:`assign_add.report.cuts`; each verdict says how it moves when a cut moves by ±20 %.
"""

from __future__ import annotations

import math

import re
from dataclasses import dataclass
from typing import Callable, Mapping

import numpy as np

from assign_add.analysis import criteria as AC
from assign_add.config import PAPER_STEPS
from assign_add.analysis.dynamics import first_at, forbidden_mean
from assign_add.analysis.gradients import MIN_SEQUENCES, PREV_TOKEN_MIN
from assign_add.analysis import spike
from assign_add.report.cuts import CLAIM_CUTS, CUTS, MOVE, Cut
from assign_add.report.cuts import VALUES as CUT_VALUES
from assign_add.report.sweep_claims import sweep_claim
from assign_add.report.verdicts import (  # noqa: F401 (the vocabulary is re-exported for callers of claims)
    AGGREGATE_RULE,
    AT_EDGE,
    FAILS,
    HOLDS,
    MIXED,
    NOT_BOUND,
    NOT_CONVERGED,
    NOT_FINISHED,
    NOT_LED,
    NOT_MEASURED,
    NOT_RESOLVED,
    Aggregate,
    ClaimResult,
    aggregate,
    is_censored,
)

# Claims about the binding circuit or what it feeds: a run in which it has not formed has nothing to judge.
NEEDS_BINDING = ("C2a", "C2b", "C2c", "C3", "C3b", "C4", "C5b", "C5c", "C8", "C9", "C10", "C11", "C12", "C13")

Cuts = Mapping[str, float]


@dataclass
class Claim:
    id: str
    statement: str
    paper_value: str
    criterion: str
    figures: tuple[str, ...] = ()  # the figures of a run (analysis/figures.py names) that show it
    measure: Callable[[dict, Mapping[str, float]], "ClaimResult"] | None = None  # analysis.json -> its result




def _missing(cid: str, what: str) -> ClaimResult:
    return ClaimResult(cid, None, "", NOT_MEASURED, f"{what} not in this analysis")


def _verdict(ok: bool) -> str:
    return HOLDS if ok else FAILS


def _acc_at(d: dict, name: str, step: int | None) -> float | None:
    if step is None or name not in d["acc"]:
        return None
    steps = d["steps"]
    i = max((j for j, s in enumerate(steps) if s <= step), default=None)
    return None if i is None else d["acc"][name][i]


def last_step(a: dict) -> int | None:
    steps = a.get("dynamics", {}).get("steps")
    return int(steps[-1]) if steps else None


def not_finished_verdict(step: int | None) -> str:
    return f"{NOT_FINISHED} {step:,}" if step is not None else f"{NOT_FINISHED} the end"


def not_bound_verdict(step: int | None) -> str:
    return f"{NOT_BOUND} {step:,}" if step is not None else f"{NOT_BOUND} the end"


def is_bound(a: dict) -> bool | None:
    """Whether the run reached the binding level; None where binding was not measured (no dynamics,
    no 1-var held-out accuracy, or fewer than two evaluations)."""
    d = a.get("dynamics", {})
    p = d.get("phases")
    if p is None or AC.BINDING_SET not in d.get("acc", {}) or len(d.get("steps", [])) < 2:
        return None
    return p.get("binding_reached") is not None


def unbound_detail(a: dict) -> str:
    """What a run that has not bound measured: the phase detector's note (peak and largest rise)."""
    notes = a.get("dynamics", {}).get("phases", {}).get("notes", [])
    return "; ".join(n for n in notes if n.startswith(NOT_BOUND)) or f"{AC.BINDING_SET} never reached {AC.BINDING_ACC:.0%}"


def binding(a: dict, k: Cuts = CUT_VALUES) -> ClaimResult:
    if is_bound(a) is None:
        return _missing("B", f"{AC.BINDING_SET} at two or more evaluations")
    d, end = a["dynamics"], last_step(a)
    p, level = d["phases"], k["BINDING_ACC"]
    curve = d["acc"].get(AC.BINDING_SET, [])
    reached = first_at(d["steps"], curve, level)
    if reached is None:
        peak = max(curve, default=float("nan"))
        detail = unbound_detail(a) if level == AC.BINDING_ACC else f"{AC.BINDING_SET} peaked at {peak:.3f} < {level:.3f}"
        return ClaimResult("B", None, detail, not_bound_verdict(end))
    spike = (f"; spike {p['binding_from']:.2f} → {p['binding_to']:.2f} ending at step {p['binding']:,}"
             if p.get("binding_from") is not None else "")
    return ClaimResult("B", float(reached), f"{AC.BINDING_SET} ≥ {level:.0%} from step {reached:,} of {end:,}{spike}",
                       HOLDS)


def c1(a: dict, k: Cuts = CUT_VALUES) -> ClaimResult:
    if "dynamics" not in a:
        return _missing("C1", "dynamics")
    d, p = a["dynamics"], a["dynamics"]["phases"]
    if p["addition"] is not None and is_bound(a) is False:  # addition without binding (yet) agrees with C1
        end = last_step(a)
        acc = _acc_at(d, "0var_heldout", end)
        if acc is None:
            return _missing("C1", "0-var held-out accuracy")
        ok = acc >= k["C1_ZERO_VAR_HELDOUT_BEFORE_BINDING"]
        return ClaimResult("C1", float(p["addition"]), f"addition at {p['addition']}, not bound by {end:,}; 0-var "
                           f"held-out {acc:.3f} at step {end:,}", _verdict(ok))
    if p["addition"] is None:  # the first phase still under way at the end: nothing to judge yet
        end = last_step(a)
        return ClaimResult("C1", None, f"0-var held-out never reached the addition level by step {end:,}",
                           not_finished_verdict(end), "the addition phase had not finished")
    if p["binding"] is None:
        return ClaimResult("C1", None, f"addition {p['addition']}, binding {p['binding']}", FAILS, "a phase was not found")
    before = d["steps"][max(d["steps"].index(p["binding"]) - 1, 0)]
    acc = _acc_at(d, "0var_heldout", before)
    if acc is None:
        return _missing("C1", "0-var held-out accuracy")
    ok = p["addition"] < p["binding"] and acc >= k["C1_ZERO_VAR_HELDOUT_BEFORE_BINDING"]
    detail = f"addition at {p['addition']}, binding spike ending at {p['binding']}; 0-var held-out {acc:.3f} at step {before}"
    return ClaimResult("C1", float(p["addition"]), detail, _verdict(ok))


def _largest_rise_step(by_step: dict, key: str) -> int | None:
    steps = sorted(int(s) for s in by_step)
    vals = [by_step[str(s)].get(key) for s in steps]
    if len(steps) < 2 or any(v is None for v in vals):
        return None
    return steps[int(np.argmax(np.diff(vals))) + 1]


def c2a(a: dict, k: Cuts = CUT_VALUES) -> ClaimResult:
    """The spike: the largest rise of 1-var held-out accuracy over a 100-step interval (the finest spacing
    every source has around its spike) is at least the cut; the rise relative to what was left to learn,
    rise / (1 − accuracy before), beside it."""
    d = a.get("dynamics", {})
    curve = d.get("acc", {}).get(AC.BINDING_SET)
    if not curve:
        return _missing("C2a", f"{AC.BINDING_SET} over evaluations")
    found = spike.largest_rise(d["steps"], curve)
    if found is None:
        return ClaimResult("C2a", None, "", NOT_MEASURED,
                           f"no two evaluations {spike.SPIKE_INTERVAL} steps apart")
    end, before, rise = found
    relative = rise / (1 - before) if before < 1 else float("nan")
    detail = (f"largest {spike.SPIKE_INTERVAL}-step rise of {AC.BINDING_SET}: {before:.2f} → {before + rise:.2f} "
              f"ending at step {end:,} (+{rise:.2f}; {relative:.0%} of what was left to learn)")
    return ClaimResult("C2a", float(rise), detail, _verdict(rise >= k["C2_MIN_RISE"]))


def _grid_changes(a: dict, measures: tuple[str, ...]) -> list[spike.GridChange] | None:
    p = a["dynamics"]["phases"]
    by = a.get("attention", {}).get("by_step", {})
    out = []
    for m in measures:
        steps = sorted(int(s) for s in by if by[s].get(m) is not None)
        if len(steps) < 2:
            return None
        out.append(spike.grid_change(m, steps, [by[str(s)][m] for s in steps], p["binding"], p.get("addition") or 0))
    return out


def _where(g: spike.GridChange) -> str:
    if g.fastest_end is None:
        return f"{g.measure}: no {spike.GRID_EVERY:,}-step interval around binding"
    return (f"{g.measure} fastest over {g.fastest_end - spike.GRID_EVERY:,}–{g.fastest_end:,} "
            f"({g.change:+.2f}; binding in the interval ending {g.binding_end:,})")


def c2b(a: dict, k: Cuts = CUT_VALUES) -> ClaimResult:
    """The routing circuit appears at the spike: the = query's layer-1 split between the operands and
    layer-2 routing onto the summands (C10's measure) each change fastest, over equal 1,000-step
    intervals from the addition step on, in the interval holding the binding step or one next to it.
    Layer-2 routing onto the bound value alone (the earlier measure) is shown beside it."""
    if "dynamics" not in a or a["dynamics"]["phases"].get("binding") is None:
        return _missing("C2b", "dynamics with a binding step")
    judged = _grid_changes(a, spike.C2_ROUTING_SUMMANDS)
    if judged is None:
        return _missing("C2b", "layer-1 split and layer-2 routing onto the summands by checkpoint")
    earlier = _grid_changes(a, ("routing_acc",))
    at = [g.at_spike for g in judged]
    detail = "; ".join(_where(g) for g in judged) + (f"; earlier measure: {_where(earlier[0])}" if earlier else "")
    missed = [g.measure for g in judged if not g.at_spike]
    return ClaimResult("C2b", sum(at) / len(at), detail, _verdict(not missed),
                       f"not at the spike: {', '.join(missed)}" if missed else "")


def c2c(a: dict, k: Cuts = CUT_VALUES) -> ClaimResult:
    """"Layer-1 attention starting to route constants to their variables": the previous-token attention of
    value tokens (mean weight) changes fastest, over equal 1,000-step intervals from the addition step
    on, in the interval holding the binding step or one next to it.  Its argmax share beside it."""
    if "dynamics" not in a or a["dynamics"]["phases"].get("binding") is None:
        return _missing("C2c", "dynamics with a binding step")
    judged = _grid_changes(a, (spike.C2_MEASURE,))
    if judged is None:
        return _missing("C2c", "layer-1 previous-token attention by checkpoint")
    argmax = _grid_changes(a, ("prev_token_argmax",))
    g = judged[0]
    detail = _where(g) + (f"; argmax share: {_where(argmax[0])}" if argmax else "")
    return ClaimResult("C2c", g.change, detail, _verdict(g.at_spike),
                       "" if g.at_spike else "the previous-token head formed away from the spike")


RESTRICTED = re.compile(r"^1var_[a-z]+_(left|right)$")  # one variable at one forbidden side: 1var_b_right


def later_jump(steps: list[int], values: list[float], binding: int, k: Cuts = CUT_VALUES) -> tuple[str, int | None]:
    """How one restricted (variable, side) curve is fixed: ("later jump", step) when it is still at
    most C3_FORBIDDEN_AT_BINDING at every evaluation from the binding step to C3_PLATEAU_STEPS after
    it (the plateau) and reaches REFINEMENT_ACC after that; otherwise why not."""
    low, end = k["C3_FORBIDDEN_AT_BINDING"], binding + k["C3_PLATEAU_STEPS"]
    window = [v for s, v in zip(steps, values) if binding <= s <= end]
    if not window or steps[-1] < end:
        return "no evaluation after the plateau", None
    if window[0] > low:
        return "rose with binding", None
    risen = next((s for s, v in zip(steps, values) if binding <= s <= end and v > low), None)
    if risen is not None:
        return "rose within the plateau", risen
    fixed = next((s for s, v in zip(steps, values) if s > end and v >= k["REFINEMENT_ACC"]), None)
    return ("later jump", fixed) if fixed is not None else ("never fixed", None)


def c3(a: dict, k: Cuts = CUT_VALUES) -> ClaimResult:
    """Per restricted (variable, side) curve: C3 holds when at least one of them is still unsolved at
    and for a plateau after the binding step, then fixed (a later phase, as `b` as right operand in
    the paper: 5 % → 99 % at 14,500–16,000, binding at 5,401)."""
    if "dynamics" not in a:
        return _missing("C3", "dynamics")
    d, p = a["dynamics"], a["dynamics"]["phases"]
    curves = {n: v for n, v in d["acc"].items() if RESTRICTED.match(n)}
    if not curves or p["binding"] is None:
        return ClaimResult("C3", None, "", NOT_MEASURED, "no restricted (variable, side) sets or no binding step")
    outcomes = {n: later_jump(d["steps"], v, p["binding"], k) for n, v in curves.items()}
    if all(what == "no evaluation after the plateau" for what, _ in outcomes.values()):
        return ClaimResult("C3", None, f"binding {p['binding']:,}, last evaluation {d['steps'][-1]:,}", NOT_MEASURED,
                           f"the run ends within {k['C3_PLATEAU_STEPS']:,.0f} steps of binding: too short to see a "
                           "later phase")
    jumps = {n: s for n, (what, s) in outcomes.items() if what == "later jump"}
    text = ", ".join(f"{n}: {what}" + (f" at {s:,}" if s is not None else "") for n, (what, s) in outcomes.items())
    mean = forbidden_mean(d["acc"])
    refinement = None if mean is None else first_at(d["steps"], mean, k["REFINEMENT_ACC"], after=p["binding"])
    detail = (f"binding {p['binding']:,}; plateau {k['C3_PLATEAU_STEPS']:,.0f} steps at ≤ "
              f"{k['C3_FORBIDDEN_AT_BINDING']:.0%}: {text}; forbidden-position mean ≥ {k['REFINEMENT_ACC']:.0%} from "
              f"{refinement if refinement is not None else 'never'}")
    if not jumps and any(what == "never fixed" for what, _ in outcomes.values()):
        # a curve still on its plateau at the end: its later phase may yet come, so not a counterexample
        return ClaimResult("C3", None, detail, not_finished_verdict(d["steps"][-1]),
                           "a restricted curve stayed unsolved after binding and was not fixed by the end "
                           "(refinement not finished)")
    reason = "" if jumps else "no restricted curve is fixed in a later phase (" + "; ".join(
        sorted({what for what, _ in outcomes.values()})) + ")"
    return ClaimResult("C3", float(max(jumps.values())) if jumps else None, detail, _verdict(bool(jumps)), reason)


def c3b(a: dict, k: Cuts = CUT_VALUES) -> ClaimResult:
    """Refinement fixes routing: for every restricted curve that C3 finds fixed in a later jump, layer-2
    routing onto the summands on that curve's own sequences changes most, over equal 1,000-step intervals
    from the binding step on (the grid every source has, as C2b), in the interval holding the jump or
    one next to it, and not in the interval holding binding; a jump in binding's own interval is not
    judged (C3B_APART_FROM_BINDING; before it, the interval holding binding counted as "next to" a jump
    after it).  Nothing to judge where C3 found no later jump."""
    if "dynamics" not in a:
        return _missing("C3b", "dynamics")
    d, p = a["dynamics"], a["dynamics"]["phases"]
    by = a.get("restricted_routing", {}).get("by_step", {})
    curves = {n: v for n, v in d["acc"].items() if RESTRICTED.match(n)}
    if not curves or p["binding"] is None:
        return ClaimResult("C3b", None, "", NOT_MEASURED, "no restricted (variable, side) sets or no binding step")
    if not by:
        return _missing("C3b", "layer-2 routing on the restricted sets by checkpoint")
    c3_result = c3(a, k)
    if is_censored(c3_result.verdict):
        return ClaimResult("C3b", None, c3_result.detail, c3_result.verdict, c3_result.reason)
    jumps = {n: s for n, (what, s) in ((n, later_jump(d["steps"], v, p["binding"], k)) for n, v in curves.items())
             if what == "later jump"}
    if not jumps:
        return ClaimResult("C3b", None, c3_result.detail, NOT_MEASURED, "no restricted curve is fixed in a later phase "
                           "(C3): no refinement whose routing could be read")
    apart = k["C3B_APART_FROM_BINDING"] >= 0.5
    changes, parts, inseparable, with_binding = {}, [], [], []
    for name, step in jumps.items():
        steps = sorted(int(s) for s in by if by[s].get(name) is not None)
        values = [by[str(s)][name] for s in steps]
        g = spike.grid_change(name, steps, values, step, p["binding"])
        binding_end = spike.grid_change(name, steps, values, p["binding"], p["binding"]).binding_end
        changes[name] = g
        where = (f"routing fastest over {g.fastest_end - spike.GRID_EVERY:,}–{g.fastest_end:,} ({g.change:+.2f})"
                 if g.fastest_end is not None else f"no {spike.GRID_EVERY:,}-step interval around it")
        parts.append(f"{name}: fixed at {step:,}, {where}")
        if apart and g.fastest_end is not None and g.binding_end == binding_end:
            inseparable.append(name)  # the jump lies in binding's own interval: the two cannot be told apart
        elif apart and g.fastest_end is not None and g.fastest_end == binding_end:
            with_binding.append(name)  # routing moved most with binding, not with the curve's jump
    unread = [n for n, g in changes.items() if g.fastest_end is None]
    if unread:  # checkpoints too sparse to read the grid around a jump: nothing measured, no counterexample
        return ClaimResult("C3b", None, "; ".join(parts), NOT_MEASURED,
                           f"no {spike.GRID_EVERY:,}-step checkpoint interval around the jump of {', '.join(unread)}")
    judged = {n: g for n, g in changes.items() if n not in inseparable}
    if not judged:
        return ClaimResult("C3b", None, "; ".join(parts), NOT_MEASURED, "every later jump lies in the "
                           f"{spike.GRID_EVERY:,}-step interval that holds binding: refinement and binding not apart")
    missed = [n for n, g in judged.items() if not g.at_spike or n in with_binding]
    share = 1 - len(missed) / len(judged)
    reason = (f"routing did not jump with the curve: {', '.join(missed)}" if missed else "")
    if with_binding:
        reason += f" (routing moved most in binding's interval: {', '.join(with_binding)})"
    if inseparable:
        reason += f"{'; ' if reason else ''}not judged, jump in binding's interval: {', '.join(inseparable)}"
    return ClaimResult("C3b", share, "; ".join(parts), _verdict(not missed), reason)


def c4(a: dict, k: Cuts = CUT_VALUES) -> ClaimResult:
    if "dynamics" not in a:
        return _missing("C4", "dynamics")
    d = a["dynamics"]
    names = [k for k in d["acc"] if "forbidden" in k or (k.startswith("1var_") and k.endswith(("_left", "_right")))]
    if not names:
        return ClaimResult("C4", None, "", NOT_MEASURED, "the task has no forbidden positions")
    finals = {n: d["acc"][n][-1] for n in names}
    worst = min(finals, key=finals.get)
    detail = ", ".join(f"{n} {v:.3f}" for n, v in finals.items())
    # the final state is judged only once refinement finished: every restricted curve has reached the
    # refinement level at some evaluation; a curve still below it at the end is "not finished by T"
    unfinished = [n for n in names if RESTRICTED.match(n) and max(d["acc"][n]) < k["REFINEMENT_ACC"]]
    if unfinished:
        return ClaimResult("C4", float(finals[worst]), f"worst {worst} {finals[worst]:.3f}; {detail}",
                           not_finished_verdict(last_step(a)),
                           f"refinement not finished: {', '.join(unfinished)} never reached "
                           f"{k['REFINEMENT_ACC']:.0%}")
    return ClaimResult("C4", float(finals[worst]), f"worst {worst} {finals[worst]:.3f}; {detail}",
                       _verdict(finals[worst] >= k["C4_FORBIDDEN_FINAL"]))


def c5(a: dict, k: Cuts = CUT_VALUES) -> ClaimResult:
    fin = a.get("dynamics", {}).get("final_exhaustive", {})
    if "0var_heldout_all" not in fin:
        return _missing("C5", "exhaustive 0-var held-out accuracy")
    acc = fin["0var_heldout_all"]
    phases = a.get("dynamics", {}).get("phases", {})
    if "addition" in phases and phases["addition"] is None:  # the phase this final state needs is still under way
        return ClaimResult("C5", float(acc), f"{acc:.4f} on {a['final_step']}", not_finished_verdict(last_step(a)),
                           "the addition phase had not finished")
    extra = f"; 2-var union {fin['2var_union']:.4f}" if "2var_union" in fin else ""
    return ClaimResult("C5", float(acc), f"{acc:.4f} on {a['final_step']}{extra}", _verdict(acc >= k["C5_HELDOUT_FINAL"]))




def _c5_variable(cid: str, name: str, a: dict, k: Cuts) -> ClaimResult:
    """C5 on held-out pairs in a variable form: the curated set's accuracy at the final evaluation."""
    d = a.get("dynamics", {})
    acc = _acc_at(d, name, last_step(a)) if d else None
    if acc is None:
        return _missing(cid, f"{name} accuracy")
    return ClaimResult(cid, float(acc), f"{name} {acc:.4f} at step {last_step(a):,}",
                       _verdict(acc >= k["C5_HELDOUT_FINAL"]))


def c5b(a: dict, k: Cuts = CUT_VALUES) -> ClaimResult:
    return _c5_variable("C5b", "1var_heldout", a, k)


def c5c(a: dict, k: Cuts = CUT_VALUES) -> ClaimResult:
    return _c5_variable("C5c", "2var_heldout", a, k)


def c6(a: dict, k: Cuts = CUT_VALUES) -> ClaimResult:
    return sweep_claim("C6", a, "f", 0.25, k["C6_C7_TOLERANCE"], k["C6_C7_MAX_WIDTH"])


def c7(a: dict, k: Cuts = CUT_VALUES) -> ClaimResult:
    return sweep_claim("C7", a, "r", 0.2, k["C6_C7_TOLERANCE"], k["C6_C7_MAX_WIDTH"])


def _cosine_gap(r: dict) -> float | None:
    """Centred matched cosine minus the larger centred null; None for an analysis without them."""
    nulls = [r.get("centred_shuffled_mean"), r.get("centred_other_sum_mean")]
    if r.get("centred_matched_mean") is None or any(v is None for v in nulls):
        return None
    return r["centred_matched_mean"] - max(nulls)


def c8(a: dict, k: Cuts = CUT_VALUES) -> ClaimResult:
    rep = a.get("representation", {})
    fin, held = rep.get("final"), rep.get("final_heldout")
    f = a.get("fourier")
    if not fin or not held or not f:
        return _missing("C8", "representation on training and held-out pairs, or fourier")
    gaps = {"train": _cosine_gap(fin), "held-out": _cosine_gap(held)}
    if any(g is None for g in gaps.values()):
        return _missing("C8", "centred cosines and the same-prefix null (re-run assign-add analyze)")
    corrs = [v["mean_corr_with_0var"] for key, v in f["shared"].items() if key != "0var" and v["mean_corr_with_0var"] is not None]
    grid = min(corrs) if corrs else None
    ok = (fin["matched_mean"] >= k["C8_MATCHED"] and held["matched_mean"] >= k["C8_MATCHED"]
          and min(gaps.values()) >= k["C8_GAP"] and grid is not None and grid >= k["C8_GRID_CORR"])

    def one(name: str, r: dict) -> str:
        return (f"{name}: matched {r['matched_mean']:.3f} (shuffled {r['shuffled_mean']:.3f}, same prefix other sum "
                f"{r['other_sum_mean']:.3f}); centred matched {r['centred_matched_mean']:.3f} vs nulls "
                f"{r['centred_shuffled_mean']:.3f} / {r['centred_other_sum_mean']:.3f}, n = {r['n']}")

    detail = (f"{one('training pairs', fin)}; {one('held-out pairs', held)}; 1-/2-var grids vs 0-var: corr ≥ "
              f"{grid if grid is not None else float('nan'):.3f}")
    return ClaimResult("C8", float(fin["matched_mean"]), detail, _verdict(ok))


def c9(a: dict, k: Cuts = CUT_VALUES) -> ClaimResult:
    f = a.get("fourier")
    if not f or "initial" not in f:
        return _missing("C9", "fourier with its initial-weights null")
    share = f["n_frequency_neurons"] / max(f["n_neurons"], 1)
    init = f["initial"]
    null = init["n_frequency_neurons"] / max(init["n_neurons"], 1)
    ok = share - null >= k["C9_FREQUENCY_NEURON_SHARE"]
    detail = (f"{f['n_frequency_neurons']}/{f['n_neurons']} frequency neurons (mean FVE "
              f"{f['mean_fve_frequency_neurons'] or float('nan'):.2f}) vs {init['n_frequency_neurons']}/"
              f"{init['n_neurons']} at step {init['step']} (initial weights, mean FVE {init['mean_fve']:.2f}); key "
              f"frequencies {f['key_frequencies']}")
    return ClaimResult("C9", float(share), detail, _verdict(ok))


def c10(a: dict, k: Cuts = CUT_VALUES) -> ClaimResult:
    final = str(a.get("final_step"))
    att, w = (a.get(part, {}).get("by_step", {}).get(final) for part in ("attention", "weights"))
    if att is None or w is None or "summand_routing" not in att:  # (an analysis from before summand routing)
        return _missing("C10", "final-checkpoint attention (with summand routing) and weights")
    routing = att["summand_routing"] if k["C10_SUMMANDS"] >= 0.5 else att["routing_acc"]
    ok = (att["prev_token_argmax"] >= k["C10_PREV_TOKEN"] and w["qk2_identity"] >= k["C10_QK_IDENTITY"]
          and routing >= k["C10_ROUTING"])
    detail = (f"previous-token argmax {att['prev_token_argmax']:.3f} (mean weight {att['prev_token']:.3f}); "
              f"QK₂ identity {w['qk2_identity']:.3f} (margin {w['qk2_margin']:.2f}); layer-2 routing to the summands "
              f"{att['summand_routing']:.3f} (mass {att['summand_mass']:.2f}); to the bound values alone "
              f"{att['routing_acc']:.3f} (1-var {att['routing_acc_1var']:.3f}, 2-var {att['routing_acc_2var']:.3f})")
    return ClaimResult("C10", float(w["qk2_identity"]), detail, _verdict(ok))


def _fmt_ms(ms: list[float]) -> str:
    return f"{ms[0]:.2f} ± {ms[1]:.2f}"


def c11(a: dict, k: Cuts = CUT_VALUES) -> ClaimResult:
    """Under the theory's preconditions (the window they pick); the full-mixture figure beside it."""
    g = a.get("gradients", {})
    summary = g.get("theory", {}).get("summary")
    if not summary:
        return _missing("C11", "gradients under the preconditions")
    full = g.get("by_step", {})
    full_rows = [full[s] for s in sorted(full, key=int)]
    plain = (f"full training mixture at {len(full_rows)} checkpoints: diagonal > off-diagonal at "
             f"{np.mean([r['diag_mean'] > r['offdiag_mean'] for r in full_rows]):.0%}, correlation "
             f"{np.mean([r['corr_with_later_qk'] for r in full_rows if r['corr_with_later_qk'] is not None]):.2f}"
             if full_rows else "full mixture not measured")
    start = summary.get("from_start")
    earlier = (f"window from step {start['steps'][0]} ({len(start['steps'])} checkpoints): diagonal share "
               f"{_fmt_ms(start['diag_share'])}, correlation {_fmt_ms(start['corr'])}" if start else "")
    win = summary.get("window")
    if not win:
        return ClaimResult("C11", None, f"{earlier}; {plain}".strip("; "), NOT_MEASURED,
                           f"the preconditions (previous-token argmax ≥ {PREV_TOKEN_MIN}, ≥ {MIN_SEQUENCES} sequences "
                           "per sample whose = carries the variable) hold at no checkpoint before binding")
    null, own = win.get("corr_null95"), win.get("own_qk_corr")
    if null is None:
        return _missing("C11", "the correlation's permutation null (re-run assign-add analyze)")
    beats_null = win["corr"][0] > null[0]
    ok = win["diag_share"][0] >= k["C11_DIAG_SHARE"] and win["corr"][0] >= k["C11_CORR"] and beats_null
    leads = gradient_leads(win["corr"], own)
    mixture = summary.get("full_mixture_window")
    in_window = (f"full training mixture in the same window: diagonal share {_fmt_ms(mixture['diag_share'])}, "
                 f"correlation {_fmt_ms(mixture['corr'])}" if mixture else "")
    detail = (f"window {win['steps'][0]}–{win['steps'][-1]} ({len(win['steps'])} checkpoints before binding where "
              f"the preconditions hold), {win['samples']} disjoint samples: diagonal > off-diagonal share "
              f"{_fmt_ms(win['diag_share'])}, correlation with the final QK₂ {_fmt_ms(win['corr'])} (null with the "
              f"variables' labels permuted, 95th percentile: {_fmt_ms(null)}; the checkpoint's own QK₂ already "
              f"correlates {_fmt_ms(own) if own else '—'}), rows with a diagonal maximum {_fmt_ms(win['diag_argmax'])}"
              f"; {in_window}; {earlier}; {plain}").replace("; ;", ";")
    reason = "in the theory's setting (1-var sequences whose = carries the variable, with the previous-token head)"
    if not beats_null:
        reason += "; the correlation does not beat its permutation null"
    if ok and leads is None:
        return _missing("C11", "the checkpoint's own QK₂ correlation, the null the gradient must beat (re-run analyze)")
    if ok and not leads:
        reason += (f"; the gradient's correlation with the final QK₂ ({_fmt_ms(win['corr'])}) does not exceed the "
                   f"checkpoint's own QK₂'s ({_fmt_ms(own)}) by more than their spread over the disjoint samples")
        return ClaimResult("C11", float(win["corr"][0]), detail, NOT_LED, reason)
    return ClaimResult("C11", float(win["corr"][0]), detail, _verdict(ok), reason)


def gradient_leads(grad: list[float], own: list[float] | None) -> bool | None:
    """Whether −∇QK₂ predicts the final QK₂ better than the checkpoint's own QK₂ does: its window-mean
    correlation exceeds the own QK₂'s by more than the larger of the two sds over the disjoint samples.
    One comparison per window, so the serial correlation of neighbouring checkpoints does not count as
    more evidence.  None without the own-QK₂ figure."""
    if not own:
        return None
    return grad[0] - own[0] > max(grad[1], own[1])


def _circuits(a: dict) -> dict | None:
    return a.get("causal", {}).get("circuits")


def _ablated(comp: dict, component: str, name: str) -> list[float]:
    """The accuracies of one set with one component ablated, one per mode."""
    return [comp["ablations"][component][mode][name] for mode in sorted(comp["ablations"][component])]


def _fmt_modes(values: list[float]) -> str:
    return "/".join(f"{v:.2f}" for v in values)


def c1b(a: dict, k: Cuts = CUT_VALUES) -> ClaimResult:
    """At the addition step, before binding and at the end: ablating either binding component (mean
    and resample) leaves 0-var held-out ≥ the cut.  A checkpoint whose unablated 0-var held-out is below
    the cut has no addition to keep and is not judged there."""
    circ = _circuits(a)
    if not circ or "independence" not in circ:
        return _missing("C1b", "the causal circuits analysis")
    keep = k["C12_ZERO_VAR_KEPT"]
    judged, parts = {}, []
    for label, r in circ["independence"].items():
        worst = min(v for modes in r["ablations"].values() for v in modes.values())
        parts.append(f"{label} (step {r['step']:,}): {r['baseline']:.3f} unablated, ≥ {worst:.3f} ablated")
        if r["baseline"] >= keep:
            judged[label] = worst
    detail = "0-var held-out with the layer-1 head or layer-2 routing ablated (mean, resample): " + "; ".join(parts)
    if not judged:
        return ClaimResult("C1b", None, detail, not_finished_verdict(last_step(a)),
                           f"0-var held-out never reached {keep:.0%} at the checkpoints read")
    # the claim is about addition before binding: the end alone counts only in a run that never bound
    before = {"addition", "before_binding"} | ({"end"} if "before_binding" not in circ["independence"] else set())
    if not set(judged) & before:
        return ClaimResult("C1b", None, detail, NOT_MEASURED,
                           f"0-var held-out below {keep:.0%} at every checkpoint read before binding")
    worst = min(judged.values())
    return ClaimResult("C1b", float(worst), detail, _verdict(worst >= keep))


def c12(a: dict, k: Cuts = CUT_VALUES) -> ClaimResult:
    """Binding components ablated: 1-/2-var held-out within NEAR_CHANCE of binding-free chance and 0-var
    held-out kept; addition components ablated: every held-out set within NEAR_CHANCE of 1/N; the null
    (as many random MLP₂ neurons) keeps 0-var held-out.  Both modes (mean, resample) must agree."""
    circ = _circuits(a)
    if not circ:
        return _missing("C12", "the causal circuits analysis")
    comp, margin, keep = circ["composition"], k["C12_NEAR_CHANCE"], k["C12_ZERO_VAR_KEPT"]
    sets = list(comp["baseline"])
    if not all(s in sets for s in ("0var_heldout", "1var_heldout")):
        return _missing("C12", "0-var and 1-var held-out sets")
    failures, parts = [], []
    for component in ("layer1_head", "layer2_routing"):
        for name in sets:
            vals = _ablated(comp, component, name)
            if name == "0var_heldout":
                ok = min(vals) >= keep
            else:
                ok = max(vals) <= comp["chance"]["binding"][name] + margin
            parts.append(f"{component} → {name} {_fmt_modes(vals)}")
            failures += [] if ok else [f"{component} on {name}"]
    for component in ("layer2_head_output", "frequency_neurons"):
        for name in sets:
            vals = _ablated(comp, component, name)
            parts.append(f"{component} → {name} {_fmt_modes(vals)}")
            failures += [] if max(vals) <= comp["chance"]["addition"][name] + margin else [f"{component} on {name}"]
    null = _ablated(comp, "random_neurons", "0var_heldout")
    failures += [] if min(null) >= keep else ["the null (random neurons) on 0var_heldout"]
    chance = ", ".join(f"{n} {comp['chance']['binding'][n]:.2f}" for n in sets)
    detail = (f"step {comp['step']:,}, mean/resample ablation: " + "; ".join(parts) +
              f"; null: {comp['n_null_neurons']} random MLP₂ neurons (vs {comp['n_frequency_neurons']} frequency "
              f"neurons) → 0var_heldout {_fmt_modes(null)}; binding-free chance {chance}; 1/N "
              f"{comp['chance']['addition']['0var_heldout']:.3f}")
    worst_var = max(max(_ablated(comp, c, n)) - comp["chance"]["binding"][n]
                    for c in ("layer1_head", "layer2_routing") for n in sets if n != "0var_heldout")
    return ClaimResult("C12", float(worst_var), detail, _verdict(not failures),
                       "" if not failures else "outside the criterion: " + ", ".join(failures))


def c13(a: dict, k: Cuts = CUT_VALUES) -> ClaimResult:
    """The residual before MLP₂ carries the sum: interchanged between a variable form and another
    sequence's constant form (both directions, every variable-form held-out set), the answer follows the
    patched-in sum in ≥ C13_FOLLOW of pairs; ablating its key-frequency components takes 0-var held-out
    within NEAR_CHANCE of 1/N while as many random frequencies' components keep it ≥ C12_ZERO_VAR_KEPT.
    The interchange before binding and before the layer-2 head are shown beside it."""
    circ = _circuits(a)
    if not circ or "adder" not in circ:
        return _missing("C13", "the causal circuits analysis")
    adder, margin, keep, follow = circ["adder"], k["C12_NEAR_CHANCE"], k["C12_ZERO_VAR_KEPT"], k["C13_FOLLOW"]
    rates = {f"{n} {d}": r["follows_source"] for n, dirs in adder["interchange"].items() for d, r in dirs.items()}
    if not rates or any(v is None or not math.isfinite(v) for v in rates.values()):
        return _missing("C13", "interchanges on variable-form held-out sets")
    freq, chance = adder["frequencies"], 1.0 / circ["modulus"]
    key = [freq["key"][m] for m in ("mean", "resample")]
    null = "random_orthogonal" if k["C13_NULL_ORTHOGONAL"] >= 0.5 and "random_orthogonal" in freq else "random"
    rnd = [freq[null][m] for m in ("mean", "resample")]
    failures = [name for name, v in rates.items() if v < follow]
    failures += [] if max(key) <= chance + margin else ["key-frequency ablation"]
    failures += [] if min(rnd) >= keep else ["the null (random frequencies)"]

    def fmt(block: dict) -> str:
        return ", ".join(f"{n} {d.replace('_to_', '→')} {r['follows_source']:.3f}" for n, dirs in block.items()
                         for d, r in dirs.items() if r["follows_source"] is not None)

    before = adder.get("before_binding")
    detail = (f"step {adder['step']:,}: follows the patched-in sum {fmt(adder['interchange'])}; before the layer-2 head "
              f"(null) {fmt(adder['wrong_site'])}"
              + (f"; before binding (step {before['step']:,}, null) {fmt(before['interchange'])}" if before else "")
              + f"; 0var_heldout with key frequencies {freq['key']['frequencies']} ablated ({freq['key']['dimensions']} "
              f"dims) {_fmt_modes(key)}, random {freq['random']['frequencies']} ({freq['random']['dimensions']} dims) "
              f"{_fmt_modes([freq['random'][m] for m in ('mean', 'resample')])}"
              + (f", their part orthogonal to the key directions ({freq['random_orthogonal']['dimensions']} dims) "
                 f"{_fmt_modes([freq['random_orthogonal'][m] for m in ('mean', 'resample')])}"
                 if "random_orthogonal" in freq else ""))
    return ClaimResult("C13", float(min(rates.values())), detail, _verdict(not failures),
                       "" if not failures else "outside the criterion: " + ", ".join(failures))


CLAIMS = [
    Claim("B", "The binding circuit forms (the paper's model learns variable binding)",
          "bound at step 5,401 of 40,000 (one run)",
          f"bound at the first step with {AC.BINDING_SET} ≥ {AC.BINDING_ACC:.0%}; a run that never reaches it is "
          "censored at its last step ('not bound by T'); over seeds: k of n bound by T and the Kaplan–Meier median "
          "binding step (phase-timing section)",
          figures=("accuracy",), measure=binding),
    Claim("C1", "Modular addition is learned first: 0-var accuracy is near perfect before binding",
          "phase 1 (0-var ≈ 100 % long before step 5,300)",
          f"addition step < binding step and 0-var held-out ≥ {CUT_VALUES['C1_ZERO_VAR_HELDOUT_BEFORE_BINDING']:.0%} at the "
          "evaluation before binding",
          figures=("accuracy",), measure=c1),
    Claim("C1b", "Addition is learned independently of binding: it does not run through the binding circuit",
          "phase 1 ('independently')",
          f"at the first checkpoint from the addition step, the last before binding and the last: with the layer-1 "
          f"head or the layer-2 routing ablated (mean and resample, within the set), 0-var held-out ≥ "
          f"{CUT_VALUES['C12_ZERO_VAR_KEPT']:.0%}, wherever it is ≥ {CUT_VALUES['C12_ZERO_VAR_KEPT']:.0%} unablated",
          figures=(), measure=c1b),
    Claim("C2a", "A sharp spike in accuracy on variable sequences", "1-var held-out 59 % → 96 % between steps 5,301 "
          "and 5,401", f"the largest rise of {AC.BINDING_SET} over a {spike.SPIKE_INTERVAL}-step interval (the finest "
          f"spacing every source has around its spike) ≥ {CUT_VALUES['C2_MIN_RISE']:.0%}; the rise / (1 − accuracy before) beside it",
          figures=("spike", "accuracy"), measure=c2a),
    Claim("C2b", "The routing circuit appears with the spike", "(the paper's account of the spike)",
          f"= → left, = → right (layer 1) and layer-2 routing onto the summands each change most, over equal "
          f"{spike.GRID_EVERY:,}-step intervals from the addition step on (the spacing every source has over the whole "
          "run), in the interval holding the binding step or one next to it; routing onto the bound value alone shown",
          figures=("attention", "pattern_layer2"), measure=c2b),
    Claim("C2c", "The spike coincides with layer-1 attention starting to route constants to their variables",
          "layer-1 attention starts routing at the spike",
          f"the layer-1 previous-token attention of value tokens (mean weight) changes most, over equal "
          f"{spike.GRID_EVERY:,}-step intervals from the addition step on, in the interval holding the binding step or "
          "one next to it; its argmax share shown",
          figures=("pattern_layer1",), measure=c2c),
    Claim("C3", "A later refinement phase fixes variables in forbidden positions",
          "steps 14,500–16,000 (`b` as right operand 5 % → 99 %)",
          f"at least one restricted (variable, side) curve, e.g. `b` as right operand, is ≤ "
          f"{CUT_VALUES['C3_FORBIDDEN_AT_BINDING']:.0%} at every evaluation from the binding step to "
          f"{CUT_VALUES['C3_PLATEAU_STEPS']:,.0f} steps after it (a plateau) and reaches {AC.REFINEMENT_ACC:.0%} later",
          figures=("refinement",), measure=c3),
    Claim("C3b", "Refinement fixes routing: the later phase repairs where layer 2 attends for the restricted positions",
          "(the paper's account of refinement)",
          f"for every restricted curve fixed in a later jump (C3), layer-2 routing onto the summands on that curve's "
          f"own sequences changes most, over equal {spike.GRID_EVERY:,}-step intervals from the binding step on, in "
          "the interval holding the jump or one next to it, but not in the interval holding binding (a jump in binding's "
          "own interval is not judged)",
          figures=("restricted_routing", "refinement"), measure=c3b),
    Claim("C4", "Position generalisation: trained on `14+b`, correct on `b+14`", "≈ 100 % on forbidden positions",
          f"final accuracy ≥ {CUT_VALUES['C4_FORBIDDEN_FINAL']:.0%} on every forbidden-position set",
          figures=("refinement",), measure=c4),
    Claim("C5", "OOD generalisation to addition pairs never seen in any form", "99.4 % on the 1,045 held-out pairs",
          f"final accuracy on the exhaustive 0-var held-out set ≥ {CUT_VALUES['C5_HELDOUT_FINAL']:.0%}",
          figures=("accuracy",), measure=c5),
    Claim("C5b", "OOD generalisation in 1-var form: held-out pairs with one operand a variable",
          "(printed in the paper's held-out evaluation)",
          f"final accuracy on the curated 1-var held-out set ≥ {CUT_VALUES['C5_HELDOUT_FINAL']:.0%} (C5's cut)",
          figures=("accuracy",), measure=c5b),
    Claim("C5c", "OOD generalisation in 2-var form: held-out pairs with both operands variables",
          "(printed in the paper's held-out evaluation)",
          f"final accuracy on the curated 2-var held-out set ≥ {CUT_VALUES['C5_HELDOUT_FINAL']:.0%} (C5's cut)",
          figures=("accuracy",), measure=c5c),
    Claim("C6", "Generalising to unseen pairs needs f ≈ 0.25 of all pairs in training", "threshold f ≈ 0.25",
          f"f sweep: the smallest f from which the monotone fit of 0-var held-out accuracy stays ≥ {CUT_VALUES['SWEEP_THRESHOLD_ACC']:.0%}; "
          "its bootstrap "
          f"interval overlaps 0.25 ± {CUT_VALUES['C6_C7_TOLERANCE']:g} and is at most {CUT_VALUES['C6_C7_MAX_WIDTH']:g} wide (else "
          "'not resolved'); the convergence flag beside it",
          figures=(), measure=c6),
    Claim("C7", "Generalising on 2-var sequences needs r ≈ 0.2 of 2-var data", "threshold r ≈ 0.2",
          "r sweep: the smallest r (the kept fraction of 2-var rows, as the paper's 'r ≈ 0.2') from which the monotone "
          f"fit of 2-var union accuracy stays ≥ {CUT_VALUES['SWEEP_THRESHOLD_ACC']:.0%}; its bootstrap interval overlaps 0.2 ± {CUT_VALUES['C6_C7_TOLERANCE']:g} "
          f"and is at most {CUT_VALUES['C6_C7_MAX_WIDTH']:g} wide (else 'not resolved'); the convergence flag beside it",
          figures=(), measure=c7),
    Claim("C8", "Residuals before the layer-2 MLP are nearly identical for variable and constant forms",
          "cosine ≈ 1",
          f"raw matched cosine ≥ {CUT_VALUES['C8_MATCHED']} on training and on held-out pairs; centred matched cosine at least "
          f"{CUT_VALUES['C8_GAP']} above both nulls (shuffled pairs; same prefix, other sum) on both; and the 1-/2-var MLP₂ "
          f"pre-activation grids correlate ≥ {CUT_VALUES['C8_GRID_CORR']} with the 0-var grid",
          figures=("cosine_hist", "cosine_by_step", "patching"), measure=c8),
    Claim("C9", "Layer-2 MLP pre-activations have the form cos(2πkn/N + α) + cos(2πkm/N + β)",
          "key frequencies {9, 17, 18, 19, 21, 25}",
          f"the share of frequency neurons (one k explains > {AC.FOURIER_NEURON_FVE:.0%} of a neuron's variance over "
          f"the N × N grid) exceeds the initial weights' share by ≥ {CUT_VALUES['C9_FREQUENCY_NEURON_SHARE']:.0%} of the neurons",
          figures=("fourier_spectrum", "fourier_neurons", "fourier_neuron"), measure=c9),
    Claim("C10", "Layer-1 is a previous-token head for values; layer-2 QK is an identity over variables",
          "previous-token head; strong QK₂ diagonal",
          f"final: value tokens' top key is their variable in ≥ {CUT_VALUES['C10_PREV_TOKEN']:.0%}, QK₂ through OV₁ has its "
          f"row maximum on the diagonal for ≥ {CUT_VALUES['C10_QK_IDENTITY']:.0%} of variables, and the final = routes (its top two "
          f"layer-2 keys are the two summands' value tokens) in ≥ {CUT_VALUES['C10_ROUTING']:.0%} of sequences",
          figures=("weights", "qk2", "probes"), measure=c10),
    Claim("C11", "The negative gradient on QK₂ forms associative-memory (identity) blocks", "theory",
          f"at the checkpoints before binding where the theory's preconditions hold (previous-token argmax ≥ "
          f"{PREV_TOKEN_MIN:.0%}; 1-var sequences whose = attends more to the variable operand), −∇QK₂ in the "
          f"variable basis has diagonal mean > off-diagonal mean at ≥ {CUT_VALUES['C11_DIAG_SHARE']:.0%} of them and mean "
          f"correlation with the final QK₂ ≥ {CUT_VALUES['C11_CORR']} and above the 95th percentile of the same correlation with the "
          "variables' labels permuted (means over 3 disjoint samples); the verdict is about the theory's setting",
          figures=("gradients_theory", "gradients", "gradient_matrix"), measure=c11),
    Claim("C12", "Generalisation comes from composing the two circuits", "the paper's title claim",
          f"final model, each ablation by the set's mean and by another sequence's activation: without the layer-1 "
          f"head, and without the layer-2 routing, 1-/2-var held-out ≤ binding-free chance (values picked at random "
          f"from the sequence's assignments) + {CUT_VALUES['C12_NEAR_CHANCE']:g} while 0-var held-out ≥ {CUT_VALUES['C12_ZERO_VAR_KEPT']:.0%}; "
          f"without the layer-2 head's output, and without MLP₂'s frequency neurons, every held-out set ≤ 1/N + "
          f"{CUT_VALUES['C12_NEAR_CHANCE']:g}; the null, as many random other MLP₂ neurons, keeps 0-var held-out ≥ "
          f"{CUT_VALUES['C12_ZERO_VAR_KEPT']:.0%}",
          figures=("ablations",), measure=c12),
    Claim("C13", "Layer-2 OV plus MLP₂ is the adder: the residual before MLP₂ carries the sum in any form",
          "the composition argument",
          f"final model: the residual at = before MLP₂ interchanged with another sequence's other form (constant → "
          f"variable and variable → constant, 1- and 2-var held-out) makes the answer the patched-in sum in ≥ "
          f"{CUT_VALUES['C13_FOLLOW']:.0%} of pairs with different sums; ablating its components at the key frequencies takes 0-var "
          f"held-out ≤ 1/N + {CUT_VALUES['C12_NEAR_CHANCE']:g}, as many random other frequencies (their directions less what they "
          f"share with the key frequencies') keep it ≥ {CUT_VALUES['C12_ZERO_VAR_KEPT']:.0%}; the "
          "same interchange before binding and before the layer-2 head shown as nulls",
          figures=("patching",), measure=c13),
]
BY_ID = {c.id: c for c in CLAIMS}
CLAIM_FUNCTIONS: dict[str, Callable[[dict, Cuts], ClaimResult]] = {c.id: c.measure for c in CLAIMS}


def evaluate_claims(analysis: dict, cuts: Cuts = CUT_VALUES, robustness: bool = True) -> dict[str, ClaimResult]:
    """Every claim's result; in a run that has not bound, the claims in ``NEEDS_BINDING`` are
    "not bound by T" (nothing to judge yet), never a failure.  With ``robustness`` each measured
    verdict also says whether it survives each of its cuts moved by ±20 % (:func:`robustness_of`)."""
    unbound = is_bound(analysis) is False
    out = {}
    for cid, fn in CLAIM_FUNCTIONS.items():
        if unbound and cid in NEEDS_BINDING:
            end = last_step(analysis)
            out[cid] = ClaimResult(cid, None, unbound_detail(analysis), not_bound_verdict(end),
                                   f"the binding circuit had not formed by step {end:,}")
            continue
        out[cid] = fn(analysis, cuts)
        if robustness and out[cid].verdict != NOT_MEASURED:
            out[cid].robustness, out[cid].under_previous = robustness_of(cid, analysis, out[cid].verdict, cuts)
            mark_edge(out[cid])
    return out


def mark_edge(res: ClaimResult) -> None:
    """A judged verdict that flips when one of its cuts moves within ±20 % reads "at the edge" (the
    verdict at the cut itself stays in the reason).  B is an event with a step, not a verdict at a cut."""
    if res.id != "B" and res.verdict in (HOLDS, FAILS) and res.robustness.startswith("fragile"):
        res.reason = "; ".join(x for x in (f"{res.verdict} at the cut itself", res.reason) if x)
        res.verdict = AT_EDGE


def robustness_of(cid: str, analysis: dict, verdict: str, cuts: Cuts = CUT_VALUES) -> tuple[str, str]:
    """("robust" or "fragile: …", the verdict under a cut's value before it was changed after seeing data, or "").

    Each of the claim's cuts is moved alone by ±``MOVE`` (``Cut.moved``: a value scaled, a level's
    allowance scaled) and the claim evaluated again on the same measurements."""
    fn = CLAIM_FUNCTIONS[cid]
    flips = []
    for name in CLAIM_CUTS.get(cid, ()):
        for factor in (1 - MOVE, 1 + MOVE):
            moved = Cut(cuts[name], CUTS[name].basis, CUTS[name].kind).moved(factor)
            other = fn(analysis, {**cuts, name: moved}).verdict
            if other != verdict:
                flips.append(f"{name} {cuts[name]:.3g} → {moved:.3g} gives '{other}'")
    previous = []
    for name in CLAIM_CUTS.get(cid, ()):
        cut = CUTS[name]
        if cut.previous is not None:
            other = fn(analysis, {**cuts, name: cut.previous}).verdict
            previous.append(f"{other} without {name} ({cut.why_changed})")
    return ("robust" if not flips else "fragile: " + "; ".join(flips)), "; ".join(previous)
