"""Causal tests of the paper's mechanism: the composition of a binding and an addition circuit (C12),
the residual before MLP₂ as the adder's input (C13), and addition's independence of binding (C1b).

Components, by TransformerLens hook (``L`` the last layer):

- binding circuit: the layer-1 head (``blocks.0.attn.hook_z``, every position), and the layer-2
  routing (``blocks.L.attn.hook_pattern``, the final ``=``'s row);
- addition circuit: the layer-2 head's output at the final position (``blocks.L.attn.hook_z``), and
  MLP₂'s frequency neurons (``blocks.L.mlp.hook_post``, final position; the neurons C9 counts).

Each is ablated two ways, within the evaluated set, so that what every sequence of a form shares
(where its query's operands sit) survives and only what is specific to a sequence is removed:

- *mean*: the activation replaced by its mean over the set's sequences, per position;
- *resample*: replaced by the activation of another sequence of the set (a fixed derangement).

Chance differs by what is ablated.  Without the addition circuit nothing can produce the sum: chance
is 1/N.  Without the binding circuit the model still sees which tokens are values, but not which
value belongs to which variable: its chance is :func:`binding_free_chance`, the accuracy of adding
values picked at random from the sequence's assignments for each variable operand (1 for a 0-var
sequence; about 0.4 for a 1-var one with one to six assignments).

Nulls: an ablation of as many MLP₂ neurons drawn at random from the others; the residual's
components at as many frequencies drawn at random from the non-key ones (as drawn, and less what
their directions share with the key frequencies' directions: the Fourier directions of different
frequencies are not orthogonal in the residual, so the first also removes part of the key
frequencies); the interchange at a checkpoint before binding and one layer earlier (before the
layer-2 head has read the operands).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Callable

import numpy as np
import torch

from assign_add.analysis.fourier import final_position_grids
from assign_add.analysis.positions import constant_form, find_positions
from assign_add.model.hooked import AssignAddTransformer
from assign_add.task.generator import Batch
from assign_add.task.vocab import Vocab

Hook = tuple[str, Callable]
MODES = ("mean", "resample")
HELDOUT_SETS = ("0var_heldout", "1var_heldout", "2var_heldout")
VARIABLE_SETS = ("1var_heldout", "2var_heldout")
BINDING_COMPONENTS = ("layer1_head", "layer2_routing")
ADDITION_COMPONENTS = ("layer2_head_output", "frequency_neurons")
NULL_NEURONS = "random_neurons"  # as many MLP₂ neurons as the frequency neurons, drawn from the others
DERANGEMENT_SEED = 0
NULL_SEED = 1


def derangement(n: int, seed: int = DERANGEMENT_SEED) -> np.ndarray:
    """A permutation of ``range(n)`` with no fixed point (each sequence reads another's activation):
    a random cycle through all ``n``.  ``n`` < 2 has none; it returns the identity."""
    if n < 2:
        return np.arange(n)
    order = np.random.default_rng(seed).permutation(n)
    perm = np.empty(n, dtype=np.int64)
    perm[order] = np.roll(order, -1)
    return perm


def binding_free_chance(batch: Batch, vocab: Vocab) -> np.ndarray:
    """Per sequence: the probability that the sum is right when each variable operand takes a value
    drawn uniformly from the sequence's assignments (constants are read as they are)."""
    pos = find_positions(batch, vocab)
    values: list[list[int]] = [[] for _ in range(len(batch))]
    for row, p in zip(pos.value_rows, pos.value_pos):
        values[int(row)].append(int(batch.tokens[row, p]))
    out = np.empty(len(batch))
    for i in range(len(batch)):
        left = values[i] if batch.lhs_var[i] >= 0 else [int(batch.n[i])]
        right = values[i] if batch.rhs_var[i] >= 0 else [int(batch.m[i])]
        sums = (np.add.outer(left, right) % vocab.modulus).ravel()
        out[i] = float(np.mean(sums == batch.answers[i]))
    return out


def _replace(x: torch.Tensor, mode: str, perm: np.ndarray) -> torch.Tensor:
    """``x`` [batch, ...] replaced by its batch mean (``mean``) or by another row (``resample``)."""
    if mode == "mean":
        return x.mean(dim=0, keepdim=True).expand_as(x)
    return x[torch.as_tensor(perm)]


def layer1_head(mode: str, perm: np.ndarray) -> Hook:
    def hook(z: torch.Tensor, hook) -> torch.Tensor:  # [batch, pos, head, d_head], every position
        return _replace(z, mode, perm).clone()

    return ("blocks.0.attn.hook_z", hook)


def layer2_routing(last: int, mode: str, perm: np.ndarray) -> Hook:
    def hook(pattern: torch.Tensor, hook) -> torch.Tensor:  # [batch, head, q, k]: the final query's row
        pattern = pattern.clone()
        pattern[:, :, -1] = _replace(pattern[:, :, -1], mode, perm)
        return pattern

    return (f"blocks.{last}.attn.hook_pattern", hook)


def layer2_head_output(last: int, mode: str, perm: np.ndarray) -> Hook:
    def hook(z: torch.Tensor, hook) -> torch.Tensor:  # [batch, pos, head, d_head]: the final position
        z = z.clone()
        z[:, -1] = _replace(z[:, -1], mode, perm)
        return z

    return (f"blocks.{last}.attn.hook_z", hook)


def mlp_neurons(last: int, neurons: np.ndarray, mode: str, perm: np.ndarray) -> Hook:
    idx = torch.as_tensor(neurons, dtype=torch.long)

    def hook(post: torch.Tensor, hook) -> torch.Tensor:  # [batch, pos, d_mlp]: the final position
        post = post.clone()
        post[:, -1, idx] = _replace(post[:, -1, idx], mode, perm)
        return post

    return (f"blocks.{last}.mlp.hook_post", hook)


def subspace_ablation(last: int, basis: torch.Tensor, mode: str, perm: np.ndarray) -> Hook:
    """The component of the final position's residual before MLP₂ in the span of ``basis``
    [d_model, r] (orthonormal columns) replaced by the set's mean or another sequence's."""

    def hook(resid: torch.Tensor, hook) -> torch.Tensor:  # [batch, pos, d_model]
        resid = resid.clone()
        x = resid[:, -1]
        inside = (x @ basis) @ basis.T
        resid[:, -1] = x - inside + _replace(inside, mode, perm)
        return resid

    return (f"blocks.{last}.hook_resid_mid", hook)


@torch.no_grad()
def accuracy(model: AssignAddTransformer, batch: Batch, hooks: list[Hook] = ()) -> float:
    logits = model.run_with_hooks(torch.as_tensor(batch.tokens), fwd_hooks=list(hooks))[:, -1]
    return float((logits.argmax(-1).numpy() == batch.answers).mean())


def _last(model: AssignAddTransformer) -> int:
    return model.cfg.n_layers - 1


def binding_ablations(model: AssignAddTransformer, batch: Batch) -> dict[str, dict[str, float]]:
    """Accuracy with each binding component ablated, each mode: {component: {mode: accuracy}}."""
    perm, last = derangement(len(batch)), _last(model)
    return {
        "layer1_head": {m: accuracy(model, batch, [layer1_head(m, perm)]) for m in MODES},
        "layer2_routing": {m: accuracy(model, batch, [layer2_routing(last, m, perm)]) for m in MODES},
    }


def random_others(chosen: np.ndarray, total: int, seed: int = NULL_SEED) -> np.ndarray:
    """As many indices as ``chosen`` (at most all the others), drawn from ``range(total)`` minus ``chosen``."""
    others = np.setdiff1d(np.arange(total), chosen)
    rng = np.random.default_rng(seed)
    return np.sort(rng.choice(others, size=min(len(chosen), len(others)), replace=False))


def addition_ablations(model: AssignAddTransformer, batch: Batch, frequency_neurons: np.ndarray
                       ) -> dict[str, dict[str, float]]:
    """Accuracy with each addition component ablated (and the random-neuron null), each mode."""
    perm, last = derangement(len(batch)), _last(model)
    null = random_others(frequency_neurons, model.cfg.d_mlp)
    return {
        "layer2_head_output": {m: accuracy(model, batch, [layer2_head_output(last, m, perm)]) for m in MODES},
        "frequency_neurons": {m: accuracy(model, batch, [mlp_neurons(last, frequency_neurons, m, perm)]) for m in MODES},
        NULL_NEURONS: {m: accuracy(model, batch, [mlp_neurons(last, null, m, perm)]) for m in MODES},
    }


@dataclass
class Composition:
    """C12 at one checkpoint: accuracies per held-out set, unablated and ablated, beside each set's chance."""

    step: int
    baseline: dict[str, float]
    chance: dict[str, dict[str, float]]  # "addition" (1/N) and "binding" (binding-free) per set
    ablations: dict[str, dict[str, dict[str, float]]]  # component -> mode -> set -> accuracy
    n_frequency_neurons: int
    n_null_neurons: int
    sequences: dict[str, int]

    def to_json(self) -> dict:
        return asdict(self)


def composition(model: AssignAddTransformer, sets: dict[str, Batch], vocab: Vocab, frequency_neurons: np.ndarray,
                step: int) -> Composition:
    """Every component ablated on every held-out set present in ``sets``."""
    names = [s for s in HELDOUT_SETS if s in sets]
    ablations: dict[str, dict[str, dict[str, float]]] = {}
    for name in names:
        per = {**binding_ablations(model, sets[name]), **addition_ablations(model, sets[name], frequency_neurons)}
        for component, modes in per.items():
            for mode, acc in modes.items():
                ablations.setdefault(component, {}).setdefault(mode, {})[name] = acc
    chance = {"addition": {n: 1.0 / vocab.modulus for n in names},
              "binding": {n: float(binding_free_chance(sets[n], vocab).mean()) for n in names}}
    null = random_others(frequency_neurons, model.cfg.d_mlp)
    return Composition(step, {n: accuracy(model, sets[n]) for n in names}, chance, ablations,
                       int(len(frequency_neurons)), int(len(null)), {n: len(sets[n]) for n in names})


@dataclass
class Independence:
    """C1b at one checkpoint: 0-var held-out accuracy, unablated and with each binding component ablated."""

    step: int
    baseline: float
    ablations: dict[str, dict[str, float]]  # component -> mode -> accuracy

    def to_json(self) -> dict:
        return asdict(self)


def independence(model: AssignAddTransformer, zero_var: Batch, step: int) -> Independence:
    return Independence(step, accuracy(model, zero_var), binding_ablations(model, zero_var))


# ---- C13: the residual before MLP₂ carries the sum


@torch.no_grad()
def interchange(model: AssignAddTransformer, target: np.ndarray, source: np.ndarray, source_answers: np.ndarray,
                target_answers: np.ndarray, hook_name: str) -> dict[str, float]:
    """Patch ``hook_name`` at the final position from each source sequence into its target: the share of
    pairs (with different sums) whose answer becomes the source's sum, and the share keeping the target's."""
    _, cache = model.run_with_cache(torch.as_tensor(source), names_filter=hook_name)
    patched_in = cache[hook_name][:, -1]

    def patch(x: torch.Tensor, hook) -> torch.Tensor:
        x = x.clone()
        x[:, -1] = patched_in
        return x

    pred = model.run_with_hooks(torch.as_tensor(target), fwd_hooks=[(hook_name, patch)])[:, -1].argmax(-1).numpy()
    differ = source_answers != target_answers
    n = int(differ.sum())
    if n == 0:
        return {"follows_source": float("nan"), "keeps_target": float("nan"), "pairs": 0}
    return {"follows_source": float((pred == source_answers)[differ].mean()),
            "keeps_target": float((pred == target_answers)[differ].mean()), "pairs": n}


def before_mlp2(model: AssignAddTransformer) -> str:
    return f"blocks.{_last(model)}.hook_resid_mid"


def before_layer2(model: AssignAddTransformer) -> str:
    return f"blocks.{_last(model)}.hook_resid_pre"


def interchanges(model: AssignAddTransformer, batch: Batch, vocab: Vocab, hook_name: str) -> dict[str, dict]:
    """Both directions on one variable-form set: the constant form of another sequence patched into
    each variable form (``constant_to_variable``), and the variable form of another sequence into each
    constant form (``variable_to_constant``)."""
    perm = derangement(len(batch))
    const = constant_form(batch, vocab)
    answers = batch.answers
    return {
        "constant_to_variable": interchange(model, batch.tokens, const[perm], answers[perm], answers, hook_name),
        "variable_to_constant": interchange(model, const, batch.tokens[perm], answers[perm], answers, hook_name),
    }


def residual_grid(model: AssignAddTransformer, vocab: Vocab, zero_var: Batch, n_templates: int = 4) -> np.ndarray:
    """The final position's residual before MLP₂ over every (n, m) of a 0-var template, averaged over
    templates: [N, N, d_model]."""
    name = before_mlp2(model)
    return final_position_grids(model, vocab, zero_var, [name], name, n_templates)[name]


def frequency_basis(grid: np.ndarray, frequencies: list[int]) -> np.ndarray:
    """Orthonormal columns [d_model, r] spanning the residual's Fourier components at ``frequencies``
    along n and along m: Re and Im of the 2-D DFT at (k, 0) and (0, k) for each k (rank-checked)."""
    d = grid.shape[-1]
    if not frequencies:
        return np.zeros((d, 0))
    f = np.fft.fft2(grid - grid.mean(axis=(0, 1), keepdims=True), axes=(0, 1))
    vectors = []
    for k in frequencies:
        for v in (f[k, 0], f[0, k]):
            vectors += [v.real, v.imag]
    u, s, _ = np.linalg.svd(np.stack(vectors, axis=1), full_matrices=False)
    keep = s > s.max() * 1e-6 if s.size and s.max() > 0 else np.zeros(0, dtype=bool)
    return u[:, keep]


def random_frequencies(keys: list[int], modulus: int, seed: int = NULL_SEED) -> list[int]:
    """As many frequencies as ``keys`` (at most all the others), drawn from 1..N//2 minus the keys."""
    others = [k for k in range(1, modulus // 2 + 1) if k not in keys]
    rng = np.random.default_rng(seed)
    return sorted(int(k) for k in rng.choice(others, size=min(len(keys), len(others)), replace=False))


def frequency_ablations(model: AssignAddTransformer, zero_var: Batch, vocab: Vocab, keys: list[int],
                        grid: np.ndarray) -> dict:
    """0-var held-out accuracy with the residual's key-frequency components ablated, and with as many
    random non-key frequencies' components ablated (the null), each mode.  ``grid``: the residual grid
    (:func:`residual_grid`)."""
    perm, last = derangement(len(zero_var)), _last(model)
    key = frequency_basis(grid, list(keys))
    others = random_frequencies(list(keys), vocab.modulus)
    bases = {"key": (list(keys), key), "random": (others, frequency_basis(grid, others)),
             "random_orthogonal": (others, orthogonal_part(frequency_basis(grid, others), key))}
    out: dict = {}
    for label, (ks, basis) in bases.items():
        basis = torch.as_tensor(basis, dtype=torch.float32)
        out[label] = {"frequencies": ks, "dimensions": int(basis.shape[1]),
                      **{m: accuracy(model, zero_var, [subspace_ablation(last, basis, m, perm)]) for m in MODES}}
    return out


def orthogonal_part(basis: np.ndarray, away_from: np.ndarray) -> np.ndarray:
    """Orthonormal columns spanning what of ``basis``'s span is orthogonal to ``away_from``'s (both
    orthonormal): the random frequencies' directions, less what they share with the key frequencies'."""
    if basis.shape[1] == 0 or away_from.shape[1] == 0:
        return basis
    rest = basis - away_from @ (away_from.T @ basis)
    u, s, _ = np.linalg.svd(rest, full_matrices=False)
    return u[:, s > 1e-6]


@dataclass
class Adder:
    """C13: interchanges at the end (and their nulls), and the key-frequency ablation."""

    step: int
    interchange: dict[str, dict[str, dict]]  # set -> direction -> {follows_source, keeps_target, pairs}
    wrong_site: dict[str, dict[str, dict]]  # the same, one layer earlier (before the layer-2 head)
    frequencies: dict
    before_binding: dict | None = field(default=None)  # {"step": s, "interchange": {...}} at the last checkpoint before binding

    def to_json(self) -> dict:
        return asdict(self)


def adder(model: AssignAddTransformer, sets: dict[str, Batch], vocab: Vocab, keys: list[int], step: int,
          grid: np.ndarray | None = None) -> Adder:
    """``grid``: the residual grid when already computed (else from the first 0-var training sequences)."""
    names = [s for s in VARIABLE_SETS if s in sets]
    if grid is None:
        grid = residual_grid(model, vocab, sets.get("0var_train", sets["0var_heldout"]))
    return Adder(
        step,
        {n: interchanges(model, sets[n], vocab, before_mlp2(model)) for n in names},
        {n: interchanges(model, sets[n], vocab, before_layer2(model)) for n in names},
        frequency_ablations(model, sets["0var_heldout"], vocab, keys, grid),
    )


def adder_before_binding(model: AssignAddTransformer, sets: dict[str, Batch], vocab: Vocab, step: int) -> dict:
    names = [s for s in VARIABLE_SETS if s in sets]
    return {"step": step, "interchange": {n: interchanges(model, sets[n], vocab, before_mlp2(model)) for n in names}}
