"""Commands over many runs: sweep (one run per config value and seed), branch-and-replay, and time to binding over seeds."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer
from rich.table import Table

from assign_add.cli.common import (
    OverridesArg,
    _command_line,
    _count_progress,
    _parse_ints,
    _TrainProgress,
    app,
    console,
    err_console,
    user_errors,
)
from assign_add.config import PAPER_STEPS, ConfigError
from assign_add.run import check_new_file_out


@app.command("sweep")
@user_errors
def sweep_cmd(
    overrides: Optional[list[str]] = OverridesArg,
    out: Path = typer.Option(..., "--out", help="sweep folder, e.g. sweeps/f"),
    sweep_preset: Optional[str] = typer.Option(None, "--preset", help="f or r (the authors' protocol: 30,000 steps), f-short or r-short (smoke runs)"),
    param: Optional[str] = typer.Option(None, "--param", help="dotted config field to sweep, e.g. task.f"),
    values: Optional[str] = typer.Option(None, "--values", help="comma-separated values"),
    seeds: int = typer.Option(1, "--seeds", help="seeds per value (42, 43, ...)"),
    first_seed: int = typer.Option(42, "--first-seed", help="the first of the seeds (the authors' sweep: 42)"),
    steps: Optional[int] = typer.Option(None, "--steps", help="training steps per run (preset default otherwise)"),
    score: Optional[str] = typer.Option(None, "--score", help="curated set whose final accuracy is the score"),
    backend: str = typer.Option("local", "--backend", help="local or ray"),
    workers: Optional[int] = typer.Option(None, "--workers", help="parallel runs (default: CPU cores)"),
    address: Optional[str] = typer.Option(None, "--address", help="Ray cluster address (default: a local Ray)"),
    adaptive: bool = typer.Option(False, "--adaptive", help="run only the grid values that locate the 90 % "
                                  "crossing, in rounds of one value per worker (see sweep-replay)"),
) -> None:
    """Train one run per (value, seed); aggregate the score, fit the threshold, draw the figure."""
    from rich.progress import Progress, TimeElapsedColumn

    from assign_add.sweep.backends import SweepProgress
    from assign_add.sweep.spec import SweepSpec, make_spec, parse_values
    from assign_add.sweep.summary import threshold_lines
    from assign_add.sweep.sweep import prepare_sweep_dir, run_adaptive_sweep, run_sweep

    if workers is not None and workers < 1:
        raise ConfigError("--workers", f"must be >= 1, got {workers}")
    spec = make_spec(sweep_preset, param, parse_values(values) if values else None, seeds, steps, score, overrides or [],
                     first_seed=first_seed)
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

        summary = (run_adaptive_sweep if adaptive else run_sweep)(spec, out, backend, workers, address, progress=show)
    spec = SweepSpec.from_json(summary["spec"])  # an adaptive sweep ran a subset of the values
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




@app.command("sweep-replay")
@user_errors
def sweep_replay_cmd(
    folder: Path = typer.Argument(..., help="a finished full-grid sweep folder (sweep.json)"),
    per_round: int = typer.Option(2, "--per-round", help="values per round (the workers an adaptive sweep would use)"),
    out: Optional[Path] = typer.Option(None, "--out", help="also write the comparison as JSON"),
) -> None:
    """Replay the adaptive design on a finished full-grid sweep: its threshold beside the grid's, and its cost."""
    from assign_add.sweep.adaptive import replay
    from assign_add.sweep.spec import THRESHOLD_ACC
    from assign_add.sweep.summary import load_summary

    if per_round < 1:
        raise ConfigError("--per-round", f"must be >= 1, got {per_round}")
    check_new_file_out(out)
    summary = load_summary(folder)
    if not (isinstance(summary, dict) and isinstance(summary.get("spec"), dict) and "values" in summary["spec"]
            and isinstance(summary.get("rows"), list)):
        raise ConfigError(str(folder), "sweep.json is not a sweep summary (no spec values or rows)")
    if summary.get("adaptive"):
        raise ConfigError(str(folder), "an adaptive sweep: replay needs a sweep that ran the full grid")
    grid = summary["spec"]["values"]
    if not all(isinstance(r, dict) and "value" in r and "mean" in r for r in summary["rows"]):
        raise ConfigError(str(folder), "sweep.json's rows lack a value or a mean")
    means = {r["value"]: r["mean"] for r in summary["rows"]}
    missing = [v for v in grid if not isinstance(means.get(v), (int, float)) or means[v] != means[v]]
    if missing or summary.get("unfinished"):
        n = len(missing) or len({u["value"] for u in summary["unfinished"]})
        raise ConfigError(str(folder), f"{n} of {len(grid)} values unfinished; finish the sweep first")
    r = replay(grid, means, THRESHOLD_ACC, per_round)
    fmt = lambda v: "none (never reaches the level)" if v is None else f"{v:.4g}"  # noqa: E731
    ad = r["adaptive"]
    lines = [f"{folder}: full grid threshold {fmt(r['grid_threshold'])}; adaptive {fmt(ad['threshold'])} "
             f"({'within' if r['within_one_step'] else 'NOT within'} one grid step, {r['grid_step']:.4g}).",
             f"Cost per seed: {r['runs_per_seed']['adaptive']} runs in {_rounds(ad['rounds'])}, "
             f"against {r['runs_per_seed']['grid']} for the grid. Values run: "
             f"{', '.join(f'{v:.4g}' for v in ad['values'])}."]
    print_and_write(lines, out, {"folder": str(folder), **r})


