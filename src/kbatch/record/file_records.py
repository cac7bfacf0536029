"""FileRecords (Kafka's FileRecords): a `.log` file read through pread windows, and the window scan
every reader of a file goes through (`scan_windows` / `scan_buffer`: the kernel's batch-header
columns a window at a time, bounded memory at any size).

Files are never memory-mapped: a .log is read in windows with pread into private buffers, so a
file truncated by another process gives a kbatch error (FileChangedError), never SIGBUS. A partial
last batch is not an error (its bytes are reported), as in Kafka. Remote objects and seekable file
objects are read the same way by ranges (SourceFileRecords, kbatch._fs).
"""
from __future__ import annotations

import os
import struct
import threading
from collections.abc import Callable, Generator, Iterator
from typing import IO, TYPE_CHECKING, Any, NamedTuple, TypedDict, TypeVar, cast

import numpy as np
import numpy.typing as npt

from .. import _backend
from .. import _files
from .. import _wire as W
from ..errors import CrcMismatchError, KBatchError, LogWriteError, SegmentTooLargeError, StorageError
from .batch import (HeaderScan, RecordBatch, _is_file_object, incomplete_batch, is_partial_tail,
                    iter_buffer_batches, next_batch_start, truncation_error)

if TYPE_CHECKING:
    from .._fs import FileObjectSource, RemoteFile
    from .._typing import Buffer, BytesLike, PathLike

    from .batch import Batch

#: one window of a scan: the kernel's batch-header columns (numpy arrays named as SCAN_FIELDS, file
#: positions) with "valid_bytes", plus the window's bytes ("buf") and their file position ("origin");
#: "buf" None: header columns remembered without their bytes, "read"(position, size) reads a batch
Window = dict[str, Any]
#: a scan: windows, then (StopIteration.value) where complete batches end
Scan = Generator[Window, None, int]
#: read(position, n) -> n bytes at position
Read = Callable[[int, int], "BytesLike"]
#: row numbers into a window's columns, or into sorted lookup targets
Rows = npt.NDArray[np.intp]
_T = TypeVar("_T")
_SIZE = struct.Struct(">i")  # a batch's length field

WINDOW = 16 * 1024 * 1024  # a scan's window: bounded memory at any file size, few reads per file
FIRST_WINDOW = 16 * 1024  # lookups usually end within a few batches of the index entry (4 KiB apart)

# Window buffers of scans that reuse one (FileRecords.scan(reuse=True)), kept between scans so
# that a lookup or a header pass does not allocate and zero a new buffer each time. A scan takes
# one for its whole life and gives it back when it ends; at most two are kept.
_SPARE_BUFFERS: list[bytearray] = []
_SPARE_KEEP = 2
_SPARE_MAX_BYTES = 2 * WINDOW


def _take_buffer() -> bytearray | None:
    try:
        return _SPARE_BUFFERS.pop()
    except IndexError:
        return None


def _give_buffer(buf: bytearray | None) -> None:
    if buf is not None and len(buf) <= _SPARE_MAX_BYTES and len(_SPARE_BUFFERS) < _SPARE_KEEP:
        _SPARE_BUFFERS.append(buf)
MAX_SEGMENT_BYTES = W.INT32_MAX  # positions in .index are int32 (Kafka: segment.bytes is an int)


class LogOffsetPosition(NamedTuple):
    offset: int
    position: int
    size: int


class TimestampAndOffset(NamedTuple):
    """A lookup answer: the record's timestamp, offset and its batch's leader epoch (None if unknown)."""

    timestamp: int
    offset: int
    leader_epoch: int | None


def epoch_or_none(ple: int) -> int | None:
    """A batch's partition leader epoch as lookups answer it: None when unknown (negative)."""
    return None if ple < 0 else int(ple)


# ------------------------------------------------------------------------------------ scanning in windows
def shift_error(e: KBatchError, delta: int) -> KBatchError:
    """A window's error position -> the file's (`delta`: the window's file position)."""
    if delta:
        e.update(shift=delta)
    return e


