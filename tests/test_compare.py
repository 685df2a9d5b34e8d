"""Two survival studies compared (studies/compare.py): Fisher on bound-by-horizon, log-rank on time to binding."""

from __future__ import annotations

import json
from dataclasses import asdict

import pytest
from typer.testing import CliRunner

from assign_add.cli import app
from assign_add.studies.compare import compare, compare_line, conditions, logrank_p
from assign_add.studies.survival import SeedRow


def _rows(seeds, bound_at):
    """One row per seed; ``bound_at(i)`` gives the binding step or None (censored at 40,000)."""
    return [SeedRow(s, bound_at(i), bound_at(i) or 40_000, {}, f"s{s}") for i, s in enumerate(seeds)]


def _write(path, rows, horizon=40_000):
    path.write_text(json.dumps({"horizon": horizon, "planned": len(rows), "rows": [asdict(r) for r in rows]}))
    return path


def test_identical_studies_show_no_difference(tmp_path):
    rows = _rows(range(10), lambda i: 2000 + 500 * i if i < 6 else None)
    c = compare(_write(tmp_path / "a.json", rows), _write(tmp_path / "b.json", rows))
    assert c["fisher_p"] == pytest.approx(1.0) and c["logrank_p"] == pytest.approx(1.0)
    assert c["verdict"] == "no detectable difference"
    assert (c["study_a"]["bound"], c["study_a"]["known"], c["study_a"]["km_median"]) == (6, 10, 4000)
    assert c["paired"] == {"seeds": 10, "known": 10, "same_fate": 10, "bound_in_both": 6, "median_step_change": 0,
                           "early_compared": 0, "early_identical": 0, "same_conditions": 0,
                           "same_conditions_differ": []}
    assert "6 of 10 bound by 40,000" in compare_line(c) and "no detectable difference" in compare_line(c)


def test_all_bound_early_against_none_bound_differs(tmp_path):
    """12 of 12 against 0 of 12: Fisher's two-sided p = 2 / C(24, 12) ≈ 7.4e-7; log-rank far below 0.05."""
    a = _write(tmp_path / "a.json", _rows(range(12), lambda i: 3000))
    b = _write(tmp_path / "b.json", _rows(range(100, 112), lambda i: None))
    c = compare(a, b)
    assert c["fisher_p"] == pytest.approx(2 / 2704156, rel=1e-6)
    assert c["logrank_p"] < 1e-4 and c["verdict"] == "differs"
    assert c["paired"]["seeds"] == 0 and "Paired" not in compare_line(c)


def test_same_fraction_bound_but_later_is_caught_by_the_log_rank_alone():
    early = _rows(range(12), lambda i: 2000 + 100 * i)
    late = _rows(range(12), lambda i: 30_000 + 100 * i)
    assert logrank_p(early, late) < 1e-4
    assert logrank_p(_rows(range(3), lambda i: None), _rows(range(3), lambda i: None)) is None


def test_a_run_still_training_is_censored_not_dropped(tmp_path):
    """Dropping unfinished runs would keep only the ones that bound (they stop first); they count as censored."""
    rows = _rows(range(6), lambda i: 3000 if i < 3 else None)
    running = rows[:3] + [SeedRow(s, None, 9000, {}, f"s{s}", finished=False) for s in range(3, 6)]
    c = compare(_write(tmp_path / "a.json", rows), _write(tmp_path / "b.json", running))
    assert c["study_b"]["runs"] == 6 and c["study_b"]["known"] == 3  # outcome at 40,000 unknown for the three
    assert c["logrank_p"] == pytest.approx(1.0)  # same events; censoring at 9,000 vs 40,000 after the last event


def test_refusals_write_nothing(tmp_path):
    rows = _rows(range(4), lambda i: 3000)
    a, short = _write(tmp_path / "a.json", rows), _write(tmp_path / "s.json", rows, horizon=20_000)
    runner = CliRunner()
    for other, message in ((short, "horizon 20,000"), (tmp_path / "none.json", "no such file")):
        res = runner.invoke(app, ["survival-compare", str(a), str(other), "--out", str(tmp_path / "c.json")])
        assert res.exit_code == 2 and message in res.output, res.output
    assert not (tmp_path / "c.json").exists()
    res = runner.invoke(app, ["survival-compare", str(a), str(a), "--out", str(tmp_path / "c.json")])
    assert res.exit_code == 0 and json.loads((tmp_path / "c.json").read_text())["verdict"] == "no detectable difference"


