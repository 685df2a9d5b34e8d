"""A run as a Hugging Face Hub–ready folder, and the folder read back as a run.

``assign-add export RUN --out DIR`` writes (nothing is uploaded)::

    DIR/README.md                          model card: task, model, training, phases, claims' verdicts
    DIR/config.json                        the architecture (TransformerLens names) and the run's config
    DIR/model.safetensors                  the final checkpoint
    DIR/checkpoints/step{S}/model.safetensors   every checkpoint, one folder per step
    DIR/data/partitions.json               the train / held-out split of sums
    DIR/metrics.jsonl                      the training curves (when the run has them)

One folder per step is the layout of checkpoint series on the Hub (Pythia, Timaeus's devinterp
models): each ``checkpoints/step{S}`` can be pushed as revision ``step{S}``, the model card says
how.  ``assign-add import-export DIR --out RUN`` reads the folder back into a run directory with the
same checkpoints, byte for byte.
"""

from __future__ import annotations

import json
import re
import shutil
import tempfile
from dataclasses import asdict
from pathlib import Path

from assign_add import config as config_mod
from assign_add.io import atomic_write_text, read_json_object
from assign_add.model.hooked import HookedConfig
from assign_add.run import (
    RunDir,
    RunError,
    check_out_path,
    check_replaceable,
    check_tensors,
    create_run_dir,
    model_tensors,
    read_checkpoint,
)

STEP_DIR = re.compile(r"^step(\d+)$")
MODEL_FILE = "model.safetensors"


def _architecture(cfg: config_mod.RunConfig) -> dict:
    arch = asdict(HookedConfig.build(cfg.model, cfg.task))
    return {k: (list(v) if isinstance(v, tuple) else v) for k, v in arch.items()}


def config_json(run: RunDir) -> dict:
    cfg = run.config()
    steps = run.checkpoint_steps()
    return {"model_type": "assign-add", "architectures": ["AssignAddTransformer"], **_architecture(cfg),
            "checkpoint_steps": steps, "final_step": steps[-1], "assign_add_config": config_mod.to_dict(cfg)}


def _provenance(run: RunDir) -> list[str]:
    source = run.status().get("source", "")
    if source == "paper-import":
        return ["- imported from the authors' released checkpoints (they trained in bf16 autocast on a GPU); the "
                "settings below are the paper's configuration as assign-add states it"]
    return [f"- {source}"] if source else []


def model_card(run: RunDir, name: str, phases: list[tuple[str, str]] = (),
               claims: list[tuple[str, str, str]] = ()) -> str:
    """The Hub model card; ``phases`` (phase, step) and ``claims`` (id, statement, verdict) are rows the
    caller measured (the ``export`` command passes the run's phases and its analysis's verdicts)."""
    cfg = run.config()
    t, m = cfg.task, cfg.model
    steps = run.checkpoint_steps()
    lines = ["---", "library_name: assign-add",
             "tags: [mechanistic-interpretability, modular-arithmetic, variable-binding, transformer-lens]", "---", "",
             f"# {name}", "",
             f"A {m.n_layers}-layer attention transformer trained on *assign and add* (the paper \"Assign and Add: "
             "A Mechanistic Study of Compositional Arithmetic\"): programs of variable assignments followed by a query "
             f"`x+y=`, answered modulo {t.modulus}. Trained with assign-add "
             f"({len(steps)} checkpoints, steps {steps[0]:,} to {steps[-1]:,}).", "",
             "## Task", "", f"- modulus {t.modulus}, variables {''.join(t.variables)}",
             f"- training pairs: a fraction f = {t.f} of the {t.modulus}² ordered pairs (the rest held out, never "
             f"trained in any form); 2-var share scaled by r = {t.r}",
             "- the exact split of sums is in `data/partitions.json`", "",
             "## Model", "", f"- d_model {m.d_model}, heads {m.n_heads}, d_mlp {m.d_mlp} "
             f"(TransformerLens parameter names; `config.json` has the full architecture)", "",
             "## Training", "", *_provenance(run), f"- {cfg.train.steps:,} steps, batch {cfg.train.batch_size}, AdamW lr {cfg.train.lr}, "
             f"weight decay {cfg.train.weight_decay}, init seed {cfg.train.weights_seed}, data seed "
             f"{cfg.train.order_seed}, precision {cfg.train.precision}", ""]
    if phases:
        lines += ["## Phases (from the training curves, `metrics.jsonl`)", "", "| phase | step |", "|---|---|"]
        lines += [f"| {k} | {v} |" for k, v in phases] + [""]
    if claims:
        lines += ["## The paper's claims on this run (assign-add's criteria, `assign-add analyze`)", "",
                  "| claim | statement | verdict |", "|---|---|---|"]
        lines += [f"| {c} | {s} | {v} |" for c, s, v in claims] + [""]
    lines += ["## Files", "", "- `model.safetensors`, `config.json`: the final model",
              "- `checkpoints/step{S}/model.safetensors`: every checkpoint", "",
              "## Loading", "", "```python",
              "from assign_add import open_run  # after: assign-add import-export THIS_FOLDER --out run",
              f"model = open_run('run').load_model({steps[-1]})", "```", "",
              "## One revision per step on the Hub", "",
              "Push the final model to `main` and each checkpoint folder as revision `step{S}` (the Pythia layout):",
              "", "```bash", "huggingface-cli upload USER/REPO . --exclude 'checkpoints/*'",
              "for d in checkpoints/step*; do", "  huggingface-cli upload USER/REPO \"$d\" --revision \"$(basename $d)\"",
              "done", "```", ""]
    return "\n".join(lines)