def as_window(s: Window, buf: BytesLike, origin: int) -> Window:
    """Kernel columns of a window with file positions, plus the window (buf) and its origin."""
    if origin:
        s["position"] = s["position"] + origin
        s["valid_bytes"] = int(s["valid_bytes"]) + origin
    s["buf"] = buf
    s["origin"] = origin
    return s


def _head(s: Window, n: int) -> Window:
    return {k: (v[:n] if isinstance(v, np.ndarray) else v) for k, v in s.items()}


def scan_windows(read: Read, size: int, start: int = 0, verify_crc: bool = False, first_window: int = WINDOW,
                 limit: int | None = MAX_SEGMENT_BYTES, prefetch: Callable[[int, int], None] | None = None) -> Scan:
    """Batch-header columns of bytes [start, size), window by window, with file positions; each
    dict also holds the window ("buf") and the file position of its first byte ("origin").

    read(position, n) returns n bytes at position. Stops quietly before a partial last batch (or a
    size running past the end); the return value (StopIteration.value) is where complete batches
    end. A header the kernel rejects (size below the overhead, bad magic) raises, but only after
    the complete batches before it were yielded. A batch ending past `limit` raises
    SegmentTooLargeError (Kafka's int32 positions). prefetch(position, n), when given, is told
    which window comes next before the current one is handed out (a reader can fetch it meanwhile)."""
    core = _backend.core
    pos = start
    window = first_window
    while size - pos > W.HEADER_SIZE_UP_TO_MAGIC:
        n = min(size - pos, window)
        window = min(window * 16, WINDOW)  # a lookup that did not end in the first window goes on in larger ones
        buf = read(pos, n)
        if n < size - pos and n >= W.LOG_OVERHEAD:
            (sz,) = _SIZE.unpack_from(buf, W.SIZE_OFFSET)
            if n < sz + W.LOG_OVERHEAD <= size - pos:  # the first batch is larger than the window: read it whole
                n = sz + W.LOG_OVERHEAD
                buf = read(pos, n)
        try:
            s = core.scan_batches(buf, 0, n, verify_crc)
        except KBatchError as e:
            if e.position:  # the batches before the bad header are good: hand them out first
                s = core.scan_batches(buf, 0, e.position, verify_crc)
                if len(s["position"]):
                    yield as_window(s, buf, pos)
            raise shift_error(e, pos)
        done = int(s["valid_bytes"])
        if done == 0:  # the next batch is larger than the window, or runs past the end
            if pos + n >= size:
                return pos
            (sz,) = struct.unpack_from(">i", buf, W.SIZE_OFFSET)
            need = sz + W.LOG_OVERHEAD
            if pos + need > size:
                return pos
            buf = read(pos, need)
            try:
                s = core.scan_batches(buf, 0, need, verify_crc)
            except KBatchError as e:
                raise shift_error(e, pos)
            done = int(s["valid_bytes"])
        if limit is not None and pos + done > limit:
            ends = s["position"] + s["size"] + pos
            k = int(np.searchsorted(ends, limit, side="right"))
            if k:
                yield as_window(_head(s, k), buf, pos)
            bad = int(s["position"][k]) + pos
            raise SegmentTooLargeError("Segment is larger than Kafka's limit", position=bad,
                                       expected=f"a segment of at most {limit} bytes (positions in .index are int32)",
                                       found=f"a batch ending at byte {int(ends[k])}")
        if prefetch is not None and size - pos - done > W.HEADER_SIZE_UP_TO_MAGIC:
            prefetch(pos + done, min(size - pos - done, window))
        yield as_window(s, buf, pos)
        pos += done
    return pos


def scan_buffer(buf: Buffer, start: int = 0, verify_crc: bool = False, first_window: int = WINDOW,
                limit: int | None = MAX_SEGMENT_BYTES) -> Scan:
    """scan_windows over an in-memory buffer (windows are zero-copy slices)."""
    mv = memoryview(buf).cast("B") if not isinstance(buf, (bytes, memoryview)) else memoryview(buf)
    return scan_windows(lambda p, n: mv[p:p + n], len(mv), start, verify_crc, first_window, limit)


