"""assign-add: reproduce and dissect 'Assign and Add' (variable binding + modular addition).

The names a notebook or script needs, imported on first use (``import assign_add`` stays cheap)::

    from assign_add import open_run, measure, predict
    run = open_run("runs/main/runs/seed-42")
    m = measure(run, only=["dynamics", "attention"])   # the analysis dict, nothing written into the run
    next(predict(run, "c=1, b=17, a=42, b+19=")).answer
"""

from __future__ import annotations

import importlib

__version__ = "0.1.0"

# public name -> module that defines it (no name here may equal a submodule's: the submodule would shadow it)
_EXPORTS = {
    "open_run": "assign_add.run",
    "RunDir": "assign_add.run",
    "measure": "assign_add.analysis.suite",
    "analyze": "assign_add.analysis.suite",
    "evaluate_checkpoints": "assign_add.train.checkpoint_eval",
    "predict": "assign_add.answers",
    "import_paper": "assign_add.interop.paper",
    "resolve": "assign_add.config",
    "AssignAddTransformer": "assign_add.model.hooked",
}
__all__ = ["__version__", *_EXPORTS]


def __getattr__(name: str):
    if name in _EXPORTS:
        return getattr(importlib.import_module(_EXPORTS[name]), name)
    raise AttributeError(f"module 'assign_add' has no attribute {name!r}")
