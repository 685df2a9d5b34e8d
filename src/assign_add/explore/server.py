"""``assign-add explore RUN``: a local web page to look at one run, checkpoint by checkpoint (Flask).

Routes: ``/`` the page; ``/plotly.js`` plotly's bundle (served from the installed package, so
the page works offline); ``/api/meta`` steps, phases and example prompts; ``/api/curves`` the
accuracy curves; ``/api/view?prompt=…&step=…`` the prompt's answer, attention, routing and (final
model) Fourier view.  A malformed prompt or an unknown step gives HTTP 400 with ``{"error": line}``,
the same line ``assign-add predict`` prints.

Memory: checkpoints are loaded on demand and kept in a least-recently-used cache of at most
``cache_size`` models (the paper model is about 1.1 MB of float32 parameters, so the default 32
holds under 40 MB); the neuron spectra of the final model are computed once per final step.

Threads: the server answers each request in its own thread.  Requests share no hook state: a
model is run by one request at a time (:class:`ModelCache`), requests at different checkpoints
run side by side.  A run that is still training can be explored: new checkpoints and metrics
show up on the next request, and the explorer never writes into the run or takes its lock.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from contextlib import contextmanager
from dataclasses import dataclass, field
from importlib import resources
from typing import Iterator

from assign_add.analysis import dynamics
from assign_add.config import ConfigError
from assign_add.explore import views
from assign_add.model.hooked import AssignAddTransformer
from assign_add.run import RunDir, RunError
from assign_add.task.vocab import TextFormError, tokens_to_text

DEFAULT_CACHE = 32


def one_line(exc: Exception) -> str:
    """The message ``assign-add predict`` prints for the same mistake (whitespace folded to one line)."""
    return " ".join(str(exc).split()) or type(exc).__name__


# The sets of the accuracy curves: few enough to be drawn, and enough for the phase marks (addition: 0var_train; binding: 1var_heldout; refinement: the
# forbidden-position sets present); five sets keep a checkpoint evaluation of an imported run short
CURVE_SETS = ("0var_train", "0var_heldout", "1var_heldout", "1var_forbidden", "1var_b_right")
EXAMPLE_SETS = ("1var_heldout", "2var_train", "0var_heldout")


@dataclass
class _Entry:
    """One cached checkpoint: loaded once (``ready``), used by ``users`` requests at a time."""

    ready: threading.Event = field(default_factory=threading.Event)
    forward: threading.RLock = field(default_factory=threading.RLock)  # the model's hooks: one forward at a time
    model: AssignAddTransformer | None = None
    error: BaseException | None = None
    users: int = 0


class ModelCache:
    """At most ``size`` checkpoints kept in memory, least recently used evicted first; thread-safe.

    ``use(step)`` is the only way in: it loads a checkpoint once however many requests ask for it
    at the same time, holds the model's own lock while the caller runs it (``run_with_cache`` adds
    and removes hooks on the shared model, so two forwards on one model at once would remove each
    other's hooks), and never evicts a model that a request is using; while every cached model is
    in use the cache may hold more than ``size`` for as long as those requests last.
    """

    def __init__(self, run: RunDir, size: int = DEFAULT_CACHE) -> None:
        if size < 1:
            raise ValueError("the model cache holds at least one checkpoint")
        self.run, self.size = run, size
        self._entries: OrderedDict[int, _Entry] = OrderedDict()
        self._lock = threading.Lock()
        self.loads = 0  # checkpoints read from disk, for tests and the README's measurements

    @contextmanager
    def use(self, step: int) -> Iterator[AssignAddTransformer]:
        entry, loader = self._acquire(step)
        try:
            if loader:
                self._load(step, entry)
            entry.ready.wait()
            if entry.error is not None:
                raise entry.error
            with entry.forward:
                yield entry.model
        finally:
            self._release(entry)

    def _acquire(self, step: int) -> tuple[_Entry, bool]:
        with self._lock:
            entry = self._entries.get(step)
            loader = entry is None
            if loader:
                entry = self._entries[step] = _Entry()
            self._entries.move_to_end(step)
            entry.users += 1
            return entry, loader

    def _load(self, step: int, entry: _Entry) -> None:
        try:
            entry.model = self.run.load_model(step)
            with self._lock:
                self.loads += 1
        except BaseException as exc:  # every waiter sees the loader's error; a later request tries again
            entry.error = exc
            with self._lock:
                if self._entries.get(step) is entry:
                    del self._entries[step]
        finally:
            entry.ready.set()

    def _release(self, entry: _Entry) -> None:
        with self._lock:
            entry.users -= 1
            idle = [s for s, e in self._entries.items() if e.users == 0]  # least recently used first
            for step in idle[: max(0, len(self._entries) - self.size)]:
                del self._entries[step]

    def steps(self) -> list[int]:
        """The cached steps, least recently used first."""
        with self._lock:
            return list(self._entries)

    def __len__(self) -> int:
        with self._lock:
            return len(self._entries)


class Explorer:
    """The run's data for the page, computed lazily and kept; follows a run that is still training.

    The checkpoint list is read again on every request (a directory listing; a checkpoint appears
    only once its atomic rename is done), the curves whenever ``metrics.jsonl`` or the checkpoint
    list changed, the final model's spectra once the run is complete.  The explorer never
    writes into the run and never takes its lock: an imported run's curves come from the cached
    evaluations (``assign-add eval`` writes them) and what is missing is computed in memory.
    """

    def __init__(self, run: RunDir, cache_size: int = DEFAULT_CACHE) -> None:
        self.run = run
        if not self.steps:
            raise RunError(f"{run.root} has no checkpoints to explore")
        self.vocab = run.vocab()
        self.eval_sets = run.eval_sets()
        self.models = ModelCache(run, cache_size)
        self._curves: tuple[tuple, dict] | None = None  # (what they were computed from, curves)
        self._spectra: tuple[int, views.NeuronSpectra] | None = None
        self._curves_lock, self._spectra_lock = threading.Lock(), threading.Lock()

    @property
    def steps(self) -> list[int]:
        return self.run.checkpoint_steps()

    @property
    def final(self) -> int:
        return self.steps[-1]

    def examples(self, per_set: int = 3) -> list[dict]:
        out = []
        for name in EXAMPLE_SETS:
            if name in self.eval_sets:
                batch = self.eval_sets[name]
                out += [{"set": name, "prompt": tokens_to_text(t, self.vocab)} for t in batch.tokens[:per_set]]
        return out

    def meta(self) -> dict:
        steps = self.steps
        return {"run": str(self.run.root), "steps": steps, "final": steps[-1], "examples": self.examples(),
                "cache_size": self.models.size, "state": self.run.status().get("state", "complete")}

    def _curves_source(self, steps: list[int]) -> tuple:
        """What the curves are computed from: the metrics file's size and time, and the checkpoints."""
        try:
            st = self.run.metrics_path.stat()
            return ("metrics", st.st_size, st.st_mtime_ns, tuple(steps))
        except FileNotFoundError:
            return ("checkpoints", tuple(steps))

    def curves(self) -> dict:
        """Accuracy per step: training metrics, else the checkpoints' evaluations (recomputed when either grows)."""
        with self._curves_lock:
            steps = self.steps
            source = self._curves_source(steps)
            if self._curves is None or self._curves[0] != source:
                from assign_add.train.checkpoint_eval import accuracy_records

                records, _ = accuracy_records(self.run, steps, write=False,
                                              sets=[n for n in CURVE_SETS if n in self.eval_sets])
                c = dynamics.curves_from_records(records)
                self._curves = (source, {"steps": c.steps, "acc": {k: v for k, v in c.acc.items() if k in CURVE_SETS},
                                         "phases": dynamics.phase_marks(records)})
            return self._curves[1]

    def check_step(self, step: int, steps: list[int]) -> int:
        return self.run.check_step(step, steps)

    def view(self, text: str, step: int) -> dict:
        """The prompt at ``step``; at the final checkpoint of a finished run also its Fourier view (while
        the run trains its final checkpoint keeps moving, and each fit takes seconds and ~1 GB)."""
        steps = self.steps  # one directory listing per request
        final = steps[-1]
        finished = self.run.status().get("state", "complete") == "complete"
        spectra = self.spectra(final) if self.check_step(step, steps) == final and finished else None
        with self.models.use(step) as model:
            out = views.prompt_view(model, self.vocab, text)
            if spectra is not None:
                out["fourier"] = views.fourier_view(model, self.vocab, text, spectra)
        out["step"] = step
        return out

    def spectra(self, final: int) -> views.NeuronSpectra:
        """The neuron spectra of the model at step ``final``, computed once per final step."""
        with self._spectra_lock:
            if self._spectra is None or self._spectra[0] != final:
                with self.models.use(final) as model:
                    self._spectra = (final, views.neuron_spectra(model, self.vocab, self.eval_sets["0var_train"]))
            return self._spectra[1]


