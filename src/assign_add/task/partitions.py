"""Data partitions: the training / held-out pair split and the position restrictions.

The split reproduces the authors' exactly: ``random.Random(split_seed).sample(pool, floor(f N^2))``
over ``pool = [(n, m) for n in range(N) for m in range(N)]``; the sampled pairs train, the rest
are held out.  With the paper preset this equals ``paper-artifacts/pairs.json``.
"""

from __future__ import annotations

import json
import math
import random
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from assign_add.config import TaskConfig
from assign_add.io import atomic_write_json


@dataclass(frozen=True)
class Partitions:
    """Everything a run needs to know about which data is allowed where.

    Pair arrays are ``[P, 2]`` int64 of resolved operand values (n, m), sorted.  Variable
    arrays hold variable *indices* (0-based, in ``TaskConfig.variables`` order); variable-pair
    arrays are ``[Q, 2]`` of (lhs, rhs) indices.
    """

    modulus: int
    train_pairs: np.ndarray
    heldout_pairs: np.ndarray
    allowed_left: np.ndarray
    allowed_right: np.ndarray
    forbidden_left: np.ndarray
    forbidden_right: np.ndarray
    allowed_var_pairs: np.ndarray
    one_forbidden_var_pairs: np.ndarray
    two_forbidden_var_pairs: np.ndarray

    def to_json(self, task: TaskConfig) -> dict:
        names = task.variables
        return {
            "modulus": self.modulus,
            "split_seed": task.split_seed,
            "f": task.f,
            "train_pairs": self.train_pairs.tolist(),
            "heldout_pairs": self.heldout_pairs.tolist(),
            "forbidden_left": [names[i] for i in self.forbidden_left],
            "forbidden_right": [names[i] for i in self.forbidden_right],
            "allowed_var_pairs": ["".join((names[a], names[b])) for a, b in self.allowed_var_pairs],
            "one_forbidden_var_pairs": ["".join((names[a], names[b])) for a, b in self.one_forbidden_var_pairs],
            "two_forbidden_var_pairs": ["".join((names[a], names[b])) for a, b in self.two_forbidden_var_pairs],
        }

    def save(self, path: Path, task: TaskConfig) -> None:
        atomic_write_json(path, self.to_json(task))

    @classmethod
    def from_json(cls, data: dict, task: TaskConfig) -> "Partitions":
        """The inverse of :meth:`to_json` (variable names resolved through ``task.variables``)."""
        index = {v: i for i, v in enumerate(task.variables)}
        vars_ = lambda names: np.asarray(sorted(index[v] for v in names), dtype=np.int64)  # noqa: E731
        pairs = lambda key: np.asarray(data[key], dtype=np.int64).reshape(-1, 2)  # noqa: E731
        var_pairs = lambda key: np.asarray([(index[a], index[b]) for a, b in data[key]], dtype=np.int64).reshape(-1, 2)  # noqa: E731
        fl, fr = vars_(data["forbidden_left"]), vars_(data["forbidden_right"])
        every = np.arange(len(task.variables), dtype=np.int64)
        return cls(
            modulus=int(data["modulus"]),
            train_pairs=pairs("train_pairs"),
            heldout_pairs=pairs("heldout_pairs"),
            allowed_left=np.setdiff1d(every, fl),
            allowed_right=np.setdiff1d(every, fr),
            forbidden_left=fl,
            forbidden_right=fr,
            allowed_var_pairs=var_pairs("allowed_var_pairs"),
            one_forbidden_var_pairs=var_pairs("one_forbidden_var_pairs"),
            two_forbidden_var_pairs=var_pairs("two_forbidden_var_pairs"),
        )

    @classmethod
    def load(cls, path: Path, task: TaskConfig) -> "Partitions":
        return cls.from_json(json.loads(Path(path).read_text()), task)


def split_pairs(modulus: int, f: float, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """(train, held-out) ordered pairs, each sorted lexicographically."""
    pool = [(n, m) for n in range(modulus) for m in range(modulus)]
    n_train = math.floor(f * len(pool) + 1e-9)
    train = sorted(random.Random(seed).sample(pool, n_train))
    train_set = set(train)
    heldout = [p for p in pool if p not in train_set]
    as_array = lambda ps: np.asarray(ps, dtype=np.int64).reshape(-1, 2)  # noqa: E731
    return as_array(train), as_array(heldout)


def build_partitions(task: TaskConfig) -> Partitions:
    train, heldout = split_pairs(task.modulus, task.f, task.split_seed)
    index = {v: i for i, v in enumerate(task.variables)}
    n_vars = len(task.variables)
    fl = sorted(index[v] for v in task.forbidden_left)
    fr = sorted(index[v] for v in task.forbidden_right)
    al = [i for i in range(n_vars) if i not in fl]
    ar = [i for i in range(n_vars) if i not in fr]
    groups: dict[int, list[tuple[int, int]]] = {0: [], 1: [], 2: []}
    for a in range(n_vars):
        for b in range(n_vars):
            if a != b:
                groups[int(a in fl) + int(b in fr)].append((a, b))
    arr = lambda xs, w=1: np.asarray(xs, dtype=np.int64).reshape(-1, w) if w > 1 else np.asarray(xs, dtype=np.int64)  # noqa: E731
    return Partitions(
        modulus=task.modulus,
        train_pairs=train,
        heldout_pairs=heldout,
        allowed_left=arr(al),
        allowed_right=arr(ar),
        forbidden_left=arr(fl),
        forbidden_right=arr(fr),
        allowed_var_pairs=arr(groups[0], 2),
        one_forbidden_var_pairs=arr(groups[1], 2),
        two_forbidden_var_pairs=arr(groups[2], 2),
    )


def load_pairs_json(path: Path) -> tuple[np.ndarray, np.ndarray]:
    """Read a ``pairs.json`` (ours or the authors'): (train, held-out) as sorted arrays."""
    data = json.loads(Path(path).read_text())
    train = np.asarray(sorted(map(tuple, data["train_pairs"])), dtype=np.int64).reshape(-1, 2)
    heldout = np.asarray(sorted(map(tuple, data["heldout_pairs"])), dtype=np.int64).reshape(-1, 2)
    return train, heldout
