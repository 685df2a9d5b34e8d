"""`reproduce --quick` end to end, the claims' criteria, and the report in a real browser."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from assign_add.report.claims import CLAIMS, FAILS, HOLDS, MIXED, NOT_MEASURED, aggregate, evaluate_claims
from assign_add.reproduce import reproduce

from conftest import ARTIFACTS

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")


@pytest.fixture(scope="module")
def quick(tmp_path_factory):
    out = tmp_path_factory.mktemp("reproduce")
    paper = ARTIFACTS / "checkpoints" if (ARTIFACTS / "checkpoints").is_dir() else None
    res = reproduce(out, quick=True, paper_checkpoints=paper, log=lambda m: None)
    return out, res


@pytest.mark.slow
def test_quick_reproduction_writes_both_reports(quick):
    out, res = quick
    html, md = res.html.read_text(), res.markdown.read_text()
    for cl in CLAIMS:
        assert f"| {cl.id} |" in md and f"data-claim='{cl.id}'" in html
    claims = json.loads((out / "claims.json").read_text())
    assert set(claims["retrained (3 seeds)"]["per_seed"]) == {"42", "43", "44"}, "three seeds by default"
    ours = claims["retrained (3 seeds)"]["per_seed"]["42"]
    assert set(ours) == {c.id for c in CLAIMS}
    for cid, r in ours.items():
        assert r["verdict"] in (HOLDS, FAILS, NOT_MEASURED, "at the edge") or r["verdict"] in (
            "not bound by 400", "not finished by 400"), r
        if r["verdict"] != NOT_MEASURED:
            assert r["detail"], f"{cid} has a verdict without numbers"
    for line in md.splitlines():
        if line.startswith("![") and "](" in line:
            assert (out / line.split("](")[1].rstrip(")")).is_file()
    timing = json.loads((out / "timing.json").read_text())
    assert len(timing["phases"]["per_seed"]) == 3 and len(timing["predictors"]) > 5
    observed = any(seed[k] is not None for seed in timing["phases"]["per_seed"] for k in ("addition", "binding",
                                                                                          "refinement"))
    assert "Phase timing over seeds" in md
    assert (out / "figures" / "timing" / "phases.png").is_file() == observed, "a figure only when a phase was seen"
    saved = {d.name: (d / "analysis.json").stat().st_mtime_ns for d in (out / "runs").glob("seed-*")}
    lines: list[str] = []
    reproduce(out, quick=True, paper_checkpoints=None, log=lines.append)
    for seed in saved:
        assert any(line.startswith(f"reusing finished run {out / 'runs' / seed}") for line in lines), lines
        assert any(line.startswith(f"reusing analysis of {out / 'runs' / seed}") for line in lines), lines
    assert not any(line.startswith(("training", "analysing")) for line in lines), "nothing recomputed"
    assert saved == {d.name: (d / "analysis.json").stat().st_mtime_ns for d in (out / "runs").glob("seed-*")}


@pytest.mark.slow
def test_a_planted_failing_metric_flips_its_verdict(quick):
    out, res = quick
    md = res.markdown.read_text()
    run = out / "runs" / "seed-42"
    analysis = json.loads((run / "analysis.json").read_text())
    analysis["dynamics"]["phases"]["addition"] = 200  # planted: addition happened (C5 judges its final state)
    analysis["dynamics"]["final_exhaustive"]["0var_heldout_all"] = 0.995
    assert evaluate_claims(analysis)["C5"].verdict == HOLDS
    analysis["dynamics"]["final_exhaustive"]["0var_heldout_all"] = 0.5
    assert evaluate_claims(analysis)["C5"].verdict == FAILS
    assert "at 400 of the paper's 40,000 steps" in md, "a shorter run says so beside its verdicts"
    analysis["dynamics"]["phases"].update(binding=300, binding_reached=300, binding_rise=0.5, binding_from=0.4,
                                          binding_to=0.9)  # planted: the seed bound
    for part in ("final", "final_heldout"):  # planted: a shared representation, well above both nulls
        analysis["representation"][part].update(matched_mean=0.99, shuffled_mean=0.1, centred_matched_mean=0.95,
                                                 centred_shuffled_mean=0.0, centred_other_sum_mean=0.3)
    for form in ("1var", "2var"):
        analysis["fourier"]["shared"][form]["mean_corr_with_0var"] = 0.99
    assert evaluate_claims(analysis)["C8"].verdict == HOLDS
    analysis["representation"]["final_heldout"]["centred_other_sum_mean"] = 0.9
    assert evaluate_claims(analysis)["C8"].verdict == FAILS
    del analysis["fourier"]
    assert evaluate_claims(analysis)["C9"].verdict == NOT_MEASURED


def test_aggregate_over_seeds():
    from assign_add.report.claims import ClaimResult

    agg = aggregate([ClaimResult("C5", 0.99, "x", HOLDS), ClaimResult("C5", 0.97, "y", FAILS)])
    assert agg.verdict == MIXED and "1 of 2" in agg.reason
    assert agg.mean == pytest.approx(0.98) and agg.sd == pytest.approx(0.01414, abs=1e-4)
    assert aggregate([ClaimResult("C6", None, "", NOT_MEASURED, "no sweep")]).verdict == NOT_MEASURED


@pytest.mark.skipif(CHROMIUM is None, reason="Debian's chromium is not installed (.ci/run installs it)")
@pytest.mark.slow
def test_report_renders_in_headless_chromium(quick):
    from playwright.sync_api import sync_playwright

    out, res = quick
    errors: list[str] = []
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=[
            "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
            "--disable-component-update", "--disable-sync", "--no-first-run"])
        page = browser.new_page()
        page.on("pageerror", lambda e: errors.append(str(e)))
        page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
        page.goto(Path(res.html).resolve().as_uri())
        page.wait_for_load_state("load")
        assert page.locator("#claims").is_visible()
        assert page.locator("#claims tr.claim").count() == len(CLAIMS)  # the binding row and C1–C11
        figures = page.locator("div.figure")
        assert figures.count() >= 10
        for i in range(figures.count()):
            fig = figures.nth(i)
            fig.scroll_into_view_if_needed()
            box = fig.locator(".main-svg").first.bounding_box()
            assert box is not None and box["width"] > 100 and box["height"] > 100, fig.get_attribute("title")
            drawn = fig.locator("g.trace path[d]").count() + fig.locator("g.hm image").count()
            assert drawn >= 1, f"{fig.get_attribute('title')} has no drawn trace"
        page.screenshot(path=str(out / "report.png"), full_page=False)
        browser.close()
    assert not errors, errors


def test_sweep_results_supply_c6_and_c7():
    """Each C6/C7 verdict flips with its evidence: threshold near / far, points converged / still rising,
    sweep finished / unfinished."""
    from assign_add.report.claims import NOT_CONVERGED, c6, c7

    sweep = {"threshold": {"estimate": 0.27, "low": 0.22, "high": 0.31, "method": "bootstrap over seeds",
                           "logistic": 0.26},
             "spec": {"param": "task.f", "values": [0.1] * 20, "seeds": [42, 43], "steps": 30000},
             "protocol": "authors' f sweep", "unfinished": [],
             "convergence": {"margin": 0.02, "near_values": [0.21, 0.26], "unconverged_near": []}}
    res = c6({"sweeps": {"f": sweep}})
    assert res.verdict == HOLDS and "authors' f sweep" in res.detail
    far = dict(sweep, threshold=dict(sweep["threshold"], estimate=0.7, low=0.65, high=0.75))
    assert c6({"sweeps": {"f": far}}).verdict == FAILS
    rising = dict(far, convergence=dict(sweep["convergence"], unconverged_near=[0.6]))
    flagged = c6({"sweeps": {"f": rising}})
    assert flagged.verdict == FAILS and flagged.reason.startswith(f"{NOT_CONVERGED} at 30,000 steps"), \
        "the convergence flag beside the verdict, never instead of it"
    rows = [{"value": v, "two_var_share": share, "unbound_seeds": [43] if v == 0.1 else []}
            for v, share in ((0.1, 0.03), (0.2, 0.06), (0.3, 0.09))]
    r = c7({"sweeps": {"r": dict(sweep, rows=rows, threshold=dict(sweep["threshold"], estimate=0.25, low=0.2, high=0.3),
                                 thresholds_by_level={"0.5": {"estimate": 0.12, "low": 0.1, "high": 0.15}})}})
    assert "a 2-var share of 0.075 of training rows" in r.detail, "r also as the 2-var share (interpolated)"
    assert "runs that never bound: 0.1 (seed 43)" in r.detail and "at 50%: 0.120" in r.detail
    never = dict(sweep, threshold=dict(sweep["threshold"], estimate=None, low=None, high=None))
    assert c6({"sweeps": {"f": never}}).verdict == FAILS
    assert c6({"sweeps": {"f": dict(sweep, unfinished=[{"value": 0.5, "seed": 42}])}}).verdict == NOT_MEASURED
    assert c7({}).verdict == NOT_MEASURED


def test_a_wide_or_missing_threshold_interval_is_not_resolved():
    """Noise cannot pass C6/C7: an interval wider than the band it must overlap, or none at all (one seed
    per value), reads 'not resolved' -- even where it overlaps the paper's value."""
    from assign_add.report.claims import NOT_RESOLVED, c7

    def r_sweep(estimate, low, high):
        return {"sweeps": {"r": {"threshold": {"estimate": estimate, "low": low, "high": high, "logistic": estimate,
                                               "method": "bootstrap over seeds"},
                                 "spec": {"param": "task.r", "values": [0.1] * 20, "seeds": [42], "steps": 30000},
                                 "unfinished": [], "convergence": {"margin": 0.02, "unconverged_near": []}}}}

    wide = c7(r_sweep(0.2, 0.113, 0.371))  # overlaps [0.1, 0.3], but 0.258 wide
    assert wide.verdict == NOT_RESOLVED and "0.258 wide, more than 0.2" in wide.reason
    assert c7(r_sweep(0.2, None, None)).verdict == NOT_RESOLVED
    assert c7(r_sweep(0.2, 0.12, 0.31)).verdict == HOLDS  # 0.19 wide, overlapping
    assert c7(r_sweep(0.5, 0.41, 0.6)).verdict == FAILS  # 0.19 wide, outside [0.1, 0.3]


