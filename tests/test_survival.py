"""Time to binding over seeds: the early predictor on hand-built data, the summary on hand-built rows,
and the survival command end to end (resumable)."""

from __future__ import annotations

import json

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from assign_add.stats import auc, fit_logistic_regression, loo_accuracy
from assign_add.studies.early import FEATURES, predictor_test
from assign_add.cli import app
from assign_add.run import RunError
from assign_add.studies.survival import SeedRow, in_progress, markdown, plan, run_survival, summarize


def test_auc_on_hand_built_values():
    y = np.array([0, 0, 1, 1])
    assert auc(np.array([1.0, 2.0, 3.0, 4.0]), y) == 1.0
    assert auc(np.array([4.0, 3.0, 2.0, 1.0]), y) == 0.0
    assert auc(np.array([1.0, 1.0, 1.0, 1.0]), y) == 0.5
    assert auc(np.array([1.0, 3.0, 2.0, 4.0]), y) == 0.75  # pairs (2>1, 2<3, 4>1, 4>3): 3 of 4
    assert auc(np.array([1.0, 2.0]), np.array([1, 1])) is None


@settings(max_examples=30, deadline=None)
@given(st.integers(0, 10_000), st.integers(6, 40), st.integers(1, 5), st.floats(0.1, 10.0))
def test_logistic_fit_is_the_penalised_optimum(seed, n, d, l2):
    """At the returned point the gradient of summed log-loss + l2/2·|w|² vanishes (the objective is convex,
    so that point is the minimum), also for separable data where the unpenalised fit diverges."""
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(n, d))
    y = (rng.random(n) < 0.5).astype(float)
    y[0], y[1] = 0.0, 1.0
    w, b = fit_logistic_regression(x, y, l2)
    p = 1 / (1 + np.exp(-(x @ w + b)))
    assert np.abs(x.T @ (p - y) + l2 * w).max() < 1e-6
    assert abs((p - y).sum()) < 1e-6


def test_separable_measure_predicts_and_noise_does_not():
    """One measure that separates the outcomes: leave-one-out accuracy 1 and a permutation p at its floor;
    pure noise: not called a predictor."""
    rng = np.random.default_rng(0)
    y = np.array([True] * 14 + [False] * 6)
    rows = [{k: float(rng.normal()) for k in FEATURES} for _ in y]
    for r, b in zip(rows, y):
        r["prev_token"] = (1.0 if b else -1.0) + 0.1 * rng.normal()
    x = np.asarray([[r[k] for k in FEATURES] for r in rows])
    assert loo_accuracy(x[:, [list(FEATURES).index("prev_token")]], y.astype(float)) == 1.0
    res = predictor_test(rows, list(y), permutations=50)
    assert res["base_rate"] == 0.7 and res["auc"]["prev_token"] == 1.0
    assert res["loo_accuracy"] >= 0.9 and res["p_value"] == 1 / 51 and res["beats_null"]
    noise = [{k: float(rng.normal()) for k in FEATURES} for _ in y]
    assert not predictor_test(noise, list(y), permutations=50)["beats_null"]
    assert predictor_test(noise[:3], [True, False, True])["loo_accuracy"] is None  # too few runs: not computed


def _row(seed, bound_at, reached):
    return SeedRow(seed, bound_at, reached, {k: float(seed % 3 + (bound_at is None)) for k in FEATURES}, f"s{seed}")


def test_summary_on_hand_built_rows():
    rows = [_row(1, 3000, 3000), _row(2, 25_000, 25_000), _row(3, None, 40_000), _row(4, None, 12_000),
            _row(5, 5000, 5000), SeedRow(6, None, 8000, {}, "s6", finished=False)]
    s = summarize(rows, 40_000, "cmd", planned=7)
    # by 20,000: seeds 1 and 5 bound; 2 and 3 watched past it unbound; 4 and 6 open (censored at 12,000, 8,000)
    assert s["bound_by"]["20000"]["bound"] == 2 and s["bound_by"]["20000"]["watched"] == 4
    assert s["bound_by"]["40000"] == {**s["bound_by"]["40000"], "bound": 3, "watched": 4, "p": 0.75}
    # Kaplan–Meier: 6 at risk at 3,000 (1 event) -> 5/6; at 5,000, 5 at risk -> 4/6; at 25,000 two at risk
    # (seeds 2 and 3; seed 6 left at 8,000, seed 4 at 12,000) -> 1/3
    curve = dict(s["survival"]["curve"])
    assert curve == pytest.approx({3000.0: 5 / 6, 5000.0: 4 / 6, 25_000.0: 1 / 3})
    assert s["survival"]["median"] == 25_000 and s["finished"] == 5 and s["planned"] == 7
    assert s["predictor"]["n"] == 4  # the open seeds have no outcome yet; the running one no measures


