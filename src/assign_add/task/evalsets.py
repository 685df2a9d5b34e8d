"""Curated evaluation sets (fixed, seeded; exhaustive where the paper is).

Pools of ``task.eval_pool_size`` sequences (2,000 in the paper), each drawn with its own
generator ``default_rng([eval_seed, i])``:

==================  ==========================================================================
``0var_train``       both operands constants, training pairs
``0var_heldout``     both constants, held-out pairs
``1var_train``       one variable in an allowed position (left or right, 50/50), training pairs
``1var_forbidden``   one variable in a forbidden position, training pairs
``1var_heldout``     one variable in an allowed position, held-out pairs
``2var_train``       two variables, allowed positions, training pairs
``2var_forbidden1``  two variables, exactly one in a forbidden position, training pairs
``2var_forbidden2``  two variables, both in forbidden positions, training pairs
``2var_heldout``     two variables, allowed positions, held-out pairs
``1var_{v}_right``   variable ``v`` (forbidden on the right) as the right operand, training pairs
``1var_{v}_left``    variable ``v`` (forbidden on the left) as the left operand, training pairs
==================  ==========================================================================

Exhaustive sets (random prefixes from the eval seed):

- ``0var_heldout_all``: every held-out pair once as a 0-var sequence (1,045 in the paper: C5);
- ``2var_union``: held-out pairs x allowed variable pairs, plus training pairs x variable pairs
  with exactly one forbidden position, plus training pairs x pairs with both (193,580).

Sets that would be empty for a configuration (no held-out pairs at f = 1, no restrictions) are
omitted.  ``FORBIDDEN_SETS`` lists the sets behind the refinement phase.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from assign_add.config import TaskConfig
from assign_add.io import atomic_write
from assign_add.task.generator import Batch, SamplingSpec, build_sequences, sample
from assign_add.task.partitions import Partitions
from assign_add.task.vocab import Vocab

EXHAUSTIVE_SETS = ("0var_heldout_all", "2var_union")
FINAL_ONLY = ("2var_union",)  # too large to evaluate at every checkpoint: the last step only


def live(sets: dict[str, Batch]) -> dict[str, Batch]:
    """The sets evaluated during training and at every checkpoint: every set but the final-only ones."""
    return {k: v for k, v in sets.items() if k not in FINAL_ONLY}
FORBIDDEN_SETS = ("1var_forbidden", "2var_forbidden1", "2var_forbidden2")
EMPTY = np.zeros(0, dtype=np.int64)
EMPTY2 = np.zeros((0, 2), dtype=np.int64)


@dataclass(frozen=True)
class PoolDef:
    name: str
    spec: SamplingSpec


def pool_definitions(task: TaskConfig, parts: Partitions) -> list[PoolDef]:
    tr, ho = parts.train_pairs, parts.heldout_pairs
    al, ar, fl, fr = parts.allowed_left, parts.allowed_right, parts.forbidden_left, parts.forbidden_right

    def one_var(pairs: np.ndarray, left: np.ndarray, right: np.ndarray) -> SamplingSpec:
        pl, pr = (0.5, 0.5) if len(left) and len(right) else ((1.0, 0.0) if len(left) else (0.0, 1.0))
        return SamplingSpec((0.0, pl, pr, 0.0), pairs, left, right, EMPTY2)

    zero = lambda pairs: SamplingSpec((1.0, 0.0, 0.0, 0.0), pairs, EMPTY, EMPTY, EMPTY2)  # noqa: E731
    two = lambda pairs, vp: SamplingSpec((0.0, 0.0, 0.0, 1.0), pairs, EMPTY, EMPTY, vp)  # noqa: E731
    defs = [
        PoolDef("0var_train", zero(tr)),
        PoolDef("0var_heldout", zero(ho)),
        PoolDef("1var_train", one_var(tr, al, ar)),
        PoolDef("1var_forbidden", one_var(tr, fl, fr)),
        PoolDef("1var_heldout", one_var(ho, al, ar)),
        PoolDef("2var_train", two(tr, parts.allowed_var_pairs)),
        PoolDef("2var_forbidden1", two(tr, parts.one_forbidden_var_pairs)),
        PoolDef("2var_forbidden2", two(tr, parts.two_forbidden_var_pairs)),
        PoolDef("2var_heldout", two(ho, parts.allowed_var_pairs)),
    ]
    for v in fr:
        defs.append(PoolDef(f"1var_{task.variables[v]}_right", one_var(tr, EMPTY, np.asarray([v]))))
    for v in fl:
        defs.append(PoolDef(f"1var_{task.variables[v]}_left", one_var(tr, np.asarray([v]), EMPTY)))
    return [d for d in defs if _nonempty(d.spec)]


def _nonempty(spec: SamplingSpec) -> bool:
    if len(spec.pairs) == 0:
        return False
    p0, pl, pr, p2 = spec.type_probs
    return (p0 > 0) or (pl > 0 and len(spec.left_vars) > 0) or (pr > 0 and len(spec.right_vars) > 0) or (
        p2 > 0 and len(spec.var_pairs) > 0
    )


def set_names(task: TaskConfig, parts: Partitions) -> list[str]:
    """Names of the curated sets a run of ``task`` has (without building them)."""
    names = [d.name for d in pool_definitions(task, parts)]
    if len(parts.heldout_pairs):
        names.append("0var_heldout_all")
    if len(parts.heldout_pairs) * len(parts.allowed_var_pairs) + len(parts.train_pairs) * (
            len(parts.one_forbidden_var_pairs) + len(parts.two_forbidden_var_pairs)):
        names.append("2var_union")
    return names


def build_pools(task: TaskConfig, parts: Partitions) -> dict[str, Batch]:
    vocab = Vocab.from_task(task)
    out = {}
    for i, d in enumerate(pool_definitions(task, parts)):
        rng = np.random.default_rng([task.eval_seed, i])
        out[d.name] = sample(rng, vocab, task, d.spec, task.eval_pool_size)
    return out


def _cross(pairs: np.ndarray, var_pairs: np.ndarray) -> tuple[np.ndarray, ...]:
    """Every (pair, variable pair) combination as four flat arrays n, m, lhs_var, rhs_var."""
    p = np.repeat(pairs, len(var_pairs), axis=0)
    v = np.tile(var_pairs, (len(pairs), 1))
    return p[:, 0], p[:, 1], v[:, 0], v[:, 1]


def build_exhaustive(task: TaskConfig, parts: Partitions) -> dict[str, Batch]:
    vocab = Vocab.from_task(task)
    out: dict[str, Batch] = {}
    build = lambda rng, n, m, lv, rv: build_sequences(  # noqa: E731
        rng, vocab, n, m, lv, rv, task.min_assignments, task.max_assignments, task.padding
    )
    ho = parts.heldout_pairs
    if len(ho):
        none = np.full(len(ho), -1, dtype=np.int64)
        out["0var_heldout_all"] = build(np.random.default_rng([task.eval_seed, 1000]), ho[:, 0], ho[:, 1], none, none)
    chunks = [
        _cross(ho, parts.allowed_var_pairs),
        _cross(parts.train_pairs, parts.one_forbidden_var_pairs),
        _cross(parts.train_pairs, parts.two_forbidden_var_pairs),
    ]
    n, m, lv, rv = (np.concatenate([c[i] for c in chunks]) for i in range(4))
    if len(n):
        out["2var_union"] = build(np.random.default_rng([task.eval_seed, 1001]), n, m, lv, rv)
    return out


def build_eval_sets(task: TaskConfig, parts: Partitions, exhaustive: bool = True) -> dict[str, Batch]:
    """All curated sets, pools first."""
    sets = build_pools(task, parts)
    if exhaustive:
        sets.update(build_exhaustive(task, parts))
    return sets


def save_eval_sets(sets: dict[str, Batch], path: Path) -> None:
    arrays = {}
    for name, batch in sets.items():
        for key, value in batch.arrays().items():
            dtype = np.uint8 if key == "tokens" and value.max(initial=0) < 256 else np.int16
            if key in ("n", "m", "answers", "lhs_var", "rhs_var", "category"):
                dtype = np.int16
            arrays[f"{name}/{key}"] = value.astype(dtype)

    def write(tmp: Path) -> None:
        with open(tmp, "wb") as fh:
            np.savez_compressed(fh, **arrays)

    atomic_write(path, write)


def load_eval_sets(path: Path) -> dict[str, Batch]:
    with np.load(path) as data:
        grouped: dict[str, dict[str, np.ndarray]] = {}
        for key in data.files:
            name, field = key.rsplit("/", 1)
            grouped.setdefault(name, {})[field] = data[key].astype(np.int64)
    return {name: Batch(**fields) for name, fields in grouped.items()}