def test_claim_sections_in_order_and_every_seed_listed():
    from assign_add.report.claims import ClaimResult
    from assign_add.report.render import CLAIM_FIGURES, Source, claim_bullets

    assert list(CLAIM_FIGURES) == (["B", "C1", "C1b", "C2a", "C2b", "C2c", "C3", "C3b", "C4", "C5", "C5b", "C5c"]
                                   + [f"C{i}" for i in range(6, 14)])
    res = [{"C5": ClaimResult("C5", v, f"{v:.4f}", verdict)} for v, verdict in ((0.99, HOLDS), (0.90, FAILS))]
    src = Source("retrained (2 seeds)", [Path("runs/seed-42"), Path("runs/seed-43")], res, None, [])
    bullets = claim_bullets(src, "C5")
    assert [label for label, _ in bullets] == ["retrained (2 seeds), seed-42", "retrained (2 seeds), seed-43"]
    assert bullets[1][1].startswith(FAILS) and "0.9000" in bullets[1][1]


def test_phase_notes_give_the_same_binding_step_as_the_binding_row(tmp_path):
    """A run whose spike ends at 2,900 at 0.84 and reaches 90 % at 3,000 is "bound at 3,000" in the B row;
    the note on where our phases differ must say 3,000 too, and name the spike's end beside it."""
    from assign_add.reproduce import phase_notes
    from assign_add.report.render import Source

    phases = {"addition": 500, "binding": 2900, "binding_rise": 0.32, "binding_from": 0.52, "binding_to": 0.84,
              "binding_reached": 3000, "refinement": None, "refinement_stable": None, "in_paper_order": True,
              "notes": [], "last_step": 40000}
    run = tmp_path / "seed-42"
    run.mkdir()
    (run / "analysis.json").write_text(json.dumps({"dynamics": {"phases": phases}}))
    (note,) = phase_notes([Source("ours", [run], [], None, [])])
    assert "bound at step 3,000 (1-var held-out ≥ 90%; the spike's interval ends at 2,900" in note
    assert "refinement at none by the last step" in note


