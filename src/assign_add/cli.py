"""The ``assign-add`` command line (typer + rich).

User mistakes (bad config, malformed prompt, wrong run directory) print one ``error:`` line
to stderr and exit with status 2; they never show a traceback.
"""

from __future__ import annotations

import functools
import json
import sys
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


# --------------------------------------------------------------------------- config / data


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
    from assign_add.train.trainer import train

    cfg = _resolve(preset, config_file, overrides)
    with _TrainProgress(enabled=progress) as bar:
        result = train(cfg, out, resume=resume, force=force, progress=bar.update)
    acc = result.final_metrics.get("acc", {})
    console.print(f"[green]done[/] {out}: step {result.final_step} in {result.seconds:.0f} s", highlight=False)
    if acc:
        _print_acc_table({result.final_step: acc})


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


@app.command("import-paper")
@user_errors
def import_paper_cmd(
    paths: list[Path] = typer.Argument(..., help="checkpoint files or folders (e.g. ../shared/paper-artifacts/checkpoints)"),
    out: Path = typer.Option(..., "--out", help="run directory to create"),
    force: bool = typer.Option(False, "--force", help="replace --out if it is a run directory of ours "
                               "(never a folder with other files)"),
    final_step: int = typer.Option(40_000, "--final-step", help="step of model_state_dict.pth"),
) -> None:
    """Import the authors' TransformerLens 2.x checkpoints (.pth) as a run directory."""
    from assign_add.paper import import_paper

    run = import_paper(paths, out, force=force, final_step=final_step)
    steps = run.checkpoint_steps()
    console.print(f"[green]imported[/] {len(steps)} checkpoints (steps {steps[0]}..{steps[-1]}) into {out}", highlight=False)


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
    from assign_add.predict import file_prompts, predict
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


@app.command("analyze")
@user_errors
def analyze_cmd(
    run_dir: Path = typer.Argument(..., help="run directory (trained or imported)"),
    only: Optional[str] = typer.Option(None, "--only", help="comma-separated analyses (default: all)"),
    steps: Optional[str] = typer.Option(None, "--steps", help="comma-separated checkpoint steps (default: all)"),
    progress: bool = typer.Option(True, "--progress/--no-progress", help="show progress"),
) -> None:
    """Run the analyses; writes RUN/analysis.json and RUN/figures/ (PNG + plotly fragments)."""
    from rich.progress import Progress

    from assign_add.analysis.suite import analyze
    from assign_add.run import open_run

    run = open_run(run_dir)
    names = [s.strip() for s in only.split(",")] if only else None
    step_list = _parse_ints(steps, "--steps") if steps else None
    with Progress(console=err_console, disable=not progress, transient=True) as bar:
        tasks: dict[str, int] = {}

        def tick(stage: str, done: int, total: int) -> None:
            if stage not in tasks:
                tasks[stage] = bar.add_task(stage, total=total)
            bar.update(tasks[stage], completed=done)

        out = analyze(run, names, step_list, progress=tick)
    _print_analysis_summary(out)
    console.print(f"wrote {run.root / 'analysis.json'} and {run.root / 'figures'}/ in {out['seconds']:.0f} s", highlight=False)


def _print_analysis_summary(out: dict) -> None:
    final = str(out["final_step"])
    lines = []
    if "dynamics" in out:
        p = out["dynamics"]["phases"]
        if p["binding"] is None:
            lines.append(f"phases: addition {p['addition']}, not bound by step {p['last_step']} "
                         "(no binding or refinement step)")
        else:
            lines.append(f"phases: addition {p['addition']}, binding {p['binding']} "
                         f"(1-var held-out {p['binding_from']:.2f} -> {p['binding_to']:.2f}), refinement "
                         f"{p['refinement']} (stays >= 95 % from {p['refinement_stable']}); paper order: "
                         f"{p['in_paper_order']}")
    for name in ("attention", "weights", "probes", "representation"):
        if name in out and final in out[name]["by_step"]:
            vals = ", ".join(f"{k} {v:.3f}" for k, v in out[name]["by_step"][final].items() if isinstance(v, float))
            lines.append(f"{name} @ {final}: {vals}")
    if "fourier" in out:
        f = out["fourier"]
        lines.append(f"fourier @ {final}: key frequencies {f['key_frequencies']}, "
                     f"{f['n_frequency_neurons']}/{f['n_neurons']} frequency neurons")
    for line in lines:
        console.print(line, highlight=False)


