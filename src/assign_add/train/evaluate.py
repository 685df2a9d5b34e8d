"""Accuracy and loss of a model on the curated evaluation sets."""

from __future__ import annotations

from typing import Callable

import numpy as np
import torch
import torch.nn.functional as F

from assign_add.model.fast import fast_answer_logits
from assign_add.model.hooked import AssignAddTransformer
from assign_add.task.generator import Batch

Forward = Callable[[AssignAddTransformer, torch.Tensor], torch.Tensor]


def evaluate(model: AssignAddTransformer, sets: dict[str, Batch], forward: Forward = fast_answer_logits
             ) -> dict[str, dict[str, float]]:
    """``{"acc": {set: value}, "loss": {set: value}}`` of the answer at the final position (the one path:
    an :class:`Evaluator` on these sets)."""
    return Evaluator(sets, forward)(model)


def evaluate_set(model: AssignAddTransformer, batch: Batch) -> tuple[float, float]:
    """(accuracy, mean cross-entropy) on one batch."""
    res = evaluate(model, {"set": batch})
    return res["acc"]["set"], res["loss"]["set"]


class Evaluator:
    """Accuracy and loss on fixed sets, prepared once: every sequence in chunks of one size (the last
    padded), so that a compiled forward (``train.compile``) sees a single shape and is compiled once;
    per-sequence losses summed in float64.  Training keeps one for its live sets (200 evaluations in a
    20,000-step run); :func:`evaluate` makes one per call."""

    def __init__(self, sets: dict[str, Batch], forward: Forward = fast_answer_logits, chunk: int = 4096) -> None:
        self.names = list(sets)
        self.sizes = [len(b) for b in sets.values()]
        tokens = np.concatenate([b.tokens for b in sets.values()])
        answers = np.concatenate([b.answers for b in sets.values()])
        pad = (-len(tokens)) % chunk
        self.tokens = torch.as_tensor(np.concatenate([tokens, np.repeat(tokens[:1], pad, axis=0)]))
        self.answers = torch.as_tensor(np.concatenate([answers, np.repeat(answers[:1], pad)]))
        self.forward, self.chunk, self.count = forward, chunk, len(tokens)

    @torch.no_grad()
    def __call__(self, model: AssignAddTransformer) -> dict[str, dict[str, float]]:
        device = model.embed.W_E.device
        correct, losses = [], []
        for start in range(0, len(self.tokens), self.chunk):
            tok = self.tokens[start : start + self.chunk].to(device)
            ans = self.answers[start : start + self.chunk].to(device)
            logits = self.forward(model, tok).float()
            correct.append((logits.argmax(-1) == ans).cpu())
            losses.append(F.cross_entropy(logits, ans, reduction="none").double().cpu())
        ok = torch.cat(correct)[: self.count].split(self.sizes)
        loss = torch.cat(losses)[: self.count].split(self.sizes)
        return {"acc": {n: int(c.sum()) / max(len(c), 1) for n, c in zip(self.names, ok)},
                "loss": {n: float(v.sum()) / max(len(v), 1) for n, v in zip(self.names, loss)}}
