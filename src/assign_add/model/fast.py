"""The training forward pass: the hooked model's function, computing only what the loss needs.

The loss reads the logits at the final position alone, so:

- layer 0's attention pattern comes from per-token and per-position tables (``W_E @ W_Q``,
  ``W_pos @ W_Q``, ...), and its output from the OV table ``W_E @ W_V @ W_O`` mixed by the
  pattern: exact because the residual stream before layer 0 is just ``W_E[tok] + W_pos`` (no
  normalisation, no biases), and B*T*T*d work instead of B*T*d*d;
- the last layer works at the final position only, and needs no per-position keys or values:
  its scores are ``resid @ (W_K q)`` and its output ``(pattern @ resid) @ W_V @ W_O``;
  its MLP and the unembedding run on one position.

Logits and every parameter gradient match :class:`AssignAddTransformer` to float32 precision
(checked by ``tests/test_model.py``).  No hooks fire here: use the hooked model to look inside.
"""

from __future__ import annotations

import functools

from dataclasses import dataclass
from typing import Callable

import torch
import torch.nn.functional as F

from assign_add.model.hooked import MLP, AssignAddTransformer, Attention


def _at_least_fp32(scores: torch.Tensor) -> torch.Tensor:
    """Attention scores in float32 at least: under bf16 autocast the softmax then runs in float32, as CUDA
    autocast runs it (CPU autocast would leave it in bf16); float32 and float64 pass unchanged."""
    return scores.to(torch.promote_types(scores.dtype, torch.float32))


def _flat_in(w: torch.Tensor) -> torch.Tensor:
    """[head, d_model, d_head] -> [d_model, head * d_head]."""
    return w.permute(1, 0, 2).reshape(w.shape[1], -1)


def _flat_out(w: torch.Tensor) -> torch.Tensor:
    """[head, d_head, d_model] -> [head * d_head, d_model]."""
    return w.reshape(-1, w.shape[-1])


def _heads(x: torch.Tensor, n_heads: int) -> torch.Tensor:
    """[B, T, h*dh] -> [B, h, T, dh]."""
    b, t, _ = x.shape
    return x.view(b, t, n_heads, -1).transpose(1, 2)


def _merge(z: torch.Tensor) -> torch.Tensor:
    """[B, h, T, dh] -> [B, T, h*dh]."""
    b, h, t, dh = z.shape
    return z.transpose(1, 2).reshape(b, t, h * dh)


def _plus_mlp(mlp: MLP | None, x: torch.Tensor) -> torch.Tensor:
    """The residual stream after a block's MLP: ``x + mlp(x)`` (``x`` when the block has none)."""
    if mlp is None:
        return x
    return x + mlp.act(x @ mlp.W_in) @ mlp.W_out


def _full_attention(attn: Attention, resid: torch.Tensor) -> torch.Tensor:
    """Causal attention over all positions (used for middle layers)."""
    h = attn.W_Q.shape[0]
    q = _heads(resid @ _flat_in(attn.W_Q), h)
    k = _heads(resid @ _flat_in(attn.W_K), h)
    v = _heads(resid @ _flat_in(attn.W_V), h)
    z = F.scaled_dot_product_attention(q, k, v, is_causal=True, scale=attn.scale)
    return _merge(z) @ _flat_out(attn.W_O)


