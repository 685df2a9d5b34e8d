from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from assign_add.config import RunConfig, TaskConfig, apply_overrides, preset, validate
from assign_add.task.evalsets import build_eval_sets
from assign_add.task.generator import TWO_VAR, Batch, Sampler, training_type_probs
from assign_add.task.partitions import build_partitions, load_pairs_json
from assign_add.task.vocab import (
    Prompt, TextFormError, Vocab, parse_text, prompt_to_text, text_to_tokens, tokens_to_prompt, tokens_to_text,
)

from conftest import artifacts_or_skip


# --------------------------------------------------------------------------- vocabulary, text form


def test_paper_token_ids(paper_cfg):
    v = Vocab.from_task(paper_cfg.task)
    assert (v.plus, v.equals, v.pad, v.var_id("a"), v.var_id("l"), v.size) == (59, 60, 61, 62, 73, 74)


def test_text_form_example(paper_cfg):
    v = Vocab.from_task(paper_cfg.task)
    toks = text_to_tokens("c=1, b=17, a=42, b+19=", v)
    assert toks.tolist() == [61] * 6 + [64, 1, 63, 17, 62, 42] + [59, 63, 19, 60]
    assert parse_text("c=1, b=17, a=42, b+19=", v).answer(59) == 36
    assert tokens_to_text(toks, v) == "c=1, b=17, a=42, b+19="


@pytest.mark.parametrize(
    "text, fragment",
    [
        ("c=1, z=2, c+1=", "unknown variable 'z'"),
        ("c=1, b+1=", "variable 'b' is not assigned"),
        ("c=59, c+1=", "value 59 is outside 0..58"),
        ("c=1, c+60=", "value 60 is outside"),
        ("a=1, b=2, c=3, d=4, e=5, f=6, g=7, a+b=", "more than the context of 16"),
        ("c=1, c=2, c+1=", "assigned twice"),
        ("c:1, c+1=", "not of the form 'v=n'"),
        ("c=1, c*1=", "not of the form 'x+y='"),
        ("", "empty prompt"),
    ],
)
def test_bad_text_says_what_and_where(paper_cfg, text, fragment):
    with pytest.raises(TextFormError, match=fragment.replace("(", r"\(").replace("+", r"\+").replace("*", r"\*")):
        text_to_tokens(text, Vocab.from_task(paper_cfg.task))


def _vocab_strategy():
    @st.composite
    def build(draw):
        n_vars = draw(st.integers(2, 26))
        layout = draw(st.sampled_from(["prefix", "infix"]))
        alen = 2 if layout == "prefix" else 4
        max_k = draw(st.integers(2, min(n_vars, 8)))
        n_ctx = max_k * alen + 4 + draw(st.integers(0, 6))
        return Vocab(draw(st.integers(2, 200)), tuple("abcdefghijklmnopqrstuvwxyz"[:n_vars]), layout, n_ctx), max_k
    return build()


@settings(max_examples=200, deadline=None)
@given(data=st.data())
def test_text_round_trip(data):
    vocab, max_k = data.draw(_vocab_strategy())
    k = data.draw(st.integers(1, max_k))
    names = data.draw(st.permutations(vocab.variables))[:k]
    values = data.draw(st.lists(st.integers(0, vocab.modulus - 1), min_size=k, max_size=k))
    operand = st.one_of(st.sampled_from(names), st.integers(0, vocab.modulus - 1))
    prompt = Prompt(tuple(zip(names, values)), data.draw(operand), data.draw(operand))
    text = prompt_to_text(prompt)
    assert parse_text(text, vocab) == prompt
    seed = data.draw(st.integers(0, 2**32 - 1))
    for rng in (None, np.random.default_rng(seed)):
        tokens = text_to_tokens(text, vocab, rng)
        assert len(tokens) == vocab.n_ctx
        assert tokens_to_prompt(tokens, vocab) == prompt
        assert tokens_to_text(tokens, vocab) == text


# --------------------------------------------------------------------------- partitions


def test_paper_split_equals_the_authors_pairs(paper_cfg):
    art = artifacts_or_skip()
    train, heldout = load_pairs_json(art / "pairs.json")
    parts = build_partitions(paper_cfg.task)
    assert np.array_equal(parts.train_pairs, train)
    assert np.array_equal(parts.heldout_pairs, heldout)
    assert (len(train), len(heldout)) == (2436, 1045)


