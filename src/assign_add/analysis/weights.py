"""Weight-only progress measures (no data needed) and the layer-2 QK identity (claim C10).

- ``ov_mlp_addition_acc``: for every (n, m), x = E[n]·OV₂ + E[m]·OV₂ goes through the layer-2 MLP
  (with its residual) and the unembedding; the fraction whose argmax is (n + m) mod N.
  (Scaling x, e.g. by the ½ of an even attention split, leaves the argmax unchanged: ReLU is
  positively homogeneous.)
- ``pos_prev_token``: positional layer-1 QK, (W_pos W_Q)(W_pos W_K)ᵀ: the fraction of query
  positions 1 … region_len−1 whose highest-scoring earlier key is the previous position.
- ``qk2_identity``: M = (E_var·OV₁)·W_Q₂W_K₂ᵀ·(E_var·OV₁)ᵀ over the variables, the fraction of rows
  whose argmax is the diagonal (chance 1/#variables); ``qk2_margin``: mean over rows of
  (diagonal − largest off-diagonal) / std(M); ``qk2_direct_identity``: the same without OV₁.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

import numpy as np
import torch
from transformer_lens import FactoredMatrix

from assign_add.model.hooked import AssignAddTransformer
from assign_add.task.vocab import Vocab


@dataclass
class WeightMeasures:
    ov_mlp_addition_acc: float
    pos_prev_token: float
    qk2_identity: float
    qk2_margin: float
    qk2_direct_identity: float

    def to_json(self) -> dict:
        return asdict(self)


def ov_circuit(model: AssignAddTransformer, layer: int) -> torch.Tensor:
    """Sum over heads of W_V W_O, ``[d_model, d_model]``."""
    attn = model.blocks[layer].attn
    return torch.einsum("hde,hef->df", attn.W_V, attn.W_O)


def qk_factored(model: AssignAddTransformer, layer: int, head: int = 0) -> FactoredMatrix:
    attn = model.blocks[layer].attn
    return FactoredMatrix(attn.W_Q[head], attn.W_K[head].T)


@torch.no_grad()
def ov_mlp_addition_acc(model: AssignAddTransformer) -> float:
    n_out = model.cfg.d_vocab_out
    last = model.blocks[-1]
    x = model.embed.W_E[:n_out] @ ov_circuit(model, model.cfg.n_layers - 1)  # [N, d]
    pre = x[:, None, :] + x[None, :, :]  # [N, N, d]
    out = pre + last.mlp(pre) if last.mlp is not None else pre
    pred = (out @ model.unembed.W_U).argmax(-1)
    target = (torch.arange(n_out)[:, None] + torch.arange(n_out)[None, :]) % n_out
    return float((pred == target).float().mean())


@torch.no_grad()
def pos_prev_token(model: AssignAddTransformer, vocab: Vocab, head: int = 0) -> float:
    w_pos = model.pos_embed.W_pos
    scores = qk_factored(model, 0, head).AB
    s = w_pos @ scores @ w_pos.T  # [T, T]
    hits = []
    for i in range(1, vocab.region_len):
        hits.append(int(s[i, : i + 1].argmax()) == i - 1)
    return float(np.mean(hits))


@torch.no_grad()
def variable_qk_matrix(model: AssignAddTransformer, vocab: Vocab, through_ov1: bool = True) -> np.ndarray:
    """(E_var·OV₁)·QK₂·(E_var·OV₁)ᵀ summed over layer-2 heads, ``[n_vars, n_vars]``."""
    e_var = model.embed.W_E[vocab.var_offset : vocab.size]
    basis = e_var @ ov_circuit(model, 0) if through_ov1 else e_var
    last = model.cfg.n_layers - 1
    total = sum(
        (FactoredMatrix(basis @ model.blocks[last].attn.W_Q[h], (basis @ model.blocks[last].attn.W_K[h]).T)).AB
        for h in range(model.cfg.n_heads)
    )
    return total.numpy()


def identity_scores(matrix: np.ndarray) -> tuple[float, float]:
    """(fraction of rows with the diagonal as argmax, mean normalised diagonal margin)."""
    n = matrix.shape[0]
    diag = np.diag(matrix)
    off = matrix + np.diag(np.full(n, -np.inf))
    margin = (diag - off.max(axis=1)) / (matrix.std() + 1e-12)
    return float((matrix.argmax(axis=1) == np.arange(n)).mean()), float(margin.mean())


def weight_measures(model: AssignAddTransformer, vocab: Vocab) -> WeightMeasures:
    ident, margin = identity_scores(variable_qk_matrix(model, vocab))
    direct, _ = identity_scores(variable_qk_matrix(model, vocab, through_ov1=False))
    return WeightMeasures(ov_mlp_addition_acc(model), pos_prev_token(model, vocab), ident, margin, direct)