@pytest.mark.slow
def test_survival_end_to_end_and_resume(tmp_path):
    """Two tiny seeds (early measures at step 20): rows, early measures and the files; a rerun retrains nothing."""
    small = ["task.eval_pool_size=300", "train.batch_size=32", "train.eval_every=10", "train.checkpoint_every=10"]
    jobs = plan([3, 4], tmp_path, 40, True, small, early_step=20)
    jobs = [type(j)(**{**j.__dict__, "chunk": 20}) for j in jobs]
    s = run_survival(jobs, tmp_path, 40, workers=1, command="test")
    assert [r["seed"] for r in s["rows"]] == [3, 4] and all(r["reached"] == 40 for r in s["rows"])
    assert all(set(r["early"]) == set(FEATURES) for r in s["rows"])
    assert s["rows"][0]["early"] != s["rows"][1]["early"], "two seeds, two trainings"
    assert json.loads((tmp_path / "survival.json").read_text())["finished"] == 2
    assert (tmp_path / "survival.md").read_text().splitlines()[2] == "2 of 2 seeds finished."
    from assign_add.machine import auto_precision, cpu_flags, has_c_compiler

    cc = has_c_compiler()
    assert s["training"] == {"compile": cc, "precision": auto_precision(cc, False, cpu_flags())}, "compiled by default"
    ckpt = tmp_path / "seed-3" / "checkpoints" / "step_000040.safetensors"
    before = ckpt.stat().st_mtime_ns
    again = run_survival(jobs, tmp_path, 40, workers=1, command="test")
    assert again["rows"] == s["rows"] and ckpt.stat().st_mtime_ns == before
    # a run read while training: censored at its last evaluation, no measures, not finished
    assert in_progress(jobs[0]) == SeedRow(3, None, 40, {}, jobs[0].out, 20, finished=False)
    assert in_progress(type(jobs[0])(99, str(tmp_path / "seed-99"), 40, True)) is None  # not started yet


@pytest.mark.parametrize("args, message", [
    (["--seeds", "9-3"], "--seeds"),
    (["--seeds", "3,3"], "twice"),
    (["--seeds", "3", "--steps", "100"], "at least 1500"),
    (["--seeds", "3", "model.nope=1"], "nope"),
])
def test_survival_refuses_bad_input(tmp_path, args, message):
    res = CliRunner().invoke(app, ["survival", "--out", str(tmp_path / "s"), *args])
    assert res.exit_code == 2 and message in res.output and "Traceback" not in res.output
    assert not (tmp_path / "s").exists()


def test_survival_chart_is_the_kaplan_meier_step_function_to_the_horizon():
    from assign_add.studies.survival import survival_chart

    summary = {"horizon": 30_000, "survival": {"n": 4, "curve": [[2_000.0, 0.75], [5_000.0, 0.5]]}}
    chart = survival_chart(summary)
    assert chart.x == [0.0, 2_000.0, 2_000.0, 5_000.0, 5_000.0, 30_000.0]
    assert chart.series["fraction bound"] == [0.0, 0.0, 0.25, 0.25, 0.5, 0.5]
    assert chart.markers == {"20k": 20_000.0}, "a mark only within the horizon"


def _llc_row(seed, bound_at, reached, llc):
    return SeedRow(seed, bound_at, reached, _row(seed, bound_at, reached).early, f"s{seed}", llc=llc)


def test_the_llc_predictor_is_a_second_test_on_the_llc_alone():
    """Hand-made LLCs that separate the outcomes exactly (the bound runs lower): AUC 0 and every
    left-out run predicted right; the 12-measure predictor is computed as before, beside it."""
    rows = [_llc_row(1, 3000, 3000, 10.0), _llc_row(2, 4000, 4000, 11.0), _llc_row(3, 5000, 5000, 12.0),
            _llc_row(4, None, 40_000, 20.0), _llc_row(5, None, 40_000, 21.0), _llc_row(6, None, 40_000, 22.0),
            SeedRow(7, None, 9000, {}, "s7", finished=False)]
    s = summarize(rows, 40_000, "cmd", planned=7)
    p = s["llc_predictor"]
    assert p["features"] == ["llc"] and p["n"] == 6 and p["bound"] == 3
    assert p["auc"] == {"llc": 0.0} and p["loo_accuracy"] == 1.0 and p["base_rate"] == 0.5
    assert s["predictor"]["features"] == list(FEATURES)
    md = markdown(s)
    assert "The LLC alone as a predictor" in md and "| 1 | 3,000 | 3,000 | 10.00 |" in md
    assert "| 7 | — | 9,000 (training) | — |" in md
    plain = summarize([_row(1, 3000, 3000), _row(4, None, 40_000)], 40_000, "cmd", planned=2)
    assert plain["llc_predictor"] is None and "LLC" not in markdown(plain)


