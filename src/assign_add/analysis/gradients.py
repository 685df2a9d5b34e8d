"""Gradient analysis (claim C11): the negative loss gradient on the layer-2 QK matrix.

With scores S = x_q · W_QK · x_kᵀ / √d_head (W_QK = W_Q W_Kᵀ, one head), the gradient with
respect to the product is G = Σ x_qᵀ (∂L/∂S) x_k / √d_head, read exactly from the gradient at
``hook_attn_scores`` and the residual stream ``hook_resid_pre`` of the last layer.  Expressed in
the variable basis B = E_var·OV₁ on both sides, −B G Bᵀ is the "associative memory" update the
theory predicts: strongest on the diagonal (a queried variable should attend to the value bound
to the same variable).  Reported per checkpoint: diagonal vs off-diagonal mean, the fraction of
rows whose largest entry is diagonal, and the correlation with the QK₂ pattern in the same basis
at a later reference checkpoint.

The theory (Bietti et al., "Birth of a Transformer: A Memory Viewpoint") assumes two things, and
``theory_gradients`` measures the update only where they hold, as the preconditions (not the
outcome) pick:

(a) the layer-1 previous-token head exists: a value token's most-attended key is its variable for
    at least ``PREV_TOKEN_MIN`` of value tokens (the C10 criterion), so a value carries its variable;
(b) the ``=`` query carries the queried variable: among 1-var training sequences, those whose
    ``=`` gives more layer-1 attention to the variable operand than to the constant operand.

At each checkpoint before binding where (a) holds and at least ``MIN_SEQUENCES`` sequences of
every sample satisfy (b), −∇QK₂ is computed on those sequences, in ``THEORY_SAMPLES`` disjoint
samples, so each figure comes with its spread.  The full-mixture gradient (every query type, every
checkpoint) stays beside it as a second, separately named number.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

import numpy as np
import torch

from assign_add.analysis.weights import ov_circuit, variable_qk_matrix
from assign_add.model.fast import answer_loss
from assign_add.model.hooked import AssignAddTransformer
from assign_add.analysis.attention import first_layer_pattern, previous_token
from assign_add.config import TaskConfig
from assign_add.task.evalsets import pool_definitions
from assign_add.analysis.criteria import VALUES
from assign_add.task.generator import Batch, sample
from assign_add.task.partitions import Partitions
from assign_add.task.vocab import Vocab

PREV_TOKEN_MIN = VALUES["C10_PREV_TOKEN"]  # precondition (a): claim C10's previous-token cut
MIN_SEQUENCES = 50  # per sample: fewer sequences satisfying (b) and the checkpoint is not measurable
THEORY_SAMPLES = 3
THEORY_SAMPLE_SIZE = 1024  # 1-var sequences drawn per sample, before the filter (b)
THEORY_SEED = 12345
NULL_PERMUTATIONS = 200  # label permutations for the correlation's null
NULL_SEED = 0


@dataclass
class GradientResult:
    diag_mean: float
    offdiag_mean: float
    diag_argmax: float
    corr_with_later_qk: float | None
    matrix: list[list[float]]
    # nulls for the correlation: its 95th percentile with the reference's variable labels permuted
    # (rows shuffled: the identity no longer lines up), and the checkpoint's own QK₂ against the reference
    corr_null95: float | None = None
    own_qk_corr: float | None = None

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
    if later_qk is None:
        return GradientResult(d, o, a, None, m.tolist())
    own = variable_qk_matrix(model, vocab)
    return GradientResult(d, o, a, _corr(m, later_qk), m.tolist(), permuted_corr_null(m, later_qk), _corr(own, later_qk))


def _corr(a: np.ndarray, b: np.ndarray) -> float:
    return float(np.corrcoef(a.reshape(-1), b.reshape(-1))[0, 1])


def permuted_corr_null(m: np.ndarray, reference: np.ndarray, draws: int = NULL_PERMUTATIONS,
                       quantile: float = 0.95) -> float:
    """The ``quantile`` of corr(m, reference with its rows permuted) over random permutations: what the
    correlation reaches when the variables' labels no longer match (seeded, so reproducible)."""
    rng = np.random.default_rng(NULL_SEED)
    return float(np.quantile([_corr(m, reference[rng.permutation(len(reference))]) for _ in range(draws)], quantile))


# --------------------------------------------------------------------------- under the preconditions


@dataclass
class Preconditions:
    """Measured on the 1-var sample at one checkpoint (layer-1 attention)."""

    prev_token_argmax: float  # (a): share of value tokens whose top layer-1 key is their variable
    eq_to_left: float  # mean layer-1 attention from '=' on the left / right operand
    eq_to_right: float
    carried_share: float  # (b): share of 1-var sequences whose '=' favours the variable operand
    carried_min: int  # fewest sequences satisfying (b) in any one sample

    @property
    def hold(self) -> bool:
        return self.prev_token_argmax >= PREV_TOKEN_MIN and self.carried_min >= MIN_SEQUENCES

    def to_json(self) -> dict:
        return {**asdict(self), "hold": self.hold}


