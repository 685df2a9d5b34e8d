"""fp32 vs bf16 autocast answers (analysis.precision): arithmetic on a hand-made case, a random model, and the
authors' released checkpoints."""

from __future__ import annotations

import pytest

from assign_add.analysis import precision
from assign_add.config import preset
from assign_add.model import AssignAddTransformer
from assign_add.task.generator import Sampler


def test_criteria_on_hand_made_agreements():
    sets = [precision.SetAgreement("a", 100, 0.90, 0.905, 1), precision.SetAgreement("b", 100, 0.5, 0.5, 2)]
    a = precision.PrecisionAgreement(step=1, sets=sets, max_logit=64.0, max_logit_change=0.5, changed=3,
                                     max_changed_margin=1.0)
    assert a.margin_bound == pytest.approx(2 * 8 * 64.0 / 256)  # 4.0
    assert a.max_acc_change == pytest.approx(0.005) and a.within_rounding
    assert not precision.PrecisionAgreement(1, sets, 64.0, 0.5, 3, max_changed_margin=4.5).within_rounding
    moved = [precision.SetAgreement("a", 100, 0.90, 0.92, 2)]
    assert not precision.PrecisionAgreement(1, moved, 64.0, 0.5, 2, 1.0).within_rounding


def test_a_random_model_changes_only_near_tied_answers():
    cfg = preset("paper")
    model = AssignAddTransformer.from_config(cfg.model, cfg.task, seed=3)
    sets = {"x": Sampler(cfg.task, 3).batch(0, 2048), "y": Sampler(cfg.task, 4).batch(0, 512)}
    a = precision.precision_agreement(model, sets, step=0)
    assert [s.size for s in a.sets] == [2048, 512] and sum(s.changed for s in a.sets) == a.changed
    assert a.max_changed_margin <= a.margin_bound
    assert a.max_logit_change <= a.margin_bound / 2


@pytest.mark.slow
def test_released_checkpoints_change_only_answers_within_bf16_rounding(released_run):
    """At the binding checkpoint (5,401) and the last (40,000) every answer bf16 changes had an fp32 margin
    within the rounding bound; at 40,000 no set's accuracy moves by more than 0.01.  (At 5,401, mid-transition,
    1var_k_left moved by 0.032 on a machine of this type -- near-ties, all within the bound -- so the accuracy
    tolerance is not asserted there: README "Precision".)"""
    sets = released_run.eval_sets()
    for step in (5401, 40000):
        a = precision.precision_agreement(released_run.load_model(step), sets, step)
        assert a.changed > 0 and a.max_changed_margin <= a.margin_bound, step
    assert a.within_rounding and a.max_acc_change <= precision.ACC_TOLERANCE
