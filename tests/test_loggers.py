"""train.log_to: the same scalars as metrics.jsonl in TensorBoard event files and a W&B run (offline)."""

from __future__ import annotations

import pytest

from assign_add.config import ConfigError
from assign_add.run import RunDir
from assign_add.train.loggers import TENSORBOARD_DIR, scalars
from assign_add.train.trainer import train
from conftest import small_paper_cfg

STEPS = ["train.steps=200", "train.batch_size=64", "train.eval_every=100", "train.state_every=100"]
MARKS = {"addition": 100, "binding": None, "refinement": None}  # a hand-made detector's answer


def test_scalars_flatten_a_record_by_name():
    rec = {"step": 300, "time": 1.5, "train_loss": 0.25, "acc": {"0var_train": 0.5, "1var_train": None},
           "loss": {"0var_train": 2.0}, "weight_norm": {"embed": 3.0}}
    assert scalars(rec) == {"time": 1.5, "train_loss": 0.25, "acc/0var_train": 0.5, "loss/0var_train": 2.0,
                            "weight_norm/embed": 3.0}


def test_log_to_is_checked_before_anything_is_written(tmp_path):
    with pytest.raises(ConfigError, match="unknown sink 'csv'"):
        small_paper_cfg('train.log_to=["jsonl", "csv"]')
    with pytest.raises(ConfigError, match="must include"):
        small_paper_cfg('train.log_to=["tensorboard"]')


@pytest.mark.slow
def test_tensorboard_events_hold_the_metrics_and_the_phase_marks(tmp_path):
    pytest.importorskip("tensorboard", reason="train.log_to tensorboard needs the tensorboard package")
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    out = tmp_path / "run"
    train(small_paper_cfg(*STEPS, 'train.log_to=["jsonl", "tensorboard"]'), out, phase_marks=lambda records: MARKS)
    events = EventAccumulator(str(out / TENSORBOARD_DIR))
    events.Reload()
    records = RunDir(out).metrics()
    assert [r["step"] for r in records] == [0, 100, 200]
    for rec in records:
        for name, value in scalars(rec).items():
            logged = {e.step: e.value for e in events.Scalars(name)}
            assert logged[rec["step"]] == pytest.approx(value, rel=1e-6), name  # event files store float32
    assert [(e.step, e.value) for e in events.Scalars("phase/addition")] == [(200, 100.0)]
    assert "phase/binding" not in events.Tags()["scalars"], "a phase not seen has no mark"


@pytest.mark.slow
def test_a_resumed_run_does_not_log_its_steps_twice(tmp_path):
    pytest.importorskip("tensorboard", reason="train.log_to tensorboard needs the tensorboard package")
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    out, cfg = tmp_path / "run", small_paper_cfg(*STEPS, 'train.log_to=["jsonl", "tensorboard"]')
    train(cfg, out, stop_after=100)
    train(cfg, out, resume=True)
    events = EventAccumulator(str(out / TENSORBOARD_DIR))
    events.Reload()
    assert [e.step for e in events.Scalars("acc/0var_train")] == [0, 100, 200]


@pytest.mark.slow
def test_wandb_offline_run_lives_in_the_run_directory_and_holds_every_scalar(tmp_path, monkeypatch):
    wandb = pytest.importorskip("wandb", reason="train.log_to wandb needs the wandb package")
    monkeypatch.setenv("WANDB_MODE", "offline")  # never the network
    monkeypatch.setenv("WANDB_SILENT", "true")
    out = tmp_path / "run"
    train(small_paper_cfg(*STEPS, 'train.log_to=["jsonl", "wandb"]'), out, phase_marks=lambda records: MARKS)
    # run.finish() hands the records to W&B's service process; its teardown returns once that process has
    # written and closed every run's files (CI once read a header-only log here: the service still writing)
    wandb.teardown()
    logs = list((out / "wandb").glob("offline-run-*/run-*.wandb"))
    assert len(logs) == 1, "one offline W&B run, inside the run directory (wandb sync uploads it)"
    # the transaction log is W&B's own binary format (read by its Go core); every scalar's name is in it
    data = logs[0].read_bytes()
    service_log = "".join(p.read_text()[-2000:] for p in logs[0].parent.glob("logs/debug-internal.log"))
    for name in [*scalars(RunDir(out).metrics()[-1]), "phase/addition"]:
        assert name.encode() in data, f"{name} not in the {len(data)}-byte log; W&B's service said:\n{service_log}"
