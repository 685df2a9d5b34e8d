"""Speed measurements: data sampling, the training step (engine vs a straightforward model), evaluation.

Figures are printed, never asserted: the benchmark is a command (``assign-add bench``), not a test.
"""

from __future__ import annotations

import contextlib
import copy
import dataclasses
import time
from dataclasses import dataclass
from typing import Callable, Sequence

import torch
from torch import nn

from assign_add.config import RunConfig
from assign_add.model.fast import answer_loss, fast_answer_logits
from assign_add.model.hooked import AssignAddTransformer
from assign_add.model.baseline import BaselineTransformer
from assign_add.task.evalsets import build_eval_sets, live
from assign_add.task.generator import Sampler
from assign_add.task.partitions import build_partitions
from assign_add.train.evaluate import Evaluator
from assign_add.train.trainer import make_optimizer, precision_context, resolve_device
from assign_add.config import PAPER_STEPS, PAPER_SWEEP_STEPS


def saved_activation_bytes(loss_fn: Callable[[], torch.Tensor]) -> int:
    """Bytes of the tensors autograd keeps for the backward pass of one step (the activation memory)."""
    seen: dict[int, int] = {}

    def pack(t: torch.Tensor) -> torch.Tensor:
        seen[t.untyped_storage().data_ptr()] = t.untyped_storage().nbytes()
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        loss_fn().backward()
    return sum(seen.values())


@dataclass
class StepBench:
    name: str
    seq_per_s: float
    ms_per_step: float
    activation_mib: float


def bench_data(cfg: RunConfig, batches: int = 2000) -> float:
    """Training sequences sampled per second (batch size from the config)."""
    sampler = Sampler(cfg.task, cfg.train.seed)
    sampler.batch(0, cfg.train.batch_size)
    t0 = time.perf_counter()
    for i in range(batches):
        sampler.batch(i, cfg.train.batch_size)
    return batches * cfg.train.batch_size / (time.perf_counter() - t0)


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def bench_step(
    name: str, model: nn.Module, logits_fn: Callable[[torch.Tensor], torch.Tensor], cfg: RunConfig, steps: int,
    precision: str = "fp32",
) -> StepBench:
    """Forward + backward + AdamW on fresh batches (sampling excluded from the timing), on the
    model's device, under bf16 autocast when ``precision`` is ``bf16`` (as ``train.precision``)."""
    device = next(model.parameters()).device
    sampler = Sampler(cfg.task, cfg.train.seed)
    batches = [sampler.batch(i, cfg.train.batch_size) for i in range(steps + 3)]
    data = [(torch.as_tensor(b.tokens, device=device), torch.as_tensor(b.answers, device=device)) for b in batches]
    opt = make_optimizer(model, cfg)

    def loss_of(i: int) -> torch.Tensor:
        tokens, answers = data[i]
        with precision_context(precision, device):
            logits = logits_fn(tokens)
        return answer_loss(logits, answers)

    def step(i: int) -> None:
        loss = loss_of(i)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()

    for i in range(3):
        step(i)
    _sync(device)
    t0 = time.perf_counter()
    for i in range(3, steps + 3):
        step(i)
    _sync(device)
    dt = time.perf_counter() - t0
    mib = saved_activation_bytes(lambda: loss_of(0)) / 2**20
    opt.zero_grad(set_to_none=True)
    return StepBench(f"{name} ({precision})", steps * cfg.train.batch_size / dt, 1e3 * dt / steps, mib)


def bench_train(cfg: RunConfig, steps: int = 50, precisions: tuple[str, ...] = ("fp32",)) -> list[tuple[StepBench, StepBench]]:
    """(engine, straightforward) per precision, on ``train.device``; the same initial weights."""
    device = resolve_device(cfg.train.device)
    out = []
    for precision in precisions:
        hooked = AssignAddTransformer.from_config(cfg.model, cfg.task, seed=cfg.train.seed)
        naive = BaselineTransformer(hooked.cfg).load_from(hooked).to(device)
        hooked = hooked.to(device)
        base = bench_step("straightforward", naive, lambda tok: naive(tok)[:, -1], cfg, steps, precision)
        fast = bench_step("engine", hooked, lambda tok: fast_answer_logits(hooked, tok), cfg, steps, precision)
        out.append((fast, base))
    return out


