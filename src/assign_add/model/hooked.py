"""The paper's transformer as a TransformerLens ``HookedRootModule``.

2 layers, 1 head, d_model = d_head = 128, d_mlp = 512, ReLU (paper defaults; every number comes
from :class:`~assign_add.config.ModelConfig`); no biases, no normalisation, no MLP in the first
layer, learned absolute positions, causal attention scaled by 1/sqrt(d_head), an untied
unembedding onto the ``N`` numbers.  Parameter and hook names are TransformerLens' own, so
``run_with_cache``, ``ActivationCache``, ``FactoredMatrix`` and hook-based patching work as usual.

A layer without an MLP still has ``blocks.{l}.hook_mlp_out`` (it carries zeros), so
``ActivationCache.decompose_resid`` and ``accumulated_resid`` work.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn
from transformer_lens import ActivationCache, HookedRootModule
from transformer_lens.hook_points import HookPoint

from assign_add.config import ModelConfig, TaskConfig
from assign_add.task.vocab import Vocab, text_to_tokens, tokens_to_text


@dataclass
class HookedConfig:
    """The resolved architecture, with TransformerLens' attribute names (``model.cfg``)."""

    n_layers: int
    n_heads: int
    d_model: int
    d_head: int
    d_mlp: int
    d_vocab: int
    d_vocab_out: int
    n_ctx: int
    act_fn: str
    mlp_layers: tuple[int, ...]
    initializer_range: float
    attn_only: bool = False
    normalization_type: None = None
    positional_embedding_type: str = "standard"
    default_prepend_bos: bool = False
    device: str = "cpu"

    @classmethod
    def build(cls, model: ModelConfig, task: TaskConfig) -> "HookedConfig":
        vocab = Vocab.from_task(task)
        first = 0 if model.mlp_in_first_layer else 1
        return cls(
            n_layers=model.n_layers,
            n_heads=model.n_heads,
            d_model=model.d_model,
            d_head=model.d_head,
            d_mlp=model.d_mlp,
            d_vocab=vocab.size,
            d_vocab_out=task.modulus,
            n_ctx=task.n_ctx,
            act_fn=model.act_fn,
            mlp_layers=tuple(range(first, model.n_layers)),
            initializer_range=model.init_scale / math.sqrt(model.d_model),
        )


class Attention(nn.Module):
    def __init__(self, cfg: HookedConfig) -> None:
        super().__init__()
        h, d, dh = cfg.n_heads, cfg.d_model, cfg.d_head
        # TransformerLens creates W_Q, W_O, W_K, W_V in this order; init draws follow it.
        self.W_Q = nn.Parameter(torch.empty(h, d, dh))
        self.W_O = nn.Parameter(torch.empty(h, dh, d))
        self.W_K = nn.Parameter(torch.empty(h, d, dh))
        self.W_V = nn.Parameter(torch.empty(h, d, dh))
        self.register_buffer("mask", torch.tril(torch.ones(cfg.n_ctx, cfg.n_ctx, dtype=torch.bool)), persistent=False)
        self.scale = 1.0 / math.sqrt(dh)
        self.hook_q = HookPoint()  # [batch, pos, head, d_head]
        self.hook_k = HookPoint()  # [batch, pos, head, d_head]
        self.hook_v = HookPoint()  # [batch, pos, head, d_head]
        self.hook_attn_scores = HookPoint()  # [batch, head, query_pos, key_pos]
        self.hook_pattern = HookPoint()  # [batch, head, query_pos, key_pos]
        self.hook_z = HookPoint()  # [batch, pos, head, d_head]
        self.hook_result = HookPoint()  # [batch, pos, head, d_model]

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        pos = x.shape[1]
        q = self.hook_q(torch.einsum("bpd,hde->bphe", x, self.W_Q))
        k = self.hook_k(torch.einsum("bpd,hde->bphe", x, self.W_K))
        v = self.hook_v(torch.einsum("bpd,hde->bphe", x, self.W_V))
        scores = torch.einsum("bqhe,bkhe->bhqk", q, k) * self.scale
        scores = scores.masked_fill(~self.mask[:pos, :pos], float("-inf"))
        scores = self.hook_attn_scores(scores)
        pattern = self.hook_pattern(torch.softmax(scores, dim=-1))
        z = self.hook_z(torch.einsum("bhqk,bkhe->bqhe", pattern, v))
        result = self.hook_result(torch.einsum("bqhe,hed->bqhd", z, self.W_O))
        return result.sum(dim=2)


