"""What trained a run: the toolkit's commit, the CPU, torch and the thread count, one record per
training segment (a new run, and each resume) in ``RUN/provenance.jsonl``.

Two runs of the same seed and configuration can differ by float rounding when the code or the machine
differs; this record says which code and machine produced which steps.
"""

from __future__ import annotations

import platform
import subprocess
import time
from pathlib import Path

import torch

from assign_add.machine import BF16_CPU_FLAGS, cpu_flags, cpu_name

PACKAGE_DIR = Path(__file__).resolve().parent


def git_commit(where: Path = PACKAGE_DIR) -> str | None:
    """The commit of the checkout the toolkit runs from (``+dirty`` with uncommitted changes to tracked
    files); None for an installed copy outside a git checkout."""
    try:
        head = subprocess.run(["git", "-C", str(where), "rev-parse", "HEAD"], capture_output=True, text=True,
                              timeout=10)
        if head.returncode != 0:
            return None
        dirty = subprocess.run(["git", "-C", str(where), "status", "--porcelain", "--untracked-files=no"],
                               capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return head.stdout.strip() + ("+dirty" if dirty.stdout.strip() else "")


def machine_record(start_step: int, device: str) -> dict:
    """One training segment's provenance."""
    return {
        "start_step": start_step,
        "time": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "commit": git_commit(),
        "cpu": cpu_name(),
        "bf16_instructions": bool(cpu_flags() & BF16_CPU_FLAGS),
        "device": device,
        "torch": torch.__version__,
        "threads": torch.get_num_threads(),
        "python": platform.python_version(),
    }
