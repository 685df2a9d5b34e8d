"""The reproduction report: ``report.html`` (self-contained, offline) and ``report.md``.

Built only from saved ``analysis.json`` files and figure files.  :func:`sections` lays the report
out once, as a list of blocks (headings, text, tables, figures): the claims table first; one section
per claim with its figures; phase timing over seeds; the causal checks; how the function develops
(essential dynamics); each source's configuration and the software versions.  Two short writers
format the blocks, :func:`to_markdown` and :func:`to_html`.
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
from assign_add.report.history import history_rows
from assign_add.report.summary import ManySeeds, not_tested, summary_table
from assign_add.report.source import AUTHORS_PROTOCOL, Source
from assign_add.report.claims import (
    BY_ID,
    CLAIMS,
    AGGREGATE_RULE,
    AT_EDGE,
    HOLDS,
    MIXED,
    NOT_CONVERGED,
    NOT_BOUND,
    NOT_FINISHED,
    NOT_MEASURED,
)

# Which figures illustrate which claim: each claim names its own (report/claims.py).
CLAIM_FIGURES = {c.id: list(c.figures) for c in CLAIMS}  # in claim order
EXTRA_FIGURES = ["ablations"]
DEVELOPMENT_FIGURES = ["trajectory", "trajectory_speed", "trajectory_plane"]  # essential dynamics (analysis/trajectory.py)


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
            if verdict not in (HOLDS, NOT_MEASURED, AT_EDGE) and not verdict.startswith((NOT_BOUND, NOT_FINISHED)):
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
    pcols = ["measure", "half-range step per seed", "before binding in every bound seed", "Spearman ρ with binding",
             "n", "p (two-sided)"]
    prows = [[p["label"], ", ".join("—" if x is None else f"{x:,}" for x in p["steps"]),
              "yes" if p["early_in_every_seed"] else "no",
              "—" if p["rho"] is None else f"{p['rho']:+.2f}", str(p.get("n", "—")),
              "—" if p["p_value"] is None else f"{p['p_value']:.3g} ({p.get('p_method') or 'approximate'})"]
             for p in timing["predictors"]]
    best = timing.get("best")
    sentence = ("No measure crosses half its range before binding in every seed with a defined correlation."
                if best is None else
                f"Best early predictor of the binding step: {best['label']} (ρ = {best['rho']:+.2f}, n = "
                f"{best.get('n', '?')}, p = {best['p_value']:.3g} {best.get('p_method') or ''} per measure; {timing['measures_tried']} measures tried, so multiply p by "
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


# --------------------------------------------------------------------------- the document

@dataclass
class Heading:
    text: str
    level: int = 2
    anchor: str = ""


@dataclass
class Text:
    text: str
    lead: str = ""  # an emphasised label before the text, e.g. "Criterion:"


@dataclass
class Bullets:
    items: list[tuple[str, str]]  # (bold label, text)


@dataclass
class Table:
    cols: list[str]
    rows: list[list[str]]
    cls: str = ""
    anchor: str = ""
    verdict_cols: tuple[int, ...] = ()  # cells coloured by their verdict in HTML
    keyed: bool = False  # each row tagged with its first cell (the claims table: data-claim)


@dataclass
class Figure:
    """A figure rendered by charts.render: its PNG (copied beside report.md) and its HTML fragment."""

    png: Path
    rel: str  # where report.md finds its copy, relative to the report
    title: str
    div_id: str  # the fragment's id, made unique in the page (a figure may appear in two sections)

    @property
    def fragment(self) -> Path:
        return self.png.with_suffix(".html")


@dataclass
class Figures:
    items: list[Figure]


@dataclass
class Code:
    text: str
    language: str = ""


Block = Heading | Text | Bullets | Table | Figures | Code


def _slug(name: str) -> str:
    return "".join(c if c.isalnum() else "-" for c in name.lower()).strip("-")


def run_figures(sources: list[Source], names: list[str], section: str) -> list[Figure]:
    """The first run's figures ``names`` of each source that has them."""
    out = []
    for src in sources:
        for name in names:
            png = src.runs[0] / "figures" / f"{name}.png"
            if png.is_file():
                out.append(Figure(png, f"figures/{_slug(src.name)}/{name}.png", f"{src.name}: {name}",
                                  f"fig-{section}-{_slug(src.name)}-{name}"))
    return out


def sweep_figures(sources: list[Source], cid: str) -> list[Figure]:
    """The figures a source brings for a claim from outside its runs (a sweep's)."""
    out = []
    for src in sources:
        for stem in (src.claim_figures or {}).get(cid, []):
            png = stem.with_suffix(".png")
            if png.is_file():
                out.append(Figure(png, f"figures/{_slug(src.name)}/{cid}-{stem.name}.png", f"{src.name}: {cid}",
                                  f"fig-{cid}-{_slug(src.name)}-{stem.name}"))
    return out


HISTORY_COLUMNS = ["date", "commit", "what changed", "data seen before the change"]