def test_each_source_says_how_its_runs_were_trained():
    """The report's header gives every source's steps and precision from its runs' configs, beside the
    authors' protocol."""
    from assign_add import config as config_mod
    from assign_add.report.render import Source

    cfgs = [config_mod.resolve("paper", overrides=[f"train.seed={s}", "train.precision=bf16"]) for s in (1, 2)]
    ours = Source("ours", [Path("a"), Path("b")], [{}, {}], None, [config_mod.dumps(c) for c in cfgs])
    assert ours.training() == "2 runs: 40,000 steps, bf16 autocast"
    short = config_mod.resolve("paper", overrides=["train.steps=20000", "train.precision=fp32"])
    assert Source("x", [Path("a")], [{}], None, [config_mod.dumps(short)]).training() == "1 run: 20,000 steps, float32"
    assert Source("sweep", [Path("a")], [{}], None, []).training() == "1 run"


def test_first_screen_one_line_per_claim_with_the_committed_many_seed_rates(tmp_path):
    from test_claims import build, never_binding, raw_evidence

    from assign_add.report.claims import CLAIMS, aggregate, evaluate_claims
    from assign_add.report.render import Heading, Source, Table, sections
    from assign_add.report.summary import load_many_seeds

    def without_sweeps(a: dict) -> dict:  # as the main job: no f or r sweep, so C6 and C7 are not measured
        a.pop("sweeps")
        return a

    seeds = [evaluate_claims(without_sweeps(build(ev))) for ev in (raw_evidence(), never_binding(raw_evidence()))]
    agg = {cid: aggregate([r[cid] for r in seeds]) for cid in seeds[0]}
    ours = Source("retrained (2 seeds)", [Path("a"), Path("b")], seeds, agg, ["[train]\nsteps = 3000\n"])
    many_dir = tmp_path / "many"
    many_dir.mkdir()
    (many_dir / "claims.json").write_text(json.dumps({"retrained (16 seeds)": {"aggregate": {
        cid: {"verdict": "mixed", "holds": 3, "judged": 12} for cid in agg}}}))
    many = load_many_seeds(many_dir)
    doc = sections([ours], [], {}, None, None, None, many)
    first = next(i for i, b in enumerate(doc) if isinstance(b, Heading) and b.text.startswith("Summary"))
    claims_at = next(i for i, b in enumerate(doc) if isinstance(b, Heading) and b.text == "Claims")
    assert first < claims_at, "the summary comes before the long tables"
    table = doc[first + 1]
    assert isinstance(table, Table) and [r[0].split(":")[0] for r in table.rows] == [c.id for c in CLAIMS]
    c5 = next(r for r in table.rows if r[0].startswith("C5:"))
    assert c5[2] == "holds: 2 of 2 judged (0.34–1.00)" and c5[3] == "3 of 12 (0.09–0.53)"
    # Fisher's exact test on [[2, 0], [3, 9]]: two-sided p = 10/91 = 0.11
    assert c5[4] == "consistent (Fisher p = 0.11, n = 2 and 12)"
    c6 = [b for b in doc if type(b).__name__ == "Bullets" and any("C6" in t for _, t in b.items)]
    assert c6 and "assign-add sweep --preset f" in str(c6[0].items)


def test_many_seeds_folder_named_by_the_user_must_hold_claims(tmp_path):
    from assign_add.report.summary import load_many_seeds
    from assign_add.run import RunError

    assert load_many_seeds(tmp_path) is None
    with pytest.raises(RunError, match="no claims.json"):
        load_many_seeds(tmp_path, required=True)
