"""Rescue arms against the default (studies/rescue.py): planted studies whose verdicts must flip."""

from __future__ import annotations

import json
from dataclasses import asdict

import pytest
from scipy.stats import fisher_exact
from typer.testing import CliRunner

from assign_add.cli import app
from assign_add.stats import fisher_power, holm
from assign_add.studies.rescue import extend_arm, rescue, rescue_table
from assign_add.studies.survival import SeedRow

SEEDS = range(132, 164)  # 32 seeds
TRAINING = {"compile": True, "precision": "fp32"}


def _study(n_bound: int, step: int = 3000, seeds=SEEDS, unfinished: tuple[int, ...] = ()) -> dict:
    """The first ``n_bound`` seeds bound at ``step``, the others trained to 40,000 unbound."""
    rows = [SeedRow(s, step if i < n_bound else None, step if i < n_bound else 40_000, {}, f"seed-{s}",
                    finished=s not in unfinished) for i, s in enumerate(seeds)]
    return {"horizon": 40_000, "planned": len(rows), "training": TRAINING, "rows": [asdict(r) for r in rows]}


def test_holm_exact_values():
    assert holm([0.01, 0.04, 0.03]) == pytest.approx([0.03, 0.06, 0.06])
    assert holm([0.2, None, 0.01]) == [pytest.approx(0.2), None, pytest.approx(0.02)]
    assert holm([0.6, 0.7]) == [1.0, 1.0]


def test_fisher_power_exact_cases():
    assert fisher_power(10, 10, 1.0, 0.0, 0.05) == pytest.approx(1.0)  # every draw is 10/10 against 0/10
    assert fisher_power(1, 1, 1.0, 0.0, 0.05) == 0.0  # 1/1 against 0/1 gives p = 1
    assert fisher_power(16, 16, 0.95, 0.80, 0.05) < fisher_power(32, 32, 0.95, 0.80, 0.05) < 1.0


def test_planted_arms_get_their_verdicts():
    default = _study(22)
    arms = {"all": _study(32, 5000), "same": _study(22), "worse": _study(8), "most": _study(30)}
    res = {r.name: r for r in rescue_table(default, arms)}
    p_all = fisher_exact([[32, 0], [22, 10]]).pvalue
    assert res["all"].fisher_p == pytest.approx(p_all)
    assert res["all"].verdict == "reaches the goal" and res["all"].holm_p < 0.05
    assert res["most"].verdict == "better than the default"  # 30/32 = 0.94 is short of 0.95
    assert res["worse"].verdict == "worse than the default"
    assert res["same"].verdict == "no detectable difference" and res["same"].fisher_p == pytest.approx(1.0)
    assert res["same"].logrank_p == pytest.approx(1.0) and res["worse"].logrank_holm_p < 0.05
    assert res["all"].cost_steps == 5000 and res["all"].default_cost_steps == (22 * 3000 + 10 * 40_000) / 32


def test_the_goal_needs_32_seeds():
    default, arm = _study(6, seeds=range(16)), _study(16, seeds=range(16))
    (r,) = rescue_table(default, {"a": arm})
    assert r.known == 16 and r.bound == 16 and r.verdict == "better than the default"


def test_comparison_is_on_shared_finished_seeds():
    default = _study(22)
    arm = _study(16, seeds=range(132, 148), unfinished=(147,))
    (r,) = rescue_table(default, {"a": arm})
    assert r.seeds == 16 and r.known == 15 and r.default_known == 15
    assert r.default_bound == 15  # the default's first 22 seeds bound, 132-146 among them


def test_extension_rule():
    default = _study(12, seeds=range(16))
    assert extend_arm(_study(12, seeds=range(16)), default)
    assert not extend_arm(_study(11, seeds=range(16)), default)


def test_refusals(tmp_path):
    default = _study(22)
    with pytest.raises(Exception, match="horizon"):
        rescue_table(default, {"a": {**_study(22), "horizon": 10_000}})
    with pytest.raises(Exception, match="trained differently"):
        rescue_table(default, {"a": {**_study(22), "training": {"compile": False, "precision": "fp32"}}})
    d = tmp_path / "d.json"
    d.write_text(json.dumps(default))
    res = CliRunner().invoke(app, ["survival-rescue", str(d), "--arm", "nameless"])
    assert res.exit_code == 2 and "NAME=PATH" in res.output


def test_cli_writes_the_table(tmp_path):
    d, a = tmp_path / "d.json", tmp_path / "a.json"
    d.write_text(json.dumps(_study(22)))
    a.write_text(json.dumps(_study(32, 5000)))
    res = CliRunner().invoke(app, ["survival-rescue", str(d), "--arm", f"wd3={a}", "--out", str(tmp_path / "r.json")])
    assert res.exit_code == 0, res.output
    assert "wd3: 32/32 bound" in res.output and "reaches the goal" in res.output
    saved = json.loads((tmp_path / "r.json").read_text())
    assert saved["arms"][0]["verdict"] == "reaches the goal" and "Holm" in saved["rule"]
    assert saved == json.loads(json.dumps(rescue(d, {"wd3": a})))  # the file is the command's result