def claim_section(sources: list[Source], cid: str) -> list[Block]:
    blocks: list[Block] = [Heading(f"{cid}: {BY_ID[cid].statement}", anchor=cid),
                           Text(f"{BY_ID[cid].criterion}.", lead="Criterion:"),
                           Bullets([item for src in sources for item in claim_bullets(src, cid)]),
                           Text("the criterion's changes, and whether its data had been seen before each:",
                                lead="History:"),
                           Table(HISTORY_COLUMNS, history_rows(cid), "history")]
    if cid == "C2a":
        for src in sources:
            for label, caption, rows in spike_tables(src):
                blocks += [Text(f"What happens at the spike, {label} ({caption}):"), Table(SPIKE_COLUMNS, rows, "spike")]
    figs = run_figures(sources, CLAIM_FIGURES[cid], cid) + sweep_figures(sources, cid)
    return blocks + ([Figures(figs)] if figs else [])


def timing_section(timing: dict, figure: Path | None) -> list[Block]:
    cols, rows, pcols, prows, sentence = timing_rows(timing)
    blocks: list[Block] = [Heading("Phase timing over seeds (beyond the paper: it has one run)", anchor="timing"),
                           Table(cols, rows, "timing")]
    if figure is not None:
        blocks.append(Figures([Figure(figure, "figures/timing/phases.png", "phase timing", "fig-timing-phases")]))
    return blocks + [Text(sentence), Table(pcols, prows, "predictors")]


DEVELOPMENT_TEXT = ("Essential dynamics: each checkpoint's answer logits on the first 200 sequences of every curated "
                    "set (centred per sequence), and PCA over the checkpoints. Where the path turns, the function "
                    "changes direction; compare with the phase marks. The share of variance of each component is in "
                    "its legend; the path plane shows the first two; the speed is the distance the logits move per 100 "
                    "steps between checkpoints, comparable only between intervals of equal spacing (the noise of "
                    "training makes closely spaced checkpoints look fast). (Beyond the paper; survival over seeds, "
                    "branch-and-replay and the learning coefficient have their own commands: see the README.)")


def first_screen(sources: list[Source], many: ManySeeds | None) -> list[Block]:
    """One line per claim across every source (and the committed many-seed rates), then what was not tested."""
    cols, rows = summary_table(sources, many)
    blocks: list[Block] = [Heading("Summary: one line per claim", anchor="summary"), Table(cols, rows, "summary")]
    if many is not None:
        blocks.append(Text(f"The many-seed column is a committed result, {many.folder} (its README gives the command, "
                           "commit, CPU, precision and wall time); this job's seeds are compared with it by Fisher's "
                           "exact test on holds / judged."))
    missing = not_tested(sources, many)
    if missing:
        blocks += [Heading("Not tested by this job", level=3), Bullets([("", m) for m in missing])]
    return blocks


def sections(sources: list[Source], notes: list[str], versions: dict[str, str], timing: dict | None,
             timing_figure: Path | None, extra: list[Block] | None = None,
             many: ManySeeds | None = None) -> list[Block]:
    """The whole report, in order, as blocks; the two writers below only format them."""
    doc: list[Block] = [Heading("Assign and Add: reproduction report", level=1),
                        Bullets([(s.name, s.training()) for s in sources] + [("the authors' protocol", AUTHORS_PROTOCOL)]),
                        *first_screen(sources, many),
                        Heading("Claims"),
                        Table(header(sources), claims_rows(sources), anchor="claims", keyed=True,
                              verdict_cols=tuple(range(4, 3 + 2 * len(sources), 2))),
                        Text(f"Verdicts {AGGREGATE_RULE}."), Text(CUTS_SENTENCE), Table(*cuts_table())]
    diffs = differences(sources) + notes
    if diffs:
        doc += [Heading("Where the measurements differ from the paper"), Bullets([("", d) for d in diffs])]
    for cid in CLAIM_FIGURES:
        doc += claim_section(sources, cid)
    if timing is not None:
        doc += timing_section(timing, timing_figure)
    doc += [Heading("Causal checks"), Figures(run_figures(sources, EXTRA_FIGURES, "causal"))]
    development = run_figures(sources, DEVELOPMENT_FIGURES, "development")
    if development:
        doc += [Heading("How the function develops (beyond the paper)", anchor="development"), Text(DEVELOPMENT_TEXT),
                Figures(development)]
    doc += extra or []  # sections beyond the paper from experiments' folders (report/studies.py)
    doc.append(Heading("Configuration and software"))
    for src in sources:
        doc += [Heading(src.name, level=3), Code(src.configs[0].strip(), "toml")]
    return doc + [Table(["package", "version"], [[k, v] for k, v in versions.items()])]


# --------------------------------------------------------------------------- markdown


def _md_escape(s: str) -> str:
    return s.replace("|", "\\|").replace("\n", " ")


