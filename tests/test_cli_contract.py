"""One error contract over every command: bad input gets one ``error:`` line on stderr, exit 2, no
traceback, and every file that existed before is left byte-identical (nothing written beside it).

The commands and their path parameters are read from the CLI itself (the typer app's registered
commands and their signatures), so a new command is covered without editing this test.  For each
parameter typed as a path the test tries: a missing path; an empty directory; a file of random
bytes; an empty file; a JSON file of the wrong shape.  For each ``--out`` it tries a folder that
exists and holds a file the command did not write, and a plain file.  Every other parameter gets a
valid value (a tiny trained run, an exported folder, a folder of ``.pth`` files), so the bad one is
what the command meets.
"""

from __future__ import annotations

import inspect
import json
import typing
from pathlib import Path

import pytest
import torch
from typer.testing import CliRunner

from assign_add.cli import app

REPO = Path(__file__).resolve().parents[1]

# a valid value for the non-path parameters that must be given (by parameter name); anything else
# required gets a value by its type
REQUIRED_VALUES = {"prompt": "c=1, b=17, a=42, b+19=", "seeds": "1-2", "step": "16"}
# options that keep a command cheap where it would otherwise measure or train before reading its paths
EXTRA_ARGS = {"bench": ["--what", "precision"], "predict": [], "sweep": ["--preset", "f-short", "--steps", "20"],
              "survival": ["--steps", "1500"], "branches": ["--steps", "20", "--at", "16", "--orders", "1"],
              "reproduce": ["--quick"], "llc": ["--draws", "2", "--chains", "1"]}
CHEAP_OVERRIDES = {"branch": ["train.steps=20"]}  # what the command accepts; default below
DEFAULT_CHEAP = ["train.steps=8", "train.eval_every=4", "task.eval_pool_size=50"]
# committed survival summaries (disjoint seeds, one horizon): valid inputs of the commands that read them
SURVIVAL_JSON = [REPO / "results" / "survival" / "survival.json", REPO / "results" / "survival-fresh" / "survival.json"]
BAD_INPUTS = ("missing", "empty-dir", "random-bytes", "empty-file", "wrong-shape-json")
BAD_OUTPUTS = ("foreign-folder", "plain-file")


def commands() -> dict[str, typing.Callable]:
    return {info.name or info.callback.__name__: info.callback for info in app.registered_commands}


def is_path(hint) -> bool:
    args = typing.get_args(hint)
    return hint is Path or Path in args or any(typing.get_args(a) == (Path,) for a in args) or hint == list[Path]


def params(fn) -> list[tuple[str, object, inspect.Parameter]]:
    hints = typing.get_type_hints(fn)
    return [(name, hints.get(name), p) for name, p in inspect.signature(fn).parameters.items()]


def is_argument(p: inspect.Parameter) -> bool:
    return type(p.default).__name__ == "ArgumentInfo"


def flag(p: inspect.Parameter) -> str:
    return p.default.param_decls[0].split("/")[0]


def required(p: inspect.Parameter) -> bool:
    return getattr(p.default, "default", None) is Ellipsis


@pytest.fixture(scope="module")
def valid(tmp_path_factory) -> dict[str, Path]:
    """A tiny trained run, its exported folder, and a folder with one importable ``.pth``."""
    from assign_add.config import resolve
    from assign_add.interop.export import export_run
    from assign_add.run import RunDir
    from assign_add.train.trainer import train

    root = tmp_path_factory.mktemp("valid")
    cfg = resolve("tiny", overrides=["train.steps=16", "train.eval_every=8"])
    train(cfg, root / "run")
    export_run(RunDir(root / "run"), root / "exported")
    pth = root / "pth"
    pth.mkdir()
    from assign_add.interop.paper import authors_config
    from assign_add.model.hooked import AssignAddTransformer

    torch.save(AssignAddTransformer.from_config(authors_config().model, authors_config().task, seed=0).state_dict(),
               pth / "checkpoint_step_1.pth")
    return {"run": root / "run", "exported": root / "exported", "pth": pth}


def valid_value(cmd: str, name: str, hint, valid: dict[str, Path]) -> list[str]:
    if is_path(hint) and cmd.startswith("survival-"):
        return [str(SURVIVAL_JSON[1])] if name == "tests" or name == "b" else [str(SURVIVAL_JSON[0])]
    if is_path(hint):
        if cmd == "import-export":
            return [str(valid["exported"])]
        if cmd == "import-paper":
            return [str(valid["pth"])]
        return [str(valid["run"])]
    if name in REQUIRED_VALUES:
        return [REQUIRED_VALUES[name]]
    return ["1"]


