"""The report's sections beyond the paper, from hand-made experiment folders."""

from __future__ import annotations

import json

import pytest

from assign_add.report.studies import study_sections, load_experiments
from assign_add.report.render import to_markdown
from assign_add.run import RunError

SURVIVAL = {"command": "assign-add survival --seeds 1-4", "planned": 4, "finished": 3, "horizon": 40_000,
            "bound_by": {"20000": {"bound": 2, "watched": 4, "p": 0.5, "ci95": [0.15, 0.85]}},
            "survival": {"n": 4, "median": 3_000.0, "curve": [[2_000.0, 0.75], [3_000.0, 0.5]]},
            "predictor": None, "rows": [{"out": "nowhere/seed-1"}]}
BRANCHES = {"command": "assign-add branches p --at 0", "planned": 2, "finished": 2, "horizon": 10_000,
            "table": [{"parent": "runs/p", "step": 500, "watched": 2, "bound": 1, "p_bound": 0.5,
                       "ci95": [0.09, 0.91]},
                      {"parent": "runs/p", "step": 500, "arm": "mlp2<-q", "watched": 2, "bound": 0, "p_bound": 0.0,
                       "ci95": [0.0, 0.66]}], "rows": []}
LLC = {"run": "runs/p", "settings": {"lr": 1e-4, "localization": 1000.0, "n_beta": 46.2, "num_chains": 4,
                                     "num_draws": 200, "num_burnin_steps": 50},
       "data": {"sequences": 4096}, "phases": {"binding": 200},
       "rows": [{"step": 100, "llc": 5.0}, {"step": 200, "llc": 9.0}]}


def _folders(tmp_path):
    out = {}
    for kind, data, name in (("survival", SURVIVAL, "survival.json"), ("branches", BRANCHES, "branches.json"),
                             ("llc", LLC, "llc.json")):
        (tmp_path / kind).mkdir()
        (tmp_path / kind / name).write_text(json.dumps(data))
        out[kind] = tmp_path / kind
    return out


def test_each_experiment_becomes_a_section_stating_its_command_and_numbers(tmp_path):
    md = to_markdown(study_sections(load_experiments(_folders(tmp_path))), tmp_path / "report")
    assert md.index("Time to binding") < md.index("Branch-and-replay") < md.index("learning coefficient")
    assert "`assign-add survival --seeds 1-4`: 3 of 4 seeds finished, horizon 40,000 steps" in md
    assert "| 20,000 | 2 of 4 | 0.50 | 0.15–0.85 |" in md and "median binding step: 3,000" in md
    assert "not fitted yet" in md, "no predictor without enough runs, and the report says so"
    assert "| p | 500 | data | 1 of 2 | 0.50 | 0.09–0.91 |" in md, "a summary written before arms reads as the data arm"
    assert "| p | 500 | mlp2<-q | 0 of 2 | 0.00 | 0.00–0.66 |" in md
    assert "binding at 200: LLC 5.0 at 100 -> 9.0 at 200 (+4.0)" in md, "landmarks computed when not saved"


def test_a_folder_without_its_summary_is_a_one_line_error(tmp_path):
    with pytest.raises(RunError, match="no survival.json"):
        load_experiments({"survival": tmp_path})


def test_rescue_json_becomes_a_table_of_arms(tmp_path):
    """A rescue table computed by the study code from planted summaries (32 of 32 against 22 of 32) reads, row
    for row, as the report's section."""
    from dataclasses import asdict

    from assign_add.studies.rescue import rescue
    from assign_add.studies.survival import SeedRow

    def study(n_bound: int) -> dict:
        rows = [SeedRow(s, 3000 if i < n_bound else None, 3000 if i < n_bound else 40_000, {}, f"seed-{s}")
                for i, s in enumerate(range(132, 164))]
        return {"horizon": 40_000, "planned": 32, "training": {"compile": True, "precision": "fp32"},
                "rows": [asdict(r) for r in rows]}

    for name, data in (("default", study(22)), ("wd3", study(32))):
        (tmp_path / f"{name}.json").write_text(json.dumps(data))
    (tmp_path / "rescue").mkdir()
    res = rescue(tmp_path / "default.json", {"wd3": tmp_path / "wd3.json"})
    (tmp_path / "rescue" / "rescue.json").write_text(json.dumps(res))
    md = to_markdown(study_sections(load_experiments({"rescue": tmp_path / "rescue"})), tmp_path / "report")
    arm = res["arms"][0]
    assert "Rescue: training changes against the default" in md
    assert (f"| wd3 | 32 of 32 | {arm['ci95'][0]:.2f}–1.00 | 22 of 32 | {arm['fisher_p']:.3g} | {arm['holm_p']:.3g} | "
            f"{arm['logrank_holm_p']:.3g} | 3,000 | 14,562 | {arm['power_at_goal']:.2f} | reaches the goal |") in md
    assert arm["default_cost_steps"] == (22 * 3000 + 10 * 40_000) / 32  # 14,562.5, printed to the step
