"""The words of a verdict and how one claim's verdicts over seeds become one.

A claim's result (:class:`ClaimResult`) carries its measured value, a readable detail and a verdict
from a fixed vocabulary; over several seeds :func:`aggregate` applies ``AGGREGATE_RULE``.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

import numpy as np

HOLDS, FAILS, NOT_MEASURED, MIXED = "holds", "does not hold", "not measured", "mixed"
NOT_BOUND = "not bound by"  # verdict prefix: "not bound by 20,000"
NOT_CONVERGED = "not converged"

AGGREGATE_RULE = ("over seeds: claims that presuppose the binding circuit (C2–C4, C8–C11) are judged over the seeds "
                  "that bound, the others shown as 'not bound by T' and not counted; C1 and C5 over all seeds. A "
                  "verdict shared by every seed that measured the claim is kept (holds, does not hold); "
                  "seeds that disagree give 'mixed', with how many seeds it holds in; the value is the mean ± sd "
                  "(n − 1) over seeds, each seed's value beside it")

@dataclass
class ClaimResult:
    id: str
    value: float | None
    detail: str
    verdict: str
    reason: str = ""
    robustness: str = ""  # "robust" or "fragile: which cut, moved how, gives which verdict" (±20 % of each cut)
    under_previous: str = ""  # the verdict under a cut as it was before it was changed after seeing data

    def to_json(self) -> dict:
        return asdict(self)


@dataclass
class Aggregate:
    """One claim over several seeds of our runs."""

    id: str
    mean: float | None
    sd: float | None
    per_seed: list[float | None]
    verdict: str
    reason: str
    robustness: str = ""  # "robust" when every seed's verdict is, else which seeds are fragile and why


def aggregate(results: list[ClaimResult]) -> Aggregate:
    """The rule in ``AGGREGATE_RULE``; "not measured" when no seed measured the claim; the binding
    row ("B") says how many seeds bound by when."""
    if results[0].id == "B":
        return aggregate_binding(results)
    vals = [r.value for r in results]
    nums = [v for v in vals if v is not None]
    unbound = [r.verdict for r in results if r.verdict.startswith(NOT_BOUND)]
    measured = [r.verdict for r in results if r.verdict != NOT_MEASURED and not r.verdict.startswith(NOT_BOUND)]
    if not measured:
        if unbound:
            return Aggregate(results[0].id, None, None, vals, unbound[0] if len(set(unbound)) == 1 else NOT_BOUND,
                             f"no seed bound: {len(unbound)} of {len(results)} not bound")
        return Aggregate(results[0].id, None, None, vals, NOT_MEASURED, results[0].reason)
    n_hold = sum(v == HOLDS for v in measured)
    verdict = measured[0] if len(set(measured)) == 1 else MIXED
    reason = "" if verdict == HOLDS else f"holds in {n_hold} of {len(measured)} seeds"
    if unbound:
        reason = "; ".join(x for x in (reason, f"judged over the {len(measured)} seeds that bound; {len(unbound)} "
                                               f"{'seed' if len(unbound) == 1 else 'seeds'} not bound (not counted)") if x)
    return Aggregate(results[0].id, *_mean_sd_over_seeds(nums), vals, verdict, reason, robustness_over_seeds(results))


def robustness_over_seeds(results: list[ClaimResult]) -> str:
    labels = [(i, r.robustness) for i, r in enumerate(results) if r.robustness]
    fragile = [(i, lab) for i, lab in labels if lab != "robust"]
    if not labels:
        return ""
    if not fragile:
        return "robust"
    i, first = fragile[0]
    return f"fragile in {len(fragile)} of {len(labels)} seeds (seed #{i + 1}: {first.removeprefix('fragile: ')})"


def aggregate_binding(results: list[ClaimResult]) -> Aggregate:
    """"k of n seeds bound by T": the value is the mean binding step of the seeds that bound (the
    report's phase-timing section gives the censored, Kaplan–Meier median)."""
    vals = [r.value for r in results]
    nums = [v for v in vals if v is not None]
    measured = [r for r in results if r.verdict != NOT_MEASURED]
    if not measured:
        return Aggregate("B", None, None, vals, NOT_MEASURED, results[0].reason)
    unbound = [r for r in measured if r.verdict.startswith(NOT_BOUND)]
    ends = sorted({r.verdict[len(NOT_BOUND):].strip() for r in unbound})
    by = f" by {ends[0]}" if len(ends) == 1 else ""
    count = f"{len(measured) - len(unbound)} of {len(measured)} seeds bound" + (by if unbound else "")
    verdict = HOLDS if not unbound else count
    reason = count if not unbound else (
        "mean over the seeds that bound; the median with the others censored is in the phase-timing section" if nums
        else "")
    return Aggregate("B", *_mean_sd_over_seeds(nums), vals, verdict, reason, robustness_over_seeds(results))


def _mean_sd_over_seeds(nums: list[float]) -> tuple[float | None, float | None]:
    """Mean and sd (n − 1; 0 for one seed) of the seeds' values; None without any."""
    if not nums:
        return None, None
    return float(np.mean(nums)), float(np.std(nums, ddof=1)) if len(nums) > 1 else 0.0
