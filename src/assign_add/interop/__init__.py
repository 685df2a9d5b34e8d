"""Interop with other copies of the model: the authors' released checkpoints (paper.py) and a Hub-ready
folder, exported and read back (export.py)."""