@app.command("reproduce")
@user_errors
def reproduce_cmd(
    overrides: Optional[list[str]] = OverridesArg,
    out: Path = typer.Option(Path("runs/reproduce"), "--out", help="output folder (runs, claims.json, report)"),
    seeds: int = typer.Option(3, "--seeds", help="training seeds (42, 43, ...), trained in parallel processes; "
                              "verdicts over seeds; ≥ 2 adds the phase-timing distribution"),
    steps: Optional[int] = typer.Option(None, "--steps", help="training steps per seed (default 40,000, the authors' run)"),
    paper_checkpoints: Optional[Path] = typer.Option(
        None, "--paper-checkpoints", help="also import and analyse the authors' checkpoints (a folder of .pth)"),
    quick: bool = typer.Option(False, "--quick", help="a small smoke-test configuration (about a minute)"),
    f_sweep: Optional[Path] = typer.Option(None, "--f-sweep", help="a finished f sweep folder: supplies claim C6"),
    r_sweep: Optional[Path] = typer.Option(None, "--r-sweep", help="a finished r sweep folder: supplies claim C7"),
    progress: bool = typer.Option(True, "--progress/--no-progress", help="show progress"),
) -> None:
    """Train the paper preset (or reuse it), run every analysis, write report.html and report.md."""
    from assign_add.reproduce import reproduce

    sweeps = {k: v for k, v in (("f", f_sweep), ("r", r_sweep)) if v is not None}
    with _TrainProgress(enabled=progress) as bar:
        log = lambda msg: err_console.print(msg, highlight=False)  # noqa: E731
        res = reproduce(out, seeds, steps, paper_checkpoints, quick, overrides or [], log=log, progress=bar.update,
                        sweeps=sweeps)
    console.print(f"[green]report[/] {res.html} and {res.markdown} ({res.seconds:.0f} s)", highlight=False)


@app.command("phases")
@user_errors
def phases_cmd(
    run_dirs: list[Path] = typer.Argument(..., help="training run directories (their metrics.jsonl)"),
    as_json: bool = typer.Option(False, "--json", help="print the survey as JSON"),
) -> None:
    """Phase steps of many runs from their metrics, binding censored at each run's last step, and the
    Kaplan-Meier survival of the binding step over them."""
    from assign_add.analysis.timing import survey
    from assign_add.run import RunError, open_run

    records = {}
    for d in run_dirs:
        run = open_run(d)
        records[str(d)] = run.metrics()
        if not records[str(d)]:
            raise RunError(f"{d}: no metrics.jsonl records (an imported run: use assign-add analyze)")
    out = survey(records)
    if as_json:
        console.print_json(data=out)
        return
    table = Table("run", "addition", "binding", "refinement", "last step")
    for name, r in out["per_run"].items():
        binding = f"{r['binding']:,}" if r["binding"] is not None else "not bound"
        table.add_row(name, *(f"{r[k]:,}" if r[k] is not None else "—" for k in ("addition",)), binding,
                      f"{r['refinement']:,}" if r["refinement"] is not None else "—", f"{r['last_step']:,}")
    console.print(table)
    km = out["binding_survival"]
    if km:
        lo, hi = km["bound_fraction_ci95"]
        median = f"{km['median']:,.0f}" if km["median"] is not None else f"beyond {km['horizon']:,}"
        console.print(f"bound by {km['horizon']:,} (the earliest last step): {km['bound']} of {km['n']} (95 % CI "
                      f"{lo:.0%}-{hi:.0%}); Kaplan-Meier median binding "
                      f"step {median} (runs not bound are censored at their last step)", highlight=False)


@app.command("explore")
@user_errors
def explore_cmd(
    run_dir: Path = typer.Argument(..., help="run directory (a training run or imported checkpoints)"),
    host: str = typer.Option("127.0.0.1", "--host", help="address to listen on (default: this machine only)"),
    port: int = typer.Option(8050, "--port", help="port (0: any free port)"),
    cache: int = typer.Option(32, "--cache", help="checkpoints kept in memory at most (least recently used evicted)"),
) -> None:
    """A local web page: type a prompt, slide over checkpoints, see answer, attention, routing, curves, Fourier."""
    from assign_add.explore.server import serve
    from assign_add.run import open_run

    if cache < 1:
        raise ConfigError("--cache", f"must be >= 1, got {cache}")
    if not 0 <= port <= 65535:
        raise ConfigError("--port", f"must be 0..65535, got {port}")
    run = open_run(run_dir)
    if host not in ("127.0.0.1", "localhost", "::1"):
        err_console.print(f"warning: serving on {host}: anyone who can reach this machine can use the page",
                          highlight=False)
    announce = lambda url: console.print(f"exploring {run.root} at {url}  (Ctrl-C to stop)", highlight=False,  # noqa: E731
                                         soft_wrap=True)
    try:
        serve(run, host, port, cache, ready=announce)
    except KeyboardInterrupt:
        console.print("stopped", highlight=False)


