"""Vectorised sequence sampling (numpy; no Python loop over sequences).

A sequence is built from its resolved operands ``(n, m)`` and the variables that carry them
(``lhs_var``/``rhs_var``, or -1 for a constant), as the authors describe:

1. the number of assignments ``k`` is uniform in ``[max(min_assignments, #queried vars),
   max_assignments]``;
2. the assigned variables are distinct: the queried ones plus random distractors with random
   values; the assignments are shuffled;
3. the remaining PAD tokens are dropped one at a time into uniformly chosen gaps among the
   ``k + 1`` gaps around the assignments (``task.padding = "end"``: all after the last one, so that
   each assignment slot sits at a fixed position);
4. the query (``+ lhs rhs =`` or ``lhs + rhs =``) fills the last four positions.

:class:`Sampler` draws training batches with the configured mixture; the batch for step ``s``
comes from ``numpy.random.default_rng([seed, s])``, so a run's data is a pure function of its
seed and step (which makes resuming exact).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import numpy as np

from assign_add.config import ConfigError, TaskConfig
from assign_add.task.partitions import Partitions, build_partitions
from assign_add.task.vocab import Vocab

ZERO_VAR, VAR_LEFT, VAR_RIGHT, TWO_VAR = range(4)
CATEGORY_NAMES = ("0var", "1var_left", "1var_right", "2var")


@dataclass
class Batch:
    """Sequences with their ground truth.  All arrays share the leading batch dimension."""

    tokens: np.ndarray  # [batch, n_ctx] int64
    answers: np.ndarray  # [batch] int64, (n + m) mod N
    category: np.ndarray  # [batch] int64, index into CATEGORY_NAMES
    n: np.ndarray  # [batch] value of the left operand
    m: np.ndarray  # [batch] value of the right operand
    lhs_var: np.ndarray  # [batch] variable index of the left operand, -1 for a constant
    rhs_var: np.ndarray  # [batch] variable index of the right operand, -1 for a constant

    def __len__(self) -> int:
        return int(self.tokens.shape[0])

    def take(self, index: np.ndarray | slice) -> "Batch":
        return Batch(**{k: v[index] for k, v in self.__dict__.items()})

    def arrays(self) -> dict[str, np.ndarray]:
        return dict(self.__dict__)

    @classmethod
    def concat(cls, batches: list["Batch"]) -> "Batch":
        return cls(**{k: np.concatenate([getattr(b, k) for b in batches]) for k in batches[0].__dict__})


def build_sequences(
    rng: np.random.Generator,
    vocab: Vocab,
    n: np.ndarray,
    m: np.ndarray,
    lhs_var: np.ndarray,
    rhs_var: np.ndarray,
    min_assignments: int,
    max_assignments: int,
    padding: str = "random",
) -> Batch:
    """Token sequences for given operands and operand variables (see module docstring).  ``padding``
    "end" puts every PAD after the last assignment instead of into random gaps (the same random draws
    are made, so the two differ in the PADs' places only)."""
    n = np.asarray(n, dtype=np.int64)
    m = np.asarray(m, dtype=np.int64)
    lhs_var = np.asarray(lhs_var, dtype=np.int64)
    rhs_var = np.asarray(rhs_var, dtype=np.int64)
    size = n.shape[0]
    n_vars = len(vocab.variables)
    max_k = max_assignments
    alen = vocab.assign_len
    rows = np.arange(size)

    # 1. number of assignments
    n_queried = (lhs_var >= 0).astype(np.int64) + (rhs_var >= 0)
    lo = np.maximum(min_assignments, n_queried)
    k = lo + (rng.random(size) * (max_k - lo + 1)).astype(np.int64)

    # 2. distinct variables: queried ones first, then random distractors
    keys = rng.random((size, n_vars))
    has_l, has_r = lhs_var >= 0, rhs_var >= 0
    keys[rows[has_l], lhs_var[has_l]] = -2.0
    keys[rows[has_r], rhs_var[has_r]] = -1.0
    chosen = np.argsort(keys, axis=1)[:, :max_k]
    values = rng.integers(0, vocab.modulus, size=(size, max_k))
    values = np.where(chosen == lhs_var[:, None], n[:, None], values)
    values = np.where(chosen == rhs_var[:, None], m[:, None], values)
    #    shuffle the k real assignments; unused slots sort last
    slot = np.arange(max_k)[None, :]
    order_keys = rng.random((size, max_k))
    order_keys[slot >= k[:, None]] = 2.0
    perm = np.argsort(order_keys, axis=1)
    chosen = np.take_along_axis(chosen, perm, axis=1)
    values = np.take_along_axis(values, perm, axis=1)

    # 3. padding: each PAD falls into one of the k + 1 gaps, uniformly
    n_pad = vocab.region_len - k * alen
    max_pad = vocab.region_len - int(lo.min(initial=max_k)) * alen
    gaps = (rng.random((size, max(max_pad, 1))) * (k[:, None] + 1)).astype(np.int64)
    if padding == "end":
        gaps = np.broadcast_to(k[:, None], gaps.shape)
    valid = np.arange(max(max_pad, 1))[None, :] < n_pad[:, None]
    flat = (rows[:, None] * (max_k + 1) + gaps)[valid]
    counts = np.bincount(flat, minlength=size * (max_k + 1)).reshape(size, max_k + 1)
    start = slot * alen + np.cumsum(counts, axis=1)[:, :max_k]

    tokens = np.full((size, vocab.n_ctx), vocab.pad, dtype=np.int64)
    used = slot < k[:, None]
    r_idx = np.broadcast_to(rows[:, None], (size, max_k))[used]
    for offset, kind in enumerate(vocab.assignment_template()):
        cols = (start + offset)[used]
        if kind == "var":
            tokens[r_idx, cols] = (chosen + vocab.var_offset)[used]
        elif kind == "val":
            tokens[r_idx, cols] = values[used]
        else:
            tokens[r_idx, cols] = int(kind)  # type: ignore[call-overload]

    # 4. query
    base = vocab.region_len
    for offset, kind in enumerate(vocab.query_template()):
        if kind == "lhs":
            tokens[:, base + offset] = np.where(has_l, lhs_var + vocab.var_offset, n)
        elif kind == "rhs":
            tokens[:, base + offset] = np.where(has_r, rhs_var + vocab.var_offset, m)
        else:
            tokens[:, base + offset] = int(kind)  # type: ignore[call-overload]

    category = np.where(has_l & has_r, TWO_VAR, np.where(has_l, VAR_LEFT, np.where(has_r, VAR_RIGHT, ZERO_VAR)))
    return Batch(tokens, (n + m) % vocab.modulus, category.astype(np.int64), n, m, lhs_var, rhs_var)


@dataclass(frozen=True)
class SamplingSpec:
    """A distribution over sequences: query-type shares, operand pairs and variable candidates."""

    type_probs: tuple[float, float, float, float]
    pairs: np.ndarray  # [P, 2] resolved (n, m)
    left_vars: np.ndarray  # candidates for the variable of a var_left query
    right_vars: np.ndarray  # candidates for the variable of a var_right query
    var_pairs: np.ndarray  # [Q, 2] candidates for a two_var query


def sample(rng: np.random.Generator, vocab: Vocab, task: TaskConfig, spec: SamplingSpec, size: int) -> Batch:
    """Draw ``size`` sequences from ``spec``."""
    qtype = rng.choice(4, size=size, p=np.asarray(spec.type_probs, dtype=np.float64))
    pair = spec.pairs[rng.integers(0, len(spec.pairs), size=size)]
    lhs_var = np.full(size, -1, dtype=np.int64)
    rhs_var = np.full(size, -1, dtype=np.int64)
    draw = lambda cands: cands[rng.integers(0, len(cands), size=size)] if len(cands) else None  # noqa: E731
    left, right, both = draw(spec.left_vars), draw(spec.right_vars), draw(spec.var_pairs)
    if left is not None:
        lhs_var = np.where(qtype == VAR_LEFT, left, lhs_var)
    if right is not None:
        rhs_var = np.where(qtype == VAR_RIGHT, right, rhs_var)
    if both is not None:
        lhs_var = np.where(qtype == TWO_VAR, both[:, 0], lhs_var)
        rhs_var = np.where(qtype == TWO_VAR, both[:, 1], rhs_var)
    return build_sequences(rng, vocab, pair[:, 0], pair[:, 1], lhs_var, rhs_var, task.min_assignments, task.max_assignments,
                           task.padding)


def training_type_probs(task: TaskConfig) -> tuple[float, float, float, float]:
    """The mixture with the 2-var share scaled by ``r`` (the kept fraction of 2-var rows), renormalised."""
    w = np.asarray(task.mixture.as_list(), dtype=np.float64)
    w[TWO_VAR] *= task.r
    if w.sum() <= 0:
        raise ConfigError("task.mixture", "every query type has share 0 after scaling 2-var by r")
    w = w / w.sum()
    return tuple(float(x) for x in w)  # type: ignore[return-value]


def training_spec(task: TaskConfig, parts: Partitions) -> SamplingSpec:
    return SamplingSpec(
        training_type_probs(task), parts.train_pairs, parts.allowed_left, parts.allowed_right, parts.allowed_var_pairs
    )


class Sampler:
    """Training batches: the batch for step ``s`` depends only on (seed, s)."""

    def __init__(self, task: TaskConfig, seed: int, parts: Partitions | None = None) -> None:
        self.task = task
        self.vocab = Vocab.from_task(task)
        self.parts = parts if parts is not None else build_partitions(task)
        self.spec = training_spec(task, self.parts)
        self.early_spec = (training_spec(dataclasses.replace(task, mixture=task.early_mixture), self.parts)
                           if task.early_mixture_until > 0 else self.spec)
        self.seed = seed

    def spec_at(self, step: int) -> SamplingSpec:
        """The sampling spec of step ``step``: the early mixture's before ``task.early_mixture_until``."""
        return self.early_spec if step < self.task.early_mixture_until else self.spec

    def batch(self, step: int, size: int) -> Batch:
        rng = np.random.default_rng([self.seed, step])
        return sample(rng, self.vocab, self.task, self.spec_at(step), size)

