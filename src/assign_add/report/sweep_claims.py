"""The sweep claims' rule (C6: the f threshold, C7: the r threshold) on a sweep's summary."""

from __future__ import annotations

import numpy as np

from assign_add.sweep.spec import THRESHOLD_ACC as LEVEL  # the criterion code reads LEVEL
from assign_add.report.verdicts import FAILS, HOLDS, NOT_CONVERGED, NOT_MEASURED, NOT_RESOLVED, ClaimResult


def sweep_claim(cid: str, a: dict, key: str, paper: float, tolerance: float, max_width: float) -> ClaimResult:
    """From a sweep summary attached as ``a["sweeps"][key]`` (``sweep.json`` of ``assign-add sweep``).

    Rule: "not measured" while points are unfinished; "not resolved" when the monotone-fit threshold
    has no interval (one seed) or its interval is wider than ``max_width`` (a wide interval would
    overlap the band by its width alone); otherwise "holds" when the interval overlaps the paper's value
    ± the tolerance cut.  The convergence flag is reported beside the verdict, never instead of it (points just
    below the threshold still rising by more than the margin over their last third); so are the
    threshold at 50 / 80 / 90 %, the swept value as the 2-var share of training rows, and the runs
    that never bound.  The protocol is named in the detail."""
    sweep = a.get("sweeps", {}).get(key)
    if not sweep:
        return ClaimResult(cid, None, "", NOT_MEASURED, f"needs the {key} sweep (assign-add sweep --preset {key})")
    spec, thr = sweep["spec"], sweep["threshold"]
    steps, n = spec["steps"], len(spec["values"]) * len(spec["seeds"])
    protocol = sweep.get("protocol", f"{spec['param']} sweep, {steps:,} steps")
    if sweep.get("unfinished"):
        return ClaimResult(cid, None, f"protocol: {protocol}", NOT_MEASURED,
                           f"the sweep is unfinished ({len(sweep['unfinished'])} of {n} points)")
    fmt = lambda v: "—" if v is None else f"{v:.3f}"  # noqa: E731
    levels = "; ".join(f"at {float(lv):.0%}: {fmt(t['estimate'])} [{fmt(t['low'])}, {fmt(t['high'])}]"
                       for lv, t in sweep.get("thresholds_by_level", {}).items())
    share = _two_var_share_at(sweep.get("rows", []), thr["estimate"]) if key == "r" else None
    unbound = [f"{r['value']:.3g} (seed {', '.join(map(str, r['unbound_seeds']))})" for r in sweep.get("rows", [])
               if r.get("unbound_seeds")]
    detail = (f"threshold {fmt(thr['estimate'])} [{fmt(thr['low'])}, {fmt(thr['high'])}] (smallest value from which "
              f"the monotone fit stays ≥ {LEVEL:.0%}; {thr['method']})"
              + (f", i.e. a 2-var share of {share:.3f} of training rows" if share is not None else "")
              + f"; logistic with free asymptotes {fmt(thr['logistic'])}"
              + (f"; thresholds by level: {levels}" if levels else "")
              + (f"; runs that never bound: {', '.join(unbound)}" if unbound else "")
              + f"; protocol: {protocol}")
    conv = sweep.get("convergence", {})
    flag = ""
    if conv.get("unconverged_near"):
        vals = ", ".join(f"{v:.3g}" for v in conv["unconverged_near"])
        flag = (f"{NOT_CONVERGED} at {steps:,} steps: {spec['param']} = {vals} still rose by more than "
                f"{conv['margin']} over the last third")
    if thr["estimate"] is None:
        return ClaimResult(cid, None, detail, FAILS, "; ".join(x for x in (f"the monotone fit never reaches {LEVEL:.0%}", flag)
                                                               if x))
    lo, hi = thr["low"], thr["high"]
    if lo is None or hi is None or hi - lo > max_width:
        why = ("no interval (one seed per value)" if lo is None or hi is None
               else f"its interval is {hi - lo:.3f} wide, more than {max_width:g}")
        return ClaimResult(cid, float(thr["estimate"]), detail, NOT_RESOLVED, "; ".join(x for x in (why, flag) if x))
    ok = lo <= paper + tolerance and hi >= paper - tolerance
    return ClaimResult(cid, float(thr["estimate"]), detail, HOLDS if ok else FAILS, flag)


def _two_var_share_at(rows: list[dict], value: float | None) -> float | None:
    """The 2-var share of training rows at swept value ``value`` (linear between the grid's values)."""
    pts = sorted((r["value"], r["two_var_share"]) for r in rows if r.get("two_var_share") is not None)
    if value is None or len(pts) < 2:
        return None
    return float(np.interp(value, [x for x, _ in pts], [y for _, y in pts]))
