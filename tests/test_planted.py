"""The weight measures and the causal checks on models with a planted mechanism (exact answers)."""

from __future__ import annotations

import copy

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from assign_add.analysis import causal, weights
from assign_add.config import apply_overrides, preset
from assign_add.model.hooked import AssignAddTransformer
from assign_add.task.generator import Sampler
from assign_add.task.vocab import Vocab

from test_model import _previous_token_model

N = 59


def _zeroed(*overrides: str) -> tuple[AssignAddTransformer, Vocab]:
    cfg = apply_overrides(preset("paper"), list(overrides))
    model = AssignAddTransformer.from_config(cfg.model, cfg.task, seed=0)
    with torch.no_grad():
        for p in model.parameters():
            p.zero_()
    return model, Vocab.from_task(cfg.task)


def _addition_model(shift: int = 0) -> AssignAddTransformer:
    """OV₂ → MLP₂ that adds exactly: E[n]·OV₂ = one-hot n plus a constant unit c = 1.

    x = E[n]OV₂ + E[m]OV₂ holds x_n + x_m = 2 (or x_n = 2 when n = m) and x_c = 2.  A hidden unit per
    pair a < b reads x_a + x_b − x_c/2 (ReLU: 1 exactly when {n, m} = {a, b}, or when n = m is a or b);
    a unit per a reads x_a − x_c/2 (1 exactly when n = m = a) and writes with weight 3, so it
    outvotes the pair units that also fire then.  Each unit writes its answer (a + b + shift) mod N
    to an output direction 60 + answer that only the unembedding reads.
    """
    pairs = [(a, b) for a in range(N) for b in range(a + 1, N)]
    model, _ = _zeroed(f"model.d_mlp={len(pairs) + N}")
    c, out = N, N + 1  # constant unit; output directions out .. out + N - 1 (d_model 128 ≥ 119)
    with torch.no_grad():
        model.embed.W_E[:N, :N] = torch.eye(N)
        model.embed.W_E[:N, c] = 1.0
        attn = model.blocks[1].attn
        attn.W_V[0] = torch.eye(128)
        attn.W_O[0] = torch.eye(128)
        mlp = model.blocks[1].mlp
        for unit, (a, b) in enumerate(pairs):
            mlp.W_in[a, unit] = mlp.W_in[b, unit] = 1.0
            mlp.W_in[c, unit] = -0.5
            mlp.W_out[unit, out + (a + b + shift) % N] = 1.0
        for a in range(N):
            unit = len(pairs) + a
            mlp.W_in[a, unit], mlp.W_in[c, unit] = 1.0, -0.5
            mlp.W_out[unit, out + (2 * a + shift) % N] = 3.0
        model.unembed.W_U[out : out + N, :N] = torch.eye(N)
    return model


def test_ov_mlp_addition_accuracy_of_a_planted_adder():
    assert weights.ov_mlp_addition_acc(_addition_model()) == 1.0
    assert weights.ov_mlp_addition_acc(_addition_model(shift=1)) == 0.0, "answers one off: none right"


def test_positional_previous_token_of_the_planted_head():
    model = _previous_token_model()
    vocab = Vocab.from_task(preset("paper").task)
    assert weights.pos_prev_token(model, vocab) == 1.0
    with torch.no_grad():  # keys now point at their own position: a self-attention head
        model.blocks[0].attn.W_K[0, :16, :16] = torch.eye(16)
    assert weights.pos_prev_token(model, vocab) == 0.0


@settings(max_examples=20, deadline=None)
@given(st.permutations(list(range(12))), st.floats(0.5, 4.0))
def test_variable_qk_matrix_reads_the_planted_binding(perm, gain):
    """E_var one-hot, OV₁ = identity, QK₂ maps variable i's query to variable perm[i]'s key:
    the matrix is exactly gain · P, and QK₂ identity is the fraction of fixed points of perm."""
    model, vocab = _zeroed()
    v0 = vocab.var_offset
    with torch.no_grad():
        model.embed.W_E[v0 : v0 + 12, :12] = torch.eye(12)
        a1 = model.blocks[0].attn
        a1.W_V[0] = torch.eye(128)
        a1.W_O[0] = torch.eye(128)
        a2 = model.blocks[1].attn
        a2.W_Q[0, :12, :12] = gain * torch.eye(12)
        a2.W_K[0, :12, :12] = torch.eye(12)[np.argsort(perm)]  # key of variable perm[i] in query i's direction
    matrix = weights.variable_qk_matrix(model, vocab)
    expected = np.zeros((12, 12))
    expected[np.arange(12), perm] = gain
    np.testing.assert_allclose(matrix, expected, rtol=0, atol=1e-6)  # float32 sums of exact products
    ident, _ = weights.identity_scores(matrix)
    assert ident == pytest.approx(np.mean(np.asarray(perm) == np.arange(12)))


@pytest.fixture(scope="module")
def batch():
    cfg = preset("paper")
    return Sampler(cfg.task, seed=5).batch(0, 256)


@settings(max_examples=5, deadline=None)
@given(seed=st.integers(0, 1000))
def test_patching_the_constant_form_gives_its_answers(seed, batch):
    """Only layer 2's MLP and the unembedding act after ``hook_resid_mid`` at the last position, so the
    patched variable form must answer exactly as the constant form, in any model."""
    cfg = preset("paper")
    vocab = Vocab.from_task(cfg.task)
    model = AssignAddTransformer.from_config(cfg.model, cfg.task, seed=seed)
    varying = batch.take(np.nonzero(batch.category > 0)[0])
    res = causal.patch_constant_into_variable(model, varying, vocab)
    assert res["patched"] == res["constant"]


def test_zero_ablation_is_removing_the_head_and_mean_ablation_of_identical_rows_changes_nothing(batch):
    cfg = preset("paper")
    model = AssignAddTransformer.from_config(cfg.model, cfg.task, seed=1)
    tokens = torch.as_tensor(batch.tokens)
    for layer in (0, 1):
        without = copy.deepcopy(model)
        with torch.no_grad():
            without.blocks[layer].attn.W_O.zero_()
        ablated = model.run_with_hooks(tokens, fwd_hooks=[causal.head_ablation(layer, 0, "zero")])
        assert torch.allclose(ablated, without(tokens), rtol=0, atol=1e-5)  # float32 logits of size ~1
        assert not torch.allclose(ablated, model(tokens), atol=1e-3), "the head mattered"
        same = tokens[:1].expand(8, -1)
        mean = model.run_with_hooks(same, fwd_hooks=[causal.head_ablation(layer, 0, "mean")])
        # the mean of 8 equal float32 vectors is that vector up to the rounding of their sum
        assert torch.allclose(mean, model(same), rtol=1e-5, atol=1e-6)
