from __future__ import annotations

import copy

import pytest
import torch
from transformer_lens import ActivationCache, FactoredMatrix

from assign_add.model.baseline import BaselineTransformer
from assign_add.config import ModelConfig, preset
from assign_add.model import AssignAddTransformer, answer_loss, fast_answer_logits
from assign_add.task.generator import Sampler

from conftest import artifacts_or_skip

VARIANTS = {
    "paper": ModelConfig(),
    "3 layers": ModelConfig(n_layers=3),
    "2 heads": ModelConfig(n_heads=2, d_head=64),
    "1 layer": ModelConfig(n_layers=1),
    "mlp in layer 0": ModelConfig(mlp_in_first_layer=True),
    "3 layers, 2 heads, gelu": ModelConfig(n_layers=3, n_heads=2, d_head=32, act_fn="gelu", d_model=64, d_mlp=96),
}


def _rel(a: torch.Tensor, b: torch.Tensor) -> float:
    return float((a - b).detach().norm() / b.detach().norm().clamp_min(1e-30))


def _compare(model: AssignAddTransformer, tokens: torch.Tensor, answers: torch.Tensor, tol: float,
             grad_tol: float | None = None) -> None:
    """Fast logits and gradients vs the hooked model's, the hooked ones computed in float64.

    (float64 is the reference because in float32 the hooked model's own gradient can be the
    less accurate one: a ReLU pre-activation within rounding of zero at some position.)
    """
    ref_model = copy.deepcopy(model).double()
    ref_logits = ref_model(tokens)[:, -1]
    assert _rel(fast_answer_logits(model, tokens).double(), ref_logits) < tol
    assert _rel(model(tokens)[:, -1].double(), ref_logits) < tol
    g_ref = torch.autograd.grad(answer_loss(ref_logits, answers), list(ref_model.parameters()))
    g_fast = torch.autograd.grad(answer_loss(fast_answer_logits(model, tokens), answers), list(model.parameters()))
    for (pname, _), a, b in zip(model.named_parameters(), g_fast, g_ref):
        assert _rel(a.double(), b) < (tol if grad_tol is None else grad_tol), pname


@pytest.mark.parametrize("name", list(VARIANTS))
@pytest.mark.parametrize("seed", [0, 1])
def test_fast_step_matches_hooked_model(name, seed):
    """float32 at the training initialisation: logits and every gradient within 1e-5 relative."""
    cfg = preset("paper")
    model = AssignAddTransformer.from_config(VARIANTS[name], cfg.task, seed=seed)
    batch = Sampler(cfg.task, seed).batch(0, 384)
    _compare(model, torch.as_tensor(batch.tokens), torch.as_tensor(batch.answers), 1e-5)


@pytest.mark.parametrize("name", list(VARIANTS))
def test_fast_step_is_the_same_function_in_float64(name):
    """Sharp attention (weights x3) amplifies rounding; in float64 the logits agree to 1e-8 relative
    and every gradient to 1e-5.

    Basis: float64 rounding (eps 1.1e-16) amplified by softmaxes with scores ~9x the training scale
    reached 1.13e-10 on the logits on a machine like ours; a mistake in the fast path (a wrong
    position, mask or row) gives relative errors of 1e-3 or more.  The gradients need more room: in
    the 3-layer variant the last layer's W_Q gradient is ~1e-6 in size, a sum of terms of saturated
    softmaxes (attention weights within 1e-16 of 1) whose cancellation differs between the two
    computations, and it differed by 2.4e-7 relative on one machine of this type (no ReLU
    pre-activation within 2e-6 of zero, so not a kink); 1e-5 keeps 40x above that and 100x below a
    mistake."""
    cfg = preset("paper")
    model = AssignAddTransformer.from_config(VARIANTS[name], cfg.task, seed=7).double()
    with torch.no_grad():
        for p in model.parameters():
            p.mul_(3.0)
    batch = Sampler(cfg.task, 7).batch(0, 256)
    _compare(model, torch.as_tensor(batch.tokens), torch.as_tensor(batch.answers), 1e-8, grad_tol=1e-5)


def test_fast_step_on_infix_layout():
    cfg = preset("paper")
    cfg.task.layout, cfg.task.n_ctx = "infix", 28
    model = AssignAddTransformer.from_config(cfg.model, cfg.task, seed=3)
    tokens = torch.as_tensor(Sampler(cfg.task, 0).batch(0, 128).tokens)
    assert _rel(fast_answer_logits(model, tokens), model(tokens)[:, -1]) < 1e-5


