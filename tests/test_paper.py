"""Import of the authors' released checkpoints (skipped where ../shared/paper-artifacts is absent)."""

from __future__ import annotations

import pytest
import torch

from assign_add.interop.paper import import_paper
from assign_add.run import RunError
from assign_add.train.checkpoint_eval import evaluate_checkpoints

from conftest import artifacts_or_skip


@pytest.fixture(scope="module")
def paper_run(tmp_path_factory):
    art = artifacts_or_skip() / "checkpoints"
    files = [art / "checkpoint_step_5301.pth", art / "checkpoint_step_5401.pth", art / "model_state_dict.pth"]
    return import_paper(files, tmp_path_factory.mktemp("paper") / "run")


def test_import_writes_a_run_with_steps_from_file_names(paper_run):
    assert paper_run.checkpoint_steps() == [5301, 5401, 40_000]
    assert paper_run.status()["source"] == "paper-import"
    model = paper_run.load_model()
    assert "blocks.0.mlp.W_in" not in model.state_dict()


def test_released_model_accuracies(paper_run):
    recs = {r["step"]: r["acc"] for r in evaluate_checkpoints(paper_run, sets=["0var_heldout_all", "1var_heldout"])}
    assert recs[40_000]["0var_heldout_all"] >= 0.990, "claim C5: ~99.4 % on the 1,045 held-out pairs"
    assert recs[5401]["1var_heldout"] - recs[5301]["1var_heldout"] >= 0.30, "claim C2: the binding spike"
    again = evaluate_checkpoints(paper_run, steps=[5401], sets=["1var_heldout"])
    assert again[0]["acc"]["1var_heldout"] == recs[5401]["1var_heldout"], "cached in evals.jsonl"


def test_import_refuses_nonzero_biases_and_bad_files(tmp_path):
    art = artifacts_or_skip() / "checkpoints"
    sd = torch.load(art / "checkpoint_step_1.pth", weights_only=True)
    sd["blocks.1.attn.b_Q"] = torch.full_like(sd["blocks.1.attn.b_Q"], 0.5)
    bad = tmp_path / "checkpoint_step_7.pth"
    torch.save(sd, bad)
    with pytest.raises(RunError, match=r"blocks\.1\.attn\.b_Q is not zero"):
        import_paper([bad], tmp_path / "out")
    assert not (tmp_path / "out").exists(), "nothing half-written"
    sd = torch.load(art / "checkpoint_step_1.pth", weights_only=True)
    sd["blocks.0.mlp.W_in"][0, 0] = 1.0
    torch.save(sd, bad)
    with pytest.raises(RunError, match=r"blocks\.0\.mlp\.W_in is not zero"):
        import_paper([bad], tmp_path / "out")
    junk = tmp_path / "checkpoint_step_9.pth"
    junk.write_text("not a checkpoint")
    with pytest.raises(RunError, match="not a readable"):
        import_paper([junk], tmp_path / "out")
    renamed = tmp_path / "weights.pth"
    renamed.write_bytes(bad.read_bytes())
    with pytest.raises(RunError, match="cannot read a step"):
        import_paper([renamed], tmp_path / "out")
