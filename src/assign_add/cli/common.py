"""The ``assign-add`` command line (typer + rich): the app, user-error handling and shared helpers.

User mistakes (bad config, malformed prompt, wrong run directory) print one ``error:`` line
to stderr and exit with status 2; they never show a traceback.  The commands live in the modules
beside this one, one per stage: runs (config, data, train, import, eval, predict), analysis
(analyze, reproduce, phases, explore), experiments (sweep, branch, branches) and bench.
"""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Callable, Optional

import typer
from rich.console import Console
from rich.table import Table

from assign_add import config as config_mod
from assign_add.config import ConfigError, RunConfig
from assign_add.io import DataFileError
from assign_add.lock import LockedError
from assign_add.run import RunError
from assign_add.task.vocab import TextFormError

app = typer.Typer(
    add_completion=False,
    no_args_is_help=True,
    help="assign-add: reproduce and dissect 'Assign and Add' (variable binding + modular addition).",
)
console = Console()
err_console = Console(stderr=True)

USER_ERRORS = (ConfigError, TextFormError, RunError, LockedError, DataFileError)


def _one_line(text: str) -> str:
    return " ".join(str(text).split())


def user_errors(fn: Callable) -> Callable:
    """One ``error:`` line and exit 2 for a user's mistake; exit 130 with a hint on Ctrl-C."""
    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        try:
            return fn(*args, **kwargs)
        except USER_ERRORS as exc:
            _fail(_one_line(exc))
        except OSError as exc:
            if exc.filename is None:  # not about a path the user gave: a bug, keep the traceback
                raise
            _fail(f"{exc.filename}: {exc.strerror or type(exc).__name__}")
        except KeyboardInterrupt:
            hint = INTERRUPT_HINTS.get(fn.__name__, "")
            err_console.print(f"interrupted{'; ' + hint if hint else ''}", highlight=False, soft_wrap=True)
            raise typer.Exit(130) from None

    return wrapper


def _fail(message: str) -> None:
    err_console.print(f"[bold red]error:[/] {message}", highlight=False, soft_wrap=True)
    raise typer.Exit(2) from None


INTERRUPT_HINTS = {
    "train_cmd": "the run keeps its last saved state: continue it with the same command and --resume",
    "sweep_cmd": "finished points are kept: run the same command again to resume the others",
    "reproduce_cmd": "finished runs are kept: run the same command again to resume",
}


PresetOpt = typer.Option("paper", "--preset", help="named configuration: paper (the authors') or tiny")
ConfigOpt = typer.Option(None, "--config", help="TOML config file (replaces --preset)")
OverridesArg = typer.Argument(None, help="dotted overrides, e.g. task.f=0.25 train.steps=2000", show_default=False)


def _resolve(preset: str, config_file: Optional[Path], overrides: Optional[list[str]]) -> RunConfig:
    return config_mod.resolve(preset, config_file, overrides or [])


class _TrainProgress:
    """Rich progress bar whose description shows the latest evaluation."""

    KEYS = ("0var_heldout", "1var_heldout", "2var_heldout", "1var_forbidden")

    def __init__(self, enabled: bool) -> None:
        from rich.progress import (
            BarColumn,
            MofNCompleteColumn,
            Progress,
            TextColumn,
            TimeElapsedColumn,
            TimeRemainingColumn,
        )

        self.enabled = enabled
        self.progress = Progress(
            TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
            TimeRemainingColumn(), console=err_console, disable=not enabled,
        )
        self.task = None

    def __enter__(self) -> "_TrainProgress":
        self.progress.__enter__()
        return self

    def __exit__(self, *exc) -> None:
        self.progress.__exit__(*exc)

    def update(self, step: int, total: int, record: dict | None) -> None:
        if self.task is None:
            self.task = self.progress.add_task("training", total=total, completed=step)
        desc = None
        if record is not None:
            acc = record["acc"]
            shown = " ".join(f"{k.replace('_heldout', '·ho')}={acc[k]:.2f}" for k in self.KEYS if k in acc)
            loss = record.get("train_loss")
            desc = f"loss {loss:.3f} {shown}" if loss is not None else shown
        self.progress.update(self.task, completed=step, **({"description": desc} if desc else {}))




def _parse_ints(text: str, name: str) -> list[int]:
    """Comma-separated integers and inclusive ranges: ``0,500,1000`` or ``52-83`` or ``42,52-55``."""
    out: list[int] = []
    try:
        for part in (x.strip() for x in text.split(",")):
            if not part:
                continue
            lo, sep, hi = part.partition("-")
            if sep and lo:
                if int(hi) < int(lo):
                    raise ValueError
                out.extend(range(int(lo), int(hi) + 1))
            else:
                out.append(int(part))
    except ValueError:
        raise ConfigError(name, f"expected comma-separated integers or ranges (52-83), got {text!r}") from None
    return out


def _print_acc_table(rows: dict[int, dict[str, float]], per_table: int = 8) -> None:
    """Sets as rows, checkpoint steps as columns (in chunks that fit a terminal)."""
    if not rows:
        console.print("no results")
        return
    steps = list(rows)
    names = list(rows[steps[0]].keys())
    for start in range(0, len(steps), per_table):
        chunk = steps[start : start + per_table]
        table = Table("set", *(f"step {s}" for s in chunk))
        for n in names:
            table.add_row(n, *(f"{rows[s].get(n, float('nan')):.3f}" for s in chunk))
        console.print(table)




def _command_line(name: str) -> str:
    """The command as typed (``assign-add NAME args…``), for the summary files an experiment writes."""
    import shlex
    import sys

    return f"assign-add {name} " + " ".join(shlex.quote(a) for a in sys.argv[2:])


def _count_progress(enabled: bool, noun: str):
    """A poll callback for experiments: prints "k/n NOUN done" on stderr whenever k changes."""
    shown = [-1]

    def show(rows, total) -> None:
        if enabled and len(rows) != shown[0]:
            shown[0] = len(rows)
            err_console.print(f"{len(rows)}/{total} {noun} done", highlight=False)

    return show


def _print_imported(run, out) -> None:
    steps = run.checkpoint_steps()
    console.print(f"[green]imported[/] {len(steps)} checkpoints (steps {steps[0]}..{steps[-1]}) into {out}",
                  highlight=False)
