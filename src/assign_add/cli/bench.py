"""The benchmark command: data, training, evaluation, compile and explorer speed."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer
from rich.table import Table

from assign_add.cli.common import (
    ConfigOpt,
    OverridesArg,
    PresetOpt,
    _resolve,
    app,
    console,
    user_errors,
)
from assign_add.config import ConfigError, RunConfig


@app.command("bench")
@user_errors
def bench_cmd(
    overrides: Optional[list[str]] = OverridesArg,
    what: str = typer.Option("data,train,eval", "--what",
                             help="comma-separated: data, train, eval, compile, profile, paths, targets, shape, "
                                  "stacked, explore, precision (the last two need --run)"),
    steps: int = typer.Option(50, "--steps", help="timed training steps per implementation"),
    batches: str = typer.Option("256,512,1024,2048", "--batches",
                                help="batch sizes for --what shape (comma-separated)"),
    stack: str = typer.Option("2,4,8", "--stack", help="seeds per stacked step for --what stacked (comma-separated)"),
    run_dir: Optional[Path] = typer.Option(None, "--run", help="run directory for --what explore / precision"),
    at: Optional[str] = typer.Option(None, "--at", help="checkpoint steps for --what precision, e.g. 5401,40000 "
                                     "(default: the last)"),
    preset: str = PresetOpt,
    config_file: Optional[Path] = ConfigOpt,
) -> None:
    """Print sampling throughput, engine vs straightforward training speed, and evaluation cost."""
    import torch

    from assign_add import bench

    cfg = _resolve(preset, config_file, overrides)
    if steps < 1:
        raise ConfigError("--steps", f"must be >= 1, got {steps}")
    parts = {w.strip() for w in what.split(",")}
    unknown = parts - {"data", "train", "eval", "compile", "profile", "paths", "targets", "shape", "stacked",
                       "explore", "precision"}
    if unknown:
        raise ConfigError("--what", f"unknown benchmark {', '.join(sorted(unknown))}")
    batch_sizes = _positive_ints(batches, "--batches", at_least=2) if "shape" in parts else []
    stack_sizes = _positive_ints(stack, "--stack", at_least=1, smallest=2) if "stacked" in parts else []
    for needs_run in sorted(parts & {"explore", "precision"}):
        if run_dir is None:
            raise ConfigError("--run", f"--what {needs_run} needs --run RUN (a run directory)")
    console.print(f"torch {torch.__version__}, {torch.get_num_threads()} threads, batch {cfg.train.batch_size}", highlight=False)
    if "data" in parts:
        rate = bench.bench_data(cfg)
        console.print(f"data sampling: {rate:,.0f} sequences/s", highlight=False)
    step_ms = None
    if "train" in parts:
        step_ms = _print_train_bench(bench, cfg, steps)
    if "compile" in parts:
        _print_compile(bench, cfg, steps)
    if "profile" in parts:
        _print_profile(bench, cfg, steps)
    if "paths" in parts:
        _print_paths(bench, cfg, steps)
    if "targets" in parts:
        _print_targets(bench, cfg, steps)
    if "shape" in parts:
        _print_shape(bench, cfg, steps, batch_sizes)
    if "stacked" in parts:
        _print_stacked(bench, cfg, steps, stack_sizes)
    if "explore" in parts:
        from assign_add.explore.load import measure_rate
        from assign_add.run import open_run

        for r in measure_rate(open_run(run_dir)):
            console.print(f"explorer, {r.clients} clients, {r.where}: {r.per_second:.1f} requests/s "
                          f"({r.requests} answered, {r.failed} failed in {r.seconds:.1f} s); "
                          f"memory held {r.rss_mib:.0f} MiB (peak {r.peak_rss_mib:.0f})", highlight=False)
    if "precision" in parts:
        _print_precision(run_dir, at)
    if "eval" in parts:
        secs, size = bench.bench_eval(cfg)
        console.print(f"one evaluation of the live sets ({size:,} sequences): {secs:.2f} s", highlight=False)
        if step_ms is not None:
            for total in (16_000, 40_000):
                proj = bench.projected_seconds(total, step_ms, secs, cfg.train.eval_every)
                console.print(
                    f"projected {total:,} steps with evaluation every {cfg.train.eval_every}: {proj / 60:.1f} min",
                    highlight=False,
                )


# --------------------------------------------------------------------------- helpers


def _positive_ints(text: str, name: str, at_least: int, smallest: int = 1) -> list[int]:
    """Distinct comma-separated integers, each at least ``smallest``, at least ``at_least`` of them, sorted."""
    from assign_add.cli.common import _parse_ints

    values = _parse_ints(text, name)
    if any(v < smallest for v in values) or len(set(values)) != len(values) or len(values) < at_least:
        raise ConfigError(name, f"expected at least {at_least} distinct integers >= {smallest}, got {text!r}")
    return sorted(values)


def _print_train_bench(bench, cfg: RunConfig, steps: int) -> float:
    """The training-step table in fp32 and bf16 autocast on ``train.device``; returns fp32 engine ms/step."""
    import torch

    device = bench.resolve_device(cfg.train.device)
    pairs = bench.bench_train(cfg, steps, ("fp32", "bf16"))
    table = Table("implementation", "sequences/s", "ms/step", "activation memory (MiB)")
    for fast, base in pairs:
        for b in (base, fast):
            table.add_row(b.name, f"{b.seq_per_s:,.0f}", f"{b.ms_per_step:.1f}", f"{b.activation_mib:.1f}")
    console.print(f"device {device}", highlight=False)
    console.print(table)
    for fast, base in pairs:
        console.print(f"{fast.name} / {base.name}: {fast.seq_per_s / base.seq_per_s:.1f}x", highlight=False)
    (f32, _), (bf, _) = pairs
    console.print(f"engine bf16 / fp32: {bf.seq_per_s / f32.seq_per_s:.2f}x", highlight=False)
    peaks = {name: bench.matmul_peak_gflops(device, dtype) for name, dtype in
             (("fp32", torch.float32), ("bf16", torch.bfloat16))}
    console.print(f"matmul 8192x128 @ 128x512 on {device}: fp32 {peaks['fp32']:,.0f} GFLOP/s, "
                  f"bf16 {peaks['bf16']:,.0f} GFLOP/s ({peaks['bf16'] / peaks['fp32']:.2f}x)", highlight=False)
    return f32.ms_per_step




def _print_compile(bench, cfg: RunConfig, steps: int) -> None:
    """Eager vs compiled engine, and compiled bf16 vs fp32: the measurement behind ``train.precision=auto``."""
    from assign_add.machine import auto_precision, cpu_flags

    eager, (f32, bf), warmup = bench.bench_compile(cfg, steps)
    console.print(f"one torch thread (as each training process of reproduce, sweep and survival): "
                  f"engine {eager.seq_per_s:,.0f} sequences/s; with torch.compile (train.compile=true): "
                  f"{f32.seq_per_s:,.0f} sequences/s, {f32.seq_per_s / eager.seq_per_s:.2f}x "
                  f"after {warmup:.0f} s compiling", highlight=False)
    device = bench.resolve_device(cfg.train.device)
    chosen = auto_precision(True, device.type == "cuda", cpu_flags())
    console.print(f"compiled engine in bf16 autocast: {bf.seq_per_s:,.0f} sequences/s, {bf.seq_per_s / f32.seq_per_s:.2f}x "
                  f"compiled fp32; train.precision=auto gives a compiled run {chosen} on this machine", highlight=False)


def _print_precision(run_dir: Path, at: Optional[str]) -> None:
    """fp32 vs bf16 autocast answers of a run's checkpoints on every curated set, against the rounding criteria."""
    from assign_add.analysis import precision
    from assign_add.cli.common import _parse_ints
    from assign_add.run import open_run

    run = open_run(run_dir)
    steps = _parse_ints(at, "--at") if at else [run.checkpoint_steps()[-1]]
    sets = run.eval_sets()
    for step in steps:
        step = run.check_step(step)
        a = precision.precision_agreement(run.load_model(step), sets, step)
        table = Table(f"step {step}: set", "size", "acc fp32", "acc bf16", "answers changed")
        for s in a.sets:
            table.add_row(s.name, f"{s.size:,}", f"{s.acc_fp32:.4f}", f"{s.acc_bf16:.4f}", f"{s.changed:,}")
        console.print(table)
        verdict = "within bf16 rounding" if a.within_rounding else "NOT within bf16 rounding"
        console.print(f"step {step}: {a.changed:,} answers changed; largest fp32 margin among them {a.max_changed_margin:.3f} "
                      f"(bound {a.margin_bound:.3f} = 2·{precision.ROUNDINGS}·2^-8·max|logit| {a.max_logit:.1f}); "
                      f"max |logit change| {a.max_logit_change:.3f}; max accuracy change {a.max_acc_change:.4f} "
                      f"(tolerance {precision.ACC_TOLERANCE}): {verdict}", highlight=False)


