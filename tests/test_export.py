"""assign-add export: a Hub-ready folder that reads back into the same run (same logits at every step)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
import torch

from assign_add.interop.export import export_run, import_export
from assign_add.report.card import claim_rows, phase_rows
from assign_add.run import RunDir, RunError
from assign_add.task.generator import Sampler
from assign_add.train.trainer import train
from conftest import small_paper_cfg


@pytest.fixture(scope="module")
def short_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("export") / "run"
    train(small_paper_cfg("train.steps=200", "train.batch_size=64", "train.eval_every=100",
                          "train.checkpoint_every=100"), out)
    return RunDir(out)


@pytest.mark.slow
def test_export_then_import_gives_the_same_logits_at_every_step(short_run, tmp_path):
    folder = export_run(short_run, tmp_path / "hub", phases=phase_rows(short_run))
    steps = short_run.checkpoint_steps()
    assert sorted(p.name for p in (folder / "checkpoints").iterdir()) == sorted(f"step{s}" for s in steps)
    meta = json.loads((folder / "config.json").read_text())
    assert meta["final_step"] == steps[-1] and meta["n_layers"] == 2 and meta["d_vocab_out"] == 59
    assert (folder / "model.safetensors").read_bytes() == short_run.checkpoint_path(steps[-1]).read_bytes()
    card = (folder / "README.md").read_text()
    assert card.startswith("---\nlibrary_name: assign-add") and "## Phases" in card and "--revision" in card
    back = import_export(folder, tmp_path / "back")
    assert back.checkpoint_steps() == steps and back.config() == short_run.config()
    assert back.metrics() == short_run.metrics()
    tokens = torch.as_tensor(Sampler(short_run.config().task, 5).batch(0, 64).tokens)
    for s in steps:
        with torch.no_grad():
            assert torch.equal(back.load_model(s)(tokens), short_run.load_model(s)(tokens)), s


@pytest.mark.slow
def test_export_refuses_a_non_empty_folder_and_leaves_nothing_half_written(short_run, tmp_path):
    taken = tmp_path / "taken"
    taken.mkdir()
    (taken / "notes.txt").write_text("mine")
    with pytest.raises(RunError, match="not an empty folder"):
        export_run(short_run, taken)
    assert [p.name for p in taken.iterdir()] == ["notes.txt"]
    assert not [p for p in tmp_path.iterdir() if p.name.endswith(".tmp")]


@pytest.mark.slow
def test_import_refuses_a_folder_that_is_not_an_export(tmp_path):
    (tmp_path / "x").mkdir()
    res = subprocess.run([sys.executable, "-m", "assign_add.cli", "import-export", str(tmp_path / "x"), "--out",
                          str(tmp_path / "r")], capture_output=True, text=True)
    assert res.returncode != 0 and "no config.json" in res.stderr and "Traceback" not in res.stderr
    assert not (tmp_path / "r").exists()


@pytest.mark.slow
def test_the_model_card_states_the_claims_and_where_the_weights_came_from(short_run, released_run, tmp_path):
    import shutil

    analysed = RunDir(tmp_path / "analysed")
    shutil.copytree(short_run.root, analysed.root)
    (analysed.root / "analysis.json").write_text("{}")  # an analysis that measured nothing
    card = (export_run(analysed, tmp_path / "hub", claims=claim_rows(analysed)) / "README.md").read_text()
    assert "| C5 | " in card and "| not measured |" in card, "every claim's verdict, as evaluate_claims gives it"
    released = (export_run(released_run, tmp_path / "released") / "README.md").read_text()
    assert "imported from the authors' released checkpoints" in released


@pytest.fixture(scope="module")
def tiny_export(tmp_path_factory):
    """A tiny run's exported folder (fast: the tiny preset, 16 steps, 8 checkpoints)."""
    from assign_add.config import resolve

    root = tmp_path_factory.mktemp("tiny-export")
    train(resolve("tiny", overrides=["train.steps=16", "train.eval_every=8"]), root / "run")
    return export_run(RunDir(root / "run"), root / "hub")


def _copy(folder, dest):
    import shutil

    return shutil.copytree(folder, dest)


def _refused(folder, out, *words):
    with pytest.raises(RunError) as err:
        import_export(folder, out)
    assert all(w in str(err.value) for w in words) and "\n" not in str(err.value), str(err.value)
    assert not out.exists() and not [p for p in out.parent.iterdir() if p.name.startswith(f".{out.name}")]


def test_import_refuses_a_corrupt_checkpoint_and_writes_nothing(tiny_export, tmp_path):
    folder = _copy(tiny_export, tmp_path / "hub")
    bad = folder / "checkpoints" / "step8" / "model.safetensors"
    bad.write_bytes(bytes(range(100)))
    _refused(folder, tmp_path / "back", str(bad), "unreadable checkpoint")


def test_import_refuses_a_step_its_manifest_names_without_a_file(tiny_export, tmp_path):
    import shutil

    folder = _copy(tiny_export, tmp_path / "hub")
    shutil.rmtree(folder / "checkpoints" / "step8")
    _refused(folder, tmp_path / "back", "step8", "missing", "lists step 8")


def test_import_refuses_a_checkpoint_of_another_shape(tiny_export, tmp_path):
    from safetensors.torch import load_file, save_file

    folder = _copy(tiny_export, tmp_path / "hub")
    path = folder / "checkpoints" / "step4" / "model.safetensors"
    tensors = load_file(str(path))
    name = next(iter(tensors))
    tensors[name] = torch.zeros(3, 3)
    save_file(tensors, str(path))
    _refused(folder, tmp_path / "back", str(path), name, "has shape (3, 3)")


def test_import_of_an_intact_folder_loads_every_step(tiny_export, tmp_path):
    back = import_export(tiny_export, tmp_path / "back")
    assert back.checkpoint_steps() == json.loads((tiny_export / "config.json").read_text())["checkpoint_steps"]
    for s in back.checkpoint_steps():
        assert back.load_model(s) is not None


def test_a_run_with_a_checkpoint_of_wrong_names_says_which_file(tiny_export, tmp_path):
    from safetensors.torch import load_file, save_file

    back = import_export(tiny_export, tmp_path / "back")
    path = back.checkpoint_path(back.checkpoint_steps()[-1])
    tensors = load_file(str(path))
    tensors["not.a.parameter"] = torch.zeros(1)
    save_file(tensors, str(path))
    with pytest.raises(RunError, match="unexpected parameter not.a.parameter") as err:
        back.load_model()
    assert str(path) in str(err.value)
