"""``assign-add explore RUN``: a local web page to look at one run, checkpoint by checkpoint (Flask).

Routes: ``/`` the page; ``/plotly.js`` plotly's bundle (served from the installed package, so
the page works offline); ``/api/meta`` steps, phases and example prompts; ``/api/curves`` the
accuracy curves; ``/api/view?prompt=…&step=…`` the prompt's answer, attention, routing and (final
model) Fourier view.  A malformed prompt or an unknown step gives HTTP 400 with ``{"error": line}``,
the same line ``assign-add predict`` prints.

Memory: checkpoints are loaded on demand and kept in a least-recently-used cache of at most
``cache_size`` models (the paper model is about 1.1 MB of float32 parameters, so the default 32
holds under 40 MB); the neuron spectra of the final model are computed once, on first use.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from importlib import resources

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
# drawn, and enough for the phase marks (addition: 0var_train; binding: 1var_heldout; refinement: the
# forbidden-position sets present); five sets keep a checkpoint evaluation of an imported run short
CURVE_SETS = ("0var_train", "0var_heldout", "1var_heldout", "1var_forbidden", "1var_b_right")
EXAMPLE_SETS = ("1var_heldout", "2var_train", "0var_heldout")


class ModelCache:
    """At most ``size`` checkpoints in memory, least recently used evicted first; thread-safe."""

    def __init__(self, run: RunDir, size: int = DEFAULT_CACHE) -> None:
        if size < 1:
            raise ValueError("the model cache holds at least one checkpoint")
        self.run, self.size = run, size
        self._models: OrderedDict[int, AssignAddTransformer] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, step: int) -> AssignAddTransformer:
        with self._lock:
            if step in self._models:
                self._models.move_to_end(step)
                return self._models[step]
        model = self.run.load_model(step)
        with self._lock:
            self._models[step] = model
            while len(self._models) > self.size:
                self._models.popitem(last=False)
        return model

    def __len__(self) -> int:
        return len(self._models)


class Explorer:
    """The run's data for the page, computed lazily and kept."""

    def __init__(self, run: RunDir, cache_size: int = DEFAULT_CACHE) -> None:
        self.run = run
        self.steps = run.checkpoint_steps()
        if not self.steps:
            raise RunError(f"{run.root} has no checkpoints to explore")
        self.vocab = run.vocab()
        self.models = ModelCache(run, cache_size)
        self._curves: dict | None = None
        self._spectra: views.NeuronSpectra | None = None
        self._lock = threading.Lock()

    @property
    def final(self) -> int:
        return self.steps[-1]

    def examples(self, per_set: int = 3) -> list[dict]:
        sets = self.run.eval_sets()
        out = []
        for name in EXAMPLE_SETS:
            if name in sets:
                out += [{"set": name, "prompt": tokens_to_text(t, self.vocab)} for t in sets[name].tokens[:per_set]]
        return out

    def meta(self) -> dict:
        return {"run": str(self.run.root), "steps": self.steps, "final": self.final, "examples": self.examples(),
                "cache_size": self.models.size}

    def curves(self) -> dict:
        """Accuracy per step: training metrics, else the checkpoints' cached evaluations (computed once)."""
        with self._lock:
            if self._curves is None:
                records = self.run.metrics()
                if not records:
                    from assign_add.train.checkpoint_eval import evaluate_checkpoints

                    names = [n for n in CURVE_SETS if n in self.run.eval_sets()]
                    records = evaluate_checkpoints(self.run, self.steps, names)
                c = dynamics.curves_from_records(records)
                phases = dynamics.detect_phases(c)
                self._curves = {"steps": c.steps, "acc": {k: v for k, v in c.acc.items() if k in CURVE_SETS},
                                "phases": {k: getattr(phases, k) for k in ("addition", "binding", "refinement")}}
            return self._curves

    def check_step(self, step: int) -> int:
        if step not in self.steps:
            near = min(self.steps, key=lambda s: abs(s - step))
            raise RunError(f"{self.run.root} has no checkpoint at step {step} (nearest: {near})")
        return step

    def view(self, text: str, step: int) -> dict:
        model = self.models.get(self.check_step(step))
        out = views.prompt_view(model, self.vocab, text)
        out["step"] = step
        if step == self.final:
            out["fourier"] = views.fourier_view(model, self.vocab, text, self.spectra())
        return out

    def spectra(self) -> views.NeuronSpectra:
        with self._lock:
            if self._spectra is None:
                zero = self.run.eval_sets()["0var_train"]
                self._spectra = views.neuron_spectra(self.models.get(self.final), self.vocab, zero)
            return self._spectra


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