PATH_GAIN_TO_KEEP = 1.3  # a second exact forward stays only for a measured gain of at least this


def _print_profile(bench, cfg: RunConfig, steps: int) -> None:
    """One fp32 engine step broken down, the evaluation's share of a run, and the distance to the matmul peak."""
    import torch

    p = bench.profile_step(cfg, steps)
    table = Table("part of one training step (engine, fp32)", "ms", "share")
    for name, ms in (("data (sampling a batch)", p.data_ms), ("forward", p.forward_ms), ("backward", p.backward_ms),
                     ("optimiser (AdamW)", p.optimizer_ms)):
        table.add_row(name, f"{ms:.2f}", f"{ms / p.step_ms:.0%}")
    table.add_row("step", f"{p.step_ms:.2f}", "100%")
    console.print(table)
    console.print(f"evaluation: {p.eval_s:.2f} s every {p.eval_every} steps = {p.eval_share:.0%} of a full run's time",
                  highlight=False)
    device = bench.resolve_device(cfg.train.device)
    peaks = {name: bench.matmul_peak_gflops(device, dtype) for name, dtype in
             (("fp32", torch.float32), ("bf16", torch.bfloat16))}
    console.print(f"engine: {p.matmul_flops / 1e6:.1f} MFLOP of matmuls per step (forward + backward) at "
                  f"{p.gflops:.1f} GFLOP/s over the whole step = {p.gflops / peaks['fp32']:.0%} of this machine's "
                  f"fp32 matmul peak ({peaks['fp32']:,.0f} GFLOP/s; bf16 {peaks['bf16']:,.0f})", highlight=False)