class MLP(nn.Module):
    def __init__(self, cfg: HookedConfig) -> None:
        super().__init__()
        self.W_in = nn.Parameter(torch.empty(cfg.d_model, cfg.d_mlp))
        self.W_out = nn.Parameter(torch.empty(cfg.d_mlp, cfg.d_model))
        self.act = F.relu if cfg.act_fn == "relu" else F.gelu
        self.hook_pre = HookPoint()  # [batch, pos, d_mlp]
        self.hook_post = HookPoint()  # [batch, pos, d_mlp]

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        pre = self.hook_pre(x @ self.W_in)
        post = self.hook_post(self.act(pre))
        return post @ self.W_out


class Block(nn.Module):
    def __init__(self, cfg: HookedConfig, has_mlp: bool) -> None:
        super().__init__()
        self.attn = Attention(cfg)
        self.mlp = MLP(cfg) if has_mlp else None
        self.hook_resid_pre = HookPoint()  # [batch, pos, d_model]
        self.hook_attn_out = HookPoint()  # [batch, pos, d_model]
        self.hook_resid_mid = HookPoint()  # [batch, pos, d_model]
        self.hook_mlp_out = HookPoint()  # [batch, pos, d_model] (zeros where the layer has no MLP)
        self.hook_resid_post = HookPoint()  # [batch, pos, d_model]

    def forward(self, resid: torch.Tensor) -> torch.Tensor:
        resid = self.hook_resid_pre(resid)
        resid = self.hook_resid_mid(resid + self.hook_attn_out(self.attn(resid)))
        mlp_out = self.mlp(resid) if self.mlp is not None else torch.zeros_like(resid)
        return self.hook_resid_post(resid + self.hook_mlp_out(mlp_out))


class Embed(nn.Module):
    def __init__(self, cfg: HookedConfig) -> None:
        super().__init__()
        self.W_E = nn.Parameter(torch.empty(cfg.d_vocab, cfg.d_model))

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        return self.W_E[tokens]


class PosEmbed(nn.Module):
    def __init__(self, cfg: HookedConfig) -> None:
        super().__init__()
        self.W_pos = nn.Parameter(torch.empty(cfg.n_ctx, cfg.d_model))

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        return self.W_pos[: tokens.shape[1]].unsqueeze(0).expand(tokens.shape[0], -1, -1)


class Unembed(nn.Module):
    def __init__(self, cfg: HookedConfig) -> None:
        super().__init__()
        self.W_U = nn.Parameter(torch.empty(cfg.d_model, cfg.d_vocab_out))

    def forward(self, resid: torch.Tensor) -> torch.Tensor:
        return resid @ self.W_U


class _StopForward(Exception):
    """Raised by the hook at which :meth:`AssignAddTransformer.cache_until` stops the forward pass."""


