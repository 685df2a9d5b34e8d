"""Linear probes across checkpoints (closed-form ridge regression onto one-hot targets).

- ``operand_n`` / ``operand_m``: the values of the left and right operand read from the final
  position's residual stream before the layer-2 MLP (``blocks.1.hook_resid_mid``);
- ``bound_variable``: which variable an assignment value token is bound to, read at that token
  after layer 1 (``blocks.0.hook_resid_post``).

Each probe is fitted on a seeded 70 % of the examples and scored on the other 30 %.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

import numpy as np
import torch

from assign_add.analysis.positions import find_positions
from assign_add.model.hooked import AssignAddTransformer
from assign_add.task.generator import Batch
from assign_add.task.vocab import Vocab


@dataclass
class ProbeResult:
    operand_n: float
    operand_m: float
    bound_variable: float

    def to_json(self) -> dict:
        return asdict(self)


def ridge_probe_accuracy(x: np.ndarray, y: np.ndarray, n_classes: int, seed: int = 0, l2: float = 1e-3) -> float:
    """Held-out accuracy of a ridge-regression probe from features ``x`` [S, d] to labels ``y``."""
    rng = np.random.default_rng(seed)
    perm = rng.permutation(len(x))
    cut = int(0.7 * len(x))
    train, test = perm[:cut], perm[cut:]
    x = np.concatenate([x, np.ones((len(x), 1))], axis=1).astype(np.float64)
    mu, sd = x[train].mean(0), x[train].std(0) + 1e-8
    mu[-1], sd[-1] = 0.0, 1.0
    x = (x - mu) / sd
    target = np.eye(n_classes)[y]
    a = x[train].T @ x[train] + l2 * len(train) * np.eye(x.shape[1])
    w = np.linalg.solve(a, x[train].T @ target[train])
    return float(((x[test] @ w).argmax(1) == y[test]).mean())


def probe_hooks(n_layers: int) -> set[str]:
    """The activations :func:`probes_from_activations` reads."""
    return {f"blocks.{n_layers - 1}.hook_resid_mid", "blocks.0.hook_resid_post"}


def probes_from_activations(cache, batch: Batch, vocab: Vocab, n_layers: int, seed: int = 0) -> ProbeResult:
    """The three probes from a cache holding :func:`probe_hooks` for ``batch``."""
    final = cache[f"blocks.{n_layers - 1}.hook_resid_mid"][:, -1].numpy()
    pos = find_positions(batch, vocab)
    at_values = cache["blocks.0.hook_resid_post"][pos.value_rows, pos.value_pos].numpy()
    return ProbeResult(
        operand_n=ridge_probe_accuracy(final, batch.n, vocab.modulus, seed),
        operand_m=ridge_probe_accuracy(final, batch.m, vocab.modulus, seed + 1),
        bound_variable=ridge_probe_accuracy(at_values, pos.value_var, len(vocab.variables), seed + 2),
    )


@torch.no_grad()
def probe_checkpoint(model: AssignAddTransformer, batch: Batch, vocab: Vocab, seed: int = 0) -> ProbeResult:
    names = probe_hooks(model.cfg.n_layers)
    _, cache = model.run_with_cache(torch.as_tensor(batch.tokens), names_filter=lambda n: n in names)
    return probes_from_activations(cache, batch, vocab, model.cfg.n_layers, seed)
