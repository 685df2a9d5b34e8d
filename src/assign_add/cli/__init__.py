"""The ``assign-add`` command line: importing the command modules registers their commands on ``app``
(in this order in ``--help``: one run, measuring runs, many runs, speed)."""
# isort: skip_file

from __future__ import annotations

from assign_add.cli import runs  # noqa: F401 - registers config, data, train, import-paper, export, import-export, eval, predict
from assign_add.cli import analysis  # noqa: F401 - analyze, reproduce, phases, explore
from assign_add.cli import experiments  # noqa: F401 - sweep, branch, branches
from assign_add.cli import bench  # noqa: F401 - bench
from assign_add.cli.common import app


def main() -> None:
    app()


__all__ = ["app", "main"]