def iter_headers(buf: Buffer, start: int = 0, verify_crc: bool = False, first_window: int = WINDOW, *,
                 stop_on_error: bool = False) -> HeaderScan:
    """The batch headers of an in-memory buffer from `start` as a HeaderScan of windows (scan_buffer:
    zero-copy slices; batch_at and crc_error_at take them)."""
    return HeaderScan(scan_buffer(buf, start, verify_crc, first_window), start, stop_on_error=stop_on_error)


def batch_at(s: Window, i: int, max_decompressed_bytes: int = W.DEFAULT_MAX_DECOMPRESSED_BYTES) -> Batch:
    """The batch at row i of a window: a RecordBatch / LegacyRecordBatch (positions are file positions)."""
    buf, origin = s["buf"], s["origin"]
    pos, size, magic = int(s["position"][i]), int(s["size"][i]), int(s["magic"][i])
    if buf is None:  # a window of remembered header columns (kbatch.log.summary): read this batch's bytes
        buf, origin = s["read"](pos, size), pos
    if magic == 2:
        return RecordBatch(buf, pos, size, int(s["base_offset"][i]), int(s["last_offset"][i]),
                           int(s["partition_leader_epoch"][i]), int(s["crc"][i]), int(s["attributes"][i]),
                           int(s["first_timestamp"][i]), int(s["max_timestamp"][i]), int(s["producer_id"][i]),
                           int(s["producer_epoch"][i]), int(s["base_sequence"][i]), int(s["record_count"][i]),
                           max_decompressed_bytes, origin=origin)
    from ..record.legacy import LegacyRecordBatch
    return LegacyRecordBatch(buf, pos, size, magic, int(s["base_offset"][i]), int(s["crc"][i]),
                             int(s["attributes"][i]) & 0xFF, int(s["first_timestamp"][i]), max_decompressed_bytes,
                             verify_crc=False, origin=origin)


def crc_error_at(s: Window, i: int) -> CrcMismatchError:
    """The CrcMismatchError of the batch at row i of a window (one whose crc_valid is False)."""
    b = batch_at(s, i)
    return CrcMismatchError(stored=b.crc, computed=b.compute_crc(), position=b.position,
                            base_offset=int(s["base_offset"][i]))


_PREFETCH_MIN = 1 << 20  # windows this large are read ahead, in a thread, while the last one is worked on


class _WindowReader:
    """FileRecords' reader for scans that reuse their buffers: two window buffers (from the spare
    ones), the next large window read ahead in a thread while the caller works on the current one
    (pread lets the GIL go: on a second core the copy from the page cache overlaps the parsing),
    and the bytes a header check just read handed out again without a syscall."""

    __slots__ = ("records", "bufs", "cur", "pending")

    def __init__(self, records: FileRecords) -> None:
        self.records = records
        self.bufs = [_take_buffer(), _take_buffer()]
        self.cur = 0          # the buffer of the window the caller holds
        # (position, size, buffer index, thread, result box)
        self.pending: tuple[int, int, int, threading.Thread, _ReadBox] | None = None

    def _fill(self, idx: int, position: int, size: int) -> memoryview:
        buf = self.bufs[idx]
        if buf is None or len(buf) < size:
            buf = self.bufs[idx] = bytearray(max(size, FIRST_WINDOW))
        mv = memoryview(buf)[:size]
        _files.pread_into(self.records._fd_or_raise(), mv, position, self.records.path)
        return mv

    def _wait(self) -> tuple[int, int, int, threading.Thread, _ReadBox] | None:
        p, self.pending = self.pending, None
        if p is not None:
            p[3].join()
        return p

    def prefetch(self, position: int, size: int) -> None:
        size = max(0, min(size, self.records.size_in_bytes - position))
        if size < _PREFETCH_MIN:
            return
        self._wait()
        idx = 1 - self.cur
        box: _ReadBox = {}

        def run() -> None:
            try:
                box["mv"] = self._fill(idx, position, size)
            except BaseException as e:  # raised where the caller reads this window
                box["error"] = e

        t = threading.Thread(target=run, name="kbatch-read-ahead", daemon=True)
        t.start()
        self.pending = (position, size, idx, t, box)

    def read(self, position: int, size: int) -> memoryview:
        records = self.records
        size = max(0, min(size, records.size_in_bytes - position))
        head = records._head
        if head is not None and head[0] <= position and position + size <= head[0] + len(head[1]):
            at = position - head[0]  # read along with the header just checked
            return memoryview(head[1])[at:at + size]
        p = self._wait()
        if p is not None and p[0] == position and p[1] == size:
            if "error" in p[4]:
                raise p[4]["error"]
            self.cur = p[2]
            return p[4]["mv"]
        idx = 1 - self.cur  # never the buffer of the window the caller may still be reading
        mv = self._fill(idx, position, size)
        self.cur = idx
        return mv

    def close(self) -> None:
        self._wait()
        for buf in self.bufs:
            _give_buffer(buf)
        self.bufs = [None, None]


