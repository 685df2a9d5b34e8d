"""Typed configuration for a whole run: task, model and training.

Every knob of the toolkit lives in one of three dataclasses, nested in :class:`RunConfig`.
Configs are saved to and loaded from TOML and take dotted overrides from the command line
(``task.f=0.25``, ``train.steps=2000``, ``task.mixture.two_var=0.1``).  Nothing is derived at
class-definition time: quantities that depend on other fields (vocabulary size, context of the
model, initialisation scale) are computed when a model or task is built.

Validation errors are :class:`ConfigError`, whose message names the offending field.
"""

from __future__ import annotations

import dataclasses
import math
import tomllib
import types
import typing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import tomli_w

from assign_add.machine import auto_precision, cpu_flags, has_c_compiler


class ConfigError(ValueError):
    """A configuration value is invalid; the message starts with the dotted field name."""

    def __init__(self, field_name: str, message: str) -> None:
        super().__init__(f"{field_name}: {message}")
        self.field_name = field_name


PAPER_STEPS = 40_000  # the authors' run: 40,000 training steps (paper-artifacts README)
PAPER_SWEEP_STEPS = 30_000  # the authors' f and r sweeps: 30,000 steps per point
LAYOUTS = ("prefix", "infix")
PADDINGS = ("random", "end")
QUERY_TYPES = ("zero_var", "var_left", "var_right", "two_var")


@dataclass
class Mixture:
    """Shares of the four query types in the training distribution (must sum to 1).

    The paper draws rows from a table with 12 rows per pair for 0-var and 10 each for the
    other three types, hence the defaults 12/42, 10/42, 10/42, 10/42.
    """

    zero_var: float = 12 / 42
    var_left: float = 10 / 42
    var_right: float = 10 / 42
    two_var: float = 10 / 42

    def as_list(self) -> list[float]:
        return [getattr(self, name) for name in QUERY_TYPES]


@dataclass
class TaskConfig:
    """The assignment + modular addition task (SPEC section 2)."""

    modulus: int = 59
    variables: list[str] = field(default_factory=lambda: list("abcdefghijkl"))
    min_assignments: int = 1
    max_assignments: int = 6
    n_ctx: int = 16
    layout: str = "prefix"
    # where the PAD tokens of the assignment region go: "random" (the paper: scattered into the gaps
    # between assignments) or "end" (all after the last assignment: every assignment slot at a fixed position)
    padding: str = "random"
    f: float = 0.7
    split_seed: int = 42
    forbidden_left: list[str] = field(default_factory=lambda: ["k", "l"])
    forbidden_right: list[str] = field(default_factory=lambda: ["a", "b"])
    mixture: Mixture = field(default_factory=Mixture)
    # another mixture for the training batches of the first early_mixture_until steps (0: never), e.g. more
    # 1-var queries early; the evaluation sets do not change
    early_mixture: Mixture = field(default_factory=Mixture)
    early_mixture_until: int = 0
    r: float = 1.0
    eval_seed: int = 1234
    eval_pool_size: int = 2000


@dataclass
class ModelConfig:
    """Architecture (SPEC section 3).  Vocabulary sizes and context come from the task."""

    n_layers: int = 2
    n_heads: int = 1
    d_model: int = 128
    d_head: int = 128
    d_mlp: int = 512
    mlp_in_first_layer: bool = False
    act_fn: str = "relu"
    init_scale: float = 0.8


