"""Reading record batches: DefaultRecordBatch (magic 2), the batch iterator, MemoryRecords.

Headers are scanned by the backend's `scan_batches` kernel (CRCs included) in windows, so
memory stays bounded on multi-gigabyte mmap'd segments; records are decoded per batch on demand.
"""
from __future__ import annotations

import os
import struct
from collections.abc import Callable, Generator, Iterator
from typing import TYPE_CHECKING, Any, BinaryIO, Protocol, TypeGuard, cast

import numpy as np

from .. import _backend
from .. import _wire as W
from .compression import check_codec, decompress, relocate
from ..errors import CrcMismatchError, KBatchError, StorageError, TruncatedDataError
from .control import ControlRecord, parse_control_record

if TYPE_CHECKING:
    from typing_extensions import Buffer

    from .._core import Record

_SCAN_WINDOW = 16 * 1024 * 1024
_TIMESTAMP_TYPES = (W.TimestampType.CREATE_TIME, W.TimestampType.LOG_APPEND_TIME)  # by attribute bit 3



class Batch(Protocol):
    """What every batch is, whatever its magic (Kafka's RecordBatch interface): RecordBatch (magic 2,
    Kafka's DefaultRecordBatch) and LegacyRecordBatch (magic 0/1) both are one. Fields are the wire's
    values; positions are file positions when the batch was read from a window of a file."""

    @property
    def magic(self) -> int: ...
    @property
    def position(self) -> int: ...
    @property
    def size_in_bytes(self) -> int: ...
    @property
    def base_offset(self) -> int: ...
    @property
    def last_offset(self) -> int: ...
    @property
    def next_offset(self) -> int: ...
    @property
    def crc(self) -> int: ...
    @property
    def attributes(self) -> int: ...
    @property
    def first_timestamp(self) -> int: ...
    @property
    def max_timestamp(self) -> int: ...
    @property
    def record_count(self) -> int: ...
    @property
    def producer_id(self) -> int: ...
    @property
    def producer_epoch(self) -> int: ...
    @property
    def base_sequence(self) -> int: ...
    @property
    def last_sequence(self) -> int: ...
    @property
    def partition_leader_epoch(self) -> int: ...
    @property
    def max_decompressed_bytes(self) -> int: ...
    @property
    def compression(self) -> W.Compression: ...
    @property
    def timestamp_type(self) -> W.TimestampType: ...
    @property
    def is_transactional(self) -> bool: ...
    @property
    def is_control(self) -> bool: ...
    @property
    def has_delete_horizon(self) -> bool: ...
    @property
    def timestamp_extended(self) -> bool: ...
    @property
    def delete_horizon_ms(self) -> int | None: ...
    @property
    def no_timestamp(self) -> int: ...
    @property
    def raw(self) -> memoryview: ...
    def compute_crc(self) -> int: ...
    def is_valid(self) -> bool: ...
    def ensure_valid(self) -> None: ...
    def records(self) -> list[Record]: ...
    def control_records(self) -> list[ControlRecord]: ...
    def release_records(self) -> None: ...
    def __iter__(self) -> Iterator[Record]: ...
    def __len__(self) -> int: ...


