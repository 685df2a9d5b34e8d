"""Answers for prompts in the text form, streamed in batches (``assign-add predict``, ``assign_add.predict``).

A prompt file is read line by line and answered ``BATCH`` prompts at a time through the
final-position forward, so memory stays bounded by one batch (its text, tokens ``[BATCH, n_ctx]``
and logits ``[BATCH, 59]``: a few MB) whatever the size of the file, and results are printed as
they are computed.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from assign_add.model.fast import fast_answer_logits
from assign_add.model.hooked import AssignAddTransformer
from assign_add.run import RunDir
from assign_add.task.vocab import Prompt, TextFormError, parse_text, prompt_to_tokens

BATCH = 4096


@dataclass
class Prediction:
    line: int  # 1-based line number in the file (1 for a single prompt)
    prompt: str
    answer: int
    expected: int
    top: list[tuple[int, float]]

    def to_json(self) -> dict:
        return {"prompt": self.prompt, "answer": self.answer, "expected": self.expected,
                "top": [{"answer": a, "prob": round(p, 6)} for a, p in self.top]}

    def to_text(self) -> str:
        tops = ", ".join(f"{a} ({p:.3f})" for a, p in self.top)
        mark = "✓" if self.answer == self.expected else f"✗ expected {self.expected}"
        return f"{self.prompt} {self.answer}   {mark}   top: {tops}"


def file_prompts(path: Path) -> Iterator[tuple[int, str]]:
    """(line number, prompt) for every non-blank line, read lazily; errors name the physical line."""
    path = Path(path)
    if path.is_dir():
        raise TextFormError(f"{path}: a directory, expected a file of prompts (one per line)")
    if not path.is_file():
        raise TextFormError(f"{path}: no such file")
    seen = False
    with open(path, "rb") as fh:
        for number, raw in enumerate(fh, 1):
            try:
                text = raw.decode("utf-8").strip()
            except UnicodeDecodeError:
                raise TextFormError(f"{path} line {number}: not UTF-8 text") from None
            if text:
                seen = True
                yield number, text
    if not seen:
        raise TextFormError(f"{path}: no prompts (the file is empty or blank)")


def _batches(items: Iterable[tuple[int, str]], size: int) -> Iterator[list[tuple[int, str]]]:
    batch: list[tuple[int, str]] = []
    for item in items:
        batch.append(item)
        if len(batch) == size:
            yield batch
            batch = []
    if batch:
        yield batch


def _parse(number: int, text: str, model: AssignAddTransformer, where: str) -> Prompt:
    try:
        return parse_text(text, model.vocab)
    except TextFormError as exc:
        raise TextFormError(f"{where}line {number}: {exc}" if where else str(exc)) from None


def _numbered(prompts: str | Iterable[str] | Iterable[tuple[int, str]]) -> Iterator[tuple[int, str]]:
    """(number, text) pairs from one prompt, plain prompts (numbered from 1) or numbered ones (a file's lines)."""
    if isinstance(prompts, str):
        yield 1, prompts
        return
    for i, item in enumerate(prompts, 1):
        yield (i, item) if isinstance(item, str) else item


@torch.no_grad()
def predict(model: AssignAddTransformer | RunDir, prompts: str | Iterable[str] | Iterable[tuple[int, str]],
            top: int = 3, batch_size: int = BATCH, where: str = "") -> Iterator[Prediction]:
    """Predictions, one batch at a time, for one prompt in the text form (``"c=1, b=17, a=42, b+19="``),
    several, or ``(line number, text)`` pairs; ``model`` may be a run (its last checkpoint).
    ``where`` prefixes line numbers in errors (e.g. the file)."""
    if isinstance(model, RunDir):
        model = model.load_model(model.checkpoint_steps()[-1])
    prompts = _numbered(prompts)
    vocab = model.vocab
    k = max(1, min(top, vocab.modulus))
    for batch in _batches(prompts, batch_size):
        parsed = [_parse(n, text, model, where) for n, text in batch]
        tokens = torch.as_tensor(np.stack([prompt_to_tokens(p, vocab) for p in parsed]))
        probs = torch.softmax(fast_answer_logits(model, tokens).float(), dim=-1)
        values, indices = probs.topk(k, dim=-1)
        for (number, text), p, v, ix in zip(batch, parsed, values.tolist(), indices.tolist()):
            yield Prediction(number, text, ix[0], p.answer(vocab.modulus), list(zip(ix, v)))
