"""Accuracy and loss of a model on the curated evaluation sets."""

from __future__ import annotations

import torch
import torch.nn.functional as F

from assign_add.model.fast import fast_answer_logits
from assign_add.model.hooked import AssignAddTransformer
from assign_add.task.generator import Batch


@torch.no_grad()
def evaluate_set(model: AssignAddTransformer, batch: Batch, chunk: int = 16384) -> tuple[float, float]:
    """(accuracy, mean cross-entropy) of the answer at the final position."""
    device = model.embed.W_E.device
    correct, loss_sum = 0, 0.0
    tokens = torch.as_tensor(batch.tokens)
    answers = torch.as_tensor(batch.answers)
    for start in range(0, len(batch), chunk):
        tok = tokens[start : start + chunk].to(device)
        ans = answers[start : start + chunk].to(device)
        logits = fast_answer_logits(model, tok).float()
        correct += int((logits.argmax(-1) == ans).sum())
        loss_sum += float(F.cross_entropy(logits, ans, reduction="sum"))
    n = max(len(batch), 1)
    return correct / n, loss_sum / n


def evaluate(model: AssignAddTransformer, sets: dict[str, Batch]) -> dict[str, dict[str, float]]:
    """``{"acc": {set: value}, "loss": {set: value}}``."""
    acc, loss = {}, {}
    for name, batch in sets.items():
        acc[name], loss[name] = evaluate_set(model, batch)
    return {"acc": acc, "loss": loss}