def create_app(explorer: Explorer):
    from flask import Flask, Response, jsonify, request

    app = Flask("assign_add.explore")
    page = resources.files("assign_add.explore").joinpath("page.html").read_text(encoding="utf-8")
    plotly_js: list[str] = []

    @app.get("/")
    def index():
        return Response(page, mimetype="text/html")

    @app.get("/plotly.js")
    def plotly():
        if not plotly_js:
            from plotly.offline import get_plotlyjs

            plotly_js.append(get_plotlyjs())
        return Response(plotly_js[0], mimetype="application/javascript")

    @app.get("/api/meta")
    def meta():
        return jsonify(explorer.meta())

    @app.get("/api/curves")
    def curves():
        return jsonify(explorer.curves())

    @app.get("/api/view")
    def view():
        raw = request.args.get("step", str(explorer.final))
        if not raw.strip().isdigit():
            return jsonify({"error": f"step must be a whole number, got {raw!r}"}), 400
        try:
            return jsonify(explorer.view(request.args.get("prompt", ""), int(raw)))
        except (TextFormError, RunError) as exc:
            return jsonify({"error": one_line(exc)}), 400

    @app.errorhandler(Exception)
    def failed(exc: Exception):  # the page shows one line, never Flask's HTML error page
        from werkzeug.exceptions import HTTPException

        if isinstance(exc, HTTPException):
            return jsonify({"error": one_line(exc)}), exc.code
        app.logger.exception("request failed")
        return jsonify({"error": one_line(exc)}), 500

    return app


def check_listen(host: str, port: int) -> None:
    """A one-line ConfigError when ``host:port`` cannot be listened on (busy port, unknown host)."""
    import socket

    try:
        family = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)[0][0]
        with socket.socket(family, socket.SOCK_STREAM) as sock:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            sock.bind((host, port))
    except OSError as exc:
        raise ConfigError("--port" if isinstance(exc, PermissionError) or exc.errno == 98 else "--host",
                          f"cannot listen on {host}:{port}: {exc.strerror or exc}") from None


def serve(run: RunDir, host: str = "127.0.0.1", port: int = 8050, cache_size: int = DEFAULT_CACHE,
          ready=None) -> None:
    """Serve until interrupted; ``ready(url)`` is called once the socket listens."""
    from werkzeug.serving import make_server

    check_listen(host, port)  # werkzeug would print two lines and exit 1 on a busy port
    server = make_server(host, port, create_app(Explorer(run, cache_size)), threaded=True)
    if ready:
        ready(f"http://{host}:{server.server_port}/")
    server.serve_forever()
