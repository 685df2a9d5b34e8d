"""Attention measures (claims C2, C10) read from ``hook_pattern`` through ``run_with_cache``.

Layer numbers follow the paper: "layer 1" is ``blocks.0``, "layer 2" is ``blocks.1``.

- ``prev_token``: mean layer-1 attention from each assignment value token to its variable (the
  token just before it in the paper's layout); ``prev_token_argmax``: fraction of value tokens
  whose most-attended key is their variable.
- ``eq_to_operands``: layer-1 attention mass from the final ``=`` on the two operand positions;
  ``eq_to_left`` / ``eq_to_right``: the same on each operand separately (their sum hides a change
  in how the split between them moves).
- ``routing_acc``: among sequences with variable operands, the fraction where layer 2's most
  attended keys from the final ``=`` (as many as there are variable operands) are exactly the
  value tokens bound to the queried variables; ``routing_mass``: the attention mass on them;
  ``routing_acc_1var`` / ``routing_acc_2var``: the same by the number of variable operands.
- ``summand_routing``: over every sequence, the fraction where layer 2's most attended keys from the
  final ``=`` are exactly the two summands' value tokens (a variable operand's bound value, a constant
  operand itself); ``summand_mass``: the attention mass on them.  Added after the released run and
  three seeds showed that layer 2 attends to both summands: in 1-var sequences the constant operand
  often outranks the bound value, which ``routing_acc`` counts as a miss.
- ``summand_routing`` of one set alone (:func:`summand_routing`): read per checkpoint on each
  restricted (variable, side) set for C3b, whether refinement fixes routing.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

import numpy as np
import torch

from assign_add.analysis.positions import Positions, find_positions
from assign_add.model.hooked import AssignAddTransformer
from assign_add.task.generator import Batch
from assign_add.task.vocab import Vocab


@dataclass
class AttentionResult:
    prev_token: float
    prev_token_argmax: float
    eq_to_operands: float
    eq_to_left: float
    eq_to_right: float
    routing_acc: float
    routing_mass: float
    routing_acc_1var: float
    routing_acc_2var: float
    summand_routing: float
    summand_mass: float

    def to_json(self) -> dict:
        return asdict(self)


@torch.no_grad()
def patterns(model: AssignAddTransformer, tokens: np.ndarray) -> list[torch.Tensor]:
    """Head-averaged attention pattern of every layer, ``[batch, query, key]`` each."""
    _, cache = model.run_with_cache(torch.as_tensor(tokens), names_filter=lambda n: n.endswith("hook_pattern"))
    return [cache["pattern", layer].mean(dim=1) for layer in range(model.cfg.n_layers)]


def first_layer_pattern(model: AssignAddTransformer, tokens: np.ndarray) -> np.ndarray:
    """Head-averaged layer-1 attention pattern ``[batch, query, key]`` (nothing after it is computed)."""
    name = "blocks.0.attn.hook_pattern"
    return model.cache_until(torch.as_tensor(tokens), {name}, stop_at=name)[name].mean(dim=1).numpy()


def previous_token(first: np.ndarray, batch: Batch, vocab: Vocab, pos: Positions | None = None) -> tuple[float, float]:
    """(mean layer-1 attention of value tokens on their variable, share whose top key it is)."""
    pos = find_positions(batch, vocab) if pos is None else pos
    if not len(pos.value_rows):
        return float("nan"), float("nan")
    to_var = first[pos.value_rows, pos.value_pos, pos.var_pos]
    top_key = first[pos.value_rows, pos.value_pos].argmax(axis=-1)
    return float(to_var.mean()), float((top_key == pos.var_pos).mean())


def scores_from_patterns(first: np.ndarray, last: np.ndarray, batch: Batch, vocab: Vocab) -> AttentionResult:
    """The measures from layer-1 (``first``) and layer-2 (``last``) patterns [batch, q, k]."""
    pos = find_positions(batch, vocab)
    prev_mean, prev_argmax = previous_token(first, batch, vocab, pos)
    lpos, rpos = vocab.operand_positions()
    eq = first[:, -1]
    eq_mass = eq[:, lpos] + eq[:, rpos]
    bound = np.stack([pos.lhs_value_pos, pos.rhs_value_pos], axis=1)  # [B, 2]
    n_var = (bound >= 0).sum(axis=1)
    has = n_var > 0
    final = last[:, -1]  # [B, key]
    order = np.argsort(-final, axis=-1)
    hits, mass = [], []
    for i in np.nonzero(has)[0]:
        want = set(bound[i][bound[i] >= 0].tolist())
        hits.append(set(order[i, : len(want)].tolist()) == want)
        mass.append(final[i, list(want)].sum())
    hits_by = {n: [h for h, v in zip(hits, n_var[has]) if v == n] for n in (1, 2)}
    s_hits, s_mass = summand_hits(final, bound, vocab)
    return AttentionResult(
        prev_token=prev_mean,
        prev_token_argmax=prev_argmax,
        eq_to_operands=float(eq_mass.mean()),
        eq_to_left=float(eq[:, lpos].mean()),
        eq_to_right=float(eq[:, rpos].mean()),
        routing_acc=_mean(hits),
        routing_mass=_mean(mass),
        routing_acc_1var=_mean(hits_by[1]),
        routing_acc_2var=_mean(hits_by[2]),
        summand_routing=_mean(s_hits),
        summand_mass=_mean(s_mass),
    )


def summand_hits(final: np.ndarray, bound: np.ndarray, vocab: Vocab) -> tuple[list[bool], list[float]]:
    """Per sequence: whether the final ``=``'s top layer-2 keys (``final`` [B, key]) are exactly the two
    summands' value tokens (``bound`` [B, 2]: a variable operand's bound value position, -1 for a
    constant, which is then read at its operand position), and the attention mass on them."""
    lpos, rpos = vocab.operand_positions()
    summands = np.where(bound >= 0, bound, np.array([lpos, rpos]))  # [B, 2]: where each summand's value is
    order = np.argsort(-final, axis=-1)
    hits, mass = [], []
    for i, row in enumerate(summands.tolist()):
        want = set(row)
        hits.append(set(order[i, : len(want)].tolist()) == want)
        mass.append(float(final[i, sorted(want)].sum()))
    return hits, mass


@torch.no_grad()
def summand_routing(model: AssignAddTransformer, batch: Batch, vocab: Vocab) -> float:
    """The share of ``batch``'s sequences whose final ``=`` routes onto both summands in layer 2 (C10's
    measure), from that layer's pattern alone (the forward pass stops there)."""
    name = f"blocks.{model.cfg.n_layers - 1}.attn.hook_pattern"
    final = model.cache_until(torch.as_tensor(batch.tokens), {name}, stop_at=name)[name].mean(dim=1)[:, -1].numpy()
    pos = find_positions(batch, vocab)
    hits, _ = summand_hits(final, np.stack([pos.lhs_value_pos, pos.rhs_value_pos], axis=1), vocab)
    return _mean(hits)


def _mean(values: list) -> float:
    return float(np.mean(values)) if len(values) else float("nan")


def attention_scores(model: AssignAddTransformer, batch: Batch, vocab: Vocab) -> AttentionResult:
    pats = patterns(model, batch.tokens)
    return scores_from_patterns(pats[0].numpy(), pats[-1].numpy(), batch, vocab)


def example_patterns(model: AssignAddTransformer, tokens: np.ndarray) -> list[np.ndarray]:
    """Per-layer head-averaged patterns of one sequence, for figures."""
    return [p[0].numpy() for p in patterns(model, tokens[None] if tokens.ndim == 1 else tokens[:1])]