def _staging(out: Path) -> Path:
    out = Path(out)
    check_out_path(out)
    if out.exists() and any(out.iterdir()):
        raise RunError(f"--out {out}: exists and is not an empty folder; choose another --out")
    out.parent.mkdir(parents=True, exist_ok=True)
    return Path(tempfile.mkdtemp(prefix=f".{out.name}.", suffix=".tmp", dir=out.parent))


def export_run(run: RunDir, out: Path, name: str | None = None, phases: list[tuple[str, str]] = (),
               claims: list[tuple[str, str, str]] = ()) -> Path:
    """Write the Hub-ready folder of ``run`` to ``out`` (created whole or not at all), its model card with
    the ``phases`` and ``claims`` rows given (:func:`model_card`)."""
    if not run.exists():
        raise RunError(f"{run.root}: not a run directory (no config.toml)")
    steps = run.checkpoint_steps()
    if not steps:
        raise RunError(f"{run.root} has no checkpoints")
    tmp = _staging(out)
    try:
        tmp.chmod(0o755)
        for s in steps:
            (tmp / "checkpoints" / f"step{s}").mkdir(parents=True)
            shutil.copyfile(run.checkpoint_path(s), tmp / "checkpoints" / f"step{s}" / MODEL_FILE)
        shutil.copyfile(run.checkpoint_path(steps[-1]), tmp / MODEL_FILE)
        (tmp / "data").mkdir()
        shutil.copyfile(run.partitions_path, tmp / "data" / "partitions.json")
        if run.metrics_path.is_file():
            shutil.copyfile(run.metrics_path, tmp / "metrics.jsonl")
        atomic_write_text(tmp / "config.json", json.dumps(config_json(run), indent=1) + "\n")
        atomic_write_text(tmp / "README.md", model_card(run, name or f"assign-add: {Path(run.root).name}", phases, claims))
        if Path(out).exists():
            Path(out).rmdir()  # empty (checked above)
        tmp.rename(out)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return Path(out)


def exported_steps(folder: Path, manifest: list[int] | None = None) -> dict[int, Path]:
    """Step → checkpoint file of an exported folder.  ``manifest`` (``config.json``'s ``checkpoint_steps``)
    must name exactly the step folders present: a step it names without a file, or a file it does not
    name, is refused (one line naming the step's file)."""
    folder = Path(folder)
    ckpts = folder / "checkpoints"
    found = {int(m.group(1)): p / MODEL_FILE for p in (ckpts.iterdir() if ckpts.is_dir() else [])
             if (m := STEP_DIR.match(p.name))}
    if not found:
        raise RunError(f"{folder}: no checkpoints/step{{S}}/{MODEL_FILE}; not an exported assign-add folder")
    named = set(found) if manifest is None else set(manifest)
    for s in sorted(named | set(found)):
        path = ckpts / f"step{s}" / MODEL_FILE
        if s not in named:
            raise RunError(f"{path}: a checkpoint that {folder / 'config.json'} does not list; refusing to import")
        if not path.is_file():
            raise RunError(f"{path}: missing, but {folder / 'config.json'} lists step {s}; refusing to import")
    return {s: found[s] for s in sorted(found)}


def read_manifest(meta: dict, meta_path: Path) -> list[int] | None:
    """``config.json``'s ``checkpoint_steps`` (None where an older export has none), checked for shape."""
    steps = meta.get("checkpoint_steps")
    if steps is None:
        return None
    if not isinstance(steps, list) or not all(isinstance(s, int) and not isinstance(s, bool) and s >= 0
                                               for s in steps):
        raise RunError(f"{meta_path}: checkpoint_steps is not a list of step numbers")
    final = meta.get("final_step")
    if final is not None and steps and final != max(steps):
        raise RunError(f"{meta_path}: final_step {final} is not the last of checkpoint_steps ({max(steps)})")
    return steps


def verify_checkpoints(steps: dict[int, Path], cfg: config_mod.RunConfig) -> None:
    """Load every checkpoint and check its names, shapes and dtypes against ``cfg``'s model (one-line
    :class:`RunError` naming the first bad file)."""
    expected = model_tensors(cfg)
    for path in steps.values():
        check_tensors(read_checkpoint(path), expected, str(path))


def import_export(folder: Path, out: Path, force: bool = False) -> RunDir:
    """The run directory of an exported folder: its config, split, curves and checkpoints (copied as they are)."""
    folder = Path(folder)
    meta_path = folder / "config.json"
    if not meta_path.is_file():
        raise RunError(f"{folder}: no config.json; not an exported assign-add folder")
    meta = read_json_object(meta_path, "an exported folder's config.json")
    try:
        cfg = config_mod.validate(config_mod.from_dict(config_mod.RunConfig, meta["assign_add_config"]))
    except (KeyError, TypeError, AttributeError):
        raise RunError(f"{meta_path}: not an assign-add config.json (no assign_add_config)") from None
    steps = exported_steps(folder, read_manifest(meta, meta_path))
    if force:
        check_replaceable(out)
    verify_checkpoints(steps, cfg)  # before anything is written
    partitions = folder / "data" / "partitions.json"
    if not partitions.is_file():
        raise RunError(f"{partitions}: missing; an exported folder holds its train / held-out split")

    def populate(staged: RunDir) -> None:
        if read_json_object(partitions, "the exported split") != json.loads(staged.partitions_path.read_text()):
            raise RunError(f"{folder}: data/partitions.json is not the split its config gives; refusing to import")
        for s, path in sorted(steps.items()):
            shutil.copyfile(path, staged.checkpoint_path(s))
        if (folder / "metrics.jsonl").is_file():
            shutil.copyfile(folder / "metrics.jsonl", staged.metrics_path)

    status = {"state": "complete", "step": max(steps), "source": f"export-import of {folder}"}
    run, lock = create_run_dir(out, cfg, status, populate=populate, replace=force)
    lock.release()
    return run
