"""Causal checks (beyond the paper): ablations and activation patching, through hooks.

- zero- and mean-ablation of each attention head (``blocks.{l}.attn.hook_z``; the mean is over
  the evaluated batch, per position), with accuracy on every curated set;
- patching ``blocks.{last}.hook_resid_mid`` at the final position from the constant form of a
  sequence into its variable form (same prefix, same sum): if the layer-2 MLP only reads the
  shared representation, the patched variable form answers as the constant form does.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Callable

import numpy as np
import torch

from assign_add.analysis.positions import constant_form
from assign_add.analysis.representation import before_mlp
from assign_add.model.hooked import AssignAddTransformer
from assign_add.task.generator import Batch
from assign_add.task.vocab import Vocab

Hook = tuple[str, Callable]


@dataclass
class CausalResult:
    baseline: dict[str, float]
    ablations: dict[str, dict[str, float]]  # intervention -> set -> accuracy
    patching: dict[str, dict[str, float]]  # set -> {variable, constant, patched}

    def to_json(self) -> dict:
        return asdict(self)


@torch.no_grad()
def accuracy_with_hooks(model: AssignAddTransformer, batch: Batch, hooks: list[Hook]) -> float:
    logits = model.run_with_hooks(torch.as_tensor(batch.tokens), fwd_hooks=hooks)[:, -1]
    return float((logits.argmax(-1).numpy() == batch.answers).mean())


def head_ablation(layer: int, head: int, mode: str) -> Hook:
    def hook(z: torch.Tensor, hook) -> torch.Tensor:  # z: [batch, pos, head, d_head]
        z = z.clone()
        z[:, :, head] = 0.0 if mode == "zero" else z[:, :, head].mean(dim=0, keepdim=True)
        return z

    return (f"blocks.{layer}.attn.hook_z", hook)


@torch.no_grad()
def patch_constant_into_variable(model: AssignAddTransformer, batch: Batch, vocab: Vocab,
                                 variable: float | None = None) -> dict[str, float]:
    """Accuracy of the variable form, the constant form, and the variable form with the last layer's
    resid_mid (final position) patched in from the constant form.  ``variable``: the variable form's
    accuracy when already known (saves a forward pass)."""
    name = before_mlp(model)
    const = torch.as_tensor(constant_form(batch, vocab))
    const_logits, cache = model.run_with_cache(const, names_filter=name)
    source = cache[name][:, -1]

    def patch(x: torch.Tensor, hook) -> torch.Tensor:
        x = x.clone()
        x[:, -1] = source
        return x

    patched = model.run_with_hooks(torch.as_tensor(batch.tokens), fwd_hooks=[(name, patch)])[:, -1]
    acc = lambda logits: float((logits.argmax(-1).numpy() == batch.answers).mean())  # noqa: E731
    if variable is None:
        variable = acc(model(torch.as_tensor(batch.tokens))[:, -1])
    return {"variable": variable, "constant": acc(const_logits[:, -1]), "patched": acc(patched)}


def causal_checks(model: AssignAddTransformer, sets: dict[str, Batch], vocab: Vocab) -> CausalResult:
    baseline = {name: accuracy_with_hooks(model, b, []) for name, b in sets.items()}
    ablations = {}
    for layer in range(model.cfg.n_layers):
        for head in range(model.cfg.n_heads):
            for mode in ("zero", "mean"):
                key = f"L{layer + 1}H{head}_{mode}"
                hook = head_ablation(layer, head, mode)
                ablations[key] = {name: accuracy_with_hooks(model, b, [hook]) for name, b in sets.items()}
    patching = {
        name: patch_constant_into_variable(model, b, vocab, variable=baseline[name])
        for name, b in sets.items()
        if name.startswith(("1var", "2var")) and np.all(b.category > 0)
    }
    return CausalResult(baseline, ablations, patching)
