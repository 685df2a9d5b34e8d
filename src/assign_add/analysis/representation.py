"""Shared representation (claim C8): the residual stream before the layer-2 MLP
(``blocks.1.hook_resid_mid``, final position) for the variable form and the constant form of the
same sum with the same prefix, compared by cosine similarity, against two baselines:

- *shuffled*: each variable form paired with the constant form of another sequence whose sum differs;
- *other sum, same prefix*: the constant form of the same sequence with the left operand moved to
  another value (a different sum; the assignments, PADs and query layout untouched), which isolates
  what the sum contributes from what the prefix does.

Raw cosines share a large common direction (every final ``=`` residual carries the same position and
token rows), so both baselines are high too; *centred* cosines subtract the mean residual of the
compared rows first (:func:`centred_cosine`) and measure what is specific to each sequence."""

from __future__ import annotations

from dataclasses import asdict, dataclass

import numpy as np
import torch

from assign_add.analysis.positions import constant_form
from assign_add.model.hooked import AssignAddTransformer
from assign_add.task.generator import Batch
from assign_add.task.vocab import Vocab

QUANTILES = (0.05, 0.25, 0.5, 0.75, 0.95)
BINS = np.linspace(-1.0, 1.0, 41)


@dataclass
class CosineResult:
    matched_mean: float
    shuffled_mean: float
    matched_quantiles: list[float]
    shuffled_quantiles: list[float]
    matched_hist: list[int]
    shuffled_hist: list[int]
    bins: list[float]
    n: int
    centred_matched_mean: float | None = None
    centred_shuffled_mean: float | None = None
    other_sum_mean: float | None = None  # raw cosine with the same prefix's constant form of another sum
    centred_other_sum_mean: float | None = None

    def to_json(self) -> dict:
        return asdict(self)


def cosine(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Row-wise cosine similarity."""
    na = np.linalg.norm(a, axis=-1)
    nb = np.linalg.norm(b, axis=-1)
    return (a * b).sum(-1) / np.maximum(na * nb, 1e-30)


def centred_cosine(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Row-wise cosine after subtracting the mean row of ``a`` and ``b`` pooled (one common centre)."""
    centre = np.concatenate([a, b]).mean(axis=0, keepdims=True)
    return cosine(a - centre, b - centre)


def other_sum_form(batch: Batch, vocab: Vocab, seed: int = 0) -> np.ndarray:
    """The constant form with the left operand moved by a random non-zero amount: same prefix, other sum."""
    tokens = constant_form(batch, vocab)
    lpos, _ = vocab.operand_positions()
    shift = np.random.default_rng(seed).integers(1, vocab.modulus, size=len(batch))
    tokens[:, lpos] = (batch.n + shift) % vocab.modulus
    return tokens


def before_mlp(model: AssignAddTransformer) -> str:
    """The hook name of the residual stream before the last MLP."""
    return f"blocks.{model.cfg.n_layers - 1}.hook_resid_mid"


def resid_before_mlp(model: AssignAddTransformer, tokens: np.ndarray) -> np.ndarray:
    """``[B, d_model]``: the residual stream before the last MLP at the final position (the MLP is not run)."""
    name = before_mlp(model)
    return model.cache_until(torch.as_tensor(tokens), {name}, stop_at=name)[name][:, -1].numpy()


def shuffled_partner(batch: Batch, seed: int = 0) -> np.ndarray:
    """A permutation pairing each sequence with one whose answer differs."""
    rng = np.random.default_rng(seed)
    perm = rng.permutation(len(batch))
    same = batch.answers[perm] == batch.answers
    for _ in range(10):
        if not same.any():
            break
        perm[same] = rng.permutation(perm[same]) if same.sum() > 1 else np.roll(perm, 1)[same]
        same = batch.answers[perm] == batch.answers
    return perm


def shared_representation(model: AssignAddTransformer, batch: Batch, vocab: Vocab) -> CosineResult:
    """``batch`` should hold variable-form sequences (1-var and/or 2-var)."""
    return compare_forms(resid_before_mlp(model, batch.tokens), resid_before_mlp(model, constant_form(batch, vocab)),
                         batch, resid_before_mlp(model, other_sum_form(batch, vocab)))


def compare_forms(var_resid: np.ndarray, const_resid: np.ndarray, batch: Batch,
                  other_resid: np.ndarray | None = None) -> CosineResult:
    """Matched and baseline cosines between the variable forms' and constant forms' residuals [B, d]
    (raw and centred; the same-prefix other-sum baseline when ``other_resid`` is given)."""
    matched = cosine(var_resid, const_resid)
    partner = shuffled_partner(batch)
    shuffled = cosine(var_resid, const_resid[partner])
    other = {}
    if other_resid is not None:
        other = {"other_sum_mean": float(cosine(var_resid, other_resid).mean()),
                 "centred_other_sum_mean": float(centred_cosine(var_resid, other_resid).mean())}
    return CosineResult(
        matched_mean=float(matched.mean()),
        shuffled_mean=float(shuffled.mean()),
        matched_quantiles=[float(q) for q in np.quantile(matched, QUANTILES)],
        shuffled_quantiles=[float(q) for q in np.quantile(shuffled, QUANTILES)],
        matched_hist=np.histogram(matched, BINS)[0].tolist(),
        shuffled_hist=np.histogram(shuffled, BINS)[0].tolist(),
        bins=BINS.tolist(),
        n=len(batch),
        centred_matched_mean=float(centred_cosine(var_resid, const_resid).mean()),
        centred_shuffled_mean=float(centred_cosine(var_resid, const_resid[partner]).mean()),
        **other,
    )
