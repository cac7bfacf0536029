"""Safe file I/O for every layer: opening only regular files, reading with pread into private
buffers (never mmap), writes that either complete or leave the file as it was, atomic
replacement, and the crash points the fault-injection suite stops a process at.

Reads use pread, never mmap: a file truncated by another process then gives a short read (a kbatch
error), where a mapped page would kill the reader with SIGBUS. Atomic writes go to a temp file in
the same directory, are fsynced, then os.replace'd over the target (keeping its mode), so a reader
sees the old file or the new one, never a half-written one. Kafka's file names and the directory
lock are the log layer's (kbatch.log.files).
"""
from __future__ import annotations

import errno as _errno
import os
import secrets
import stat
from typing import TYPE_CHECKING

from .errors import FileChangedError, LogWriteError, StorageError

if TYPE_CHECKING:
    from ._typing import Buffer, PathLike

#: what identifies a file (st_dev, st_ino)
FileIdentity = tuple[int, int]

O_CLOEXEC = getattr(os, "O_CLOEXEC", 0)


def crash_point(name: str) -> None:
    """Called at each durable step of a write (renames, truncations, creations). A no-op; the
    fault-injection suite (tests/support/faults) replaces it to kill the process exactly there."""


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
