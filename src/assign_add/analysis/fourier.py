"""Fourier structure of the layer-2 MLP (claim C9).

Pre-activations ``blocks.{last}.mlp.hook_pre`` at the final position are collected over the full
N x N grid of operand values, for each query form (0-var, 1-var, 2-var), with the prefix held
fixed (averaged over a few prefix templates).  For each neuron the grid's 2-D DFT gives, for
every frequency k, the fraction of variance explained by
``a cos(2πk·n/N + α) + b cos(2πk·m/N + β)``: by Parseval that is the power at (k, 0), (−k, 0),
(0, k), (0, −k) over the total non-constant power, exactly what a least-squares fit of those
four terms explains.  A neuron is a frequency-k neuron when its best k explains more than
``criteria.FOURIER_NEURON_FVE``; key frequencies are those used by at least
``criteria.KEY_FREQUENCY_MIN_NEURONS`` such neurons.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

import numpy as np
import torch

from assign_add.analysis import criteria as C
from assign_add.model.hooked import AssignAddTransformer
from assign_add.task.generator import Batch
from assign_add.task.vocab import Vocab


@dataclass
class NeuronFit:
    frequency: np.ndarray  # [neurons] best k in 1..N//2
    fve: np.ndarray  # [neurons] fraction of variance explained by that k
    amp_n: np.ndarray
    amp_m: np.ndarray
    alpha: np.ndarray
    beta: np.ndarray
    fve_all: np.ndarray  # [neurons, N//2] fve of every k
    additive: np.ndarray  # [neurons] variance explained by any f(n) + g(m)


@dataclass
class FourierResult:
    key_frequencies: list[int]
    frequency_counts: dict[int, int]
    n_frequency_neurons: int
    n_neurons: int
    mean_fve_frequency_neurons: float
    spectrum: list[float]  # mean fraction of power per k over neurons (axis terms)
    neurons: list[dict]  # per neuron: frequency, fve, amp_n, amp_m, alpha, beta
    shared: dict[str, dict[str, float]]  # per query form: fve at the 0-var k, corr with 0-var grid

    def to_json(self) -> dict:
        return asdict(self)


def fit_neurons(grid: np.ndarray) -> NeuronFit:
    """``grid`` [N, N, neurons] (n on axis 0, m on axis 1) -> per-neuron Fourier fits."""
    n_mod = grid.shape[0]
    g = grid - grid.mean(axis=(0, 1), keepdims=True)
    f = np.fft.fft2(g, axes=(0, 1))  # [N, N, neurons]
    power = np.abs(f) ** 2
    total = power.sum(axis=(0, 1)) + 1e-30
    ks = np.arange(1, n_mod // 2 + 1)
    axis_power = power[ks, 0] + power[-ks, 0] + power[0, ks] + power[0, -ks]  # [K, neurons]
    if n_mod % 2 == 0:  # the Nyquist term is its own mirror
        axis_power[-1] = power[n_mod // 2, 0] + power[0, n_mod // 2]
    fve_all = (axis_power / total).T  # [neurons, K]
    best = fve_all.argmax(axis=1)
    k = ks[best]
    idx = np.arange(grid.shape[2])
    fn, fm = f[k, 0, idx], f[0, k, idx]
    scale = 2.0 / (n_mod * n_mod)
    additive = (power[1:, 0].sum(axis=0) + power[0, 1:].sum(axis=0)) / total
    return NeuronFit(
        frequency=k, fve=fve_all[idx, best], amp_n=np.abs(fn) * scale, amp_m=np.abs(fm) * scale,
        alpha=np.angle(fn), beta=np.angle(fm), fve_all=fve_all, additive=additive,
    )


def grid_tokens(template: np.ndarray, vocab: Vocab, lhs_value_pos: int, rhs_value_pos: int) -> np.ndarray:
    """All N x N sequences from one template, writing n and m where the operand values live
    (the operand itself for a constant, the bound assignment's value for a variable)."""
    n_mod = vocab.modulus
    n, m = np.meshgrid(np.arange(n_mod), np.arange(n_mod), indexing="ij")
    tokens = np.repeat(template[None], n_mod * n_mod, axis=0)
    tokens[:, lhs_value_pos] = n.reshape(-1)
    tokens[:, rhs_value_pos] = m.reshape(-1)
    return tokens


def templates_for(batch: Batch, vocab: Vocab, count: int) -> list[tuple[np.ndarray, int, int]]:
    """(template, position of the left value, position of the right value) for the first sequences."""
    from assign_add.analysis.positions import find_positions

    pos = find_positions(batch, vocab)
    lpos, rpos = vocab.operand_positions()
    out = []
    for i in range(min(count, len(batch))):
        lv = pos.lhs_value_pos[i] if pos.lhs_value_pos[i] >= 0 else lpos
        rv = pos.rhs_value_pos[i] if pos.rhs_value_pos[i] >= 0 else rpos
        out.append((batch.tokens[i], int(lv), int(rv)))
    return out


@torch.no_grad()
def final_position_grids(model: AssignAddTransformer, vocab: Vocab, batch: Batch, names: list[str], stop_at: str,
                         n_templates: int = 4) -> dict[str, np.ndarray]:
    """For each hook in ``names``: the mean over templates of its final-position activation over the
    N x N grid of operand values, [N, N, width]; one forward pass per template, stopped at ``stop_at``
    (the one of ``names`` the forward pass reaches last)."""
    grids: dict[str, list[np.ndarray]] = {n: [] for n in names}
    for template, lv, rv in templates_for(batch, vocab, n_templates):
        tokens = torch.as_tensor(grid_tokens(template, vocab, lv, rv))
        cache = model.cache_until(tokens, set(names), stop_at=stop_at)
        for n in names:
            grids[n].append(cache[n][:, -1].numpy().reshape(vocab.modulus, vocab.modulus, -1))
    return {n: np.mean(g, axis=0) for n, g in grids.items()}


def preactivation_name(model: AssignAddTransformer) -> str:
    return f"blocks.{model.cfg.n_layers - 1}.mlp.hook_pre"


def preactivation_grid(model: AssignAddTransformer, vocab: Vocab, batch: Batch, n_templates: int = 4) -> np.ndarray:
    """Mean over templates of the final-position layer-2 MLP pre-activations, [N, N, d_mlp]
    (the forward pass stops at that hook: nothing after it is computed or kept)."""
    name = preactivation_name(model)
    return final_position_grids(model, vocab, batch, [name], name, n_templates)[name]


def key_frequencies(fit: NeuronFit) -> tuple[list[int], dict[int, int], np.ndarray]:
    strong = fit.fve > C.FOURIER_NEURON_FVE
    ks, counts = np.unique(fit.frequency[strong], return_counts=True)
    table = {int(k): int(c) for k, c in zip(ks, counts)}
    keys = sorted(k for k, c in table.items() if c >= C.KEY_FREQUENCY_MIN_NEURONS)
    return keys, table, strong


def fourier_analysis(model: AssignAddTransformer, vocab: Vocab, forms: dict[str, Batch],
                     known: dict[str, np.ndarray] | None = None) -> tuple[FourierResult, dict]:
    """``forms`` maps "0var" (required), "1var", "2var" to batches of that query form; ``known`` holds
    pre-activation grids already computed for some of them.

    Returns the result and the raw arrays (grid and fits) for figures.
    """
    known = known or {}
    grids = {name: known[name] if name in known else preactivation_grid(model, vocab, batch)
             for name, batch in forms.items()}
    fit = fit_neurons(grids["0var"])
    keys, table, strong = key_frequencies(fit)
    shared = {}
    for name, grid in grids.items():
        other = fit_neurons(grid)
        at_k = other.fve_all[np.arange(len(fit.frequency)), fit.frequency - 1]
        a = grids["0var"].reshape(-1, grid.shape[-1])
        b = grid.reshape(-1, grid.shape[-1])
        corr = [np.corrcoef(a[:, j], b[:, j])[0, 1] for j in np.nonzero(strong)[0]]
        shared[name] = {
            "mean_fve_at_0var_frequency": float(at_k[strong].mean()) if strong.any() else float("nan"),
            "mean_corr_with_0var": float(np.nanmean(corr)) if corr else float("nan"),
        }
    neurons = [
        {"frequency": int(fit.frequency[j]), "fve": float(fit.fve[j]), "amp_n": float(fit.amp_n[j]),
         "amp_m": float(fit.amp_m[j]), "alpha": float(fit.alpha[j]), "beta": float(fit.beta[j])}
        for j in range(len(fit.frequency))
    ]
    result = FourierResult(
        key_frequencies=keys,
        frequency_counts=table,
        n_frequency_neurons=int(strong.sum()),
        n_neurons=len(fit.frequency),
        mean_fve_frequency_neurons=float(fit.fve[strong].mean()) if strong.any() else float("nan"),
        spectrum=[float(x) for x in fit.fve_all.mean(axis=0)],
        neurons=neurons,
        shared=shared,
    )
    return result, {"grid": grids["0var"], "fit": fit}
