"""Report sections beyond the paper, from the folders of three experiments (each optional):

- ``survival``: ``assign-add survival`` (survival.json, survival.png): time to binding over seeds;
- ``branches``: ``assign-add branches`` (branches.json): when a seed's fate is fixed;
- ``llc``: ``assign-add llc`` (llc.json, llc.png): the learning coefficient across a run;
- ``rescue``: ``assign-add survival-rescue … --out FOLDER/rescue.json``: training changes against the default.

Each section states the command that made it (or the rule it applies), its seeds, steps and wall time where the folder
records them, and reads nothing but the folder's own files.
"""

from __future__ import annotations

import json
from pathlib import Path

from assign_add.report.render import Block, Bullets, Figure, Figures, Heading, Table, Text, _slug
from assign_add.run import RunError

KINDS = {"survival": "survival.json", "branches": "branches.json", "llc": "llc.json", "rescue": "rescue.json"}


def load_experiments(folders: dict[str, Path]) -> dict[str, tuple[Path, dict]]:
    """Each folder's summary, read up front (a one-line error for a folder without one)."""
    out = {}
    for kind, folder in folders.items():
        path = Path(folder) / KINDS[kind]
        if not path.is_file():
            made = "assign-add survival-rescue … --out FOLDER/rescue.json" if kind == "rescue" else f"assign-add {kind}"
            raise RunError(f"--{kind} {folder}: no {KINDS[kind]} (made by {made})")
        try:
            out[kind] = (Path(folder), json.loads(path.read_text()))
        except json.JSONDecodeError:
            raise RunError(f"{path}: not valid JSON") from None
    return out


def training_hours(outs: list[str]) -> float | None:
    """Training wall time summed over runs (each run's last ``metrics.jsonl`` record), in hours; None
    when no run's metrics are at hand (a summary copied without its runs)."""
    from assign_add.io import read_jsonl

    total, found = 0.0, False
    for out in outs:
        path = Path(out) / "metrics.jsonl"
        records = read_jsonl(path) if path.is_file() else []
        if records:
            total, found = total + float(records[-1].get("time", 0.0)), True
    return total / 3600 if found else None


def _hours(outs: list[str]) -> str:
    h = training_hours(outs)
    return "" if h is None else f" {h:.1f} h of training time over the runs (one core each)."


def _figure(folder: Path, name: str, title: str) -> list[Figure]:
    png = folder / f"{name}.png"
    return [Figure(png, f"figures/beyond/{_slug(title)}-{name}.png", title, f"fig-beyond-{name}")] if png.is_file() else []


def survival_section(folder: Path, s: dict) -> list[Block]:
    km = s.get("survival") or {}
    rows = [[f"{int(m):,}", f"{r['bound']} of {r['watched']}", "—" if r["p"] is None else f"{r['p']:.2f}",
             f"{r['ci95'][0]:.2f}–{r['ci95'][1]:.2f}" if r.get("ci95") else "—"] for m, r in s["bound_by"].items()]
    median = km.get("median")
    blocks: list[Block] = [
        Heading("Time to binding over seeds (beyond the paper)", anchor="survival"),
        Text(f"`{s['command']}`: {s['finished']} of {s['planned']} seeds finished, horizon {s['horizon']:,} steps; "
             "a seed not bound by its last step is censored there." + _hours([r["out"] for r in s["rows"]])),
        Table(["bound by", "seeds", "P(bound)", "95 % CI (Wilson)"], rows),
        Text("Kaplan–Meier median binding step: " + (f"{median:,.0f}" if median is not None else "beyond the horizon")
             + "."),
    ]
    blocks += [Figures(_figure(folder, "survival", "survival"))] if (folder / "survival.png").is_file() else []
    from assign_add.studies.survival import predictor_line

    early = s.get("bound_by_early_step", 0)
    if not s.get("predictor"):
        blocks.append(Text("Early predictor: not fitted yet (it needs at least 4 finished runs with both outcomes)."))
    for key, what in (("predictor", "Early predictor"), ("llc_predictor", "The LLC alone as a predictor")):
        if s.get(key):
            blocks.append(Text(predictor_line(s[key], what, s["horizon"], early)))
    return blocks


