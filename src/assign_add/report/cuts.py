"""Which cuts each claim's verdict reads, and how far a cut is moved to test a verdict's robustness.

The cuts themselves, with their bases, are the one table of :mod:`assign_add.analysis.criteria`, which
the analyses read too.
"""

from __future__ import annotations

from assign_add.analysis.criteria import CUTS, VALUES, Cut

__all__ = ["CLAIM_CUTS", "CUTS", "MOVE", "VALUES", "Cut"]

MOVE = 0.20  # a verdict that changes when one of its cuts moves by this fraction is "fragile"

# The cuts each claim's verdict reads.
CLAIM_CUTS: dict[str, tuple[str, ...]] = {
    "B": ("BINDING_ACC",),
    "C1": ("C1_ZERO_VAR_HELDOUT_BEFORE_BINDING",),
    "C2a": ("C2_MIN_RISE",),
    "C3": ("C3_FORBIDDEN_AT_BINDING", "C3_PLATEAU_STEPS", "REFINEMENT_ACC"),
    "C3b": ("C3_FORBIDDEN_AT_BINDING", "C3_PLATEAU_STEPS", "REFINEMENT_ACC", "C3B_APART_FROM_BINDING"),
    "C4": ("C4_FORBIDDEN_FINAL", "REFINEMENT_ACC"),
    "C5": ("C5_HELDOUT_FINAL",),
    "C6": ("C6_C7_TOLERANCE", "C6_C7_MAX_WIDTH"),
    "C7": ("C6_C7_TOLERANCE", "C6_C7_MAX_WIDTH"),
    "C8": ("C8_MATCHED", "C8_GAP", "C8_GRID_CORR"),
    "C9": ("C9_FREQUENCY_NEURON_SHARE",),
    "C10": ("C10_PREV_TOKEN", "C10_QK_IDENTITY", "C10_ROUTING", "C10_SUMMANDS"),
    "C11": ("C11_DIAG_SHARE", "C11_CORR"),
    "C1b": ("C12_ZERO_VAR_KEPT",),
    "C5b": ("C5_HELDOUT_FINAL",),
    "C5c": ("C5_HELDOUT_FINAL",),
    "C12": ("C12_NEAR_CHANCE", "C12_ZERO_VAR_KEPT"),
    "C13": ("C13_FOLLOW", "C12_NEAR_CHANCE", "C12_ZERO_VAR_KEPT", "C13_NULL_ORTHOGONAL"),
}
