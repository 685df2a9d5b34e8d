"""Each measure on hand-built inputs with a known answer, and on the released checkpoints."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from assign_add.analysis import dynamics
from assign_add.analysis.attention import attention_scores, scores_from_patterns
from assign_add.analysis.fourier import fit_neurons
from assign_add.analysis.positions import find_positions
from assign_add.analysis.probes import ridge_probe_accuracy
from assign_add.analysis.representation import cosine
from assign_add.analysis.weights import identity_scores
from assign_add.config import preset
from assign_add.task.evalsets import build_pools
from assign_add.task.partitions import build_partitions
from assign_add.task.vocab import Vocab

from test_model import _previous_token_model


@pytest.fixture(scope="module")
def pools():
    cfg = preset("paper")
    cfg.task.eval_pool_size = 300
    return cfg, Vocab.from_task(cfg.task), build_pools(cfg.task, build_partitions(cfg.task))


def test_hand_set_previous_token_head_scores_one(pools):
    cfg, vocab, sets = pools
    result = attention_scores(_previous_token_model(), sets["2var_train"], vocab)
    assert result.prev_token == pytest.approx(1.0, abs=1e-6)
    assert result.prev_token_argmax == 1.0


def test_hand_made_routing_pattern(pools):
    """Layer-2 pattern that puts all mass of the final '=' on the bound value tokens: routing 1."""
    cfg, vocab, sets = pools
    batch = sets["2var_train"]
    pos = find_positions(batch, vocab)
    b, t = batch.tokens.shape
    last = np.zeros((b, t, t))
    last[np.arange(b), -1, pos.lhs_value_pos] += 0.5
    last[np.arange(b), -1, pos.rhs_value_pos] += 0.5
    first = np.zeros((b, t, t))
    first[pos.value_rows, pos.value_pos, pos.var_pos] = 1.0
    lpos, rpos = vocab.operand_positions()
    first[:, -1, lpos] = first[:, -1, rpos] = 0.5
    res = scores_from_patterns(first, last, batch, vocab)
    assert (res.prev_token, res.eq_to_operands, res.routing_acc, res.routing_mass) == (1.0, 1.0, 1.0, 1.0)
    assert (res.routing_acc_2var, res.summand_routing, res.summand_mass) == (1.0, 1.0, 1.0)
    swapped = np.roll(last, 1, axis=2)  # everything one key to the right: wrong tokens
    assert scores_from_patterns(first, swapped, batch, vocab).routing_acc == 0.0


def test_hand_made_summand_routing_in_one_variable_sequences(pools):
    """1-var sequences whose final '=' attends 0.5 to the constant operand and 0.4 to the bound value
    (the layer-2 pattern of the released run): the bound-values-only routing scores every one a miss,
    the summand routing a hit; moving the 0.4 to a wrong key makes both miss."""
    cfg, vocab, sets = pools
    batch = sets["1var_train"]
    pos = find_positions(batch, vocab)
    lpos, rpos = vocab.operand_positions()
    b, t = batch.tokens.shape
    var_left = pos.lhs_value_pos >= 0
    bound = np.where(var_left, pos.lhs_value_pos, pos.rhs_value_pos)
    constant = np.where(var_left, rpos, lpos)
    last = np.zeros((b, t, t))
    last[np.arange(b), -1, constant] = 0.5
    last[np.arange(b), -1, bound] = 0.4
    first = np.zeros((b, t, t))
    res = scores_from_patterns(first, last, batch, vocab)
    assert (res.routing_acc, res.routing_acc_1var, res.summand_routing) == (0.0, 0.0, 1.0)
    assert res.summand_mass == pytest.approx(0.9) and np.isnan(res.routing_acc_2var)
    wrong = last.copy()
    wrong[np.arange(b), -1, bound] = 0.0
    wrong[np.arange(b), -1, 0] = 0.4  # position 0 is a padding or assignment token, never a summand
    assert scores_from_patterns(first, wrong, batch, vocab).summand_routing == 0.0


def test_hand_made_fourier_neuron():
    n = np.arange(59)[:, None]
    m = np.arange(59)[None, :]
    neuron = np.cos(2 * np.pi * 9 * n / 59 + 0.3) + np.cos(2 * np.pi * 9 * m / 59 - 1.1)
    other = 2.0 * np.cos(2 * np.pi * 17 * n / 59 - 0.5) + 0.5 * np.sin(2 * np.pi * 17 * m / 59)
    rng = np.random.default_rng(0)
    noise = rng.normal(size=(59, 59))
    fit = fit_neurons(np.stack([neuron, other, noise], axis=-1))
    assert fit.frequency[0] == 9 and fit.fve[0] >= 0.99
    assert fit.alpha[0] == pytest.approx(0.3, abs=1e-9) and fit.beta[0] == pytest.approx(-1.1, abs=1e-9)
    assert fit.amp_n[0] == pytest.approx(1.0) and fit.amp_m[0] == pytest.approx(1.0)
    assert fit.frequency[1] == 17 and fit.fve[1] >= 0.99 and fit.amp_n[1] == pytest.approx(2.0)
    assert fit.fve[2] < 0.2, "noise is not a frequency neuron"


def test_identity_qk_scores_one_random_near_chance():
    assert identity_scores(np.eye(12) * 3.0 + 0.1)[0] == 1.0
    rng = np.random.default_rng(0)
    scores = [identity_scores(rng.normal(size=(12, 12)))[0] for _ in range(500)]
    assert abs(np.mean(scores) - 1 / 12) < 0.02


def test_probe_recovers_a_planted_linear_code():
    rng = np.random.default_rng(0)
    labels = rng.integers(0, 59, size=4000)
    codebook = rng.normal(size=(59, 128))
    x = codebook[labels] + 0.05 * rng.normal(size=(4000, 128))
    assert ridge_probe_accuracy(x, labels, 59) > 0.99
    assert ridge_probe_accuracy(rng.normal(size=(4000, 128)), labels, 59) < 0.1


@settings(max_examples=50, deadline=None)
@given(st.lists(st.floats(-100, 100), min_size=3, max_size=50), st.floats(0.01, 100))
def test_cosine_properties(v, scale):
    a = np.asarray(v)[None]
    if np.linalg.norm(a) < 1e-6:
        return
    assert cosine(a, a)[0] == pytest.approx(1.0)
    assert cosine(a, scale * a)[0] == pytest.approx(1.0)
    assert cosine(a, -a)[0] == pytest.approx(-1.0)


def test_phase_detection_on_planted_curves():
    steps = list(range(0, 3001, 100))
    s = np.asarray(steps)
    curves = dynamics.Curves(steps, {
        "0var_train": list(np.clip(s / 400, 0, 1)),
        "1var_heldout": list(np.where(s >= 1200, 0.97, 0.3)),
        "1var_forbidden": list(np.where(s >= 2000, 1.0, np.where(s >= 1200, 0.1, 0.3))),
        "2var_forbidden1": list(np.where(s >= 2000, 0.97, 0.2)),
        "2var_forbidden2": list(np.where(s >= 2500, 1.0, np.where(s >= 2000, 0.8, 0.0))),
    })
    p = dynamics.detect_phases(curves)
    assert (p.addition, p.binding, p.binding_reached) == (400, 1200, 1200)
    assert p.refinement == 2000 and p.refinement_stable == 2500 and p.in_paper_order



def test_a_late_gradual_binder_gets_its_climb_not_the_early_rise_as_binding():
    # 1-var held-out: 0.02 → 0.30 in one interval with addition (a rise of 0.28), a plateau, then a
    # climb of 0.20 per interval to 0.92 at step 3,600 (the shape of seed 46 continued to 40,000 steps)
    steps = list(range(0, 4001, 200))
    acc = [0.02, 0.30] + [0.30] * 14 + [0.50, 0.70, 0.92, 0.95, 0.96]
    curves = dynamics.Curves(steps, {"1var_heldout": acc})
    p = dynamics.detect_phases(curves)
    assert p.binding_reached == 3600
    assert p.binding in (3200, 3400, 3600) and p.binding_from >= 0.30 and p.binding_rise == pytest.approx(0.22)
    # a run that never reaches the level has no binding step at all: censored at its last step, its
    # largest rise (with addition, at step 200) only named in the note
    never = dynamics.detect_phases(dynamics.Curves(steps, {"1var_heldout": [min(a, 0.6) for a in acc]}))
    assert never.binding_reached is None and never.binding is None and never.binding_rise is None
    assert not never.bound and never.last_step == 4000
    assert any(n.startswith("not bound by step 4000") and "at step 200" in n for n in never.notes)

# --------------------------------------------------------------------------- the released checkpoints


RELEASED_STEPS = [1, 1001, 2001, 3001, 4001, 5001, 5101, 5201, 5301, 5401, 5501, 6001, 10001, 14001, 14301, 14501,
                  14701, 14901, 15101, 15301, 15501, 15701, 15901, 16001, 16201, 20001, 40000]


@pytest.fixture(scope="module")
def released(released_run, tmp_path_factory):
    """A copy of the session's import (this test writes its analysis into the run)."""
    import shutil

    from assign_add.run import RunDir

    copy = tmp_path_factory.mktemp("released") / "run"
    shutil.copytree(released_run.root, copy, ignore=shutil.ignore_patterns(".lock"))
    return RunDir(copy)


@pytest.mark.slow
def test_released_checkpoints_phases_and_mechanism(released):
    from assign_add.analysis.suite import analyze

    out = analyze(released, only=["dynamics", "weights", "representation"], steps=RELEASED_STEPS)
    p = out["dynamics"]["phases"]
    assert 5301 < p["binding"] <= 5401
    assert 14301 <= p["refinement"] <= 16201
    assert p["addition"] < p["binding"] and p["in_paper_order"]
    final = out["representation"]["final"]
    assert final["matched_mean"] >= 0.9 and final["shuffled_mean"] < 0.5
    w = out["weights"]["by_step"]
    assert w["1"]["qk2_identity"] <= 0.25, "near chance (1/12) at step 1"
    assert w["40000"]["qk2_identity"] >= 0.9
    assert (released.root / "figures" / "accuracy.png").is_file()
    assert (released.root / "figures" / "accuracy.html").read_text().startswith("<div")