def _first_layer(model: AssignAddTransformer, tokens: torch.Tensor) -> torch.Tensor:
    """Residual stream after layer 0's attention, all positions, from embedding tables.

    resid = E[tok] + P + sum_h A0_h @ ((E W_V0_h W_O0_h)[tok] + P W_V0_h W_O0_h), with the
    pattern A0 from the tables (E W_Q)[tok] + P W_Q and (E W_K)[tok] + P W_K.
    """
    attn = model.blocks[0].attn
    h = attn.W_Q.shape[0]
    b, t = tokens.shape
    w_e, w_pos = model.embed.W_E, model.pos_embed.W_pos[:t]
    w_qk = torch.cat([_flat_in(attn.W_Q), _flat_in(attn.W_K)], dim=1)
    qk = F.embedding(tokens, w_e @ w_qk) + w_pos @ w_qk
    q, k = (_heads(x, h) for x in qk.chunk(2, dim=-1))
    scores = (q @ k.transpose(-1, -2)) * attn.scale
    causal = torch.ones(t, t, dtype=torch.bool, device=tokens.device).tril()
    pattern = torch.softmax(_at_least_fp32(scores).masked_fill(~causal, float("-inf")), dim=-1)  # [B,h,T,T]
    w_ov = attn.W_V @ attn.W_O  # [h, d, d]
    ov_tok = torch.einsum("vd,hde->vhe", w_e, w_ov).reshape(w_e.shape[0], -1)  # [V, h*d]
    ov = F.embedding(tokens, ov_tok).view(b, t, h, -1).transpose(1, 2) + w_pos @ w_ov  # [B,h,T,d]
    out = pattern @ ov
    out = out.sum(dim=1) if h > 1 else out[:, 0]
    return F.embedding(tokens, w_e) + w_pos + out


def _last_layer(model: AssignAddTransformer, resid: torch.Tensor) -> torch.Tensor:
    """Final layer at the last position only: attention, MLP and unembedding.

    The query at the last position meets keys resid_j W_K, so scores = resid @ (W_K q); the
    values mix as (pattern @ resid) W_V.  No per-position key or value projection is needed.
    """
    block = model.blocks[-1]
    attn = block.attn
    b = resid.shape[0]
    last = resid[:, -1]  # [B, d]
    q = torch.einsum("bd,hde->bhe", last, attn.W_Q)
    qk = torch.einsum("bhe,hde->bhd", q, attn.W_K)  # [B,h,d]
    pattern = torch.softmax(_at_least_fp32(qk @ resid.transpose(1, 2)) * attn.scale, dim=-1)  # [B,h,T]
    mixed = pattern @ resid  # [B,h,d]
    z = torch.einsum("bhd,hde->bhe", mixed, attn.W_V)
    x = last + z.reshape(b, -1) @ _flat_out(attn.W_O)
    return _plus_mlp(block.mlp, x) @ model.unembed.W_U


def fast_answer_logits(model: AssignAddTransformer, tokens: torch.Tensor) -> torch.Tensor:
    """Logits at the final position, ``[batch, d_vocab_out]``; same function as ``model(tokens)[:, -1]``."""
    if model.cfg.n_layers == 2 and 0 not in model.cfg.mlp_layers:
        return _two_layer_rows(model, tokens)
    return _general(model, tokens)


def _general(model: AssignAddTransformer, tokens: torch.Tensor) -> torch.Tensor:
    """Any depth: layer 0 from tables, middle layers in full, the last layer at one position."""
    if model.cfg.n_layers == 1:
        resid = F.embedding(tokens, model.embed.W_E) + model.pos_embed.W_pos[: tokens.shape[1]]
    else:
        resid = _plus_mlp(model.blocks[0].mlp, _first_layer(model, tokens))
        for block in model.blocks[1:-1]:
            resid = _plus_mlp(block.mlp, resid + _full_attention(block.attn, resid))
    return _last_layer(model, resid)


