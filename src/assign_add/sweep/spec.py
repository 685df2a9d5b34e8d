"""What a sweep is: the swept field, its values, the seeds, the protocol, and the presets.

A :class:`SweepSpec` fully determines every point's run configuration
(:meth:`SweepSpec.point_config`), so a sweep folder can be resumed, re-aggregated or extended with
seeds without retraining what is finished.

Presets ``f`` and ``r`` are the authors' own sweep protocol (``paper-artifacts/README.md``, "The
authors' sweeps"): their grids to the last digit, 30,000 steps per run (their training script's
default, which their sweep does not override), seed 42, r = 1 in the f sweep and f = 0.7 in the r
sweep, scored once at the final step on the exhaustive sets.  ``f-short`` and ``r-short`` are the
cheaper settings used before (10,000 / 20,000 steps, rounded grids), for smoke runs.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, fields

from assign_add import config as config_mod
from assign_add.analysis.criteria import VALUES
from assign_add.config import PAPER_SWEEP_STEPS, ConfigError, RunConfig, preset
from assign_add.run import seed_dir

THRESHOLD_ACC = VALUES["SWEEP_THRESHOLD_ACC"]  # the threshold is where the score reaches this accuracy


def _grid(first: float, last: float, n: int) -> list[float]:
    """``first + i·(last − first)/(n − 1)``, i = 0…n−1, computed as the authors' script does."""
    return [first + i * (last - first) / (n - 1) for i in range(n)]


AUTHORS_F_GRID = _grid(0.06157894736842105, 0.99, 20)
AUTHORS_R_GRID = _grid(0.01, 0.99, 20)


@dataclass(frozen=True)
class SweepPreset:
    param: str
    values: list[float]
    score: str
    steps: int
    paper_threshold: float
    overrides: list[str]
    protocol: str


PRESETS: dict[str, SweepPreset] = {
    "f": SweepPreset(
        "task.f", AUTHORS_F_GRID, "0var_heldout_all", PAPER_SWEEP_STEPS, 0.25, ["task.r=1.0", "train.compile=true"],
        "authors' f sweep: their 20-value grid 0.0616–0.99, 30,000 steps, r = 1, scored at the final step "
        "on every held-out pair as a 0-var sequence"),
    "r": SweepPreset(
        "task.r", AUTHORS_R_GRID, "2var_union", PAPER_SWEEP_STEPS, 0.2, ["task.f=0.7", "train.compile=true"],
        "authors' r sweep: their 20-value grid 0.01–0.99, 30,000 steps, f = 0.7, scored at the final step "
        "on the exhaustive 2-var union"),
    "f-short": SweepPreset(
        "task.f", [round(v, 3) for v in _grid(0.06, 0.99, 20)], "0var_heldout_all", 10_000, 0.25,
        ["task.r=1.0", "train.compile=true"],
        "short f sweep (not the authors' protocol): 20 values 0.06–0.99, 10,000 steps"),
    "r-short": SweepPreset(
        "task.r", [round(v, 3) for v in _grid(0.01, 0.99, 20)], "2var_union", 20_000, 0.2,
        ["task.f=0.7", "train.compile=true"],
        "short r sweep (not the authors' protocol): 20 values 0.01–0.99, 20,000 steps"),
}


@dataclass
class SweepSpec:
    """Every point is ``preset('paper')`` + the run fields below + ``overrides`` + value + seed."""

    param: str
    values: list[float]
    seeds: list[int]
    steps: int
    score: str
    overrides: list[str] = field(default_factory=list)
    eval_every: int = 1000  # the score curve (convergence) is recorded at this interval
    checkpoint_every: int = 5000
    # description only: changing these never retrains a point
    paper_threshold: float | None = None
    chance: float = 0.0
    preset: str | None = None
    protocol: str = ""

    # what a point's run depends on besides its value and seed (values and seeds may grow)
    RUN_FIELDS = ("param", "steps", "score", "overrides", "eval_every", "checkpoint_every")

    def point_config(self, value: float, seed: int) -> RunConfig:
        items = [f"train.steps={self.steps}", f"train.eval_every={self.eval_every}",
                 f"train.checkpoint_every={self.checkpoint_every}", f"train.eval_sets={self.score}",
                 "train.threads=1", *self.overrides, f"{self.param}={value}", f"train.seed={seed}"]
        return config_mod.validate(config_mod.apply_overrides(preset("paper"), items))

    def point_name(self, value: float, seed: int) -> str:
        return seed_dir(f"runs/{self.param}={value}", seed).as_posix()

    def points(self) -> list[tuple[float, int]]:
        return [(v, s) for v in self.values for s in self.seeds]

    def to_json(self) -> dict:
        return asdict(self)

    def same_runs(self, other: dict) -> bool:
        """Whether a saved spec (``spec.json``) describes the same runs as this one."""
        return all(other.get(k) == getattr(self, k) for k in self.RUN_FIELDS)

    @classmethod
    def from_json(cls, data: dict) -> "SweepSpec":
        names = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in data.items() if k in names})


