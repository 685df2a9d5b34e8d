"""Time to binding over many seeds: a survival curve, P(bound by a horizon), and an early predictor.

One ordinary run per seed (``OUT/seed-N/``, the paper preset with ``train.seed=N``), evaluated every
``train.eval_every`` steps on the two sets binding and addition are read from, checkpointed every
500 steps (the early measures need 0, 500, 1,000, 1,500), and stopped once bound (``until_bound``,
the default: the question is whether and when) or at the horizon.  A run not bound by the horizon
is *censored* there, not dropped.  ``OUT/survival.json`` / ``survival.md`` are rewritten atomically
as runs finish, with the runs still training counted as censored at their last evaluation (so a
partial summary is not biased towards the seeds that bound first); running the same command again
resumes the unfinished runs.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

from assign_add.studies.early import (
    EARLY_STEP,
    LLC_FEATURES,
    confirm_predictor,
    early_llc,
    early_measures,
    predictor_test,
)
from assign_add.analysis.timing import binding_survival
from assign_add.stats import wilson_interval
from assign_add.io import atomic_write_json, atomic_write_text, read_json_object
from assign_add.run import RunDir, RunError, check_folder_out, seed_dir
from assign_add.studies.binding import BINDING_EVAL_SETS, CHUNK, train_until_bound
from assign_add.train.branch import PARTS
from assign_add.config import PAPER_STEPS

CHECKPOINT_EVERY = 500
MARKS = (PAPER_STEPS // 2, PAPER_STEPS)  # the horizons P(bound by) is read at


@dataclass(frozen=True)
class SeedJob:
    seed: int
    out: str
    steps: int
    until_bound: bool
    overrides: tuple[str, ...] = ()
    chunk: int = CHUNK
    early_step: int = EARLY_STEP
    llc: bool = False  # also estimate the LLC at ``early_step`` (a second, separate predictor)


@dataclass
class SeedRow:
    seed: int
    bound_at: int | None
    reached: int
    early: dict[str, float]  # the early measures at ``early_step`` ({} while the run is still training)
    out: str
    early_step: int = EARLY_STEP
    finished: bool = True  # False: still training, counted as censored at ``reached`` (or bound, if it has)
    llc: float | None = None  # the LLC at ``early_step`` (with ``--llc``)


# what a survival folder holds besides its OUT/seed-N runs
OUT_ENTRIES = {"survival.json", "survival.md", "survival.png", "survival.html"}


def plan(seeds: list[int], out: Path, steps: int, until_bound: bool, overrides: list[str],
         early_step: int = EARLY_STEP, llc: bool = False) -> list[SeedJob]:
    if not seeds:
        raise RunError("--seeds lists no seed")
    if len(set(seeds)) != len(seeds):
        raise RunError("--seeds lists a seed twice")
    check_folder_out(out, "survival", OUT_ENTRIES, r"seed-\d+")
    if steps < early_step:
        raise RunError(f"--steps must be at least {early_step} (the early measures are read there), got {steps}")
    if llc:
        try:
            import devinterp  # noqa: F401
        except ImportError:
            raise RunError("--llc needs devinterp: pip install 'assign-add[llc]'") from None
    jobs = [SeedJob(s, str(seed_dir(out, s)), steps, until_bound, tuple(overrides), early_step=early_step,
                    llc=llc) for s in seeds]
    seed_config(jobs[0])  # a bad override fails here, before any run starts
    return jobs


def seed_config(job: SeedJob):
    """The paper preset for one seed: compiled where a C compiler is present (one compiled step per worker
    process, reused seed after seed), at the precision ``auto`` picks; the study's overrides come last."""
    from assign_add.config import resolve
    from assign_add.machine import has_c_compiler

    compiled = ["train.compile=true"] if has_c_compiler() else []
    return resolve("paper", overrides=[*compiled, f"train.seed={job.seed}", f"train.steps={job.steps}",
                                       f"train.eval_sets={BINDING_EVAL_SETS!r}",
                                       f"train.checkpoint_every={CHECKPOINT_EVERY}", *job.overrides])


