"""Token ids, sequence layout and the human text form ``c=1, b=17, b+19=``.

Token ids (paper preset: numbers 0-58, ``+`` 59, ``=`` 60, PAD 61, ``a``-``l`` 62-73):
numbers ``0..N-1`` first, then ``+``, ``=``, PAD, then ``,`` (infix layout only), then the
variables in configured order.  The model outputs one of the ``N`` numbers.

Layouts (``n_ctx`` tokens; the query is always the last four):
- ``prefix`` (paper): assignments ``v n``, query ``+ lhs rhs =``;
- ``infix``: assignments ``v = n ,``, query ``lhs + rhs =``.
PAD tokens sit in the gaps between assignments.  The text form has no padding; turning text
into tokens puts all padding before the first assignment (one of the layouts the generator
also produces) unless a random generator is given.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np

from assign_add.config import QUERY_LENGTH, TaskConfig, assignment_length


class TextFormError(ValueError):
    """A prompt in the text form is malformed; the message says what and where."""


@dataclass(frozen=True)
class Vocab:
    modulus: int
    variables: tuple[str, ...]
    layout: str
    n_ctx: int
    padding: str = "random"  # task.padding: "end" puts every PAD after the last assignment

    @classmethod
    def from_task(cls, task: TaskConfig) -> "Vocab":
        return cls(task.modulus, tuple(task.variables), task.layout, task.n_ctx, task.padding)

    # ---- ids
    @property
    def plus(self) -> int:
        return self.modulus

    @property
    def equals(self) -> int:
        return self.modulus + 1

    @property
    def pad(self) -> int:
        return self.modulus + 2

    @property
    def comma(self) -> int:
        if self.layout != "infix":
            raise AttributeError("the prefix layout has no ',' token")
        return self.modulus + 3

    @property
    def var_offset(self) -> int:
        return self.modulus + (4 if self.layout == "infix" else 3)

    @property
    def size(self) -> int:
        return self.var_offset + len(self.variables)

    @property
    def assign_len(self) -> int:
        return assignment_length(self.layout)

    @property
    def region_len(self) -> int:
        """Positions before the query (assignments and padding)."""
        return self.n_ctx - QUERY_LENGTH

    def var_id(self, name: str) -> int:
        return self.var_offset + self.variables.index(name)

    def token_str(self, token: int) -> str:
        token = int(token)
        if 0 <= token < self.modulus:
            return str(token)
        if token >= self.var_offset and token < self.size:
            return self.variables[token - self.var_offset]
        names = {self.plus: "+", self.equals: "=", self.pad: "_"}
        if self.layout == "infix":
            names[self.comma] = ","
        if token in names:
            return names[token]
        raise TextFormError(f"token id {token} is outside the vocabulary of size {self.size}")

    def is_var(self, tokens: np.ndarray) -> np.ndarray:
        return (tokens >= self.var_offset) & (tokens < self.size)

    # ---- templates (one entry per token: a literal id, or "var"/"val"/"lhs"/"rhs")
    def assignment_template(self) -> tuple[object, ...]:
        if self.layout == "prefix":
            return ("var", "val")
        return ("var", self.equals, "val", self.comma)

    def query_template(self) -> tuple[object, ...]:
        if self.layout == "prefix":
            return (self.plus, "lhs", "rhs", self.equals)
        return ("lhs", self.plus, "rhs", self.equals)

    def operand_positions(self) -> tuple[int, int]:
        """Absolute positions of the left and right operand tokens in the query."""
        tpl = self.query_template()
        base = self.n_ctx - QUERY_LENGTH
        return base + tpl.index("lhs"), base + tpl.index("rhs")


# --------------------------------------------------------------------------- text form

# ASCII digits only: ``\d`` would also accept '١' or '１' as numbers
_ASSIGN_RE = re.compile(r"^([A-Za-z]+)\s*=\s*(-?[0-9]+)$")
_QUERY_RE = re.compile(r"^([A-Za-z]+|-?[0-9]+)\s*\+\s*([A-Za-z]+|-?[0-9]+)\s*=\s*(-?[0-9]+)?$")


@dataclass(frozen=True)
class Prompt:
    """A parsed prompt: assignments in order, the two operands (variable name or int)."""

    assignments: tuple[tuple[str, int], ...]
    lhs: str | int
    rhs: str | int

    def value(self, operand: str | int) -> int:
        if isinstance(operand, int):
            return operand
        return dict(self.assignments)[operand]

    def answer(self, modulus: int) -> int:
        return (self.value(self.lhs) + self.value(self.rhs)) % modulus


def parse_text(text: str, vocab: Vocab) -> Prompt:
    """Parse ``c=1, b=17, a=42, b+19=`` (an answer after the final ``=`` is allowed)."""
    parts = [p.strip() for p in text.strip().split(",")]
    if not parts or not parts[-1]:
        raise TextFormError(f"empty prompt or trailing comma in {text!r}; expected e.g. 'c=1, b=17, b+19='")
    assignments: list[tuple[str, int]] = []
    for i, part in enumerate(parts[:-1]):
        m = _ASSIGN_RE.match(part)
        if not m:
            raise TextFormError(f"assignment {i + 1} {part!r} is not of the form 'v=n'")
        name, value = m.group(1), int(m.group(2))
        _check_var(name, vocab, f"assignment {i + 1} {part!r}")
        _check_value(value, vocab, f"assignment {i + 1} {part!r}")
        if name in dict(assignments):
            raise TextFormError(f"assignment {i + 1} {part!r}: variable {name!r} is assigned twice")
        assignments.append((name, value))
    m = _QUERY_RE.match(parts[-1])
    if not m:
        raise TextFormError(f"query {parts[-1]!r} is not of the form 'x+y=' (x, y a variable or number)")
    operands: list[str | int] = []
    for side, tok in (("left", m.group(1)), ("right", m.group(2))):
        if re.fullmatch(r"-?[0-9]+", tok):
            _check_value(int(tok), vocab, f"{side} operand of query {parts[-1]!r}")
            operands.append(int(tok))
        else:
            _check_var(tok, vocab, f"{side} operand of query {parts[-1]!r}")
            if tok not in dict(assignments):
                raise TextFormError(f"{side} operand of query {parts[-1]!r}: variable {tok!r} is not assigned")
            operands.append(tok)
    need = len(assignments) * vocab.assign_len + QUERY_LENGTH
    if need > vocab.n_ctx:
        raise TextFormError(
            f"prompt needs {need} tokens ({len(assignments)} assignments + query), "
            f"more than the context of {vocab.n_ctx}"
        )
    return Prompt(tuple(assignments), operands[0], operands[1])


def _check_var(name: str, vocab: Vocab, where: str) -> None:
    if name not in vocab.variables:
        raise TextFormError(f"{where}: unknown variable {name!r} (variables: {''.join(vocab.variables)})")


def _check_value(value: int, vocab: Vocab, where: str) -> None:
    if not (0 <= value < vocab.modulus):
        raise TextFormError(f"{where}: value {value} is outside 0..{vocab.modulus - 1}")


def prompt_to_tokens(prompt: Prompt, vocab: Vocab, rng: np.random.Generator | None = None) -> np.ndarray:
    """Token ids for a prompt.  Padding goes first, or into random gaps when ``rng`` is given; after the
    last assignment for a task without random padding (``vocab.padding == "end"``)."""
    k = len(prompt.assignments)
    n_pad = vocab.region_len - k * vocab.assign_len
    counts = np.zeros(k + 1, dtype=np.int64)
    if vocab.padding == "end":
        counts[k] = n_pad
    elif rng is None:
        counts[0] = n_pad
    else:
        np.add.at(counts, rng.integers(0, k + 1, size=n_pad), 1)
    tokens: list[int] = []
    for i, (name, value) in enumerate(prompt.assignments):
        tokens += [vocab.pad] * int(counts[i])
        for slot in vocab.assignment_template():
            tokens.append(vocab.var_id(name) if slot == "var" else value if slot == "val" else int(slot))  # type: ignore[arg-type]
    tokens += [vocab.pad] * int(counts[k])
    for slot in vocab.query_template():
        if slot in ("lhs", "rhs"):
            op = prompt.lhs if slot == "lhs" else prompt.rhs
            tokens.append(op if isinstance(op, int) else vocab.var_id(op))
        else:
            tokens.append(int(slot))  # type: ignore[arg-type]
    return np.asarray(tokens, dtype=np.int64)


def text_to_tokens(text: str, vocab: Vocab, rng: np.random.Generator | None = None) -> np.ndarray:
    return prompt_to_tokens(parse_text(text, vocab), vocab, rng)


def tokens_to_prompt(tokens: np.ndarray, vocab: Vocab) -> Prompt:
    """Inverse of :func:`prompt_to_tokens` (padding is dropped)."""
    toks = [int(t) for t in np.asarray(tokens).reshape(-1)]
    if len(toks) != vocab.n_ctx:
        raise TextFormError(f"expected {vocab.n_ctx} tokens, got {len(toks)}")
    region = [t for t in toks[: vocab.region_len] if t != vocab.pad]
    tpl = vocab.assignment_template()
    if len(region) % len(tpl):
        raise TextFormError(f"assignment region {region} does not split into {len(tpl)}-token assignments")
    assignments = []
    for i in range(0, len(region), len(tpl)):
        chunk = region[i : i + len(tpl)]
        var = val = None
        for slot, tok in zip(tpl, chunk):
            if slot == "var":
                var = vocab.token_str(tok)
            elif slot == "val":
                val = tok
            elif tok != slot:
                raise TextFormError(f"assignment at region offset {i}: expected {vocab.token_str(slot)!r}, got {vocab.token_str(tok)!r}")  # type: ignore[arg-type]
        if var is None or var not in vocab.variables or val is None or not (0 <= val < vocab.modulus):
            raise TextFormError(f"assignment at region offset {i} is malformed: {[vocab.token_str(t) for t in chunk]}")
        assignments.append((var, int(val)))
    query = toks[vocab.region_len :]
    ops: dict[str, str | int] = {}
    for slot, tok in zip(vocab.query_template(), query):
        if slot in ("lhs", "rhs"):
            ops[slot] = tok if 0 <= tok < vocab.modulus else vocab.token_str(tok)
        elif tok != slot:
            raise TextFormError(f"query token {vocab.token_str(tok)!r} where {vocab.token_str(slot)!r} belongs")  # type: ignore[arg-type]
    return Prompt(tuple(assignments), ops["lhs"], ops["rhs"])


def prompt_to_text(prompt: Prompt) -> str:
    parts = [f"{name}={value}" for name, value in prompt.assignments]
    parts.append(f"{prompt.lhs}+{prompt.rhs}=")
    return ", ".join(parts)


def tokens_to_text(tokens: np.ndarray, vocab: Vocab) -> str:
    return prompt_to_text(tokens_to_prompt(tokens, vocab))
