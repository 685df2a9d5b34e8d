"""The model: the hooked TransformerLens module and the exact fast training forward."""

from assign_add.model.fast import answer_loss, fast_answer_logits
from assign_add.model.hooked import AssignAddTransformer, HookedConfig

__all__ = ["AssignAddTransformer", "HookedConfig", "answer_loss", "fast_answer_logits"]