@dataclass
class TrainConfig:
    """Optimisation, evaluation and checkpointing (SPEC section 4)."""

    seed: int = 42
    # the two sources of randomness apart (-1: train.seed): the initial weights, and the data order
    # (the batch of step s is a function of (data seed, s)), so their effects can be separated
    init_seed: int = -1
    data_seed: int = -1
    steps: int = PAPER_STEPS
    batch_size: int = 512
    lr: float = 1e-3
    weight_decay: float = 0.02
    beta1: float = 0.9
    beta2: float = 0.999
    eval_every: int = 100
    # curated sets evaluated every eval_every steps (empty: every set but the 2-var union);
    # the last step always evaluates every set
    eval_sets: list[str] = field(default_factory=list)
    checkpoint_every: int = 0
    # extra checkpoints every early_checkpoint_every steps up to early_checkpoint_until (0: none), added to
    # the schedule above: e.g. 50 up to 2,000, to time what diverges between seeds early in training
    early_checkpoint_every: int = 0
    early_checkpoint_until: int = 2000
    state_every: int = 500
    device: str = "auto"
    # "auto": bf16 autocast where it measured faster (compiled, on CUDA or a CPU with bf16 instructions),
    # else fp32; settled by validate() and recorded as fp32 or bf16 in the run's config.toml
    precision: str = "auto"
    threads: int = 0
    # the attention QK weights (W_Q, W_K of every layer: the binding circuit's routing) train at this multiple
    # of lr (1: one learning rate for all)
    qk_lr_scale: float = 1.0
    # a learning-rate warm restart: at update lr_restart_at (0: none) lr jumps to lr_restart_peak x lr and
    # falls back to lr along a half cosine over lr_restart_steps updates
    lr_restart_at: int = 0
    lr_restart_peak: float = 3.0
    lr_restart_steps: int = 2000
    compile: bool = False  # torch.compile the training step's forward (faster for long runs; ~30 s to compile)
    # where evaluation records go: "jsonl" (metrics.jsonl, always written), "tensorboard", "wandb"
    log_to: list[str] = field(default_factory=lambda: ["jsonl"])


    @property
    def weights_seed(self) -> int:
        """The seed of the initial weights: ``init_seed``, else ``seed``."""
        return self.seed if self.init_seed < 0 else self.init_seed

    @property
    def order_seed(self) -> int:
        """The seed of the data order: ``data_seed``, else ``seed``."""
        return self.seed if self.data_seed < 0 else self.data_seed


@dataclass
class RunConfig:
    task: TaskConfig = field(default_factory=TaskConfig)
    model: ModelConfig = field(default_factory=ModelConfig)
    train: TrainConfig = field(default_factory=TrainConfig)


PRESETS = ("paper", "tiny")


def preset(name: str) -> RunConfig:
    """Named configurations.  ``paper`` is the authors' setup; ``tiny`` is a fast smoke test."""
    if name == "paper":
        return RunConfig()
    if name == "tiny":
        cfg = RunConfig()
        cfg.model = ModelConfig(d_model=32, d_head=32, d_mlp=64)
        cfg.train = TrainConfig(steps=200, batch_size=128, eval_every=50, state_every=50)
        cfg.task.eval_pool_size = 200
        return cfg
    raise ConfigError("preset", f"unknown preset {name!r}; choose one of {', '.join(PRESETS)}")


# --------------------------------------------------------------------------- validation


def validate(cfg: RunConfig) -> RunConfig:
    """Check every field; raise :class:`ConfigError` naming the first bad one.  Returns the config with
    ``train.precision=auto`` settled for this machine (:func:`settle_precision`)."""
    _validate_task(cfg.task)
    _validate_model(cfg.model)
    _validate_train(cfg.train)
    return settle_precision(cfg)


PRECISIONS = ("auto", "fp32", "bf16")


def settle_precision(cfg: RunConfig) -> RunConfig:
    """``cfg`` with ``train.precision=auto`` replaced by what :func:`auto_precision` chooses on this machine."""
    t = cfg.train
    if t.precision != "auto":
        return cfg
    import torch

    on_cuda = t.device.startswith("cuda") or (t.device == "auto" and torch.cuda.is_available())
    chosen = auto_precision(t.compile, on_cuda, cpu_flags())
    return dataclasses.replace(cfg, train=dataclasses.replace(t, precision=chosen))


def assignment_length(layout: str) -> int:
    """Tokens per assignment: ``v n`` (prefix) or ``v = n ,`` (infix)."""
    return 2 if layout == "prefix" else 4


QUERY_LENGTH = 4


