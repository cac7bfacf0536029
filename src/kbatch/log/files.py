"""File helpers for storage: Kafka's 20-digit segment names, safe opening and reading, writes that
either complete or leave the file as it was, atomic replacement, and the directory `.lock`.

Naming follows LogFileUtils (kafka-format.md §6.1). Reads use pread into private buffers, never
mmap: a file truncated by another process then gives a short read (a kbatch error), where a
mapped page would kill the reader with SIGBUS. Atomic writes go to a temp file in the same
directory, are fsynced, then os.replace'd over the target (keeping its mode), so a reader sees the
old file or the new one, never a half-written one.
"""
from __future__ import annotations

import errno as _errno
import fcntl
import os
import re
import secrets
import stat
import struct
import sys
from types import TracebackType
from typing import TYPE_CHECKING

from .errors import FileChangedError, LogDirectoryLockedError, LogWriteError, StorageError

if TYPE_CHECKING:
    from ._typing import Buffer, PathLike

#: what identifies a file (st_dev, st_ino)
FileIdentity = tuple[int, int]

LOG_SUFFIX = ".log"
INDEX_SUFFIX = ".index"
TIME_INDEX_SUFFIX = ".timeindex"
TXN_INDEX_SUFFIX = ".txnindex"
INDEX_SUFFIXES = (INDEX_SUFFIX, TIME_INDEX_SUFFIX, TXN_INDEX_SUFFIX)
# transient suffixes a broker leaves behind; never segments
TRANSIENT_SUFFIXES = (".deleted", ".cleaned", ".swap")
LOCK_FILE = ".lock"   # Kafka's name (LogManager.LockFileName), here per partition directory too

_SEGMENT_RE = re.compile(r"^(\d{20})\.log$")
_PARTITION_DIR_RE = re.compile(r"^(.+)-(\d+)$")
# atomic_write's temp files in a partition directory: "." + target name + "." + random + ".tmp",
# for segment files, kbatch's own files and the broker text files kbatch writes there
TEMP_RE = re.compile(r"^\.(\d{20}\.[a-z]+|\.kbatch-[a-z-]+|leader-epoch-checkpoint|partition\.metadata)"
                     r"\.[0-9a-z_]{6,}\.tmp$")
O_CLOEXEC = getattr(os, "O_CLOEXEC", 0)


def crash_point(name: str) -> None:
    """Called at each durable step of a write (renames, truncations, creations). A no-op; the
    fault-injection suite (tests/faults) replaces it to kill the process exactly there."""


def filename_prefix(offset: int) -> str:
    """The 20-digit zero-padded base offset (LogFileUtils.filenamePrefixFromOffset)."""
    if offset < 0:
        raise ValueError(f"segment base offset must be >= 0, not {offset}")
    return f"{offset:020d}"


def segment_path(directory: PathLike, base_offset: int, suffix: str) -> str:
    return os.path.join(os.fspath(directory), filename_prefix(base_offset) + suffix)


def list_segment_bases(directory: PathLike) -> list[int]:
    """Base offsets of the `<20 digits>.log` names in a directory, ascending. Everything else
    (checkpoints, partition.metadata, .snapshot, .deleted/.cleaned/.swap) is ignored. Whether a
    name is a regular file is checked when it is opened (open_regular)."""
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


