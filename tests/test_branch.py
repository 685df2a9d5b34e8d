"""Branch-and-replay: a branch is its parent up to step S, exactly, and then another data order."""

from __future__ import annotations

import json
import shutil

import pytest
import torch
from conftest import small_paper_cfg
from safetensors.torch import load_file

from assign_add.io import read_jsonl
from assign_add.run import RunError, open_run
from assign_add.train.branch import branch_info, make_branch
from assign_add.train.trainer import train

STEPS = ["train.steps=120", "train.eval_every=20", "train.batch_size=64", "train.state_every=40",
         "train.checkpoint_every=20", "train.seed=5"]


def _weights(run, step: int) -> dict[str, torch.Tensor]:
    return load_file(str(run.checkpoint_path(step)))


def _same(a: dict, b: dict) -> bool:
    return a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)


def _records(run) -> list[dict]:
    return [{k: v for k, v in r.items() if k != "time"} for r in read_jsonl(run.metrics_path)]


@pytest.fixture(scope="module")
def parent(tmp_path_factory):
    out = tmp_path_factory.mktemp("branch") / "parent"
    train(small_paper_cfg(*STEPS), out)
    return open_run(out)


@pytest.mark.slow
def test_branch_with_the_parents_data_seed_is_the_parent_bit_for_bit(parent, tmp_path):
    """Step 60 is not a saved-state step (40, 80, 120): the state is replayed from the seeds."""
    run = make_branch(parent.root, 60, tmp_path / "same", [])
    assert branch_info(run)["how"] == "replayed 60 steps"
    assert [r["step"] for r in run.metrics()] == [0, 20, 40, 60]
    train(run.config(), run.root, resume=True)
    for step in (80, 100, 120):
        assert _same(_weights(run, step), _weights(parent, step)), step
    assert _records(run) == _records(parent)
    assert run.status()["state"] == "complete"


@pytest.mark.slow
def test_branch_with_another_data_seed_starts_from_the_same_weights_and_goes_elsewhere(parent, tmp_path):
    run = make_branch(parent.root, 40, tmp_path / "other", ["train.data_seed=999"])
    info = branch_info(run)
    assert info["how"] == "saved state" or info["how"].startswith("replayed")
    assert (info["step"], info["parent_data_seed"], info["data_seed"]) == (40, 5, 999)
    assert run.config().train.order_seed == 999 and run.config().train.weights_seed == 5
    train(run.config(), run.root, resume=True)
    assert _same(_weights(run, 40), _weights(parent, 40))
    assert not torch.equal(_weights(run, 60)["embed.W_E"], _weights(parent, 60)["embed.W_E"])
    assert _records(run)[:3] == _records(parent)[:3]


@pytest.mark.slow
def test_branch_from_the_saved_state_continues_like_the_resumed_parent(parent, tmp_path):
    """At the parent's last step its saved state is used; the branch then equals the parent resumed further."""
    run = make_branch(parent.root, 120, tmp_path / "longer", ["train.steps=160"])
    assert branch_info(run)["how"] == "saved state"
    train(run.config(), run.root, resume=True)
    longer = tmp_path / "parent-copy"
    shutil.copytree(parent.root, longer)
    cfg = open_run(longer).config()
    cfg.train.steps = 160
    train(cfg, longer, resume=True)
    assert _same(_weights(run, 160), _weights(open_run(longer), 160))


@pytest.mark.parametrize("step, overrides, message", [
    (50, [], "evaluated step"),
    (140, [], "has reached step 120"),
    (60, ["model.d_model=64"], "may not change model.d_model"),
    (60, ["train.seed=6"], "may not change train.seed"),
    (60, ["train.steps=60"], "must run past it"),
])
@pytest.mark.slow
def test_branch_refuses_what_would_not_be_a_branch(parent, tmp_path, step, overrides, message):
    with pytest.raises(RunError, match=message):
        make_branch(parent.root, step, tmp_path / "bad", overrides)
    assert not (tmp_path / "bad").exists()


@pytest.mark.slow
def test_a_replay_that_does_not_reproduce_the_parent_is_refused(parent, tmp_path):
    """Another machine's rounding is simulated by a parent whose checkpoint at the step was changed."""
    copy = tmp_path / "parent"
    shutil.copytree(parent.root, copy)
    from safetensors.torch import save_file

    w = _weights(open_run(copy), 60)
    w["embed.W_E"][0, 0] += 1e-6
    save_file(w, str(open_run(copy).checkpoint_path(60)), metadata={"step": "60"})
    with pytest.raises(RunError, match="does not reproduce the parent's weights at step 60"):
        make_branch(copy, 60, tmp_path / "b", [])
    assert not (tmp_path / "b").exists()
    assert json.loads((copy / "status.json").read_text())["step"] == 120


def test_branch_table_counts_bound_by_the_horizon_and_leaves_open_branches_out():
    from assign_add.studies.branches import BranchRow, branch_table

    rows = [BranchRow("a/p", 0, 1, 3000, 3000, ""), BranchRow("a/p", 0, 2, None, 10000, ""),
            BranchRow("a/p", 0, 3, 12000, 12000, ""), BranchRow("a/p", 0, 4, None, 6000, ""),
            BranchRow("a/p", 500, 1, 800, 800, "")]
    table = branch_table(rows, 10000)
    first = table[0]
    # bound by 10,000: data 1; not: data 2 (watched to 10,000) and 3 (bound only at 12,000); data 4 still open
    assert (first["parent"], first["step"], first["branches"], first["watched"], first["bound"], first["open"]) == \
        ("p", 0, 4, 3, 1, 1)
    assert first["p_bound"] == pytest.approx(1 / 3) and first["median_bound_at"] == 3000
    lo, hi = first["ci95"]
    assert 0 < lo < 1 / 3 < hi < 1
    assert table[1]["bound"] == 1 and table[1]["watched"] == 1


