"""The causal tests of the mechanism (C12, C13, C1b) on hand-built inputs with a known answer.

Exact properties of the interventions hold for any weights (a random model): the final position's
answer depends on nothing but its residual before MLP₂, so patching that residual hands over the
source's answer exactly; ablating a batch of identical sequences changes nothing.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from assign_add.analysis import circuits
from assign_add.analysis.dynamics import Phases
from assign_add.analysis.registry import circuit_checkpoints
from assign_add.config import preset
from assign_add.model import AssignAddTransformer
from assign_add.task.evalsets import build_pools
from assign_add.task.partitions import build_partitions
from assign_add.task.vocab import Vocab, tokens_to_prompt


@pytest.fixture(scope="module")
def setup():
    cfg = preset("paper")
    cfg.task.eval_pool_size = 200
    vocab = Vocab.from_task(cfg.task)
    sets = build_pools(cfg.task, build_partitions(cfg.task))
    model = AssignAddTransformer.from_config(cfg.model, cfg.task, seed=3).eval()
    return vocab, sets, model


@settings(max_examples=50, deadline=None)
@given(st.integers(2, 300), st.integers(0, 10_000))
def test_derangement_moves_every_sequence(n, seed):
    perm = circuits.derangement(n, seed)
    assert sorted(perm) == list(range(n)) and np.all(perm != np.arange(n))


def _chance_from_text(tokens: np.ndarray, vocab: Vocab, answer: int) -> float:
    """Binding-free chance from the parsed prompt: each variable operand takes each assigned value in turn."""
    p = tokens_to_prompt(tokens, vocab)
    values = [v for _, v in p.assignments]
    left = values if isinstance(p.lhs, str) else [p.lhs]
    right = values if isinstance(p.rhs, str) else [p.rhs]
    hits = sum((a + b) % vocab.modulus == answer for a in left for b in right)
    return hits / (len(left) * len(right))


def test_binding_free_chance_matches_the_parsed_prompts(setup):
    vocab, sets, _ = setup
    for name in ("0var_heldout", "1var_heldout", "2var_heldout"):
        batch = sets[name].take(slice(0, 60))
        got = circuits.binding_free_chance(batch, vocab)
        want = [_chance_from_text(batch.tokens[i], vocab, int(batch.answers[i])) for i in range(len(batch))]
        np.testing.assert_allclose(got, want)
    assert np.all(circuits.binding_free_chance(sets["0var_heldout"].take(slice(0, 20)), vocab) == 1.0)


def test_one_assignment_is_always_right_without_binding(setup):
    vocab, sets, _ = setup
    batch = sets["1var_heldout"]
    ones = np.array([len(tokens_to_prompt(t, vocab).assignments) == 1 for t in batch.tokens])
    assert ones.any()
    assert np.all(circuits.binding_free_chance(batch.take(ones), vocab) == 1.0)


def test_patching_the_residual_before_mlp2_hands_over_the_source_answer_exactly(setup):
    """With each form's own predictions as its "answers", the patched model answers as the source in every
    pair and never as the target (a patch that did nothing would give 0 and 1)."""
    vocab, sets, model = setup
    batch = sets["1var_heldout"].take(slice(0, 100))
    perm = circuits.derangement(len(batch))
    const = circuits.constant_form(batch, vocab)
    with torch.no_grad():
        source_pred = model(torch.as_tensor(const[perm]))[:, -1].argmax(-1).numpy()
        target_pred = model(torch.as_tensor(batch.tokens))[:, -1].argmax(-1).numpy()
    res = circuits.interchange(model, batch.tokens, const[perm], source_pred, target_pred, circuits.before_mlp2(model))
    assert res["pairs"] == int((source_pred != target_pred).sum()) > 10
    assert (res["follows_source"], res["keeps_target"]) == (1.0, 0.0)
    wrong_site = circuits.interchange(model, batch.tokens, const[perm], source_pred, target_pred,
                                      circuits.before_layer2(model))
    assert wrong_site["follows_source"] < 1.0, "before layer 2 the residual does not yet decide the answer"
    full = circuits.interchanges(model, batch, vocab, circuits.before_mlp2(model))
    differ = batch.answers[perm] != batch.answers
    assert full["constant_to_variable"]["follows_source"] == pytest.approx(
        float((source_pred == batch.answers[perm])[differ].mean()))


def test_a_full_rank_resample_of_the_residual_is_the_whole_patch(setup):
    vocab, sets, model = setup
    batch = sets["2var_heldout"].take(slice(0, 80))
    perm = circuits.derangement(len(batch))
    eye = torch.eye(model.cfg.d_model)
    hook = circuits.subspace_ablation(model.cfg.n_layers - 1, eye, "resample", perm)
    with torch.no_grad():
        patched = model.run_with_hooks(torch.as_tensor(batch.tokens), fwd_hooks=[hook])[:, -1]
        source = model(torch.as_tensor(batch.tokens[perm]))[:, -1]
    torch.testing.assert_close(patched, source, rtol=1e-4, atol=1e-4)


def _ablated_logits(model, tokens: np.ndarray):
    """(hook name, mode, clean final logits, final logits with that ablation) for the four component
    ablations of the causal claims in both modes."""
    perm, last = circuits.derangement(len(tokens)), model.cfg.n_layers - 1
    with torch.no_grad():
        clean = model(torch.as_tensor(tokens))[:, -1]
        for mode in circuits.MODES:
            for hook in (circuits.layer1_head(mode, perm), circuits.layer2_routing(last, mode, perm),
                         circuits.layer2_head_output(last, mode, perm),
                         circuits.mlp_neurons(last, np.arange(0, 512, 3), mode, perm)):
                yield hook[0], mode, clean, model.run_with_hooks(torch.as_tensor(tokens), fwd_hooks=[hook])[:, -1]


def test_ablating_a_batch_of_identical_sequences_changes_nothing(setup):
    vocab, sets, model = setup
    batch = sets["1var_heldout"].take(np.zeros(16, dtype=np.int64))  # one sequence, 16 times
    for _, _, clean, out in _ablated_logits(model, batch.tokens):
        torch.testing.assert_close(out, clean, rtol=1e-5, atol=1e-5)


def test_every_ablation_changes_the_answers_of_different_sequences(setup):
    """The counterpart of the test above: on 16 different sequences each hook changes the final logits. A
    hook that did nothing would leave the computation, and so every logit, exactly as it was (random weights
    attend almost uniformly, so the routing's change is small: 3e-4 here)."""
    vocab, sets, model = setup
    for name, mode, clean, out in _ablated_logits(model, sets["1var_heldout"].take(slice(0, 16)).tokens):
        assert not torch.equal(out, clean), (name, mode)


def test_mean_ablation_gives_every_sequence_the_same_activation():
    x = torch.arange(24.0).reshape(4, 3, 2)
    out = circuits._replace(x, "mean", circuits.derangement(4))
    assert torch.equal(out, x.mean(0, keepdim=True).expand_as(x))
    perm = circuits.derangement(4)
    assert torch.equal(circuits._replace(x, "resample", perm), x[torch.as_tensor(perm)])


def test_frequency_basis_spans_the_planted_frequency_only():
    n_mod, d = 59, 16
    rng = np.random.default_rng(0)
    u, v, w = rng.normal(size=(3, d))
    n, m = np.meshgrid(np.arange(n_mod), np.arange(n_mod), indexing="ij")
    grid = (np.cos(2 * np.pi * 9 * n / n_mod)[..., None] * u + np.sin(2 * np.pi * 9 * m / n_mod)[..., None] * v
            + np.cos(2 * np.pi * 4 * n / n_mod)[..., None] * w)
    basis = circuits.frequency_basis(grid, [9])
    assert basis.shape == (d, 2), "cos along n and sin along m: two directions"
    np.testing.assert_allclose(basis.T @ basis, np.eye(2), atol=1e-10)
    project = lambda x: basis @ (basis.T @ x)  # noqa: E731
    np.testing.assert_allclose(project(u), u, atol=1e-8)
    np.testing.assert_allclose(project(v), v, atol=1e-8)
    assert np.linalg.norm(project(w)) < np.linalg.norm(w)  # w is not in the span (only its overlap with u, v)
    assert circuits.frequency_basis(grid, []).shape == (d, 0)


@settings(max_examples=30, deadline=None)
@given(st.lists(st.integers(1, 29), min_size=0, max_size=8, unique=True))
def test_random_frequencies_avoid_the_keys(keys):
    drawn = circuits.random_frequencies(keys, 59)
    assert len(drawn) == len(keys) and not set(drawn) & set(keys) and all(1 <= k <= 29 for k in drawn)


def test_random_neurons_are_as_many_others():
    chosen = np.array([0, 5, 9])
    null = circuits.random_others(chosen, 20)
    assert len(null) == 3 and not set(null) & set(chosen)
    assert len(circuits.random_others(np.arange(15), 20)) == 5, "at most all the others"


def _phases(addition, binding, reached) -> Phases:
    return Phases(addition, binding, None, None, None, reached, None, None, True, [])


def test_circuit_checkpoints_by_hand():
    steps = [0, 100, 500, 1000, 1500, 1600, 3000]
    assert circuit_checkpoints(steps, _phases(450, 1600, 1600)) == {"addition": 500, "before_binding": 1500,
                                                                    "end": 3000}
    assert circuit_checkpoints(steps, _phases(450, None, None)) == {"addition": 500, "end": 3000}
    assert circuit_checkpoints(steps, _phases(None, None, None)) == {"end": 3000}
    assert circuit_checkpoints(steps, _phases(0, 1600, 1000))["before_binding"] == 500, "the earlier of the two marks"


def test_composition_and_adder_run_on_every_set(setup):
    """Shapes and ranges on a random model (no verdict: its accuracies are chance)."""
    vocab, sets, model = setup
    small = {k: sets[k].take(slice(0, 50)) for k in ("0var_train", "0var_heldout", "1var_heldout", "2var_heldout")}
    comp = circuits.composition(model, small, vocab, np.arange(0, 512, 2), step=7).to_json()
    assert set(comp["ablations"]) == {*circuits.BINDING_COMPONENTS, *circuits.ADDITION_COMPONENTS, circuits.NULL_NEURONS}
    assert all(0 <= v <= 1 for modes in comp["ablations"].values() for sets_ in modes.values() for v in sets_.values())
    assert comp["n_frequency_neurons"] == comp["n_null_neurons"] == 256
    assert comp["chance"]["binding"]["0var_heldout"] == 1.0
    adder = circuits.adder(model, small, vocab, [3, 7], step=7).to_json()
    assert adder["frequencies"]["key"]["dimensions"] == 8 and adder["frequencies"]["random"]["dimensions"] == 8
    assert set(adder["interchange"]) == {"1var_heldout", "2var_heldout"}


def test_orthogonal_part_drops_what_the_key_directions_share():
    rng = np.random.default_rng(1)
    key = np.linalg.qr(rng.normal(size=(12, 3)))[0]
    shared = key[:, :1]
    own = np.linalg.qr(rng.normal(size=(12, 2)))[0]
    basis = np.linalg.qr(np.concatenate([shared, own], axis=1))[0]  # overlaps the key span in one direction
    part = circuits.orthogonal_part(basis, key)
    np.testing.assert_allclose(key.T @ part, 0, atol=1e-10)
    np.testing.assert_allclose(part.T @ part, np.eye(part.shape[1]), atol=1e-10)
    assert part.shape[1] == 2, "the shared direction goes; the two others keep what lies outside the key span"
    assert circuits.orthogonal_part(key, key).shape[1] == 0


# ---- planted models from the released checkpoints: the verdict must flip with the planted change


def _released_sets(run, n: int = 300) -> dict:
    return {k: b.take(slice(0, n)) for k, b in run.eval_sets().items()
            if k in ("0var_train", "0var_heldout", "1var_heldout", "2var_heldout")}


def _c13_of(model, sets, vocab):
    from assign_add.analysis import fourier
    from assign_add.report.claims import c13

    keys, _, _ = fourier.key_frequencies(fourier.fit_neurons(fourier.preactivation_grid(model, vocab, sets["0var_train"])))
    adder = circuits.adder(model, sets, vocab, keys, step=0).to_json()
    return c13({"causal": {"circuits": {"adder": adder, "modulus": vocab.modulus}}}), adder


@pytest.mark.slow
def test_a_random_adder_fails_c13_where_the_trained_one_holds(released_run):
    vocab = Vocab.from_task(released_run.config().task)
    sets = _released_sets(released_run)
    model = released_run.load_model(40000)
    intact, _ = _c13_of(model, sets, vocab)
    assert intact.verdict == "holds", intact
    with torch.no_grad():  # plant: MLP₂ redrawn at its initial scale
        gen = torch.Generator().manual_seed(0)
        mlp = model.blocks[-1].mlp
        for w in (mlp.W_in, mlp.W_out):
            w.copy_(torch.randn(w.shape, generator=gen) * w.std())
    planted, adder = _c13_of(model, sets, vocab)
    assert planted.verdict == "does not hold", planted
    rates = [r["follows_source"] for dirs in adder["interchange"].values() for r in dirs.values()]
    assert max(rates) < 0.2, "through a random MLP₂ the patched residual no longer gives its sum"


@pytest.mark.slow
def test_c12s_binding_rows_flip_where_addition_still_runs_through_layer_1(released_run):
    """At 40,000 ablating the binding circuit keeps 0-var held-out; at 5,301 (before binding) ablating the
    layer-1 head does not: the same criterion rows must fail there."""
    from assign_add.report.claims import c12

    vocab = Vocab.from_task(released_run.config().task)
    sets = _released_sets(released_run)
    reasons = {}
    for step in (5301, 40000):
        comp = circuits.composition(released_run.load_model(step), sets, vocab, np.arange(0, 512, 4), step).to_json()
        reasons[step] = c12({"causal": {"circuits": {"composition": comp}}}).reason
    assert "layer1_head on 0var_heldout" in reasons[5301]
    assert "layer1_head on 0var_heldout" not in reasons[40000] and "layer2_routing on 0var_heldout" not in reasons[40000]
