"""Does anything measured early in training say whether a seed will bind?

The early measures of one run (:func:`early_measures`) are read at step ``EARLY_STEP`` (1,500, "before
step 1,500" taken as *up to and including* it: no run of ours has bound before step 2,000): the accuracies and losses the run logged, the progress measures of
:mod:`assign_add.analysis.spike` that the paper's C2 ties to binding (layer-1 previous-token
attention, the = query's split between the operands, layer-2 routing, the QK identity through OV₁,
the positional previous-token match), and the parameter norm at initialisation and at
``EARLY_STEP``.  The list is fixed here, before any outcome was seen.

The predictor (:func:`predictor_test`) is an L2-regularised logistic regression on the standardised
measures (λ = 1, scikit-learn's default C = 1; not tuned), scored by leave-one-out accuracy (both in
:mod:`assign_add.stats`).  Its null
is the base rate (always guessing the commoner outcome) and a permutation test: the same
leave-one-out accuracy with the outcomes shuffled among the runs.
"""

from __future__ import annotations

import numpy as np

from assign_add.model.hooked import parameter_norm
from assign_add.run import RunDir
from assign_add.stats import L2, auc, fit_logistic_regression, loo_accuracy, standardiser

EARLY_STEP = 1500
PERMUTATIONS = 200
PERMUTATION_SEED = 0

# name -> label; the order is the feature order of the predictor
FEATURES: dict[str, str] = {
    "acc_1var_heldout": "1-var held-out accuracy",
    "loss_1var_heldout": "1-var held-out loss",
    "acc_0var_heldout": "0-var held-out accuracy",
    "train_loss": "training loss (mean over the last 100 steps)",
    "prev_token": "layer-1 previous-token attention",
    "eq_to_left": "layer-1 attention = → left operand",
    "eq_to_right": "layer-1 attention = → right operand",
    "routing_acc": "layer-2 routing accuracy",
    "qk2_identity": "QK₂ identity through OV₁",
    "pos_prev_token": "QK₁ positional previous-token match",
    "param_norm": "parameter norm",
    "param_norm_init": "parameter norm at initialisation",
}

# the second test, fixed before any LLC was measured on these runs: the LLC alone at the early step
# (a measure beside the progress measures; it is slow, ~1 min per run, so it is optional)
LLC_FEATURES: dict[str, str] = {"llc": "local learning coefficient (the llc command's default settings)"}


def early_measures(run: RunDir, step: int = EARLY_STEP) -> dict[str, float]:
    """Every measure in :data:`FEATURES` of one run at ``step`` (read-only: nothing is written)."""
    from assign_add.analysis.suite import measure

    rec = next((r for r in run.metrics() if r["step"] == step), None)
    if rec is None:
        raise ValueError(f"{run.root} has no evaluation at step {step}")
    m = measure(run, only=["attention", "weights"], steps=[step])
    att, wts = m["attention"]["by_step"][str(step)], m["weights"]["by_step"][str(step)]
    out = {"acc_1var_heldout": rec["acc"]["1var_heldout"], "loss_1var_heldout": rec["loss"]["1var_heldout"],
           "acc_0var_heldout": rec["acc"]["0var_heldout"], "train_loss": rec["train_loss"],
           **{k: att[k] for k in ("prev_token", "eq_to_left", "eq_to_right", "routing_acc")},
           **{k: wts[k] for k in ("qk2_identity", "pos_prev_token")},
           "param_norm": parameter_norm(run.load_model(step)), "param_norm_init": parameter_norm(run.load_model(0))}
    return {k: float(out[k]) for k in FEATURES}


def early_llc(run: RunDir, step: int = EARLY_STEP) -> float:
    """The LLC of ``run``'s checkpoint at ``step`` with :data:`assign_add.studies.llc.DEFAULTS` on the
    LLC command's sequences (read-only)."""
    from assign_add.studies.llc import estimate_llc, llc_batch

    return float(estimate_llc(run.load_model(step), llc_batch(run)).llc_mean)


def feature_matrix(rows: list[dict[str, float]], features: dict[str, str] = FEATURES) -> np.ndarray:
    """``[runs, features]``: each run's measures in the order of ``features``."""
    return np.asarray([[r[k] for k in features] for r in rows], dtype=float).reshape(len(rows), len(features))


def predictor_test(rows: list[dict[str, float]], bound: list[bool], early_step: int = EARLY_STEP,
                   permutations: int = PERMUTATIONS, seed: int = PERMUTATION_SEED,
                   features: dict[str, str] = FEATURES) -> dict:
    """Leave-one-out accuracy of predicting ``bound`` from the early measures named in ``features``,
    against the base rate and a permutation null; and each measure's AUC on its own (descriptive when
    there are several)."""
    x, y = feature_matrix(rows, features), np.asarray(bound, dtype=float)
    n, k = len(y), int(y.sum())
    out = {"n": n, "bound": k, "features": list(features), "l2": L2, "early_step": early_step,
           "base_rate": max(k, n - k) / n if n else None, "loo_accuracy": None, "p_value": None,
           "permutations": permutations, "auc": {}}
    if n < 4 or k in (0, n):
        out["why_not"] = "needs at least 4 runs with both outcomes"
        return out
    acc = loo_accuracy(x, y)
    rng = np.random.default_rng(seed)
    null = [loo_accuracy(x, rng.permutation(y)) for _ in range(permutations)]
    out.update(loo_accuracy=acc, p_value=(1 + sum(a >= acc for a in null)) / (1 + permutations),
               null_mean=float(np.mean(null)), auc={f: auc(x[:, j], y) for j, f in enumerate(features)})
    out["beats_null"] = bool(acc > out["base_rate"] and out["p_value"] < 0.05)
    return out


