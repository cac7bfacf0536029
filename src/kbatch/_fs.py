"""Where Kafka data lives: local paths and object-storage URIs behind one small interface.

A path is a local path or a URI. `s3://`, `gs://` (`gcs://`), `hdfs://` and `viewfs://` go
through pyarrow.fs; any other scheme (`az://`, `abfs://`, `memory://`, ...) through fsspec when it
is installed, wrapped as a pyarrow filesystem, so one code path reads them all. Credentials come
from where those libraries look (AWS: environment, ~/.aws profiles, instance roles; GCS:
application default credentials; HDFS: the Kerberos ticket cache), never from kbatch: a URI
carrying `user:secret@` is refused. `AWS_ENDPOINT_URL` (or `?endpoint_override=` in the URI)
points S3 at another server.

Local paths keep the storage layer's own reads (_files: open_regular, pread); every function here
that takes a path works for both, and this module is the only place that asks which one it is.

Remote objects are read by ranges (RemoteFile): each read is one ranged GET, except that a read
smaller than MIN_REQUEST asks for MIN_REQUEST bytes and keeps them, so reading a batch header and
then the first scan window from the same place costs one request. `io_stats()` counts requests
and bytes asked for, process-wide: tests hold lookups to it.
"""
from __future__ import annotations

import functools
import os
import posixpath
import stat as _stat
import threading
from collections.abc import Callable
from typing import IO, TYPE_CHECKING, NamedTuple, TypeGuard
from urllib.parse import urlsplit

from . import _files
from .errors import FileChangedError, StorageError, UnsupportedLayoutError

if TYPE_CHECKING:
    from pyarrow import fs as pafs  # no type information: Any to a type checker

    from ._typing import PathLike

MIN_REQUEST = 32 * 1024      # smallest ranged read asked of a remote store (headers + a first window)
_KEEP_BYTES = 1024 * 1024    # reads up to this size are kept for the next reads of the same bytes
_KEEP_BLOCKS = 4
_PYARROW_SCHEMES = ("s3", "gs", "gcs", "hdfs", "viewfs")
_BUCKET_SCHEMES = ("s3", "gs", "gcs")   # pyarrow paths start with the bucket (the URI's netloc)

_stats_lock = threading.Lock()
_STATS = {"requests": 0, "bytes": 0, "metadata_requests": 0}


def io_stats() -> dict[str, int]:
    """Remote requests made by this process so far: ranged reads ("requests") and the bytes they
    asked for ("bytes"), and listings and file-info requests ("metadata_requests")."""
    with _stats_lock:
        return dict(_STATS)


def _count(nbytes: int) -> None:
    with _stats_lock:
        _STATS["requests"] += 1
        _STATS["bytes"] += nbytes


def _count_metadata() -> None:
    with _stats_lock:
        _STATS["metadata_requests"] += 1


# ------------------------------------------------------------------------------------ paths
def is_remote(path: object) -> TypeGuard[str]:
    """Whether `path` is a URI with a scheme other than file:// (a Windows drive letter is local)."""
    if not isinstance(path, str):
        return False
    i = path.find("://")
    return i > 1 and path[:i].isalnum() and path[:i].lower() != "file"


def local_path(path: PathLike) -> str:
    """A local path as a str (file:// URIs lose their scheme)."""
    p = os.fspath(path)
    return p[len("file://"):] if isinstance(p, str) and p.lower().startswith("file://") else p


def _split_query(uri: str) -> tuple[str, str]:
    i = uri.find("?")
    return (uri, "") if i < 0 else (uri[:i], uri[i:])


def join(base: PathLike, *names: str) -> str:
    """Path joining; a URI keeps its query (`?endpoint_override=...`) at the end."""
    if not is_remote(base):
        return os.path.join(local_path(base), *names)
    out, query = _split_query(base)
    out = out.rstrip("/")
    for n in names:
        out += "/" + n.strip("/")
    return out + query


def basename(path: PathLike) -> str:
    if not is_remote(path):
        return os.path.basename(local_path(path).rstrip(os.sep))
    return posixpath.basename(urlsplit(path).path.rstrip("/"))


def dirname(path: PathLike) -> str:
    if not is_remote(path):
        return os.path.dirname(os.path.abspath(local_path(path)))
    base, query = _split_query(path)
    return base.rstrip("/").rsplit("/", 1)[0] + query


