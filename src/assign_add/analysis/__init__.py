"""Mechanistic analyses: each a function from a model (or run) to numbers, plus figures.

Families: dynamics (phases), attention, weights (weight-only progress measures, QK identity),
representation (shared residual, C8), fourier (C9), probes, gradients (C11), causal.
:func:`assign_add.analysis.suite.analyze` runs them on a run directory.
"""
