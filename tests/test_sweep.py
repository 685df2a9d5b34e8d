"""Sweeps: the threshold estimator, a tiny sweep on the local backend, resuming, and Ray."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pytest

from assign_add.config import ConfigError
from assign_add.sweep.sweep import PRESETS, SweepProgress, make_spec, poll_progress, run_sweep, watch_parent
from assign_add.sweep.threshold import estimate_threshold, logistic


@pytest.mark.parametrize("planted", [0.2, 0.25, 0.5])
def test_threshold_recovers_a_planted_crossing(planted):
    """Synthetic seeds: a logistic crossing 0.9 at ``planted``; each score an accuracy on 1,045 items."""
    x = np.linspace(0.05, 0.95, 20)
    scale = 0.03
    x0 = planted - scale * np.log(9.0)  # the 90 % crossing is at `planted`
    rng = np.random.default_rng(1)
    p = np.broadcast_to(logistic(x, x0, scale, 0.0), (3, 20))
    scores = rng.binomial(1045, p) / 1045
    thr = estimate_threshold(x, scores, level=0.9)
    assert thr.estimate == pytest.approx(planted, abs=0.01)
    assert thr.low <= thr.estimate <= thr.high
    assert thr.method == "bootstrap over seeds"
    one = estimate_threshold(x, scores[:1], level=0.9)
    assert one.estimate == pytest.approx(planted, abs=0.01) and one.method.endswith("(one seed)")


def test_interpolated_crossing():
    from assign_add.sweep.threshold import interpolated_crossing

    assert interpolated_crossing(np.array([0.1, 0.3, 0.5]), np.array([0.2, 0.8, 1.0]), 0.9) == pytest.approx(0.4)
    assert interpolated_crossing(np.array([0.1, 0.3]), np.array([0.2, 0.5]), 0.9) is None


def test_bootstrap_interval_spans_the_seeds():
    """Seeds whose own thresholds are 0.2, 0.25 and 0.3: the interval covers the spread's middle."""
    x = np.linspace(0.05, 0.95, 20)
    scores = np.stack([logistic(x, t - 0.03 * np.log(9.0), 0.03, 0.0) for t in (0.2, 0.25, 0.3)])
    thr = estimate_threshold(x, scores, level=0.9)
    assert 0.2 <= thr.low <= thr.estimate <= thr.high <= 0.3
    assert thr.high - thr.low > 0.03


def test_presets_and_bad_specs():
    assert PRESETS["f"]["param"] == "task.f" and len(PRESETS["f"]["values"]) == 20
    assert PRESETS["r"]["score"] == "2var_union"
    spec = make_spec("r", None, None, 2, 100, None, [])
    assert spec.seeds == [42, 43] and spec.point_config(0.5, 43).task.r == 0.5
    assert spec.point_config(0.5, 43).train.compile, "presets train with torch.compile"
    assert not make_spec("f", None, None, 1, 100, None, ["train.compile=false"]).point_config(0.5, 42).train.compile
    with pytest.raises(ConfigError, match="task.f"):
        make_spec(None, "task.f", [0.5, 1.5], 1, 10, None, [])
    with pytest.raises(ConfigError, match="--preset"):
        make_spec("q", None, None, 1, 10, None, [])


TINY = ["task.eval_pool_size=100", "model.d_model=32", "model.d_head=32", "model.d_mlp=64", "train.batch_size=64"]


def _tiny_spec(steps: int = 30):
    spec = make_spec(None, "task.f", [0.5, 0.9], 2, steps, "0var_heldout", TINY)
    spec.eval_every = 10
    return spec


def test_tiny_local_sweep_and_resume(tmp_path):
    spec = _tiny_spec()
    seen: list[SweepProgress] = []
    summary = run_sweep(spec, tmp_path / "s", "local", workers=2, progress=seen.append)
    assert seen[-1] == SweepProgress(4 * 30, 4 * 30, 4, 4), "progress counts steps over all points"
    assert all(a.steps_done <= b.steps_done for a, b in zip(seen, seen[1:]))
    assert poll_progress(spec, tmp_path / "s", []).steps_done == 120, "read from the runs' status files"
    assert [r["value"] for r in summary["rows"]] == [0.5, 0.9]
    assert all(len(r["per_seed"]) == 2 for r in summary["rows"])
    for name in ("sweep.json", "table.md", "figure.png", "spec.json"):
        assert (tmp_path / "s" / name).is_file()
    ckpt = tmp_path / "s" / "runs" / "task.f=0.5" / "seed-42" / "checkpoints" / "step_000030.safetensors"
    before = ckpt.stat().st_mtime_ns
    again = run_sweep(spec, tmp_path / "s", "local", workers=2)
    assert ckpt.stat().st_mtime_ns == before, "a finished point is not rerun"
    assert again["rows"] == summary["rows"]
    with pytest.raises(ConfigError, match="another specification"):
        run_sweep(_tiny_spec(steps=40), tmp_path / "s", "local", workers=1)


