"""Gradient analysis (claim C11): the negative loss gradient on the layer-2 QK matrix.

With scores S = x_q · W_QK · x_kᵀ / √d_head (W_QK = W_Q W_Kᵀ, one head), the gradient with
respect to the product is G = Σ x_qᵀ (∂L/∂S) x_k / √d_head, read exactly from the gradient at
``hook_attn_scores`` and the residual stream ``hook_resid_pre`` of the last layer.  Expressed in
the variable basis B = E_var·OV₁ on both sides, −B G Bᵀ is the "associative memory" update the
theory predicts: strongest on the diagonal (a queried variable should attend to the value bound
to the same variable).  Reported per checkpoint: diagonal vs off-diagonal mean, the fraction of
rows whose largest entry is diagonal, and the correlation with the QK₂ pattern in the same basis
at a later reference checkpoint.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

import numpy as np
import torch

from assign_add.analysis.weights import ov_circuit
from assign_add.model.fast import answer_loss
from assign_add.model.hooked import AssignAddTransformer
from assign_add.task.generator import Batch
from assign_add.task.vocab import Vocab


@dataclass
class GradientResult:
    diag_mean: float
    offdiag_mean: float
    diag_argmax: float
    corr_with_later_qk: float | None
    matrix: list[list[float]]

    def to_json(self) -> dict:
        return asdict(self)


def qk_gradient(model: AssignAddTransformer, batch: Batch, head: int = 0) -> torch.Tensor:
    """∂L/∂(W_Q W_Kᵀ) of the last layer, ``[d_model, d_model]`` (answer-only loss)."""
    last = model.cfg.n_layers - 1
    store: dict[str, torch.Tensor] = {}

    def keep_resid(x, hook):
        store["x"] = x.detach()

    def keep_scores(s, hook):
        s.retain_grad()
        store["s"] = s

    hooks = [(f"blocks.{last}.hook_resid_pre", keep_resid), (f"blocks.{last}.attn.hook_attn_scores", keep_scores)]
    model.zero_grad(set_to_none=True)
    logits = model.run_with_hooks(torch.as_tensor(batch.tokens), fwd_hooks=hooks)
    answer_loss(logits[:, -1], torch.as_tensor(batch.answers)).backward()
    ds = store["s"].grad[:, head].nan_to_num(0.0)  # masked entries carry no gradient
    x = store["x"]
    model.zero_grad(set_to_none=True)
    return torch.einsum("bqd,bqk,bke->de", x, ds, x) * model.blocks[last].attn.scale


def variable_basis(model: AssignAddTransformer, vocab: Vocab) -> torch.Tensor:
    return model.embed.W_E[vocab.var_offset : vocab.size] @ ov_circuit(model, 0)


def diagonal_stats(m: np.ndarray) -> tuple[float, float, float]:
    n = m.shape[0]
    off = m[~np.eye(n, dtype=bool)]
    return float(np.diag(m).mean()), float(off.mean()), float((m.argmax(axis=1) == np.arange(n)).mean())


@torch.no_grad()
def _basis_product(basis: torch.Tensor, g: torch.Tensor) -> np.ndarray:
    return (basis @ g @ basis.T).numpy()


def gradient_analysis(
    model: AssignAddTransformer, batch: Batch, vocab: Vocab, later_qk: np.ndarray | None = None
) -> GradientResult:
    g = qk_gradient(model, batch)
    with torch.no_grad():
        m = _basis_product(variable_basis(model, vocab), -g)
    d, o, a = diagonal_stats(m)
    corr = float(np.corrcoef(m.reshape(-1), later_qk.reshape(-1))[0, 1]) if later_qk is not None else None
    return GradientResult(d, o, a, corr, m.tolist())
