"""The analysis registry: analyses read only the saved run, share one forward pass per checkpoint,
and a saved analysis is reused exactly when the key of its inputs is unchanged."""

from __future__ import annotations

import json

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from assign_add.analysis import attention, gradients, probes, registry, representation
from assign_add.analysis.suite import analyze, inputs_key, is_current, measure
from assign_add.config import apply_overrides, preset, validate
from assign_add.model.hooked import AssignAddTransformer
from assign_add.reproduce import ensure_analysis
from assign_add.run import RunDir
from assign_add.task.partitions import Partitions, build_partitions
from assign_add.task.vocab import Vocab
from assign_add.train.trainer import train

from conftest import small_paper_cfg


@settings(max_examples=25, deadline=None)
@given(f=st.floats(0.05, 0.95), seed=st.integers(0, 10_000), n_left=st.integers(0, 4), n_right=st.integers(0, 4))
def test_saved_partitions_read_back_equal(f, seed, n_left, n_right):
    variables = preset("paper").task.variables
    cfg = validate(apply_overrides(preset("paper"), [
        f"task.f={f}", f"task.split_seed={seed}",
        f"task.forbidden_left={json.dumps(list(variables[-n_left:]) if n_left else [])}",
        f"task.forbidden_right={json.dumps(list(variables[:n_right]))}",
    ]))
    built = build_partitions(cfg.task)
    back = Partitions.from_json(json.loads(json.dumps(built.to_json(cfg.task))), cfg.task)
    for name in built.__dataclass_fields__:
        a, b = getattr(built, name), getattr(back, name)
        assert np.array_equal(a, b) and np.asarray(a).dtype == np.asarray(b).dtype, name


@pytest.fixture(scope="module")
def small_run(tmp_path_factory) -> RunDir:
    out = tmp_path_factory.mktemp("registry") / "run"
    train(small_paper_cfg("train.steps=40", "train.eval_every=10", "train.checkpoint_every=20", "train.batch_size=64"), out)
    return RunDir(out)


@pytest.mark.slow
def test_one_shared_forward_gives_the_standalone_measures(small_run):
    """The per-checkpoint parts read one cache; they must equal each measure's own forward pass."""
    ctx = registry.Context.__new__(registry.Context)
    cfg = small_run.config()
    ctx.vocab, ctx.probe = Vocab.from_task(cfg.task), registry.probe_batch(small_run.eval_sets())
    model = AssignAddTransformer.from_config(cfg.model, cfg.task, seed=3)  # an untrained draw
    view = registry.checkpoint_view(7, model, ctx)
    assert registry.REGISTRY["attention"].each(view, ctx) == attention.attention_scores(model, ctx.probe, ctx.vocab).to_json()
    assert registry.REGISTRY["probes"].each(view, ctx) == probes.probe_checkpoint(model, ctx.probe, ctx.vocab).to_json()
    rep = representation.shared_representation(model, ctx.probe, ctx.vocab)
    assert registry.REGISTRY["representation"].each(view, ctx) == {"matched_mean": rep.matched_mean,
                                                                  "shuffled_mean": rep.shuffled_mean}


@pytest.mark.slow
def test_reuse_is_decided_by_the_inputs(small_run, monkeypatch):
    first = analyze(small_run)
    assert first["inputs_key"] == inputs_key(small_run, list(registry.REGISTRY), small_run.checkpoint_steps())
    assert is_current(small_run)
    before = (small_run.root / "analysis.json").stat().st_mtime_ns

    def refuse(*_a, **_k):
        raise AssertionError("a current analysis was recomputed")

    monkeypatch.setattr("assign_add.reproduce.analyze", refuse)
    lines: list[str] = []
    ensure_analysis(small_run, lines.append)
    assert "reusing analysis" in lines[0]
    assert (small_run.root / "analysis.json").stat().st_mtime_ns == before, "nothing rewritten"

    # same bytes, new timestamp: still current (timestamps decide nothing)
    ckpt = small_run.checkpoint_path(small_run.checkpoint_steps()[-1])
    ckpt.write_bytes(ckpt.read_bytes())
    assert is_current(small_run)
    # other analysis code (a development checkout edited without a new version): not current
    monkeypatch.setattr("assign_add.analysis.suite.code_digest", lambda: "edited")
    assert not is_current(small_run)
    monkeypatch.undo()
    monkeypatch.setattr("assign_add.reproduce.analyze", refuse)
    assert is_current(small_run)
    # one changed checkpoint byte: recomputed
    data = bytearray(ckpt.read_bytes())
    data[-1] ^= 1
    ckpt.write_bytes(bytes(data))
    assert not is_current(small_run)
    assert not is_current(small_run, only=["dynamics"]), "other analyses asked for: another key"
    monkeypatch.undo()
    lines.clear()
    ensure_analysis(small_run, lines.append)
    assert lines[0].startswith("analysing") and is_current(small_run)


@pytest.mark.slow
def test_the_sampled_batches_are_saved_and_read_back(small_run, monkeypatch):
    """A re-analysis must not draw new sequences: after the first, the gradient analysis reads the run's file."""
    first = analyze(small_run, only=["gradients"])
    saved = small_run.root / registry.INPUTS_FILE
    assert saved.is_file()

    def no_draw(*_a, **_k):
        raise AssertionError("drew new sequences instead of reading the saved ones")

    monkeypatch.setattr(gradients, "one_var_samples", no_draw)
    monkeypatch.setattr(registry, "Sampler", no_draw)
    again = analyze(small_run, only=["gradients"])
    assert again["gradients"] == first["gradients"]


def _tree(root) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


@pytest.mark.slow
def test_measure_writes_nothing_and_equals_what_analyze_saves(tmp_path):
    """``measure`` is ``analyze`` without a byte written: same numbers, the run directory unchanged --
    also for a run without training metrics, whose accuracies analyze would cache in evals.jsonl."""
    out = tmp_path / "run"
    train(small_paper_cfg("train.steps=20", "train.eval_every=10", "train.checkpoint_every=10",
                          "train.batch_size=64"), out)
    run = RunDir(out)
    run.metrics_path.unlink()  # as an imported run: accuracies must come from the checkpoints
    before = _tree(out)
    measured = measure(out)
    assert _tree(out) == before, "measure wrote into the run"
    saved = analyze(run)
    assert (out / "evals.jsonl").is_file() and (out / registry.INPUTS_FILE).is_file()
    strip = lambda d: {k: v for k, v in d.items() if k not in ("inputs_key", "seconds")}  # noqa: E731
    assert strip(measured) == strip(json.loads((out / "analysis.json").read_text()))
    assert strip(measure(run, only=["dynamics"], steps=[0, 20]))["dynamics"]["steps"] == [0, 20]
    assert saved["final_step"] == measured["final_step"] == 20