def make_bad(kind: str, where: Path) -> Path:
    where.mkdir(parents=True, exist_ok=True)
    path = where / {"missing": "nothing-here", "empty-dir": "empty", "random-bytes": "random.bin",
                    "empty-file": "empty.json", "wrong-shape-json": "list.json",
                    "foreign-folder": "someone-elses", "plain-file": "a-file.txt"}[kind]
    if kind == "empty-dir":
        path.mkdir()
    elif kind == "random-bytes":
        path.write_bytes(bytes(torch.randint(0, 256, (512,), generator=torch.Generator().manual_seed(0)).tolist()))
    elif kind == "empty-file":
        path.write_bytes(b"")
    elif kind == "wrong-shape-json":
        path.write_text(json.dumps([1, 2, 3]))
    elif kind == "foreign-folder":
        path.mkdir()
        (path / "notes.txt").write_text("a user's own notes\n")
    elif kind == "plain-file":
        path.write_text("a user's own file\n")
    return path


def invocation(cmd: str, fn, bad_param: str, bad: Path, valid: dict[str, Path]) -> list[str]:
    positional, options = [], []
    for name, hint, p in params(fn):
        if is_argument(p):
            if name == bad_param:
                positional.append(str(bad))
            elif required(p) or name == "prompt":
                positional += valid_value(cmd, name, hint, valid)
        elif name == bad_param:
            options += [flag(p), str(bad)]
        elif required(p):
            options += [flag(p)] + (valid_value(cmd, name, hint, valid) if name != "out" else [str(bad.parent / "out")])
    if cmd == "predict" and bad_param == "file":
        positional = positional[:1]  # --file instead of a prompt
    if any(name == "overrides" for name, _, _ in params(fn)):
        positional += CHEAP_OVERRIDES.get(cmd, DEFAULT_CHEAP)  # should a command accept the bad input, it trains for seconds, not hours
    return [cmd, *positional, *options, *EXTRA_ARGS.get(cmd, [])]


def cases() -> list[tuple[str, str, str]]:
    out = []
    for cmd, fn in commands().items():
        for name, hint, p in params(fn):
            if not is_path(hint):
                continue
            kinds = BAD_OUTPUTS if name == "out" or name.endswith("_out") else BAD_INPUTS
            out += [(cmd, name, kind) for kind in kinds]
    return out


def snapshot(root: Path) -> dict[str, bytes | None]:
    return {str(p.relative_to(root)): (p.read_bytes() if p.is_file() else None) for p in sorted(root.rglob("*"))}


def test_every_listed_command_is_walked():
    from typer.main import get_command

    listed = set(get_command(app).commands)
    walked = {cmd for cmd, _, _ in cases()}
    takes_paths = {cmd for cmd, fn in commands().items() if any(is_path(h) for _, h, _ in params(fn))}
    assert listed == set(commands())
    assert walked == takes_paths and len(walked) >= 15


@pytest.mark.parametrize("cmd,param,kind", cases(), ids=lambda x: str(x))
def test_bad_input_gets_one_line_and_exit_2(cmd, param, kind, valid, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    bad = make_bad(kind, tmp_path / "input")
    args = invocation(cmd, commands()[cmd], param, bad, valid)
    before_tmp, before_valid = snapshot(tmp_path), snapshot(valid["run"].parent)
    result = CliRunner().invoke(app, args)
    stderr = result.stderr
    lines = [ln for ln in stderr.splitlines() if ln.strip()]
    context = f"assign-add {' '.join(args)}\nexit {result.exit_code}\nstdout: {result.stdout[-500:]}\nstderr: {stderr[-800:]}"
    assert result.exit_code == 2, context
    assert "Traceback" not in stderr + result.stdout and not isinstance(result.exception, Exception) or \
        isinstance(result.exception, SystemExit), context
    assert len(lines) == 1 and lines[0].startswith("error:"), context
    if kind == "foreign-folder":  # one wording for one kind of error, whatever the command
        assert "exists and is not a" in lines[0], context
    assert snapshot(tmp_path) == before_tmp, f"files changed or were written\n{context}"
    assert snapshot(valid["run"].parent) == before_valid, f"the valid inputs changed\n{context}"
