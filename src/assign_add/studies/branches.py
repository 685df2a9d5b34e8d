"""Branch-and-replay: when is a seed's fate (binding or not) fixed, and by the weights or the data?

From each parent run, at each branch step ``S``, ``orders`` branches continue with fresh data seeds
(:func:`~assign_add.train.branch.make_branch`: the parent's exact weights and AdamW state at ``S``).
Each branch trains to ``steps`` (stopping once bound when ``until_bound``: the question is only
whether and when it binds) and the table gives, per branch point, P(bound by ``steps``) with a 95 %
Wilson interval.  If P stays near the parent's own outcome from step 0 on, the initial weights
decide; if it is spread at step 0 and converges later, the data order decides until then.

Layout: ``OUT/<parent name>/step_NNNNNN/data<seed>/`` (ordinary run directories, resumable; steps
named by :func:`assign_add.run.step_name`) and ``OUT/branches.json`` (one row per branch, rewritten
atomically as branches finish).  Running the same command again resumes unfinished branches; a larger
``steps`` extends finished ones.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from pathlib import Path

from assign_add.stats import wilson_interval
from assign_add.io import atomic_write_json, atomic_write_text
from assign_add.run import RunDir, RunError, check_folder_out, open_run, step_name
from assign_add.studies.binding import BINDING_EVAL_SETS, CHUNK, train_until_bound

DATA_SEED_BASE = 10_000  # branch data seeds are BASE + k, apart from the seeds runs use by default


@dataclass(frozen=True)
class BranchJob:
    parent: str
    step: int
    data_seed: int
    out: str
    steps: int
    until_bound: bool
    saved: str = ""  # the parent's state at ``step`` (from save_states), shared by the branches there
    chunk: int = CHUNK
    arm: str = "data"  # "data" (a fresh data order), "rounding" (its own, weights perturbed), "PART<-DONOR"
    edit: tuple = ()  # the Edit's fields (kind, scale, seed, donor, part), () for none
    donor_saved: str = ""  # the donor's state at ``step`` for a transplant


@dataclass
class BranchRow:
    parent: str
    step: int
    data_seed: int
    bound_at: int | None  # the first evaluated step with 1-var held-out accuracy ≥ the binding level
    reached: int  # the last evaluated step
    out: str
    arm: str = "data"

    def bound_by(self, horizon: int) -> bool | None:
        """True / False, or None while it was neither bound nor watched up to ``horizon``."""
        if self.bound_at is not None and self.bound_at <= horizon:
            return True
        return False if self.reached >= horizon else None


def branch_dir(out: Path, parent: Path, step: int, data_seed: int) -> Path:
    return Path(out) / Path(parent).name / step_name(step) / f"data{data_seed}"


def plan(parents: list[Path], at: list[int], orders: int, out: Path, steps: int, until_bound: bool,
         rounding: float = 0.0, donor: Path | None = None, parts: list[str] = ()) -> list[BranchJob]:
    """Every branch, ordered data order first, so an interrupted experiment has as many branches at every point.

    Per parent and branch step: ``orders`` fresh data orders (arm ``data``); with ``rounding`` > 0 as many
    branches on the parent's own data order with the weights perturbed by that relative scale (arm
    ``rounding``: what rounding alone does); with ``donor``, for every parent other than the donor and every
    part, ``orders`` branches with that part taken from the donor (arm ``PART<-DONOR``), on the same data orders
    as the data arm, which is their control."""
    from assign_add.train.branch import PARTS

    names = [Path(p).name for p in parents]
    if len(set(names)) != len(names):
        raise RunError(f"parent runs need distinct folder names (their branches go to --out/NAME): {', '.join(names)}")
    for p in [*parents, *([donor] if donor else [])]:
        open_run(p)
    unknown = [x for x in parts if x not in PARTS]
    if unknown:
        raise RunError(f"--parts: unknown part {', '.join(unknown)}; one of {', '.join(PARTS)}")
    if parts and donor is None:
        raise RunError("--parts needs --donor (the run the parts come from)")
    if rounding < 0:
        raise RunError(f"--rounding must be >= 0, got {rounding}")
    check_folder_out(out, "branches", {"branches.json", "branches.md", *names, *([Path(donor).name] if donor else [])})
    seeds = [DATA_SEED_BASE + k for k in range(orders)]
    jobs = [BranchJob(str(p), s, d, str(branch_dir(out, p, s, d)), steps, until_bound, str(state_path(out, p, s)))
            for d in seeds for p in parents for s in at]
    own = {p: open_run(p).config().train.order_seed for p in parents}
    for k in range(orders if rounding > 0 else 0):
        for p in parents:
            jobs += [BranchJob(str(p), s, own[p], str(Path(out) / Path(p).name / step_name(s) / f"rounding{k}"), steps,
                               until_bound, str(state_path(out, p, s)), arm="rounding",
                               edit=("perturb", rounding, k, "", "")) for s in at]
    recipients = [p for p in parents if donor is None or Path(p).resolve() != Path(donor).resolve()]
    for d in seeds if donor is not None else []:
        for p in recipients:
            for part in parts:
                arm = f"{part}<-{Path(donor).name}"
                jobs += [BranchJob(str(p), s, d, str(Path(out) / Path(p).name / step_name(s) /
                                                     f"{part}-from-{Path(donor).name}" / f"data{d}"),
                                   steps, until_bound, str(state_path(out, p, s)), arm=arm,
                                   edit=("transplant", 0.0, 0, str(donor), part),
                                   donor_saved=str(state_path(out, Path(donor), s))) for s in at]
    return jobs


def state_path(out: Path, parent: Path, step: int) -> Path:
    return Path(out) / Path(parent).name / "states" / f"{step_name(step)}.safetensors"


def states_job(parent: str, steps: list[int], dest: str) -> list[str]:
    from assign_add.train.branch import save_states

    return [str(p) for p in save_states(Path(parent), steps, Path(dest)).values()]


def run_branch(job: BranchJob) -> BranchRow:
    """Create (or reopen) one branch and train it in chunks until bound (with ``until_bound``) or ``steps``."""
    from assign_add.train.branch import make_branch

    from assign_add.train.branch import Edit

    out = Path(job.out)
    if not RunDir(out).exists():
        make_branch(Path(job.parent), job.step, out, [f"train.data_seed={job.data_seed}", f"train.steps={job.steps}",
                                                      f"train.eval_sets={BINDING_EVAL_SETS!r}",
                                                      f"train.checkpoint_every={job.steps}"],
                    saved=Path(job.saved) if job.saved else None, edit=Edit(*job.edit) if job.edit else None,
                    donor_saved=Path(job.donor_saved) if job.donor_saved else None)
    bound_at, reached = train_until_bound(out, job.steps, job.until_bound, job.chunk)
    return BranchRow(job.parent, job.step, job.data_seed, bound_at, reached, job.out, job.arm)


def branch_table(rows: list[BranchRow], horizon: int) -> list[dict]:
    """Per (parent, branch step): branches bound by ``horizon`` of those watched that long, the 95 % Wilson
    interval, the branches still open, and the median binding step of the bound ones."""
    table = []
    for key in sorted({(r.parent, r.step, r.arm) for r in rows}, key=lambda k: (k[0], k[1], k[2] != "data", k[2])):
        group = [r for r in rows if (r.parent, r.step, r.arm) == key]
        known = [r.bound_by(horizon) for r in group if r.bound_by(horizon) is not None]
        k, n = sum(known), len(known)
        lo, hi = wilson_interval(k, n)
        bound = sorted(r.bound_at for r in group if r.bound_at is not None and r.bound_at <= horizon)
        table.append({"parent": Path(key[0]).name, "step": key[1], "arm": key[2], "branches": len(group), "watched": n, "bound": k,
                      "p_bound": k / n if n else None, "ci95": [lo, hi], "open": len(group) - n,
                      "median_bound_at": bound[len(bound) // 2] if bound else None})
    return table


def write_summary(out: Path, rows: list[BranchRow], horizon: int, command: str, planned: int) -> dict:
    """``branches.json`` (the table and every finished branch) and ``branches.md`` (the table), atomically."""
    summary = {"command": command, "horizon": horizon, "planned": planned, "finished": len(rows),
               "table": branch_table(rows, horizon),
               "rows": [asdict(r) for r in rows]}
    atomic_write_json(Path(out) / "branches.json", summary)
    atomic_write_text(Path(out) / "branches.md", table_markdown(summary))
    return summary


def table_markdown(summary: dict) -> str:
    """The branch table as Markdown, with the command that made it."""
    h = summary["horizon"]
    lines = [f"`{summary['command']}`", "",
             f"{summary['finished']} of {summary['planned']} branches finished.", "",
             f"| parent | branch step | arm | bound by {h:,} | P(bound) | 95 % CI (Wilson) | still open | median binding step |",
             "|---|---|---|---|---|---|---|---|"]
    for r in summary["table"]:
        p = "—" if r["p_bound"] is None else f"{r['p_bound']:.2f}"
        med = "—" if r["median_bound_at"] is None else f"{r['median_bound_at']:,}"
        lines.append(f"| {r['parent']} | {r['step']:,} | {r.get('arm', 'data')} | {r['bound']} of {r['watched']} | {p} | "
                     f"{r['ci95'][0]:.2f}–{r['ci95'][1]:.2f} | {r['open']} | {med} |")
    return "\n".join(lines) + "\n"


def run_branches(jobs: list[BranchJob], out: Path, horizon: int, workers: int, command: str, poll=None) -> dict:
    """Run every branch in ``workers`` processes of one thread; the summary is rewritten as they finish."""
    from assign_add.parallel import run_pool

    def update(results: list) -> None:
        rows = [r for r in results if isinstance(r, BranchRow)]
        write_summary(out, rows, horizon, command, len(jobs))
        if poll:
            poll(rows, len(jobs))

    Path(out).mkdir(parents=True, exist_ok=True)
    parents = sorted({j.parent for j in jobs} | {j.edit[3] for j in jobs if j.edit and j.edit[0] == "transplant"})
    steps = sorted({j.step for j in jobs})
    run_pool([(states_job, (p, steps, str(state_path(out, Path(p), 0).parent))) for p in parents],
             workers=workers, threads=1)
    results = run_pool([(run_branch, (j,)) for j in jobs], workers=workers, threads=1, poll=update)
    return write_summary(out, results, horizon, command, len(jobs))
