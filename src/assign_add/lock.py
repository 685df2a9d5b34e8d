"""One writer per run directory: an exclusive ``fcntl.flock`` on ``RUN/.lock``.

The lock is held for the life of the writer (training, resuming, importing, analysing, caching
evaluations) and released by the kernel when the process ends, even on SIGKILL, so a crashed
writer never leaves a stale lock.  The file holds the holder's pid and command, which a second
writer names in its one-line refusal.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import sys
from collections.abc import Iterator
from pathlib import Path

LOCK_NAME = ".lock"


class LockedError(RuntimeError):
    """Another process holds the run directory's lock (message is one line)."""


def _holder(fd: int) -> str:
    try:
        os.lseek(fd, 0, os.SEEK_SET)
        text = os.read(fd, 200).decode("utf-8", "replace").strip()
    except OSError:
        text = ""
    return text or "another process"


class RunLock:
    """Hold ``root/.lock`` exclusively from construction until :meth:`release` (or process exit).

    Raises :class:`LockedError` naming the holder when another process has it.
    """

    def __init__(self, root: Path, what: str = "") -> None:
        self.root = Path(root)
        self.fd: int | None = os.open(self.root / LOCK_NAME, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(self.fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as exc:
            holder = _holder(self.fd)
            os.close(self.fd)
            self.fd = None
            if exc.errno not in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
                raise
            raise LockedError(f"{root} is in use by {holder}; wait for it to finish or stop it") from None
        label = what or " ".join(Path(a).name if i == 0 else a for i, a in enumerate(sys.argv[:2]))
        os.ftruncate(self.fd, 0)
        os.write(self.fd, f"pid {os.getpid()} ({label})".encode())

    def release(self) -> None:
        if self.fd is None:
            return
        with contextlib.suppress(OSError):
            os.ftruncate(self.fd, 0)
            fcntl.flock(self.fd, fcntl.LOCK_UN)
        os.close(self.fd)
        self.fd = None

    def __enter__(self) -> "RunLock":
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()


@contextlib.contextmanager
def run_lock(root: Path, what: str = "") -> Iterator[RunLock]:
    """``with run_lock(run.root): ...`` holds the run's lock for the block."""
    lock = RunLock(root, what)
    try:
        yield lock
    finally:
        lock.release()


def is_locked(root: Path) -> bool:
    """Whether some process holds ``root``'s lock now (a test and a status helper)."""
    path = Path(root) / LOCK_NAME
    if not path.is_file():
        return False
    fd = os.open(path, os.O_RDONLY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        return True
    else:
        fcntl.flock(fd, fcntl.LOCK_UN)
        return False
    finally:
        os.close(fd)