def make_spec(preset_name: str | None, param: str | None, values: list[float] | None, seeds: int,
              steps: int | None, score: str | None, overrides: list[str], first_seed: int = 42) -> SweepSpec:
    """The spec from a preset and/or explicit options; every point's config is validated here.
    The seeds are ``first_seed``, ``first_seed + 1``, … (``seeds`` of them; the authors' sweep is seed 42)."""
    paper, chance, protocol = None, 0.0, ""
    if preset_name is not None:
        if preset_name not in PRESETS:
            raise ConfigError("--preset", f"unknown sweep preset {preset_name!r}; choose {', '.join(PRESETS)}")
        p = PRESETS[preset_name]
        param, values = param or p.param, values or p.values
        score = score or p.score
        steps = p.steps if steps is None else steps
        paper, chance = p.paper_threshold, -1.0  # -1: a uniform guess, 1 / modulus of the points' task (below)
        protocol = p.protocol if (param, list(values), score, steps) == (p.param, p.values, p.score, p.steps) else \
            f"{preset_name} preset modified ({param}, {len(values)} values, {steps:,} steps, score {score})"
        overrides = [*p.overrides, *overrides]  # the user's overrides come last and win
    elif not param or not values:
        raise ConfigError("--param", "give --param and --values, or a --preset (" + ", ".join(PRESETS) + ")")
    steps = 10_000 if steps is None else steps
    if steps < 1:
        raise ConfigError("--steps", f"must be >= 1, got {steps}")
    if seeds < 1:
        raise ConfigError("--seeds", f"must be >= 1, got {seeds}")
    if first_seed < 0:
        raise ConfigError("--first-seed", f"must be >= 0, got {first_seed}")
    if len(set(values)) != len(values):
        dup = sorted({v for v in values if list(values).count(v) > 1})
        raise ConfigError("--values", f"duplicate value(s) {', '.join(map(str, dup))}: each value is one run folder")
    spec = SweepSpec(param, list(values), [first_seed + i for i in range(seeds)], steps, score or "0var_heldout_all",
                     list(overrides), eval_every=curve_interval(steps), paper_threshold=paper, chance=chance, preset=preset_name,
                     protocol=protocol or f"{param} over {len(values)} values, {steps:,} steps")
    for v in spec.values:  # validate every point's config before running anything
        _check_point(spec, v)
    if spec.chance < 0:
        spec.chance = 1 / spec.point_config(spec.values[0], spec.seeds[0]).task.modulus
    return spec


def curve_interval(steps: int) -> int:
    """Evaluate the score every 1,000 steps, or 30 times per run for runs under 30,000 steps."""
    return max(1, min(1000, steps // 30))


def _check_point(spec: SweepSpec, value: float) -> None:
    from assign_add.train.trainer import check_eval_sets

    cfg = spec.point_config(value, spec.seeds[0])
    try:
        check_eval_sets(cfg)
    except ConfigError as exc:
        raise ConfigError("--score", f"{spec.score!r} is not a curated set of the run at {spec.param}={value} "
                          f"({str(exc).split('; ', 1)[-1]})") from None


def parse_values(text: str) -> list[float]:
    try:
        vals = [float(v) for v in text.split(",") if v.strip()]
    except ValueError:
        raise ConfigError("--values", f"expected comma-separated numbers, got {text!r}") from None
    if not vals:
        raise ConfigError("--values", "no values given")
    return vals