def test_studies_trained_differently_are_refused_unless_allowed(tmp_path):
    rows = _rows(range(4), lambda i: 3000)
    a = _write(tmp_path / "a.json", rows)
    b = tmp_path / "b.json"
    data = json.loads(a.read_text())
    b.write_text(json.dumps({**data, "training": {"compile": True, "precision": "bf16"}}))
    res = CliRunner().invoke(app, ["survival-compare", str(a), str(b)])
    assert res.exit_code == 2 and "compiled bf16" in res.output and "--allow-different-training" in res.output
    res = CliRunner().invoke(app, ["survival-compare", str(a), str(b), "--allow-different-training"])
    assert res.exit_code == 0 and "trained differently" in res.output


def test_training_read_from_an_older_command():
    from assign_add.studies.survival import training_of

    assert training_of({"command": "assign-add survival --seeds 1-2"}) == {"compile": False, "precision": "fp32",
                                                                          "inferred": True}
    assert training_of({"command": "assign-add survival train.precision=bf16 train.compile=true"})["precision"] == "bf16"
    assert training_of({"training": {"compile": True, "precision": "fp32"}}) == {"compile": True, "precision": "fp32"}


def _run_with_provenance(folder, cpu: str, commit: str = "0123abc"):
    """A run folder holding only what :func:`conditions` reads: its config and one training segment."""
    from assign_add.config import resolve, save

    folder.mkdir(parents=True)
    save(resolve("tiny"), folder / "config.toml")
    (folder / "provenance.jsonl").write_text(json.dumps(
        {"start_step": 0, "commit": commit, "cpu": cpu, "torch": "2.13.0+cpu", "threads": 1, "device": "cpu"}) + "\n")


def test_same_seed_code_and_machine_must_give_the_same_outcome(tmp_path):
    """Seeds 1-3 in two studies under identical recorded conditions, seed 2 binding at another step there: the
    comparison names it; seed 3, trained on another CPU in study B, is not counted as the same conditions."""
    for study in ("a", "b"):
        for seed in (1, 2, 3):
            _run_with_provenance(tmp_path / study / f"seed-{seed}", "CPU-X" if (study, seed) != ("b", 3) else "CPU-Y")
    early = {"param_norm": 41.5}
    a = [SeedRow(s, 3000, 3000, dict(early), f"elsewhere/seed-{s}") for s in (1, 2, 3)]
    b = [SeedRow(1, 3000, 3000, dict(early), "seed-1"), SeedRow(2, 3400, 3400, {"param_norm": 41.6}, "seed-2"),
         SeedRow(3, 5000, 5000, dict(early), "seed-3")]
    (tmp_path / "a").joinpath("survival.json").write_text(json.dumps(
        {"horizon": 40_000, "planned": 3, "rows": [asdict(r) for r in a]}))
    (tmp_path / "b").joinpath("survival.json").write_text(json.dumps(
        {"horizon": 40_000, "planned": 3, "rows": [asdict(r) for r in b]}))
    c = compare(tmp_path / "a", tmp_path / "b")
    p = c["paired"]
    assert (p["same_conditions"], p["same_conditions_differ"]) == (2, [2])
    assert (p["early_compared"], p["early_identical"]) == (3, 2)
    assert "outcome differs in seed 2: not reproducible" in compare_line(c)
    assert "identical to the last digit in 2 of 3" in compare_line(c)
    _run_with_provenance(tmp_path / "c" / "seed-1", "CPU-X", commit="0123abc+dirty")
    assert conditions(tmp_path / "a", a[0]) is not None, "a clean commit is a condition"
    assert conditions(tmp_path / "c", b[0]) is None, "an edited tree says nothing about the code"


def test_a_shorter_horizon_censors_both_studies(tmp_path):
    long = _write(tmp_path / "long.json", _rows(range(6), lambda i: [2000, 4000, 12_000, 30_000, None, None][i]))
    short_rows = [SeedRow(s, b, b or 10_000, {}, f"s{s}") for s, b in zip(range(6), [2000, 4000, None, None, None, 9000])]
    short = _write(tmp_path / "short.json", short_rows, horizon=10_000)
    with pytest.raises(Exception, match="--horizon 10,000"):
        compare(long, short)
    c = compare(long, short, horizon=10_000)
    assert c["horizon"] == 10_000
    assert (c["study_a"]["bound"], c["study_a"]["known"]) == (2, 6)  # 12,000 and 30,000 are not seen by 10,000
    assert (c["study_b"]["bound"], c["study_b"]["known"]) == (3, 6)
    assert c["paired"]["same_fate"] == 5  # seed 5: unbound by 10,000 in A, bound at 9,000 in B
    with pytest.raises(Exception, match="at most both"):
        compare(long, short, horizon=20_000)