@app.command("sweep")
@user_errors
def sweep_cmd(
    overrides: Optional[list[str]] = OverridesArg,
    out: Path = typer.Option(..., "--out", help="sweep folder, e.g. sweeps/f"),
    sweep_preset: Optional[str] = typer.Option(None, "--preset", help="f or r (the authors' protocol: 30,000 steps), f-short or r-short (smoke runs)"),
    param: Optional[str] = typer.Option(None, "--param", help="dotted config field to sweep, e.g. task.f"),
    values: Optional[str] = typer.Option(None, "--values", help="comma-separated values"),
    seeds: int = typer.Option(1, "--seeds", help="seeds per value (42, 43, ...)"),
    steps: Optional[int] = typer.Option(None, "--steps", help="training steps per run (preset default otherwise)"),
    score: Optional[str] = typer.Option(None, "--score", help="curated set whose final accuracy is the score"),
    backend: str = typer.Option("local", "--backend", help="local or ray"),
    workers: Optional[int] = typer.Option(None, "--workers", help="parallel runs (default: CPU cores)"),
    address: Optional[str] = typer.Option(None, "--address", help="Ray cluster address (default: a local Ray)"),
) -> None:
    """Train one run per (value, seed); aggregate the score, fit the threshold, draw the figure."""
    from rich.progress import Progress, TimeElapsedColumn

    from assign_add.sweep.backends import SweepProgress
    from assign_add.sweep.spec import make_spec, parse_values
    from assign_add.sweep.summary import threshold_lines
    from assign_add.sweep.sweep import prepare_sweep_dir, run_sweep

    if workers is not None and workers < 1:
        raise ConfigError("--workers", f"must be >= 1, got {workers}")
    spec = make_spec(sweep_preset, param, parse_values(values) if values else None, seeds, steps, score, overrides or [])
    if backend not in ("local", "ray"):
        raise ConfigError("--backend", f"unknown backend {backend!r}; choose local or ray")
    prepare_sweep_dir(spec, out)  # errors before the progress bar appears
    columns = (*Progress.get_default_columns(), TimeElapsedColumn())
    with Progress(*columns, console=err_console) as bar:
        points = len(spec.points())
        task = bar.add_task(f"sweep {spec.param}: 0/{points} points", total=spec.steps * points)

        def show(p: SweepProgress) -> None:  # training steps summed over all points
            bar.update(task, completed=p.steps_done,
                       description=f"sweep {spec.param}: {p.points_done}/{p.points_total} points")

        summary = run_sweep(spec, out, backend, workers, address, progress=show)
    table = Table(spec.param, "2-var share", f"{spec.score} (mean)", "sd", f"at {spec.steps // 3:,}",
                  f"at {2 * spec.steps // 3:,}", "converged")
    fmt = lambda v: "—" if v is None else f"{v:.4f}"  # noqa: E731
    for row in summary["rows"]:
        conv = "—" if row["converged"] is None else ("yes" if row["converged"] else "no")
        table.add_row(f"{row['value']:.4g}", fmt(row["two_var_share"]), fmt(row["mean"]), fmt(row["sd"]),
                      fmt(row["at_third"]), fmt(row["at_two_thirds"]), conv)
    console.print(table)
    for line in threshold_lines(spec, summary):
        console.print(line.replace("**", ""), highlight=False)
    console.print(f"wrote {Path(out) / 'sweep.json'}, table.md, figure.png, curves.png", highlight=False)


# --------------------------------------------------------------------------- benchmark


