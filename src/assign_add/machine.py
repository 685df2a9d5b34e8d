"""What this machine is and can do: CPU flags, model name and cores, a C compiler for ``torch.compile``, and
the precision ``train.precision=auto`` settles to here.  Probes only: nothing here changes the machine."""

from __future__ import annotations

import os
import platform
import shutil
from pathlib import Path

# x86 instructions that make bf16 matmuls fast (AVX512-BF16, AMX); without them bf16 is emulated
BF16_CPU_FLAGS = frozenset({"avx512_bf16", "amx_bf16"})


def auto_precision(compiled: bool, on_cuda: bool, cpu_flags: frozenset[str]) -> str:
    """What ``train.precision=auto`` means: bf16 autocast on CUDA (the authors' precision) and, compiled, on a
    CPU with bf16 instructions; fp32 elsewhere.  Basis (``assign-add bench --what compile``, one thread,
    this project's 2-core machine with AMX): a compiled bf16 step is 1.33x a compiled fp32 one, while eager
    bf16 is 0.87-0.95x eager fp32 (autocast's casts cost more than the matmuls save without fusion)."""
    if on_cuda:
        return "bf16"
    return "bf16" if compiled and bool(cpu_flags & BF16_CPU_FLAGS) else "fp32"


def cpu_flags() -> frozenset[str]:
    """The CPU's feature flags from /proc/cpuinfo (empty where there is none: not Linux)."""
    try:
        text = Path("/proc/cpuinfo").read_text(encoding="utf-8", errors="replace")
    except OSError:
        return frozenset()
    for line in text.splitlines():
        if line.startswith("flags"):
            return frozenset(line.split(":", 1)[1].split())
    return frozenset()


def has_c_compiler() -> bool:
    """torch.compile on a CPU needs a C compiler."""
    return shutil.which("cc") is not None or shutil.which("gcc") is not None


def cpu_name() -> str:
    """The CPU's model name from /proc/cpuinfo, else what the platform module says."""
    try:
        for line in Path("/proc/cpuinfo").read_text(encoding="utf-8", errors="replace").splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def cpu_cores() -> int:
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
