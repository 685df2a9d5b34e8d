"""The names ``assign_add`` exports for notebooks and scripts."""

from __future__ import annotations

import importlib
import pkgutil
import types

import torch

import assign_add
from assign_add.config import preset
from assign_add.model.hooked import AssignAddTransformer


def test_every_exported_name_is_the_object_not_a_submodule():
    """Once every submodule is imported, each exported name must still be the function or class (a submodule
    of the same name would shadow the lazy export)."""
    for info in pkgutil.walk_packages(assign_add.__path__, "assign_add."):
        if not info.name.endswith("__main__"):
            importlib.import_module(info.name)
    for name in assign_add.__all__:
        obj = getattr(assign_add, name)
        assert not isinstance(obj, types.ModuleType), f"assign_add.{name} is a module"


def test_predict_takes_plain_prompts():
    cfg = preset("paper")
    model = AssignAddTransformer.from_config(cfg.model, cfg.task, seed=0)
    texts = ["c=1, b=17, a=42, b+19=", "d=7, d+50="]
    one = next(assign_add.predict(model, texts[0]))
    many = list(assign_add.predict(model, texts))
    numbered = list(assign_add.predict(model, enumerate(texts, 1)))
    assert many == numbered  # same batch, same numbers
    # one prompt alone is another batch shape: same answers, probabilities equal to float32 rounding
    # (the matmul's summation order may depend on the batch size)
    assert (one.prompt, one.answer, [a for a, _ in one.top]) == (many[0].prompt, many[0].answer,
                                                                  [a for a, _ in many[0].top])
    assert all(abs(p - q) <= 1e-5 * q for (_, p), (_, q) in zip(one.top, many[0].top))
    assert [p.expected for p in many] == [(17 + 19) % 59, (7 + 50) % 59]
    with torch.no_grad():
        logits = model(model.to_tokens(texts[1]))[0, -1]
    assert many[1].answer == int(logits.argmax())
