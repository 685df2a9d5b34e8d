"""The LLC adapter for devinterp: the per-sequence answer loss it feeds the sampler, and the estimate on
planted models whose learning coefficient is known."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from torch.func import functional_call

from assign_add.config import preset
from assign_add.model import AssignAddTransformer, answer_loss, fast_answer_logits
from assign_add.task.generator import Sampler

pytest.importorskip("devinterp", reason="the LLC needs the optional extra assign-add[llc]")

from assign_add.studies.llc import LLCSettings, answer_token_loss, estimate_llc, from_trace  # noqa: E402

CFG = preset("paper")
BATCH = Sampler(CFG.task, 3).batch(0, 2048)


def test_adapter_loss_is_the_answer_loss_at_every_position():
    model = AssignAddTransformer.from_config(CFG.model, CFG.task, seed=0)
    tokens, answers = torch.as_tensor(BATCH.tokens[:64]), torch.as_tensor(BATCH.answers[:64])
    ids = torch.cat([tokens, answers[:, None]], dim=1)
    with torch.no_grad():
        per_pos = answer_token_loss(model, ids)
        expected = answer_loss(fast_answer_logits(model, tokens), answers)
    assert per_pos.shape == (64, tokens.shape[1])  # devinterp's (batch, seq - 1)
    assert torch.equal(per_pos, per_pos[:, :1].expand_as(per_pos)), "one value per sequence"
    assert torch.allclose(per_pos.mean(), expected, rtol=1e-5)  # float32 summation order only


def test_estimate_from_a_hand_made_trace():
    trace = np.array([[0.0, 9.0, 1.5, 2.5], [0.0, 9.0, 2.5, 3.5]])  # the first step is burn-in
    est = from_trace(trace, 1.0, LLCSettings(n_beta=10.0, num_burnin_steps=1))
    # chain 0: mean(9, 1.5, 2.5) = 13/3 -> 10 * (13/3 - 1); chain 1: mean(9, 2.5, 3.5) = 5 -> 40
    assert est.per_chain == pytest.approx([100 / 3, 40.0]) and est.llc_mean == pytest.approx(110 / 3)


class Planted(torch.nn.Module):
    """Logits = Σ_i w_i · (features · B_tie[i]): six parameters; parameters sharing a basis matrix are a
    duplicated direction (the loss depends only on their sum), so each shared pair removes one dimension."""

    def __init__(self, tie: list[int]) -> None:
        super().__init__()
        g = torch.Generator().manual_seed(1)
        self.register_buffer("embed", torch.randn(int(BATCH.tokens.max()) + 1, 8, generator=g))
        self.register_buffer("basis", torch.randn(6, 8, CFG.task.modulus, generator=g)[tie] / 3)
        self.w = torch.nn.Parameter(torch.zeros(6))

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        feats = self.embed[tokens[:, 0]] + self.embed[tokens[:, 2]]
        logits = torch.einsum("i,bk,ikv->bv", self.w, feats, self.basis)
        return logits[:, None].expand(-1, tokens.shape[1], -1)


def _at_minimum(tie: list[int]) -> tuple[Planted, np.ndarray]:
    model = Planted(tie)
    tokens, answers = torch.as_tensor(BATCH.tokens), torch.as_tensor(BATCH.answers)
    loss = lambda w: torch.nn.functional.cross_entropy(  # noqa: E731
        functional_call(model, {"w": w}, (tokens,))[:, -1], answers)
    opt = torch.optim.LBFGS([model.w], max_iter=200, tolerance_grad=1e-10, line_search_fn="strong_wolfe")

    def closure():
        opt.zero_grad()
        value = loss(model.w)
        value.backward()
        return value

    opt.step(closure)
    return model, torch.linalg.eigvalsh(torch.autograd.functional.hessian(loss, model.w.detach())).numpy()


@pytest.mark.slow
@pytest.mark.parametrize("tie, dims", [([0, 1, 2, 3, 4, 5], 6), ([0, 0, 2, 2, 4, 5], 4)])
def test_llc_of_a_planted_model_is_its_effective_dimension_over_two(tie, dims):
    """For a loss that is quadratic near w* with Hessian eigenvalues h_j, SGLD with step ε, inverse
    temperature nβ and localisation γ samples each direction with variance 1 / (a_j (1 − ε a_j / 4)),
    a_j = nβ h_j + γ, so the estimate is nβ/2 · Σ h_j / (a_j (1 − ε a_j / 4)) -- d_eff / 2 up to the γ and ε
    corrections (a duplicated direction has h = 0 and adds nothing).  Tolerance: 4 standard errors of the
    mean over 8 chains (t with 7 degrees of freedom: about 99.5 %)."""
    model, h = _at_minimum(tie)
    assert int((h > 1e-3).sum()) == dims, "the planted effective dimension"
    st = LLCSettings(lr=1e-4, localization=1.0, batch_size=256, num_chains=8, num_draws=600, num_burnin_steps=200)
    nb, hh = st.resolved_n_beta(), np.clip(h, 0, None)
    a = nb * hh + st.localization
    expected = 0.5 * nb * float(np.sum(hh / (a * (1 - st.lr * a / 4))))
    assert expected == pytest.approx(dims / 2, rel=0.05)  # the corrections are small at these settings
    w_star = model.w.detach().clone()
    est = estimate_llc(model, BATCH, st)
    se = np.std(est.per_chain, ddof=1) / np.sqrt(len(est.per_chain))
    assert abs(est.llc_mean - expected) <= 4 * se, (est.llc_mean, expected, se)
    assert torch.equal(model.w.detach(), w_star), "the sampler works on a copy"


@pytest.mark.slow
def test_llc_command_on_a_small_run(tmp_path):
    """`assign-add llc` end to end on a tiny run (few SGLD steps: it checks the plumbing, not the value),
    the calibration grid, and a one-line error for a step without a checkpoint."""
    import json

    from typer.testing import CliRunner

    from assign_add.cli import app
    from assign_add.train.trainer import train
    from conftest import small_paper_cfg

    run = tmp_path / "run"
    train(small_paper_cfg("train.steps=20", "train.eval_every=10", "train.checkpoint_every=10",
                          "train.batch_size=32"), run)
    cli = CliRunner()
    res = cli.invoke(app, ["llc", str(run), "--out", str(tmp_path / "llc"), "--steps", "0,20", "--draws", "5",
                           "--chains", "2"])
    assert res.exit_code == 0, res.output
    out = json.loads((tmp_path / "llc" / "llc.json").read_text())
    assert [r["step"] for r in out["rows"]] == [0, 20] and all(len(r["per_chain"]) == 2 for r in out["rows"])
    assert (tmp_path / "llc" / "llc.png").is_file()
    res = cli.invoke(app, ["llc", str(run), "--out", str(tmp_path / "cal"), "--steps", "20", "--draws", "5",
                           "--chains", "2", "--calibrate-lrs", "1e-5,1e-4", "--calibrate-localizations", "100"])
    assert res.exit_code == 0, res.output
    cal = json.loads((tmp_path / "cal" / "calibration.json").read_text())
    assert [(c["lr"], c["localization"]) for c in cal["cells"]] == [(1e-5, 100.0), (1e-4, 100.0)]
    bad = cli.invoke(app, ["llc", str(run), "--out", str(tmp_path / "x"), "--steps", "7"])
    assert bad.exit_code == 2 and "no checkpoint at step(s) 7" in bad.output and not (tmp_path / "x").exists()


def test_landmarks_of_a_hand_made_curve():
    from assign_add.studies.llc import landmark_lines, landmarks

    rows = [{"step": s, "llc": v} for s, v in ((0, 1.0), (100, 5.0), (200, 4.0), (300, 10.0))]
    marks = landmarks(rows, {"addition": 100, "binding": 200, "refinement": None})
    assert marks["largest_rise"] == {"from": 200, "to": 300, "change": 6.0}
    assert marks["largest_fall"] == {"from": 100, "to": 200, "change": -1.0}
    assert marks["at_phases"]["binding"] == {"step": 200, "before": [100, 5.0], "after": [200, 4.0], "change": -1.0}
    assert marks["at_phases"]["addition"]["before"] == [0, 1.0] and "refinement" not in marks["at_phases"]
    assert landmark_lines(marks)[0] == "largest rise: +6.0 between steps 200 and 300"
