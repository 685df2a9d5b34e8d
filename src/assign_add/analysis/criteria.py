"""Every threshold the analyses and the claims table use, in one place.

Phase detection (SPEC section 5):

- addition: first evaluated step with 0-var training-pair accuracy >= ADDITION_ACC;
- binding: the first step at which 1-var held-out accuracy reaches BINDING_ACC, and the step ending
  the evaluation interval with its largest rise within the climb to that level: from the last
  evaluation below BINDING_CLIMB_FROM up to the step it reaches BINDING_ACC.  A run that never
  reaches it has no binding step at all: it is censored at its last step ("not bound by T"), never
  given its largest rise as a binding step.  Without the window a late,
  gradual binder gets the early rise that comes with learning addition (0.02 → 0.3 by step 400)
  as its "spike";
- refinement: first step after binding at which the mean accuracy over the forbidden-position
  sets reaches REFINEMENT_ACC, and the first step from which it stays >= REFINEMENT_STABLE_ACC.
"""

from __future__ import annotations

ADDITION_SET = "0var_train"
ADDITION_ACC = 0.99

BINDING_SET = "1var_heldout"
BINDING_ACC = 0.90
# Half the binding level: a run whose 1-var held-out accuracy is still below it has not begun the
# climb that binds (the plateaus before binding measured here are 0.29-0.61).
BINDING_CLIMB_FROM = BINDING_ACC / 2

REFINEMENT_SETS = ("1var_forbidden", "2var_forbidden1", "2var_forbidden2")
REFINEMENT_ACC = 0.90
REFINEMENT_STABLE_ACC = 0.95

# A layer-2 MLP neuron is a "frequency-k neuron" when one frequency explains more than this
# fraction of its pre-activation variance over the N x N grid (the authors' 85 %).
FOURIER_NEURON_FVE = 0.85
# A frequency is "key" when at least this many frequency neurons use it.
KEY_FREQUENCY_MIN_NEURONS = 3
