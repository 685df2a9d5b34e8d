"""A branch of a run: the same weights and optimiser state at step ``S``, then another data order.

``make_branch(parent, step, out, overrides)`` writes a new run directory that *is* ``parent`` up to
step ``S`` — its metrics records and checkpoints up to ``S``, its partitions, and its exact AdamW
state at ``S`` — with a config that differs only in what :data:`BRANCH_CHANGES` allows (above all
``train.data_seed``).  Training it is then an ordinary ``--resume``: the batches of steps ≥ ``S``
come from the new data seed.  ``branch.json`` records where it came from.

The state at ``S`` is the parent's saved optimiser state when that is at ``S``; otherwise it is
recomputed from the parent's seeds (:func:`~assign_add.train.trainer.replay`) and checked bit for bit
against the parent's checkpoint at ``S``: a replay on another machine or torch build that does not
reproduce the parent's weights is refused, so a branch never starts from weights the parent never had.
"""

from __future__ import annotations

import json
import os
import shutil
from dataclasses import asdict, dataclass
from pathlib import Path

import torch

from assign_add import config as config_mod
from assign_add.config import RunConfig
from assign_add.io import atomic_write_text, read_jsonl
from assign_add.run import (
    RunDir,
    RunError,
    config_differences,
    create_run_dir,
    open_run,
    read_checkpoint,
    save_checkpoint,
    step_name,
)
from assign_add.train.resume import load_state, read_state_step, save_state

# The components a transplant branch can take from a donor run, by parameter-name prefix; ``norm`` takes none
# but rescales every weight to the donor's total norm.
PARTS = {"embed": ("embed.", "pos_embed."), "layer1-attn": ("blocks.0.attn.",), "layer2-attn": ("blocks.1.attn.",),
         "mlp2": ("blocks.1.mlp.",), "unembed": ("unembed.",), "norm": ()}


@dataclass(frozen=True)
class Edit:
    """A change to the branch's weights at its branch step, before it trains on:

    - ``perturb``: every weight w becomes w·(1 + ``scale``·ε), ε standard normal from ``seed``: the same
      data order under another rounding (a 1e-6 relative change is below float32's resolution for some weights
      and a few ulps for most);
    - ``transplant``: the weights of ``part`` (:data:`PARTS`) and their AdamW moments are the ``donor`` run's
      at the same step; ``norm`` instead rescales every weight so that the total norm is the donor's
      (moments kept)."""

    kind: str  # "perturb" | "transplant"
    scale: float = 0.0
    seed: int = 0
    donor: str = ""
    part: str = ""


# What a branch may change: the data order, how long it runs, where and how it is watched.
BRANCH_CHANGES = {"train.data_seed", "train.steps", "train.device", "train.threads", "train.checkpoint_every",
                  "train.eval_sets", "train.state_every"}
BRANCH_FILE = "branch.json"


def branch_config(parent: RunDir, overrides: list[str]) -> RunConfig:
    """The parent's config with ``overrides``, both seeds written out; a one-line error for a change a
    branch may not make."""
    pcfg = parent.config()
    cfg = config_mod.validate(config_mod.apply_overrides(pcfg, overrides))
    bad = [d for d in config_differences(pcfg, cfg) if d not in BRANCH_CHANGES]
    if bad:
        raise RunError(f"a branch keeps the parent's task, model, optimiser and initial weights; it may not change "
                       f"{', '.join(bad)} (it may change {', '.join(sorted(BRANCH_CHANGES))})")
    cfg.train.init_seed = pcfg.train.weights_seed
    cfg.train.data_seed = cfg.train.order_seed
    return cfg


def check_branch_step(parent: RunDir, step: int) -> None:
    """A one-line error unless ``parent`` has reached, evaluated and checkpointed ``step``."""
    reached = int(parent.status().get("step", 0))
    pcfg = parent.config()
    if step < 0 or step > reached:
        raise RunError(f"--step {step}: {parent.root} has reached step {reached}; branch at a step from 0 to {reached}")
    if step % pcfg.train.eval_every:
        raise RunError(f"--step {step}: branch at an evaluated step (a multiple of train.eval_every = "
                       f"{pcfg.train.eval_every}), so the branch's metrics continue the parent's")
    if step not in parent.checkpoint_steps():
        raise RunError(f"--step {step}: {parent.root} has no checkpoint there to check the branch's weights against "
                       f"(checkpoints: {_steps_text(parent.checkpoint_steps())})")


