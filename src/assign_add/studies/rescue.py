"""Rescue arms: training changes meant to make binding reliable, each a survival study on the default's seeds.

Every arm changes one thing in training and runs the seeds of a default study (``assign-add survival`` with the
default config) to the same horizon, each run stopped once bound.  The rule, fixed before any arm ran:

- **Outcome**: bound by the horizon (1-var held-out accuracy >= 0.90 by 40,000 steps), over seeds whose outcome
  is known; a run still training is left out and counted.
- **Test**: each arm against the default *on the same seeds*, two-sided Fisher exact test on
  (bound, not bound) x (arm, default); the arms' p-values are Holm-adjusted together (family-wise 0.05).
- **Verdicts**: "better than the default" / "worse than the default" when the adjusted p < 0.05 (direction from
  the two fractions); "reaches the goal" when, besides being better, the arm bound at least ``GOAL`` (0.95) of at
  least ``GOAL_MIN_SEEDS`` (32) seeds; otherwise "no detectable difference", printed with the test's power to
  detect an arm at the goal against the default's observed fraction (exact, at level 0.05 / arms: Bonferroni,
  which Holm's first step equals, so a lower bound on Holm's power).
- **Secondary**: time to binding by the log-rank test against the default on the same seeds (runs censored where
  they stopped unbound), Holm-adjusted over the arms on its own; reported beside the verdict, never changing it.
- **Cost**: the mean number of steps a seed trains under the arm (until bound, or the horizon: the restricted
  mean time to binding), against the default's on the same seeds.
- **Staging**: each arm first runs the default's first 16 seeds; it is extended to 32 seeds when it bound at least
  as many of those 16 as the default did (see :func:`extend_arm`).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np
from scipy.stats import fisher_exact

from assign_add.run import RunError
from assign_add.stats import fisher_power, holm, logrank_p, wilson_interval
from assign_add.studies.compare import binding_times
from assign_add.studies.survival import SeedRow, bound_by, read_summary, training_of

ALPHA = 0.05
GOAL = 0.95  # P(bound by the horizon) a practitioner could rely on
GOAL_MIN_SEEDS = 32
FIRST_STAGE = 16  # seeds every arm runs before the extension rule is read


@dataclass
class ArmResult:
    name: str
    seeds: int  # the arm's runs on seeds the default also ran
    known: int  # of them, with a known outcome at the horizon
    bound: int
    ci95: tuple[float, float]
    default_known: int  # the default's runs with a known outcome on the same seeds
    default_bound: int
    cost_steps: float | None  # mean steps trained per seed (until bound, else the horizon)
    default_cost_steps: float | None
    fisher_p: float | None
    holm_p: float | None
    power_at_goal: float | None
    verdict: str
    logrank_p: float | None = None  # secondary: time to binding, each run censored where it stopped unbound
    logrank_holm_p: float | None = None

    @property
    def rate(self) -> float | None:
        return self.bound / self.known if self.known else None


def _outcomes(rows: list[SeedRow], horizon: int) -> dict[int, bool]:
    return {r.seed: b for r in rows if r.finished and (b := bound_by(r, horizon)) is not None}


def _cost(rows: list[SeedRow], seeds: set[int], horizon: int) -> float | None:
    """Mean steps to binding, capped at the horizon, over the finished runs of ``seeds``."""
    steps = [min(r.bound_at, horizon) if r.bound_at is not None else horizon
             for r in rows if r.seed in seeds and r.finished and bound_by(r, horizon) is not None]
    return float(np.mean(steps)) if steps else None


def _verdict(known: int, bound: int, d_known: int, d_bound: int, holm_p: float | None) -> str:
    if holm_p is None:
        return "not measured"
    if holm_p >= ALPHA or bound / known == d_bound / d_known:
        return "no detectable difference"
    if bound / known < d_bound / d_known:
        return "worse than the default"
    if known >= GOAL_MIN_SEEDS and bound / known >= GOAL:
        return "reaches the goal"
    return "better than the default"


def rescue_table(default: dict, arms: dict[str, dict]) -> list[ArmResult]:
    """Each arm against the default on their shared seeds, under the rule of this module."""
    horizon = default["horizon"]
    for name, s in arms.items():
        if s["horizon"] != horizon:
            raise RunError(f"arm {name}: horizon {s['horizon']:,}, the default's is {horizon:,}")
        (ta, td) = training_of(s), training_of(default)
        if (ta["compile"], ta["precision"]) != (td["compile"], td["precision"]):
            raise RunError(f"arm {name} trained differently (compiled or precision) from the default")
    d_rows = [SeedRow(**r) for r in default["rows"]]
    d_out = _outcomes(d_rows, horizon)
    d_seeds = {x.seed for x in d_rows}
    partial = []
    for name, s in arms.items():
        rows = [SeedRow(**r) for r in s["rows"] if r["seed"] in d_seeds]
        out = _outcomes(rows, horizon)
        shared = sorted(set(out) & set(d_out))
        k, n = sum(out[x] for x in shared), len(shared)
        dk = sum(d_out[x] for x in shared)
        p = fisher_exact([[k, n - k], [dk, n - dk]]).pvalue if n else None
        lr = logrank_p(*binding_times(_finished(rows, shared)), *binding_times(_finished(d_rows, shared))) if n else None
        partial.append((name, rows, shared, k, n, dk, None if p is None else float(p), lr))
    adjusted, lr_adjusted = holm([x[6] for x in partial]), holm([x[7] for x in partial])
    results = []
    for (name, rows, shared, k, n, dk, p, lr), hp, lhp in zip(partial, adjusted, lr_adjusted):
        power = fisher_power(n, n, GOAL, dk / n, ALPHA / len(arms)) if n else None
        results.append(ArmResult(name, len(rows), n, k, wilson_interval(k, n), n, dk, _cost(rows, set(shared), horizon),
                                 _cost(d_rows, set(shared), horizon), p, hp, power, _verdict(n, k, n, dk, hp) if n else
                                 "not measured", lr, lhp))
    return results


def _finished(rows: list[SeedRow], seeds: list[int]) -> list[SeedRow]:
    return [r for r in rows if r.seed in set(seeds) and r.finished]


def extend_arm(arm: dict, default: dict, first: int = FIRST_STAGE) -> bool:
    """The staging rule: extend an arm to 32 seeds when, on the default's first ``first`` seeds, it bound at least
    as many as the default did (both read at the horizon, over seeds finished in both)."""
    horizon = default["horizon"]
    seeds = sorted(r["seed"] for r in default["rows"])[:first]
    a = _outcomes([SeedRow(**r) for r in arm["rows"] if r["seed"] in seeds], horizon)
    d = _outcomes([SeedRow(**r) for r in default["rows"] if r["seed"] in seeds], horizon)
    shared = set(a) & set(d)
    return sum(a[s] for s in shared) >= sum(d[s] for s in shared)


def rescue(default_path: Path, arm_paths: dict[str, Path]) -> dict:
    """The rescue table from survival summaries on disk, as JSON."""
    default = read_summary(default_path)
    arms = {name: read_summary(p) for name, p in arm_paths.items()}
    rows = rescue_table(default, arms)
    return {"rule": __doc__.split("\n\n", 1)[1].strip(), "horizon": default["horizon"], "default": str(default_path),
            "arms": [{**asdict(r), "rate": r.rate, "extend_to_32": extend_arm(arms[r.name], default)} for r in rows]}


def rescue_lines(res: dict) -> list[str]:
    """One line per arm: n, bound fraction with its interval, the default's on the same seeds, p, cost, verdict."""
    out = [f"rescue arms against the default, bound by {res['horizon']:,} on the same seeds "
           f"(two-sided Fisher, Holm-adjusted over {len(res['arms'])} arms; goal {GOAL:.0%} of >= {GOAL_MIN_SEEDS} seeds)"]
    for a in res["arms"]:
        if not a["known"]:
            out.append(f"  {a['name']}: no finished seed shared with the default")
            continue
        lo, hi = a["ci95"]
        out.append(f"  {a['name']}: {a['bound']}/{a['known']} bound ({lo:.2f}-{hi:.2f}) against the default's "
                   f"{a['default_bound']}/{a['default_known']}; Fisher p {a['fisher_p']:.3g}, Holm {a['holm_p']:.3g}; "
                   f"log-rank p {_p(a['logrank_p'])}, Holm {_p(a['logrank_holm_p'])}; "
                   f"mean steps {a['cost_steps']:,.0f} against {a['default_cost_steps']:,.0f}; {a['verdict']} "
                   f"(power to find an arm at the goal: {a['power_at_goal']:.2f})"
                   + ("" if a["known"] >= GOAL_MIN_SEEDS else
                      f"; extend to 32 seeds: {'yes' if a['extend_to_32'] else 'no'}"))
    return out


def _p(p: float | None) -> str:
    return "-" if p is None else f"{p:.3g}"
