"""The worker pool behind sweeps and `reproduce`: results in job order, a failing job stops the rest."""

from __future__ import annotations

import time

import pytest

from assign_add.parallel import run_pool
from assign_add.run import RunError


def slow_square(x: int, delay: float) -> int:
    time.sleep(delay)
    return x * x


def fail(message: str) -> None:
    raise RunError(message)


@pytest.mark.slow
def test_results_come_back_in_job_order_whatever_finishes_first():
    polled: list[list[int]] = []
    jobs = [(slow_square, (3, 0.6)), (slow_square, (4, 0.0)), (slow_square, (5, 0.2))]
    assert run_pool(jobs, workers=2, poll=polled.append, poll_seconds=0.05) == [9, 16, 25]
    assert polled and polled[-1] == [9, 16, 25]


def test_a_failing_job_raises_its_own_error_in_the_caller():
    t0 = time.perf_counter()
    with pytest.raises(RunError, match="point 2 is broken"):
        run_pool([(slow_square, (1, 30.0)), (fail, ("point 2 is broken",))], workers=2)
    assert time.perf_counter() - t0 < 25, "the 30 s job was stopped, not waited for"


def stamped(x: int, delay: float) -> tuple[int, float]:
    time.sleep(delay)
    return x, time.time()


@pytest.mark.slow
def test_a_follow_up_runs_as_soon_as_its_job_is_done_not_after_the_whole_first_round():
    # job 0 is slow; job 1's follow-up (its value doubled) must finish before job 0 does, on the
    # worker job 1 freed, and get the next index in the results
    jobs = [(stamped, (1, 3.0)), (stamped, (2, 0.0))]

    def then(i, result):
        return (stamped, (result[0] * 10, 0.0)) if i == 1 else None

    results = run_pool(jobs, workers=2, then=then, poll_seconds=0.05)
    assert [r[0] for r in results] == [1, 2, 20]
    assert results[2][1] < results[0][1]


def test_follow_ups_may_chain():
    def then(i, result):
        return (slow_square, (result, 0.0)) if result < 100 else None

    assert run_pool([(slow_square, (2, 0.0))], workers=1, then=then, poll_seconds=0.05) == [4, 16, 256]


def test_reproduce_trains_every_seed_at_once_up_to_twice_the_cores():
    from assign_add.reproduce import worker_count

    assert worker_count(jobs=4, cores=2) == 4  # 3 seeds + the released import: all at once, no rounds
    assert worker_count(jobs=11, cores=2) == 4
    assert worker_count(jobs=1, cores=8) == 1
    assert worker_count(jobs=4, cores=8) == 4  # never more workers than jobs
