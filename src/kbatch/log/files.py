"""Kafka's file names for a partition directory (LogFileUtils, kafka-format.md §6.1) and the
directory's `.lock`: the one home of a segment's name rule (20-digit base offset + suffix).

The file I/O the log layer uses (pread, atomic writes, fsync) is kbatch._files; its names are
re-exported here so log modules reach files through one door.
"""
from __future__ import annotations

import errno as _errno
import fcntl
import os
import re
import struct
import sys
from types import TracebackType
from typing import TYPE_CHECKING

from .. import _files as _io
from .._files import (O_CLOEXEC, FileIdentity, atomic_write, fstat_identity, fsync_dir, mtime_ms, open_regular,
                      path_identity, pread_exact, pread_into, read_whole, truncate_back, write_all, write_error)
from ..errors import FileNameError, LogDirectoryLockedError, StorageError

if TYPE_CHECKING:
    from .._typing import PathLike

LOG_SUFFIX = ".log"
INDEX_SUFFIX = ".index"
TIME_INDEX_SUFFIX = ".timeindex"
TXN_INDEX_SUFFIX = ".txnindex"
INDEX_SUFFIXES = (INDEX_SUFFIX, TIME_INDEX_SUFFIX, TXN_INDEX_SUFFIX)
# transient suffixes a broker leaves behind; never segments
TRANSIENT_SUFFIXES = (".deleted", ".cleaned", ".swap")
LOCK_FILE = ".lock"   # Kafka's name (LogManager.LockFileName), here per partition directory too

#: a broker's segment file name: the 20-digit base offset, then a segment suffix (LogFileUtils); the
#: one rule for it (segment listing, recovery's clean-up, layouts, index rebuilds use it)
SEGMENT_FILE_RE = re.compile(r"^(\d{20})\.(log|index|timeindex|txnindex)$")  # (base offset, suffix without its dot)
_PARTITION_DIR_RE = re.compile(r"^(.+)-(\d+)$")
# atomic_write's temp files in a partition directory: "." + target name + "." + random + ".tmp",
# for segment files, kbatch's own files and the broker text files kbatch writes there
TEMP_RE = re.compile(r"^\.(\d{20}\.[a-z]+|\.kbatch-[a-z-]+|leader-epoch-checkpoint|partition\.metadata)"
                     r"\.[0-9a-z_]{6,}\.tmp$")


def crash_point(name: str) -> None:
    """kbatch._files.crash_point, looked up at each call (the fault-injection suite replaces that one)."""
    _io.crash_point(name)


def filename_prefix(offset: int) -> str:
    """The 20-digit zero-padded base offset (LogFileUtils.filenamePrefixFromOffset)."""
    if offset < 0:
        raise ValueError(f"segment base offset must be >= 0, not {offset}")
    return f"{offset:020d}"


def segment_path(directory: PathLike, base_offset: int, suffix: str) -> str:
    return os.path.join(os.fspath(directory), filename_prefix(base_offset) + suffix)


def parse_segment_file_name(name: str) -> tuple[int, str] | None:
    """(base offset, suffix) of a broker's segment or index file name (`00000000000000000042.log`),
    None for any other name."""
    m = SEGMENT_FILE_RE.match(name)
    return None if m is None else (int(m.group(1)), "." + m.group(2))


def offset_from_file_name(name: PathLike) -> int:
    """The offset a segment, index or snapshot file is named after (LogFileUtils.offsetFromFileName):
    the digits before the first '.', or, in a tiered copy's `<offset>-<segment id>.log`, before the
    first '-'. FileNameError when the name starts with none."""
    base = os.path.basename(os.fspath(name))
    stem = base.split(".", 1)[0].split("-", 1)[0]
    if not stem.isdigit():
        raise FileNameError(f"{name}: the file name does not start with a segment base offset (20 digits)")
    return int(stem)


def list_segment_bases(directory: PathLike) -> list[int]:
    """Base offsets of the `<20 digits>.log` names in a directory, ascending. Everything else
    (checkpoints, partition.metadata, .snapshot, .deleted/.cleaned/.swap) is ignored. Whether a
    name is a regular file is checked when it is opened (open_regular)."""
    bases = []
    for name in os.listdir(directory):
        parsed = parse_segment_file_name(name)
        if parsed is not None and parsed[1] == LOG_SUFFIX:
            bases.append(parsed[0])
    return sorted(bases)


def parse_partition_dir(name: str) -> tuple[str, int] | None:
    """`orders-3` -> ("orders", 3); None for names that are not partition directories
    (including Kafka's `-delete`, `-future` and `-stray` directories)."""
    m = _PARTITION_DIR_RE.match(os.path.basename(os.fspath(name).rstrip(os.sep)))
    if not m:
        return None
    return m.group(1), int(m.group(2))

# ------------------------------------------------------------------------------------ the directory lock
# Kafka locks <log.dir>/.lock with FileChannel.tryLock: on Linux an fcntl (POSIX) record lock.
# POSIX locks do not conflict within one process and are dropped when the process closes ANY fd
# of the file, so kbatch uses Linux open-file-description locks: they conflict with other
# processes' POSIX locks (a broker) and with a second open in the same process. Elsewhere it falls
# back to POSIX locks plus a registry of the files this process holds.
_OFD = (sys.platform.startswith("linux") and hasattr(fcntl, "F_OFD_SETLK") and struct.calcsize("P") == 8)
_FLOCK = struct.Struct("hhqqi4x")   # struct flock on 64-bit Linux: type, whence, start, len, pid
_HELD: dict[FileIdentity, str] = {}  # (st_dev, st_ino) of .lock files this process holds -> their directory


