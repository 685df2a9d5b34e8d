"""Commands on one run: config, data, train, import-paper, export, import-export, eval, predict."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Optional

import typer

from assign_add import config as config_mod
from assign_add.cli.common import (
    ConfigOpt,
    OverridesArg,
    PresetOpt,
    _parse_ints,
    _print_acc_table,
    _print_imported,
    _resolve,
    _TrainProgress,
    app,
    console,
    user_errors,
)
from assign_add.config import PAPER_STEPS, ConfigError
from assign_add.run import RunError


@app.command("config")
@user_errors
def config_cmd(
    overrides: Optional[list[str]] = OverridesArg,
    preset: str = PresetOpt,
    config_file: Optional[Path] = ConfigOpt,
) -> None:
    """Print the resolved configuration as TOML (save it, edit it, pass it with --config)."""
    sys.stdout.write(config_mod.dumps(_resolve(preset, config_file, overrides)))


@app.command("data")
@user_errors
def data_cmd(
    overrides: Optional[list[str]] = OverridesArg,
    split: str = typer.Option("train", "--split", help="train, or a curated set name (see --list)"),
    n: int = typer.Option(10, "--n", help="number of sequences"),
    jsonl: bool = typer.Option(False, "--jsonl", help="one JSON object per line"),
    list_sets: bool = typer.Option(False, "--list", help="list the curated sets and their sizes"),
    preset: str = PresetOpt,
    config_file: Optional[Path] = ConfigOpt,
) -> None:
    """Print sequences of the training distribution or of a curated evaluation set."""
    from assign_add.task.evalsets import build_eval_sets
    from assign_add.task.generator import CATEGORY_NAMES, Sampler
    from assign_add.task.partitions import build_partitions
    from assign_add.task.vocab import Vocab, tokens_to_text

    cfg = _resolve(preset, config_file, overrides)
    if n < 0:
        raise ConfigError("--n", f"must be >= 0, got {n}")
    parts = build_partitions(cfg.task)
    vocab = Vocab.from_task(cfg.task)
    if list_sets:
        for name, batch in build_eval_sets(cfg.task, parts).items():
            console.print(f"{name}\t{len(batch)}", highlight=False)
        return
    if split == "train":
        batch = Sampler(cfg.task, cfg.train.order_seed, parts).batch(0, n)
    else:
        sets = build_eval_sets(cfg.task, parts)
        if split not in sets:
            raise ConfigError("--split", f"unknown split {split!r}; choose train or one of: {', '.join(sets)}")
        batch = sets[split].take(slice(0, n))
    for i in range(len(batch)):
        row = {
            "text": tokens_to_text(batch.tokens[i], vocab),
            "tokens": batch.tokens[i].tolist(),
            "answer": int(batch.answers[i]),
            "category": CATEGORY_NAMES[int(batch.category[i])],
            "split": split,
        }
        if jsonl:
            sys.stdout.write(json.dumps(row) + "\n")
        else:
            sys.stdout.write(f"{row['text']} {row['answer']}\t[{row['category']}]\t{' '.join(map(str, row['tokens']))}\n")


# --------------------------------------------------------------------------- training


@app.command("train")
@user_errors
def train_cmd(
    overrides: Optional[list[str]] = OverridesArg,
    out: Path = typer.Option(..., "--out", help="run directory, e.g. runs/paper"),
    preset: str = PresetOpt,
    config_file: Optional[Path] = ConfigOpt,
    resume: bool = typer.Option(False, "--resume", help="continue an interrupted run in --out"),
    force: bool = typer.Option(False, "--force", help="delete the run in --out (only a run directory of ours: "
                               "its config, data, metrics, checkpoints, state, analysis) and start over"),
    progress: bool = typer.Option(True, "--progress/--no-progress", help="show a progress bar"),
) -> None:
    """Train a model; writes config, data partitions, metrics, checkpoints and a log to --out."""
    from assign_add.analysis.dynamics import phase_marks
    from assign_add.train.trainer import train

    cfg = _resolve(preset, config_file, overrides)
    with _TrainProgress(enabled=progress) as bar:
        result = train(cfg, out, resume=resume, force=force, progress=bar.update, phase_marks=phase_marks)
    acc = result.final_metrics.get("acc", {})
    console.print(f"[green]done[/] {out}: step {result.final_step} in {result.seconds:.0f} s", highlight=False)
    if acc:
        _print_acc_table({result.final_step: acc})



@app.command("import-paper")
@user_errors
def import_paper_cmd(
    paths: list[Path] = typer.Argument(..., help="checkpoint files or folders (e.g. ../shared/paper-artifacts/checkpoints)"),
    out: Path = typer.Option(..., "--out", help="run directory to create"),
    force: bool = typer.Option(False, "--force", help="replace --out if it is a run directory of ours "
                               "(never a folder with other files)"),
    final_step: int = typer.Option(PAPER_STEPS, "--final-step", help="step of model_state_dict.pth"),
) -> None:
    """Import the authors' TransformerLens 2.x checkpoints (.pth) as a run directory."""
    from assign_add.interop.paper import import_paper

    _print_imported(import_paper(paths, out, force=force, final_step=final_step), out)


