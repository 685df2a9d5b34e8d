"""Training dynamics: per-set accuracy curves and the three phases (addition, binding, refinement)."""

from __future__ import annotations

from dataclasses import asdict, dataclass

import numpy as np

from assign_add.analysis import criteria as C


@dataclass
class Curves:
    steps: list[int]
    acc: dict[str, list[float]]  # set name -> accuracy per step (nan where not evaluated)


@dataclass
class Phases:
    addition: int | None
    binding: int | None
    binding_rise: float | None
    binding_from: float | None
    binding_to: float | None
    binding_reached: int | None
    refinement: int | None
    refinement_stable: int | None
    in_paper_order: bool
    notes: list[str]
    last_step: int | None = None  # the last evaluated step: a run not bound by then is censored there

    @property
    def bound(self) -> bool:
        return self.binding_reached is not None

    def to_json(self) -> dict:
        return asdict(self)


def curves_from_records(records: list[dict]) -> Curves:
    """Curves from metrics.jsonl / evals.jsonl records (each with "step" and "acc")."""
    records = sorted(records, key=lambda r: r["step"])
    names: list[str] = []
    for r in records:
        names += [n for n in r["acc"] if n not in names]
    steps = [int(r["step"]) for r in records]
    acc = {n: [float(r["acc"].get(n, np.nan)) for r in records] for n in names}
    return Curves(steps, acc)


def first_at(steps: list[int], values, threshold: float, after: int = -1) -> int | None:
    """The first evaluated step after ``after`` whose value is ≥ ``threshold``."""
    for s, v in zip(steps, values):
        if s > after and v >= threshold:
            return s
    return None


def _stays_from(steps: list[int], values: np.ndarray, threshold: float, after: int = -1) -> int | None:
    """First step after ``after`` from which every later value is >= threshold."""
    ok = values >= threshold
    result = None
    for i in range(len(steps) - 1, -1, -1):
        if steps[i] <= after or not ok[i]:
            break
        result = steps[i]
    return result


def _binding_interval(steps: list[int], acc: np.ndarray, reached: int | None) -> int:
    """Index i of the evaluation interval (steps[i], steps[i+1]] with the largest rise of the binding
    set: within the climb to the binding level when the run reaches it (see ``criteria``), else anywhere."""
    diffs = np.diff(acc)
    if reached is None:
        return int(np.nanargmax(diffs))
    end = steps.index(reached)  # the climb's last interval ends here
    below = [j for j in range(end) if acc[j] < C.BINDING_CLIMB_FROM]
    start = below[-1] if below else 0
    if start >= end:  # reached at the first evaluation: no interval before it
        return int(np.nanargmax(diffs))
    return start + int(np.nanargmax(diffs[start:end]))


def forbidden_mean(acc: dict[str, list[float]]) -> np.ndarray | None:
    """The mean accuracy over the forbidden-position sets present, per evaluation; None without any."""
    present = [n for n in C.REFINEMENT_SETS if n in acc]
    return np.mean([np.asarray(acc[n], dtype=float) for n in present], axis=0) if present else None


def detect_phases(curves: Curves) -> Phases:
    steps = curves.steps
    notes: list[str] = []
    addition = binding = reached = refinement = stable = None
    rise = frm = to = None
    if C.ADDITION_SET in curves.acc:
        addition = first_at(steps, np.asarray(curves.acc[C.ADDITION_SET]), C.ADDITION_ACC)
    else:
        notes.append(f"no {C.ADDITION_SET} accuracy: addition phase not measured")
    if C.BINDING_SET in curves.acc and len(steps) > 1:
        b = np.asarray(curves.acc[C.BINDING_SET])
        reached = first_at(steps, b, C.BINDING_ACC)
        i = _binding_interval(steps, b, reached)
        if reached is None:  # censored: no binding step at all (its largest rise is noise, or addition's)
            notes.append(f"not bound by step {steps[-1]}: {C.BINDING_SET} never reached {C.BINDING_ACC:.0%} "
                         f"(peak {np.nanmax(b):.2f}; largest rise {b[i + 1] - b[i]:+.2f} at step {steps[i + 1]})")
        else:
            binding, rise, frm, to = steps[i + 1], float(b[i + 1] - b[i]), float(b[i]), float(b[i + 1])
            if steps[i + 1] - steps[i] > 200:
                notes.append(f"binding located only to the interval {steps[i]}..{steps[i + 1]} (sparse evaluations)")
    else:
        notes.append(f"no {C.BINDING_SET} accuracy: binding phase not measured")
    mean = forbidden_mean(curves.acc)
    present = mean is not None
    if present and binding is not None:
        refinement = first_at(steps, mean, C.REFINEMENT_ACC, after=binding)
        stable = _stays_from(steps, mean, C.REFINEMENT_STABLE_ACC, after=binding)
        if refinement is None:
            notes.append("forbidden-position accuracy never reached the refinement threshold after binding")
    elif not present:
        notes.append("no forbidden-position sets (no restrictions): refinement not measured")
    in_order = addition is not None and binding is not None and refinement is not None and addition <= binding < refinement
    return Phases(addition, binding, rise, frm, to, reached, refinement, stable, in_order, notes,
                  steps[-1] if steps else None)


def phase_marks(records: list[dict]) -> dict[str, int | None]:
    """The step of each phase in a run's ``metrics.jsonl`` records (None: not seen): the marks sent to
    TensorBoard / W&B at the end of training."""
    phases = detect_phases(curves_from_records(records))
    return {"addition": phases.addition, "binding": phases.binding, "refinement": phases.refinement}
