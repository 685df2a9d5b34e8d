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
                             help="comma-separated: data, train, eval, compile, explore (needs --run)"),
    steps: int = typer.Option(50, "--steps", help="timed training steps per implementation"),
    run_dir: Optional[Path] = typer.Option(None, "--run", help="run directory for --what explore"),
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
    unknown = parts - {"data", "train", "eval", "compile", "explore"}
    if unknown:
        raise ConfigError("--what", f"unknown benchmark {', '.join(sorted(unknown))}")
    if "explore" in parts and run_dir is None:
        raise ConfigError("--run", "--what explore needs --run RUN (a run directory to serve)")
    console.print(f"torch {torch.__version__}, {torch.get_num_threads()} threads, batch {cfg.train.batch_size}", highlight=False)
    if "data" in parts:
        rate = bench.bench_data(cfg)
        console.print(f"data sampling: {rate:,.0f} sequences/s", highlight=False)
    step_ms = None
    if "train" in parts:
        step_ms = _print_train_bench(bench, cfg, steps)
    if "compile" in parts:
        eager, compiled, warmup = bench.bench_compile(cfg, steps)
        console.print(f"engine: {eager.seq_per_s:,.0f} sequences/s; with torch.compile (train.compile=true): "
                      f"{compiled.seq_per_s:,.0f} sequences/s, {compiled.seq_per_s / eager.seq_per_s:.2f}x "
                      f"after {warmup:.0f} s compiling", highlight=False)
    if "explore" in parts:
        from assign_add.explore.load import measure_rate
        from assign_add.run import open_run

        for r in measure_rate(open_run(run_dir)):
            console.print(f"explorer, {r.clients} clients, {r.where}: {r.per_second:.1f} requests/s "
                          f"({r.requests} answered, {r.failed} failed in {r.seconds:.1f} s); "
                          f"memory held {r.rss_mib:.0f} MiB (peak {r.peak_rss_mib:.0f})", highlight=False)
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