@functools.lru_cache(maxsize=None)
def _root(scheme: str, netloc: str, query: str) -> tuple[pafs.FileSystem, Callable[[str], str]]:
    """(filesystem, path mapper) for one scheme://netloc (created once per process)."""
    if scheme in _PYARROW_SCHEMES:
        from pyarrow import fs as pafs

        uri = f"{scheme}://{netloc}/" + (f"?{query}" if query else "")
        try:
            fs, _ = pafs.FileSystem.from_uri(uri)
        except (OSError, ValueError) as e:
            raise StorageError(f"cannot open the filesystem for {scheme}://{netloc} ({e})",
                               path=f"{scheme}://{netloc}") from None
        if scheme in _BUCKET_SCHEMES:
            return fs, lambda p: netloc + p
        return fs, lambda p: p or "/"
    try:
        import fsspec
        from pyarrow import fs as pafs
    except ImportError:
        raise UnsupportedLayoutError(f"no filesystem for {scheme}:// URIs: pyarrow reads s3://, gs://, hdfs:// "
                                     f"itself; install fsspec (and its package for {scheme}://) for others",
                                     path=f"{scheme}://{netloc}") from None
    try:
        spec = fsspec.filesystem(scheme)
    except (ImportError, ValueError) as e:
        raise UnsupportedLayoutError(f"no filesystem for {scheme}:// URIs ({e})", path=f"{scheme}://{netloc}") from None
    def strip(p: str) -> str:
        stripped: str = spec._strip_protocol(f"{scheme}://{netloc}{p}")
        return stripped

    return pafs.PyFileSystem(pafs.FSSpecHandler(spec)), strip


def clear_cache() -> None:
    """Forget the filesystems made so far (after the environment they were made from changed)."""
    _root.cache_clear()


def resolve(uri: str) -> tuple[pafs.FileSystem, str]:
    """(pyarrow filesystem, path inside it) for a remote URI."""
    parts = urlsplit(uri)
    if "@" in parts.netloc:
        raise UnsupportedLayoutError("credentials in a URI are refused: give them where the filesystem library looks "
                                     "for them (for S3: AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY, AWS_PROFILE, "
                                     "~/.aws/credentials)", path=f"{parts.scheme}://...@{parts.netloc.split('@')[-1]}")
    fs, mapper = _root(parts.scheme.lower(), parts.netloc, parts.query)
    return fs, mapper(parts.path.rstrip("/") if parts.path not in ("", "/") else "")


def _info(path: str) -> tuple[pafs.FileInfo, type[pafs.FileType]]:
    from pyarrow import fs as pafs

    fs, p = resolve(path)
    _count_metadata()
    try:
        info = fs.get_file_info(p)
    except OSError as e:
        raise StorageError(f"cannot read ({e})", path=path) from None
    return info, pafs.FileType


# ------------------------------------------------------------------------------------ facts
def isdir(path: PathLike) -> bool:
    if not is_remote(path):
        return os.path.isdir(local_path(path))
    info, ft = _info(path)
    return bool(info.type == ft.Directory)


def isfile(path: PathLike) -> bool:
    if not is_remote(path):
        return os.path.isfile(local_path(path))
    info, ft = _info(path)
    return bool(info.type == ft.File)


def exists(path: PathLike) -> bool:
    if not is_remote(path):
        return os.path.exists(local_path(path))
    info, ft = _info(path)
    return bool(info.type != ft.NotFound)


def getsize(path: PathLike) -> int:
    if not is_remote(path):
        return os.path.getsize(local_path(path))
    info, ft = _info(path)
    if info.type == ft.NotFound:
        raise FileNotFoundError(2, "No such file or directory", path)
    return int(info.size)


class Entry(NamedTuple):
    """One name in a directory: its full path, whether it is a directory, and (files) size and mtime."""

    name: str
    path: str
    is_dir: bool
    size: int | None
    mtime_ns: int | None


def scandir(path: PathLike) -> list[Entry]:
    """The entries of a directory (or an object-store prefix), sorted by name, in one listing."""
    if not is_remote(path):
        p = local_path(path)
        out: list[Entry] = []
        with os.scandir(p) as it:
            for e in it:
                try:
                    d = e.is_dir()
                except OSError:
                    d = False
                out.append(Entry(e.name, os.path.join(p, e.name), d, None, None))
        return sorted(out)
    from pyarrow import fs as pafs

    fs, p = resolve(path)
    _count_metadata()
    try:
        infos = fs.get_file_info(pafs.FileSelector(p, recursive=False))
    except FileNotFoundError:
        raise FileNotFoundError(2, "No such file or directory", path) from None
    except OSError as e:
        raise StorageError(f"cannot list ({e})", path=path) from None
    out = []
    for i in infos:
        if i.type == pafs.FileType.NotFound:
            continue
        d = i.type == pafs.FileType.Directory
        out.append(Entry(i.base_name, join(path, i.base_name), d, None if d else i.size,
                         None if i.mtime_ns is None else int(i.mtime_ns)))
    return sorted(out)


def listdir(path: PathLike) -> list[str]:
    return [e.name for e in scandir(path)]


def read_bytes(path: PathLike) -> bytes:
    """A small file's bytes (indexes, checkpoints). Local files go through open_regular: a FIFO or
    directory named like the file is a StorageError, never a hang."""
    if not is_remote(path):
        return _files.read_whole(local_path(path))
    f = RemoteFile(path)
    try:
        return f.pread(f.size, 0) if f.size else b""
    finally:
        f.close()