def _rounds(rounds: list[list[float]]) -> str:
    """'3 rounds (3, 2, 2 values)'."""
    return f"{len(rounds)} round{'s' if len(rounds) != 1 else ''} ({', '.join(str(len(r)) for r in rounds)} values)"


@app.command("branch")
@user_errors
def branch_cmd(
    parent: Path = typer.Argument(..., help="the run to branch (trained here: its weights are checked bit for bit)"),
    step: int = typer.Option(..., "--step", help="branch at this step (an evaluated, checkpointed step of the parent)"),
    out: Path = typer.Option(..., "--out", help="the branch's run directory"),
    overrides: Optional[list[str]] = typer.Argument(
        None, help="what changes, e.g. train.data_seed=7 train.steps=20000", show_default=False),
    progress: bool = typer.Option(True, "--progress/--no-progress", help="show a progress bar"),
) -> None:
    """Continue a run from step S with its exact weights and optimiser state, and another data order."""
    from assign_add.analysis.dynamics import phase_marks
    from assign_add.train.branch import branch_info, make_branch
    from assign_add.train.trainer import train

    run = make_branch(parent, step, out, overrides or [])
    info = branch_info(run)
    console.print(f"branched {parent} at step {step} ({info['how']}; data seed {info['parent_data_seed']} -> "
                  f"{info['data_seed']})", highlight=False)
    with _TrainProgress(enabled=progress) as bar:
        result = train(run.config(), out, resume=True, progress=bar.update, phase_marks=phase_marks)
    console.print(f"[green]done[/] {out}: step {result.final_step} in {result.seconds:.0f} s", highlight=False)


def print_and_write(lines: list[str], out: Path | None, data: dict) -> None:
    """A study command's result: its lines on the console, then (with ``--out``) the JSON, written atomically."""
    from assign_add.io import atomic_write_json

    for line in lines:
        console.print(line, highlight=False, soft_wrap=True)
    if out is not None:
        atomic_write_json(out, data)
        console.print(f"wrote {out}", highlight=False)


