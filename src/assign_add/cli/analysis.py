"""Commands that measure runs: analyze, reproduce, phases, explore, llc."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer
from rich.table import Table

from assign_add.cli.common import (
    OverridesArg,
    _parse_ints,
    _TrainProgress,
    app,
    console,
    err_console,
    user_errors,
)
from assign_add.config import ConfigError
from assign_add.run import RunError


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
    seeds: int = typer.Option(3, "--seeds", help="training seeds (--first-seed, then +1, ...), trained in parallel processes; "
                              "verdicts over seeds; ≥ 2 adds the phase-timing distribution"),
    steps: Optional[int] = typer.Option(None, "--steps", help="training steps per seed (default 40,000, the authors' run)"),
    first_seed: int = typer.Option(42, "--first-seed", help="the first of the seeds (default 42, the authors' seed)"),
    many_seeds: Optional[Path] = typer.Option(
        None, "--many-seeds", help="a committed many-seed reproduce folder (claims.json) printed beside this job's "
        "seeds (default: results/claims-16seeds of the source checkout, where present)"),
    paper_checkpoints: Optional[Path] = typer.Option(
        None, "--paper-checkpoints", help="also import and analyse the authors' checkpoints (a folder of .pth)"),
    quick: bool = typer.Option(False, "--quick", help="a small smoke-test configuration (about a minute)"),
    f_sweep: Optional[Path] = typer.Option(None, "--f-sweep", help="a finished f sweep folder: supplies claim C6"),
    r_sweep: Optional[Path] = typer.Option(None, "--r-sweep", help="a finished r sweep folder: supplies claim C7"),
    survival: Optional[Path] = typer.Option(None, "--survival", help="an assign-add survival folder: a report section"),
    branches: Optional[Path] = typer.Option(None, "--branches", help="an assign-add branches folder: a report section"),
    llc_dir: Optional[Path] = typer.Option(None, "--llc", help="an assign-add llc folder: a report section"),
    rescue: Optional[Path] = typer.Option(None, "--rescue", help="a folder holding survival-rescue's rescue.json: "
                                          "a report section"),
    progress: bool = typer.Option(True, "--progress/--no-progress", help="show progress"),
) -> None:
    """Train the paper preset (or reuse it), run every analysis, write report.html and report.md."""
    from assign_add.reproduce import reproduce

    sweeps = {k: v for k, v in (("f", f_sweep), ("r", r_sweep)) if v is not None}
    with _TrainProgress(enabled=progress) as bar:
        log = lambda msg: err_console.print(msg, highlight=False)  # noqa: E731
        experiments = {k: v for k, v in (("survival", survival), ("branches", branches), ("llc", llc_dir),
                                                   ("rescue", rescue)) if v}
        res = reproduce(out, seeds, steps, paper_checkpoints, quick, overrides or [], log=log, progress=bar.update,
                        sweeps=sweeps, experiments=experiments, first_seed=first_seed,
                        **({"many_seeds": many_seeds} if many_seeds is not None else {}))
    console.print(f"[green]report[/] {res.html} and {res.markdown} ({res.seconds:.0f} s; worker time "
                  f"{res.times['training_s']:.0f} s training, {res.times['analysis_s']:.0f} s analysing, in "
                  f"{res.times['workers']} worker process(es) on {res.times['cores']} cores)", highlight=False)


@app.command("phases")
@user_errors
def phases_cmd(
    run_dirs: list[Path] = typer.Argument(..., help="training run directories (their metrics.jsonl)"),
    as_json: bool = typer.Option(False, "--json", help="print the survey as JSON"),
) -> None:
    """Phase steps of many runs from their metrics, binding censored at each run's last step, and the
    Kaplan-Meier survival of the binding step over them."""
    from assign_add.analysis.timing import survey
    from assign_add.run import open_run

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




def _floats(text: str, name: str) -> list[float]:
    try:
        return [float(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise ConfigError(name, f"expected comma-separated numbers, got {text!r}") from None


@app.command("llc")
@user_errors
def llc_cmd(
    run_dir: Path = typer.Argument(..., help="run directory (trained or imported)"),
    out: Path = typer.Option(..., "--out", help="folder for llc.json and llc.png (or calibration.json)"),
    steps: Optional[str] = typer.Option(None, "--steps", help="comma-separated checkpoint steps (default: all)"),
    lr: Optional[float] = typer.Option(None, "--lr", help="SGLD step size"),
    localization: Optional[float] = typer.Option(None, "--localization", help="SGLD localisation γ"),
    chains: Optional[int] = typer.Option(None, "--chains", help="SGLD chains"),
    draws: Optional[int] = typer.Option(None, "--draws", help="SGLD steps kept per chain (after burn-in)"),
    calibrate_lrs: Optional[str] = typer.Option(None, "--calibrate-lrs", help="calibrate: step sizes to try, e.g. 1e-5,3e-5,1e-4"),
    calibrate_locs: str = typer.Option("10,100,1000,10000", "--calibrate-localizations", help="calibrate: localisations to try"),
) -> None:
    """Local learning coefficient per checkpoint (devinterp SGLD), or a calibration grid with --calibrate-lrs."""
    from dataclasses import replace

    from assign_add.studies import llc
    from assign_add.charts import render
    from assign_add.io import atomic_write_json
    from assign_add.run import check_folder_out, open_run

    run = open_run(run_dir)
    step_list = _parse_ints(steps, "--steps") if steps else run.checkpoint_steps()
    missing = [s for s in step_list if s not in run.checkpoint_steps()]
    if missing:
        raise RunError(f"{run_dir} has no checkpoint at step(s) {', '.join(map(str, missing))}")
    given = {k: v for k, v in (("lr", lr), ("localization", localization), ("num_chains", chains),
                               ("num_draws", draws)) if v is not None}
    if any(v <= 0 for v in given.values()):
        raise ConfigError("--lr/--localization/--chains/--draws", "must be positive")
    settings = replace(llc.DEFAULTS, **given)
    tick = lambda i, n: err_console.print(f"{i}/{n} estimates", highlight=False)  # noqa: E731
    check_folder_out(out, "llc", llc.OUT_ENTRIES)
    out.mkdir(parents=True, exist_ok=True)
    if calibrate_lrs:
        res = llc.calibrate(run, step_list, _floats(calibrate_lrs, "--calibrate-lrs"),
                            _floats(calibrate_locs, "--calibrate-localizations"), settings, tick)
        atomic_write_json(out / "calibration.json", res)
        render(llc.trace_chart(res), out, "traces")
        for c in res["cells"]:
            vals = ", ".join(f"{r['step']}: {r['llc']:.1f} (cv {r['chain_cv']:.2f}, drift {r['drift']:.2f})"
                             for r in c["steps"])
            console.print(f"lr {c['lr']:g} γ {c['localization']:g} {'pass' if c['passes'] else 'fail'} | {vals}",
                          highlight=False)
        console.print(f"chosen: {res['chosen']}; wrote {out / 'calibration.json'}, traces.png", highlight=False)
        return
    res = llc.llc_over_steps(run, step_list, settings, tick)
    atomic_write_json(out / "llc.json", res)
    render(llc.llc_chart(res), out, "llc")
    for r in res["rows"]:
        console.print(f"step {r['step']:>6}: LLC {r['llc']:.2f} ± {r['llc_std']:.2f} (drift {r['drift']:.2f})",
                      highlight=False)
    for line in llc.landmark_lines(res["landmarks"]):
        console.print(line, highlight=False)
    console.print(f"wrote {out / 'llc.json'}, llc.png", highlight=False)
