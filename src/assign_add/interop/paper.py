"""Import the authors' released checkpoints (TransformerLens 2.x state dicts) into a run directory.

Their files carry biases and a layer-0 MLP that were frozen at zero; the import checks that
they are exactly zero and drops them, keeping the parameters of the paper's architecture under
the same TransformerLens names.  Steps come from the file names (``checkpoint_step_S.pth``);
``model_state_dict.pth`` is the final model, step 40,000 unless told otherwise.
"""

from __future__ import annotations

import dataclasses

import re
from pathlib import Path

import torch

from assign_add.config import RunConfig, preset
from assign_add.model.hooked import AssignAddTransformer, HookedConfig
from assign_add.run import (
    RunDir,
    RunError,
    check_new_run_out,
    check_replaceable,
    check_tensor,
    create_run_dir,
    save_checkpoint,
)
from assign_add.task.vocab import Vocab
from assign_add.config import PAPER_STEPS

STEP_RE = re.compile(r"checkpoint_step_(\d+)\.pth$")
FINAL_NAME = "model_state_dict.pth"
ZERO_KEYS = re.compile(r"(\.b_[A-Za-z]+$)|(^blocks\.0\.mlp\.)")
DROP_KEYS = re.compile(r"\.(mask|IGNORE)$")


def step_of(path: Path, final_step: int) -> int:
    m = STEP_RE.search(path.name)
    if m:
        return int(m.group(1))
    if path.name == FINAL_NAME:
        return final_step
    raise RunError(f"{path}: cannot read a step from the name (expected checkpoint_step_S.pth or {FINAL_NAME})")


def convert_state_dict(sd: dict[str, torch.Tensor], source: str, model: AssignAddTransformer) -> dict[str, torch.Tensor]:
    """Keep our parameters; refuse if a bias or the layer-0 MLP is not exactly zero."""
    out = {}
    expected = model.state_dict()
    for key, value in sd.items():
        if not isinstance(value, torch.Tensor):
            raise RunError(f"{source}: {key} is a {type(value).__name__}, not a tensor; not a model state dict")
        if DROP_KEYS.search(key):
            continue
        if ZERO_KEYS.search(key) and key not in expected:
            if torch.count_nonzero(value) != 0:
                raise RunError(
                    f"{source}: {key} is not zero (max |x| = {float(value.abs().max()):.3g}); "
                    "this is not the paper's bias-free architecture"
                )
            continue
        if key not in expected:
            raise RunError(f"{source}: unexpected parameter {key}")
        check_tensor(key, value, expected[key], source)
        out[key] = value.to(torch.float32)
    missing = sorted(set(expected) - set(out))
    if missing:
        raise RunError(f"{source}: missing parameters {', '.join(missing)}")
    return out


def authors_config() -> RunConfig:
    """The paper preset as the authors trained it: bf16 autocast (their README: on a GPU, 40,000 steps)."""
    cfg = preset("paper")
    return dataclasses.replace(cfg, train=dataclasses.replace(cfg.train, precision="bf16"))


def checkpoint_files(paths: list[Path], final_step: int = PAPER_STEPS) -> dict[int, Path]:
    """Step → file for the ``.pth`` files named by ``paths`` (files, or folders whose ``.pth`` files are
    read, not their subfolders); one line naming the problem when there are none or two give one step."""
    files: list[Path] = []
    for p in map(Path, paths):
        if p.is_dir():
            files += sorted(q for q in p.iterdir() if q.suffix == ".pth")
        elif p.is_file():
            files.append(p)
        else:
            raise RunError(f"{p}: no such file or directory")
    if not files:
        raise RunError(f"{', '.join(map(str, paths))}: no .pth files (the authors' checkpoint_step_S.pth and "
                       f"{FINAL_NAME})")
    steps: dict[int, Path] = {}
    for f in files:
        s = step_of(f, final_step)
        if s in steps:
            raise RunError(f"{f} and {steps[s]} both give step {s}")
        steps[s] = f
    return steps


def read_paper_checkpoints(paths: list[Path], cfg: RunConfig | None = None,
                           final_step: int = PAPER_STEPS) -> dict[int, dict[str, torch.Tensor]]:
    """Every checkpoint loaded and checked (names, shapes, dtypes, zero biases) against ``cfg``'s model,
    converted to our parameters; nothing is written."""
    cfg = cfg or authors_config()
    if final_step < 1:
        raise RunError(f"--final-step: must be >= 1, got {final_step}")
    model = AssignAddTransformer(HookedConfig.build(cfg.model, cfg.task), Vocab.from_task(cfg.task))
    converted = {}
    for s, f in sorted(checkpoint_files(paths, final_step).items()):
        try:
            sd = torch.load(f, map_location="cpu", weights_only=True)
        except Exception as exc:  # noqa: BLE001 - any unreadable file is a user error here
            raise RunError(f"{f}: not a readable PyTorch state dict ({type(exc).__name__})") from None
        if not isinstance(sd, dict):
            raise RunError(f"{f}: not a state dict")
        converted[s] = convert_state_dict(sd, str(f), model)
    return converted


def import_paper(paths: list[Path], out: Path, force: bool = False, final_step: int = PAPER_STEPS, cfg: RunConfig | None = None) -> RunDir:
    """Write a run directory with the paper config and one checkpoint per file (recorded as trained in bf16:
    the authors' autocast on a GPU, artifacts README).  Every file is read and checked before anything
    is written."""
    cfg = cfg or authors_config()
    if final_step < 1:
        raise RunError(f"--final-step: must be >= 1, got {final_step}")
    checkpoint_files(paths, final_step)
    out = Path(out)
    check_replaceable(out) if force else check_new_run_out(out)
    converted = read_paper_checkpoints(paths, cfg, final_step)
    model = AssignAddTransformer(HookedConfig.build(cfg.model, cfg.task), Vocab.from_task(cfg.task))

    def write_checkpoints(staged: RunDir) -> None:
        for s, sd in converted.items():
            model.load_state_dict(sd)
            save_checkpoint(model, staged.checkpoint_path(s), s)

    status = {"state": "complete", "step": max(converted), "source": "paper-import"}
    run, lock = create_run_dir(out, cfg, status, populate=write_checkpoints, replace=force)
    lock.release()
    return run