def _steps_text(steps: list[int]) -> str:
    return ", ".join(map(str, steps[:8])) + (" …" if len(steps) > 8 else "")


def state_at(parent: RunDir, step: int, device: torch.device, saved: Path | None = None):
    """(model, optimiser, how) at ``step`` of ``parent``: the state file ``saved`` (see :func:`save_states`),
    else the parent's own saved state if that is at ``step``, else a replay from its seeds — each checked
    against the parent's checkpoint at ``step`` bit for bit."""
    from assign_add.model.hooked import AssignAddTransformer
    from assign_add.train.trainer import make_optimizer, replay

    cfg = parent.config()
    if saved is None and parent.state_path.is_file() and read_state_step(parent.state_path) == step:
        saved = parent.state_path
    if saved is not None:
        model = AssignAddTransformer.from_config(cfg.model, cfg.task, seed=cfg.train.weights_seed).to(device)
        opt = make_optimizer(model, cfg)
        at, _ = load_state(saved, model, opt)
        if at != step:
            raise RunError(f"{saved} holds the state at step {at}, not {step}")
        how = "saved state"
    else:
        model, opt = replay(cfg, parent.partitions(), step, device)
        how = f"replayed {step} steps"
    check_weights(parent, step, model, how)
    return model, opt, how


def check_weights(parent: RunDir, step: int, model: torch.nn.Module, how: str) -> None:
    """A one-line error unless ``model`` holds the parent's checkpoint at ``step`` exactly."""
    want = read_checkpoint(parent.checkpoint_path(step))
    got = {k: v.detach().to("cpu", torch.float32) for k, v in model.state_dict().items()}
    differ = sorted(k for k in want if k in got and not torch.equal(want[k], got[k]))
    if differ:
        worst = max(float((want[k] - got[k]).abs().max()) for k in differ)
        raise RunError(f"{parent.root}: the {how} does not reproduce the parent's weights at step {step} "
                       f"({len(differ)} tensors differ, by up to {worst:.2e}); branch on the machine and torch "
                       "build that trained it")


def save_states(parent_path: Path, steps: list[int], dest: Path) -> dict[int, Path]:
    """The parent's exact optimiser state at each of ``steps``, from one replay (checked against its
    checkpoints), as ``dest/step_NNNNNN.safetensors`` (:func:`assign_add.run.step_name`); files already there are kept.  Many branches at one
    step then share one replay instead of each replaying."""
    from assign_add.train.trainer import replay, resolve_device

    parent = open_run(parent_path)
    cfg = parent.config()
    for s in steps:
        check_branch_step(parent, s)
    paths = {s: Path(dest) / f"{step_name(s)}.safetensors" for s in steps}
    todo = {s for s, p in paths.items() if not p.is_file()}
    if todo:
        Path(dest).mkdir(parents=True, exist_ok=True)

        def keep(step: int, model: torch.nn.Module, opt: torch.optim.Optimizer) -> None:
            if step in todo:
                check_weights(parent, step, model, f"replay of {step} steps")
                save_state(paths[step], model, opt, step, {"loss_sum": 0.0, "loss_count": 0, "elapsed": 0.0})

        replay(cfg, parent.partitions(), max(todo), resolve_device(cfg.train.device), at=keep)
    return paths


def perturb(model: torch.nn.Module, scale: float, seed: int) -> None:
    """Every weight w becomes w·(1 + scale·ε), ε ~ N(0, 1) drawn from ``seed`` in parameter order."""
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in model.parameters():
            eps = torch.randn(p.shape, generator=gen, dtype=p.dtype).to(p.device)
            p.add_(p * eps * scale)


def part_names(model: torch.nn.Module, part: str) -> list[str]:
    """The parameters of ``part`` (:data:`PARTS`)."""
    if part not in PARTS:
        raise RunError(f"unknown part {part!r}; one of {', '.join(PARTS)}")
    return [n for n, _ in model.named_parameters() if n.startswith(PARTS[part])] if PARTS[part] else []