def one_var_samples(task: TaskConfig, parts: Partitions, vocab: Vocab, n: int = THEORY_SAMPLES,
                    size: int = THEORY_SAMPLE_SIZE, seed: int = THEORY_SEED) -> list[Batch]:
    """``n`` disjoint slices of one draw of 1-var training sequences (training pairs, allowed positions)."""
    spec = next(d.spec for d in pool_definitions(task, parts) if d.name == "1var_train")
    big = sample(np.random.default_rng(seed), vocab, task, spec, n * size)
    return [big.take(slice(i * size, (i + 1) * size)) for i in range(n)]


def carries_variable(first: np.ndarray, batch: Batch, vocab: Vocab) -> np.ndarray:
    """Per 1-var sequence: does '=' give more layer-1 attention (``first`` [B, q, k]) to the variable
    operand than to the constant one?  False for 0-var and 2-var sequences."""
    lpos, rpos = vocab.operand_positions()
    eq = first[:, -1]
    left_var = batch.lhs_var >= 0
    one_var = left_var ^ (batch.rhs_var >= 0)
    on_var = np.where(left_var, eq[:, lpos], eq[:, rpos])
    on_const = np.where(left_var, eq[:, rpos], eq[:, lpos])
    return one_var & (on_var > on_const)


def preconditions(model: AssignAddTransformer, samples: list[Batch], vocab: Vocab) -> tuple[Preconditions, list[np.ndarray]]:
    """The preconditions at one checkpoint, and each sample's mask of sequences satisfying (b)."""
    firsts = [first_layer_pattern(model, b.tokens) for b in samples]
    masks = [carries_variable(f, b, vocab) for f, b in zip(firsts, samples)]
    lpos, rpos = vocab.operand_positions()
    eq = np.concatenate([f[:, -1] for f in firsts])
    both = Batch.concat(samples)
    first = np.concatenate(firsts)
    pre = Preconditions(
        prev_token_argmax=previous_token(first, both, vocab)[1],
        eq_to_left=float(eq[:, lpos].mean()),
        eq_to_right=float(eq[:, rpos].mean()),
        carried_share=float(np.concatenate(masks).mean()),
        carried_min=int(min(m.sum() for m in masks)),
    )
    return pre, masks


def theory_gradients(model: AssignAddTransformer, samples: list[Batch], masks: list[np.ndarray], vocab: Vocab,
                     later_qk: np.ndarray | None) -> list[GradientResult]:
    """−∇QK₂ in the variable basis on each sample's sequences that satisfy (b)."""
    return [gradient_analysis(model, b.take(m), vocab, later_qk) for b, m in zip(samples, masks)]


def _mean_sd(xs: list[float]) -> list[float]:
    return [float(np.mean(xs)), float(np.std(xs, ddof=1)) if len(xs) > 1 else 0.0]


def window_stats(by_step: dict[str, list[dict]], steps: list[int]) -> dict:
    """Per sample, over ``steps``: share of checkpoints with diagonal mean > off-diagonal mean, mean
    correlation with the final QK₂, mean diagonal-argmax share; then [mean, sd] over the samples."""
    per_sample = list(zip(*[by_step[str(s)] for s in steps]))  # sample -> its rows over the steps
    diag = [float(np.mean([r["diag_mean"] > r["offdiag_mean"] for r in rows])) for rows in per_sample]
    corr = [float(np.nanmean([np.nan if r["corr_with_later_qk"] is None else r["corr_with_later_qk"] for r in rows]))
            for rows in per_sample]
    argmax = [float(np.mean([r["diag_argmax"] for r in rows])) for rows in per_sample]

    def mean_of(key: str) -> list[float] | None:
        vals = [float(np.mean([r[key] for r in rows])) for rows in per_sample if all(r.get(key) is not None for r in rows)]
        return _mean_sd(vals) if vals else None

    return {"steps": steps, "samples": len(per_sample), "diag_share": _mean_sd(diag), "corr": _mean_sd(corr),
            "diag_argmax": _mean_sd(argmax), "corr_null95": mean_of("corr_null95"), "own_qk_corr": mean_of("own_qk_corr")}


def summarize_theory(theory: dict) -> dict:
    """``window``: the pre-binding checkpoints where both preconditions hold; ``from_start``: every
    pre-binding checkpoint with enough sequences satisfying (b), whether or not (a) holds there."""
    pre, by = theory["preconditions"], theory["by_step"]
    measured = sorted((int(s) for s in by), key=int)
    window = [s for s in measured if pre[str(s)]["hold"]]
    return {"window": window_stats(by, window) if window else None,
            "from_start": window_stats(by, measured) if measured else None}