def _print_paths(bench, cfg: RunConfig, steps: int) -> None:
    """The engine's two exact forwards side by side, and whether the special one earns its place."""
    rows = bench.bench_paths(cfg, steps)
    table = Table("forward (fp32, paper shape)", "sequences/s", "ms/step")
    for b in rows:
        table.add_row(b.name, f"{b.seq_per_s:,.0f}", f"{b.ms_per_step:.1f}")
    console.print(table)
    by = {b.name: b.seq_per_s for b in rows}
    for suffix in ("", " + torch.compile"):
        rows_rate, general = by.get(f"two-layer rows{suffix} (fp32)"), by.get(f"general path{suffix} (fp32)")
        if rows_rate and general:
            gain = rows_rate / general
            verdict = "keeps its place" if gain >= PATH_GAIN_TO_KEEP else "does not earn its place"
            console.print(f"two-layer rows / general{suffix or ' (eager)'}: {gain:.2f}x; the rows path {verdict} "
                          f"(rule: >= {PATH_GAIN_TO_KEEP}x)", highlight=False)


def _print_targets(bench, cfg: RunConfig, steps: int) -> None:
    """The speed goals against this machine: measured engine ratio, projected training times."""
    import os

    import torch

    from assign_add.machine import auto_precision, cpu_flags

    (fast, base), = bench.bench_train(cfg, steps, ("fp32",))
    device = bench.resolve_device(cfg.train.device)
    chosen = auto_precision(True, device.type == "cuda", cpu_flags())
    _, (compiled,), _ = bench.bench_compile(cfg, steps, (chosen,))
    with bench.torch_threads(1):
        eval_s, size = bench.bench_eval(cfg, repeats=2, compiled=True)
        dtype = torch.bfloat16 if chosen == "bf16" else torch.float32
        peak = bench.matmul_peak_gflops(device, dtype, shape=(cfg.train.batch_size, cfg.model.d_model, cfg.model.d_mlp))
    flops = bench.step_matmul_flops(cfg)
    floor_ms = flops / (peak * 1e9) * 1e3
    cores = os.cpu_count() or 1
    console.print(f"one torch thread per run, compiled, {chosen} (train.precision=auto here): "
                  f"{compiled.ms_per_step:.1f} ms per step; its {flops / 1e6:.0f} MFLOP of matrix products at this "
                  f"thread's {chosen} matmul peak ({peak:.0f} GFLOP/s) would take {floor_ms:.1f} ms (the floor); "
                  f"evaluation of the live sets ({size:,} sequences, compiled, fp32) {eval_s:.2f} s every "
                  f"{cfg.train.eval_every} steps; {cores} cores", highlight=False)
    table = Table("speed goal", "target", "here", "reached", "needs", "at the floor")
    for t in bench.speed_targets(fast.seq_per_s / base.seq_per_s, compiled.ms_per_step, eval_s,
                                 cfg.train.eval_every, cores, floor_ms):
        unit = "x" if t.unit == "x" else " min"
        bound = ">=" if t.unit == "x" else "<="
        floor = "-" if t.at_floor is None else f"{t.at_floor:.1f}{unit}" + ("" if t.reachable else ": out of reach")
        table.add_row(t.name, f"{bound} {t.goal:g}{unit}", f"{t.value:.1f}{unit}", "yes" if t.reached else "no",
                      "-" if t.reached else f"{t.factor_short:.2f}x faster", floor)
    console.print(table)
    console.print("training times are projections from the measured step and evaluation, runs packed perfectly on "
                  "the cores (a lower bound: no compile warm-up, checkpoints, analyses or contention); 'at the floor': "
                  "the same with every step only its matrix products at the peak", highlight=False)