def transplant(model: torch.nn.Module, opt: torch.optim.Optimizer, donor: torch.nn.Module,
               donor_opt: torch.optim.Optimizer, part: str) -> None:
    """``part``'s weights and AdamW moments from ``donor`` (both at the same step), or for ``norm`` every weight
    rescaled to the donor's total norm."""
    from assign_add.model.hooked import parameter_norm

    theirs = dict(donor.named_parameters())
    with torch.no_grad():
        if part == "norm":
            factor = parameter_norm(donor) / parameter_norm(model)
            for p in model.parameters():
                p.mul_(factor)
            return
        for n, p in model.named_parameters():
            if n in part_names(model, part):
                p.copy_(theirs[n])
                mine, donated = opt.state.get(p), donor_opt.state.get(theirs[n])
                if mine is not None and donated is not None:
                    for key in ("exp_avg", "exp_avg_sq"):
                        mine[key].copy_(donated[key])


def apply_edit(edit: Edit, model: torch.nn.Module, opt: torch.optim.Optimizer, parent: RunDir, step: int,
               device: torch.device, donor_saved: Path | None = None) -> None:
    if edit.kind == "perturb":
        perturb(model, edit.scale, edit.seed)
    elif edit.kind == "transplant":
        donor = open_run(edit.donor)
        bad = [d for d in config_differences(parent.config(), donor.config())
               if d not in BRANCH_CHANGES | {"train.seed", "train.init_seed"}]
        if bad:
            raise RunError(f"{donor.root}: a donor must share the parent's task, model and optimiser; it differs in "
                           f"{', '.join(bad)}")
        check_branch_step(donor, step)
        donor_model, donor_opt, _ = state_at(donor, step, device, donor_saved)
        transplant(model, opt, donor_model, donor_opt, edit.part)
    else:
        raise RunError(f"unknown branch edit {edit.kind!r}")


def make_branch(parent_path: Path, step: int, out: Path, overrides: list[str], saved: Path | None = None,
                edit: Edit | None = None, donor_saved: Path | None = None) -> RunDir:
    """Write the branch's run directory at ``step`` (see the module docstring); train it with ``resume``.
    ``saved``: the parent's state at ``step`` from :func:`save_states`; ``edit``: a change to the weights at
    ``step`` (:class:`Edit`; ``donor_saved``: the donor's state there), recorded in ``branch.json``, whose
    checkpoint at ``step`` is then the edited model."""
    from assign_add.train.trainer import resolve_device

    parent = open_run(parent_path)
    cfg = branch_config(parent, overrides)
    check_branch_step(parent, step)
    if cfg.train.steps <= step:
        raise RunError(f"train.steps={cfg.train.steps}: a branch at step {step} must run past it")
    device = resolve_device(cfg.train.device)
    model, opt, how = state_at(parent, step, device, saved)
    if edit is not None:
        apply_edit(edit, model, opt, parent, step, device, donor_saved)
    records = [r for r in read_jsonl(parent.metrics_path) if r["step"] <= step]
    if not any(r["step"] == step for r in records):
        raise RunError(f"{parent.metrics_path} has no record at step {step}; the parent run is incomplete")
    info = {"parent": str(Path(parent_path).resolve()), "step": step, "how": how,
            "parent_data_seed": parent.config().train.order_seed, "data_seed": cfg.train.order_seed,
            **({"edit": asdict(edit)} if edit is not None else {})}

    def populate(run: RunDir) -> None:
        shutil.copyfile(parent.partitions_path, run.partitions_path)
        atomic_write_text(run.metrics_path, "".join(json.dumps(r) + "\n" for r in records))
        run.checkpoint_dir.mkdir(parents=True, exist_ok=True)
        for s in parent.checkpoint_steps():
            if s < step or (s == step and edit is None):
                _link_or_copy(parent.checkpoint_path(s), run.checkpoint_path(s))
        if edit is not None:
            save_checkpoint(model, run.checkpoint_path(step), step)
        save_state(run.state_path, model, opt, step, {"loss_sum": 0.0, "loss_count": 0, "elapsed": 0.0})
        atomic_write_text(run.root / BRANCH_FILE, json.dumps(info, indent=2) + "\n")

    run, lock = create_run_dir(Path(out), cfg, {"state": "running", "step": step, "source": "branch"}, populate)
    lock.release()
    return run


def _link_or_copy(src: Path, dst: Path) -> None:
    """A hard link where the file system allows (checkpoints are never rewritten in place), else a copy."""
    try:
        os.link(src, dst)
    except OSError:
        shutil.copyfile(src, dst)


def branch_info(run: RunDir) -> dict | None:
    """``branch.json`` of a branch run (None for a run trained from step 0)."""
    path = run.root / BRANCH_FILE
    return json.loads(path.read_text()) if path.is_file() else None