def run_seed(job: SeedJob) -> SeedRow:
    """Create (or resume) one seed's run, train it until bound or the horizon, and read its early measures."""
    from assign_add.train.trainer import train

    out = Path(job.out)
    if not RunDir(out).exists():
        train(seed_config(job), out, stop_after=min(job.chunk, job.steps))
    bound_at, reached = train_until_bound(out, job.steps, job.until_bound, job.chunk)
    if reached < job.early_step:  # bound before the early step: train on to it so the measures exist
        bound_at, reached = train_until_bound(out, job.early_step, False, job.chunk)
    return SeedRow(job.seed, bound_at, reached, early_measures(RunDir(out), job.early_step), job.out,
                   job.early_step, llc=cached_early_llc(RunDir(out), job.early_step) if job.llc else None)


def cached_early_llc(run: RunDir, step: int) -> float:
    """:func:`early_llc`, kept in ``RUN/llc-STEP.json`` so a resumed survival command does not sample it again."""
    path = run.root / f"llc-{step}.json"
    if path.exists():
        return float(json.loads(path.read_text())["llc"])
    value = early_llc(run, step)
    atomic_write_json(path, {"step": step, "llc": value})
    return value


def bound_by(row: SeedRow, horizon: int) -> bool | None:
    if row.bound_at is not None and row.bound_at <= horizon:
        return True
    return False if row.reached >= horizon else None


def training_settings(job: SeedJob) -> dict:
    """How a study's runs train: ``{"compile": bool, "precision": "fp32" | "bf16"}`` (``auto`` settled here)."""
    from assign_add.config import settle_precision

    t = settle_precision(seed_config(job)).train
    return {"compile": t.compile, "precision": t.precision}


def training_of(summary: dict) -> dict:
    """A summary's training settings; for a summary written before they were recorded, read from its command
    (an override ``train.compile=true`` / ``train.precision=…``; without them such studies trained eager in
    float32), with ``"inferred": True``."""
    if "training" in summary:
        return summary["training"]
    command = summary.get("command", "")
    compiled = "train.compile=true" in command
    precision = next((p for p in ("bf16", "fp32") if f"train.precision={p}" in command), None)
    return {"compile": compiled, "precision": precision or ("unknown" if compiled else "fp32"), "inferred": True}


def summarize(rows: list[SeedRow], horizon: int, command: str, planned: int, training: dict | None = None) -> dict:
    """The Kaplan–Meier curve (censored at each run's last step), P(bound by each mark ≤ the horizon) with
    Wilson intervals over the runs watched that long, and the early predictor of "bound by the horizon"."""
    per_seed = [{"binding": r.bound_at, "last_step": r.reached} for r in rows]
    marks = {}
    for m in sorted({*[x for x in MARKS if x <= horizon], horizon}):
        known = [b for b in (bound_by(r, m) for r in rows) if b is not None]
        lo, hi = wilson_interval(sum(known), len(known))
        marks[str(m)] = {"bound": sum(known), "watched": len(known), "p": sum(known) / len(known) if known else None,
                         "ci95": [lo, hi]}
    resolved = [(r, bound_by(r, horizon)) for r in rows]
    resolved = [(r, b) for r, b in resolved if b is not None and r.finished]
    early_step = rows[0].early_step if rows else EARLY_STEP
    early_bound = sum(1 for r in rows if r.bound_at is not None and r.bound_at <= early_step)
    return {"command": command, **({"training": training} if training else {}), "horizon": horizon,
            "planned": planned, "finished": sum(r.finished for r in rows),
            "survival": binding_survival(per_seed) if rows else None, "bound_by": marks,
            "bound_by_early_step": early_bound,
            "predictor": predictor_test([r.early for r, _ in resolved], [b for _, b in resolved], early_step),
            "llc_predictor": llc_predictor(resolved, early_step),
            "rows": [asdict(r) for r in sorted(rows, key=lambda r: r.seed)]}


