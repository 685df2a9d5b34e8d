"""The command line: outputs, and one-line errors with exit status 2 for user mistakes."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from typer.testing import CliRunner

from assign_add.cli import app
from assign_add.train.trainer import train

from conftest import REPO, small_paper_cfg

runner = CliRunner()


def invoke(*args: str):
    return runner.invoke(app, list(args))


def assert_user_error(result, fragment: str) -> None:
    assert result.exit_code == 2, result.output
    lines = [ln for ln in result.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("error:"), result.stderr
    assert fragment in lines[0], lines[0]
    assert "Traceback" not in result.output


@pytest.mark.parametrize(
    "args, fragment",
    [
        (["data", "task.f=1.5"], "task.f"),
        (["data", "task.f=0"], "task.f"),
        (["data", "task.max_assignments=7"], "task.max_assignments"),
        (["data", "task.forbidden_left=z"], "task.forbidden_left"),
        (["data", "task.mixture.zero_var=0.9"], "task.mixture"),
        (["data", "task.modulus=1"], "task.modulus"),
        (["data", "--split", "nope"], "--split"),
        (["data", "--preset", "huge"], "preset"),
        (["config", "train.nope=3"], "train.nope"),
        (["train", "--out", "/tmp/never-created", "train.steps=0"], "train.steps"),
    ],
)
def test_bad_config_is_one_line_exit_2(args, fragment):
    assert_user_error(invoke(*args), fragment)


def test_data_command_jsonl_fields():
    res = invoke("data", "--n", "5", "--jsonl")
    assert res.exit_code == 0
    rows = [json.loads(ln) for ln in res.stdout.splitlines()]
    assert len(rows) == 5 and set(rows[0]) == {"text", "tokens", "answer", "category", "split"}
    assert rows[0]["category"] in {"0var", "1var_left", "1var_right", "2var"}
    res = invoke("data", "--split", "1var_b_right", "--n", "3")
    assert res.exit_code == 0 and all("+b=" in ln for ln in res.stdout.splitlines())
    res = invoke("data", "--n", "2", "task.layout=infix", "task.n_ctx=28", "--jsonl")
    assert res.exit_code == 0 and len(json.loads(res.stdout.splitlines()[0])["tokens"]) == 28


def test_config_command_round_trips(tmp_path):
    res = invoke("config", "task.f=0.25")
    assert res.exit_code == 0 and "f = 0.25" in res.stdout
    (tmp_path / "c.toml").write_text(res.stdout)
    from_file = invoke("data", "--config", str(tmp_path / "c.toml"), "--n", "20")
    from_override = invoke("data", "task.f=0.25", "--n", "20")
    default = invoke("data", "--n", "20")
    assert from_file.exit_code == 0 and from_file.stdout == from_override.stdout, "the file is the override"
    assert from_file.stdout != default.stdout, "and it changed what is sampled (f = 0.25 trains other pairs)"


@pytest.fixture(scope="module")
def tiny_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("cli") / "run"
    train(small_paper_cfg("train.steps=20", "train.eval_every=10", "train.batch_size=32"), out)
    return out


@pytest.mark.parametrize(
    "prompt, fragment",
    [
        ("c=1, b=17, z+19=", "unknown variable 'z'"),
        ("c=1, b=17, a+19=", "'a' is not assigned"),
        ("c=70, c+1=", "value 70 is outside"),
        ("c=1 b=2, c+1=", "not of the form"),
        ("a=1, b=2, c=3, d=4, e=5, f=6, g=7, a+b=", "context"),
    ],
)
@pytest.mark.slow
def test_predict_bad_prompts(tiny_run, prompt, fragment):
    assert_user_error(invoke("predict", str(tiny_run), prompt), fragment)


@pytest.mark.slow
def test_predict_outputs(tiny_run, tmp_path):
    res = invoke("predict", str(tiny_run), "c=1, b=17, a=42, b+19=", "--json", "--top", "2")
    assert res.exit_code == 0
    row = json.loads(res.stdout)
    assert row["expected"] == 36 and len(row["top"]) == 2 and row["answer"] == row["top"][0]["answer"]
    prompts = tmp_path / "p.txt"
    prompts.write_text("a=1, a+1=\nb=3, 4+b=\n")
    res = invoke("predict", str(tiny_run), "--file", str(prompts), "--step", "16")
    assert res.exit_code == 0 and len(res.stdout.strip().splitlines()) == 2
    assert_user_error(invoke("predict", str(tiny_run), "a=1, a+1=", "--step", "7"), "no checkpoint at step 7")
    prompts.write_text("a=1, a+1=\nq=3, 4+q=\n")
    assert_user_error(invoke("predict", str(tiny_run), "--file", str(prompts)), "line 2")
    assert_user_error(invoke("predict", str(tmp_path), "a=1, a+1="), "not a run directory")


@pytest.mark.slow
def test_eval_command(tiny_run):
    res = invoke("eval", str(tiny_run), "--steps", "0,20", "--sets", "0var_train,1var_heldout", "--json")
    assert res.exit_code == 0
    recs = [json.loads(ln) for ln in res.stdout.splitlines()]
    assert [r["step"] for r in recs] == [0, 20] and set(recs[0]["acc"]) == {"0var_train", "1var_heldout"}
    assert_user_error(invoke("eval", str(tiny_run), "--sets", "nope"), "unknown set")


def test_real_process_exit_status_and_no_traceback():
    proc = subprocess.run([sys.executable, "-m", "assign_add.cli", "data", "task.f=2"], cwd=REPO,
                          capture_output=True, text=True)
    assert proc.returncode == 2
    assert proc.stderr.strip().splitlines() == ["error: task.f: must be in (0, 1], got 2.0"]
