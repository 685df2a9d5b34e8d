"""The reproduction report: ``report.html`` (self-contained, offline) and ``report.md``.

Built only from saved ``analysis.json`` files and figure files.  The claims table comes first;
then one section per claim with its figures; then each source's configuration and the software
versions.
"""

from __future__ import annotations

import html
import platform
import shutil
from dataclasses import dataclass
from pathlib import Path

from assign_add.analysis.timing import PHASES
from assign_add.io import atomic_write_text
from assign_add.report.cuts import CUTS, MOVE
from assign_add.report.claims import (
    PAPER_STEPS,
    BY_ID,
    CLAIMS,
    AGGREGATE_RULE,
    HOLDS,
    MIXED,
    NOT_CONVERGED,
    NOT_BOUND,
    NOT_MEASURED,
    Aggregate,
    ClaimResult,
)

# Which figures illustrate which claim (figure names from analysis/figures.py).
CLAIM_FIGURES = {  # in claim order
    "B": ["accuracy"],
    "C1": ["accuracy"],
    "C2": ["spike", "attention", "pattern_layer1", "pattern_layer2"],
    "C3": ["refinement"],
    "C4": ["refinement"],
    "C5": ["accuracy"],
    "C6": [],
    "C7": [],
    "C8": ["cosine_hist", "cosine_by_step", "patching"],
    "C9": ["fourier_spectrum", "fourier_neurons", "fourier_neuron"],
    "C10": ["weights", "qk2", "probes"],
    "C11": ["gradients_theory", "gradients", "gradient_matrix"],
}
EXTRA_FIGURES = ["ablations"]


@dataclass
class Source:
    """One column of the claims table: the released checkpoints, or our runs (one per seed)."""

    name: str
    runs: list[Path]  # run directories (each with analysis.json and figures/)
    results: list[dict[str, ClaimResult]]
    aggregate: dict[str, Aggregate] | None  # for several seeds
    configs: list[str]
    claim_figures: dict[str, list[Path]] | None = None  # claim -> figure paths without suffix (e.g. a sweep's)
    steps: int | None = None  # training steps of these runs: fewer than the paper's is said beside every verdict

    def protocol(self) -> str:
        """"at N of the paper's 40,000 steps" when these runs are shorter than the authors' run."""
        if self.steps is None or self.steps >= PAPER_STEPS:
            return ""
        return f"at {self.steps:,} of the paper's {PAPER_STEPS:,} steps"


def claim_bullets(src: Source, cid: str) -> list[tuple[str, str]]:
    """(label, text) per seed of a source: every seed's verdict and measurement, not only the first."""
    several = len(src.results) > 1
    out = []
    for run, res in zip(src.runs, src.results):
        label = f"{src.name}, {Path(run).name}" if several else src.name
        extra = _qualifiers(res[cid].robustness, res[cid].under_previous, src)
        extra = f" ({extra})" if extra else ""
        out.append((label, f"{res[cid].verdict}{extra}. {res[cid].detail} {res[cid].reason}".rstrip()))
    return out


def _fmt(v: float | None) -> str:
    if v is None:
        return "—"
    if float(v).is_integer() and abs(v) >= 10:
        return f"{int(v):,}"
    return f"{v:.4g}"


def measured_text(src: Source, cid: str) -> str:
    if src.aggregate is not None and len(src.results) > 1:
        agg = src.aggregate[cid]
        if agg.mean is None:
            return "—"
        seeds = ", ".join(_fmt(v) for v in agg.per_seed)
        return f"{_fmt(agg.mean)} ± {_fmt(agg.sd)} (seeds: {seeds})"
    res = src.results[0][cid]
    return f"{_fmt(res.value)}: {res.detail}" if res.value is not None or res.detail else "—"


def verdict_of(src: Source, cid: str) -> tuple[str, str]:
    """(verdict, reason), the reason with the verdict's robustness to its cuts (±20 %), the verdict
    under a cut changed after seeing data, and the protocol when the runs are shorter than the paper's."""
    if src.aggregate is not None and len(src.results) > 1:
        agg = src.aggregate[cid]
        verdict, reason, robust, previous = agg.verdict, agg.reason, agg.robustness, ""
    else:
        res = src.results[0][cid]
        verdict, reason, robust, previous = res.verdict, res.reason, res.robustness, res.under_previous
    return verdict, "; ".join(x for x in (reason, _qualifiers(robust, previous, src)) if x)