@pytest.mark.slow
def test_branches_command_runs_resumes_and_reports(parent, tmp_path):
    from typer.testing import CliRunner

    from assign_add.cli import app

    args = ["branches", str(parent.root), "--out", str(tmp_path / "x"), "--at", "0,60", "--orders", "2",
            "--steps", "100", "--workers", "1", "--no-progress"]
    first = CliRunner().invoke(app, args)
    assert first.exit_code == 0, first.output
    summary = json.loads((tmp_path / "x" / "branches.json").read_text())
    assert len(summary["rows"]) == 4 and {r["reached"] for r in summary["rows"]} == {100}
    assert [(r["step"], r["watched"], r["open"]) for r in summary["table"]] == [(0, 2, 0), (60, 2, 0)]
    md = (tmp_path / "x" / "branches.md").read_text().splitlines()
    assert md[0].startswith("`assign-add branches") and md[2] == "4 of 4 branches finished." and len(md) == 6 + 2 \
        and md[6].startswith("| parent | 0 |")
    state = tmp_path / "x" / "parent" / "states" / "step_000060.safetensors"
    mtime = state.stat().st_mtime_ns
    again = CliRunner().invoke(app, args)
    assert again.exit_code == 0 and json.loads((tmp_path / "x" / "branches.json").read_text())["rows"] == summary["rows"]
    assert state.stat().st_mtime_ns == mtime, "a second run reuses the saved states and the finished branches"
    bad = CliRunner().invoke(app, [*args[:-3], "--orders", "0"])
    assert bad.exit_code == 2 and "--orders" in bad.output


@pytest.fixture(scope="module")
def donor(tmp_path_factory):
    out = tmp_path_factory.mktemp("branch") / "donor"
    train(small_paper_cfg(*[s for s in STEPS if not s.startswith("train.seed")], "train.seed=6"), out)
    return open_run(out)


@pytest.mark.slow
def test_a_perturbed_branch_moves_every_weight_by_the_scale_and_records_it(parent, tmp_path):
    from assign_add.train.branch import Edit

    run = make_branch(parent.root, 40, tmp_path / "round", [], edit=Edit("perturb", 1e-3, 7))
    before, after = _weights(parent, 40), _weights(run, 40)
    for k in before:
        rel = (after[k] - before[k]) / before[k].abs().clamp_min(1e-30)
        nonzero = before[k] != 0
        # relative change ~ N(0, 1e-3): its sd over thousands of weights within 20 % of the scale
        assert 0.8e-3 < float(rel[nonzero].std()) < 1.2e-3, k
    assert branch_info(run)["edit"] == {"kind": "perturb", "scale": 1e-3, "seed": 7, "donor": "", "part": ""}
    assert _same(_weights(run, 20), _weights(parent, 20)), "checkpoints before the branch step are the parent's"
    again = make_branch(parent.root, 40, tmp_path / "round2", [], edit=Edit("perturb", 1e-3, 7))
    assert _same(_weights(again, 40), after), "the perturbation is a function of its seed"


@pytest.mark.slow
def test_a_transplant_takes_exactly_the_part_and_its_moments(parent, donor, tmp_path):
    from safetensors.torch import load_file as load

    from assign_add.train.branch import Edit

    run = make_branch(parent.root, 40, tmp_path / "tx", [], edit=Edit("transplant", donor=str(donor.root),
                                                                      part="layer1-attn"))
    got, mine, theirs = _weights(run, 40), _weights(parent, 40), _weights(donor, 40)
    for k in got:
        src = theirs if k.startswith("blocks.0.attn.W_") else mine
        assert torch.equal(got[k], src[k]), k
    from assign_add.train.branch import save_states

    donor_at_40 = save_states(donor.root, [40], tmp_path / "donor-states")[40]  # the donor's own file is at 120
    state, donor_state = load(str(run.state_path)), load(str(donor_at_40))
    assert torch.equal(state["exp_avg/blocks.0.attn.W_Q"], donor_state["exp_avg/blocks.0.attn.W_Q"])
    assert not torch.equal(state["exp_avg/embed.W_E"], donor_state["exp_avg/embed.W_E"])

    from assign_add.model.hooked import parameter_norm

    scaled = make_branch(parent.root, 40, tmp_path / "norm", [], edit=Edit("transplant", donor=str(donor.root),
                                                                           part="norm"))
    assert parameter_norm(scaled.load_model(40)) == pytest.approx(parameter_norm(donor.load_model(40)), rel=1e-6)
    with pytest.raises(RunError, match="unknown part"):
        make_branch(parent.root, 40, tmp_path / "bad", [], edit=Edit("transplant", donor=str(donor.root), part="x"))


@pytest.mark.slow
def test_branches_command_with_rounding_and_transplant_arms(parent, donor, tmp_path):
    from typer.testing import CliRunner

    from assign_add.cli import app

    args = ["branches", str(parent.root), "--out", str(tmp_path / "x"), "--at", "40", "--orders", "1", "--steps", "60",
            "--workers", "1", "--no-progress", "--rounding", "1e-6", "--donor", str(donor.root), "--parts", "mlp2,norm"]
    res = CliRunner().invoke(app, args)
    assert res.exit_code == 0, res.output
    summary = json.loads((tmp_path / "x" / "branches.json").read_text())
    assert sorted(r["arm"] for r in summary["table"]) == ["data", "mlp2<-donor", "norm<-donor", "rounding"]
    assert summary["finished"] == 4
    res = CliRunner().invoke(app, ["branches", str(parent.root), "--out", str(tmp_path / "y"), "--parts", "mlp2"])
    assert res.exit_code == 2 and "--donor" in res.output