def llc_predictor(resolved: list[tuple[SeedRow, bool]], early_step: int) -> dict | None:
    """The second test: "bound by the horizon" from the LLC at the early step alone (None without ``--llc``)."""
    with_llc = [(r, b) for r, b in resolved if r.llc is not None]
    if not with_llc:
        return None
    return predictor_test([{"llc": r.llc} for r, _ in with_llc], [b for _, b in with_llc], early_step,
                          features=LLC_FEATURES)


def predictor_line(p: dict, what: str, horizon: int, bound_early: int) -> str:
    line = (f"{what} of \"bound by {horizon:,}\" (measures at step {p['early_step']:,}, {p['n']} runs, "
            f"{p['bound']} bound; {bound_early} bound by then): ")
    if p["loo_accuracy"] is None:
        return line + f"not fitted yet ({p.get('why_not', 'not computed')})"
    verdict = "beats" if p["beats_null"] else "does not beat"
    line += (f"leave-one-out accuracy {p['loo_accuracy']:.2f} vs base rate {p['base_rate']:.2f} "
             f"(permutation p = {p['p_value']:.3f}, {p['permutations']} shuffles): it {verdict} the null.")
    if len(p["features"]) == 1 and p["auc"].get(p["features"][0]) is not None:
        line += f" AUC {p['auc'][p['features'][0]]:.2f} (0.5: no signal)."
    return line


def markdown(summary: dict) -> str:
    h = summary["horizon"]
    lines = [f"`{summary['command']}`", "", f"{summary['finished']} of {summary['planned']} seeds finished.", "",
             "| horizon | bound | P(bound) | 95 % CI (Wilson) |", "|---|---|---|---|"]
    for m, r in summary["bound_by"].items():
        p = "—" if r["p"] is None else f"{r['p']:.2f}"
        lines.append(f"| {int(m):,} | {r['bound']} of {r['watched']} | {p} | {r['ci95'][0]:.2f}–{r['ci95'][1]:.2f} |")
    s = summary["survival"]
    if s:
        med = "beyond the last step" if s["median"] is None else f"{s['median']:,.0f}"
        lines += ["", f"Kaplan–Meier median binding step: {med} (censored at: "
                      f"{', '.join(f'{c:,}' for c in s['censored_at']) or 'none'})."]
    early = summary["bound_by_early_step"]
    lines += ["", predictor_line(summary["predictor"], f"Early predictor ({len(summary['predictor']['features'])} "
                                 "measures)", h, early)]
    with_llc = summary.get("llc_predictor") is not None
    if with_llc:
        lines += ["", predictor_line(summary["llc_predictor"], "The LLC alone as a predictor", h, early)]
    lines += ["", "| seed | bound at | last step |" + (" LLC at the early step |" if with_llc else ""),
              "|---|---|---|" + ("---|" if with_llc else "")]
    for r in summary["rows"]:
        at = "—" if r["bound_at"] is None else f"{r['bound_at']:,}"
        llc = "" if not with_llc else (" — |" if r.get("llc") is None else f" {r['llc']:.2f} |")
        lines.append(f"| {r['seed']} | {at} | {r['reached']:,}{'' if r['finished'] else ' (training)'} |{llc}")
    return "\n".join(lines) + "\n"


def in_progress(job: SeedJob) -> SeedRow | None:
    """A run still training, as far as its metrics go (None before its first evaluation)."""
    from assign_add.studies.binding import binding_of

    run = RunDir(Path(job.out))
    if not run.exists() or not run.metrics():
        return None
    bound_at, reached = binding_of(run)
    return SeedRow(job.seed, bound_at, reached, {}, job.out, job.early_step, finished=False)


