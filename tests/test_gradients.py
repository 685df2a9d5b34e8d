"""Claim C11's measure: ∂L/∂W_QK of layer 2, and the theory's preconditions, on hand-built models."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from assign_add.analysis import gradients as G
from assign_add.config import preset
from assign_add.model.hooked import AssignAddTransformer
from assign_add.task.generator import Batch, Sampler
from assign_add.task.partitions import build_partitions
from assign_add.task.vocab import Vocab

BIG = 1e4  # attention logits this far apart give softmax weights within e^-70 of one-hot


def _binding_model(eq_on_variable: bool = True) -> tuple[AssignAddTransformer, Vocab]:
    """Both preconditions exactly: layer 1 is a previous-token head for every query but '=', and
    '=' attends to the variable operand (``eq_on_variable``) or to the constant one.

    Residual layout (d_model 128): tokens one-hot in 0..73, positions one-hot in 74..89.  OV₁ copies
    tokens, so a value token carries its variable and '=' the queried variable.  Layer 2 has
    QK = 0 (uniform attention) and OV₂ copies numbers; no MLP; the unembedding reads the number
    directions, so a key helps the loss exactly when it is the number the target names.
    """
    cfg = preset("paper")
    vocab = Vocab.from_task(cfg.task)
    model = AssignAddTransformer.from_config(cfg.model, cfg.task, seed=0)
    V, T, P = vocab.size, cfg.task.n_ctx, vocab.size  # P: first position dimension
    lpos, rpos = vocab.operand_positions()
    with torch.no_grad():
        for p in model.parameters():
            p.zero_()
        model.embed.W_E[:, :V] = torch.eye(V)
        model.pos_embed.W_pos[:T, P : P + T] = torch.eye(T)
        a1 = model.blocks[0].attn
        for q in range(1, T - 1):  # previous-token head: query at q matches key at q - 1
            a1.W_Q[0, P + q, q] = BIG
            a1.W_K[0, P + q - 1, q] = 1.0
        eq = T - 1
        a1.W_Q[0, P + eq, 16] = BIG  # '=' asks for a variable token ...
        a1.W_Q[0, P + eq, 17] = BIG  # ... at an operand position
        a1.W_K[0, vocab.var_offset : V, 16] = 1.0 if eq_on_variable else 0.0
        a1.W_K[0, : vocab.modulus, 16] = 0.0 if eq_on_variable else 1.0
        a1.W_K[0, P + lpos, 17] = a1.W_K[0, P + rpos, 17] = 1.0
        a1.W_V[0, :V, :V] = torch.eye(V)
        a1.W_O[0, :V, :V] = torch.eye(V)
        a2 = model.blocks[1].attn
        N = vocab.modulus
        a2.W_V[0, :N, :N] = torch.eye(N)
        a2.W_O[0, :N, :N] = torch.eye(N)
        model.unembed.W_U[:N, :N] = torch.eye(N)
    return model, vocab


def _retrieval(batch: Batch) -> Batch:
    """The target is the value bound to the queried variable: with no adder downstream, the constant
    operand cannot change which key lowers the loss (the sum is the value shifted by a constant)."""
    out = batch.take(slice(None))
    out.answers = np.where(batch.lhs_var >= 0, batch.n, batch.m)
    return out


@pytest.fixture(scope="module")
def task():
    cfg = preset("paper")
    vocab = Vocab.from_task(cfg.task)
    samples = [_retrieval(b) for b in G.one_var_samples(cfg.task, build_partitions(cfg.task), vocab, size=512)]
    return cfg, vocab, samples


def test_preconditions_hold_exactly_on_the_hand_built_model(task):
    cfg, vocab, samples = task
    model, _ = _binding_model()
    pre, masks = G.preconditions(model, samples, vocab)
    assert pre.prev_token_argmax == 1.0
    assert pre.carried_share == 1.0 and all(m.all() for m in masks)
    assert pre.hold
    wrong, _ = _binding_model(eq_on_variable=False)
    pre_wrong, masks_wrong = G.preconditions(wrong, samples, vocab)
    assert pre_wrong.carried_share == 0.0 and not pre_wrong.hold


def test_gradient_in_the_variable_basis_is_diagonal_under_the_preconditions(task):
    cfg, vocab, samples = task
    model, _ = _binding_model()
    g = G.qk_gradient(model, Batch.concat(samples))
    with torch.no_grad():
        m = (G.variable_basis(model, vocab) @ -g @ G.variable_basis(model, vocab).T).numpy()
    off = m[~np.eye(len(m), dtype=bool)].reshape(len(m), -1)
    assert (np.diag(m) > off.max(axis=1)).all(), "every variable's strongest update is to itself"
    assert (np.diag(m) > (m - np.diag(np.diag(m))).max(axis=0)).all(), "... and the strongest update onto each key"
    assert np.diag(m).min() > 0 > off.mean(), "own-variable scores pushed up, the others down on average"
    res = G.theory_gradients(model, samples, [np.ones(len(b), bool) for b in samples], vocab, later_qk=np.eye(12))
    assert all(r.diag_argmax == 1.0 and r.diag_mean > r.offdiag_mean for r in res)
    assert all(r.corr_with_later_qk > 0.9 for r in res), "it points at the identity the trained QK₂ becomes"


def test_qk_gradient_equals_autograd_of_an_explicit_qk_leaf():
    cfg = preset("paper")
    model = AssignAddTransformer.from_config(cfg.model, cfg.task, seed=3).double()
    batch = Sampler(cfg.task, seed=1).batch(0, 64)
    expected = G.qk_gradient(model, batch)
    attn = model.blocks[1].attn
    w = (attn.W_Q[0] @ attn.W_K[0].T).detach().clone().requires_grad_(True)
    store = {}

    def keep_resid(x, hook):
        store["x"] = x.detach()

    def explicit_scores(s, hook):
        mine = torch.einsum("bqd,de,bke->bqk", store["x"], w, store["x"]) * attn.scale
        return torch.where(torch.isinf(s), s, mine[:, None])

    from assign_add.model.fast import answer_loss

    logits = model.run_with_hooks(torch.as_tensor(batch.tokens), fwd_hooks=[
        ("blocks.1.hook_resid_pre", keep_resid), ("blocks.1.attn.hook_attn_scores", explicit_scores)])
    answer_loss(logits[:, -1], torch.as_tensor(batch.answers)).backward()
    # float64 throughout: agreement to 1e-10 relative is rounding, not approximation
    assert torch.allclose(expected, w.grad, rtol=1e-10, atol=1e-12 * w.grad.abs().max().item())


def test_window_stats_by_hand():
    row = lambda d, o, c, a: {"diag_mean": d, "offdiag_mean": o, "corr_with_later_qk": c, "diag_argmax": a}  # noqa: E731
    by = {"10": [row(1, 0, 0.2, 0.5), row(1, 0, 0.4, 0.5)], "20": [row(0, 1, 0.6, 1.0), row(1, 0, 0.8, 0.0)]}
    st = G.window_stats(by, [10, 20])
    assert st["diag_share"] == pytest.approx([0.75, np.std([0.5, 1.0], ddof=1)])
    assert st["corr"] == pytest.approx([0.5, np.std([0.4, 0.6], ddof=1)])
    assert st["diag_argmax"] == pytest.approx([0.5, np.std([0.75, 0.25], ddof=1)])
    pre = {"10": {"hold": False}, "20": {"hold": True}}
    summary = G.summarize_theory({"preconditions": pre, "by_step": by})
    assert summary["window"]["steps"] == [20] and summary["from_start"]["steps"] == [10, 20]


def test_permuted_label_null_of_an_identity_match():
    from assign_add.analysis.gradients import permuted_corr_null

    eye = np.eye(12)
    # corr(I, P·I) grows with P's fixed points; a random permutation of 12 fixes about one, so it stays small
    null = permuted_corr_null(eye, eye)
    assert np.corrcoef(eye.ravel(), eye.ravel())[0, 1] == pytest.approx(1.0)
    assert null < 0.35, "a random relabelling rarely keeps the identity lined up"
    assert permuted_corr_null(eye, eye) == null, "seeded: the same null twice"