def _validate_task(t: TaskConfig) -> None:
    _check_finite("task", t)
    _check_finite("task.mixture", t.mixture)
    _check_finite("task.early_mixture", t.early_mixture)
    _check_seeds("task", t, ("split_seed", "eval_seed"))
    if not isinstance(t.modulus, int) or t.modulus < 2:
        raise ConfigError("task.modulus", f"must be an integer >= 2, got {t.modulus!r}")
    if t.layout not in LAYOUTS:
        raise ConfigError("task.layout", f"must be one of {', '.join(LAYOUTS)}, got {t.layout!r}")
    if t.padding not in PADDINGS:
        raise ConfigError("task.padding", f"must be one of {', '.join(PADDINGS)}, got {t.padding!r}")
    if len(t.variables) < 2:
        raise ConfigError("task.variables", "needs at least two variables")
    if len(set(t.variables)) != len(t.variables):
        raise ConfigError("task.variables", "variable names must be distinct")
    for v in t.variables:
        if not (isinstance(v, str) and v.isalpha() and v.islower() and len(v) == 1):
            raise ConfigError("task.variables", f"each variable must be one lowercase letter, got {v!r}")
    if not (0.0 < t.f <= 1.0) or math.isnan(t.f):
        raise ConfigError("task.f", f"must be in (0, 1], got {t.f}")
    if int(t.modulus**2 * t.f) < 1:
        raise ConfigError("task.f", f"keeps no training pair at modulus {t.modulus}")
    if not (0.0 <= t.r <= 1.0):
        raise ConfigError("task.r", f"must be in [0, 1], got {t.r}")
    if t.min_assignments < 1:
        raise ConfigError("task.min_assignments", f"must be >= 1, got {t.min_assignments}")
    if t.max_assignments < max(2, t.min_assignments):
        raise ConfigError(
            "task.max_assignments",
            f"must be >= max(2, min_assignments) so 2-var queries fit, got {t.max_assignments}",
        )
    if t.max_assignments > len(t.variables):
        raise ConfigError(
            "task.max_assignments",
            f"{t.max_assignments} assignments need {t.max_assignments} distinct variables, "
            f"only {len(t.variables)} configured",
        )
    need = t.max_assignments * assignment_length(t.layout) + QUERY_LENGTH
    if need > t.n_ctx:
        raise ConfigError(
            "task.max_assignments",
            f"{t.max_assignments} assignments in the {t.layout} layout plus the query need "
            f"{need} tokens, more than the context task.n_ctx={t.n_ctx}",
        )
    for name in ("forbidden_left", "forbidden_right"):
        for v in getattr(t, name):
            if v not in t.variables:
                raise ConfigError(f"task.{name}", f"unknown variable {v!r} (variables: {''.join(t.variables)})")
    if len(t.forbidden_left) >= len(t.variables) or len(t.forbidden_right) >= len(t.variables):
        raise ConfigError("task.forbidden_left", "every variable is forbidden on one side")
    _check_mixture("task.mixture", t.mixture)
    _check_mixture("task.early_mixture", t.early_mixture)
    if t.early_mixture_until < 0:
        raise ConfigError("task.early_mixture_until", f"must be >= 0 (0: never), got {t.early_mixture_until}")
    if t.eval_pool_size < 1:
        raise ConfigError("task.eval_pool_size", f"must be >= 1, got {t.eval_pool_size}")


def _check_mixture(name: str, mixture: Mixture) -> None:
    shares = mixture.as_list()
    for kind, share in zip(QUERY_TYPES, shares):
        if not (0.0 <= share <= 1.0):
            raise ConfigError(f"{name}.{kind}", f"must be in [0, 1], got {share}")
    if abs(sum(shares) - 1.0) > 1e-6:
        raise ConfigError(name, f"shares must sum to 1, got {sum(shares):.6g}")


def _validate_model(m: ModelConfig) -> None:
    _check_finite("model", m)
    for name in ("n_layers", "n_heads", "d_model", "d_head", "d_mlp"):
        if getattr(m, name) < 1:
            raise ConfigError(f"model.{name}", f"must be >= 1, got {getattr(m, name)}")
    if m.act_fn not in ("relu", "gelu"):
        raise ConfigError("model.act_fn", f"must be relu or gelu, got {m.act_fn!r}")
    if m.init_scale <= 0:
        raise ConfigError("model.init_scale", f"must be > 0, got {m.init_scale}")


def _check_finite(section: str, obj: Any) -> None:
    """NaN or infinity in any float field is an error naming the field."""
    for f in dataclasses.fields(obj):
        value = getattr(obj, f.name)
        if isinstance(value, float) and not math.isfinite(value):
            raise ConfigError(f"{section}.{f.name}", f"must be a finite number, got {value}")


