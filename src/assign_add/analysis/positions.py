"""Where things are in a batch: value tokens, their variables, the tokens bound to the operands."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from assign_add.task.generator import Batch
from assign_add.task.vocab import Vocab


@dataclass
class Positions:
    value_rows: np.ndarray  # [P] sequence index of every assignment value token
    value_pos: np.ndarray  # [P] its position
    value_var: np.ndarray  # [P] index of the variable it is bound to
    var_pos: np.ndarray  # [P] position of that variable token
    lhs_value_pos: np.ndarray  # [B] position of the value bound to the left operand, -1 for a constant
    rhs_value_pos: np.ndarray  # [B]


def find_positions(batch: Batch, vocab: Vocab) -> Positions:
    tpl = vocab.assignment_template()
    offset = tpl.index("val") - tpl.index("var")
    tokens = batch.tokens
    region = tokens[:, : vocab.region_len]
    rows, pos = np.nonzero(vocab.is_var(region))
    var_idx = region[rows, pos] - vocab.var_offset
    size = len(batch)
    where = np.full((size, len(vocab.variables)), -1)
    where[rows, var_idx] = pos + offset

    def bound(var: np.ndarray) -> np.ndarray:
        return np.where(var >= 0, where[np.arange(size), np.maximum(var, 0)], -1)

    return Positions(rows, pos + offset, var_idx, pos, bound(batch.lhs_var), bound(batch.rhs_var))


def constant_form(batch: Batch, vocab: Vocab) -> np.ndarray:
    """The same sequences with each variable operand replaced by its value (same prefix)."""
    tokens = batch.tokens.copy()
    lpos, rpos = vocab.operand_positions()
    tokens[:, lpos] = batch.n
    tokens[:, rpos] = batch.m
    return tokens
