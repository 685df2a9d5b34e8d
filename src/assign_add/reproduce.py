"""``assign-add reproduce``: train (or reuse) the paper preset, analyse, and write the report.

Layout under ``--out`` (default ``runs/reproduce``)::

    runs/seed-42/ …          one ordinary run directory per seed (train.seed = 42, 43, …)
    runs/released/ …         the authors' checkpoints, when --paper-checkpoints is given
    claims.json              every claim's measured value and verdict, per source and seed
    timing.json              phase steps over seeds and what predicts the binding step (≥ 2 seeds)
    report.html, report.md   the report (figures/ beside report.md)

Seeds (training and analysis as separate jobs) and the released checkpoints (import and analysis)
run in parallel worker processes (:func:`worker_count`: one per job, up to twice the CPU cores),
each with cores ÷ workers torch threads (at least one).  Finished runs are reused,
interrupted ones resumed, and an analysis is recomputed only when the key of its inputs
(:func:`assign_add.analysis.suite.inputs_key`) differs from the saved one.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from assign_add import config as config_mod
from assign_add.analysis import timing as timing_mod
from assign_add.analysis.criteria import BINDING_ACC
from assign_add.analysis.dynamics import phase_marks
from assign_add.analysis.suite import analyze, is_current, load_analysis
from assign_add.config import ConfigError, RunConfig, preset
from assign_add.io import atomic_write_json
from assign_add.machine import cpu_cores, has_c_compiler
from assign_add.parallel import run_pool
from assign_add.interop.paper import import_paper, read_paper_checkpoints
from assign_add.report.claims import (
    NOT_MEASURED,
    ClaimResult,
    AGGREGATE_RULE,
    aggregate,
    evaluate_claims,
)
from assign_add.report.studies import study_sections, load_experiments
from assign_add.report.render import Source, write_report
from assign_add.report.summary import DEFAULT_MANY_SEEDS, load_many_seeds
from assign_add.run import RunDir, RunError, check_folder_out, open_run, seed_dir
from assign_add.train.trainer import train

DEFAULT_STEPS = config_mod.PAPER_STEPS
DEFAULT_SEEDS = 3
QUICK = ["train.steps=400", "train.eval_every=50", "train.checkpoint_every=50", "task.eval_pool_size=300"]
QUICK_PAPER_STEPS = [1, 2001, 5001, 5301, 5401, 5601, 14501, 15501, 16001, 16201, 20001, 40000]

Log = Callable[[str], None]
# what a reproduce folder holds (anything else in --out is refused: it is not this command's folder)
OUT_ENTRIES = {"runs", "claims.json", "timing.json", "times.json", "report.html", "report.md", "figures"}


@dataclass
class ReproduceResult:
    html: Path
    markdown: Path
    claims: dict
    seconds: float
    times: dict  # times.json: worker time training and analysing, per job


def can_compile() -> bool:
    """torch.compile on a CPU needs a C compiler."""
    return has_c_compiler()


def run_config(seed: int, steps: int | None, quick: bool, overrides: list[str]) -> RunConfig:
    """The paper preset for one seed.  Full runs compile the training forward where a C compiler is
    present (1.37× per step in the trainer here, README "Speed"; ``train.compile=false`` turns it off;
    the numbers differ from an eager run only by float rounding); ``--quick`` runs stay eager
    (compiling would cost more than it saves)."""
    base = QUICK if quick else [f"train.steps={DEFAULT_STEPS}"] + (["train.compile=true"] if can_compile() else [])
    if steps is not None:
        base = base + [f"train.steps={steps}"]
    cfg = config_mod.apply_overrides(preset("paper"), base + overrides + [f"train.seed={seed}"])
    return config_mod.validate(cfg)


def ensure_trained(cfg: RunConfig, out: Path, log: Log, progress=None) -> RunDir:
    run = RunDir(out)
    if run.exists():
        status = run.status()
        same = run.config() == cfg
        if same and status.get("state") == "complete":
            log(f"reusing finished run {out}")
            return run
        if same:
            log(f"resuming {out} from step {status.get('step', 0)}")
            train(cfg, out, resume=True, progress=progress, phase_marks=phase_marks)
            return run
        raise RunError(f"{out} holds a run with another configuration; use another --out or delete it")
    log(f"training {out} ({cfg.train.steps} steps, seed {cfg.train.seed})")
    train(cfg, out, progress=progress, phase_marks=phase_marks)
    return run


def ensure_analysis(run: RunDir, log: Log, steps: list[int] | None = None) -> dict:
    if is_current(run, steps=steps):
        log(f"reusing analysis of {run.root} (its inputs are unchanged)")
        return load_analysis(run)
    log(f"analysing {run.root}")
    return analyze(run, steps=steps)


def ensure_released(checkpoints: Path, out: Path, log: Log) -> RunDir:
    if RunDir(out).exists():
        log(f"reusing imported checkpoints {out}")
        return open_run(out)
    if not Path(checkpoints).exists():
        raise RunError(f"--paper-checkpoints {checkpoints}: no such directory")
    log(f"importing {checkpoints}")
    return import_paper([Path(checkpoints)], out)


@dataclass
class JobReport:
    """What one job did: its kind ("training" or "analysis"), the run it worked on, its wall time in
    its worker, and its log lines."""

    kind: str
    name: str
    seconds: float
    lines: list[str]


def train_job(config_toml: str, out: str) -> JobReport:
    """Train (or resume / reuse) one seed.  Runs in a worker."""
    lines: list[str] = []
    t0 = time.perf_counter()
    ensure_trained(config_mod.loads(config_toml), Path(out), lines.append)
    return JobReport("training", Path(out).name, time.perf_counter() - t0, lines)


def analyse_job(out: str) -> JobReport:
    """Analyse (or reuse the analysis of) one trained seed.  Runs in a worker."""
    lines: list[str] = []
    t0 = time.perf_counter()
    ensure_analysis(RunDir(Path(out)), lines.append)
    return JobReport("analysis", Path(out).name, time.perf_counter() - t0, lines)


def released_job(checkpoints: str, out: str, quick: bool) -> JobReport:
    """Import (or reuse) the authors' checkpoints and analyse them.  Runs in a worker."""
    lines: list[str] = []
    t0 = time.perf_counter()
    released = ensure_released(Path(checkpoints), Path(out), lines.append)
    sub = [s for s in QUICK_PAPER_STEPS if s in released.checkpoint_steps()] if quick else None
    ensure_analysis(released, lines.append, sub)
    return JobReport("analysis", Path(out).name, time.perf_counter() - t0, lines)