def matmul_peak_gflops(device: torch.device, dtype: torch.dtype, shape: tuple[int, int, int] = (8192, 128, 512),
                       repeats: int = 50) -> float:
    """GFLOP/s of one [m, k] @ [k, n] product of the engine's shape (batch × d_model @ d_model × d_mlp)."""
    m, k, n = shape
    a = torch.randn(m, k, device=device).to(dtype)
    b = torch.randn(k, n, device=device).to(dtype)
    for _ in range(5):
        a @ b
    _sync(device)
    t0 = time.perf_counter()
    for _ in range(repeats):
        a @ b
    _sync(device)
    return 2 * m * k * n * repeats / (time.perf_counter() - t0) / 1e9


@contextlib.contextmanager
def torch_threads(n: int):
    """Run the block with ``n`` torch threads (0: leave as is), then restore the count."""
    before = torch.get_num_threads()
    if n > 0:
        torch.set_num_threads(n)
    try:
        yield
    finally:
        torch.set_num_threads(before)


def bench_compile(cfg: RunConfig, steps: int = 50, precisions: tuple[str, ...] = ("fp32", "bf16"),
                  threads: int = 1) -> tuple[StepBench, list[StepBench], float]:
    """(eager fp32 engine, the compiled engine in each precision, seconds the first compiled fp32 steps took)
    -- ``train.compile``; the bf16 row is what ``train.precision=auto`` weighs against fp32.  Measured with
    ``threads`` torch threads: one, as reproduce, the sweeps and survival run every training process."""
    with torch_threads(threads):
        return _bench_compile(cfg, steps, precisions)


def _bench_compile(cfg: RunConfig, steps: int, precisions: tuple[str, ...]) -> tuple[StepBench, list[StepBench], float]:
    from assign_add.model.fast import compiled_answer_logits

    eager_model = AssignAddTransformer.from_config(cfg.model, cfg.task, seed=cfg.train.seed)
    eager = bench_step("engine", eager_model, lambda tok: fast_answer_logits(eager_model, tok), cfg, steps)
    tokens = torch.as_tensor(Sampler(cfg.task, cfg.train.seed).batch(0, cfg.train.batch_size).tokens)
    compiled, warmup = [], 0.0
    for precision in precisions:
        model = AssignAddTransformer.from_config(cfg.model, cfg.task, seed=cfg.train.seed)
        forward = compiled_answer_logits()
        t0 = time.perf_counter()
        with precision_context(precision, torch.device("cpu")):
            forward(model, tokens).float().sum().backward()
        warmup = warmup or time.perf_counter() - t0
        compiled.append(bench_step("engine + torch.compile", model, lambda tok, m=model, f=forward: f(m, tok), cfg,
                                   steps, precision))
    return eager, compiled, warmup


def bench_eval(cfg: RunConfig, repeats: int = 3, compiled: bool = False) -> tuple[float, int]:
    """Seconds for one evaluation of the live sets (all but the 2-var union), and their size; ``compiled``:
    through the compiled engine, as a compiled training run evaluates them (always in float32)."""
    from assign_add.model.fast import compiled_answer_logits

    model = AssignAddTransformer.from_config(cfg.model, cfg.task, seed=cfg.train.seed)
    sets = live(build_eval_sets(cfg.task, build_partitions(cfg.task), exhaustive=True))
    evaluator = Evaluator(sets, compiled_answer_logits() if compiled else fast_answer_logits)
    evaluator(model)
    t0 = time.perf_counter()
    for _ in range(repeats):
        evaluator(model)
    return (time.perf_counter() - t0) / repeats, sum(len(b) for b in sets.values())


