"""The task: vocabulary and text form, data partitions, the sampler and curated evaluation sets."""

from assign_add.task.evalsets import build_eval_sets
from assign_add.task.generator import Batch, Sampler, build_sequences, sample
from assign_add.task.partitions import Partitions, build_partitions
from assign_add.task.vocab import (
    Prompt,
    TextFormError,
    Vocab,
    parse_text,
    text_to_tokens,
    tokens_to_text,
)

__all__ = [
    "Batch", "Partitions", "Prompt", "Sampler", "TextFormError", "Vocab", "build_eval_sets",
    "build_partitions", "build_sequences", "parse_text", "sample", "text_to_tokens", "tokens_to_text",
]