@dataclass(frozen=True)
class _LayerOneRows:
    """After layer 0, every residual vector is a weighted sum of K = (1 + h0)(V + T) fixed rows.

    Block 0 holds X = [W_E; W_pos[:T]] (``V + T`` rows: tokens, then positions); block 1 + h holds
    X W_V0_h W_O0_h, what layer-0 head h writes when it attends to that token or position.
    """

    rows: torch.Tensor  # [K, d_model]
    tok_rows: torch.Tensor  # [B, 1+h0, T]: row index of position j's token, in each block
    pos_rows: torch.Tensor  # [1+h0, T]: row index of position j itself, in each block

    @property
    def n_blocks(self) -> int:
        return self.pos_rows.shape[0]

    def weights(self, direct: torch.Tensor, via: torch.Tensor) -> torch.Tensor:
        """Row weights ``[B, *g, K]`` of the vector ``sum_j direct_j · resid_j``.

        ``direct`` [B, *g, T] weighs positions; ``via`` [B, *g, h0, T] = ``direct @ A0_h`` is how much
        of each position reaches it through layer-0 head h.  Each position contributes its token row
        and its position row, once per block.
        """
        lead, (n_blocks, t) = direct.shape[:-1], self.pos_rows.shape
        per_block = torch.cat([direct.unsqueeze(-2), via], dim=-2)  # [B, *g, 1+h0, T]
        tok = self.tok_rows.view(lead[0], *([1] * (len(lead) - 1)), n_blocks, t).expand(*lead, n_blocks, t)
        index = torch.cat([tok, self.pos_rows.expand(*lead, n_blocks, t)], dim=-1)  # [B, *g, 1+h0, 2T]
        weight = torch.cat([per_block, per_block], dim=-1)
        out = torch.zeros(*lead, self.rows.shape[0], dtype=weight.dtype, device=weight.device)
        return out.scatter_add(-1, index.reshape(*lead, -1), weight.reshape(*lead, -1))

    def scores(self, per_row: torch.Tensor) -> torch.Tensor:
        """``[B, h1, 1+h0, T]``: each position's rows' scores, per block, from one score per row ``per_row`` [B, h1, K]."""
        b, h1 = per_row.shape[:2]
        tok = torch.gather(per_row, 2, self.tok_rows.reshape(b, 1, -1).expand(b, h1, -1))
        return tok.view(b, h1, self.n_blocks, -1) + per_row[:, :, self.pos_rows]


def _layer0_pattern(attn0: Attention, x: torch.Tensor, tokens: torch.Tensor) -> torch.Tensor:
    """Layer-0 attention ``[B, h0, T, T]`` from the bilinear score table (X W_Q)(X W_K)ᵀ, X = [W_E; W_pos].

    A score is the sum of four table entries: query token × key token, query token × key position,
    query position × key token and query position × key position.
    """
    b, t = tokens.shape
    h0, width = attn0.W_Q.shape[0], x.shape[0]
    n_vocab = width - t
    table = torch.einsum("kd,hde->hke", x, attn0.W_Q) @ torch.einsum("kd,hde->hek", x, attn0.W_K)
    table = (table * attn0.scale).transpose(0, 1)  # [V+T (query row), h0, V+T (key row)]
    by_query_tok = F.embedding(tokens, table.reshape(width, -1)).view(b, t, h0, width)  # [B, Tq, h0, V+T]
    scores = torch.gather(by_query_tok[..., :n_vocab], 3, tokens[:, None, None, :].expand(b, t, h0, t))
    scores = scores + by_query_tok[..., n_vocab:]  # + query token x key position
    key_tok = table[n_vocab:, :, :n_vocab].permute(2, 0, 1)  # [V (key token), Tq, h0]
    scores = scores + F.embedding(tokens, key_tok.reshape(n_vocab, -1)).view(b, t, t, h0).permute(0, 2, 3, 1)
    scores = (scores + table[n_vocab:, :, n_vocab:]).transpose(1, 2)  # + query pos x key pos; [B, h0, Tq, Tk]
    causal = torch.ones(t, t, dtype=torch.bool, device=tokens.device).tril()
    return torch.softmax(_at_least_fp32(scores).masked_fill(~causal, float("-inf")), dim=-1)


def _row_basis(attn0: Attention, x: torch.Tensor, tokens: torch.Tensor) -> _LayerOneRows:
    t = tokens.shape[1]
    h0, width = attn0.W_Q.shape[0], x.shape[0]
    ov = torch.einsum("kd,hde,hef->hkf", x, attn0.W_V, attn0.W_O)  # [h0, V+T, d]
    rows = torch.cat([x, ov.reshape(-1, x.shape[1])])  # [K, d]
    offsets = torch.arange(1 + h0, device=tokens.device)[:, None] * width  # [1+h0, 1]
    pos = torch.arange(t, device=tokens.device)
    return _LayerOneRows(rows, tokens[:, None, :] + offsets, (width - t + pos) + offsets)


