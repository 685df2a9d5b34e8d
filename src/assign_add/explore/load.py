"""The explorer under load: requests per second from concurrent clients, and the memory it holds.

``measure_rate`` serves the run in this process on a free port (the same server ``assign-add
explore`` starts), then ``clients`` threads each send ``/api/view`` requests back to back for
``seconds``, either all at one checkpoint (requests queue on that model's lock) or each request at
another checkpoint (models run side by side, the cache loads and evicts).  It is a benchmark
(``assign-add bench --what explore --run RUN``): figures are printed, never asserted.
"""

from __future__ import annotations

import json
import resource
import threading
import time
import urllib.parse
import urllib.request
from dataclasses import dataclass

from assign_add.explore.server import DEFAULT_CACHE, Explorer, create_app
from assign_add.run import RunDir
from assign_add.task.vocab import tokens_to_text


@dataclass
class LoadResult:
    where: str  # "one step" or "across steps"
    clients: int
    requests: int
    failed: int
    seconds: float
    rss_mib: float  # this process's resident size after the run (server, its cached models and the clients)
    peak_rss_mib: float  # its peak so far (the final model's Fourier spectra take ~1 GB for a moment)

    @property
    def per_second(self) -> float:
        return self.requests / self.seconds


def _peak_rss_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # kilobytes on Linux


def _rss_mib() -> float:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * resource.getpagesize() / 2**20


def measure_rate(run: RunDir, clients: int = 8, seconds: float = 10.0, cache_size: int = DEFAULT_CACHE,
                 prompts: int = 20) -> list[LoadResult]:
    """Sustained ``/api/view`` rate at one checkpoint and across every checkpoint of ``run``."""
    import logging

    from werkzeug.serving import make_server

    logging.getLogger("werkzeug").setLevel(logging.WARNING)  # no line per request
    explorer = Explorer(run, cache_size)
    server = make_server("127.0.0.1", 0, create_app(explorer), threaded=True)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    base = f"http://127.0.0.1:{server.server_port}/api/view?"
    texts = [tokens_to_text(t, explorer.vocab) for t in explorer.eval_sets["1var_heldout"].tokens[:prompts]]
    steps = explorer.steps
    middle = steps[len(steps) // 2]
    try:
        return [_drive(base, texts, lambda i: middle, "one step", clients, seconds),
                _drive(base, texts, lambda i: steps[i % len(steps)], "across steps", clients, seconds)]
    finally:
        server.shutdown()
        server.server_close()


def _drive(base: str, texts: list[str], step_of, where: str, clients: int, seconds: float) -> LoadResult:
    counts = [[0, 0] for _ in range(clients)]  # per client: answered, failed
    stop = time.perf_counter() + seconds

    def client(c: int) -> None:
        i = c
        while time.perf_counter() < stop:
            url = base + urllib.parse.urlencode({"prompt": texts[i % len(texts)], "step": step_of(i)})
            try:
                with urllib.request.urlopen(url, timeout=60) as r:
                    json.loads(r.read())
                counts[c][0] += 1
            except Exception:  # noqa: BLE001 - a failed request is counted, not raised
                counts[c][1] += 1
            i += clients

    t0 = time.perf_counter()
    threads = [threading.Thread(target=client, args=(c,)) for c in range(clients)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    elapsed = time.perf_counter() - t0
    return LoadResult(where, clients, sum(a for a, _ in counts), sum(f for _, f in counts), elapsed, _rss_mib(),
                      _peak_rss_mib())
