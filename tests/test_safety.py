"""Nothing lost, nothing mixed: --force safety, one writer per run, append-only files, whole resumes,
streamed predict, and a one-line error (exit 2, no traceback, nothing left behind) for every user mistake."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch
from typer.testing import CliRunner

from assign_add.cli import app
from assign_add.config import resolve
from assign_add.io import DataFileError, append_line, read_jsonl
from assign_add.lock import LockedError, RunLock, is_locked
from assign_add.run import RunDir, RunError, check_replaceable
from assign_add.train.trainer import train

TINY = ["--preset", "tiny", "train.steps=20", "train.eval_every=10", "train.state_every=10"]
runner = CliRunner()


def cli(*args: str, cwd: Path | None = None):
    old = os.getcwd()
    if cwd is not None:
        os.chdir(cwd)
    try:
        return runner.invoke(app, [str(a) for a in args])
    finally:
        os.chdir(old)


def assert_user_error(result, *fragments: str) -> None:
    """Exit 2, exactly one line on stderr starting with 'error:', no traceback."""
    lines = [ln for ln in result.stderr.splitlines() if ln.strip()]
    assert result.exit_code == 2, (result.exit_code, result.stderr, result.exception)
    assert len(lines) == 1 and lines[0].startswith("error:"), result.stderr
    assert "Traceback" not in result.stderr and "Traceback" not in result.stdout
    for frag in fragments:
        assert frag in lines[0], (frag, lines[0])


@pytest.fixture(scope="module")
def tiny_run(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("tiny") / "run"
    assert cli("train", "--out", out, "--no-progress", *TINY).exit_code == 0
    return out


@pytest.fixture
def run_copy(tiny_run, tmp_path) -> Path:
    dst = tmp_path / "copy"
    shutil.copytree(tiny_run, dst)
    return dst


# --------------------------------------------------------------------------- --force


def test_force_refuses_a_folder_that_is_not_a_run(tmp_path):
    (tmp_path / "notes.txt").write_text("mine")
    for target, cwd in ((tmp_path, None), (".", tmp_path)):
        res = cli("train", "--out", target, "--force", "--no-progress", *TINY, cwd=cwd)
        assert_user_error(res, "refusing to delete")
        assert (tmp_path / "notes.txt").read_text() == "mine"
    res = cli("train", "--out", tmp_path, "--no-progress", *TINY)
    assert_user_error(res, "not a run directory")
    assert "--force" not in res.stderr, "the refusal must not suggest deleting the user's folder"


def test_force_refuses_the_current_directory_and_its_parents(run_copy):
    sub = run_copy / "checkpoints"
    for target in (".", ".."):
        with pytest.raises(RunError, match="current directory or a parent"):
            old = os.getcwd()
            os.chdir(sub)
            try:
                check_replaceable(Path(target))
            finally:
                os.chdir(old)


def test_force_refuses_a_run_holding_foreign_files_and_replaces_a_clean_run(run_copy):
    (run_copy / "my_notes.md").write_text("keep")
    assert_user_error(cli("train", "--out", run_copy, "--force", "--no-progress", *TINY), "my_notes.md")
    (run_copy / "my_notes.md").unlink()
    old_ckpt = run_copy / "checkpoints" / "step_000020.safetensors"
    old_inode = old_ckpt.stat().st_ino
    res = cli("train", "--out", run_copy, "--force", "--no-progress", *TINY, "train.seed=7")
    assert res.exit_code == 0, res.stderr
    assert RunDir(run_copy).config().train.seed == 7 and old_ckpt.stat().st_ino != old_inode
    assert not list(run_copy.parent.glob(".*.tmp")), "no temporary folder left beside the run"


# --------------------------------------------------------------------------- one writer per run


def test_a_second_writer_is_refused_with_the_holders_pid(run_copy):
    with RunLock(run_copy, "test holder"):
        assert is_locked(run_copy)
        for args in (("train", "--out", run_copy, "--resume", "--no-progress", *TINY),
                     ("analyze", run_copy, "--only", "dynamics", "--no-progress"),
                     ("eval", run_copy, "--sets", "0var_train")):
            assert_user_error(cli(*args), f"pid {os.getpid()}", "test holder")
        with pytest.raises(LockedError):
            RunLock(run_copy)
    assert not is_locked(run_copy)
    assert cli("eval", run_copy, "--sets", "0var_train").exit_code == 0, "free again once released"


@pytest.mark.slow
def test_two_train_processes_into_one_run_never_mix(tmp_path):
    """Two real `assign-add train` processes into the same --out: exactly one writes the run."""
    out = tmp_path / "run"
    cmd = [sys.executable, "-m", "assign_add.cli", "train", "--out", str(out), "--no-progress", "--preset", "tiny",
           "train.steps=40", "train.eval_every=10"]
    procs = [subprocess.Popen([*cmd, f"train.seed={s}"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for s in (42, 43)]
    results = [p.communicate(timeout=300) + (p.returncode,) for p in procs]
    codes = sorted(r[2] for r in results)
    assert codes == [0, 2], results
    loser = next(r for r in results if r[2] == 2)
    assert len(loser[1].strip().splitlines()) == 1 and "error:" in loser[1] and "Traceback" not in loser[1]
    seed = RunDir(out).config().train.seed
    steps = [r["step"] for r in read_jsonl(out / "metrics.jsonl")]
    assert steps == list(range(0, 41, 10)), "one writer's records, in order"
    assert seed in (42, 43)


# --------------------------------------------------------------------------- append-only files


def test_a_torn_last_line_is_tolerated_and_repaired_before_appending(tmp_path):
    path = tmp_path / "m.jsonl"
    append_line(path, '{"step": 1}')
    with open(path, "a") as fh:
        fh.write('{"step": 2, "acc"')  # a writer killed mid-line
    assert read_jsonl(path) == [{"step": 1}]
    append_line(path, '{"step": 2}')
    assert read_jsonl(path) == [{"step": 1}, {"step": 2}]


def test_a_corrupt_line_before_the_last_is_an_error_naming_file_and_line(run_copy):
    metrics = run_copy / "metrics.jsonl"
    lines = metrics.read_text().splitlines()
    lines[1] = lines[1][:20]
    metrics.write_text("\n".join(lines) + "\n")
    before = metrics.read_text()
    with pytest.raises(DataFileError, match="metrics.jsonl line 2"):
        read_jsonl(metrics)
    assert_user_error(cli("train", "--out", run_copy, "--resume", "--no-progress", *TINY, "train.steps=30"),
                      "metrics.jsonl line 2")
    assert_user_error(cli("analyze", run_copy, "--only", "dynamics", "--no-progress"), "metrics.jsonl line 2")
    assert metrics.read_text() == before, "nothing rewrote the file"


def test_evals_cache_records_after_a_torn_line_are_read(run_copy):
    assert cli("eval", run_copy, "--steps", "0", "--sets", "0var_train").exit_code == 0
    with open(run_copy / "evals.jsonl", "a") as fh:
        fh.write('{"step": 20, "ac')  # torn
    res = cli("eval", run_copy, "--steps", "20", "--sets", "0var_train")  # repairs the tail, appends
    assert res.exit_code == 0, res.stderr
    steps = [r["step"] for r in read_jsonl(run_copy / "evals.jsonl")]
    assert steps == [0, 20]


# --------------------------------------------------------------------------- resume only what is whole


def test_resume_refuses_what_is_not_whole(run_copy, tmp_path):
    resume = ("train", "--resume", "--no-progress", *TINY)
    assert_user_error(cli(*resume, "--out", tmp_path / "missing"), "no run to resume")
    assert not (tmp_path / "missing").exists()
    assert_user_error(cli(*resume, "--out", run_copy, "train.steps=10"), "below step 20")
    assert RunDir(run_copy).config().train.steps == 20, "the refused resume changed nothing"
    ckpt = run_copy / "checkpoints" / "step_000020.safetensors"
    ckpt.write_bytes(ckpt.read_bytes()[:1000])
    assert_user_error(cli(*resume, "--out", run_copy, "train.steps=40"), "unreadable checkpoint")
    (run_copy / "state.safetensors").unlink()
    assert_user_error(cli(*resume, "--out", run_copy, "train.steps=40"), "state.safetensors is missing")


def test_resume_cleans_orphan_temporary_files_and_continues(run_copy):
    orphan = run_copy / "checkpoints" / ".step_000030.safetensors.abc123.tmp"
    orphan.write_bytes(b"half")
    res = cli("train", "--out", run_copy, "--resume", "--no-progress", *TINY, "train.steps=30")
    assert res.exit_code == 0, res.stderr
    assert not orphan.exists()
    assert [r["step"] for r in read_jsonl(run_copy / "metrics.jsonl")] == [0, 10, 20, 30]


@pytest.mark.slow
def test_ctrl_c_exits_130_with_a_resume_hint(tmp_path):
    out = tmp_path / "run"
    cmd = [sys.executable, "-m", "assign_add.cli", "train", "--out", str(out), "--no-progress", "--preset", "tiny",
           "train.steps=1000000", "train.state_every=20"]
    # Ctrl-C's default disposition in the child, as under a terminal: a shell starts background jobs with
    # SIGINT ignored, and Python then installs no KeyboardInterrupt handler (so would the trainer under nohup)
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    try:
        deadline = time.time() + 120
        while time.time() < deadline and not (out.is_dir() and RunDir(out).status().get("step", 0) > 0):
            time.sleep(0.3)
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:  # never leave a million-step run behind a failed test
            proc.kill()
            proc.wait()
    assert proc.returncode == 130 and "--resume" in err and "Traceback" not in err
    assert not is_locked(out)


# --------------------------------------------------------------------------- predict --file


@pytest.mark.slow
def test_predict_streams_in_batches_with_physical_line_numbers(tiny_run, tmp_path):
    from assign_add.answers import file_prompts, predict

    model = RunDir(tiny_run).load_model()
    prompts = tmp_path / "p.txt"
    prompts.write_text("c=1, b=17, b+19=\n\n" + "a=3, a+4=\n" * 9 + "\n7+8=\n")
    once = list(predict(model, file_prompts(prompts), batch_size=4096))
    small = list(predict(model, file_prompts(prompts), batch_size=3))
    assert [p.to_json() for p in once] == [p.to_json() for p in small], "batching does not change answers"
    assert [p.line for p in once] == [1, *range(3, 12), 13] and once[-1].expected == 15
    prompts.write_text("c=1, c+1=\n\n\nc=1, c+x=\n")
    assert_user_error(cli("predict", tiny_run, "--file", prompts), "line 4")


@pytest.mark.parametrize("content, fragment", [
    (b"", "no prompts"), (b"\n  \n", "no prompts"), (b"c=1, c+1=\n\xff\xfe\n", "line 2: not UTF-8"),
    ("c=１, c+1=\n".encode(), "line 1"), ("c=1, c+١=\n".encode(), "line 1"),
])
@pytest.mark.slow
def test_predict_file_errors(tiny_run, tmp_path, content, fragment):
    path = tmp_path / "p.txt"
    path.write_bytes(content)
    assert_user_error(cli("predict", tiny_run, "--file", path), fragment)


# --------------------------------------------------------------------------- one line for every mistake


def _damage(run: Path, what: str) -> None:
    if what == "truncated checkpoint":
        p = run / "checkpoints" / "step_000020.safetensors"
        p.write_bytes(p.read_bytes()[:500])
    elif what == "empty checkpoint":
        (run / "checkpoints" / "step_000020.safetensors").write_bytes(b"")
    elif what == "corrupt status":
        (run / "status.json").write_text("{not json")
    elif what == "corrupt evalsets":
        (run / "data" / "evalsets.npz").write_bytes(b"PK\x03\x04garbage")
    elif what == "corrupt state":
        (run / "state.safetensors").write_bytes(b"\x00" * 64)


DAMAGED = [
    ("truncated checkpoint", ("predict", "{run}", "c=1, c+1="), "step_000020"),
    ("empty checkpoint", ("eval", "{run}", "--steps", "20"), "step_000020"),
    ("truncated checkpoint", ("analyze", "{run}", "--no-progress"), "step_000020"),
    ("corrupt status", ("train", "--out", "{run}", "--resume", "--no-progress", *TINY), "status.json"),
    ("corrupt status", ("analyze", "{run}", "--no-progress"), "status.json"),
    ("corrupt evalsets", ("eval", "{run}"), "evalsets.npz"),
    ("corrupt evalsets", ("analyze", "{run}", "--no-progress"), "evalsets.npz"),
    ("corrupt state", ("train", "--out", "{run}", "--resume", "--no-progress", *TINY, "train.steps=30"),
     "state.safetensors"),
]


@pytest.mark.parametrize("damage, args, fragment", DAMAGED, ids=[f"{d[0]}-{d[1][0]}" for d in DAMAGED])
def test_damaged_runs_give_one_line(run_copy, damage, args, fragment):
    _damage(run_copy, damage)
    assert_user_error(cli(*(a.format(run=run_copy) for a in args)), fragment)


def _bad_pth(tmp_path: Path) -> Path:
    p = tmp_path / "checkpoint_step_1.pth"
    torch.save({"embed.W_E": torch.zeros(74, 128), "blocks.0.attn.W_Q": "not a tensor"}, p)
    return p


MISTAKES = [  # (arguments, fragment of the one error line); {tmp} is a fresh folder, {file} a plain file in it
    (("train", "--out", "{tmp}/r", "train.lr=nan"), "train.lr"),
    (("train", "--out", "{tmp}/r", "train.weight_decay=nan"), "train.weight_decay"),
    (("train", "--out", "{tmp}/r", "model.init_scale=nan"), "model.init_scale"),
    (("train", "--out", "{tmp}/r", "train.lr=inf"), "train.lr"),
    (("train", "--out", "{tmp}/r", "train.seed=-1"), "train.seed"),
    (("train", "--out", "{tmp}/r", "task.eval_seed=-3"), "task.eval_seed"),
    (("train", "--out", "{tmp}/r", "train.eval_sets=nope"), "train.eval_sets"),
    (("train", "--out", "{tmp}/r", "--config", "{tmp}/latin1.toml"), "not UTF-8"),
    (("train", "--out", "{file}", "--preset", "tiny"), "is a file"),
    (("train", "--out", "{file}/sub", "--preset", "tiny"), "is a file"),
    (("train", "--out", "/sys/assign-add-test/run", "--preset", "tiny"), "/sys/assign-add-test"),
    (("import-paper", "{pth}", "--out", "{file}"), "is a file"),
    (("import-paper", "{pth}", "--out", "{tmp}/r"), "not a tensor"),
    (("import-paper", "{pth}", "--out", "{tmp}/r", "--final-step", "-5"), "--final-step"),
    (("sweep", "--param", "task.f", "--values", "0.5", "--out", "{file}", "--preset", "f-short"), "is a file"),
    (("sweep", "--param", "task.f", "--values", "0.5", "--out", "{tmp}/s", "--workers", "-1"), "--workers"),
    (("sweep", "--param", "task.f", "--values", "0.5", "--out", "{tmp}/s", "--steps", "0"), "--steps"),
    (("sweep", "--param", "task.f", "--values", "0.5", "--out", "{tmp}/s", "--score", "nope"), "--score"),
    (("sweep", "--param", "task.f", "--values", "0.5,0.5", "--out", "{tmp}/s"), "duplicate"),
    (("sweep", "--param", "task.f", "--values", "0.5", "--steps", "5", "--out", "{tmp}/bad-spec"), "spec.json"),
    (("reproduce", "--out", "{file}", "--quick"), "is a file"),
    (("bench", "--steps", "0"), "--steps"),
    (("predict", "{tmp}/nowhere", "c=1, c+1="), "not a run directory"),
    (("explore", "{tmp}/nowhere"), "not a run directory"),
    (("explore", "{tmp}/nowhere", "--cache", "0"), "--cache"),
    (("explore", "{tmp}/nowhere", "--port", "70000"), "--port"),
    (("bench", "--what", "explore"), "--run"),
    (("phases", "{tmp}/nowhere"), "not a run directory"),
    (("train", "--out", "{tmp}/r", "train.data_seed=-2"), "train.data_seed"),
]


@pytest.mark.parametrize("args, fragment", MISTAKES, ids=[" ".join(m[0][:2]) + f"-{i}" for i, m in enumerate(MISTAKES)])
def test_every_mistake_is_one_line_and_leaves_nothing(tmp_path, args, fragment):
    (tmp_path / "plain.txt").write_text("a file")
    (tmp_path / "latin1.toml").write_bytes("[train]\nsteps = 10 # caf\xe9\n".encode("latin-1"))
    (tmp_path / "bad-spec").mkdir()
    (tmp_path / "bad-spec" / "spec.json").write_text("{torn")
    subs = {"tmp": str(tmp_path), "file": str(tmp_path / "plain.txt"), "pth": str(_bad_pth(tmp_path))}
    before = sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*"))
    assert_user_error(cli(*(a.format(**subs) for a in args)), fragment)
    after = sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*"))
    assert after == before, "nothing was written"


@pytest.mark.slow
def test_a_failed_run_leaves_no_directory_and_the_next_one_starts(tmp_path):
    out = tmp_path / "r"
    with pytest.raises(RunError):
        train(resolve("tiny", overrides=["train.steps=5"]), out, resume=True)
    assert not out.exists()
    train(resolve("tiny", overrides=["train.steps=5"]), out)
    assert json.loads((out / "status.json").read_text())["state"] == "complete"