class RecordBatch:
    """A magic 2 record batch (Kafka's DefaultRecordBatch) at `position` in a buffer.

    Fields are the header's wire values (timestamps raw int64, e.g. -1 or Long.MIN_VALUE for
    "no timestamp"); records decode on iteration. Keys and values of an uncompressed batch are
    views into the input buffer, which the batch keeps alive. `origin` is the position of the
    buffer's first byte when the buffer is a window of a larger file (storage reads windows):
    `position` and error positions stay file positions.
    """

    magic = 2
    __slots__ = ("_buf", "position", "size_in_bytes", "base_offset", "last_offset", "partition_leader_epoch",
                 "crc", "attributes", "first_timestamp", "max_timestamp", "producer_id", "producer_epoch",
                 "base_sequence", "record_count", "max_decompressed_bytes", "_records", "_origin")

    position: int
    size_in_bytes: int
    base_offset: int
    last_offset: int
    partition_leader_epoch: int
    crc: int
    attributes: int
    first_timestamp: int
    max_timestamp: int
    producer_id: int
    producer_epoch: int
    base_sequence: int
    record_count: int
    max_decompressed_bytes: int

    def __init__(self, buf: memoryview, position: int, size: int, base_offset: int, last_offset: int, ple: int,
                 crc: int, attributes: int, first_ts: int, max_ts: int, producer_id: int, producer_epoch: int,
                 base_sequence: int, record_count: int,
                 max_decompressed_bytes: int = W.DEFAULT_MAX_DECOMPRESSED_BYTES, origin: int = 0) -> None:
        self._buf = buf
        self._origin = origin
        self.position = position
        self.size_in_bytes = size
        self.base_offset = base_offset
        self.last_offset = last_offset
        self.partition_leader_epoch = ple
        self.crc = crc
        self.attributes = attributes
        self.first_timestamp = first_ts
        self.max_timestamp = max_ts
        self.producer_id = producer_id
        self.producer_epoch = producer_epoch
        self.base_sequence = base_sequence
        self.record_count = record_count
        self.max_decompressed_bytes = max_decompressed_bytes
        self._records: list[Record] | None = None

    # -- attributes
    @property
    def compression(self) -> W.Compression:
        return check_codec(self.attributes & W.COMPRESSION_CODEC_MASK, 2, self.position + W.ATTRIBUTES_OFFSET)

    @property
    def timestamp_type(self) -> W.TimestampType:
        return _TIMESTAMP_TYPES[bool(self.attributes & W.TIMESTAMP_TYPE_MASK)]

    @property
    def is_transactional(self) -> bool:
        return bool(self.attributes & W.TRANSACTIONAL_FLAG_MASK)

    @property
    def is_control(self) -> bool:
        return bool(self.attributes & W.CONTROL_FLAG_MASK)

    @property
    def has_delete_horizon(self) -> bool:
        return bool(self.attributes & W.DELETE_HORIZON_FLAG_MASK)

    @property
    def timestamp_extended(self) -> bool:
        return bool(self.attributes & W.TIMESTAMP_EXTENDED_FLAG_MASK)

    @property
    def base_timestamp(self) -> int:
        return self.first_timestamp

    @property
    def delete_horizon_ms(self) -> int | None:
        """The delete horizon (KIP-534) held in baseTimestamp when attribute bit 6 is set."""
        return self.first_timestamp if self.has_delete_horizon else None

    @property
    def no_timestamp(self) -> int:
        """This batch's "no timestamp" sentinel (KIP-228, DESIGN.md decision 1)."""
        return W.NO_TIMESTAMP_EXTENDED if self.timestamp_extended else W.NO_TIMESTAMP

    @property
    def next_offset(self) -> int:
        return self.last_offset + 1

    @property
    def last_sequence(self) -> int:
        if self.base_sequence < 0:
            return W.NO_SEQUENCE
        return W.increment_sequence(self.base_sequence, self.last_offset - self.base_offset)

    # -- bytes
    @property
    def raw(self) -> memoryview:
        """The batch's bytes as a view into the input."""
        at = self.position - self._origin
        return self._buf[at:at + self.size_in_bytes]

    def compute_crc(self) -> int:
        at = self.position - self._origin
        return _backend.core.crc32c(self._buf[at + W.ATTRIBUTES_OFFSET:at + self.size_in_bytes])

    def is_valid(self) -> bool:
        return self.compute_crc() == self.crc

    def ensure_valid(self) -> None:
        computed = self.compute_crc()
        if computed != self.crc:
            raise CrcMismatchError(stored=self.crc, computed=computed, position=self.position,
                                   base_offset=self.base_offset)

    def records_bytes(self) -> bytes | memoryview:
        """The records section, decompressed (a view into the input when uncompressed)."""
        at = self.position - self._origin
        section = self._buf[at + W.RECORDS_OFFSET:at + self.size_in_bytes]
        codec = self.compression
        if codec == W.Compression.NONE:
            return section
        try:
            return decompress(codec, section, 2, self.max_decompressed_bytes, self.position + W.RECORDS_OFFSET)
        except KBatchError as e:
            raise e.at(base_offset=self.base_offset)

    # -- records
    def records(self) -> list[Record]:
        """Every record, decoded once and kept (uncompressed: keys and values view the input)."""
        if self._records is None:
            attrs = self.attributes
            uncompressed = not attrs & W.COMPRESSION_CODEC_MASK
            at = self.position - self._origin
            buf: bytes | memoryview
            if uncompressed:  # decode in place: no section slice, positions stay input positions
                buf, start, end = self._buf, at + W.RECORDS_OFFSET, at + self.size_in_bytes
            else:
                buf = self.records_bytes()
                start, end = 0, len(buf)
            lat = attrs & W.TIMESTAMP_TYPE_MASK
            try:
                self._records = _backend.core.decode_records_v2(
                    buf, start, end, self.record_count, self.base_offset, self.first_timestamp,
                    self.max_timestamp if lat else None, _TIMESTAMP_TYPES[bool(lat)],
                    bool(attrs & W.TIMESTAMP_EXTENDED_FLAG_MASK))
            except KBatchError as e:
                if uncompressed and self._origin and e.position is not None:
                    e.position += self._origin  # a window's position -> the file's
                raise (e.at(base_offset=self.base_offset) if uncompressed
                       else relocate(e, self.position, self.base_offset))
        return self._records

    def __iter__(self) -> Iterator[Record]:
        return iter(self.records())

    def __len__(self) -> int:
        return self.record_count

    def release_records(self) -> None:
        """Drop the decoded records this batch caches (they are decoded again when asked for)."""
        self._records = None

    def control_records(self) -> list[ControlRecord]:
        """The batch's control records decoded (empty for a data batch)."""
        return [parse_control_record(r) for r in self.records()] if self.is_control else []

    def __repr__(self) -> str:
        return (f"RecordBatch(magic=2, base_offset={self.base_offset}, last_offset={self.last_offset}, "
                f"count={self.record_count}, compression={self.compression.name}, "
                f"timestamp_type={self.timestamp_type.name}, position={self.position}, size={self.size_in_bytes})")