def test_the_early_llc_is_sampled_once_per_run(tmp_path, monkeypatch):
    import assign_add.studies.survival as survival

    calls = []
    monkeypatch.setattr(survival, "early_llc", lambda run, step: calls.append(step) or 7.5)
    run = type("Run", (), {"root": tmp_path})()
    assert survival.cached_early_llc(run, 1500) == 7.5 and survival.cached_early_llc(run, 1500) == 7.5
    assert calls == [1500] and json.loads((tmp_path / "llc-1500.json").read_text()) == {"step": 1500, "llc": 7.5}


def _study(seeds: range, low_binds: bool, horizon: int = 40_000) -> dict:
    """A survival summary whose seeds bind exactly when their 1-var held-out accuracy at the early step is
    low (``low_binds``) or high; every other measure is the same in every run (no information)."""
    rows = []
    for i, seed in enumerate(seeds):
        bound = i % 2 == 0
        acc = (0.2 if bound == low_binds else 0.4) + 0.001 * i
        early = {k: 1.0 for k in FEATURES} | {"acc_1var_heldout": acc}
        rows.append({"seed": seed, "bound_at": 3_000 if bound else None, "reached": 3_000 if bound else horizon,
                     "early": early, "out": f"seed-{seed}", "early_step": 1500, "finished": True, "llc": None})
    return {"horizon": horizon, "planned": len(rows), "rows": rows}


def test_a_predictor_confirmed_on_fresh_seeds_and_refuted_when_the_sign_flips(tmp_path):
    """Fitted on 20 runs where low accuracy means binding, scored on 10 fresh runs: where the fresh runs
    follow the same rule, accuracy 1 and AUC 1 (a permutation reaches AUC 1 with probability 1/C(10,5) =
    1/252, so p ≈ 0.004 < 0.05): confirmed; where they follow the opposite rule, AUC 0: not confirmed."""
    from assign_add.studies.survival import confirm, confirm_line

    fit, same, flipped = tmp_path / "fit.json", tmp_path / "same.json", tmp_path / "flipped.json"
    fit.write_text(json.dumps(_study(range(100, 120), low_binds=True)))
    same.write_text(json.dumps(_study(range(200, 210), low_binds=True)))
    flipped.write_text(json.dumps(_study(range(300, 310), low_binds=False)))
    ok = confirm(fit, [same])
    assert (ok["accuracy"], ok["base_rate"], ok["auc"], ok["confirmed"]) == (1.0, 0.5, 1.0, True)
    assert ok["auc_p_value"] < 0.02 and ok["fresh_seeds"] == list(range(200, 210))
    assert "confirmed" in confirm_line(ok) and "not confirmed" not in confirm_line(ok)
    bad = confirm(fit, [flipped])
    assert (bad["accuracy"], bad["auc"], bad["confirmed"]) == (0.0, 0.0, False)
    both = confirm(fit, [same, flipped])
    # the halves cancel but for the 0.001 offsets: 55 of the 100 (bound, unbound) pairs are ordered right
    assert both["test_n"] == 20 and both["auc"] == 0.55 and both["confirmed"] is False


def test_survival_confirm_refuses_what_is_not_a_fresh_comparable_study(tmp_path):
    fit, again, short = tmp_path / "fit.json", tmp_path / "again.json", tmp_path / "short.json"
    fit.write_text(json.dumps(_study(range(100, 120), low_binds=True)))
    again.write_text(json.dumps(_study(range(110, 120), low_binds=True)))
    short.write_text(json.dumps(_study(range(200, 210), low_binds=True, horizon=20_000)))
    runner = CliRunner()
    for test, message in ((again, "in both studies"), (short, "horizon 20,000"), (tmp_path / "none.json", "no such file")):
        res = runner.invoke(app, ["survival-confirm", str(fit), str(test)])
        assert res.exit_code == 2 and message in res.output, res.output
    res = runner.invoke(app, ["survival-confirm", str(fit), str(fit.parent / "fit.json"), "--out", str(tmp_path / "c.json")])
    assert res.exit_code == 2 and not (tmp_path / "c.json").exists(), "nothing written on a refusal"


