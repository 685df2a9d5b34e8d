"""The words of a verdict and how one claim's verdicts over seeds become one.

A claim's result (:class:`ClaimResult`) carries its measured value, a readable detail and a verdict
from a fixed vocabulary; over several seeds :func:`aggregate` applies ``AGGREGATE_RULE``.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

import numpy as np

from assign_add.stats import wilson_interval

HOLDS, FAILS, NOT_MEASURED, MIXED = "holds", "does not hold", "not measured", "mixed"
NOT_BOUND = "not bound by"  # verdict prefix: "not bound by 20,000"
NOT_FINISHED = "not finished by"  # verdict prefix: the claim's phase was still under way at the run's end
AT_EDGE = "at the edge"  # the verdict flips when one of its cuts moves within ±20 %: neither holds nor fails
NOT_CONVERGED = "not converged"
NOT_RESOLVED = "not resolved"  # C6/C7: the threshold's interval is missing or too wide to place it
# C11 when the blocks form but the gradient predicts them no better than the checkpoint's own QK₂
NOT_LED = "the blocks form; the gradient does not lead them"
JUDGED = (HOLDS, FAILS, NOT_LED)  # the verdicts that count in "holds in k of n judged"

AGGREGATE_RULE = ("over seeds: a seed is judged on a claim only when the claim's phase finished in it — claims that "
                  "presuppose the binding circuit (C2–C4, C8–C11) only in seeds that bound ('not bound by T' "
                  "otherwise), claims about a later phase (C3, C4: refinement) only where that phase finished "
                  "('not finished by T'); a seed whose value lies within ±20 % of a cut (the verdict flips when the "
                  "cut moves that far) is 'at the edge'. Neither counts as a counterexample. Over the judged seeds: "
                  "'holds' when it holds in all, 'does not hold' when in none, else 'mixed', each with 'holds in k "
                  "of n judged' and its 95 % Wilson interval; the value is the mean ± sd (n − 1) over seeds, each "
                  "seed's value beside it")


def is_censored(verdict: str) -> bool:
    """A seed whose phase had not happened by the end of its run: nothing to judge yet."""
    return verdict.startswith((NOT_BOUND, NOT_FINISHED))

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
    holds: int = 0  # seeds in which it holds, of
    judged: int = 0  # the seeds judged (phase finished, not at the edge)
    interval: tuple[float, float] | None = None  # 95 % Wilson interval of holds / judged


def aggregate(results: list[ClaimResult]) -> Aggregate:
    """The rule in ``AGGREGATE_RULE``; "not measured" when no seed measured the claim; the binding
    row ("B") says how many seeds bound by when."""
    if results[0].id == "B":
        return aggregate_binding(results)
    vals = [r.value for r in results]
    nums = [v for v in vals if v is not None]
    verdicts = [r.verdict for r in results]
    unbound = [v for v in verdicts if v.startswith(NOT_BOUND)]
    unfinished = [v for v in verdicts if v.startswith(NOT_FINISHED)]
    edge = [v for v in verdicts if v == AT_EDGE]
    judged = [v for v in verdicts if v in JUDGED]
    k, n = sum(v == HOLDS for v in judged), len(judged)
    cid = results[0].id
    if not judged:
        verdict = next((v for v in (AT_EDGE if edge else None, unfinished[0] if unfinished else None,
                                    unbound[0] if unbound else None) if v), NOT_MEASURED)
        if verdict == NOT_MEASURED:
            return Aggregate(cid, None, None, vals, NOT_MEASURED, results[0].reason)
        reason = _counts_text(len(results), 0, 0, edge, unfinished, unbound)
        return Aggregate(cid, *_mean_sd_over_seeds(nums), vals, verdict, reason, robustness_over_seeds(results))
    verdict = HOLDS if k == n else (FAILS if k == 0 else MIXED)
    if verdict == FAILS and all(v == NOT_LED for v in judged):
        verdict = NOT_LED
    reason = _counts_text(len(results), k, n, edge, unfinished, unbound)
    return Aggregate(cid, *_mean_sd_over_seeds(nums), vals, verdict, reason, robustness_over_seeds(results),
                     k, n, wilson_interval(k, n))


def _counts_text(total: int, k: int, n: int, edge: list, unfinished: list, unbound: list) -> str:
    """'holds in k of n judged (95 % Wilson lo–hi)' and why the other seeds were not judged."""
    parts = []
    if n:
        lo, hi = wilson_interval(k, n)
        parts.append(f"holds in {k} of {n} judged (95 % Wilson {lo:.2f}–{hi:.2f})")
    if edge:
        parts.append(f"at the edge of a cut in {len(edge)}")
    if unfinished:
        parts.append(f"phase not finished by the end in {len(unfinished)} ({unfinished[0]})")
    if unbound:
        parts.append(f"not bound in {len(unbound)} (not judged)")
    if unfinished or unbound:
        parts.append(f"phase finished by the end: {total - len(unfinished) - len(unbound)} of {total}")
    return "; ".join(parts)


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