def as_view(data: Buffer) -> memoryview:
    """A read-only, one-dimensional byte view of a buffer (a path given where bytes were expected: a
    TypeError that says what to do)."""
    if isinstance(data, (str, os.PathLike)):
        # a path where bytes were expected: say what to do rather than memoryview's TypeError
        raise TypeError(f"expected the bytes of record batches (bytes, bytearray, memoryview, mmap), found a path "
                        f"{os.fspath(data)!r}: read the file first (open(path, 'rb').read(), or mmap it), or open "
                        f"its partition with kbatch.Log.open")
    mv = data if isinstance(data, memoryview) else memoryview(data)
    if mv.ndim != 1 or mv.format not in ("B", "b", "c") or not mv.c_contiguous:
        mv = mv.cast("B")
    return mv.toreadonly()


_as_view = as_view  # the old private name, until the log layer imports as_view (issue 37)


def scan_headers(buf: memoryview, start: int = 0, end: int | None = None, verify_crc: bool = False,
                 first_window: int = _SCAN_WINDOW) -> Generator[dict[str, Any], None, int]:
    """Yield the backend's batch-header columns (absolute positions) for buf[start:end], window by
    window so memory stays bounded; stops quietly before a partial last batch (scan_batches raises
    for a size below the format's overhead or a bad magic, after the whole batches before that
    header are yielded, as kbatch.record.file_records.scan_windows does). Returns
    (StopIteration.value) the position where complete batches end."""
    n = len(buf) if end is None else min(end, len(buf))
    core = _backend.core
    pos = start
    window = first_window
    while n - pos > W.HEADER_SIZE_UP_TO_MAGIC:
        wend = min(n, pos + window)
        window = _SCAN_WINDOW
        try:
            s = core.scan_batches(buf, pos, wend, verify_crc)
        except KBatchError as e:
            if e.position is not None and e.position > pos:  # the whole batches before the bad header first
                s = core.scan_batches(buf, pos, e.position, verify_crc)
                if len(s["position"]):
                    yield s
            raise
        if s["valid_bytes"] == pos:  # the next batch is larger than the window, or truncated
            if wend == n:
                return pos
            (size,) = struct.unpack_from(">i", buf, pos + W.SIZE_OFFSET)
            need = size + W.LOG_OVERHEAD
            if pos + need > n:
                return int(core.scan_batches(buf, pos, n, verify_crc)["valid_bytes"])
            s = core.scan_batches(buf, pos, pos + need, verify_crc)
        yield s
        pos = int(s["valid_bytes"])
    return pos