def _two_layer_rows(model: AssignAddTransformer, tokens: torch.Tensor) -> torch.Tensor:
    """The paper's shape (2 layers, no MLP in layer 0) without any [batch, pos, d_model] tensor.

    Every vector layer 1 reads is a weighted sum of the fixed rows of :class:`_LayerOneRows`, so layer 1
    needs only row weights: the last query's score for each row is (its row weights) @ the [K, K] table
    (rows W_Q)(rows W_K)ᵀ, gathered per position, and what the head writes is (weights over rows) @
    (rows W_V W_O).  Folding W_Q with W_K and W_V with W_O into per-row tables leaves fewer products
    (806 instead of 883 MFLOP per training step at the paper's shape, four fewer matmul calls each
    way): the compiled one-thread step took 18.4 instead of 19.3 ms on an AMD EPYC (medians of 10
    interleaved blocks of 100 steps, 2026-12-07), 1.05x.
    All work is O(batch · (V + T) · (d + K)) plus the final-position MLP.
    """
    attn0, block1 = model.blocks[0].attn, model.blocks[1]
    attn1 = block1.attn
    b, t = tokens.shape
    x = torch.cat([model.embed.W_E, model.pos_embed.W_pos[:t]])  # [V+T, d]
    pattern0 = _layer0_pattern(attn0, x, tokens)  # [B, h0, T, T]
    basis = _row_basis(attn0, x, tokens)

    # residual stream at the last position: its own rows, plus what layer-0 heads moved there
    last = torch.zeros(b, t, dtype=basis.rows.dtype, device=tokens.device)
    last[:, -1] = 1.0
    w_last = basis.weights(last, pattern0[:, :, -1, :])  # [B, K]
    resid_last = w_last @ basis.rows  # [B, d]

    # layer-1 attention of the last position: its query meets every row's key through the [K, K] table
    # (rows W_Q1)(rows W_K1)ᵀ per head; a position's score is its direct rows + what heads moved to it
    row_q = torch.einsum("kd,gde->gke", basis.rows, attn1.W_Q)
    row_k = torch.einsum("kd,gde->gke", basis.rows, attn1.W_K)
    per_row = torch.einsum("bk,gkl->bgl", w_last, row_q @ row_k.transpose(1, 2))  # [B, h1, K]
    y = basis.scores(per_row)  # [B, h1, 1+h0, T]
    scores1 = y[:, :, 0] + torch.einsum("bhji,bghi->bgj", pattern0, y[:, :, 1:])
    pattern1 = torch.softmax(_at_least_fp32(scores1) * attn1.scale, dim=-1)  # [B, h1, T]

    # readout: the value mix as row weights times each row's OV₁ output, then MLP and unembedding at one position
    via = torch.einsum("bgj,bhji->bghi", pattern1, pattern0)  # [B, h1, h0, T]
    row_ov = torch.einsum("kd,gde,gef->gkf", basis.rows, attn1.W_V, attn1.W_O)  # [h1, K, d]
    moved = basis.weights(pattern1, via).flatten(1) @ row_ov.flatten(0, 1)  # [B, d]
    return _plus_mlp(block1.mlp, resid_last + moved) @ model.unembed.W_U


@functools.cache
def compiled_answer_logits() -> Callable[[AssignAddTransformer, torch.Tensor], torch.Tensor]:
    """:func:`fast_answer_logits` through ``torch.compile`` (fixed shapes: one graph per run).

    Fusing the engine's many small ops makes a training step about 1.5x faster on CPU (``assign-add bench --what compile``);
    the first call compiles (tens of seconds; inductor caches the result on disk).  One compiled function per
    process: a worker that trains seed after seed (``survival``) compiles once.  Results equal
    the eager engine's up to float rounding (test), and are reproducible on the same machine.
    """
    return torch.compile(fast_answer_logits, dynamic=False)


def answer_loss(logits: torch.Tensor, answers: torch.Tensor) -> torch.Tensor:
    """Mean cross-entropy of the answer logits (in float32 at least, also under bf16 autocast)."""
    if logits.dtype in (torch.bfloat16, torch.float16):
        logits = logits.float()
    return F.cross_entropy(logits, answers)