@app.command("branches")
@user_errors
def branches_cmd(
    parents: list[Path] = typer.Argument(..., help="parent runs (e.g. a seed that binds and one that does not)"),
    out: Path = typer.Option(..., "--out", help="experiment folder: branches and branches.json"),
    at: str = typer.Option("0,500,1000,2000,4000", "--at", help="comma-separated branch steps"),
    orders: int = typer.Option(8, "--orders", help="fresh data orders per branch point (data seeds 10000, 10001, ...)"),
    steps: int = typer.Option(20_000, "--steps", help="the horizon: each branch trains to this step"),
    until_bound: bool = typer.Option(True, "--until-bound/--full", help="stop a branch once it has bound"),
    workers: Optional[int] = typer.Option(None, "--workers", help="parallel branches (default: CPU cores)"),
    progress: bool = typer.Option(True, "--progress/--no-progress", help="show progress"),
    rounding: float = typer.Option(0.0, "--rounding", help="also --orders branches per point on the parent's own data "
                                   "order with every weight scaled by (1 + SCALE·N(0,1)), e.g. 1e-6: rounding alone"),
    donor: Optional[Path] = typer.Option(None, "--donor", help="transplant --parts from this run into every other "
                                         "parent at each branch step, then --orders fresh data orders"),
    parts: str = typer.Option("", "--parts", help="comma-separated: layer1-attn, layer2-attn, embed, mlp2, unembed, "
                              "norm (rescale to the donor's norm)"),
) -> None:
    """Branch-and-replay: P(bound by --steps) per parent, branch step and arm (data order, rounding, transplant)."""

    from assign_add.machine import cpu_cores
    from assign_add.studies.branches import plan, run_branches

    if orders < 1:
        raise ConfigError("--orders", f"must be >= 1, got {orders}")
    if workers is not None and workers < 1:
        raise ConfigError("--workers", f"must be >= 1, got {workers}")
    jobs = plan(parents, _parse_ints(at, "--at"), orders, out, steps, until_bound, rounding, donor,
                [x.strip() for x in parts.split(",") if x.strip()])
    summary = run_branches(jobs, out, steps, workers or cpu_cores(), _command_line("branches"),
                           poll=_count_progress(progress, "branches"))
    table = Table("parent", "branch step", "arm", "bound by " + f"{steps:,}", "P(bound)", "95 % CI", "open",
                  "median binding step")
    for row in summary["table"]:
        p = "—" if row["p_bound"] is None else f"{row['p_bound']:.2f}"
        med = "—" if row["median_bound_at"] is None else f"{row['median_bound_at']:,}"
        table.add_row(row["parent"], f"{row['step']:,}", row["arm"], f"{row['bound']} of {row['watched']}", p,
                      f"{row['ci95'][0]:.2f}–{row['ci95'][1]:.2f}", str(row["open"]), med)
    console.print(table)
    console.print(f"wrote {Path(out) / 'branches.json'}", highlight=False)


@app.command("survival")
@user_errors
def survival_cmd(
    overrides: Optional[list[str]] = OverridesArg,
    out: Path = typer.Option(..., "--out", help="experiment folder: one run per seed and survival.json"),
    seeds: str = typer.Option(..., "--seeds", help="seeds, e.g. 52-83 or 42,43,44"),
    steps: int = typer.Option(PAPER_STEPS, "--steps", help="the horizon: a run not bound by then is censored there"),
    until_bound: bool = typer.Option(True, "--until-bound/--full", help="stop a run once it has bound"),
    llc: bool = typer.Option(False, "--llc", help="also the LLC at step 1,500 of each run, a second predictor "
                             "(~1 min per run; needs the llc extra)"),
    workers: Optional[int] = typer.Option(None, "--workers", help="parallel runs (default: CPU cores)"),
    progress: bool = typer.Option(True, "--progress/--no-progress", help="show progress"),
) -> None:
    """Time to binding over seeds: survival curve, P(bound by 20k / 40k), and an early predictor."""

    from assign_add.machine import cpu_cores
    from assign_add.studies.survival import plan, run_survival

    if workers is not None and workers < 1:
        raise ConfigError("--workers", f"must be >= 1, got {workers}")
    jobs = plan(_parse_ints(seeds, "--seeds"), out, steps, until_bound, overrides or [], llc=llc)
    summary = run_survival(jobs, out, steps, workers or cpu_cores(), _command_line("survival"),
                           poll=_count_progress(progress, "seeds"))
    table = Table("horizon", "bound", "P(bound)", "95 % CI")
    for m, r in summary["bound_by"].items():
        table.add_row(f"{int(m):,}", f"{r['bound']} of {r['watched']}", "—" if r["p"] is None else f"{r['p']:.2f}",
                      f"{r['ci95'][0]:.2f}–{r['ci95'][1]:.2f}")
    console.print(table)
    pred = summary["predictor"]
    if pred["loo_accuracy"] is not None:
        console.print(f"early predictor (step {pred['early_step']:,}): leave-one-out accuracy {pred['loo_accuracy']:.2f} "
                      f"vs base rate {pred['base_rate']:.2f}, permutation p = {pred['p_value']:.3f}", highlight=False)
    pred = summary.get("llc_predictor") or {}
    if pred.get("loo_accuracy") is not None:
        console.print(f"the LLC alone (step {pred['early_step']:,}): leave-one-out accuracy {pred['loo_accuracy']:.2f} "
                      f"vs base rate {pred['base_rate']:.2f}, permutation p = {pred['p_value']:.3f}", highlight=False)
    console.print(f"wrote {Path(out) / 'survival.json'} and survival.md", highlight=False)