def test_two_model_ensemble_equals_two_single_runs(tmp_path):
    import torch
    from safetensors.torch import load_file

    from assign_add.config import resolve
    from assign_add.train.ensemble import train_ensemble
    from assign_add.train.trainer import train

    cfgs = [resolve("paper", overrides=["train.steps=40", "train.eval_every=20", "train.batch_size=64",
                                        "task.eval_pool_size=200", f"train.seed={s}", f"task.f={f}"])
            for s, f in ((1, 0.7), (2, 0.5))]
    train_ensemble(cfgs, [tmp_path / "e1", tmp_path / "e2"])
    for i, cfg in enumerate(cfgs):
        train(cfg, tmp_path / f"s{i + 1}")
        a = load_file(str(tmp_path / f"e{i + 1}" / "checkpoints" / "step_000040.safetensors"))
        b = load_file(str(tmp_path / f"s{i + 1}" / "checkpoints" / "step_000040.safetensors"))
        for k in b:
            assert torch.allclose(a[k], b[k], rtol=1e-4, atol=1e-5), k
        ma = json.loads((tmp_path / f"e{i + 1}" / "metrics.jsonl").read_text().splitlines()[-1])
        mb = json.loads((tmp_path / f"s{i + 1}" / "metrics.jsonl").read_text().splitlines()[-1])
        assert ma["step"] == mb["step"] == 40
        assert ma["acc"] == pytest.approx(mb["acc"], abs=0.01)
    with pytest.raises(Exception, match="share"):
        bad = resolve("paper", overrides=["train.batch_size=32", "train.steps=40"])
        train_ensemble([cfgs[0], bad], [tmp_path / "x1", tmp_path / "x2"])


@pytest.mark.slow
def test_ray_backend_equals_local(tmp_path):
    pytest.importorskip("ray")
    spec = _tiny_spec()
    spec.values = [0.5]
    local = run_sweep(spec, tmp_path / "local", "local", workers=2)
    remote = run_sweep(spec, tmp_path / "ray", "ray", workers=2)
    strip = lambda s: [{k: v for k, v in p.items() if k != "time"} for p in s["points"]]  # noqa: E731
    assert strip(local) == strip(remote)
    assert local["rows"] == remote["rows"]


def test_watch_parent_fires_only_when_the_parent_is_gone():
    orphaned, kept = threading.Event(), threading.Event()
    watch_parent(os.getppid(), kept.set, interval=0.01)
    watch_parent(-1, orphaned.set, interval=0.01)  # a parent this process does not have: "gone"
    assert orphaned.wait(2.0)
    time.sleep(0.1)
    assert not kept.is_set()


def _spawned_children(pid: int) -> list[int]:
    kids = []
    for entry in Path("/proc").iterdir():
        try:
            stat = (entry / "stat").read_text()
            cmd = (entry / "cmdline").read_bytes()
        except (OSError, ValueError):
            continue
        if entry.name.isdigit() and int(stat.rsplit(")", 1)[1].split()[1]) == pid and b"spawn_main" in cmd:
            kids.append(int(entry.name))
    return kids


def _alive(pid: int) -> bool:
    try:
        return (Path("/proc") / str(pid) / "stat").read_text().rsplit(")", 1)[1].split()[0] not in ("Z", "X")
    except OSError:
        return False


@pytest.mark.slow
@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="needs /proc (Linux)")
def test_killing_the_sweep_stops_its_workers(tmp_path):
    """SIGTERM to the sweep process: its pool workers exit too, and the point stays resumable."""
    cmd = [sys.executable, "-m", "assign_add.cli", "sweep", "--param", "task.f", "--values", "0.5,0.9",
           "--steps", "100000", "--workers", "2", "--out", str(tmp_path / "s"), *TINY]
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.time() + 120
        status = tmp_path / "s" / "runs" / "task.f=0.5" / "seed-42" / "status.json"
        while time.time() < deadline and not (status.is_file() and json.loads(status.read_text()).get("step")):
            time.sleep(0.5)
        workers = _spawned_children(proc.pid)
        assert len(workers) == 2, "the sweep runs its points in two pool workers"
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=30)
        deadline = time.time() + 30
        while time.time() < deadline and any(_alive(w) for w in workers):
            time.sleep(0.2)
        assert not any(_alive(w) for w in workers), "workers outlive the killed sweep"
    finally:
        proc.kill()
    assert json.loads(status.read_text())["state"] == "running"
