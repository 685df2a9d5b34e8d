"""Phase timing over seeds on hand-made analyses: the distribution, a planted predictor, a failed seed."""

from __future__ import annotations

import pytest

from assign_add import stats
from assign_add.analysis import timing

CHECKPOINTS = list(range(0, 8001, 250))


def _analysis(binding: int | None, lead: int, noise_step: int) -> dict:
    """A run whose qk2_identity crosses half its range ``lead`` steps before binding, and whose
    routing mass crosses at an unrelated ``noise_step``; ``binding=None``: binding never reached."""
    cross = (binding if binding is not None else 6000) - lead
    phases = {"addition": 500, "binding": binding, "binding_reached": binding,
              "refinement": None if binding is None else binding + 3000}
    by_att = {str(c): {"routing_mass": 1.0 if c >= noise_step else 0.0} for c in CHECKPOINTS}
    by_w = {str(c): {"qk2_identity": 1.0 if c >= cross else 0.0} for c in CHECKPOINTS}
    return {"dynamics": {"phases": phases, "steps": list(range(0, 8001, 100))}, "attention": {"by_step": by_att},
            "weights": {"by_step": by_w}}


def test_a_planted_predictor_is_found_and_a_failed_seed_is_missing():
    runs = [_analysis(b, 1000, n) for b, n in ((3000, 5000), (4000, 2000), (5000, 4000), (3500, 1000))]
    runs.append(_analysis(None, 1000, 3000))  # never bound: no binding or refinement step
    t = timing.timing(runs, reference={"dynamics": {"phases": {"addition": 1001, "binding": 5401,
                                                                "binding_reached": 5401, "refinement": 15401}}})
    assert [p["binding"] for p in t["phases"]["per_seed"]] == [3000, 4000, 5000, 3500, None]
    summary = t["phases"]["summary"]["binding"]
    assert (summary["n"], summary["missing"], summary["median"]) == (4, 1, 3750.0)
    assert t["best"]["measure"] == "qk2_identity" and t["best"]["rho"] == pytest.approx(1.0)
    noise = next(p for p in t["predictors"] if p["measure"] == "routing_mass")
    assert not noise["early_in_every_seed"], "it crosses after binding in some seeds"
    assert t["reference"]["binding"] == 5401


def test_crossing_step_goes_either_way_and_ignores_transients():
    assert timing.crossing_step([0, 1, 2, 3], [0.0, 0.2, 0.6, 1.0]) == 2
    assert timing.crossing_step([0, 1, 2, 3], [0.9, 0.8, 0.3, 0.1]) == 2, "a falling measure crosses downwards"
    assert timing.crossing_step([0, 1, 2, 3, 4], [0.0, 0.9, 0.1, 0.7, 1.0]) == 3, "the early spike does not count"
    assert timing.crossing_step([0, 1, 2], [0.5, 0.5, 0.5]) is None


def test_kaplan_meier_against_a_hand_computed_case():
    # binding at 2000, 3000, 4000, 5000; censored (not bound) at 5000 and 6000.  At risk / events:
    # 2000: 6/1 → 5/6; 3000: 5/1 → 4/6; 4000: 4/1 → 3/6; 5000: 3/1 (the seed censored at 5000 is
    # still at risk there) → 2/6.  Median: the first step with S ≤ 0.5, 4000.
    curve = stats.kaplan_meier([3000, 4000, 5000, 5000, 6000, 2000], [True, True, False, True, False, True])
    assert [t for t, _ in curve] == [2000, 3000, 4000, 5000]
    assert [s for _, s in curve] == pytest.approx([5 / 6, 4 / 6, 3 / 6, 2 / 6])
    assert stats.km_median(curve) == 4000
    assert stats.km_median(stats.kaplan_meier([1000, 9000, 9000], [True, False, False])) is None, "median beyond T"
    # 4 of 6: the Wilson 95 % interval (0.300, 0.903)
    assert timing.wilson_interval(4, 6) == pytest.approx((0.2999, 0.9032), abs=1e-3)


def test_the_survival_row_counts_unbound_seeds_as_censored_not_missing():
    runs = [_analysis(b, 1000, 1000) for b in (3000, 7000)] + [_analysis(None, 1000, 1000)] * 2
    km = timing.timing(runs)["phases"]["binding_survival"]
    assert (km["n"], km["bound"], km["censored_at"], km["horizon"]) == (4, 2, [8000], 8000)
    assert km["median"] == 7000, "S falls to 3/4 at 3,000 and 3/4 · 2/3 = 1/2 at 7,000; the binders alone say 5,000"
    assert timing.timing(runs)["phases"]["summary"]["binding"]["median"] == 5000.0


def test_survey_from_metrics_records_censors_the_run_that_never_binds():
    def records(heldout: list[float]) -> list[dict]:
        return [{"step": 100 * i, "acc": {"0var_train": 1.0 if i >= 5 else 0.1, "1var_heldout": h}}
                for i, h in enumerate(heldout)]

    binds = records([0.02, 0.1, 0.3, 0.3, 0.3, 0.35, 0.6, 0.95, 0.97, 0.98])
    never = records([0.02, 0.1, 0.3, 0.3, 0.31, 0.3, 0.32, 0.31, 0.3, 0.31])
    out = timing.survey({"a": binds, "b": never})
    assert out["per_run"]["a"]["binding"] == 700 and out["per_run"]["a"]["spike"] == [0.6, 0.95]
    assert out["per_run"]["b"]["binding"] is None and out["per_run"]["b"]["last_step"] == 900
    assert out["per_run"]["b"]["addition"] == 500 and out["per_run"]["b"]["spike"] is None
    km = out["binding_survival"]
    assert (km["bound"], km["n"], km["median"]) == (1, 2, 700), "S(700) = 1/2"


def test_bound_by_t_only_up_to_the_earliest_end_of_watching():
    per_seed = [{"binding": None, "last_step": 10_000}, {"binding": 20_000, "last_step": 40_000},
                {"binding": None, "last_step": 40_000}]
    km = timing.binding_survival(per_seed)
    assert (km["bound"], km["n"], km["horizon"]) == (0, 3, 10_000), "by 10,000 none had bound"
    assert km["median"] == 20_000, "S(20,000) = 1 − 1/2: the seed censored at 10,000 is no longer at risk"


def test_a_run_stopped_once_bound_does_not_shorten_the_horizon():
    """`survival` stops a run soon after it binds: seed A bound at 2,000 and was watched to 2,500,
    while B and C ran to 40,000.  By 40,000, A and B had bound and C had not: 2 of 3."""
    per_seed = [{"binding": 2_000, "last_step": 2_500}, {"binding": 30_000, "last_step": 30_300},
                {"binding": None, "last_step": 40_000}]
    km = timing.binding_survival(per_seed)
    assert (km["bound"], km["n"], km["horizon"]) == (2, 3, 40_000)
    everyone = timing.binding_survival(per_seed[:2])
    assert (everyone["bound"], everyone["horizon"]) == (2, 30_300), "all bound: watched up to the last step"