def _md_table(cols: list[str], rows: list[list[str]]) -> list[str]:
    return (["| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
            + ["| " + " | ".join(_md_escape(c) for c in row) + " |" for row in rows] + [""])


def to_markdown(doc: list[Block], out_dir: Path) -> str:
    """report.md; each figure's PNG is copied beside it."""
    lines: list[str] = []
    for block in doc:
        if isinstance(block, Heading):
            lines += ["#" * block.level + " " + block.text, ""]
        elif isinstance(block, Text):
            lines += [(f"*{block.lead}* " if block.lead else "") + block.text, ""]
        elif isinstance(block, Bullets):
            lines += [f"- **{label}**: {text}" if label else f"- {text}" for label, text in block.items] + [""]
        elif isinstance(block, Table):
            lines += _md_table(block.cols, block.rows)
        elif isinstance(block, Figures):
            for fig in block.items:
                target = out_dir / fig.rel
                target.parent.mkdir(parents=True, exist_ok=True)
                if fig.png.resolve() != target.resolve():
                    shutil.copyfile(fig.png, target)
                lines.append(f"![{fig.title}]({fig.rel})")
            lines.append("")
        else:
            lines += [f"```{block.language}", block.text, "```", ""]
    return "\n".join(lines) + "\n"


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
    if text.startswith((NOT_MEASURED, NOT_CONVERGED, NOT_BOUND, NOT_FINISHED, AT_EDGE)) or " seeds bound" in text:
        return "nm"
    if text.startswith(MIXED):
        return "mixed"
    return "fails"


def _html_table(t: Table) -> str:
    esc = html.escape
    head = "<tr>" + "".join(f"<th>{esc(c)}</th>" for c in t.cols) + "</tr>"
    rows = []
    for row in t.rows:
        cells = "".join(f"<td class='{_verdict_class(c)}'>{esc(c)}</td>" if i in t.verdict_cols else f"<td>{esc(c)}</td>"
                        for i, c in enumerate(row))
        tag = f"<tr class='claim' data-claim='{esc(row[0])}'>" if t.keyed else "<tr>"
        rows.append(tag + cells + "</tr>")
    anchor = f" id='{t.anchor}'" if t.anchor else ""
    return f"<table{anchor} class='{t.cls}'><thead>{head}</thead><tbody>{''.join(rows)}</tbody></table>"


def _html_figures(figs: Figures) -> str:
    blocks = []
    for fig in figs.items:
        if fig.fragment.is_file():
            body = fig.fragment.read_text().replace(f'"fig-{fig.png.stem}"', f'"{fig.div_id}"')
            blocks.append(f"<div class='figure' title='{html.escape(fig.title)}'>{body}</div>")
    return "<div class='figs'>" + "".join(blocks) + "</div>" if blocks else ""


def to_html(doc: list[Block], plotly_js: str) -> str:
    """report.html: self-contained (plotly.js inline, every figure's fragment inline)."""
    esc = html.escape
    title = next(b.text for b in doc if isinstance(b, Heading))
    parts = [f"<!DOCTYPE html><html><head><meta charset='utf-8'><title>{esc(title)}</title>",
             f"<style>{CSS}</style><script>{plotly_js}</script></head><body>"]
    for block in doc:
        if isinstance(block, Heading):
            anchor = f" id='{block.anchor}'" if block.anchor else ""
            parts.append(f"<h{block.level}{anchor}>{esc(block.text)}</h{block.level}>")
        elif isinstance(block, Text):
            parts.append("<p>" + (f"<i>{esc(block.lead)}</i> " if block.lead else "") + f"{esc(block.text)}</p>")
        elif isinstance(block, Bullets):
            parts.append("<ul>" + "".join(f"<li><b>{esc(label)}</b>: {esc(text)}</li>" if label else f"<li>{esc(text)}</li>"
                                          for label, text in block.items) + "</ul>")
        elif isinstance(block, Table):
            parts.append(_html_table(block))
        elif isinstance(block, Figures):
            parts.append(_html_figures(block))
        else:
            parts.append(f"<pre>{esc(block.text)}</pre>")
    parts.append("</body></html>")
    return "\n".join(parts)


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
                 timing: dict | None = None, extra: list[Block] | None = None,
                 many: ManySeeds | None = None) -> tuple[Path, Path]:
    from plotly.offline import get_plotlyjs

    from assign_add.charts import render

    out_dir.mkdir(parents=True, exist_ok=True)
    figure = None
    observed = timing is not None and any(seed[k] is not None for seed in timing["phases"]["per_seed"] for k in PHASES)
    if observed:  # an empty chart would draw nothing (e.g. --quick runs reach no phase)
        figure = render(timing_chart(timing), out_dir / "figures" / "timing", "phases")[0]
    doc = sections(sources, notes or [], software_versions(), timing, figure, extra, many)
    md_path, html_path = out_dir / "report.md", out_dir / "report.html"
    atomic_write_text(md_path, to_markdown(doc, out_dir))
    atomic_write_text(html_path, to_html(doc, get_plotlyjs()))
    return html_path, md_path