def _print_shape(bench, cfg: RunConfig, steps: int, batches: list[int]) -> None:
    """The fp32 engine step's time against the batch size: a fixed cost per step and a cost per sequence,
    eager and (where a C compiler exists) compiled, at the current torch threads."""
    import torch

    from assign_add.machine import has_c_compiler

    threads = torch.get_num_threads()
    for label, compiled in (("eager", False), ("compiled", True)):
        if compiled and not has_c_compiler():
            console.print("compiled: skipped (no C compiler for torch.compile)", highlight=False)
            continue
        shape = bench.fit_step_shape(bench.bench_batches(cfg, steps, batches, compiled=compiled))
        table = Table(f"batch ({label} engine, fp32)", "ms/step", "µs per sequence")
        for batch, ms in zip(shape.batches, shape.ms):
            table.add_row(f"{batch:,}", f"{ms:.2f}", f"{1e3 * ms / batch:.2f}")
        console.print(table)
        console.print(f"{label}: fixed cost per step {shape.fixed_ms:.2f} ms ({shape.fixed_share(512):.0%} of a "
                      f"step at batch 512), {shape.per_seq_us:.2f} µs per sequence, r² {shape.r2:.4f} "
                      f"(least squares over {len(shape.batches)} batch sizes, {threads} torch threads)", highlight=False)


def _print_stacked(bench, cfg: RunConfig, steps: int, ks: list[int]) -> None:
    """K seeds in one stacked step against the trainer's single-seed step, per seed and per core, with the
    1.3x rule for whether stacked training would be worth building into the toolkit."""
    import os

    from assign_add.machine import has_c_compiler

    compiled = has_c_compiler()
    threads = (1, 2) if (os.cpu_count() or 1) >= 2 else (1,)
    rows = bench.bench_stacked(cfg, steps, ks, threads, compiled=compiled)
    gains = bench.stacked_gains(rows)
    table = Table("fp32", "threads", "K", "ms/step", "ms/seed", "single ms", "single / per seed", "per core")
    for g in gains:
        r = g.stacked
        table.add_row(r.path, str(r.threads), str(r.k), f"{r.ms_per_step:.1f}", f"{r.per_seed_ms:.2f}",
                      f"{g.single_ms:.2f}", f"{g.same_threads:.2f}x", f"{g.per_core:.2f}x")
    console.print(table)
    console.print(f"batch {cfg.train.batch_size} per seed; 'single': the trainer's single-seed step at the same "
                  "threads; 'per core': the one-thread single-seed step against the stacked step's core-milliseconds per seed "
                  "(ms x threads / K), i.e. against K one-thread training processes packed on the same cores"
                  + ("" if compiled else "; compiled: skipped (no C compiler for torch.compile)"), highlight=False)
    path = "compiled" if compiled else "eager"
    head = [g for g in gains if g.stacked.path == path and g.stacked.threads == 1]
    reached = [g.stacked.k for g in head if g.per_core >= bench.STACK_GAIN_TO_KEEP]
    per_k = ", ".join(f"{g.per_core:.2f}x" + (" per seed" if i == 0 else "") + f" at K={g.stacked.k}"
                      for i, g in enumerate(head))
    verdict = f"reached at K={', '.join(map(str, reached))}" if reached else "not reached"
    console.print(f"stacked K seeds: {per_k} ({path}, one thread each way); rule: keep at >= "
                  f"{bench.STACK_GAIN_TO_KEEP}x: {verdict}", highlight=False)