def _check_seeds(section: str, obj: Any, names: tuple[str, ...]) -> None:
    for name in names:
        value = getattr(obj, name)
        if not (0 <= value < 2**63):
            raise ConfigError(f"{section}.{name}", f"must be an integer in [0, 2^63), got {value}")


def _validate_train(t: TrainConfig) -> None:
    _check_finite("train", t)
    _check_seeds("train", t, ("seed",))
    for name in ("init_seed", "data_seed"):
        if not (-1 <= getattr(t, name) < 2**63):
            raise ConfigError(f"train.{name}", f"must be -1 (same as train.seed) or an integer in [0, 2^63), "
                              f"got {getattr(t, name)}")
    for name in ("steps", "batch_size", "eval_every", "state_every"):
        if getattr(t, name) < 1:
            raise ConfigError(f"train.{name}", f"must be >= 1, got {getattr(t, name)}")
    if t.checkpoint_every < 0:
        raise ConfigError("train.checkpoint_every", f"must be >= 0 (0: default schedule), got {t.checkpoint_every}")
    for name in ("early_checkpoint_every", "early_checkpoint_until"):
        if getattr(t, name) < 0:
            raise ConfigError(f"train.{name}", f"must be >= 0 (0: no early checkpoints), got {getattr(t, name)}")
    if t.lr <= 0:
        raise ConfigError("train.lr", f"must be > 0, got {t.lr}")
    if t.weight_decay < 0:
        raise ConfigError("train.weight_decay", f"must be >= 0, got {t.weight_decay}")
    for name in ("qk_lr_scale", "lr_restart_peak"):
        if getattr(t, name) <= 0:
            raise ConfigError(f"train.{name}", f"must be > 0, got {getattr(t, name)}")
    if t.lr_restart_at < 0:
        raise ConfigError("train.lr_restart_at", f"must be >= 0 (0: no restart), got {t.lr_restart_at}")
    if t.lr_restart_steps < 1:
        raise ConfigError("train.lr_restart_steps", f"must be >= 1, got {t.lr_restart_steps}")
    for name in ("beta1", "beta2"):
        if not (0.0 <= getattr(t, name) < 1.0):
            raise ConfigError(f"train.{name}", f"must be in [0, 1), got {getattr(t, name)}")
    if t.precision not in PRECISIONS:
        raise ConfigError("train.precision", f"must be {', '.join(PRECISIONS)}, got {t.precision!r}")
    if not (t.device in ("auto", "cpu", "cuda") or t.device.startswith("cuda:")):
        raise ConfigError("train.device", f"must be auto, cpu, cuda or cuda:N, got {t.device!r}")
    _check_log_to(t.log_to)
    if t.threads < 0:
        raise ConfigError("train.threads", f"must be >= 0 (0: torch default), got {t.threads}")
    if t.compile and t.device in ("auto", "cpu") and not has_c_compiler():
        raise ConfigError("train.compile", "torch.compile on a CPU needs a C compiler (cc/gcc); set train.compile=false")


# --------------------------------------------------------------------------- (de)serialisation


def to_dict(cfg: Any) -> dict[str, Any]:
    return dataclasses.asdict(cfg)


def from_dict(cls: type, data: dict[str, Any], prefix: str = "") -> Any:
    """Build dataclass ``cls`` from a nested dict, rejecting unknown keys and coercing types."""
    hints = typing.get_type_hints(cls)
    names = {f.name for f in dataclasses.fields(cls)}
    kwargs: dict[str, Any] = {}
    for key, value in data.items():
        dotted = f"{prefix}{key}"
        if key not in names:
            raise ConfigError(dotted, f"unknown field (known: {', '.join(sorted(names))})")
        hint = hints[key]
        if dataclasses.is_dataclass(hint):
            if not isinstance(value, dict):
                raise ConfigError(dotted, "expected a table of fields")
            kwargs[key] = from_dict(hint, value, prefix=f"{dotted}.")
        else:
            kwargs[key] = coerce(dotted, hint, value)
    return cls(**kwargs)