def _qualifiers(robustness: str, previous: str, src: Source) -> str:
    """What stands beside a verdict: its robustness, the verdict without a cut changed after seeing
    data, and the protocol when the runs are shorter than the paper's."""
    return "; ".join(x for x in (robustness, previous, src.protocol()) if x)


def claims_rows(sources: list[Source]) -> list[list[str]]:
    rows = []
    for claim in CLAIMS:
        row = [claim.id, claim.statement, claim.paper_value]
        for src in sources:
            verdict, reason = verdict_of(src, claim.id)
            row += [measured_text(src, claim.id), verdict + (f" ({reason})" if reason else "")]
        row.append(claim.criterion)
        rows.append(row)
    return rows


CUTS_SENTENCE = (f"Every cut with its basis. A verdict is 'robust' when it stays the same with each of its cuts "
                 f"moved alone by ±{MOVE:.0%} (a level near 1: its allowance 1 − value moved), else 'fragile', with the "
                 "move that changes it; a cut chosen after its data were seen shows the verdict under the earlier "
                 "criterion too.")


def cuts_table() -> tuple[list[str], list[list[str]]]:
    rows = [[name, f"{cut.value:g}", cut.basis, f"changed after seeing data: {cut.why_changed}" if cut.why_changed
             else "no change recorded"] for name, cut in CUTS.items()]
    return ["cut", "value", "basis", "history"], rows


def header(sources: list[Source]) -> list[str]:
    cols = ["claim", "statement", "paper"]
    for src in sources:
        cols += [f"measured: {src.name}", f"verdict: {src.name}"]
    return cols + ["criterion"]


def differences(sources: list[Source]) -> list[str]:
    """Plain statements where a source's verdict differs from the paper's claim holding."""
    out = []
    for src in sources:
        for claim in CLAIMS:
            verdict, reason = verdict_of(src, claim.id)
            if verdict not in (HOLDS, NOT_MEASURED) and not verdict.startswith(NOT_BOUND):
                out.append(f"{claim.id} {verdict} for {src.name}" + (f" ({reason})" if reason else "") + ".")
    return out


SPIKE_COLUMNS = ["measure", "before", "at", "after", "final", "largest change (at step)", "kind"]


def spike_tables(src: Source) -> list[tuple[str, str, list[list[str]]]]:
    """(label, caption, rows) of the C2 spike table for every run of a source that has one."""
    import json

    out = []
    for run in src.runs:
        path = Path(run) / "analysis.json"
        table = json.loads(path.read_text()).get("spike") if path.is_file() else None
        if not table:
            continue
        label = f"{src.name}, {Path(run).name}" if len(src.runs) > 1 else src.name
        after = "—" if table["after_step"] is None else f"{table['after_step']:,}"
        caption = (f"binding step {table['binding']:,}; before = checkpoint {table['before_step']:,}, "
                   f"at = {table['at_step']:,}, after = {after}")
        f = lambda v: "—" if v is None else f"{v:.2f}"  # noqa: E731
        rows = [[r["label"], f(r["before"]), f(r["at"]), f(r["after"]), f(r["final"]),
                 f"{r['largest_change']:+.2f} ({r['largest_step']:,})", r["kind"]] for r in table["rows"]]
        out.append((label, caption, rows))
    return out


def timing_rows(timing: dict) -> tuple[list[str], list[list[str]], list[str], list[list[str]], str]:
    """(phase columns, phase rows, predictor columns, predictor rows, best-predictor sentence)."""
    ref = timing.get("reference") or {}
    cols = ["phase", "seeds", "min", "median", "max", "mean ± sd", "released run"]
    rows = []
    for phase, st in timing["phases"]["summary"].items():
        if st is None:
            rows.append([phase, "0", "—", "—", "—", "—", _fmt(ref.get(phase))])
            continue
        n = f"{st['n']}" + (f" ({st['missing']} without)" if st["missing"] else "")
        label = f"{phase} (seeds that bound)" if phase == "binding" and st["missing"] else phase
        rows.append([label, n, _fmt(st["min"]), _fmt(st["median"]), _fmt(st["max"]),
                     f"{st['mean']:,.0f} ± {st['sd']:,.0f}", _fmt(ref.get(phase))])
    km = timing["phases"].get("binding_survival")
    if km:
        lo, hi = km["bound_fraction_ci95"]
        median = _fmt(km["median"]) if km["median"] is not None else f"> {km['horizon']:,}"
        rows.append(["binding (Kaplan–Meier, unbound seeds censored)",
                     f"{km['bound']} of {km['n']} bound by {km['horizon']:,} (95 % CI {lo:.0%}–{hi:.0%})",
                     "—", median, "—", "—", _fmt(ref.get("binding"))])
    pcols = ["measure", "half-range step per seed", "before binding in every seed", "Spearman ρ with binding", "p"]
    prows = [[p["label"], ", ".join("—" if x is None else f"{x:,}" for x in p["steps"]),
              "yes" if p["early_in_every_seed"] else "no",
              "—" if p["rho"] is None else f"{p['rho']:+.2f}", "—" if p["p_value"] is None else f"{p['p_value']:.3g}"]
             for p in timing["predictors"]]
    best = timing.get("best")
    sentence = ("No measure crosses half its range before binding in every seed with a defined correlation."
                if best is None else
                f"Best early predictor of the binding step: {best['label']} (ρ = {best['rho']:+.2f}, p = "
                f"{best['p_value']:.3g} per measure; {timing['measures_tried']} measures tried, so multiply p by "
                f"{timing['measures_tried']} for a Bonferroni reading).")
    return cols, rows, pcols, prows, sentence


