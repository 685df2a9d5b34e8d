"""Training: the loop, evaluation on the curated sets, checkpoints and resumable state."""

from assign_add.train.evaluate import evaluate, evaluate_set
from assign_add.train.trainer import checkpoint_schedule, train

__all__ = ["checkpoint_schedule", "evaluate", "evaluate_set", "train"]