def coerce(dotted: str, hint: Any, value: Any) -> Any:
    """Convert ``value`` to the annotated type, or raise a ConfigError naming the field."""
    origin = typing.get_origin(hint)
    if origin in (list, types.GenericAlias) or hint is list:
        if isinstance(value, str):
            value = [v.strip() for v in value.split(",") if v.strip()] if value.strip() else []
        if not isinstance(value, list):
            raise ConfigError(dotted, f"expected a list, got {value!r}")
        return [str(v) for v in value]
    if hint is bool:
        if isinstance(value, bool):
            return value
        if isinstance(value, str) and value.lower() in ("true", "false", "1", "0", "yes", "no"):
            return value.lower() in ("true", "1", "yes")
        raise ConfigError(dotted, f"expected true or false, got {value!r}")
    if hint is int:
        if isinstance(value, bool):
            raise ConfigError(dotted, f"expected an integer, got {value!r}")
        if isinstance(value, float) and value.is_integer():
            return int(value)
        if isinstance(value, int):
            return value
        if isinstance(value, str):
            try:
                return int(value.replace("_", ""))
            except ValueError:
                pass
        raise ConfigError(dotted, f"expected an integer, got {value!r}")
    if hint is float:
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return float(value)
        if isinstance(value, str):
            try:
                return float(value)
            except ValueError:
                pass
        raise ConfigError(dotted, f"expected a number, got {value!r}")
    if hint is str:
        return str(value)
    raise ConfigError(dotted, f"unsupported field type {hint!r}")


LOG_SINKS = {"jsonl": None, "tensorboard": "tensorboard", "wandb": "wandb"}  # sink -> the module it needs


def _check_log_to(log_to: list[str]) -> None:
    import importlib.util

    unknown = [x for x in log_to if x not in LOG_SINKS]
    if unknown:
        raise ConfigError("train.log_to", f"unknown sink {unknown[0]!r}; choose from {', '.join(LOG_SINKS)}")
    if "jsonl" not in log_to:
        raise ConfigError("train.log_to", "must include \"jsonl\" (metrics.jsonl is the run's own record)")
    for sink in log_to:
        module = LOG_SINKS[sink]
        if module and importlib.util.find_spec(module) is None:
            raise ConfigError("train.log_to", f"{sink} needs the {module} package: pip install 'assign-add[logs]'")


def apply_overrides(cfg: RunConfig, overrides: list[str]) -> RunConfig:
    """Apply ``section.key=value`` strings (values parsed as TOML literals, else as text)."""
    data = to_dict(cfg)
    for item in overrides:
        if "=" not in item:
            raise ConfigError(item, "override must look like section.key=value")
        key, raw = item.split("=", 1)
        key = key.strip()
        parts = key.split(".")
        node: Any = data
        for i, part in enumerate(parts[:-1]):
            if not isinstance(node, dict) or part not in node or not isinstance(node[part], dict):
                raise ConfigError(key, f"unknown section {'.'.join(parts[: i + 1])!r}")
            node = node[part]
        if not isinstance(node, dict) or parts[-1] not in node or isinstance(node[parts[-1]], dict):
            raise ConfigError(key, "unknown field")
        node[parts[-1]] = _parse_literal(raw)
    return from_dict(RunConfig, data)


def _parse_literal(raw: str) -> Any:
    try:
        return tomllib.loads(f"v = {raw}")["v"]
    except tomllib.TOMLDecodeError:
        return raw


def dumps(cfg: RunConfig) -> str:
    return tomli_w.dumps(to_dict(cfg))


def loads(text: str, source: str = "config") -> RunConfig:
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(source, f"not valid TOML ({exc})") from None
    return from_dict(RunConfig, data)


def save(cfg: RunConfig, path: Path) -> None:
    from assign_add.io import atomic_write_text

    atomic_write_text(path, dumps(cfg))


def load(path: Path) -> RunConfig:
    path = Path(path)
    if path.is_dir():
        raise ConfigError(str(path), "a directory, expected a TOML config file")
    if not path.is_file():
        raise ConfigError(str(path), "config file not found")
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise ConfigError(str(path), f"not UTF-8 text (byte {exc.start}); a config file is TOML") from None
    if not text.strip():
        raise ConfigError(str(path), "empty; a config file is TOML (assign-add config > FILE.toml writes one)")
    return loads(text, source=str(path))


def resolve(preset_name: str = "paper", config_file: Path | None = None, overrides: list[str] | None = None) -> RunConfig:
    """Preset, then a TOML file (if any), then dotted overrides; validated."""
    cfg = load(config_file) if config_file is not None else preset(preset_name)
    return validate(apply_overrides(cfg, overrides or []))
