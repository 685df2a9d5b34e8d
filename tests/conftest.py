"""Shared fixtures.  The authors' artifacts are looked up at ../shared/paper-artifacts (or
$ASSIGN_ADD_PAPER_ARTIFACTS); tests that need them are skipped with a message where absent."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from assign_add.config import RunConfig, preset, resolve

REPO = Path(__file__).resolve().parents[1]

if os.environ.get("PYTEST_XDIST_WORKER"):  # one test process per core (pytest -n): one torch thread each
    import torch

    torch.set_num_threads(1)
ARTIFACTS = Path(os.environ.get("ASSIGN_ADD_PAPER_ARTIFACTS", REPO.parent / "shared" / "paper-artifacts"))


def artifacts_or_skip() -> Path:
    if not (ARTIFACTS / "pairs.json").is_file():
        pytest.skip(f"paper artifacts not found at {ARTIFACTS} (set ASSIGN_ADD_PAPER_ARTIFACTS)")
    return ARTIFACTS


@pytest.fixture
def paper_cfg() -> RunConfig:
    return preset("paper")


def small_paper_cfg(*overrides: str) -> RunConfig:
    """The paper architecture and task with a short schedule, for end-to-end tests."""
    return resolve("paper", overrides=["task.eval_pool_size=300", *overrides])


@pytest.fixture(scope="session")
def released_run(tmp_path_factory):
    """All of the authors' released checkpoints, imported once per test session (read-only use)."""
    from assign_add.interop.paper import import_paper

    return import_paper([artifacts_or_skip() / "checkpoints"], tmp_path_factory.mktemp("released-all") / "run")


def kill_once_at(proc, status_path: Path, step: int, timeout: float = 600) -> None:
    """SIGKILL ``proc`` once the run whose ``status.json`` is ``status_path`` has saved ``step`` or later
    (generous timeout: a loaded 2-core machine starts torch slowly); fail if it exits first."""
    import json
    import signal
    import time

    deadline = time.time() + timeout
    while time.time() < deadline:
        try:
            if status_path.is_file() and json.loads(status_path.read_text())["step"] >= step:
                break
        except (json.JSONDecodeError, KeyError):
            pass
        if proc.poll() is not None:
            pytest.fail(f"the command exited before it could be killed: {proc.stderr.read().decode()[-500:]}")
        time.sleep(0.005)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