@app.command("bench")
@user_errors
def bench_cmd(
    overrides: Optional[list[str]] = OverridesArg,
    what: str = typer.Option("data,train,eval", "--what",
                             help="comma-separated: data, train, eval, compile, explore (needs --run)"),
    steps: int = typer.Option(50, "--steps", help="timed training steps per implementation"),
    run_dir: Optional[Path] = typer.Option(None, "--run", help="run directory for --what explore"),
    preset: str = PresetOpt,
    config_file: Optional[Path] = ConfigOpt,
) -> None:
    """Print sampling throughput, engine vs straightforward training speed, and evaluation cost."""
    import torch

    from assign_add import bench

    cfg = _resolve(preset, config_file, overrides)
    if steps < 1:
        raise ConfigError("--steps", f"must be >= 1, got {steps}")
    parts = {w.strip() for w in what.split(",")}
    unknown = parts - {"data", "train", "eval", "compile", "explore"}
    if unknown:
        raise ConfigError("--what", f"unknown benchmark {', '.join(sorted(unknown))}")
    if "explore" in parts and run_dir is None:
        raise ConfigError("--run", "--what explore needs --run RUN (a run directory to serve)")
    console.print(f"torch {torch.__version__}, {torch.get_num_threads()} threads, batch {cfg.train.batch_size}", highlight=False)
    if "data" in parts:
        rate = bench.bench_data(cfg)
        console.print(f"data sampling: {rate:,.0f} sequences/s", highlight=False)
    step_ms = None
    if "train" in parts:
        step_ms = _print_train_bench(bench, cfg, steps)
    if "compile" in parts:
        eager, compiled, warmup = bench.bench_compile(cfg, steps)
        console.print(f"engine: {eager.seq_per_s:,.0f} sequences/s; with torch.compile (train.compile=true): "
                      f"{compiled.seq_per_s:,.0f} sequences/s, {compiled.seq_per_s / eager.seq_per_s:.2f}x "
                      f"after {warmup:.0f} s compiling", highlight=False)
    if "explore" in parts:
        from assign_add.explore.load import measure_rate
        from assign_add.run import open_run

        for r in measure_rate(open_run(run_dir)):
            console.print(f"explorer, {r.clients} clients, {r.where}: {r.per_second:.1f} requests/s "
                          f"({r.requests} answered, {r.failed} failed in {r.seconds:.1f} s); "
                          f"memory held {r.rss_mib:.0f} MiB (peak {r.peak_rss_mib:.0f})", highlight=False)
    if "eval" in parts:
        secs, size = bench.bench_eval(cfg)
        console.print(f"one evaluation of the live sets ({size:,} sequences): {secs:.2f} s", highlight=False)
        if step_ms is not None:
            for total in (16_000, 40_000):
                proj = bench.projected_seconds(total, step_ms, secs, cfg.train.eval_every)
                console.print(
                    f"projected {total:,} steps with evaluation every {cfg.train.eval_every}: {proj / 60:.1f} min",
                    highlight=False,
                )


# --------------------------------------------------------------------------- helpers


def _print_train_bench(bench, cfg: RunConfig, steps: int) -> float:
    """The training-step table in fp32 and bf16 autocast on ``train.device``; returns fp32 engine ms/step."""
    import torch

    device = bench.resolve_device(cfg.train.device)
    pairs = bench.bench_train(cfg, steps, ("fp32", "bf16"))
    table = Table("implementation", "sequences/s", "ms/step", "activation memory (MiB)")
    for fast, base in pairs:
        for b in (base, fast):
            table.add_row(b.name, f"{b.seq_per_s:,.0f}", f"{b.ms_per_step:.1f}", f"{b.activation_mib:.1f}")
    console.print(f"device {device}", highlight=False)
    console.print(table)
    for fast, base in pairs:
        console.print(f"{fast.name} / {base.name}: {fast.seq_per_s / base.seq_per_s:.1f}x", highlight=False)
    (f32, _), (bf, _) = pairs
    console.print(f"engine bf16 / fp32: {bf.seq_per_s / f32.seq_per_s:.2f}x", highlight=False)
    peaks = {name: bench.matmul_peak_gflops(device, dtype) for name, dtype in
             (("fp32", torch.float32), ("bf16", torch.bfloat16))}
    console.print(f"matmul 8192x128 @ 128x512 on {device}: fp32 {peaks['fp32']:,.0f} GFLOP/s, "
                  f"bf16 {peaks['bf16']:,.0f} GFLOP/s ({peaks['bf16'] / peaks['fp32']:.2f}x)", highlight=False)
    return f32.ms_per_step


def _parse_ints(text: str, name: str) -> list[int]:
    try:
        return [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise ConfigError(name, f"expected comma-separated integers, got {text!r}") from None


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


def main() -> None:
    app()


if __name__ == "__main__":
    main()
