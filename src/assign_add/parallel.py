"""Independent jobs in worker processes: a spawn pool that stops every worker on an error or Ctrl-C.

Used by sweeps (one training run per point) and by ``reproduce`` (one seed per worker).  A worker
whose parent is killed stops itself (``watch_parent``); every file a job writes is atomic, so an
interrupted job leaves a resumable run.
"""

from __future__ import annotations

import os
import threading
import time
from typing import Any, Callable

POLL_SECONDS = 2.0

Job = tuple[Callable[..., Any], tuple]


def watch_parent(parent_pid: int, on_orphan: Callable[[], None] = lambda: os._exit(1),
                 interval: float = 1.0) -> threading.Thread:
    """Call ``on_orphan`` once the process that started this worker is gone.

    A pool worker whose parent was killed (SIGTERM, OOM killer) would otherwise train on unobserved.
    """
    def loop() -> None:
        while os.getppid() == parent_pid:
            time.sleep(interval)
        on_orphan()

    thread = threading.Thread(target=loop, name="watch-parent", daemon=True)
    thread.start()
    return thread


def _worker_init(parent_pid: int, threads: int) -> None:
    import torch

    watch_parent(parent_pid)
    torch.set_num_threads(threads)


def run_pool(jobs: list[Job], workers: int, threads: int = 1, poll: Callable[[list[Any]], None] | None = None,
             poll_seconds: float = POLL_SECONDS,
             then: Callable[[int, Any], Job | None] | None = None) -> list[Any]:
    """Run ``jobs`` (function, args) in ``workers`` spawned processes of ``threads`` torch threads each;
    results in job order.  ``poll`` gets the results so far every ``poll_seconds`` and after each job.

    ``then(i, result)`` may return a follow-up job for job ``i`` (e.g. analyse a run once it is
    trained); it is queued when job ``i`` finishes, after the jobs already waiting, so a free worker
    never idles while a follow-up could run.  Follow-ups get the next indices in the results.
    """
    import multiprocessing as mp
    from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait

    results: dict[int, Any] = {}
    count = len(jobs)
    pool = ProcessPoolExecutor(max_workers=max(1, workers), mp_context=mp.get_context("spawn"),
                               initializer=_worker_init, initargs=(os.getpid(), max(1, threads)))
    try:
        pending = {pool.submit(fn, *args): i for i, (fn, args) in enumerate(jobs)}
        waiting = set(pending)
        while waiting:
            done, waiting = wait(waiting, timeout=poll_seconds, return_when=FIRST_COMPLETED)
            for fut in sorted(done, key=pending.__getitem__):
                i = pending[fut]
                results[i] = fut.result()
                follow = then(i, results[i]) if then else None
                if follow is not None:
                    fn, args = follow
                    nxt = pool.submit(fn, *args)
                    pending[nxt] = count
                    count += 1
                    waiting.add(nxt)
            if poll:
                poll([results[i] for i in sorted(results)])
    except BaseException:
        # interrupted or a job failed: stop the other workers now (their runs stay resumable);
        # the processes are read first: shutdown() forgets them
        procs = list((getattr(pool, "_processes", None) or {}).values())
        pool.shutdown(wait=False, cancel_futures=True)
        for proc in procs:
            proc.terminate()
        raise
    pool.shutdown(wait=True)
    return [results[i] for i in range(count)]