@app.command("export")
@user_errors
def export_cmd(
    run: Path = typer.Argument(..., help="run directory"),
    out: Path = typer.Option(..., "--out", help="folder to create (must not exist or be empty)"),
    name: Optional[str] = typer.Option(None, "--name", help="the model card's title"),
) -> None:
    """Write a Hugging Face Hub-ready folder: safetensors per step, config.json, a model card (nothing uploaded)."""
    from assign_add.interop.export import export_run
    from assign_add.report.card import claim_rows, phase_rows
    from assign_add.run import RunDir

    export_run(RunDir(run), out, name, phases=phase_rows(RunDir(run)), claims=claim_rows(RunDir(run)))
    console.print(f"[green]exported[/] {run} to {out} (README.md is the model card; push with huggingface-cli upload)",
                  highlight=False)


@app.command("import-export")
@user_errors
def import_export_cmd(
    folder: Path = typer.Argument(..., help="a folder written by assign-add export"),
    out: Path = typer.Option(..., "--out", help="run directory to create"),
    force: bool = typer.Option(False, "--force", help="replace --out if it is a run directory of ours"),
) -> None:
    """Read an exported folder back into a run directory (same checkpoints, byte for byte)."""
    from assign_add.interop.export import import_export

    _print_imported(import_export(folder, out, force=force), out)


@app.command("eval")
@user_errors
def eval_cmd(
    run_dir: Path = typer.Argument(..., help="run directory"),
    steps: Optional[str] = typer.Option(None, "--steps", help="comma-separated checkpoint steps (default: all)"),
    sets: Optional[str] = typer.Option(None, "--sets", help="comma-separated set names (default: all)"),
    as_json: bool = typer.Option(False, "--json", help="print JSON lines instead of a table"),
) -> None:
    """Accuracy of checkpoints on the curated sets; cached in RUN/evals.jsonl."""
    from assign_add.run import open_run
    from assign_add.train.checkpoint_eval import evaluate_checkpoints

    run = open_run(run_dir)
    step_list = _parse_ints(steps, "--steps") if steps else None
    set_list = [s.strip() for s in sets.split(",")] if sets else None
    records = evaluate_checkpoints(run, step_list, set_list)
    if as_json:
        for rec in records:
            sys.stdout.write(json.dumps(rec) + "\n")
    else:
        _print_acc_table({rec["step"]: rec["acc"] for rec in records})


@app.command("predict")
@user_errors
def predict_cmd(
    run_dir: Path = typer.Argument(..., help="run directory"),
    prompt: Optional[str] = typer.Argument(None, help='e.g. "c=1, b=17, b+19="'),
    file: Optional[Path] = typer.Option(None, "--file", help="one prompt per line (streamed, any size)"),
    step: Optional[int] = typer.Option(None, "--step", help="checkpoint step (default: the last)"),
    top: int = typer.Option(3, "--top", help="how many of the most probable answers to show"),
    as_json: bool = typer.Option(False, "--json", help="JSON lines output"),
) -> None:
    """The model's answer and top probabilities for prompts in the text form."""
    from assign_add.answers import file_prompts, predict
    from assign_add.run import open_run

    if (prompt is None) == (file is None):
        raise RunError("give exactly one of PROMPT or --file")
    if top < 1:
        raise ConfigError("--top", f"must be >= 1, got {top}")
    model = open_run(run_dir).load_model(step)
    prompts = [(1, prompt)] if prompt is not None else file_prompts(file)  # type: ignore[arg-type]
    out = sys.stdout
    for pred in predict(model, prompts, top, where=f"{file} " if file is not None else ""):
        out.write((json.dumps(pred.to_json()) if as_json else pred.to_text()) + "\n")


