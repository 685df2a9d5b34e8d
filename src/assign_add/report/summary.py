"""The report's first screen: one line per claim (the paper, the released checkpoints, this job's seeds,
and a committed many-seed result with its provenance), and what this job did not test.

A committed many-seed result is a folder of ``assign-add reproduce --seeds N`` output kept under
``results/`` (its ``claims.json`` and README); its rates are printed beside this job's seeds, with
whether the two agree (Fisher's exact test on holds / judged, n beside p).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from scipy.stats import fisher_exact

from assign_add.io import read_json_object
from assign_add.report.claims import CLAIMS, NOT_MEASURED
from assign_add.run import RunError
from assign_add.report.source import Source
from assign_add.stats import wilson_interval

# the committed many-seed result the default report reads (beside the package, in a source checkout)
DEFAULT_MANY_SEEDS = Path(__file__).resolve().parents[3] / "results" / "claims-16seeds"

# what a claim left "not measured" by the main job needs, and what it costs (docs/performance.md)
NOT_TESTED_HOW = {
    "C6": ("assign-add sweep --preset f --out sweeps/f` then `assign-add reproduce --f-sweep sweeps/f",
           "~95 min per seed of the 20-point grid on 2 cores in float32"),
    "C7": ("assign-add sweep --preset r --out sweeps/r` then `assign-add reproduce --r-sweep sweeps/r",
           "~95–100 min per seed on 2 cores in float32"),
}


@dataclass
class ManySeeds:
    """A committed many-seed result: per claim (holds, judged, verdict), and where it came from."""

    folder: Path
    name: str
    counts: dict[str, tuple[int, int, str]]

    def cell(self, cid: str) -> str:
        if cid not in self.counts:
            return "—"
        k, n, verdict = self.counts[cid]
        if not n:
            return verdict
        lo, hi = wilson_interval(k, n)
        return f"{k} of {n} ({lo:.2f}–{hi:.2f})"


def load_many_seeds(folder: Path | None, required: bool = False) -> ManySeeds | None:
    """The committed result in ``folder`` (its ``claims.json``), or None where there is none; with
    ``required`` (a folder the user named) a missing or malformed one is a one-line error."""
    if folder is None or not (Path(folder) / "claims.json").is_file():
        if required:
            raise RunError(f"--many-seeds {folder}: no claims.json (a folder made by assign-add reproduce --seeds N)")
        return None
    data = read_json_object(Path(folder) / "claims.json", "claims.json of assign-add reproduce")
    name = next((k for k in data if k.startswith("retrained")), None)
    if name is None or not isinstance(data[name], dict) or "aggregate" not in data[name]:
        if required:
            raise RunError(f"--many-seeds {folder}: its claims.json has no retrained seeds' aggregate")
        return None
    counts = {cid: (int(a.get("holds", 0)), int(a.get("judged", 0)), a["verdict"])
              for cid, a in data[name]["aggregate"].items()}
    return ManySeeds(Path(folder), name, counts)


def source_cell(src: Source, cid: str) -> str:
    """A source's verdict in a few words: 'holds in k of n judged (lo–hi)' over seeds, else the verdict."""
    if src.aggregate is not None and len(src.results) > 1:
        agg = src.aggregate[cid]
        if agg.judged:
            lo, hi = agg.interval or wilson_interval(agg.holds, agg.judged)
            return f"{agg.verdict}: {agg.holds} of {agg.judged} judged ({lo:.2f}–{hi:.2f})"
        return agg.verdict
    return src.results[0][cid].verdict


def agreement(src: Source, many: ManySeeds, cid: str) -> str:
    """Whether this job's seeds agree with the committed many-seed rate: Fisher's exact test (two-sided)."""
    if src.aggregate is None or cid not in many.counts:
        return "—"
    agg = src.aggregate[cid]
    k2, n2, _ = many.counts[cid]
    if not agg.judged or not n2:
        return "—"
    p = float(fisher_exact([[agg.holds, agg.judged - agg.holds], [k2, n2 - k2]]).pvalue)
    word = "consistent" if p >= 0.05 else "differs"
    return f"{word} (Fisher p = {p:.2f}, n = {agg.judged} and {n2})"


def summary_table(sources: list[Source], many: ManySeeds | None) -> tuple[list[str], list[list[str]]]:
    cols = ["claim", "paper"] + [s.name for s in sources]
    ours = next((s for s in sources if s.aggregate is not None and len(s.results) > 1), None)
    if many is not None:
        cols += [f"{many.name}, committed (holds in k of n judged)"]
        if ours is not None:
            cols += [f"{ours.name} vs the committed rate"]
    rows = []
    for claim in CLAIMS:
        row = [f"{claim.id}: {claim.statement}", claim.paper_value] + [source_cell(s, claim.id) for s in sources]
        if many is not None:
            row.append(many.cell(claim.id))
            if ours is not None:
                row.append(agreement(ours, many, claim.id))
        rows.append(row)
    return cols, rows


def not_tested(sources: list[Source], many: ManySeeds | None) -> list[str]:
    """Each claim no source measured, with the command that measures it and its cost."""
    out = []
    for claim in CLAIMS:
        if all(source_cell(s, claim.id) == NOT_MEASURED for s in sources):
            how, cost = NOT_TESTED_HOW.get(claim.id, ("", ""))
            out.append(f"{claim.id} ({claim.statement}): not measured by this job" +
                       (f"; run `{how}` ({cost})" if how else ""))
    if many is None:
        out.append("the claims as rates over many seeds: no committed many-seed result was found "
                   f"(expected at {DEFAULT_MANY_SEEDS}); `assign-add reproduce --seeds 16 --first-seed 116` makes one "
                   "(about 4 h on 2 cores in float32, projected from one seed's 32 min)")
    return out