class HeaderScan:
    """A header scan (scan_headers, kbatch.record.file_records.scan_windows / scan_buffer,
    FileRecords.scan) as an iterator that ends cleanly: loop over its windows, then read where it
    stopped, instead of draining the generator by hand for its StopIteration.value.

    - `end`: where the complete batches end (while the loop runs: where those of the windows
      handed out so far end);
    - `error`: with stop_on_error=True, the framing error (a header the kernel rejects, a segment
      past Kafka's limit) that ended the scan, instead of raising it; a StorageError (the file
      itself failed: closed, changed, unreadable) is always raised;
    - `complete`: the scan ended without an error (bytes after `end` are then a partial batch, or
      none).

    After an error, `end` is where the bad batch's header starts (the scan hands out every whole
    batch before it); error.position is the byte it found wrong.
    Leaving the loop early leaves the scan open: close() (or a `with` block) ends it now, so a
    scan that reuses its buffers gives them back."""

    __slots__ = ("_scan", "end", "error", "done", "stop_on_error")

    def __init__(self, scan: Generator[dict[str, Any], None, int], start: int = 0, *,
                 stop_on_error: bool = False) -> None:
        self._scan = scan
        self.end = start
        self.error: KBatchError | None = None
        self.done = False
        self.stop_on_error = stop_on_error

    def __iter__(self) -> HeaderScan:
        return self

    def __next__(self) -> dict[str, Any]:
        # StopIteration carries `end`, as the scan generators return it (`yield from` one gives it)
        if self.done:
            raise StopIteration(self.end)
        try:
            s = next(self._scan)
        except StopIteration as stop:
            self.done = True
            self.end = int(stop.value)
            raise StopIteration(self.end) from None
        except KBatchError as e:
            self.done = True
            if not self.stop_on_error or isinstance(e, StorageError):
                raise
            self.error = e
            raise StopIteration(self.end) from None
        if len(s["position"]):
            self.end = int(s["position"][-1] + s["size"][-1])
        return s

    @property
    def complete(self) -> bool:
        return self.done and self.error is None

    def drain(self) -> int:
        """Run the scan to its end; returns `end`."""
        for _ in self:
            pass
        return self.end

    def close(self) -> None:
        self.done = True
        self._scan.close()

    def __enter__(self) -> HeaderScan:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def iter_buffer_batches(data: Buffer, verify_crc: bool = True, *, strict: bool = True,
                        max_decompressed_bytes: int = W.DEFAULT_MAX_DECOMPRESSED_BYTES
                        ) -> Iterator[Batch]:
    """iter_batches over a buffer (kbatch.record.file_records.iter_batches takes files too).

    verify_crc: raise CrcMismatchError for a batch whose stored CRC is wrong.
    strict: raise TruncatedDataError for a partial last batch; strict=False stops before it
    silently, as Kafka's FileRecords does (see MemoryRecords.valid_bytes).
    Yields RecordBatch (magic 2) and LegacyRecordBatch (magic 0/1) objects.
    """
    from .legacy import LegacyRecordBatch

    buf = as_view(data)
    scan = HeaderScan(scan_headers(buf, 0, None, verify_crc))
    for s in scan:
        cols = [s[name].tolist() for name in ("position", "size", "magic", "base_offset", "last_offset",
                                               "partition_leader_epoch", "crc", "crc_valid", "attributes",
                                               "first_timestamp", "max_timestamp", "producer_id",
                                               "producer_epoch", "base_sequence", "record_count")]
        for (pos, size, magic, base, last, ple, crc, ok, attrs, first_ts, max_ts, pid, epoch, seq,
             count) in zip(*cols):
            if verify_crc and not ok:
                computed = (_backend.core.crc32c(buf[pos + W.ATTRIBUTES_OFFSET:pos + size]) if magic == 2
                            else _legacy_crc(buf, pos, size))
                raise CrcMismatchError(stored=crc, computed=computed, position=pos, base_offset=base)
            if magic == 2:
                yield RecordBatch(buf, pos, size, base, last, ple, crc, attrs, first_ts, max_ts, pid, epoch, seq,
                                  count, max_decompressed_bytes)
            else:
                yield LegacyRecordBatch(buf, pos, size, magic, base, crc, attrs & 0xFF, first_ts,
                                        max_decompressed_bytes, verify_crc)
    if strict and scan.end < len(buf):
        raise truncation_error(buf, scan.end)


