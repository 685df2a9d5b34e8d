"""Sweeps over any config field and seeds (claims C6, C7): local or Ray backends, thresholds."""