def survival_chart(summary: dict):
    """The Kaplan–Meier estimate of the fraction of seeds bound by each step (1 − S(t), a step function
    drawn to the horizon), with the 20k / 40k marks."""
    from assign_add.charts import Line

    km = summary["survival"]
    xs, ys = [0.0], [0.0]
    for t, surv in km["curve"]:
        xs += [t, t]
        ys += [ys[-1], 1.0 - surv]
    xs.append(float(summary["horizon"]))
    ys.append(ys[-1])
    marks = {f"{m // 1000}k": float(m) for m in MARKS if m <= summary["horizon"]}
    return Line(f"Time to binding over {km['n']} seeds (Kaplan–Meier; unbound seeds censored at their last step)",
                xs, {"fraction bound": ys}, ylabel="fraction of seeds bound", markers=marks, ylim=(0, 1.02))


def write_summary(out: Path, rows: list[SeedRow], horizon: int, command: str, planned: int,
                  figure: bool = True, training: dict | None = None) -> dict:
    """survival.json and survival.md (and, with ``figure``, survival.png: the Kaplan–Meier curve)."""
    summary = summarize(rows, horizon, command, planned, training)
    atomic_write_json(Path(out) / "survival.json", summary)
    atomic_write_text(Path(out) / "survival.md", markdown(summary))
    if figure and summary.get("survival"):
        from assign_add.charts import render

        render(survival_chart(summary), Path(out), "survival")
    return summary


def run_survival(jobs: list[SeedJob], out: Path, horizon: int, workers: int, command: str, poll=None) -> dict:
    """Every seed in ``workers`` processes of one thread; the summary is rewritten as seeds finish."""
    from assign_add.parallel import run_pool

    drawn = [-1]
    training = training_settings(jobs[0])

    def update(results: list) -> None:
        done = [r for r in results if isinstance(r, SeedRow)]
        seen = {r.seed for r in done}
        running = [r for r in (in_progress(j) for j in jobs if j.seed not in seen) if r is not None]
        write_summary(out, done + running, horizon, command, len(jobs), figure=len(done) != drawn[0],
                      training=training)
        drawn[0] = len(done)
        if poll:
            poll(done, len(jobs))

    Path(out).mkdir(parents=True, exist_ok=True)
    results = run_pool([(run_seed, (j,)) for j in jobs], workers=workers, threads=1, poll=update)
    return write_summary(out, results, horizon, command, len(jobs), training=training)


def resolved_rows(summary: dict) -> list[tuple[SeedRow, bool]]:
    """The finished runs of a saved summary whose outcome at its horizon is known, with that outcome."""
    rows = [SeedRow(**r) for r in summary["rows"]]
    known = [(r, bound_by(r, summary["horizon"])) for r in rows if r.finished]
    return [(r, b) for r, b in known if b is not None]


def read_summary(path: Path) -> dict:
    """A ``survival.json`` written by the survival command (or the study folder holding it); a one-line
    error for anything else."""
    path = Path(path)
    if path.is_dir() and (path / "survival.json").is_file():
        path = path / "survival.json"
    summary = read_json_object(path, "a survival.json written by assign-add survival")
    if not {"horizon", "planned", "rows"} <= set(summary):
        raise RunError(f"{path}: not a survival summary (no horizon, planned and rows)")
    return summary