def job_times(reports: list[JobReport], workers: int, wall: float) -> dict:
    """``times.json``: the job's wall time, and the worker time spent training and analysing, per job."""
    return {"wall_s": round(wall, 1), "workers": workers, "cores": cpu_cores(),
            **{f"{kind}_s": round(sum(r.seconds for r in reports if r.kind == kind), 1)
               for kind in ("training", "analysis")},
            "jobs": [{"kind": r.kind, "run": r.name, "seconds": round(r.seconds, 1)} for r in reports]}


def worker_count(jobs: int, cores: int) -> int:
    """Worker processes for ``jobs`` (training a seed, analysing one, the released import) on ``cores``:
    one per job, up to twice the cores, so that all seeds train at once, time-sharing the cores.

    With 3 seeds on 2 cores, no more workers than cores means rounds: one core trains two seeds one after
    the other, so the job takes about two seeds' training instead of one and a half.  On the AMD EPYC (Zen 3),
    2 cores, float32, two workers took 50 min 7 s (2026-12-08), where time-sharing projects to ~45 min from
    the same run's worker times (docs/performance.md)."""
    return max(1, min(jobs, 2 * cores))


def run_jobs(jobs: list, seed_dirs: list[Path], total_steps: int, log: Log, progress=None
             ) -> tuple[list[JobReport], int]:
    """The jobs in parallel processes (in this process when there is one), with combined progress.

    Training and analysing a seed are separate jobs: a seed's analysis is queued when its training
    ends, behind the jobs already waiting, so with 3 seeds and the released checkpoints on 2 cores
    the analyses fill the time a worker would otherwise idle (and no worker trains two seeds and
    then analyses both while the other is done)."""
    if len(jobs) == 1:
        fn, args = jobs[0]
        if fn is not train_job:
            report = fn(*args)
            for line in report.lines:
                log(line)
            return [report], 1
        t0 = time.perf_counter()
        run = ensure_trained(config_mod.loads(args[0]), Path(args[1]), log, progress)
        t1 = time.perf_counter()
        ensure_analysis(run, log)
        return [JobReport("training", run.root.name, t1 - t0, []),
                JobReport("analysis", run.root.name, time.perf_counter() - t1, [])], 1
    workers = worker_count(len(jobs), cpu_cores())
    log(f"{len(jobs)} jobs in {workers} worker processes ({max(1, cpu_cores() // workers)} torch threads each)")

    def poll(results: list) -> None:
        if progress:
            done = sum(int(RunDir(d).status().get("step", 0)) if RunDir(d).exists() else 0 for d in seed_dirs)
            progress(min(done, total_steps), total_steps, None)

    def then(i: int, result: list[str]):
        fn, args = jobs[i] if i < len(jobs) else (None, ())
        return (analyse_job, (args[1],)) if fn is train_job else None

    reports = run_pool(jobs, workers, threads=max(1, cpu_cores() // workers), poll=poll, then=then)
    for report in reports:
        for line in report.lines:
            log(line)
    return reports, workers


def reproduce(
    out: Path,
    seeds: int = DEFAULT_SEEDS,
    steps: int | None = None,
    paper_checkpoints: Path | None = None,
    quick: bool = False,
    overrides: list[str] | None = None,
    log: Log = print,
    progress=None,
    sweeps: dict[str, Path] | None = None,
    experiments: dict[str, Path] | None = None,
    first_seed: int = 42,
    many_seeds: Path | None = DEFAULT_MANY_SEEDS,
) -> ReproduceResult:
    """``sweeps`` maps "f" / "r" to sweep folders (with sweep.json) that supply claims C6 / C7;
    ``experiments`` maps "survival" / "branches" / "llc" / "rescue" to those commands' folders, each a section of
    the report beyond the paper."""
    if seeds < 1:
        raise ConfigError("--seeds", f"must be >= 1, got {seeds}")
    if first_seed < 0:
        raise ConfigError("--first-seed", f"must be >= 0, got {first_seed}")
    if steps is not None and steps < 1:
        raise ConfigError("--steps", f"must be >= 1, got {steps}")
    t0 = time.perf_counter()
    out = Path(out)
    check_folder_out(out, "reproduce", OUT_ENTRIES)
    configs = [run_config(first_seed + i, steps, quick, overrides or []) for i in range(seeds)]  # validate all first
    sweep_data = load_sweeps(sweeps or {})
    many = load_many_seeds(many_seeds, required=many_seeds != DEFAULT_MANY_SEEDS)
    extra = load_experiments(experiments or {})
    if paper_checkpoints is not None and not RunDir(out / "runs" / "released").exists():
        read_paper_checkpoints([Path(paper_checkpoints)])  # every file checked before any seed trains
    seed_dirs = [seed_dir(out / "runs", c.train.seed) for c in configs]
    for cfg, d in zip(configs, seed_dirs):
        check_reusable(cfg, d)
    jobs: list = [(train_job, (config_mod.dumps(c), str(d))) for c, d in zip(configs, seed_dirs)]
    if paper_checkpoints is not None:
        jobs.append((released_job, (str(paper_checkpoints), str(out / "runs" / "released"), quick)))
    reports, workers = run_jobs(jobs, seed_dirs, sum(c.train.steps for c in configs), log, progress)
    times = job_times(reports, workers, time.perf_counter() - t0)

    sources: list[Source] = []
    claims_json: dict = {}
    reference = None
    if paper_checkpoints is not None:
        released = open_run(out / "runs" / "released")
        reference = load_analysis(released)
        res = evaluate_claims(reference)
        for cid in ("C6", "C7"):
            res[cid] = ClaimResult(cid, None, "", NOT_MEASURED, "the released checkpoints are one run at f = 0.7, r = 1")
        sources.append(Source("released checkpoints", [released.root], [res], None,
                              [config_mod.dumps(released.config())]))
        claims_json["released checkpoints"] = {k: v.to_json() for k, v in res.items()}
    analyses = [load_analysis(RunDir(d)) for d in seed_dirs]
    results = [evaluate_claims(dict(a, sweeps=sweep_data)) for a in analyses]
    agg = {cid: aggregate([r[cid] for r in results]) for cid in results[0]}
    name = f"retrained ({seeds} seed{'s' if seeds > 1 else ''})"
    sweep_figs = {cid: [Path(sweeps[key]) / "figure"] for cid, key in (("C6", "f"), ("C7", "r")) if key in (sweeps or {})}
    sources.append(Source(name, seed_dirs, results, agg, [config_mod.dumps(c) for c in configs], sweep_figs,
                          steps=configs[0].train.steps))
    claims_json[name] = {
        "per_seed": {str(c.train.seed): {k: v.to_json() for k, v in r.items()} for c, r in zip(configs, results)},
        "aggregate": {k: v.__dict__ for k, v in agg.items()},
        "rule": AGGREGATE_RULE,
    }
    timing = timing_mod.timing(analyses, reference) if seeds > 1 else None
    if timing is not None:
        timing["seeds"] = [c.train.seed for c in configs]
        atomic_write_json(out / "timing.json", timing)
    notes = phase_notes(sources)
    atomic_write_json(out / "claims.json", claims_json)
    html_path, md_path = write_report(sources, out, notes, timing, study_sections(extra), many)
    atomic_write_json(out / "times.json", times)
    return ReproduceResult(html_path, md_path, claims_json, time.perf_counter() - t0, times)


def check_reusable(cfg: RunConfig, out: Path) -> None:
    """Refuse before any work starts when a seed's folder holds a run of another configuration."""
    run = RunDir(out)
    if run.exists() and run.config() != cfg:
        raise RunError(f"{out} holds a run with another configuration; use another --out or delete it")


def load_sweeps(sweeps: dict[str, Path]) -> dict[str, dict]:
    import json

    out = {}
    for key, folder in sweeps.items():
        path = Path(folder) / "sweep.json"
        if not path.is_file():
            raise RunError(f"{folder}: no sweep.json (run assign-add sweep --preset {key} --out {folder} first)")
        out[key] = json.loads(path.read_text())
        if isinstance(out[key], dict) and out[key].get("adaptive"):
            raise RunError(f"{folder}: an adaptive sweep; C6/C7 read full-grid sweeps until `assign-add "
                           "sweep-replay` has shown the design gives the grid's threshold on this task")
    return out


def phase_notes(sources: list[Source]) -> list[str]:
    """Say plainly where our phase steps differ from the paper's (binding ≈ 5,400; refinement ≈ 14,500–16,000)."""
    notes = []
    for src in sources:
        for run in src.runs:
            a = load_analysis(RunDir(run))
            p = a.get("dynamics", {}).get("phases")
            if not p:
                continue
            if p.get("binding_reached") is None:
                notes.append(f"{src.name} / {Path(run).name}: not bound by step {p.get('last_step') or '?'} "
                             "(1-var held-out never reached the binding level; paper: bound at ≈ 5,400 of 40,000), "
                             "so no binding or refinement step; the claims about the binding circuit are not judged "
                             "for this run.")
                continue
            refinement = "none by the last step" if p["refinement"] is None else f"{p['refinement']:,}"
            notes.append(
                f"{src.name} / {Path(run).name}: bound at step {p['binding_reached']:,} (1-var held-out ≥ "
                f"{BINDING_ACC:.0%}; the spike's interval ends at {p['binding']:,}; paper ≈ 5,400), refinement at "
                f"{refinement} (paper ≈ 14,500–16,000); the steps depend on the data order and precision, "
                "the order of the phases is what the paper claims."
            )
    return notes
