"""The padding shift test (studies/padding.py): exact verdicts on planted rows, and one small end-to-end run."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from assign_add.cli import app
from assign_add.run import RunError
from assign_add.studies.padding import padding_verdict, shift_accuracy


def _row(padding: str, drop: float, own: float = 0.98, seed: int = 0) -> dict:
    return {"run": f"r{seed}", "padding": padding, "seed": seed, "step": 40_000,
            "own": {"1var_heldout": own}, "shifted": {"1var_heldout": own - drop},
            "drop": {"1var_heldout": drop}, "bound": own >= 0.90}


def test_planted_drops_flip_the_verdict():
    default = [_row("random", d, seed=i) for i, d in enumerate((0.01, 0.0, 0.02))]
    assert padding_verdict([_row("end", d) for d in (0.5, 0.3, 0.12)], default)["verdict"] == "holds"
    assert padding_verdict([_row("end", d) for d in (0.01, 0.05, 0.0)], default)["verdict"] == "does not hold"
    assert padding_verdict([_row("end", d) for d in (0.5, 0.05, 0.3)], default)["verdict"] == "mixed"
    # a default run that also drops: position reliance is not the variant's alone
    assert padding_verdict([_row("end", 0.5)] * 3, [*default[:2], _row("random", 0.2)])["verdict"] == "mixed"
    # an unbound variant run is not judged: two judged runs are too few
    unbound = [_row("end", 0.5), _row("end", 0.5), _row("end", 0.1, own=0.3)]
    res = padding_verdict(unbound, default)
    assert res["verdict"] == "not measured" and res["variant_drops"] == [0.5, 0.5]


def test_a_run_of_the_wrong_padding_is_refused():
    with pytest.raises(RunError, match="expected end"):
        padding_verdict([_row("random", 0.5)], [_row("random", 0.0)])


@pytest.mark.slow
def test_shift_accuracy_on_tiny_runs(tmp_path):
    from conftest import small_paper_cfg

    from assign_add.train.trainer import train

    for padding in ("end", "random"):
        train(small_paper_cfg("train.steps=20", "train.eval_every=20", "train.batch_size=64",
                              f"task.padding={padding}"), tmp_path / padding)
    res = shift_accuracy(tmp_path / "end")
    assert res["padding"] == "end" and res["step"] == 20
    assert set(res["own"]) == set(res["shifted"]) == {"0var_heldout", "1var_heldout", "2var_heldout", "1var_forbidden"}
    assert all(0.0 <= v <= 1.0 for v in res["shifted"].values())
    cli = CliRunner().invoke(app, ["padding-shift", "--variant", str(tmp_path / "end"), "--default",
                                   str(tmp_path / "random"), "--out", str(tmp_path / "p.json")])
    assert cli.exit_code == 0, cli.output
    assert json.loads((tmp_path / "p.json").read_text())["verdict"] == "not measured"  # untrained runs: not bound
    wrong = CliRunner().invoke(app, ["padding-shift", "--variant", str(tmp_path / "random"), "--default",
                                     str(tmp_path / "random")])
    assert wrong.exit_code == 2 and "expected end" in wrong.output