def confirm(fit: Path, tests: list[Path]) -> dict:
    """The early predictor fitted on the first study's ``survival.json`` and scored on fresh seeds' summaries
    (:func:`assign_add.studies.early.confirm_predictor`).  The studies must share the horizon and the early
    step, and no seed may be in both."""
    first, fresh = read_summary(fit), [read_summary(t) for t in tests]
    for t, summary in zip(tests, fresh):
        if summary["horizon"] != first["horizon"]:
            raise RunError(f"{t}: horizon {summary['horizon']:,}, but the first study's is {first['horizon']:,}")
    fit_rows = resolved_rows(first)
    test_rows = [rb for summary in fresh for rb in resolved_rows(summary)]
    steps = {r.early_step for r, _ in fit_rows + test_rows}
    if len(steps) > 1:
        raise RunError(f"the studies measured at different early steps ({', '.join(map(str, sorted(steps)))})")
    shared = sorted({r.seed for r, _ in fit_rows} & {r.seed for r, _ in test_rows})
    if shared:
        raise RunError(f"seed(s) {', '.join(map(str, shared))} in both studies: fresh seeds must be new")
    out = confirm_predictor([r.early for r, _ in fit_rows], [b for _, b in fit_rows],
                            [r.early for r, _ in test_rows], [b for _, b in test_rows])
    out.update(fit=str(fit), tests=[str(t) for t in tests], horizon=first["horizon"],
               fresh_seeds=sorted(r.seed for r, _ in test_rows),
               fresh_planned=fresh[0]["planned"] if len(fresh) == 1 else None)  # a resumed seed is in two plans
    return out


def confirm_line(c: dict) -> str:
    """One sentence: what was fitted, what it was scored on, and the pre-registered verdict."""
    plan = (f"{c['fresh_planned']} planned" if c.get("fresh_planned") is not None
            else f"finished rows of {len(c.get('tests', []))} studies")
    head = (f"The early predictor fitted on {c['fit_n']} runs ({c['fit_bound']} bound) and scored on "
            f"{c['test_n']} fresh seeds ({c['test_bound']} bound by {c['horizon']:,}; {plan}): ")
    if c["accuracy"] is None:
        return head + f"not scored ({c['why_not']})."
    line = head + f"accuracy {c['accuracy']:.2f} vs base rate {c['base_rate']:.2f} (always '{c['base_rate_guess']}')"
    if c["auc"] is None:
        return line + f"; {c['why_not']}. Not confirmed."
    verdict = "confirmed" if c["confirmed"] else "not confirmed"
    return line + (f", AUC {c['auc']:.2f} (permutation p = {c['auc_p_value']:.4f}, {c['permutations']} shuffles): "
                   f"{verdict} (needs accuracy above the base rate and p < {c['alpha']}).")


def norm_lead(studies: list[Path]) -> dict:
    """The pre-registered norm-lead test (:func:`assign_add.studies.early.norm_lead_test`) over the finished
    runs of one or more fresh studies that share a horizon; each seed counted once."""
    from assign_add.studies.early import NORM_LEAD_FEATURE, norm_lead_test

    summaries = [read_summary(p) for p in studies]
    horizons = {s["horizon"] for s in summaries}
    if len(horizons) != 1:
        raise RunError(f"the studies have different horizons ({', '.join(f'{h:,}' for h in sorted(horizons))})")
    seen: dict[int, tuple[float, bool]] = {}
    for path, summary in zip(studies, summaries):
        for r, b in resolved_rows(summary):
            if r.seed in seen:
                raise RunError(f"{path}: seed {r.seed} is in two of the studies")
            if NORM_LEAD_FEATURE in r.early:
                seen[r.seed] = (float(r.early[NORM_LEAD_FEATURE]), b)
    res = norm_lead_test([v for v, _ in seen.values()], [b for _, b in seen.values()])
    return {**res, "horizon": horizons.pop(), "studies": [str(p) for p in studies], "seeds": sorted(seen)}


def norm_lead_line(res: dict) -> str:
    if res["p_value"] is None:
        return f"norm lead: {res['verdict']} ({res.get('why_not', '')}; n = {res['n']})"
    return (f"norm lead at step 1,500 over {res['n']} fresh seeds ({res['bound']} bound by {res['horizon']:,}): AUC "
            f"{res['auc']:.2f}, one-sided Mann–Whitney p = {res['p_value']:.4f} ({res['method']}, n = {res['n']}): "
            f"{res['verdict']}. Rule: {res['rule']}.")


# the parameter groups the norm is split into: the parts a branch can transplant (by parameter-name prefix)
NORM_GROUPS = {name: prefixes for name, prefixes in PARTS.items() if prefixes}
PARTING_AUC = 0.70  # descriptive: a group "has parted" from the first step its AUC stays at or above this