def test_variable_pair_groups(paper_cfg):
    parts = build_partitions(paper_cfg.task)
    assert (len(parts.allowed_var_pairs), len(parts.one_forbidden_var_pairs), len(parts.two_forbidden_var_pairs)) == (92, 36, 4)


# --------------------------------------------------------------------------- generator


def check_grammar(batch: Batch, task: TaskConfig) -> dict:
    """Vectorised checks of every sequence; returns a few statistics for further assertions."""
    v = Vocab.from_task(task)
    parts = build_partitions(task)
    tok = batch.tokens
    size, T = tok.shape
    assert T == task.n_ctx
    region, query = tok[:, : v.region_len], tok[:, v.region_len :]
    # query
    for off, kind in enumerate(v.query_template()):
        col = query[:, off]
        if kind in ("lhs", "rhs"):
            assert np.all((col < task.modulus) | v.is_var(col))
        else:
            assert np.all(col == kind)
    # assignments: non-pad tokens follow the template, each assignment contiguous
    tpl = v.assignment_template()
    nonpad = region != v.pad
    rank = np.cumsum(nonpad, axis=1) - 1
    slot = np.where(nonpad, rank % len(tpl), -1)
    for s, kind in enumerate(tpl):
        at = slot == s
        if kind == "var":
            assert np.all(v.is_var(region[at]))
        elif kind == "val":
            assert np.all(region[at] < task.modulus)
        else:
            assert np.all(region[at] == kind)
    var_pos = np.argwhere(slot == 0)
    val_off = tpl.index("val")
    follow = region[var_pos[:, 0], var_pos[:, 1] + val_off]
    assert np.all(follow < task.modulus), "an assignment is split by padding"
    n_assign = (slot == 0).sum(axis=1)
    assert n_assign.min() >= task.min_assignments and n_assign.max() <= task.max_assignments
    assert np.all(nonpad.sum(axis=1) == n_assign * len(tpl))
    # distinct variables, values table
    n_vars = len(task.variables)
    var_idx = region[var_pos[:, 0], var_pos[:, 1]] - v.var_offset
    counts = np.zeros((size, n_vars), dtype=np.int64)
    np.add.at(counts, (var_pos[:, 0], var_idx), 1)
    assert counts.max() <= 1, "a variable is assigned twice"
    table = np.full((size, n_vars), -1)
    table[var_pos[:, 0], var_idx] = follow
    # resolve operands
    def resolve(col):
        is_var = v.is_var(col)
        idx = np.where(is_var, col - v.var_offset, 0)
        value = np.where(is_var, table[np.arange(size), idx], col)
        return value, np.where(is_var, idx, -1)
    lpos, rpos = v.operand_positions()
    n, lvar = resolve(tok[:, lpos])
    m, rvar = resolve(tok[:, rpos])
    assert np.all(n >= 0) and np.all(m >= 0), "a queried variable is not assigned"
    assert np.array_equal(n, batch.n) and np.array_equal(m, batch.m)
    assert np.array_equal(lvar, batch.lhs_var) and np.array_equal(rvar, batch.rhs_var)
    assert np.array_equal(batch.answers, (n + m) % task.modulus)
    assert np.all(n_assign[(lvar >= 0) & (rvar >= 0)] >= 2)
    return {"parts": parts, "n": n, "m": m, "lvar": lvar, "rvar": rvar, "vocab": v}


def test_million_training_sequences_are_valid(paper_cfg):
    task = paper_cfg.task
    sampler = Sampler(task, seed=7)
    batch = Batch.concat([sampler.batch(step, 51_200) for step in range(20)])
    assert len(batch) >= 10**6
    info = check_grammar(batch, task)
    parts = info["parts"]
    codes = info["n"] * task.modulus + info["m"]
    held = parts.heldout_pairs[:, 0] * task.modulus + parts.heldout_pairs[:, 1]
    assert not np.isin(codes, held).any(), "a held-out pair occurs in training"
    assert not np.isin(info["lvar"], parts.forbidden_left).any()
    assert not np.isin(info["rvar"], parts.forbidden_right).any()
    shares = np.bincount(batch.category, minlength=4) / len(batch)
    assert np.abs(shares - np.asarray(training_type_probs(task))).max() < 0.01
    assert set(np.unique(batch.tokens).tolist()) == set(range(info["vocab"].size)), "every token occurs"
    assert len(np.unique(info["lvar"][info["lvar"] >= 0])) == 10, "every allowed left variable occurs"
    assert set(np.unique(np.concatenate([info["n"], info["m"]]))) == set(range(59))