def test_norm_lead_test_by_hand():
    from assign_add.studies.early import norm_lead_test

    # the 4 bound runs have the 4 largest norms: exact one-sided p = 1 / C(8, 4) = 1/70
    res = norm_lead_test([1, 2, 3, 4, 5, 6, 7, 8], [False] * 4 + [True] * 4)
    assert res["auc"] == 1.0 and res["method"] == "exact" and res["p_value"] == pytest.approx(1 / 70)
    assert res["verdict"] == "confirmed" and (res["n"], res["bound"]) == (8, 4)
    # the other way round: higher norms in the runs that did not bind -> not confirmed (one-sided)
    assert norm_lead_test([8, 7, 6, 5, 4, 3, 2, 1], [False] * 4 + [True] * 4)["verdict"] == "not confirmed"
    # 3 against 3, perfectly separated: p = 1/20 = 0.05, not below the cut
    assert norm_lead_test([1, 2, 3, 4, 5, 6], [False] * 3 + [True] * 3)["verdict"] == "not confirmed"
    assert norm_lead_test([1, 2, 3], [True] * 3)["verdict"] == "not decided"


def test_survival_norm_reads_fresh_studies_and_refuses_a_seed_twice(tmp_path):
    from assign_add.studies.survival import norm_lead

    rows = [_row(s, 3000 if s % 2 else None, 3000 if s % 2 else 40_000) for s in range(6)]
    for i, r in enumerate(rows):
        r.early["param_norm"] = float(10 + i)
    path = tmp_path / "s.json"
    path.write_text(json.dumps(summarize(rows, 40_000, "cmd", planned=6)))
    res = norm_lead([path])
    assert res["n"] == 6 and res["bound"] == 3 and res["seeds"] == list(range(6))
    with pytest.raises(RunError, match="seed 0 is in two of the studies"):
        norm_lead([path, path])


@pytest.mark.slow
def test_survival_killed_and_rerun_equals_an_uninterrupted_study(tmp_path):
    """SIGKILL mid-study, the same command again: the same rows and bound-by table as a study never killed."""
    import subprocess
    import sys

    from conftest import kill_once_at

    args = ["--seeds", "3", "--steps", "1500", "--workers", "1", "--no-progress", "task.eval_pool_size=300",
            "train.batch_size=32", "train.eval_every=250", "train.compile=false"]

    def command(out):
        return [sys.executable, "-m", "assign_add.cli", "survival", "--out", str(out), *args]

    killed = tmp_path / "killed"
    proc = subprocess.Popen(command(killed), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    kill_once_at(proc, killed / "seed-3" / "status.json", 500)
    partial = killed / "survival.json"
    assert not partial.is_file() or json.loads(partial.read_text())["finished"] == 0, "killed before it finished"
    for out in (killed, tmp_path / "straight"):
        done = subprocess.run(command(out), capture_output=True, text=True)
        assert done.returncode == 0, done.stderr[-800:]

    def comparable(path):
        s = json.loads(path.read_text())
        rows = [{k: v for k, v in r.items() if k != "out"} for r in s["rows"]]
        return rows, s["bound_by"], s["finished"]

    assert comparable(killed / "survival.json") == comparable(tmp_path / "straight" / "survival.json")


def test_norm_split_finds_the_planted_group(tmp_path):
    """Bound runs carry a layer-1 attention twice as large from step 50 on: that group and the total part there,
    the others never (equal norms tie: AUC 0.5)."""
    from dataclasses import asdict

    import torch

    from assign_add.config import preset
    from assign_add.model.hooked import AssignAddTransformer
    from assign_add.run import RunDir, save_checkpoint
    from assign_add.studies.survival import SeedRow, norm_split, norm_split_markdown

    cfg = preset("paper")
    rows = []
    for i in range(6):
        is_bound = i < 3
        run = RunDir(tmp_path / f"seed-{i}")
        model = AssignAddTransformer.from_config(cfg.model, cfg.task, seed=0)
        for step in (0, 50, 100):
            if step == 50 and is_bound:
                with torch.no_grad():
                    for n, p in model.named_parameters():
                        if n.startswith("blocks.0.attn."):
                            p.mul_(2.0)
            save_checkpoint(model, run.checkpoint_path(step), step)
        rows.append(SeedRow(i, 3000 if is_bound else None, 3000 if is_bound else 40_000, {}, f"seed-{i}"))
    (tmp_path / "survival.json").write_text(json.dumps({"horizon": 40_000, "planned": 6,
                                                        "rows": [asdict(r) for r in rows]}))
    res = norm_split(tmp_path / "survival.json")
    assert res["steps"] == [0, 50, 100] and (res["runs"], res["bound"]) == (6, 3)
    assert [r["layer1-attn"]["auc"] for r in res["table"]] == [0.5, 1.0, 1.0]
    assert res["parting_step"]["layer1-attn"] == 50 and res["parting_step"]["total"] == 50
    assert res["parting_step"]["mlp2"] is None
    assert "| 50 |" in norm_split_markdown(res)
