"""The paper's model written the usual way: every position through every layer, ``nn.Linear``.

The baseline of ``assign-add bench`` and a second, independent implementation for the tests; it
follows the config (heads, layers, MLP placement, ``act_fn``).
"""

from __future__ import annotations

import math

import torch
from torch import nn

from assign_add.model.hooked import AssignAddTransformer, HookedConfig


class BaselineTransformer(nn.Module):
    """The same function written the usual way: every position through both layers, nn.Linear.

    The baseline of ``assign-add bench``; :meth:`load_from` copies a hooked model's weights
    (the test suite checks both give the same logits).
    """

    def __init__(self, cfg: HookedConfig) -> None:
        super().__init__()
        self.cfg = cfg
        d, hd = cfg.d_model, cfg.n_heads * cfg.d_head
        self.embed = nn.Embedding(cfg.d_vocab, d)
        self.pos_embed = nn.Embedding(cfg.n_ctx, d)
        self.layers = nn.ModuleList()
        act = nn.ReLU if cfg.act_fn == "relu" else nn.GELU  # the hooked model's F.relu / F.gelu
        for layer in range(cfg.n_layers):
            mods = nn.ModuleDict({k: nn.Linear(d, hd, bias=False) for k in ("q", "k", "v")})
            mods["o"] = nn.Linear(hd, d, bias=False)
            if layer in cfg.mlp_layers:
                mods["mlp"] = nn.Sequential(nn.Linear(d, cfg.d_mlp, bias=False), act(), nn.Linear(cfg.d_mlp, d, bias=False))
            self.layers.append(mods)
        self.unembed = nn.Linear(d, cfg.d_vocab_out, bias=False)
        self.register_buffer("mask", torch.tril(torch.ones(cfg.n_ctx, cfg.n_ctx, dtype=torch.bool)))

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        b, t = tokens.shape
        h = self.cfg.n_heads
        x = self.embed(tokens) + self.pos_embed.weight[:t]
        for mods in self.layers:
            q, k, v = (mods[n](x).view(b, t, h, -1).transpose(1, 2) for n in ("q", "k", "v"))
            scores = q @ k.transpose(-1, -2) / math.sqrt(q.shape[-1])
            pattern = torch.softmax(scores.masked_fill(~self.mask[:t, :t], float("-inf")), dim=-1)
            x = x + mods["o"]((pattern @ v).transpose(1, 2).reshape(b, t, -1))
            if "mlp" in mods:
                x = x + mods["mlp"](x)
        return self.unembed(x)

    @torch.no_grad()
    def load_from(self, model: AssignAddTransformer) -> "BaselineTransformer":
        self.embed.weight.copy_(model.embed.W_E)
        self.pos_embed.weight.copy_(model.pos_embed.W_pos)
        for mods, block in zip(self.layers, model.blocks):
            for n, w in (("q", block.attn.W_Q), ("k", block.attn.W_K), ("v", block.attn.W_V)):
                mods[n].weight.copy_(w.permute(1, 0, 2).reshape(w.shape[1], -1).T)
            mods["o"].weight.copy_(block.attn.W_O.reshape(-1, block.attn.W_O.shape[-1]).T)
            if "mlp" in mods:
                mods["mlp"][0].weight.copy_(block.mlp.W_in.T)
                mods["mlp"][2].weight.copy_(block.mlp.W_out.T)
        self.unembed.weight.copy_(model.unembed.W_U.T)
        return self