def group_norms(tensors: dict) -> dict[str, float]:
    """Each group's norm (the square root of its float64 sum of squares) and the total, from a checkpoint."""
    sq = {g: 0.0 for g in NORM_GROUPS}
    for name, t in tensors.items():
        for g, prefixes in NORM_GROUPS.items():
            if name.startswith(prefixes):
                sq[g] += float((t.double() ** 2).sum())
    return {**{g: v ** 0.5 for g, v in sq.items()}, "total": sum(sq.values()) ** 0.5}


def norm_split(study: Path, until: int = 2000) -> dict:
    """Description, not a test: per checkpoint step up to ``until`` shared by every finished run of a survival
    study, each parameter group's norm in the runs bound by the horizon against the others: medians and the AUC
    ("bound" higher), and the first step from which each group's AUC stays >= :data:`PARTING_AUC`."""
    from assign_add.run import read_checkpoint
    from assign_add.stats import auc

    study = Path(study)
    summary = read_summary(study)
    root = study if study.is_dir() else study.parent
    resolved = resolved_rows(summary)
    if not resolved:
        raise RunError(f"{study}: no finished run with a known outcome")
    runs = [RunDir(Path(r.out) if Path(r.out).is_dir() else root / Path(r.out).name) for r, _ in resolved]
    bound = np.asarray([b for _, b in resolved], dtype=bool)
    missing = [str(run.root) for run in runs if not run.checkpoint_steps()]
    if missing:
        raise RunError(f"{missing[0]}: no checkpoints (the study's runs are needed to split the norm)")
    steps = sorted(set.intersection(*(set(s for s in run.checkpoint_steps() if s <= until) for run in runs)))
    if not steps:
        raise RunError(f"{study}: its runs share no checkpoint up to step {until:,}")
    norms = {s: [group_norms(read_checkpoint(run.checkpoint_path(s))) for run in runs] for s in steps}
    groups = [*NORM_GROUPS, "total"]
    table = []
    for s in steps:
        row = {"step": s}
        for g in groups:
            x = np.asarray([n[g] for n in norms[s]])
            a = auc(x, bound)
            row[g] = {"auc": a, "median_bound": float(np.median(x[bound])) if bound.any() else None,
                      "median_not": float(np.median(x[~bound])) if (~bound).any() else None}
        table.append(row)
    parting = {}
    for g in groups:
        aucs = [r[g]["auc"] for r in table]
        below = [i for i, a in enumerate(aucs) if a is None or a < PARTING_AUC]
        first = (below[-1] + 1) if below else 0
        parting[g] = table[first]["step"] if first < len(table) else None
    return {"study": str(study), "horizon": summary["horizon"], "runs": len(runs), "bound": int(bound.sum()),
            "steps": steps, "parting_auc": PARTING_AUC, "parting_step": parting, "table": table}


def norm_split_markdown(res: dict, at: tuple[int, ...] = (0, 50, 100, 250, 500, 1000, 1500, 2000)) -> str:
    groups = [*NORM_GROUPS, "total"]
    lines = [f"Norm by parameter group, {res['bound']} runs bound by {res['horizon']:,} against "
             f"{res['runs'] - res['bound']} not: AUC (bound higher) at each step (description, not a test).", "",
             "| step | " + " | ".join(groups) + " |", "|---|" + "---|" * len(groups)]
    for r in res["table"]:
        if r["step"] in at:
            lines.append(f"| {r['step']:,} | " + " | ".join(
                "—" if r[g]["auc"] is None else f"{r[g]['auc']:.2f}" for g in groups) + " |")
    lines += ["", f"First step from which the AUC stays ≥ {res['parting_auc']} (through {res['steps'][-1]:,}): " +
              ", ".join(f"{g} {'never' if s is None else f'{s:,}'}" for g, s in res["parting_step"].items()) + "."]
    return "\n".join(lines) + "\n"