def branches_section(folder: Path, b: dict) -> list[Block]:
    rows = [[Path(r["parent"]).name, f"{r['step']:,}", r.get("arm", "data"), f"{r['bound']} of {r['watched']}",
             "—" if r["p_bound"] is None else f"{r['p_bound']:.2f}",
             "—" if r.get("ci95") is None else f"{r['ci95'][0]:.2f}–{r['ci95'][1]:.2f}"] for r in b["table"]]
    return [Heading("When is a seed's fate fixed? Branch-and-replay (beyond the paper)", anchor="branches"),
            Text(f"`{b['command']}`: {b['finished']} of {b['planned']} branches finished; each continues a parent "
                 f"from its weights and AdamW state at the branch step, to {b['horizon']:,} steps or until bound. "
                 "Arms: *data*, a fresh data order; *rounding*, the parent's own data order with the weights "
                 "perturbed; *PART<-DONOR*, that part taken from another run at the branch step."
                 + _hours([r["out"] for r in b["rows"]])),
            Table(["parent", "branch step", "arm", f"bound by {b['horizon']:,}", "P(bound)", "95 % CI (Wilson)"], rows)]


def llc_section(folder: Path, r: dict) -> list[Block]:
    from assign_add.studies.llc import landmark_lines, landmarks

    st = r["settings"]
    marks = r.get("landmarks") or landmarks(r["rows"], r["phases"])
    return [Heading("The local learning coefficient across training (beyond the paper)", anchor="llc"),
            Text(f"{r['run']}: {len(r['rows'])} checkpoints; devinterp SGLD, step {st['lr']:g}, localisation "
                 f"{st['localization']:g}, n·β {st['n_beta']:.1f}, {st['num_chains']} chains × {st['num_draws']} draws "
                 f"after {st['num_burnin_steps']} burn-in, on {r['data']['sequences']:,} training sequences."),
            Bullets([("", line) for line in landmark_lines(marks)]),
            *([Figures(_figure(folder, "llc", "llc"))] if (folder / "llc.png").is_file() else [])]


def rescue_section(folder: Path, r: dict) -> list[Block]:
    def p(v: float | None) -> str:
        return "—" if v is None else f"{v:.3g}"

    def steps(v: float | None) -> str:
        return "—" if v is None else f"{v:,.0f}"

    rows = [[a["name"], f"{a['bound']} of {a['known']}",
             "—" if not a["known"] else f"{a['ci95'][0]:.2f}–{a['ci95'][1]:.2f}", f"{a['default_bound']} of {a['default_known']}",
             p(a["fisher_p"]), p(a["holm_p"]), p(a.get("logrank_holm_p")), steps(a["cost_steps"]), steps(a["default_cost_steps"]),
             "—" if a["power_at_goal"] is None else f"{a['power_at_goal']:.2f}", a["verdict"]] for a in r["arms"]]
    return [Heading("Rescue: training changes against the default (beyond the paper)", anchor="rescue"),
            Text(f"Each arm changes one thing in training and runs the default study's seeds ({r['default']}) to "
                 f"{r['horizon']:,} steps, each run stopped once bound. Bound by {r['horizon']:,} on the same seeds, "
                 "two-sided Fisher exact test, Holm-adjusted over the arms; the log-rank test on time to binding "
                 "beside it; cost: mean steps trained per seed. The rule was fixed before any arm ran."),
            Table(["arm", "bound", "95 % CI (Wilson)", "default, same seeds", "Fisher p", "Holm p", "log-rank Holm p",
                   "mean steps", "default's", "power at the goal", "verdict"], rows)]


SECTIONS = {"survival": survival_section, "branches": branches_section, "llc": llc_section, "rescue": rescue_section}


def study_sections(experiments: dict[str, tuple[Path, dict]]) -> list[Block]:
    """The sections of the experiments given, in a fixed order (survival, branches, LLC, rescue)."""
    blocks: list[Block] = []
    for kind in KINDS:
        if kind in experiments:
            blocks += SECTIONS[kind](*experiments[kind])
    return blocks
