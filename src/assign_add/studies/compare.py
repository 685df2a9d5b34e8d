"""Did a change alter binding?  Two survival studies (``assign-add survival``) compared as distributions.

One seed is one draw: a change of precision, optimiser kernel or thread count moves a run's binding step the
way another data order does, so a change is judged on the distribution of time to binding over seeds, never
on one seed's step.  Two tests, both needed for "no detectable difference" (``ALPHA`` = 0.05, fixed before
any comparison was read):

- **bound by the horizon**: Fisher's exact test on (bound, not bound) × (study A, study B), over the runs
  whose outcome at the horizon is known;
- **time to binding**: the log-rank test, each run censored at its last step if it did not bind (a run still
  training is censored where it is).

With a dozen seeds per study only large differences are detectable; the Wilson intervals printed beside the
verdict say how large.  Seeds run in both studies are paired descriptively (same fate; binding-step change).
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

from scipy.stats import fisher_exact

from assign_add import config as config_mod
from assign_add import stats
from assign_add.io import read_jsonl
from assign_add.run import RunDir, RunError
from assign_add.stats import kaplan_meier, km_median, wilson_interval
from assign_add.studies.early import EARLY_STEP
from assign_add.studies.survival import SeedRow, bound_by, read_summary, training_of

ALPHA = 0.05


def binding_times(rows: list[SeedRow]) -> tuple[list[float], list[bool]]:
    """Time to binding, or the last step reached (censored), per run."""
    return ([float(r.bound_at if r.bound_at is not None else r.reached) for r in rows],
            [r.bound_at is not None for r in rows])


def logrank_p(a: list[SeedRow], b: list[SeedRow]) -> float | None:
    """Two-sided log-rank p-value of time to binding in ``a`` against ``b`` (None when no run bound in either;
    :func:`assign_add.stats.logrank_p` on :func:`binding_times`)."""
    (ta, ea), (tb, eb) = binding_times(a), binding_times(b)
    return stats.logrank_p(ta, ea, tb, eb)


def _side(rows: list[SeedRow], horizon: int) -> dict:
    known = [b for b in (bound_by(r, horizon) for r in rows) if b is not None]
    times, events = binding_times(rows)
    lo, hi = wilson_interval(sum(known), len(known))
    return {"runs": len(rows), "known": len(known), "bound": sum(known),
            "p_bound": sum(known) / len(known) if known else None, "ci95": [lo, hi],
            "km_median": km_median(kaplan_meier(times, events)) if rows else None}


def _paired(a: list[SeedRow], b: list[SeedRow], horizon: int, roots: tuple[Path, Path] | None = None) -> dict:
    """Seeds run in both studies, described: same fate, binding-step change, identical early measures (every
    measure at the early step equal to the last digit: the same numbers up to there), and, where both runs
    record what trained them, whether the same seed, code and machine gave the same outcome."""
    by_b = {r.seed: r for r in b}
    pairs = [(r, by_b[r.seed]) for r in a if r.seed in by_b]
    known = [(x, y) for x, y in pairs if bound_by(x, horizon) is not None and bound_by(y, horizon) is not None]
    both = [abs(x.bound_at - y.bound_at) for x, y in known if x.bound_at is not None and y.bound_at is not None
            and x.bound_at <= horizon and y.bound_at <= horizon]
    early = [(x, y) for x, y in pairs if x.early and y.early and x.early_step == y.early_step]
    out = {"seeds": len(pairs), "known": len(known),
           "same_fate": sum(bound_by(x, horizon) == bound_by(y, horizon) for x, y in known),
           "bound_in_both": len(both), "median_step_change": sorted(both)[len(both) // 2] if both else None,
           "early_compared": len(early), "early_identical": sum(_same_early(x, y) for x, y in early)}
    if roots is not None:
        same = [(x, y) for x, y in known if _same_conditions(roots[0], x, roots[1], y)]
        out["same_conditions"] = len(same)
        out["same_conditions_differ"] = sorted(x.seed for x, y in same if _outcome(x, horizon) != _outcome(y, horizon))
    return out


def _same_early(x: SeedRow, y: SeedRow) -> bool:
    keys = set(x.early) & set(y.early)
    return bool(keys) and all(x.early[k] == y.early[k] for k in keys)


def _outcome(r: SeedRow, horizon: int) -> int | None:
    """The binding step within the horizon, or None (not bound by it)."""
    return r.bound_at if r.bound_at is not None and r.bound_at <= horizon else None


def run_folder(root: Path, row: SeedRow) -> Path:
    """A study's run of one seed: its recorded folder, else the folder of that name beside the summary
    (a study read from another working directory)."""
    recorded = Path(row.out)
    return recorded if recorded.is_absolute() and recorded.is_dir() else Path(root) / recorded.name


def conditions(root: Path, row: SeedRow) -> tuple | None:
    """What trained a run, as far as it changes the numbers: the commit (a clean tree), CPU, torch, threads and
    device of every training segment, and the run's config apart from its step budget; None where a run
    does not record it (runs trained before provenance was kept) or was trained from an edited tree."""
    run = RunDir(run_folder(root, row))
    if not run.exists() or not run.provenance_path.is_file():
        return None
    segments = read_jsonl(run.provenance_path)
    keys = {(s.get("commit"), s.get("cpu"), s.get("torch"), s.get("threads"), s.get("device")) for s in segments}
    if not keys or any(k[0] is None or str(k[0]).endswith("+dirty") for k in keys):
        return None
    cfg = config_mod.to_dict(run.config())
    cfg["train"].pop("steps", None)
    return tuple(sorted(keys)), json.dumps(cfg, sort_keys=True)


def _same_conditions(root_a: Path, x: SeedRow, root_b: Path, y: SeedRow) -> bool:
    cx, cy = conditions(root_a, x), conditions(root_b, y)
    return cx is not None and cx == cy


def describe_training(t: dict) -> str:
    return f"{'compiled' if t['compile'] else 'eager'} {t['precision']}" + (" (read from its command)" if t.get("inferred") else "")


def censor_at(row: SeedRow, horizon: int) -> SeedRow:
    """``row`` as a study with the shorter ``horizon`` would have seen it: a binding after it is not seen, and the
    run counts as watched up to it at most."""
    if row.bound_at is not None and row.bound_at <= horizon:
        return row
    return dataclasses.replace(row, bound_at=None, reached=min(row.reached, horizon))


def compare(path_a: Path, path_b: Path, allow_different_training: bool = False, horizon: int | None = None) -> dict:
    """Study A against study B: per-study bound fractions, Fisher's and the log-rank p, verdict.  Both studies are
    read at ``horizon`` (default: their common horizon; a shorter one than a study's censors its runs there).
    Studies whose runs trained differently (compiled or eager, float32 or bf16) are refused unless
    ``allow_different_training``: a difference found would not say which of the changes made it."""
    sa, sb = read_summary(path_a), read_summary(path_b)
    if horizon is None and sa["horizon"] != sb["horizon"]:
        raise RunError(f"{path_b}: horizon {sb['horizon']:,}, but {path_a}'s is {sa['horizon']:,} "
                       f"(--horizon {min(sa['horizon'], sb['horizon']):,} reads both there)")
    if horizon is not None and not 0 < horizon <= min(sa["horizon"], sb["horizon"]):
        raise RunError(f"--horizon {horizon:,}: must be positive and at most both studies' horizons "
                       f"({sa['horizon']:,} and {sb['horizon']:,})")
    ta, tb = training_of(sa), training_of(sb)
    differs = (ta["compile"], ta["precision"]) != (tb["compile"], tb["precision"])
    if differs and not allow_different_training:
        raise RunError(f"{path_a} trained {describe_training(ta)}, {path_b} {describe_training(tb)}: pass "
                       "--allow-different-training to compare studies that differ in more than the change under test")
    horizon = sa["horizon"] if horizon is None else horizon
    # every run: one still training is censored at its last step (leaving it out would favour the runs that
    # bound, since those stop first); bound-by-horizon counts only runs whose outcome there is known
    a, b = [censor_at(SeedRow(**r), horizon) for r in sa["rows"]], [censor_at(SeedRow(**r), horizon) for r in sb["rows"]]
    if not a or not b:
        raise RunError(f"{path_a if not a else path_b}: no run to compare")
    side_a, side_b = _side(a, horizon), _side(b, horizon)
    table = [[side_a["bound"], side_a["known"] - side_a["bound"]], [side_b["bound"], side_b["known"] - side_b["bound"]]]
    p_fisher = float(fisher_exact(table).pvalue)
    p_logrank = logrank_p(a, b)
    same = p_fisher >= ALPHA and (p_logrank is None or p_logrank >= ALPHA)
    return {"a": str(path_a), "b": str(path_b), "horizon": horizon, "study_a": side_a, "study_b": side_b,
            "fisher_p": p_fisher, "logrank_p": p_logrank, "alpha": ALPHA,
            "paired": _paired(a, b, horizon, (_study_dir(path_a), _study_dir(path_b))),
            "training": {"a": ta, "b": tb, "differs": differs},
            "verdict": "no detectable difference" if same else "differs"}


def _study_dir(path: Path) -> Path:
    return Path(path) if Path(path).is_dir() else Path(path).parent


def compare_line(c: dict, names: tuple[str, str] = ("A", "B")) -> str:
    """One paragraph: both studies, both tests, the verdict under the rule, and the paired seeds."""
    def side(name: str, s: dict) -> str:
        median = f"{s['km_median']:,.0f}" if s["km_median"] is not None else "not reached"
        return (f"{name}: {s['bound']} of {s['known']} bound by {c['horizon']:,} ({s['ci95'][0]:.2f}–{s['ci95'][1]:.2f}), "
                f"Kaplan–Meier median {median}")

    lr = f"{c['logrank_p']:.3f}" if c["logrank_p"] is not None else "— (no run bound)"
    p = c["paired"]
    paired = (f" Paired: {p['same_fate']} of {p['known']} shared seeds had the same fate; the {p['bound_in_both']} "
              f"bound in both moved by a median {p['median_step_change']:,} steps." if p["bound_in_both"] else
              f" Paired: {p['same_fate']} of {p['known']} shared seeds had the same fate." if p["known"] else "")
    if p.get("early_compared"):
        paired += (f" Early measures (step {EARLY_STEP:,}) identical to the last digit in {p['early_identical']} of "
                   f"{p['early_compared']} shared seeds.")
    if p.get("same_conditions"):
        differ = p["same_conditions_differ"]
        paired += (f" Same seed, commit, CPU, torch and threads in {p['same_conditions']} pairs: " +
                   (f"outcome differs in seed {', '.join(map(str, differ))}: not reproducible on this machine."
                    if differ else "the same outcome in every one."))
    return (f"{side(names[0], c['study_a'])}; {side(names[1], c['study_b'])}. Fisher p = {c['fisher_p']:.3f}, "
            f"log-rank p = {lr}: {c['verdict']} (rule: both p ≥ {c['alpha']}).{paired}" + (
                f" The studies trained differently ({describe_training(c['training']['a'])} vs "
                f"{describe_training(c['training']['b'])}): a difference is not the change under test alone."
                if c.get("training", {}).get("differs") else ""))
