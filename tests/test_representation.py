"""C8's measures on hand-built inputs: centred cosines and the same-prefix other-sum null."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from assign_add.analysis.positions import constant_form
from assign_add.analysis.representation import centred_cosine, cosine, other_sum_form
from assign_add.config import preset
from assign_add.task.generator import Sampler
from assign_add.task.vocab import Vocab


def test_centring_removes_the_shared_direction():
    rng = np.random.default_rng(0)
    common = np.zeros(16)
    common[0] = 50.0  # a large direction every row shares (the '=' position and token rows)
    x = rng.normal(size=(200, 16))
    a, b = common + x, common - x  # opposite sequence-specific parts
    assert cosine(a, b).mean() > 0.9, "raw cosine is dominated by the shared direction"
    assert np.allclose(centred_cosine(a, b), -1.0), "centred: the specific parts point opposite ways"
    assert np.allclose(centred_cosine(a, a.copy()), 1.0)


@settings(max_examples=20, deadline=None)
@given(seed=st.integers(0, 10_000))
def test_other_sum_form_keeps_the_prefix_and_changes_the_sum(seed):
    cfg = preset("paper")
    vocab = Vocab.from_task(cfg.task)
    batch = Sampler(cfg.task, seed).batch(0, 256)
    const, other = constant_form(batch, vocab), other_sum_form(batch, vocab, seed)
    lpos, rpos = vocab.operand_positions()
    keep = np.ones(const.shape[1], dtype=bool)
    keep[lpos] = False
    assert np.array_equal(const[:, keep], other[:, keep]), "everything but the left operand is the same"
    new_sum = (other[:, lpos] + other[:, rpos]) % vocab.modulus
    assert np.all(new_sum != batch.answers) and np.all(other[:, lpos] < vocab.modulus)