# ------------------------------------------------------------------------------------ opening and reading
def _kind(mode: int) -> str:
    for test, name in ((stat.S_ISDIR, "a directory"), (stat.S_ISFIFO, "a FIFO"), (stat.S_ISSOCK, "a socket"),
                       (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device")):
        if test(mode):
            return name
    return "not a regular file"


def open_regular(path: PathLike, *, writable: bool = False) -> int:
    """An fd for the regular file at `path` (symlinks followed). O_NONBLOCK keeps a FIFO named
    like a segment from hanging the open; anything but a regular file raises StorageError, and so
    does a dangling symlink. A missing file raises FileNotFoundError (the caller knows whether
    that is a race with retention or a usage error)."""
    path = os.fspath(path)
    flags = (os.O_RDWR if writable else os.O_RDONLY) | os.O_NONBLOCK | O_CLOEXEC
    try:
        fd = os.open(path, flags)
    except FileNotFoundError as e:
        if os.path.islink(path):
            raise StorageError("a dangling symbolic link, not a segment file", path=path, errno=e.errno) from None
        raise
    except IsADirectoryError as e:
        raise StorageError("is a directory, not a file", path=path, errno=e.errno) from None
    try:
        mode = os.fstat(fd).st_mode
    except OSError:
        os.close(fd)
        raise
    if not stat.S_ISREG(mode):
        os.close(fd)
        raise StorageError(f"is {_kind(mode)}, not a regular file", path=path)
    return fd


def pread_exact(fd: int, size: int, offset: int, path: PathLike | None = None) -> bytes:
    """`size` bytes at `offset`; a file that ends sooner shrank under the reader: FileChangedError."""
    data = os.pread(fd, size, offset)
    if len(data) == size:
        return data
    parts, got = [data], len(data)
    while got < size:
        more = os.pread(fd, size - got, offset + got)
        if not more:
            raise FileChangedError(f"the file ends at byte {offset + got}, but {size} bytes were expected at byte "
                                   f"{offset}: it was truncated while being read", path=path, position=offset + got)
        parts.append(more)
        got += len(more)
    return b"".join(parts)


def pread_into(fd: int, buf: Buffer, offset: int, path: PathLike | None = None) -> None:
    """Fill the writable buffer `buf` from `offset` (FileChangedError when the file is shorter)."""
    mv = memoryview(buf)
    got = 0
    while got < len(mv):
        n = os.preadv(fd, [mv[got:]], offset + got)
        if n == 0:
            raise FileChangedError(f"the file ends at byte {offset + got}, but {len(mv)} bytes were expected at "
                                   f"byte {offset}: it was truncated while being read", path=path,
                                   position=offset + got)
        got += n


def read_whole(path: PathLike) -> bytes:
    """A small file's bytes (indexes, checkpoints), through open_regular."""
    fd = open_regular(path)
    try:
        size = os.fstat(fd).st_size
        return pread_exact(fd, size, 0, path) if size else b""
    finally:
        os.close(fd)


def fstat_identity(fd: int) -> FileIdentity:
    st = os.fstat(fd)
    return st.st_dev, st.st_ino


def path_identity(path: PathLike) -> FileIdentity | None:
    try:
        st = os.stat(path)
    except OSError:
        return None
    return st.st_dev, st.st_ino


# ------------------------------------------------------------------------------------ writing
def write_all(fd: int, data: Buffer, offset: int) -> None:
    """pwrite every byte of `data` at `offset`, or raise OSError. A short write (disk full, the
    RLIMIT_FSIZE limit) is continued, and the retry reports the error (ENOSPC, EFBIG)."""
    mv = memoryview(data).cast("B") if not isinstance(data, (bytes, bytearray)) else memoryview(data)
    done = 0
    while done < len(mv):
        n = os.pwrite(fd, mv[done:], offset + done)
        if n <= 0:
            raise OSError(_errno.EIO, f"write made no progress at byte {offset + done}")
        done += n


def truncate_back(fd: int, size: int, path: PathLike | None = None) -> None:
    """Cut a file back to `size` after a failed write and make that durable."""
    crash_point(f"truncate:{os.path.basename(os.fspath(path)) if path else fd}")
    os.ftruncate(fd, size)
    os.fsync(fd)


def write_error(e: OSError, path: PathLike | None, what: str) -> LogWriteError:
    return LogWriteError(f"{what} failed ({os.strerror(e.errno) if e.errno else e}); the file is as it was before",
                         path=path, errno=e.errno)


def fsync_dir(directory: PathLike) -> None:
    """Make a rename or create in `directory` durable (no-op where directories cannot be opened)."""
    try:
        fd = os.open(os.fspath(directory), os.O_RDONLY | O_CLOEXEC)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def atomic_write(path: PathLike, data: Buffer) -> None:
    """Write `data` to `path` atomically: temp file beside it (the target's mode kept, or the
    umask's default for a new file), fsync, os.replace, fsync the dir. On failure (disk full...)
    the temp file goes, the target is untouched, and LogWriteError is raised."""
    path = os.fspath(path)
    directory = os.path.dirname(path) or "."
    tmp = os.path.join(directory, f".{os.path.basename(path)}.{secrets.token_hex(6)}.tmp")
    try:
        mode = stat.S_IMODE(os.stat(path).st_mode)
    except FileNotFoundError:
        mode = None
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | O_CLOEXEC, 0o666)
    try:
        try:
            if mode is not None:
                os.fchmod(fd, mode)
            write_all(fd, data, 0)
            os.fsync(fd)
        finally:
            os.close(fd)
        crash_point(f"replace:{os.path.basename(path)}")
        os.replace(tmp, path)
    except BaseException as e:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        if isinstance(e, OSError) and not isinstance(e, StorageError):
            raise write_error(e, path, "writing the new file") from e
        raise
    fsync_dir(directory)


def mtime_ms(path: PathLike) -> int:
    """A file's last-modified time in ms (Kafka's File.lastModified)."""
    return os.stat(path).st_mtime_ns // 1_000_000


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
            raise LogDirectoryLockedError(
                f"cannot {purpose}: another writer holds {path} (a kbatch Log opened for writing, compact or "
                f"rebuild_indexes, in this process or another)", path=directory, errno=_errno.EAGAIN) from None
        _HELD[key] = directory
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