def projected_seconds(steps: int, step_ms: float, eval_s: float, eval_every: int) -> float:
    return steps * step_ms / 1e3 + (steps // eval_every + 1) * eval_s


@dataclass(frozen=True)
class Target:
    """A speed goal of the toolkit against what this machine's measured rates project."""

    name: str
    goal: float
    value: float
    unit: str  # "x" (at least the goal) or "min" (at most the goal)
    at_floor: float | None = None  # the same projection with the step at its matrix-product floor

    def _meets(self, value: float) -> bool:
        return value >= self.goal if self.unit == "x" else value <= self.goal

    @property
    def reached(self) -> bool:
        return self._meets(self.value)

    @property
    def reachable(self) -> bool | None:
        """Whether a step doing nothing but its matrix products at the measured peak would reach the goal."""
        return None if self.at_floor is None else self._meets(self.at_floor)

    @property
    def factor_short(self) -> float:
        """How many times faster the measured part must become to reach the goal (1 when reached)."""
        ratio = self.goal / self.value if self.unit == "x" else self.value / self.goal
        return max(ratio, 1.0)


ENGINE_RATIO_GOAL = 10.0  # engine / straightforward training speed, same precision
MAIN_JOB_GOAL_MIN = 15.0  # the main job's training, 3 seeds x 40,000 steps
SWEEP_GOAL_MIN = 60.0  # the authors'-protocol f or r sweep, 20 points x 30,000 steps


def packed_minutes(runs: int, steps: int, step_ms: float, eval_s: float, eval_every: int, cores: int) -> float:
    """Wall minutes for ``runs`` one-thread training runs packed perfectly on ``cores`` cores (a lower bound:
    no compile warm-up, checkpoints, analyses or contention)."""
    return runs * projected_seconds(steps, step_ms, eval_s, eval_every) / min(cores, runs) / 60


def speed_targets(engine_ratio: float, step_ms: float, eval_s: float, eval_every: int, cores: int,
                  floor_ms: float | None = None) -> list[Target]:
    """The three speed goals from measured rates: the engine ratio, and the main job's and a sweep's
    training time projected from the one-thread compiled step and evaluation; ``floor_ms``, the step's
    matrix products alone at the measured peak, gives each time's floor (the evaluation kept as measured)."""
    def runs(n: int, steps: int, goal: float, name: str) -> Target:
        minutes = [None if ms is None else packed_minutes(n, steps, ms, eval_s, eval_every, cores)
                   for ms in (step_ms, floor_ms)]
        return Target(name, goal, minutes[0], "min", minutes[1])

    return [
        Target("engine / straightforward, fp32", ENGINE_RATIO_GOAL, engine_ratio, "x"),
        runs(3, PAPER_STEPS, MAIN_JOB_GOAL_MIN, "main job training, 3 x 40k steps"),
        runs(20, PAPER_SWEEP_STEPS, SWEEP_GOAL_MIN, "sweep, 20 x 30k steps"),
    ]


@dataclass
class StepProfile:
    """Where one fp32 training step of the engine goes, and the evaluation's share of a full run."""

    data_ms: float
    forward_ms: float
    backward_ms: float
    optimizer_ms: float
    eval_s: float  # one evaluation of the live sets
    eval_every: int
    matmul_flops: float  # per step (forward + backward), counted by torch.utils.flop_counter

    @property
    def step_ms(self) -> float:
        return self.data_ms + self.forward_ms + self.backward_ms + self.optimizer_ms

    @property
    def eval_share(self) -> float:
        """Share of a full run's time spent evaluating (every ``eval_every`` steps)."""
        per_step = self.eval_s * 1e3 / self.eval_every
        return per_step / (self.step_ms + per_step)

    @property
    def gflops(self) -> float:
        """Achieved matmul GFLOP/s over the whole step (data and optimiser included)."""
        return self.matmul_flops / (self.step_ms / 1e3) / 1e9


def profile_step(cfg: RunConfig, steps: int = 50) -> StepProfile:
    """Time data, forward, backward and AdamW separately over ``steps`` fp32 steps on ``train.device``."""
    device = resolve_device(cfg.train.device)
    model = AssignAddTransformer.from_config(cfg.model, cfg.task, seed=cfg.train.seed).to(device)
    opt = make_optimizer(model, cfg)
    sampler = Sampler(cfg.task, cfg.train.seed)
    parts = torch.zeros(4, dtype=torch.float64)
    for i in range(steps + 3):
        t0 = time.perf_counter()
        b = sampler.batch(i, cfg.train.batch_size)
        tokens, answers = torch.as_tensor(b.tokens, device=device), torch.as_tensor(b.answers, device=device)
        _sync(device)
        t1 = time.perf_counter()
        loss = answer_loss(fast_answer_logits(model, tokens), answers)
        _sync(device)
        t2 = time.perf_counter()
        opt.zero_grad(set_to_none=True)
        loss.backward()
        _sync(device)
        t3 = time.perf_counter()
        opt.step()
        _sync(device)
        t4 = time.perf_counter()
        if i >= 3:
            parts += torch.tensor([t1 - t0, t2 - t1, t3 - t2, t4 - t3], dtype=torch.float64)
    ms = (parts * 1e3 / steps).tolist()
    eval_s, _ = bench_eval(cfg, repeats=1)
    return StepProfile(*ms, eval_s, cfg.train.eval_every, step_matmul_flops(cfg))


def step_matmul_flops(cfg: RunConfig) -> float:
    """Matrix-product FLOPs of one engine training step (forward + backward), counted by torch.utils.flop_counter."""
    from torch.utils.flop_counter import FlopCounterMode

    model = AssignAddTransformer.from_config(cfg.model, cfg.task, seed=cfg.train.seed)
    b = Sampler(cfg.task, cfg.train.seed).batch(0, cfg.train.batch_size)
    with FlopCounterMode(display=False) as counter:
        answer_loss(fast_answer_logits(model, torch.as_tensor(b.tokens)), torch.as_tensor(b.answers)).backward()
    return float(counter.get_total_flops())


def bench_paths(cfg: RunConfig, steps: int = 50, compiled: bool = True) -> list[StepBench]:
    """The engine's two exact forwards on the paper's shape: the two-layer row basis and the general path,
    eager and (``compiled``) under torch.compile; same weights, same batches, fp32."""
    from assign_add.model import fast

    out = []
    for label, fn in (("two-layer rows", fast._two_layer_rows), ("general path", fast._general)):
        model = AssignAddTransformer.from_config(cfg.model, cfg.task, seed=cfg.train.seed)
        out.append(bench_step(label, model, lambda tok, m=model, f=fn: f(m, tok), cfg, steps))
        if compiled:
            model = AssignAddTransformer.from_config(cfg.model, cfg.task, seed=cfg.train.seed)
            forward = torch.compile(fn)
            forward(model, torch.as_tensor(Sampler(cfg.task, 0).batch(0, cfg.train.batch_size).tokens)).sum().backward()
            out.append(bench_step(f"{label} + torch.compile", model, lambda tok, m=model, f=forward: f(m, tok), cfg,
                                  steps))
    return out


SHAPE_BATCHES = (256, 512, 1024, 2048)


def with_batch_size(cfg: RunConfig, batch_size: int) -> RunConfig:
    """``cfg`` with ``train.batch_size`` replaced (the rest shared)."""
    return dataclasses.replace(cfg, train=dataclasses.replace(cfg.train, batch_size=batch_size))


def bench_batches(cfg: RunConfig, steps: int = 50, batches: Sequence[int] = SHAPE_BATCHES,
                  compiled: bool = False) -> dict[int, float]:
    """Milliseconds per fp32 engine training step (forward, backward, AdamW; sampling excluded, as
    :func:`bench_step`) at each batch size, fresh weights of ``train.seed`` each; ``compiled``: through
    the compiled engine a compiled run trains with (one graph per batch size, compiled in the untimed warm-up)."""
    from assign_add.model.fast import compiled_answer_logits

    device = resolve_device(cfg.train.device)
    out: dict[int, float] = {}
    for batch in batches:
        model = AssignAddTransformer.from_config(cfg.model, cfg.task, seed=cfg.train.seed).to(device)
        forward = compiled_answer_logits() if compiled else fast_answer_logits
        b = bench_step("engine", model, lambda tok, m=model, f=forward: f(m, tok), with_batch_size(cfg, batch), steps)
        out[batch] = b.ms_per_step
    return out


@dataclass(frozen=True)
class StepShape:
    """A least-squares line ms = fixed + per-sequence cost · batch through measured step times."""

    batches: tuple[int, ...]
    ms: tuple[float, ...]  # measured ms per step at each batch size
    fixed_ms: float  # the intercept: cost per step that does not grow with the batch
    per_seq_us: float  # the slope, in microseconds per sequence
    r2: float

    def predicted_ms(self, batch: int) -> float:
        return self.fixed_ms + self.per_seq_us * batch / 1e3

    def fixed_share(self, batch: int = 512) -> float:
        """The fixed cost's share of a step at ``batch`` sequences, on the fitted line."""
        return self.fixed_ms / self.predicted_ms(batch)


def fit_step_shape(ms_by_batch: dict[int, float]) -> StepShape:
    """Fit ms = fixed + per_seq · batch by least squares (scipy.stats.linregress) to measured step times."""
    from scipy.stats import linregress

    batches = tuple(sorted(ms_by_batch))
    if len(batches) < 2:
        raise ValueError(f"a line needs at least two batch sizes, got {list(batches)}")
    ms = tuple(float(ms_by_batch[b]) for b in batches)
    fit = linregress(batches, ms)
    return StepShape(batches, ms, float(fit.intercept), float(fit.slope) * 1e3, float(fit.rvalue) ** 2)


# --------------------------------------------------------------------------- K seeds in one stacked step

STACK_SIZES = (2, 4, 8)
STACK_GAIN_TO_KEEP = 1.3  # stacked training would earn a place in the toolkit only at this gain per seed or more


class _SeedLoss(nn.Module):
    """One seed's training loss as the trainer computes it: the engine's answer logits, mean cross-entropy."""

    def __init__(self, model: AssignAddTransformer) -> None:
        super().__init__()
        self.model = model

    def forward(self, tokens: torch.Tensor, answers: torch.Tensor) -> torch.Tensor:
        return answer_loss(fast_answer_logits(self.model, tokens), answers)


@dataclass
class StackedSeeds:
    """K models of one architecture trained as one: every parameter stacked on a leading seed axis
    (``torch.func.stack_module_state``), the K losses from one ``torch.vmap`` of ``torch.func.functional_call``
    through the engine's forward, and the trainer's AdamW over the stacked tensors.  AdamW is elementwise
    and the trainer clips nothing, so each seed's update depends on its own gradient alone."""

    params: dict[str, torch.Tensor]  # name -> [K, *shape]
    buffers: dict[str, torch.Tensor]
    opt: torch.optim.Optimizer
    losses_of: Callable[..., torch.Tensor]  # (params, buffers, tokens [K,B,T], answers [K,B]) -> [K]

    @property
    def k(self) -> int:
        return next(iter(self.params.values())).shape[0]

    def losses(self, tokens: torch.Tensor, answers: torch.Tensor) -> torch.Tensor:
        """Each seed's mean loss on its own batch, ``[K]``."""
        return self.losses_of(self.params, self.buffers, tokens, answers)

    def step(self, tokens: torch.Tensor, answers: torch.Tensor) -> torch.Tensor:
        """One AdamW update of every seed on its own batch; returns the K losses.  The gradient of the
        sum of the seeds' losses with respect to seed k's parameters is seed k's own."""
        losses = self.losses(tokens, answers)
        self.opt.zero_grad(set_to_none=True)
        losses.sum().backward()
        self.opt.step()
        return losses.detach()

    def seed_state(self, k: int) -> dict[str, torch.Tensor]:
        """Seed ``k``'s parameters under the model's own names."""
        return {name.removeprefix("model."): p[k].detach() for name, p in self.params.items()}


def stack_seeds(models: Sequence[AssignAddTransformer], cfg: RunConfig, compiled: bool = False) -> StackedSeeds:
    """Stack ``models`` (copied, on their device and dtype) with the trainer's AdamW (``make_optimizer``);
    ``compiled``: the stacked loss through ``torch.compile`` (fixed shapes)."""
    from torch.func import functional_call, stack_module_state

    seeds = [_SeedLoss(m) for m in models]
    stacked, buffers = stack_module_state(seeds)
    holder = nn.ParameterList(stacked.values())  # the stacked leaves as one module's parameters
    params = dict(zip(stacked, holder))
    shell = copy.deepcopy(seeds[0]).to("meta")  # the architecture; the tensors come from params and buffers

    def one(p: dict, b: dict, tokens: torch.Tensor, answers: torch.Tensor) -> torch.Tensor:
        return functional_call(shell, (p, b), (tokens, answers))

    def losses_of(p: dict, b: dict, tokens: torch.Tensor, answers: torch.Tensor) -> torch.Tensor:
        return torch.vmap(one)(p, b, tokens, answers)

    losses = torch.compile(losses_of, dynamic=False) if compiled else losses_of
    return StackedSeeds(params, buffers, make_optimizer(holder, cfg), losses)


def seed_batches(samplers: Sequence[Sampler], step: int, batch_size: int,
                 device: torch.device) -> tuple[torch.Tensor, torch.Tensor]:
    """Each sampler's batch of ``step`` stacked: tokens ``[K, batch, n_ctx]``, answers ``[K, batch]``."""
    batches = [s.batch(step, batch_size) for s in samplers]
    tokens = torch.stack([torch.as_tensor(b.tokens) for b in batches]).to(device)
    answers = torch.stack([torch.as_tensor(b.answers) for b in batches]).to(device)
    return tokens, answers


def _timed_ms(step: Callable[[int], None], steps: int, device: torch.device, warmup: int = 3) -> float:
    """Milliseconds per call of ``step(i)`` over ``steps`` calls after ``warmup`` untimed ones."""
    for i in range(warmup):
        step(i)
    _sync(device)
    t0 = time.perf_counter()
    for i in range(warmup, warmup + steps):
        step(i)
    _sync(device)
    return 1e3 * (time.perf_counter() - t0) / steps


def stacked_step_ms(cfg: RunConfig, k: int, steps: int, compiled: bool = False) -> float:
    """Milliseconds per stacked fp32 training step of ``k`` seeds (``train.seed``, +1, ...: weights and data),
    each on its own batch of ``train.batch_size`` (sampling excluded, as :func:`bench_step`)."""
    device = resolve_device(cfg.train.device)
    seeds = [cfg.train.seed + i for i in range(k)]
    models = [AssignAddTransformer.from_config(cfg.model, cfg.task, seed=s).to(device) for s in seeds]
    stacked = stack_seeds(models, cfg, compiled)
    samplers = [Sampler(cfg.task, s) for s in seeds]
    data = [seed_batches(samplers, i, cfg.train.batch_size, device) for i in range(steps + 3)]
    return _timed_ms(lambda i: stacked.step(*data[i]), steps, device)


@dataclass(frozen=True)
class StackedTiming:
    """One measured training step: ``k`` seeds in one stacked step (``k`` = 1: the trainer's single-seed step)."""

    path: str  # "eager" or "compiled"
    threads: int
    k: int
    ms_per_step: float

    @property
    def per_seed_ms(self) -> float:
        return self.ms_per_step / self.k

    @property
    def core_ms_per_seed(self) -> float:
        """Core-milliseconds per seed-step: what one seed's update costs the machine's cores."""
        return self.ms_per_step * self.threads / self.k


def bench_stacked(cfg: RunConfig, steps: int = 50, ks: Sequence[int] = STACK_SIZES, threads: Sequence[int] = (1, 2),
                  compiled: bool = False) -> list[StackedTiming]:
    """The trainer's single-seed fp32 step and the stacked step of each K in ``ks``, at each torch thread count,
    eager and (``compiled``) under torch.compile; batch ``train.batch_size`` per seed."""
    from assign_add.model.fast import compiled_answer_logits

    device = resolve_device(cfg.train.device)
    rows = []
    for path in ("eager", "compiled") if compiled else ("eager",):
        for n in threads:
            with torch_threads(n):
                if path == "compiled":
                    torch.compiler.reset()  # inductor's CPU kernels are specialised on the thread count at compile time
                model = AssignAddTransformer.from_config(cfg.model, cfg.task, seed=cfg.train.seed).to(device)
                forward = compiled_answer_logits() if path == "compiled" else fast_answer_logits
                single = bench_step("engine", model, lambda tok, m=model, f=forward: f(m, tok), cfg, steps)
                rows.append(StackedTiming(path, n, 1, single.ms_per_step))
                rows += [StackedTiming(path, n, k, stacked_step_ms(cfg, k, steps, path == "compiled")) for k in ks]
    return rows


@dataclass(frozen=True)
class StackedGain:
    """A stacked step against single-seed steps on the same path."""

    stacked: StackedTiming
    single_ms: float  # the single-seed step at the same thread count
    single_one_thread_ms: float  # the single-seed step at one thread: a one-thread training process per core

    @property
    def same_threads(self) -> float:
        """Single-seed ms / stacked ms per seed, both at the stacked step's thread count."""
        return self.single_ms / self.stacked.per_seed_ms

    @property
    def per_core(self) -> float:
        """One-thread single-seed ms / the stacked step's core-ms per seed: the gain over running K one-thread
        training processes on the same cores (perfect packing of those processes assumed)."""
        return self.single_one_thread_ms / self.stacked.core_ms_per_seed


def stacked_gains(rows: Sequence[StackedTiming]) -> list[StackedGain]:
    """Every stacked row (K > 1) against the single-seed rows of its path (same threads, and one thread)."""
    single = {(r.path, r.threads): r.ms_per_step for r in rows if r.k == 1}
    return [StackedGain(r, single[r.path, r.threads], single[r.path, 1]) for r in rows
            if r.k > 1 and (r.path, r.threads) in single and (r.path, 1) in single]