def test_r_scales_the_two_var_share(paper_cfg):
    cfg = paper_cfg
    cfg.task.r = 0.25
    probs = training_type_probs(cfg.task)
    w = np.asarray([12, 10, 10, 2.5])
    assert np.allclose(probs, w / w.sum())
    batch = Sampler(cfg.task, seed=1).batch(0, 200_000)
    assert abs((batch.category == TWO_VAR).mean() - probs[3]) < 0.01


def test_batches_are_a_function_of_seed_and_step(paper_cfg):
    a, b = Sampler(paper_cfg.task, 3), Sampler(paper_cfg.task, 3)
    assert np.array_equal(a.batch(17, 64).tokens, b.batch(17, 64).tokens)
    assert not np.array_equal(a.batch(17, 64).tokens, a.batch(18, 64).tokens)
    assert not np.array_equal(a.batch(17, 64).tokens, Sampler(paper_cfg.task, 4).batch(17, 64).tokens)


def test_padding_gaps_are_uniform_per_pad(paper_cfg):
    """With one assignment and 10 pads, each pad falls before/after it with p = 1/2 (binomial)."""
    task = paper_cfg.task
    task.max_assignments = task.min_assignments = 1
    from assign_add.task.generator import build_sequences
    size = 100_000
    none = np.full(size, -1)
    batch = build_sequences(np.random.default_rng(0), Vocab.from_task(task), np.zeros(size), np.zeros(size), none, none, 1, 1)
    leading = np.argmax(batch.tokens[:, :12] != 61, axis=1)
    assert abs(leading.mean() - 5.0) < 0.05
    assert abs(leading.var() - 2.5) < 0.1


# --------------------------------------------------------------------------- random valid configurations


