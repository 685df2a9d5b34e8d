"""Sweeps: the threshold estimator, a tiny sweep on the local backend, resuming, and Ray."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pytest

from assign_add.config import ConfigError
from assign_add.parallel import watch_parent
from assign_add.stats import interpolated_crossing, logistic
from assign_add.sweep.backends import SweepProgress, poll_progress
from assign_add.sweep.spec import AUTHORS_F_GRID, PRESETS, THRESHOLD_ACC as LEVEL, make_spec
from assign_add.sweep.sweep import run_sweep
from assign_add.sweep.threshold import estimate_threshold


GRID = np.asarray(AUTHORS_F_GRID)
STEP = GRID[1] - GRID[0]


def _curve(planted: float, lo: float = 0.02, hi: float = 1.0, scale: float = 0.03) -> np.ndarray:
    """A logistic from ``lo`` to ``hi`` whose 90 % crossing is at ``planted``."""
    x0 = planted - scale * np.log((LEVEL - lo) / (hi - LEVEL))
    return logistic(GRID, x0, scale, lo, hi)


def _draw(p: np.ndarray, seeds: int, rng: np.random.Generator) -> np.ndarray:
    """Each score an accuracy on 1,045 items (the exhaustive 0-var held-out set)."""
    return rng.binomial(1045, np.clip(np.broadcast_to(p, (seeds, len(p))), 0, 1)) / 1045


def _allowed(p: np.ndarray, seeds: int) -> tuple[float, float]:
    """The grid values the monotone estimate may land on: from the first value whose true score is within
    3 sd of binomial noise (1,045 items, averaged over ``seeds``) below the level, to the first value from
    which the true score stays 3 sd above it.  Its resolution is the grid; the noise decides the rest."""
    sd = np.sqrt(LEVEL * (1 - LEVEL) / 1045 / seeds)
    first = GRID[np.nonzero(p >= LEVEL - 3 * sd)[0][0]]
    clear = np.nonzero(p < LEVEL + 3 * sd)[0]
    return first, GRID[clear[-1] + 1] if len(clear) else GRID[0]


@pytest.mark.parametrize("planted", [0.2, 0.25, 0.5, 0.7])
@pytest.mark.parametrize("shape", ["clean", "plateau", "dip"])
def test_planted_thresholds_are_recovered(planted, shape):
    """Noisy curves that plateau below 1 or dip after the rise: the monotone estimate lands on a grid value
    at the planted crossing (within noise, :func:`_allowed`), the logistic within 0.02 of it."""
    hi = 0.95 if shape == "plateau" else 1.0
    p = _curve(planted, hi=hi)
    if shape == "dip":  # non-monotone: a dip after the rise that stays above the level
        p = np.where((GRID > planted + 1.5 * STEP) & (GRID < planted + 3.5 * STEP), p - 0.04, p)
    rng = np.random.default_rng(int(planted * 100))
    thr = estimate_threshold(GRID, _draw(p, 3, rng), n_boot=100)
    lo, hi_ok = _allowed(p, 3)
    assert lo <= thr.estimate <= hi_ok and planted - STEP <= thr.estimate <= planted + 2 * STEP, thr.estimate
    assert thr.low <= thr.estimate <= thr.high and thr.method == "bootstrap over seeds"
    assert thr.logistic == pytest.approx(planted, abs=0.02)
    assert thr.fit["hi"] == pytest.approx(hi, abs=0.03)
    one = estimate_threshold(GRID, _draw(p, 1, rng), n_boot=100)
    lo, hi_ok = _allowed(p, 1)
    assert lo <= one.estimate <= hi_ok and one.method.endswith("(one seed)")


def test_a_dip_below_the_level_moves_the_threshold_past_it():
    """A curve that reaches 0.95, falls to 0.8 at two values, then recovers: 'stays above' starts after the dip."""
    y = np.where(GRID < 0.3, 0.1, 0.97)
    y[(GRID > 0.4) & (GRID < 0.5)] = 0.8
    thr = estimate_threshold(GRID, y[None, :], n_boot=50)
    assert thr.estimate == pytest.approx(GRID[GRID >= 0.5][0])
    assert interpolated_crossing(GRID, y, LEVEL) < GRID[6], "the plain first crossing ignores the dip"


def test_a_curve_that_never_reaches_the_level_has_no_threshold():
    thr = estimate_threshold(GRID, np.full((2, len(GRID)), 0.85), n_boot=50)
    assert thr.estimate is None and thr.logistic is None


def test_interpolated_crossing():
    assert interpolated_crossing(np.array([0.1, 0.3, 0.5]), np.array([0.2, 0.8, 1.0]), 0.9) == pytest.approx(0.4)
    assert interpolated_crossing(np.array([0.1, 0.3]), np.array([0.2, 0.5]), 0.9) is None


def test_bootstrap_interval_spans_the_seeds():
    """Seeds whose own thresholds are 0.2, 0.35 and 0.5: the interval over seeds covers that spread."""
    scores = np.stack([_curve(t, scale=0.01) for t in (0.2, 0.35, 0.5)])
    thr = estimate_threshold(GRID, scores, n_boot=300)
    assert thr.low <= 0.25 and thr.high >= 0.45


def test_authors_grids_and_presets():
    f, r = PRESETS["f"], PRESETS["r"]
    assert len(f.values) == len(r.values) == 20
    assert f.values[0] == 0.06157894736842105 and f.values[-1] == pytest.approx(0.99)
    assert r.values[0] == 0.01 and r.values[1] == pytest.approx(0.01 + 0.98 / 19)
    assert f.steps == r.steps == 30_000 and (f.score, r.score) == ("0var_heldout_all", "2var_union")
    spec = make_spec("r", None, None, 2, None, None, [])
    cfg = spec.point_config(spec.values[3], 43)
    assert spec.seeds == [42, 43] and cfg.task.r == spec.values[3] and cfg.task.f == 0.7
    assert cfg.train.compile and cfg.train.steps == 30_000 and cfg.train.eval_sets == ["2var_union"]
    assert spec.eval_every == 1000 and "authors' r sweep" in spec.protocol
    assert make_spec("f", None, None, 1, None, None, []).point_config(0.3, 42).task.r == 1.0
    assert PRESETS["f-short"].steps == 10_000 and PRESETS["r-short"].steps == 20_000
    assert "modified" in make_spec("f", None, None, 1, 500, None, []).protocol
    assert not make_spec("f", None, None, 1, 100, None, ["train.compile=false"]).point_config(0.5, 42).train.compile
    later = make_spec("f", None, None, 2, None, None, [], first_seed=43)  # more seeds of the same protocol
    assert later.seeds == [43, 44] and later.protocol == PRESETS["f"].protocol
    assert later.point_config(later.values[0], later.seeds[1]).train.seed == 44


@pytest.mark.parametrize("args, field", [
    (("q", None, None, 1, 10, None, []), "--preset"),
    ((None, "task.f", [0.5, 1.5], 1, 10, None, []), "task.f"),
    ((None, "task.f", [0.5, 0.5], 1, 10, None, []), "--values"),
    ((None, "task.f", [0.5], 1, 0, None, []), "--steps"),
    ((None, "task.f", [0.5], 0, 10, None, []), "--seeds"),
    ((None, "task.f", [0.5], 1, 10, "nope", []), "--score"),
    ((None, "task.f", [0.5], 1, 10, None, [], -1), "--first-seed"),
])
def test_bad_specs_fail_before_anything_runs(args, field):
    with pytest.raises(ConfigError, match=field.replace(".", r"\.")):
        make_spec(*args)


def test_convergence_flags_a_point_still_rising(tmp_path):
    """Hand-written score curves: a point rising 0.05 over the last third is 'not converged'."""
    from assign_add.sweep.summary import CONVERGENCE_MARGIN, score_at

    curve = [(0, 0.0), (100, 0.5), (200, 0.6), (300, 0.65)]
    assert score_at(curve, 100) == 0.5 and score_at(curve, 250) == 0.6
    assert 0.65 - score_at(curve, 200) > CONVERGENCE_MARGIN


TINY = ["task.eval_pool_size=100", "model.d_model=32", "model.d_head=32", "model.d_mlp=64", "train.batch_size=64"]


def _tiny_spec(steps: int = 30):
    return make_spec(None, "task.f", [0.5, 0.9], 2, steps, "0var_heldout", TINY)


@pytest.mark.slow
def test_tiny_local_sweep_and_resume(tmp_path):
    spec = _tiny_spec()
    seen: list[SweepProgress] = []
    summary = run_sweep(spec, tmp_path / "s", "local", workers=2, progress=seen.append)
    assert seen[-1] == SweepProgress(4 * 30, 4 * 30, 4, 4), "progress counts steps over all points"
    assert all(a.steps_done <= b.steps_done for a, b in zip(seen, seen[1:]))
    assert poll_progress(spec, tmp_path / "s", []).steps_done == 120, "read from the runs' status files"
    assert [r["value"] for r in summary["rows"]] == [0.5, 0.9]
    assert all(len(r["per_seed"]) == 2 for r in summary["rows"])
    assert not summary["unfinished"]
    point = summary["points"][0]
    assert [s for s, _ in point["curve"]] == list(range(0, 31, 1)), "the score curve is recorded every step here"
    metrics = (tmp_path / "s" / "runs" / "task.f=0.5" / "seed-42" / "metrics.jsonl").read_text().splitlines()
    assert set(json.loads(metrics[5])["acc"]) == {"0var_heldout"}, "only the score set is evaluated during training"
    assert len(json.loads(metrics[-1])["acc"]) > 5, "the last step evaluates every set"
    for name in ("sweep.json", "table.md", "figure.png", "curves.png", "spec.json"):
        assert (tmp_path / "s" / name).is_file()
    ckpt = tmp_path / "s" / "runs" / "task.f=0.5" / "seed-42" / "checkpoints" / "step_000030.safetensors"
    before = ckpt.stat().st_mtime_ns
    again = run_sweep(spec, tmp_path / "s", "local", workers=2)
    assert ckpt.stat().st_mtime_ns == before, "a finished point is not rerun"
    assert again["rows"] == summary["rows"]
    with pytest.raises(ConfigError, match="another specification"):
        run_sweep(_tiny_spec(steps=40), tmp_path / "s", "local", workers=1)
    more = make_spec(None, "task.f", [0.5, 0.7, 0.9], 2, 30, "0var_heldout", TINY)  # one more value: extends
    assert [r["value"] for r in run_sweep(more, tmp_path / "s", "local", workers=2)["rows"]] == [0.5, 0.7, 0.9]
    assert ckpt.stat().st_mtime_ns == before


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


def _ray(*args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    ray_cli = Path(sys.executable).with_name("ray")
    return subprocess.run([str(ray_cli), *args], capture_output=True, text=True, timeout=180, env=env)


@pytest.mark.slow
def test_sweep_on_a_real_multi_process_ray_cluster(tmp_path):
    """`ray start --head` plus a second `ray start --address ...` node on this machine; the sweep runs with
    `--address auto` through the real CLI and gives the local backend's table; the cluster is stopped."""
    pytest.importorskip("ray")
    if not Path(sys.executable).with_name("ray").exists():
        pytest.skip("the ray command is not installed beside this Python")
    import tempfile

    short = tempfile.mkdtemp(prefix="ray", dir="/tmp")  # Ray's socket paths must fit in 107 bytes
    # recent Ray starts a head with token authentication: the joining node and the driver use the token too
    env = {**os.environ, "RAY_USAGE_STATS_ENABLED": "0", "RAY_TMPDIR": short, "RAY_AUTH_MODE": "token"}
    port = "6391"
    common = ["--num-cpus=1", "--object-store-memory=100000000", "--disable-usage-stats"]
    try:
        head = _ray("start", "--head", f"--port={port}", "--include-dashboard=false", *common, env=env)
        assert head.returncode == 0, head.stderr
        node = _ray("start", f"--address=127.0.0.1:{port}", *common, env=env)
        assert node.returncode == 0, node.stderr
        args = ["--param", "task.f", "--values", "0.5,0.9", "--steps", "30", "--score", "0var_heldout", *TINY]
        out = subprocess.run([sys.executable, "-m", "assign_add.cli", "sweep", *args, "--out", str(tmp_path / "ray"),
                              "--backend", "ray", "--address", "auto"], capture_output=True, text=True, timeout=300,
                             env={**env, "RAY_ADDRESS": f"127.0.0.1:{port}"})
        assert out.returncode == 0, out.stderr[-2000:]
    finally:
        _ray("stop", "--force", env=env)
        shutil.rmtree(short, ignore_errors=True)
    local = run_sweep(make_spec(None, "task.f", [0.5, 0.9], 1, 30, "0var_heldout", TINY), tmp_path / "local", "local",
                      workers=2)
    table = lambda p: (p / "table.md").read_text()  # noqa: E731
    assert table(tmp_path / "ray") == table(tmp_path / "local")
    assert json.loads((tmp_path / "ray" / "sweep.json").read_text())["rows"] == local["rows"]