def test_parameter_names_and_shapes():
    cfg = preset("paper")
    model = AssignAddTransformer.from_config(cfg.model, cfg.task, seed=0)
    shapes = {k: tuple(v.shape) for k, v in model.state_dict().items()}
    assert shapes == {
        "embed.W_E": (74, 128), "pos_embed.W_pos": (16, 128),
        **{f"blocks.{l}.attn.W_{x}": (1, 128, 128) for l in (0, 1) for x in "QKVO"},
        "blocks.1.mlp.W_in": (128, 512), "blocks.1.mlp.W_out": (512, 128), "unembed.W_U": (128, 59),
    }


def test_initialisation_reproduces_the_authors_starting_point():
    """checkpoint_step_1 is one AdamW step (lr 1e-3) from the init: every weight within ~1e-3."""
    art = artifacts_or_skip()
    sd = torch.load(art / "checkpoints" / "checkpoint_step_1.pth", weights_only=True)
    cfg = preset("paper")
    model = AssignAddTransformer.from_config(cfg.model, cfg.task, seed=42)
    for name, p in model.state_dict().items():
        assert float((p - sd[name]).abs().max()) < 1.02e-3, name
    other = AssignAddTransformer.from_config(cfg.model, cfg.task, seed=43)
    assert float((other.embed.W_E.detach() - sd["embed.W_E"]).abs().max()) > 0.1


def _previous_token_model() -> AssignAddTransformer:
    """Hand-set weights: positions are one-hot directions; layer 0's query at position i
    matches the key of position i - 1 with a huge score (a perfect previous-token head)."""
    cfg = preset("paper")
    model = AssignAddTransformer.from_config(cfg.model, cfg.task, seed=0)
    with torch.no_grad():
        for p in model.parameters():
            p.zero_()
        T = cfg.task.n_ctx
        model.pos_embed.W_pos[:, :T] = torch.eye(T)
        attn = model.blocks[0].attn
        attn.W_Q[0, :T, :T] = 1e4 * torch.eye(T)
        attn.W_K[0, :T, :T] = torch.diag(torch.ones(T - 1), diagonal=1)  # key of j points at j + 1
    return model


def test_hand_built_previous_token_head_through_hooks():
    model = _previous_token_model()
    tokens = model.to_tokens(["c=1, b=17, a=42, b+19=", "a=3, a+a="])
    logits, cache = model.run_with_cache(tokens)
    assert isinstance(cache, ActivationCache)
    pattern = cache["pattern", 0]  # [batch, head, query, key]
    assert pattern.shape == (2, 1, 16, 16)
    expected = torch.zeros(16, 16)
    expected[0, 0] = 1.0
    expected[torch.arange(1, 16), torch.arange(0, 15)] = 1.0
    assert torch.allclose(pattern[:, 0], expected.expand(2, 16, 16), atol=1e-6)
    # layer 1 has all-zero weights: uniform causal attention
    assert torch.allclose(cache["pattern", 1][0, 0, 15], torch.full((16,), 1 / 16))


def test_cache_supports_transformerlens_tools():
    cfg = preset("paper")
    model = AssignAddTransformer.from_config(cfg.model, cfg.task, seed=5)
    tokens = torch.as_tensor(Sampler(cfg.task, 0).batch(0, 8).tokens)
    logits, cache = model.run_with_cache(tokens)
    assert torch.allclose(logits, model(tokens))
    assert torch.count_nonzero(cache["blocks.0.hook_mlp_out"]) == 0
    resid, labels = cache.decompose_resid(return_labels=True)
    assert torch.allclose(resid.sum(0), cache["blocks.1.hook_resid_post"], atol=1e-5)
    assert "1_mlp_out" in labels
    assert cache["blocks.1.mlp.hook_pre"].shape == (8, 16, 512)
    qk = FactoredMatrix(model.blocks[1].attn.W_Q[0], model.blocks[1].attn.W_K[0].T)
    assert qk.AB.shape == (128, 128)
    assert not model.hook_dict["blocks.0.attn.hook_pattern"].fwd_hooks, "no hook left attached"

    def zero_layer0(pattern, hook):
        return torch.zeros_like(pattern)

    patched = model.run_with_hooks(tokens, fwd_hooks=[("blocks.0.attn.hook_pattern", zero_layer0)])
    assert not torch.allclose(patched, logits)
    assert torch.allclose(model(tokens), logits), "hooks are removed after run_with_hooks"



