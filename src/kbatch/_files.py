"""File helpers for storage: Kafka's 20-digit segment names and atomic writes.

Naming follows LogFileUtils (kafka-format.md §6.1). Atomic writes go to a temp file in the same
directory, are fsynced, then os.replace'd over the target, so a reader sees the old file or the
new one, never a half-written one.
"""
from __future__ import annotations

import os
import re
import tempfile

LOG_SUFFIX = ".log"
INDEX_SUFFIX = ".index"
TIME_INDEX_SUFFIX = ".timeindex"
TXN_INDEX_SUFFIX = ".txnindex"
# transient suffixes a broker leaves behind; never segments
TRANSIENT_SUFFIXES = (".deleted", ".cleaned", ".swap")

_SEGMENT_RE = re.compile(r"^(\d{20})\.log$")
_PARTITION_DIR_RE = re.compile(r"^(.+)-(\d+)$")


def filename_prefix(offset: int) -> str:
    """The 20-digit zero-padded base offset (LogFileUtils.filenamePrefixFromOffset)."""
    if offset < 0:
        raise ValueError(f"segment base offset must be >= 0, not {offset}")
    return f"{offset:020d}"


def segment_path(directory, base_offset: int, suffix: str) -> str:
    return os.path.join(os.fspath(directory), filename_prefix(base_offset) + suffix)


def list_segment_bases(directory) -> list[int]:
    """Base offsets of the `<20 digits>.log` files in a directory, ascending. Everything else
    (checkpoints, partition.metadata, .snapshot, .deleted/.cleaned/.swap) is ignored."""
    bases = []
    for name in os.listdir(directory):
        m = _SEGMENT_RE.match(name)
        if m:
            bases.append(int(m.group(1)))
    return sorted(bases)


def parse_partition_dir(name: str) -> tuple[str, int] | None:
    """`orders-3` -> ("orders", 3); None for names that are not partition directories
    (including Kafka's `-delete`, `-future` and `-stray` directories)."""
    m = _PARTITION_DIR_RE.match(os.path.basename(os.fspath(name).rstrip(os.sep)))
    if not m:
        return None
    return m.group(1), int(m.group(2))


def fsync_dir(directory) -> None:
    """Make a rename or create in `directory` durable (no-op where directories cannot be opened)."""
    try:
        fd = os.open(os.fspath(directory), os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def atomic_write(path, data) -> None:
    """Write `data` to `path` atomically: temp file beside it, fsync, os.replace, fsync the dir."""
    path = os.fspath(path)
    directory = os.path.dirname(path) or "."
    fd, tmp = tempfile.mkstemp(prefix="." + os.path.basename(path) + ".", suffix=".tmp", dir=directory)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
    fsync_dir(directory)


def mtime_ms(path) -> int:
    """A file's last-modified time in ms (Kafka's File.lastModified)."""
    return os.stat(path).st_mtime_ns // 1_000_000
