"""Phase timing over seeds on hand-made analyses: the distribution, a planted predictor, a failed seed."""

from __future__ import annotations

import pytest

from assign_add.analysis import timing

CHECKPOINTS = list(range(0, 8001, 250))


def _analysis(binding: int | None, lead: int, noise_step: int) -> dict:
    """A run whose qk2_identity crosses half its range ``lead`` steps before binding, and whose
    routing mass crosses at an unrelated ``noise_step``; ``binding=None``: binding never reached."""
    cross = (binding if binding is not None else 6000) - lead
    phases = {"addition": 500, "binding": binding if binding is not None else 400,
              "binding_reached": binding, "refinement": None if binding is None else binding + 3000}
    by_att = {str(c): {"routing_mass": 1.0 if c >= noise_step else 0.0} for c in CHECKPOINTS}
    by_w = {str(c): {"qk2_identity": 1.0 if c >= cross else 0.0} for c in CHECKPOINTS}
    return {"dynamics": {"phases": phases}, "attention": {"by_step": by_att}, "weights": {"by_step": by_w}}


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