# The confirmation on fresh seeds, fixed before any of them finished (2026-12-06, seeds 84-115): the
# predictor fitted once on every run of the first study is scored on runs it never saw.  It is
# confirmed when its accuracy there is above the base rate's (always guessing the first study's
# commoner outcome) and the AUC of its score has a permutation p below 0.05 (the fresh outcomes
# shuffled; one-sided, AUC > 0.5 being the direction the first study predicts).
CONFIRM_PERMUTATIONS = 2000
CONFIRM_ALPHA = 0.05


def confirm_predictor(fit_rows: list[dict[str, float]], fit_bound: list[bool], test_rows: list[dict[str, float]],
                      test_bound: list[bool], features: dict[str, str] = FEATURES,
                      permutations: int = CONFIRM_PERMUTATIONS, seed: int = PERMUTATION_SEED) -> dict:
    """Fit the standardised L2 logistic regression on ``fit_rows`` (standardised with their mean and sd),
    score ``test_rows``: held-out accuracy against the base rate, and the AUC of the score with a
    permutation p-value."""
    x, y = feature_matrix(fit_rows, features), np.asarray(fit_bound, dtype=float)
    xt, yt = feature_matrix(test_rows, features), np.asarray(test_bound, dtype=float)
    out = {"fit_n": len(y), "fit_bound": int(y.sum()), "test_n": len(yt), "test_bound": int(yt.sum()),
           "features": list(features), "l2": L2, "permutations": permutations, "alpha": CONFIRM_ALPHA,
           "accuracy": None, "base_rate": None, "auc": None, "auc_p_value": None, "confirmed": None}
    if len(y) < 4 or y.sum() in (0, len(y)):
        out["why_not"] = "the first study needs at least 4 runs with both outcomes"
        return out
    if not len(yt):
        out["why_not"] = "no finished fresh run yet"
        return out
    mu, sd = standardiser(x)
    w, b = fit_logistic_regression((x - mu) / sd, y)
    score = ((xt - mu) / sd) @ w + b
    majority = float(y.mean() >= 0.5)
    out.update(accuracy=float(((score > 0) == (yt == 1)).mean()), base_rate=float((yt == majority).mean()),
               base_rate_guess="bound" if majority else "not bound")
    if yt.sum() in (0, len(yt)):
        out["why_not"] = "the fresh runs have one outcome only: no AUC"
        out["confirmed"] = False
        return out
    value = auc(score, yt)
    rng = np.random.default_rng(seed)
    null = np.asarray([auc(score, rng.permutation(yt)) for _ in range(permutations)])
    p = (1 + int((null >= value).sum())) / (1 + permutations)
    out.update(auc=value, auc_p_value=p, confirmed=bool(out["accuracy"] > out["base_rate"] and p < CONFIRM_ALPHA))
    return out


# The norm lead, pre-registered on 2026-12-07 before any of the seeds it is scored on was trained.
# Found after the fact in the first two survival studies (seeds 52–115): the parameter norm at step 1,500
# was higher in the seeds that bound (AUC 0.72 and 0.86 against "bound by 40,000").  The confirmation
# runs it once, on fresh seeds only, with nothing else tried:
NORM_LEAD_FEATURE = "param_norm"  # the parameter norm at EARLY_STEP (all parameters, float64 sum of squares)
NORM_LEAD_ALPHA = 0.05  # one-sided Mann–Whitney U, alternative: higher in the seeds bound by the horizon
NORM_LEAD_RULE = ("confirmed when, over fresh seeds whose outcome at the horizon is known, the parameter norm at "
                  "step 1,500 is higher in the seeds bound by the horizon: one-sided Mann–Whitney U p < 0.05 "
                  "(exact where there are no ties) and AUC > 0.5; otherwise not confirmed. One test, one measure, "
                  "fixed before the seeds were trained")


def norm_lead_test(norms: list[float], bound: list[bool]) -> dict:
    """The pre-registered test of the norm lead on one set of runs: n, how many bound, the AUC, the
    one-sided Mann–Whitney p (and its method), and the verdict under :data:`NORM_LEAD_RULE`."""
    from scipy.stats import mannwhitneyu

    x, y = np.asarray(norms, dtype=float), np.asarray(bound, dtype=bool)
    out = {"rule": NORM_LEAD_RULE, "n": int(len(y)), "bound": int(y.sum()), "auc": None, "p_value": None,
           "method": None, "verdict": "not decided"}
    if y.sum() == 0 or (~y).sum() == 0:
        out["why_not"] = "needs runs with both outcomes"
        return out
    ties = len(np.unique(x)) < len(x)
    method = "asymptotic" if ties else "exact"
    res = mannwhitneyu(x[y], x[~y], alternative="greater", method=method)
    out["auc"] = auc(x, y.astype(float))
    out["p_value"], out["method"] = float(res.pvalue), method
    out["verdict"] = "confirmed" if res.pvalue < NORM_LEAD_ALPHA and out["auc"] > 0.5 else "not confirmed"
    return out


def norm_lead_power(n_bound: int, n_unbound: int, true_auc: float, trials: int = 2000, seed: int = 0) -> float:
    """Power of :func:`norm_lead_test` at a true AUC (normal norms shifted by √2·Φ⁻¹(AUC) sds), by simulation."""
    from scipy.stats import mannwhitneyu, norm

    rng = np.random.default_rng(seed)
    shift = np.sqrt(2) * norm.ppf(true_auc)
    hits = 0
    for _ in range(trials):
        a, b = rng.normal(shift, 1, n_bound), rng.normal(0, 1, n_unbound)
        hits += mannwhitneyu(a, b, alternative="greater", method="exact").pvalue < NORM_LEAD_ALPHA
    return hits / trials