class AssignAddTransformer(HookedRootModule):
    """``forward(tokens) -> logits [batch, pos, d_vocab_out]``; the answer is read at the last position."""

    def __init__(self, cfg: HookedConfig, vocab: Vocab | None = None) -> None:
        super().__init__()
        self.cfg = cfg
        self.vocab = vocab
        self.embed = Embed(cfg)
        self.hook_embed = HookPoint()  # [batch, pos, d_model]
        self.pos_embed = PosEmbed(cfg)
        self.hook_pos_embed = HookPoint()  # [batch, pos, d_model]
        self.blocks = nn.ModuleList([Block(cfg, layer in cfg.mlp_layers) for layer in range(cfg.n_layers)])
        self.unembed = Unembed(cfg)
        self.setup()

    @classmethod
    def from_config(cls, model: ModelConfig, task: TaskConfig, seed: int | None = None) -> "AssignAddTransformer":
        net = cls(HookedConfig.build(model, task), Vocab.from_task(task))
        net.init_weights(seed if seed is not None else 0)
        return net

    def init_weights(self, seed: int) -> None:
        """TransformerLens' default init: every weight ~ Normal(0, init_scale / sqrt(d_model)).

        Draws follow TransformerLens' parameter order from a generator seeded with ``seed``,
        including the MLP weights a layer without MLP would have had (drawn, then discarded),
        so the paper preset with seed 42 starts where the authors' run started.
        """
        gen = torch.Generator().manual_seed(seed)
        std = self.cfg.initializer_range
        draw = lambda shape: torch.empty(shape).normal_(0.0, std, generator=gen)  # noqa: E731
        with torch.no_grad():
            self.embed.W_E.copy_(draw(self.embed.W_E.shape))
            self.pos_embed.W_pos.copy_(draw(self.pos_embed.W_pos.shape))
            for block in self.blocks:
                for name in ("W_Q", "W_O", "W_K", "W_V"):
                    param = getattr(block.attn, name)
                    param.copy_(draw(param.shape))
                w_in = draw((self.cfg.d_model, self.cfg.d_mlp))
                w_out = draw((self.cfg.d_mlp, self.cfg.d_model))
                if block.mlp is not None:
                    block.mlp.W_in.copy_(w_in)
                    block.mlp.W_out.copy_(w_out)
            self.unembed.W_U.copy_(draw(self.unembed.W_U.shape))

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        tokens = self._as_tokens(tokens)
        resid = self.hook_embed(self.embed(tokens)) + self.hook_pos_embed(self.pos_embed(tokens))
        for block in self.blocks:
            resid = block(resid)
        return self.unembed(resid)

    def answer_logits(self, tokens: torch.Tensor) -> torch.Tensor:
        """Logits at the final position, ``[batch, d_vocab_out]``."""
        return self(tokens)[:, -1]

    # ---- text helpers (TransformerLens-style names)
    def to_tokens(self, text: str | list[str], prepend_bos: bool = False) -> torch.Tensor:
        """Text form (``"c=1, b=17, b+19="``) to token ids ``[batch, n_ctx]`` (padding first)."""
        vocab = self._require_vocab()
        texts = [text] if isinstance(text, str) else list(text)
        arr = np.stack([text_to_tokens(t, vocab) for t in texts])
        return torch.as_tensor(arr, device=self.embed.W_E.device)

    def to_string(self, tokens: torch.Tensor) -> str | list[str]:
        vocab = self._require_vocab()
        arr = np.asarray(torch.as_tensor(tokens).cpu())
        if arr.ndim == 1:
            return tokens_to_text(arr, vocab)
        return [tokens_to_text(row, vocab) for row in arr]

    def to_str_tokens(self, tokens: torch.Tensor) -> list[str]:
        vocab = self._require_vocab()
        return [vocab.token_str(int(t)) for t in torch.as_tensor(tokens).reshape(-1)]

    def run_with_cache(self, *args, **kwargs):  # type: ignore[override]
        """As TransformerLens: ``(logits, cache)``, the cache an ``ActivationCache``."""
        logits, cache = super().run_with_cache(*args, **kwargs)
        has_batch = not kwargs.get("remove_batch_dim", False)
        return logits, ActivationCache(dict(cache), self, has_batch_dim=has_batch)

    @torch.no_grad()
    def cache_until(self, tokens: torch.Tensor, names: set[str], stop_at: str) -> ActivationCache:
        """The activations ``names`` (and ``stop_at``), running the forward pass only as far as the hook
        ``stop_at``: nothing after it is computed (e.g. stop at the last ``hook_resid_mid`` to skip the
        last MLP, at every position, and the unembedding).  A cut-short ``run_with_cache``: the same
        ``ActivationCache``, holding only what was asked for."""
        if stop_at not in self.hook_dict:
            raise KeyError(f"no hook point {stop_at!r}")
        cache: dict[str, torch.Tensor] = {}

        def save(x: torch.Tensor, hook) -> None:
            cache[hook.name] = x.detach()

        def save_and_stop(x: torch.Tensor, hook) -> None:
            cache[hook.name] = x.detach()
            raise _StopForward

        hooks = [(n, save) for n in names if n != stop_at] + [(stop_at, save_and_stop)]
        try:
            self.run_with_hooks(tokens, fwd_hooks=hooks)  # the hooks are removed however it ends
        except _StopForward:
            pass
        return ActivationCache(cache, self)

    def _as_tokens(self, tokens: torch.Tensor | str | list[str]) -> torch.Tensor:
        if isinstance(tokens, (str, list)) and (isinstance(tokens, str) or isinstance(tokens[0], str)):
            return self.to_tokens(tokens)
        return torch.as_tensor(tokens, device=self.embed.W_E.device)

    def _require_vocab(self) -> Vocab:
        if self.vocab is None:
            raise ValueError("this model was built without a vocabulary; build it with from_config")
        return self.vocab


def parameter_norm(model: torch.nn.Module) -> float:
    """The square root of the float64 sum of squares of every parameter."""
    return float(torch.sqrt(sum((p.detach().double() ** 2).sum() for p in model.parameters())))