@st.composite
def task_configs(draw):
    n_vars = draw(st.integers(3, 26))
    names = list("abcdefghijklmnopqrstuvwxyz"[:n_vars])
    layout = draw(st.sampled_from(["prefix", "infix"]))
    alen = 2 if layout == "prefix" else 4
    max_k = draw(st.integers(2, min(n_vars, 7)))
    min_k = draw(st.integers(1, max_k))
    n_ctx = max_k * alen + 4 + draw(st.integers(0, 8))
    fl = draw(st.lists(st.sampled_from(names), max_size=n_vars // 3, unique=True))
    fr = draw(st.lists(st.sampled_from(names), max_size=n_vars // 3, unique=True))
    mod = draw(st.integers(2, 113))
    w = np.asarray(draw(st.lists(st.floats(0.05, 1.0), min_size=4, max_size=4)))
    w = w / w.sum()
    task = TaskConfig(
        modulus=mod, variables=names, min_assignments=min_k, max_assignments=max_k, n_ctx=n_ctx, layout=layout,
        f=draw(st.floats(0.3, 1.0)), split_seed=draw(st.integers(0, 1000)), forbidden_left=fl, forbidden_right=fr,
        r=draw(st.floats(0.0, 1.0)), eval_pool_size=50,
    )
    task.mixture.zero_var, task.mixture.var_left, task.mixture.var_right = map(float, w[:3])
    task.mixture.two_var = 1.0 - sum(map(float, w[:3]))
    validate(RunConfig(task=task))
    return task


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(task=task_configs(), seed=st.integers(0, 2**31))
def test_random_valid_configs_sample_valid_sequences(task, seed):
    batch = Sampler(task, seed).batch(0, 500)
    info = check_grammar(batch, task)
    parts = info["parts"]
    codes = info["n"] * task.modulus + info["m"]
    held = parts.heldout_pairs[:, 0] * task.modulus + parts.heldout_pairs[:, 1]
    assert not np.isin(codes, held).any()
    assert not np.isin(info["lvar"], parts.forbidden_left).any()
    assert not np.isin(info["rvar"], parts.forbidden_right).any()
    for i in range(0, len(batch), 97):
        text = tokens_to_text(batch.tokens[i], info["vocab"])
        assert parse_text(text, info["vocab"]).answer(task.modulus) == batch.answers[i]
    for name, ev in build_eval_sets(task, parts, exhaustive=False).items():
        check_grammar(ev, task)


# --------------------------------------------------------------------------- curated sets


def test_curated_sets(paper_cfg):
    task = paper_cfg.task
    parts = build_partitions(task)
    sets = build_eval_sets(task, parts)
    sizes = {k: len(v) for k, v in sets.items()}
    assert sizes["0var_heldout_all"] == 1045 and sizes["2var_union"] == 193_580
    assert all(sizes[k] == 2000 for k in sizes if k not in ("0var_heldout_all", "2var_union"))
    for name, batch in sets.items():
        info = check_grammar(batch, task)
        codes = info["n"] * 59 + info["m"]
        held = np.isin(codes, parts.heldout_pairs[:, 0] * 59 + parts.heldout_pairs[:, 1])
        if "heldout" in name:
            assert held.all(), name
        elif name != "2var_union":
            assert not held.any(), name
        forbidden = np.isin(info["lvar"], parts.forbidden_left).astype(int) + np.isin(info["rvar"], parts.forbidden_right)
        expected = {"1var_forbidden": 1, "2var_forbidden1": 1, "2var_forbidden2": 2}.get(name)
        if expected is not None:
            assert np.all(forbidden == expected), name
        elif name.endswith(("_right", "_left")) and name.startswith("1var_"):
            assert np.all(forbidden == 1), name
        elif name != "2var_union":
            assert np.all(forbidden == 0), name
    union = sets["2var_union"]
    pairs = set(zip(union.n.tolist(), union.m.tolist(), union.lhs_var.tolist(), union.rhs_var.tolist()))
    assert len(pairs) == 193_580, "the 2-var union is exhaustive without repeats"
    assert sorted(zip(sets["0var_heldout_all"].n, sets["0var_heldout_all"].m)) == [tuple(p) for p in parts.heldout_pairs]
    again = build_eval_sets(task, parts)
    assert all(np.array_equal(again[k].tokens, sets[k].tokens) for k in sets)


def test_sets_that_would_be_empty_are_omitted(paper_cfg):
    task = paper_cfg.task
    task.f, task.forbidden_left, task.forbidden_right = 1.0, [], []
    names = set(build_eval_sets(task, build_partitions(task)))
    assert not any("heldout" in n or "forbidden" in n for n in names)
    assert {"0var_train", "1var_train", "2var_train"} <= names


@settings(max_examples=20, deadline=None)
@given(seed=st.integers(0, 10_000))
def test_end_padding_fixes_every_assignment_slot_and_changes_nothing_else(seed):
    """task.padding = "end": the same draws as random padding (same assignments, values, query), with
    the PADs moved after the last assignment, so assignment i starts at position i × its length."""
    random_cfg = preset("paper")
    end_cfg = validate(apply_overrides(preset("paper"), ["task.padding=end"]))
    parts = build_partitions(random_cfg.task)
    a = Sampler(random_cfg.task, seed, parts).batch(3, 64)
    b = Sampler(end_cfg.task, seed, parts).batch(3, 64)
    vocab = Vocab.from_task(end_cfg.task)
    for name in ("answers", "n", "m", "lhs_var", "rhs_var", "category"):
        assert np.array_equal(getattr(a, name), getattr(b, name)), name
    for ta, tb in zip(a.tokens, b.tokens):
        assert tokens_to_prompt(ta, vocab) == tokens_to_prompt(tb, vocab)
        region = tb[: vocab.region_len]
        used = int((region != vocab.pad).sum())
        assert np.all(region[:used] != vocab.pad) and np.all(region[used:] == vocab.pad)
    assert np.array_equal(text_to_tokens("c=1, b=17, b+19=", vocab)[:4], [vocab.var_id("c"), 1, vocab.var_id("b"), 17])
