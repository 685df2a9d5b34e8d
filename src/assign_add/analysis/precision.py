"""Does bf16 autocast change what a checkpoint answers?  fp32 and bf16 answers of one model on the curated sets.

``train.precision=auto`` trains compiled runs in bf16 on CPUs with bf16 instructions (and on CUDA, as the
authors did).  This measures what that precision does to a fixed model: per set, the accuracy in each
precision and how many answers change, and whether every changed answer is one whose float32 top-two margin
lies within bf16's rounding of the logits -- a change anywhere else would be a mistake, not rounding.

Criteria, fixed with their basis before the released checkpoints were read per set:

- **rounding bound**: bf16's unit roundoff is u = 2^-8; the engine rounds about ``ROUNDINGS`` = 8 times
  between the embeddings and the logits, so a logit moves by at most ~8u · max|logit|, and an answer can
  change only where the fp32 margin is below twice that;
- **accuracy**: every set's accuracy moves by at most ``ACC_TOLERANCE`` = 0.01 (one percentage point, the
  binomial standard error of a 2,000-sequence pool at 50 % accuracy: below what the curated sets resolve).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from assign_add.model.fast import fast_answer_logits
from assign_add.model.hooked import AssignAddTransformer
from assign_add.task.generator import Batch

UNIT_ROUNDOFF_BF16 = 2.0**-8
ROUNDINGS = 8
ACC_TOLERANCE = 0.01


@dataclass(frozen=True)
class SetAgreement:
    name: str
    size: int
    acc_fp32: float
    acc_bf16: float
    changed: int  # answers (argmax) that differ between the precisions


@dataclass(frozen=True)
class PrecisionAgreement:
    step: int
    sets: list[SetAgreement]
    max_logit: float  # largest |logit| in fp32
    max_logit_change: float
    changed: int
    max_changed_margin: float  # largest fp32 top-two margin among the changed answers (0 if none)

    @property
    def margin_bound(self) -> float:
        """Twice the largest logit change bf16 rounding allows: 2 · ROUNDINGS · u · max|logit|."""
        return 2 * ROUNDINGS * UNIT_ROUNDOFF_BF16 * self.max_logit

    @property
    def max_acc_change(self) -> float:
        return max((abs(s.acc_bf16 - s.acc_fp32) for s in self.sets), default=0.0)

    @property
    def within_rounding(self) -> bool:
        return self.max_changed_margin <= self.margin_bound and self.max_acc_change <= ACC_TOLERANCE


@torch.no_grad()
def answer_logits(model: AssignAddTransformer, tokens: torch.Tensor, precision: str, chunk: int = 4096) -> torch.Tensor:
    """Final-position logits in float32, computed in ``precision`` (``fp32`` or ``bf16`` autocast)."""
    from assign_add.train.trainer import precision_context

    out = []
    for start in range(0, len(tokens), chunk):
        with precision_context(precision, tokens.device):
            out.append(fast_answer_logits(model, tokens[start : start + chunk]).float())
    return torch.cat(out)


def precision_agreement(model: AssignAddTransformer, sets: dict[str, Batch], step: int) -> PrecisionAgreement:
    """fp32 against bf16 autocast answers of ``model`` on every set."""
    device = model.embed.W_E.device
    tokens = torch.cat([torch.as_tensor(b.tokens) for b in sets.values()]).to(device)
    answers = torch.cat([torch.as_tensor(b.answers) for b in sets.values()]).to(device)
    f32, bf = answer_logits(model, tokens, "fp32"), answer_logits(model, tokens, "bf16")
    pick32, pick16 = f32.argmax(-1), bf.argmax(-1)
    top2 = f32.topk(2, dim=-1).values
    margin = top2[:, 0] - top2[:, 1]
    changed = pick32 != pick16
    rows, start = [], 0
    for name, batch in sets.items():
        part = slice(start, start + len(batch))
        start += len(batch)
        rows.append(SetAgreement(name, len(batch), float((pick32[part] == answers[part]).float().mean()),
                                 float((pick16[part] == answers[part]).float().mean()), int(changed[part].sum())))
    return PrecisionAgreement(step, rows, float(f32.abs().max()), float((f32 - bf).abs().max()), int(changed.sum()),
                              float(margin[changed].max()) if changed.any() else 0.0)