def _is_file_object(data: object) -> TypeGuard[BinaryIO]:
    """A seekable binary file object that is not itself a buffer (an mmap is both: a buffer)."""
    if not (hasattr(data, "read") and hasattr(data, "seek")):
        return False
    try:
        memoryview(cast(Any, data)).release()
    except TypeError:
        return True
    return False


def _legacy_crc(buf: memoryview, pos: int, size: int) -> int:
    import zlib
    return zlib.crc32(buf[pos + W.LOG_OVERHEAD + W.LEGACY_MAGIC_OFFSET:pos + size])


# ------------------------------------------------------------------------------------ after the last whole batch
_LENGTH = struct.Struct(">i")  # a batch's length field
_MIN_FRAME = W.RECORD_OVERHEAD_V0  # the smallest length field any magic allows
_RESYNC_CHUNK = 1 << 20  # candidates tested a MiB at a time: one numpy pass per chunk, few Python steps


def _valid_batch_at(read: Callable[[int, int], Any], position: int, size: int) -> bool:
    """Whether one complete batch whose CRC holds starts at `position`."""
    head = bytes(read(position, W.LOG_OVERHEAD))
    if len(head) < W.LOG_OVERHEAD:
        return False
    n = _LENGTH.unpack_from(head, W.SIZE_OFFSET)[0] + W.LOG_OVERHEAD
    if n <= W.LOG_OVERHEAD or position + n > size:
        return False
    buf = read(position, n)
    try:
        s = _backend.core.scan_batches(buf, 0, n, True)
    except KBatchError:
        return False
    return len(s["position"]) == 1 and int(s["valid_bytes"]) == n and bool(s["crc_valid"][0])


def next_batch_start(read: Callable[[int, int], Any], size: int, start: int, low_offset: int,
                     high_offset: int) -> int | None:
    """The first byte >= start where a complete batch whose CRC holds begins, with an offset field in
    [low_offset, high_offset] (the offsets this segment can still hold); None when there is none.
    Candidates (a magic byte 0-2, a plausible length and offset) are found a chunk at a time with
    numpy; each is confirmed by framing it and checking its CRC."""
    pos = start
    while size - pos > W.HEADER_SIZE_UP_TO_MAGIC:
        n = min(_RESYNC_CHUNK + W.LOG_OVERHEAD + W.HEADER_SIZE_UP_TO_MAGIC, size - pos)
        a = np.frombuffer(bytes(read(pos, n)), dtype=np.uint8)
        span = min(_RESYNC_CHUNK, n - W.HEADER_SIZE_UP_TO_MAGIC + 1)  # candidates starting in [pos, pos + span)
        cand = np.flatnonzero(a[W.MAGIC_OFFSET:W.MAGIC_OFFSET + span] <= 2)
        if len(cand):
            off = np.zeros(len(cand), dtype=np.uint64)
            for k in range(8):
                off = (off << np.uint64(8)) | a[cand + k].astype(np.uint64)
            length = np.zeros(len(cand), dtype=np.int64)
            for k in range(W.SIZE_OFFSET, W.LOG_OVERHEAD):
                length = (length << 8) | a[cand + k].astype(np.int64)
            length = np.where(length >= 1 << 31, length - (1 << 32), length)
            signed = off.view(np.int64)
            ok = ((signed >= low_offset) & (signed <= high_offset) & (length >= _MIN_FRAME)
                  & (pos + cand + W.LOG_OVERHEAD + length <= size))
            for q in cand[ok].tolist():
                if _valid_batch_at(read, pos + int(q), size):
                    return pos + int(q)
        pos += span
    return None