def _lock_holder(lock_path: str) -> int | None:
    """Whether another process (or this one, for OFD) holds a lock on `lock_path`: the holder's
    pid (-1 when unknown), or None when it is free or missing."""
    try:
        fd = os.open(lock_path, os.O_RDONLY | O_CLOEXEC)
    except OSError:
        return None
    try:
        cmd = fcntl.F_OFD_GETLK if _OFD else fcntl.F_GETLK
        res = fcntl.fcntl(fd, cmd, _FLOCK.pack(fcntl.F_WRLCK, os.SEEK_SET, 0, 0, 0))
        ltype, _w, _s, _l, pid = _FLOCK.unpack(res)
        return None if ltype == fcntl.F_UNLCK else int(pid)
    except OSError:
        return None
    finally:
        os.close(fd)


def _recorded_holder(lock_path: str) -> int | None:
    """The pid a kbatch writer wrote into the `.lock` it holds (None when there is none)."""
    try:
        with open(lock_path, "rb") as f:
            text = f.read(32).strip()
        return int(text) if text.isdigit() else None
    except OSError:
        return None


class DirLock:
    """An exclusive lock on `<directory>/.lock`, as a broker holds its log directory's: every kbatch
    writer holds it for as long as it writes. `acquire` refuses (LogDirectoryLockedError) when
    another writer holds it, in this process or another, and when the parent directory's `.lock`
    is held by another process (a running Kafka broker owns that log directory)."""

    def __init__(self, directory: str, fd: int, key: FileIdentity) -> None:
        self.directory = directory
        self.path = os.path.join(directory, LOCK_FILE)
        self._fd: int | None = fd
        self._key = key

    @staticmethod
    def check_parent(directory: PathLike, purpose: str = "write") -> None:
        """Refuse (LogDirectoryLockedError) a partition directory, existing or to be made, whose log
        directory's `.lock` another process holds (a running Kafka broker owns it)."""
        directory = os.path.abspath(os.fspath(directory))
        parent_lock = os.path.join(os.path.dirname(directory), LOCK_FILE)
        # a log directory this process locked itself (a server that owns it, like a broker) is fine
        holder = None if path_identity(parent_lock) in _HELD else _lock_holder(parent_lock)
        if holder is not None and holder != os.getpid():
            who = f"process {holder}" if holder > 0 else "another process"
            raise LogDirectoryLockedError(
                f"cannot {purpose}: the log directory above it is locked ({parent_lock} held by {who}, most likely a "
                f"running Kafka broker); stop the broker or work on a copy", path=directory, errno=_errno.EAGAIN)

    @classmethod
    def acquire(cls, directory: PathLike, purpose: str = "write") -> "DirLock":
        directory = os.path.abspath(os.fspath(directory))
        cls.check_parent(directory, purpose)
        path = os.path.join(directory, LOCK_FILE)
        try:
            fd = os.open(path, os.O_RDWR | os.O_CREAT | O_CLOEXEC, 0o644)
        except OSError as e:
            raise StorageError(f"cannot create the lock file {LOCK_FILE} ({e.strerror})", path=directory,
                               errno=e.errno) from None
        key = fstat_identity(fd)
        try:
            if not _OFD and key in _HELD:
                raise BlockingIOError(_errno.EAGAIN, "held by this process")
            if _OFD:
                fcntl.fcntl(fd, fcntl.F_OFD_SETLK, _FLOCK.pack(fcntl.F_WRLCK, os.SEEK_SET, 0, 0, 0))
            else:
                fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as e:
            os.close(fd)
            if e.errno not in (_errno.EAGAIN, _errno.EACCES):
                raise StorageError(f"cannot lock {LOCK_FILE} ({e.strerror})", path=directory,
                                   errno=e.errno) from None
            pid = _lock_holder(path)  # a traditional lock (a JVM's) tells its holder; a kbatch writer's OFD lock
            if pid is None or pid <= 0:  # does not, and that writer wrote its pid into the file
                pid = _recorded_holder(path)
            who = (f"this process, pid {pid}" if pid == os.getpid() else f"pid {pid}") if pid else "pid unknown"
            raise LogDirectoryLockedError(
                f"cannot {purpose}: another writer holds {path} ({who}: a kbatch Log opened for writing, compact, "
                f"rebuild_indexes, import or serve --writable)", path=directory, errno=_errno.EAGAIN) from None
        _HELD[key] = directory
        try:  # who holds it, for the refusals (an OFD lock does not tell its holder's pid)
            os.ftruncate(fd, 0)
            os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        except OSError:
            pass
        return cls(directory, fd, key)

    @property
    def held(self) -> bool:
        return self._fd is not None

    def release(self) -> None:
        if self._fd is not None:
            _HELD.pop(self._key, None)
            os.close(self._fd)   # closing the description drops the lock
            self._fd = None

    def __enter__(self) -> DirLock:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.release()

    def __del__(self) -> None:
        self.release()


__all__ = ["O_CLOEXEC", "FileIdentity", "atomic_write", "fstat_identity", "fsync_dir", "mtime_ms", "open_regular",
           "path_identity", "pread_exact", "pread_into", "read_whole", "truncate_back", "write_all", "write_error",
           "LOG_SUFFIX", "INDEX_SUFFIX", "TIME_INDEX_SUFFIX", "TXN_INDEX_SUFFIX", "INDEX_SUFFIXES",
           "TRANSIENT_SUFFIXES", "LOCK_FILE", "TEMP_RE", "crash_point", "filename_prefix", "segment_path",
           "list_segment_bases", "offset_from_file_name", "parse_segment_file_name", "SEGMENT_FILE_RE", "parse_partition_dir", "DirLock"]
