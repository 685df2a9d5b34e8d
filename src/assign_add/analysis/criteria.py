"""Every threshold the analyses and the claims table use, in one place.

Phase detection (SPEC section 5, issue 4):

- addition: first evaluated step with 0-var training-pair accuracy >= ADDITION_ACC;
- binding: the step ending the evaluation interval with the largest rise of 1-var held-out
  accuracy, and the first step at which that accuracy reaches BINDING_ACC;
- refinement: first step after binding at which the mean accuracy over the forbidden-position
  sets reaches REFINEMENT_ACC, and the first step from which it stays >= REFINEMENT_STABLE_ACC.
"""

from __future__ import annotations

ADDITION_SET = "0var_train"
ADDITION_ACC = 0.99

BINDING_SET = "1var_heldout"
BINDING_ACC = 0.90

REFINEMENT_SETS = ("1var_forbidden", "2var_forbidden1", "2var_forbidden2")
REFINEMENT_ACC = 0.90
REFINEMENT_STABLE_ACC = 0.95

# A layer-2 MLP neuron is a "frequency-k neuron" when one frequency explains more than this
# fraction of its pre-activation variance over the N x N grid (the authors' 85 %).
FOURIER_NEURON_FVE = 0.85
# A frequency is "key" when at least this many frequency neurons use it.
KEY_FREQUENCY_MIN_NEURONS = 3