def test_cache_until_gives_run_with_cache_activations_and_computes_nothing_after_the_stop():
    cfg = preset("paper")
    model = AssignAddTransformer.from_config(cfg.model, cfg.task, seed=6)
    tokens = torch.as_tensor(Sampler(cfg.task, 1).batch(0, 16).tokens)
    _, full = model.run_with_cache(tokens)
    names = {"blocks.0.attn.hook_pattern", "blocks.0.hook_resid_post", "blocks.1.attn.hook_pattern"}
    got = model.cache_until(tokens, names, stop_at="blocks.1.hook_resid_mid")
    assert type(got) is type(full), "an ActivationCache, as run_with_cache gives"
    assert set(got.keys()) == names | {"blocks.1.hook_resid_mid"}
    assert torch.equal(got["pattern", 0], full["pattern", 0]), "TransformerLens's (name, layer) keys work"
    for name, value in got.items():
        assert torch.equal(value, full[name]), name
    reached: list[str] = []
    model.blocks[1].mlp.hook_pre.add_hook(lambda x, hook: reached.append(hook.name))
    model.cache_until(tokens, set(), stop_at="blocks.1.hook_resid_mid")
    assert reached == [], "the last MLP was not run"
    model(tokens)
    assert reached == ["blocks.1.mlp.hook_pre"], "the probe hook was attached all along"
    model.reset_hooks()
    assert not any(h.fwd_hooks for h in model.hook_dict.values()), "no hook left attached"
    assert torch.equal(model(tokens), full["blocks.1.hook_resid_post"] @ model.unembed.W_U)
    with pytest.raises(KeyError, match="no hook point"):
        model.cache_until(tokens, set(), stop_at="blocks.9.hook_resid_mid")

def test_text_helpers():
    cfg = preset("paper")
    model = AssignAddTransformer.from_config(cfg.model, cfg.task, seed=0)
    tokens = model.to_tokens("c=1, b=17, b+19=")
    assert model.to_string(tokens[0]) == "c=1, b=17, b+19="
    assert model.to_str_tokens(tokens[0])[-4:] == ["+", "b", "19", "="]
    assert torch.allclose(model("c=1, b=17, b+19="), model(tokens))


@pytest.mark.parametrize("act_fn", ["relu", "gelu"])
def test_straightforward_baseline_computes_the_same_function(act_fn):
    cfg = preset("paper")
    cfg.model.act_fn = act_fn
    model = AssignAddTransformer.from_config(cfg.model, cfg.task, seed=2)
    naive = BaselineTransformer(model.cfg).load_from(model)
    tokens = torch.as_tensor(Sampler(cfg.task, 0).batch(0, 64).tokens)
    assert _rel(naive(tokens), model(tokens)) < 1e-5


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_bf16_autocast_keeps_softmax_in_float32_and_logits_within_bf16_rounding(seed):
    """Under bf16 autocast (``train.precision=bf16``) the engine's matmuls run in bf16 but its softmaxes in
    float32, as CUDA autocast does, and the logits stay within bf16 rounding of the float32 ones.

    Basis: bf16's unit roundoff is u = 2^-8 ≈ 0.0039; the path from the embeddings to the logits rounds
    about 8 times (tables, two attention mixes, OV, MLP in and out, unembedding), so 8u = 0.031 relative;
    with the weights ×3 (sharp attention, as in the float64 test) it measured 0.009-0.011 on a machine of
    this type.  A softmax left in bf16 or a wrong row gives errors of 0.1 or more."""
    from assign_add.model import fast

    cfg = preset("paper")
    model = AssignAddTransformer.from_config(cfg.model, cfg.task, seed=seed)
    with torch.no_grad():
        for p in model.parameters():
            p.mul_(3.0)
    tokens = torch.as_tensor(Sampler(cfg.task, seed).batch(0, 512).tokens)
    with torch.no_grad():
        ref = fast_answer_logits(model, tokens)
        with torch.autocast("cpu", dtype=torch.bfloat16):
            logits = fast_answer_logits(model, tokens)
            x = torch.cat([model.embed.W_E, model.pos_embed.W_pos[: tokens.shape[1]]])
            pattern0 = fast._layer0_pattern(model.blocks[0].attn, x, tokens)
    assert logits.dtype == torch.bfloat16 and pattern0.dtype == torch.float32
    assert _rel(logits.float(), ref) < 8 * 2.0**-8