def mtime_ms(path: PathLike) -> int:
    if not is_remote(path):
        return _files.mtime_ms(local_path(path))
    info, ft = _info(path)
    if info.type == ft.NotFound:
        raise FileNotFoundError(2, "No such file or directory", path)
    return 0 if info.mtime_ns is None else int(info.mtime_ns) // 1_000_000


# ------------------------------------------------------------------------------------ reading by ranges
class RemoteFile:
    """One remote object read by ranges. The size is fixed when it is opened (from a listing or
    one metadata request); a read past what the object still holds is a FileChangedError."""

    def __init__(self, path: str, size: int | None = None, mtime_ns: int | None = None) -> None:
        self.path = path
        self._fs, self._p = resolve(path)
        if size is None:
            info, ft = _info(path)
            if info.type == ft.NotFound:
                raise FileNotFoundError(2, "No such file or directory", path)
            if info.type != ft.File:
                raise StorageError("is a directory, not a file", path=path)
            size, mtime_ns = info.size, info.mtime_ns
        self.size = int(size)
        self.identity = (path, self.size, mtime_ns)
        self.mtime_ns = mtime_ns
        self._f: pafs.RandomAccessFile | None = None  # opened on the first read: a listing already gave the size
        self._blocks: list[tuple[int, bytes]] = []     # [(start, bytes)], most recent first
        self.requests = 0
        self.bytes_requested = 0

    def _get(self, position: int, n: int) -> bytes:
        if self._f is None:
            _count_metadata()  # pyarrow asks for the object's size when it opens it
            try:
                self._f = self._fs.open_input_file(self._p)
            except FileNotFoundError:
                raise FileChangedError("the object is gone (deleted after it was listed)", path=self.path) from None
            except OSError as e:
                raise StorageError(f"cannot open ({e})", path=self.path) from None
        try:
            data: bytes = self._f.read_at(n, position)
        except OSError as e:
            raise StorageError(f"reading {n} bytes at byte {position} failed ({e})", path=self.path) from None
        self.requests += 1
        self.bytes_requested += n
        _count(n)
        return data

    def pread(self, n: int, position: int) -> bytes:
        """Exactly `n` bytes at `position` (FileChangedError when the object holds fewer)."""
        if n <= 0:
            return b""
        for start, data in self._blocks:
            if start <= position and position + n <= start + len(data):
                return data if (start == position and n == len(data)) else data[position - start:position - start + n]
        want = max(n, min(MIN_REQUEST, self.size - position))
        data = self._get(position, want)
        if len(data) < n:
            raise FileChangedError(f"the object ends at byte {position + len(data)}, but {n} bytes were expected at "
                                   f"byte {position}: it changed after it was listed", path=self.path,
                                   position=position + len(data))
        if want <= _KEEP_BYTES:
            self._blocks.insert(0, (position, data))
            del self._blocks[_KEEP_BLOCKS:]
        return data if want == n else data[:n]

    def close(self) -> None:
        self._blocks = []
        if self._f is not None:
            try:
                self._f.close()
            finally:
                self._f = None


class FileObjectSource:
    """A seekable binary file object (open(..., "rb"), a pyarrow NativeFile, an fsspec file) read by
    ranges, for readers that take a file object instead of a path."""

    def __init__(self, f: IO[bytes] | pafs.NativeFile, name: str | None = None) -> None:
        self._f = f
        self.path: str = name or getattr(f, "name", None) or getattr(f, "path", None) or repr(f)
        here = f.tell()
        self.size: int = f.seek(0, os.SEEK_END)
        f.seek(here)
        self.identity = (id(f), self.size)
        self.mtime_ns: int | None = None

    def pread(self, n: int, position: int) -> bytes:
        if n <= 0:
            return b""
        read_at: Callable[[int, int], bytes] | None = getattr(self._f, "read_at", None)
        data: bytes | bytearray | memoryview
        if read_at is not None:
            data = read_at(n, position)
        else:
            self._f.seek(position)
            parts: list[bytes] = []
            got = 0
            while got < n:
                more = self._f.read(n - got)
                if not more:
                    break
                parts.append(more)
                got += len(more)
            data = b"".join(parts)
        if len(data) < n:
            raise FileChangedError(f"the file ends at byte {position + len(data)}, but {n} bytes were expected at byte "
                                   f"{position}", path=self.path, position=position + len(data))
        return bytes(data)

    def close(self) -> None:  # the caller owns the file object
        pass


def is_regular_local(path: PathLike) -> bool:
    """Whether a local path is a regular file (no open: FIFOs must not be opened blocking)."""
    try:
        return _stat.S_ISREG(os.stat(local_path(path)).st_mode)
    except OSError:
        return False


__all__ = ["is_remote", "local_path", "join", "basename", "dirname", "isdir", "isfile", "exists", "getsize",
           "scandir", "listdir", "read_bytes", "mtime_ms", "Entry", "RemoteFile", "FileObjectSource", "io_stats",
           "resolve", "MIN_REQUEST", "clear_cache"]
