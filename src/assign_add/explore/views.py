"""What the explorer shows for one prompt at one checkpoint, as JSON-ready dicts (no web code here).

- ``prompt_view``: the answer and top probabilities, both layers' attention patterns (head-averaged,
  from ``hook_pattern``), and layer-2 routing: the attention of the final ``=`` on every token, with
  the value tokens bound to the variable operands marked;
- ``fourier_view``: for the final model, the Fourier spectrum of the layer-2 MLP neurons this prompt
  activates: each activated neuron's fraction of variance per frequency (fitted once on the 0-var
  N × N grid, :mod:`assign_add.analysis.fourier`), averaged with the neuron's activation as weight.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from assign_add.analysis.fourier import fit_neurons, preactivation_grid
from assign_add.model.hooked import AssignAddTransformer
from assign_add.task.generator import Batch
from assign_add.task.vocab import Prompt, Vocab, parse_text, prompt_to_tokens

TOP = 5
TOP_NEURONS = 8


def bound_positions(prompt: Prompt, tokens: np.ndarray, vocab: Vocab) -> list[int]:
    """Positions of the value tokens bound to the prompt's variable operands."""
    offset = vocab.assignment_template().index("val") - vocab.assignment_template().index("var")
    out = []
    for op in (prompt.lhs, prompt.rhs):
        if isinstance(op, str):
            where = np.nonzero(tokens[: vocab.region_len] == vocab.var_id(op))[0]
            if len(where):
                out.append(int(where[-1]) + offset)
    return sorted(set(out))


@torch.no_grad()
def prompt_view(model: AssignAddTransformer, vocab: Vocab, text: str) -> dict:
    """Everything the page draws for ``text``; a malformed prompt raises ``TextFormError``."""
    prompt = parse_text(text, vocab)
    tokens = prompt_to_tokens(prompt, vocab)
    logits, cache = model.run_with_cache(torch.as_tensor(tokens[None]),
                                         names_filter=lambda n: n.endswith("hook_pattern"))
    probs = torch.softmax(logits[0, -1].float(), dim=-1)
    values, indices = probs.topk(min(TOP, vocab.modulus))
    patterns = [cache["pattern", layer][0].mean(0).numpy() for layer in range(model.cfg.n_layers)]
    expected = prompt.answer(vocab.modulus)
    answer = int(indices[0])
    bound = bound_positions(prompt, tokens, vocab)
    routing = patterns[-1][-1]
    return {
        "prompt": text.strip(),
        "answer": answer,
        "expected": expected,
        "correct": answer == expected,
        "top": [{"answer": int(i), "prob": round(float(v), 6)} for v, i in zip(values, indices)],
        "tokens": [vocab.token_str(int(t)) for t in tokens],
        "patterns": [np.round(p.astype(float), 4).tolist() for p in patterns],
        "routing": {"weights": np.round(routing.astype(float), 4).tolist(), "bound": bound,
                    "on_bound": round(float(routing[bound].sum()), 5) if bound else None},
    }


@dataclass
class NeuronSpectra:
    """Per-neuron fraction of variance per frequency k = 1 … N//2 of the final model's MLP₂."""

    fve_all: np.ndarray  # [neurons, N//2]
    frequency: np.ndarray  # [neurons] best k
    fve: np.ndarray  # [neurons]


def neuron_spectra(model: AssignAddTransformer, vocab: Vocab, zero_var: Batch) -> NeuronSpectra:
    fit = fit_neurons(preactivation_grid(model, vocab, zero_var))
    return NeuronSpectra(fit.fve_all, fit.frequency, fit.fve)


@torch.no_grad()
def fourier_view(model: AssignAddTransformer, vocab: Vocab, text: str, spectra: NeuronSpectra) -> dict:
    tokens = prompt_to_tokens(parse_text(text, vocab), vocab)
    last = model.cfg.n_layers - 1
    name = f"blocks.{last}.mlp.hook_pre"
    _, cache = model.run_with_cache(torch.as_tensor(tokens[None]), names_filter=lambda n: n == name)
    act = torch.relu(cache[name][0, -1]).numpy()  # activation (ReLU of the pre-activation)
    active = np.nonzero(act > 0)[0]
    if not len(active):
        return {"active": 0, "spectrum": [0.0] * spectra.fve_all.shape[1], "neurons": []}
    w = act[active] / act[active].sum()
    spectrum = (w[:, None] * spectra.fve_all[active]).sum(0)
    top = active[np.argsort(-act[active])[:TOP_NEURONS]]
    return {
        "active": int(len(active)),
        "spectrum": np.round(spectrum.astype(float), 5).tolist(),
        "neurons": [{"neuron": int(j), "activation": round(float(act[j]), 4), "frequency": int(spectra.frequency[j]),
                     "fve": round(float(spectra.fve[j]), 4)} for j in top],
    }
