"""Atomic file writes: a reader never sees a half-written file, even after SIGKILL."""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import Any, Callable


def atomic_write(path: Path, write: Callable[[Path], None]) -> None:
    """Call ``write(tmp_path)`` on a temporary file beside ``path``, then rename it into place."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    os.close(fd)
    try:
        write(Path(tmp))
        os.chmod(tmp, 0o666 & ~_umask())
        with open(tmp, "rb") as fh:
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def atomic_write_text(path: Path, text: str) -> None:
    atomic_write(path, lambda tmp: tmp.write_text(text))


def atomic_write_json(path: Path, data: Any) -> None:
    atomic_write_text(path, json.dumps(data, indent=2, sort_keys=False) + "\n")


class DataFileError(ValueError):
    """A data file of a run is unreadable or corrupt (message is one line, naming file and line)."""


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    """Read an append-only JSON-lines file.

    Exactly one torn *last* line (a writer killed mid-write) is tolerated and ignored; an invalid
    line anywhere else raises :class:`DataFileError` naming the file and the line, so no caller
    silently works on (or rewrites the file down to) the records before it.
    """
    path = Path(path)
    if not path.is_file():
        return []
    lines = _read_text(path).split("\n")
    last = max((i for i, ln in enumerate(lines) if ln.strip()), default=-1)
    records = []
    for i, line in enumerate(lines):
        if not line.strip():
            continue
        try:
            rec = json.loads(line)
        except json.JSONDecodeError:
            if i == last:
                break  # the torn last line
            raise DataFileError(f"{path} line {i + 1}: not valid JSON; the file is corrupt "
                                "(repair or remove that line)") from None
        if not isinstance(rec, dict):
            raise DataFileError(f"{path} line {i + 1}: expected a JSON object")
        records.append(rec)
    return records


def read_json_object(path: Path, what: str = "a JSON object") -> dict[str, Any]:
    """A JSON file holding one object; a missing, non-UTF-8, invalid or wrongly shaped file raises
    :class:`DataFileError` naming the file (``what`` says what the file should be)."""
    path = Path(path)
    if path.is_dir():
        raise DataFileError(f"{path}: a directory, expected a file ({what})")
    if not path.is_file():
        raise DataFileError(f"{path}: no such file ({what})")
    try:
        data = json.loads(_read_text(path))
    except json.JSONDecodeError as exc:
        raise DataFileError(f"{path}: not valid JSON (line {exc.lineno}); expected {what}") from None
    if not isinstance(data, dict):
        raise DataFileError(f"{path}: holds a JSON {type(data).__name__}, expected {what}")
    return data


def _read_text(path: Path) -> str:
    try:
        return Path(path).read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise DataFileError(f"{path}: not UTF-8 text (byte {exc.start})") from None


def append_line(path: Path, line: str) -> None:
    """Append one line; a torn last line left by a killed writer is cut off first.

    Only ``metrics.jsonl``, ``evals.jsonl`` and ``train.log`` are written this way (append-only);
    every other file is replaced atomically.
    """
    path = Path(path)
    with open(path, "ab+") as fh:
        size = fh.seek(0, os.SEEK_END)
        if size:
            fh.seek(max(0, size - 1))
            if fh.read(1) != b"\n":
                fh.seek(0)
                data = fh.read()
                fh.truncate(data.rfind(b"\n") + 1)
        fh.write((line.rstrip("\n") + "\n").encode("utf-8"))


def append_jsonl(path: Path, record: dict[str, Any]) -> None:
    append_line(path, json.dumps(record))


def clean_orphans(root: Path) -> list[Path]:
    """Remove ``.NAME.XXXX.tmp`` files left under ``root`` by writers killed mid-write.

    Call only while holding the run's lock (no other writer can be mid-write then).
    """
    removed = []
    for tmp in Path(root).rglob(".*.tmp"):
        if tmp.is_file():
            tmp.unlink(missing_ok=True)
            removed.append(tmp)
    return removed