def timing_chart(timing: dict):
    from assign_add.analysis.timing import ecdf
    from assign_add.charts import Line

    xs, series = ecdf(timing["phases"]["per_seed"])
    ref = {f"released {k}": v for k, v in (timing.get("reference") or {}).items() if k in PHASES and v is not None}
    return Line(f"Phase steps over {len(timing['phases']['per_seed'])} seeds (empirical CDF over all seeds: a seed "
                "without the phase never counts)", xs, series,
                ylabel="fraction of seeds at or before", markers=ref, ylim=(0, 1.02))


def _md_table(cols: list[str], rows: list[list[str]]) -> list[str]:
    return (["| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
            + ["| " + " | ".join(_md_escape(c) for c in row) + " |" for row in rows] + [""])


def _html_table(cols: list[str], rows: list[list[str]], cls: str = "") -> str:
    esc = html.escape
    head = "<tr>" + "".join(f"<th>{esc(c)}</th>" for c in cols) + "</tr>"
    body = "".join("<tr>" + "".join(f"<td>{esc(c)}</td>" for c in row) + "</tr>" for row in rows)
    return f"<table class='{cls}'>{head}{body}</table>"


# --------------------------------------------------------------------------- markdown


def _md_escape(s: str) -> str:
    return s.replace("|", "\\|").replace("\n", " ")


def render_markdown(sources: list[Source], out_dir: Path, notes: list[str], versions: dict[str, str],
                    timing: dict | None = None) -> str:
    lines = ["# Assign and Add: reproduction report", ""]
    lines += ["Sources: " + "; ".join(f"**{s.name}** ({len(s.runs)} run{'s' if len(s.runs) > 1 else ''})" for s in sources), ""]
    lines += ["## Claims", ""]
    cols = header(sources)
    lines.append("| " + " | ".join(cols) + " |")
    lines.append("|" + "---|" * len(cols))
    for row in claims_rows(sources):
        lines.append("| " + " | ".join(_md_escape(c) for c in row) + " |")
    lines += ["", f"Verdicts {AGGREGATE_RULE}.", "", CUTS_SENTENCE, ""]
    lines += _md_table(*cuts_table())
    diffs = differences(sources) + notes
    if diffs:
        lines += ["## Where the measurements differ from the paper", ""] + [f"- {d}" for d in diffs] + [""]
    for cid, figs in CLAIM_FIGURES.items():
        lines += [f"## {cid}: {BY_ID[cid].statement}", "", f"Criterion: {BY_ID[cid].criterion}.", ""]
        for src in sources:
            lines += [f"- **{label}**: {text}" for label, text in claim_bullets(src, cid)]
        lines.append("")
        if cid == "C2":
            for src in sources:
                for label, caption, rows in spike_tables(src):
                    lines += [f"What happens at the spike, {label} ({caption}):", ""] + _md_table(SPIKE_COLUMNS, rows)
        for src in sources:
            for fig in figs:
                png = _figure_copy(src, fig, out_dir)
                if png:
                    lines.append(f"![{src.name}: {fig}]({png})")
            for stem in (src.claim_figures or {}).get(cid, []):
                if stem.with_suffix(".png").is_file():
                    rel = Path("figures") / _slug(src.name) / f"{cid}-{stem.name}.png"
                    (out_dir / rel).parent.mkdir(parents=True, exist_ok=True)
                    shutil.copyfile(stem.with_suffix(".png"), out_dir / rel)
                    lines.append(f"![{src.name}: {cid}]({rel.as_posix()})")
        lines.append("")
    if timing is not None:
        cols, rows, pcols, prows, sentence = timing_rows(timing)
        lines += ["## Phase timing over seeds (beyond the paper: it has one run)", ""] + _md_table(cols, rows)
        if (out_dir / "figures" / "timing" / "phases.png").is_file():
            lines += ["![phase steps over seeds](figures/timing/phases.png)", ""]
        lines += [sentence, ""] + _md_table(pcols, prows)
    lines += ["## Causal checks", ""]
    for src in sources:
        for fig in EXTRA_FIGURES:
            png = _figure_copy(src, fig, out_dir)
            if png:
                lines.append(f"![{src.name}: {fig}]({png})")
    lines += ["", "## Configuration and software", ""]
    for src in sources:
        lines += [f"### {src.name}", "", "```toml", src.configs[0].strip(), "```", ""]
    lines += ["| package | version |", "|---|---|"] + [f"| {k} | {v} |" for k, v in versions.items()]
    return "\n".join(lines) + "\n"


def _figure_copy(src: Source, fig: str, out_dir: Path) -> str | None:
    """Copy the first run's PNG beside the report; return its relative path."""
    png = src.runs[0] / "figures" / f"{fig}.png"
    if not png.is_file():
        return None
    rel = Path("figures") / _slug(src.name) / f"{fig}.png"
    (out_dir / rel).parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(png, out_dir / rel)
    return rel.as_posix()


def _slug(name: str) -> str:
    return "".join(c if c.isalnum() else "-" for c in name.lower()).strip("-")


# --------------------------------------------------------------------------- html

CSS = """
body{font-family:system-ui,-apple-system,Segoe UI,sans-serif;max-width:1200px;margin:2em auto;padding:0 1em;color:#222}
table{border-collapse:collapse;font-size:13px;margin:1em 0}th,td{border:1px solid #ccc;padding:4px 6px;vertical-align:top}
th{background:#f3f3f3}td.holds{background:#e6f4ea}td.fails{background:#fce8e6}td.nm{background:#f1f1f1;color:#666}td.mixed{background:#fff4d6}
.figs{display:flex;flex-wrap:wrap;gap:8px}.figure{flex:1 1 540px;min-width:420px;border:1px solid #eee}
pre{background:#f7f7f7;padding:8px;overflow:auto;font-size:12px}
"""


def _verdict_class(text: str) -> str:
    if text.startswith(HOLDS):
        return "holds"
    if text.startswith((NOT_MEASURED, NOT_CONVERGED, NOT_BOUND)) or " seeds bound" in text:
        return "nm"
    if text.startswith(MIXED):
        return "mixed"
    return "fails"


def render_html(sources: list[Source], notes: list[str], versions: dict[str, str], plotly_js: str,
                timing: dict | None = None, timing_fragment: str = "") -> str:
    esc = html.escape
    parts = ["<!DOCTYPE html><html><head><meta charset='utf-8'><title>Assign and Add: reproduction report</title>",
             f"<style>{CSS}</style><script>{plotly_js}</script></head><body>",
             "<h1>Assign and Add: reproduction report</h1>",
             "<p>Sources: " + "; ".join(f"<b>{esc(s.name)}</b> ({len(s.runs)} run(s))" for s in sources) + "</p>",
             "<h2>Claims</h2><table id='claims'><thead><tr>"]
    parts += [f"<th>{esc(c)}</th>" for c in header(sources)]
    parts.append("</tr></thead><tbody>")
    for row in claims_rows(sources):
        cells = []
        for i, c in enumerate(row):
            is_verdict = 3 <= i < len(row) - 1 and (i - 3) % 2 == 1
            cls = f" class='{_verdict_class(c)}'" if is_verdict else ""
            cells.append(f"<td{cls}>{esc(c)}</td>")
        parts.append(f"<tr class='claim' data-claim='{esc(row[0])}'>" + "".join(cells) + "</tr>")
    parts.append("</tbody></table>")
    parts.append(f"<p>Verdicts {esc(AGGREGATE_RULE)}.</p>")
    parts.append(f"<p>{esc(CUTS_SENTENCE)}</p>" + _html_table(*cuts_table()))
    diffs = differences(sources) + notes
    if diffs:
        parts.append("<h2>Where the measurements differ from the paper</h2><ul>")
        parts += [f"<li>{esc(d)}</li>" for d in diffs]
        parts.append("</ul>")
    for cid, figs in CLAIM_FIGURES.items():
        parts.append(f"<h2 id='{cid}'>{cid}: {esc(BY_ID[cid].statement)}</h2>")
        parts.append(f"<p><i>Criterion:</i> {esc(BY_ID[cid].criterion)}.</p><ul>")
        for src in sources:
            parts += [f"<li><b>{esc(label)}</b>: {esc(text)}</li>" for label, text in claim_bullets(src, cid)]
        parts.append("</ul>")
        if cid == "C2":
            for src in sources:
                for label, caption, rows in spike_tables(src):
                    parts.append(f"<p>What happens at the spike, <b>{esc(label)}</b> ({esc(caption)}):</p>"
                                 + _html_table(SPIKE_COLUMNS, rows, "spike"))
        parts.append(_figure_block(sources, figs, cid))
        for src in sources:
            for stem in (src.claim_figures or {}).get(cid, []):
                frag = stem.with_suffix(".html")
                if frag.is_file():
                    body = frag.read_text().replace(f'"fig-{stem.name}"', f'"fig-{cid}-{_slug(src.name)}-{stem.name}"')
                    parts.append(f"<div class='figs'><div class='figure' title='{html.escape(src.name)}: {cid}'>{body}</div></div>")
    if timing is not None:
        cols, rows, pcols, prows, sentence = timing_rows(timing)
        parts.append("<h2 id='timing'>Phase timing over seeds (beyond the paper: it has one run)</h2>"
                     + _html_table(cols, rows, "timing"))
        if timing_fragment:
            parts.append(f"<div class='figs'><div class='figure' title='phase timing'>{timing_fragment}</div></div>")
        parts.append(f"<p>{esc(sentence)}</p>" + _html_table(pcols, prows, "predictors"))
    parts.append("<h2>Causal checks</h2>" + _figure_block(sources, EXTRA_FIGURES, "causal"))
    parts.append("<h2>Configuration and software</h2>")
    for src in sources:
        parts.append(f"<h3>{esc(src.name)}</h3><pre>{esc(src.configs[0])}</pre>")
    parts.append("<table><tr><th>package</th><th>version</th></tr>")
    parts += [f"<tr><td>{esc(k)}</td><td>{esc(v)}</td></tr>" for k, v in versions.items()]
    parts.append("</table></body></html>")
    return "\n".join(parts)


def _figure_block(sources: list[Source], figs: list[str], section: str) -> str:
    """Each figure's fragment, with a div id unique in the page (a figure may appear in two sections)."""
    blocks = []
    for src in sources:
        for fig in figs:
            frag = src.runs[0] / "figures" / f"{fig}.html"
            if frag.is_file():
                body = frag.read_text().replace(f'"fig-{fig}"', f'"fig-{section}-{_slug(src.name)}-{fig}"')
                blocks.append(f"<div class='figure' title='{html.escape(src.name)}: {fig}'>{body}</div>")
    return "<div class='figs'>" + "".join(blocks) + "</div>" if blocks else ""


def software_versions() -> dict[str, str]:
    import importlib.metadata as md

    out = {"python": platform.python_version(), "platform": platform.platform()}
    for pkg in ("assign-add", "torch", "transformer-lens", "numpy", "plotly", "matplotlib"):
        try:
            out[pkg] = md.version(pkg)
        except md.PackageNotFoundError:
            out[pkg] = "not installed"
    return out


def write_report(sources: list[Source], out_dir: Path, notes: list[str] | None = None,
                 timing: dict | None = None) -> tuple[Path, Path]:
    from plotly.offline import get_plotlyjs

    from assign_add.charts import render

    notes = notes or []
    versions = software_versions()
    out_dir.mkdir(parents=True, exist_ok=True)
    fragment = ""
    observed = timing is not None and any(seed[k] is not None for seed in timing["phases"]["per_seed"] for k in PHASES)
    if observed:  # an empty chart would draw nothing (e.g. --quick runs reach no phase)
        render(timing_chart(timing), out_dir / "figures" / "timing", "phases")
        fragment = (out_dir / "figures" / "timing" / "phases.html").read_text()
    md_path, html_path = out_dir / "report.md", out_dir / "report.html"
    atomic_write_text(md_path, render_markdown(sources, out_dir, notes, versions, timing))
    atomic_write_text(html_path, render_html(sources, notes, versions, get_plotlyjs(), timing, fragment))
    return html_path, md_path
