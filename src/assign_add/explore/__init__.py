"""``assign-add explore``: a local web page over the checkpoints of one run."""