@app.command("survival-confirm")
@user_errors
def survival_confirm_cmd(
    fit: Path = typer.Argument(..., help="the first study's survival.json (the predictor is fitted on it)"),
    tests: list[Path] = typer.Argument(..., help="fresh seeds' survival.json file(s), scored"),
    out: Optional[Path] = typer.Option(None, "--out", help="also write the result as JSON here"),
) -> None:
    """Score the early predictor, fitted once on one survival study, on fresh seeds (pre-registered rule)."""
    from assign_add.studies.survival import confirm, confirm_line

    check_new_file_out(out)
    res = confirm(fit, tests)
    print_and_write([confirm_line(res)], out, res)


@app.command("survival-compare")
@user_errors
def survival_compare_cmd(
    a: Path = typer.Argument(..., help="one study's survival.json (e.g. float32)"),
    b: Path = typer.Argument(..., help="the other's (e.g. bf16), same horizon unless --horizon"),
    out: Optional[Path] = typer.Option(None, "--out", help="also write the result as JSON here"),
    allow_different_training: bool = typer.Option(
        False, "--allow-different-training",
        help="compare studies trained differently (compiled vs eager, fp32 vs bf16); said beside the result"),
    horizon: Optional[int] = typer.Option(None, "--horizon", help="read both studies at this step (at most either's "
                                          "horizon; a binding after it is not seen). Default: their common horizon"),
) -> None:
    """Did a change alter binding?  Two survival studies: Fisher's test on bound-by-horizon, log-rank on time."""
    from assign_add.studies.compare import compare, compare_line

    check_new_file_out(out)
    res = compare(a, b, allow_different_training, horizon)
    print_and_write([compare_line(res, (str(a), str(b)))], out, res)


@app.command("survival-rescue")
@user_errors
def survival_rescue_cmd(
    default: Path = typer.Argument(..., help="the default study's survival.json (or its folder)"),
    arms: list[str] = typer.Option(..., "--arm", help="NAME=PATH: one rescue arm's survival.json (repeatable)"),
    out: Optional[Path] = typer.Option(None, "--out", help="also write the table as JSON here"),
) -> None:
    """Rescue arms against the default on the same seeds: bound by the horizon, Holm-adjusted Fisher, cost."""
    from assign_add.studies.rescue import rescue, rescue_lines

    check_new_file_out(out)
    paths: dict[str, Path] = {}
    for spec in arms:
        name, sep, path = spec.partition("=")
        if not sep or not name or not path:
            raise ConfigError("--arm", f"{spec!r}: expected NAME=PATH")
        if name in paths:
            raise ConfigError("--arm", f"{name} given twice")
        paths[name] = Path(path)
    res = rescue(default, paths)
    print_and_write(rescue_lines(res), out, res)


@app.command("padding-shift")
@user_errors
def padding_shift_cmd(
    variant: list[Path] = typer.Option(..., "--variant", help="a run trained with task.padding=end (repeatable)"),
    default: list[Path] = typer.Option(..., "--default", help="a run trained with the default random padding "
                                       "(repeatable)"),
    out: Optional[Path] = typer.Option(None, "--out", help="also write the result as JSON here"),
) -> None:
    """Does random padding keep the model from relying on absolute position? Each run's final model on its own
    sets and on the other padding's."""
    from assign_add.studies.padding import padding_lines, padding_verdict, shift_accuracy

    check_new_file_out(out)
    res = padding_verdict([shift_accuracy(p) for p in variant], [shift_accuracy(p) for p in default])
    print_and_write(padding_lines(res), out, res)


@app.command("survival-norm")
@user_errors
def survival_norm_cmd(
    studies: list[Path] = typer.Argument(..., help="fresh seeds' survival.json file(s) (not the studies the lead was "
                                         "found in)"),
    out: Optional[Path] = typer.Option(None, "--out", help="also write the result as JSON here"),
    split_out: Optional[Path] = typer.Option(None, "--split", help="also split the norm by parameter group at every "
                                             "checkpoint up to 2,000 (description, not part of the test) into this "
                                             "JSON file"),
) -> None:
    """The pre-registered test of the norm lead: is the parameter norm at step 1,500 higher in the seeds that bind?"""
    from assign_add.studies.survival import norm_lead, norm_lead_line, norm_split, norm_split_markdown

    check_new_file_out(out)
    check_new_file_out(split_out)
    if split_out is not None and len(studies) != 1:
        raise ConfigError("--split", "splits one study's norm; give one survival.json")
    res = norm_lead(studies)
    split = norm_split(studies[0]) if split_out is not None else None  # before anything is written
    print_and_write([norm_lead_line(res)], out, res)
    if split is not None:
        print_and_write([norm_split_markdown(split)], split_out, split)