class _ReadBox(TypedDict, total=False):
    """What a read-ahead thread hands back: the window, or the error to raise where it is read."""

    mv: memoryview
    error: BaseException


def first_record_at_or_after(batch: Batch, target: int, starting_offset: int = 0) -> TimestampAndOffset | None:
    """(timestamp, offset, leader epoch) of the batch's first record with ts >= target and
    offset >= starting_offset, or None."""
    if batch.magic == 2 and batch.timestamp_type == W.TimestampType.LOG_APPEND_TIME:
        # every record carries the batch's max timestamp: no need to decode
        if batch.max_timestamp != batch.no_timestamp and batch.max_timestamp >= target:
            if batch.base_offset >= starting_offset and batch.record_count > 0 and not batch.is_control:
                return TimestampAndOffset(batch.max_timestamp, batch.base_offset,
                                          epoch_or_none(batch.partition_leader_epoch))
    for rec in batch:
        if rec.timestamp is not None and rec.timestamp >= target and rec.offset >= starting_offset:
            return TimestampAndOffset(rec.timestamp, rec.offset, epoch_or_none(batch.partition_leader_epoch))
    return None




# ------------------------------------------------------------------------------------ FileRecords
class FileRecords:
    """A `.log` file (Kafka's FileRecords), read through pread windows: bounded memory at any
    size, and a kbatch error, never a signal, when another process truncates it.

    The file is opened once; a read-only FileRecords reads the bytes it had when opened (its size
    is fixed then). A writable FileRecords also appends: a failed write is cut back off the file
    and raises LogWriteError.
    """

    def __init__(self, path: PathLike, *, writable: bool = False, create: bool = False) -> None:
        self.path = os.fspath(path)
        self.writable = writable or create
        if create:
            _files.crash_point(f"create:{os.path.basename(self.path)}")
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_EXCL | _files.O_CLOEXEC, 0o666)
        else:
            fd = _files.open_regular(self.path, writable=writable)
        self._fd: int | None = fd
        self.identity: tuple[object, ...] = _files.fstat_identity(fd)  # what tells this file from a later one
        self._size = os.fstat(fd).st_size
        # (position, bytes) of the last small read, read a whole first window long: a lookup reads
        # a batch header to check an index entry, then scans from that same position
        self._head: tuple[int, bytes] | None = None

    @classmethod
    def open(cls, path: PathLike, *, writable: bool = False) -> "FileRecords":
        return cls(path, writable=writable)

    @property
    def size_in_bytes(self) -> int:
        return self._size

    def __len__(self) -> int:
        return self._size

    @property
    def closed(self) -> bool:
        return self._fd is None

    def _fd_or_raise(self) -> int:
        if self._fd is None:
            raise StorageError("the segment file is closed", path=self.path)
        return self._fd

    def incomplete(self, position: int, where: str | None = None) -> str:
        """What the bytes from `position` (where the whole batches stop) to the end are
        (incomplete_batch; `where` defaults to this file's path)."""
        return incomplete_batch(self.read, self.size_in_bytes, position, self.path if where is None else where)

    def read(self, position: int, size: int, *, read_ahead: bool = True) -> bytes:
        """`size` bytes at `position` (within the size this FileRecords knows). A small read reads
        a first window's worth and keeps it (a lookup goes on from there), unless not `read_ahead`
        (a header walk that jumps from batch to batch)."""
        size = max(0, min(size, self._size - position))
        if not size:
            return b""
        head = self._head
        if head is not None and head[0] <= position and position + size <= head[0] + len(head[1]):
            at = position - head[0]
            return head[1][at:at + size]
        fd = self._fd_or_raise()
        if size < FIRST_WINDOW and read_ahead:
            data = _files.pread_exact(fd, min(FIRST_WINDOW, self._size - position), position, self.path)
            self._head = (position, data)
            return data[:size]
        return _files.pread_exact(fd, size, position, self.path)

    def scan(self, start: int = 0, verify_crc: bool = False, first_window: int = WINDOW, *,
             reuse: bool = False) -> Scan:
        """scan_windows over the file (see there). reuse=True reads every window into one buffer
        (no allocation per window): only for callers that keep nothing (no batch, record, key or
        value view) from a window once they ask for the next one, or once the scan has ended."""
        if not reuse:
            return scan_windows(self.read, self._size, start, verify_crc, first_window)
        return self._scan_reusing(start, verify_crc, first_window)

    def _scan_reusing(self, start: int, verify_crc: bool, first_window: int) -> Scan:
        reader = _WindowReader(self)
        try:
            return (yield from scan_windows(reader.read, self._size, start, verify_crc, first_window,
                                            prefetch=reader.prefetch))
        finally:
            reader.close()

    def headers(self, start: int = 0, verify_crc: bool = False, first_window: int = WINDOW, *, reuse: bool = False,
                stop_on_error: bool = False) -> HeaderScan:
        """The file's scan (see scan) as a HeaderScan: a for loop over its windows, then `end` (where
        the complete batches end) and, with stop_on_error, `error` (the framing error that ended it)."""
        return HeaderScan(self.scan(start, verify_crc, first_window, reuse=reuse), start, stop_on_error=stop_on_error)

    def buffer(self) -> bytes:
        """The whole file's bytes (a copy; for small files and tests)."""
        return self.read(0, self._size)

    # ---- reading
    def scan_to_end(self, start: int = 0) -> tuple[int, KBatchError | None]:
        """(where complete batches end, the framing error that stopped the scan or None)."""
        scan = self.headers(start, reuse=True, stop_on_error=True)
        scan.drain()
        return scan.end, scan.error

    @property
    def valid_bytes(self) -> int:
        """Where complete batches end; bytes after it are a partial (torn) batch or unreadable."""
        return self.headers(reuse=True).drain()

    @property
    def truncated_bytes(self) -> int:
        return self._size - self.valid_bytes

    def batches(self, start: int = 0, verify_crc: bool = True) -> Iterator[Batch]:
        """Complete batches from byte `start` (RecordBatch / LegacyRecordBatch, file positions)."""
        for s in self.scan(start, verify_crc):
            ok = s["crc_valid"].tolist()
            for i in range(len(ok)):
                if verify_crc and not ok[i]:
                    raise crc_error_at(s, i)
                yield batch_at(s, i)

    def __iter__(self) -> Iterator[Batch]:
        return self.batches()

    def search_for_offset_with_size(self, target_offset: int, starting_position: int = 0) -> LogOffsetPosition | None:
        """The first batch from `starting_position` whose last offset >= target, as
        (last offset, position, size), or None (FileRecords.searchForOffsetWithSize). No read-ahead:
        a lookup usually ends in its first small window, and a read-ahead of the next (16 MiB) would
        be read (and waited for) for nothing."""
        for s in self.scan(starting_position, first_window=FIRST_WINDOW):
            hit = np.flatnonzero(s["last_offset"] >= target_offset)
            if len(hit):
                i = int(hit[0])
                return LogOffsetPosition(int(s["last_offset"][i]), int(s["position"][i]), int(s["size"][i]))
        return None

    def search_for_timestamp(self, target: int, starting_position: int = 0,
                             starting_offset: int = 0) -> TimestampAndOffset | None:
        """The first record with timestamp >= target and offset >= starting_offset, scanning from
        `starting_position` and skipping batches whose max timestamp < target
        (FileRecords.searchForTimestamp). Records without a timestamp never match. No read-ahead
        (as search_for_offset_with_size)."""
        for s in self.scan(starting_position, first_window=FIRST_WINDOW):
            cand = np.flatnonzero((s["max_timestamp"] >= target) & (s["last_offset"] >= starting_offset))
            for i in cand.tolist():
                hit = first_record_at_or_after(batch_at(s, i), target, starting_offset)
                if hit is not None:
                    return hit
        return None

    def largest_timestamp_after(self, starting_position: int) -> int:
        """Largest batch max timestamp from a position (Kafka's version ignores negatives)."""
        best = W.NO_TIMESTAMP
        for s in self.scan(starting_position, reuse=True):
            if len(s["max_timestamp"]):
                best = max(best, int(s["max_timestamp"].max()))
        return best

    # ---- writing
    def _check_writable(self) -> None:
        if not self.writable:
            raise KBatchError(f"{self.path} is open read-only", expected="a writable log", found="read-only")

    def append(self, data: BytesLike) -> int:
        """Append bytes at the end; returns the position they start at. All or nothing: a failed
        or short write (ENOSPC, EFBIG) is cut back off and raises LogWriteError."""
        self._check_writable()
        pos = self._size
        n = len(data)
        if pos + n > MAX_SEGMENT_BYTES:
            raise SegmentTooLargeError("Appending would take the segment past Kafka's limit", position=pos,
                                       expected=f"a segment of at most {MAX_SEGMENT_BYTES} bytes (positions in .index "
                                                f"are int32)", found=f"{pos} + {n} bytes")
        fd = self._fd_or_raise()
        try:
            _files.write_all(fd, data, pos)
        except OSError as e:
            self._cut_back(pos)
            raise _files.write_error(e, self.path, f"appending {n} bytes at byte {pos}") from e
        self._size = pos + n
        return pos

    def _cut_back(self, size: int) -> None:
        self._head = None
        try:
            _files.truncate_back(self._fd_or_raise(), size, self.path)
        except OSError as e:
            raise LogWriteError(f"a failed append could not be cut back to {size} bytes ({e}); the file may hold a "
                                f"partial batch at byte {size}, which recovery removes", path=self.path,
                                errno=e.errno) from e

    def flush(self) -> None:
        if self.writable and self._fd is not None:
            os.fsync(self._fd)

    def truncate_to(self, size: int) -> int:
        """Cut the file to `size` bytes (durably); returns how many bytes went."""
        self._check_writable()
        gone = self._size - size
        self._head = None
        _files.truncate_back(self._fd_or_raise(), size, self.path)
        self._size = size
        return gone

    def close(self) -> None:
        if self._fd is not None:
            try:
                self.flush()
            finally:
                os.close(self._fd)
                self._fd = None

    def close_quietly(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None


class SourceFileRecords(FileRecords):
    """A read-only FileRecords over a source read by ranges: a remote object (kbatch._fs.RemoteFile:
    each read one ranged request) or a seekable file object (kbatch._fs.FileObjectSource). The
    same windows, scans and lookups as a local file; nothing can be written."""

    def __init__(self, source: RemoteFile | FileObjectSource) -> None:
        self.path = source.path
        self.writable = False
        self.source = source
        self._fd = None
        self._open = True
        self.identity = source.identity
        self._size = source.size
        self._head = None

    @property
    def closed(self) -> bool:
        return not self._open

    def read(self, position: int, size: int, *, read_ahead: bool = True) -> bytes:
        if not self._open:
            raise StorageError("the segment file is closed", path=self.path)
        size = max(0, min(size, self._size - position))
        return self.source.pread(size, position) if size else b""

    def _scan_reusing(self, start: int, verify_crc: bool, first_window: int) -> Scan:
        # each read is a new buffer from the source anyway: nothing to reuse
        return (yield from scan_windows(self.read, self._size, start, verify_crc, first_window))

    def flush(self) -> None:
        pass

    def close(self) -> None:
        if self._open:
            self._open = False
            self.source.close()

    close_quietly = close


def open_records(path: PathLike | IO[bytes], size: int | None = None) -> FileRecords:
    """A read-only FileRecords for a local path (pread on one fd), a remote URI (ranged reads;
    `size` from a listing saves a metadata request) or a seekable binary file object."""
    from .. import _fs


    if _is_file_object(path):
        return SourceFileRecords(_fs.FileObjectSource(path))
    if _fs.is_remote(path):
        return SourceFileRecords(_fs.RemoteFile(path, size))
    if not isinstance(path, (str, os.PathLike)):
        raise TypeError(f"a segment is a path, a URI or a seekable binary file object, not {path!r}")
    return FileRecords(_fs.local_path(path))


def iter_batches(data: Buffer | str | os.PathLike[str] | IO[bytes], verify_crc: bool = True, *, strict: bool = True,
                 max_decompressed_bytes: int = W.DEFAULT_MAX_DECOMPRESSED_BYTES) -> Iterator[Batch]:
    """Iterate the batches (magic 0, 1, 2, mixed) of any buffer, or of a segment file named by a
    path or URI (s3://, gs://, hdfs://...: kbatch._fs) or given as a seekable binary file object,
    read in windows (bounded memory; remote objects by ranged reads).

    verify_crc: raise CrcMismatchError for a batch whose stored CRC is wrong.
    strict: raise TruncatedDataError for a partial last batch; strict=False stops before it
    silently, as Kafka's FileRecords does (see MemoryRecords.valid_bytes).
    Yields RecordBatch (magic 2) and LegacyRecordBatch (magic 0/1) objects.
    """
    if isinstance(data, (str, os.PathLike)) or _is_file_object(data):
        return iter_file_batches(data, verify_crc, strict, max_decompressed_bytes)
    return iter_buffer_batches(cast("Buffer", data), verify_crc, strict=strict,
                               max_decompressed_bytes=max_decompressed_bytes)


def iter_file_batches(source: PathLike | IO[bytes], verify_crc: bool = True, strict: bool = True,
                      max_decompressed_bytes: int = W.DEFAULT_MAX_DECOMPRESSED_BYTES) -> Iterator[Batch]:
    """iter_batches over a path, URI or file object (see there), through open_records."""

    records = open_records(source)
    try:
        scan = records.headers(0, verify_crc)
        for s in scan:
            ok = s["crc_valid"].tolist()
            for i in range(len(ok)):
                if verify_crc and not ok[i]:
                    raise crc_error_at(s, i)
                yield batch_at(s, i, max_decompressed_bytes)
        valid = scan.end
        if strict and valid < records.size_in_bytes:
            e = truncation_error(records.read(valid, min(records.size_in_bytes - valid, W.RECORD_BATCH_OVERHEAD)), 0)
            raise e.update(reason=records.incomplete(valid), found=f"{records.size_in_bytes - valid} bytes",
                           position=valid)
    finally:
        records.close()


__all__ = ["iter_batches", "FileRecords", "SourceFileRecords", "open_records", "iter_file_batches", "scan_windows", "scan_buffer",
           "LogOffsetPosition", "TimestampAndOffset", "first_record_at_or_after", "Window", "Scan", "MAX_SEGMENT_BYTES",
           "next_batch_start", "incomplete_batch", "is_partial_tail", "batch_at", "crc_error_at", "shift_error",
           "as_window", "epoch_or_none", "HeaderScan", "iter_headers", "WINDOW", "FIRST_WINDOW"]