def incomplete_batch(read: Callable[[int, int], Any], size: int, position: int, where: str = "the data") -> str:
    """What the bytes from `position` (where the whole batches stop) to `size` are, said from what
    is there: the one home of this message (readers, recovery, reindex, validate, the cleaner).
    A length field that runs past the end with a valid batch behind it is a bad length field in
    the middle of the data; with none behind it, a partial batch at the end (a torn write)."""
    left = size - position
    if left < W.LOG_OVERHEAD:
        return (f"a partial batch at the end of {where}: {left} bytes at byte {position}, fewer than a batch's "
                f"offset and length fields ({W.LOG_OVERHEAD} bytes)")
    n = _LENGTH.unpack_from(bytes(read(position + W.SIZE_OFFSET, 4)), 0)[0]
    if left >= W.HEADER_SIZE_UP_TO_MAGIC:
        magic = bytes(read(position + W.MAGIC_OFFSET, 1))[0]
        if magic > 2:  # not the start of a batch at all (a torn write leaves one's first bytes)
            return (f"{left} bytes at byte {position} of {where} are not a batch: magic byte {magic}, length "
                    f"field {n}")
    if n < _MIN_FRAME:
        return (f"batch length {n} at byte {position} of {where} is smaller than any batch ({_MIN_FRAME} bytes): "
                f"a bad length field")
    if n + W.LOG_OVERHEAD <= left:  # the header itself was cut short of the magic byte
        return f"{left} bytes at byte {position} of {where} are not a complete batch"
    behind = next_batch_start(read, size, position + 1, W.INT64_MIN, W.INT64_MAX)
    if behind is not None:
        return (f"batch length {n} at byte {position} of {where} runs past its end ({size} bytes), but a valid "
                f"batch starts at byte {behind}: a bad length field, not a partial batch")
    return (f"a partial batch at the end of {where}: batch length {n} at byte {position} runs past its end "
            f"({size} bytes; {left - W.LOG_OVERHEAD} of the {n} bytes are there)")


def is_partial_tail(description: str) -> bool:
    """Whether an incomplete_batch description is a partial batch at the end (a torn write: the
    one thing a reader of the last segment ignores), not a bad length field or bytes that are
    not a batch."""
    return description.startswith("a partial batch at the end of ")



def truncation_error(buf: bytes | memoryview, valid: int) -> TruncatedDataError:
    """The error for bytes after the last whole batch of a buffer, saying what they are
    (incomplete_batch: a partial batch at the end, a bad length field, or not a batch)."""
    view = memoryview(buf)
    left = len(view) - valid
    if left >= W.LOG_OVERHEAD:
        expected = f"{_LENGTH.unpack_from(view, valid + W.SIZE_OFFSET)[0] + W.LOG_OVERHEAD} bytes for the batch"
    else:
        expected = f"at least {W.HEADER_SIZE_UP_TO_MAGIC} bytes of batch header"
    return TruncatedDataError(incomplete_batch(lambda p, n: view[p:p + n], len(view), valid), position=valid,
                              expected=expected, found=f"{left} bytes")


class MemoryRecords:
    """A buffer of batches (Kafka's MemoryRecords / FileRecords view of bytes).

    A partial last batch is not an error here: `valid_bytes` says where complete batches end and
    `truncated_bytes` how many bytes follow, as Kafka's FileRecords reports them.
    """

    def __init__(self, data: Buffer, *, verify_crc: bool = True,
                 max_decompressed_bytes: int = W.DEFAULT_MAX_DECOMPRESSED_BYTES) -> None:
        self._buf = as_view(data)
        self.verify_crc = verify_crc
        self.max_decompressed_bytes = max_decompressed_bytes
        self._valid: int | None = None

    @property
    def size_in_bytes(self) -> int:
        return len(self._buf)

    @property
    def valid_bytes(self) -> int:
        if self._valid is None:
            self._valid = HeaderScan(scan_headers(self._buf)).drain()
        return self._valid

    @property
    def truncated_bytes(self) -> int:
        return len(self._buf) - self.valid_bytes

    def batches(self, *, strict: bool = False) -> Iterator[Batch]:
        return iter_buffer_batches(self._buf, self.verify_crc, strict=strict,
                                   max_decompressed_bytes=self.max_decompressed_bytes)

    def __iter__(self) -> Iterator[Batch]:
        return self.batches()

    def records(self) -> Iterator[Record]:
        for b in self.batches():
            yield from b
__all__ = ["Batch", "RecordBatch", "MemoryRecords", "iter_buffer_batches", "scan_headers", "HeaderScan", "as_view",
           "truncation_error", "incomplete_batch", "is_partial_tail", "next_batch_start"]
