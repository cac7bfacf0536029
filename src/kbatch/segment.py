"""Segment files: FileRecords (a mapped .log) and LogSegment (.log + .index + .timeindex + .txnindex).

Reading follows Kafka's FileRecords / LogSegment: a partial last batch is not an error (its bytes
are reported), offset and timestamp lookups go index first, then scan batch headers from the
index's position (kafka-format.md §5.1, §5.2, §5.4). `build_indexes` holds the broker's indexing
rules in one place; recovery, `rebuild_indexes`, `verify_indexes` and the writer all follow it.
"""
from __future__ import annotations

import logging
import mmap
import os
import struct
import time
from typing import NamedTuple

import numpy as np

from . import _backend
from . import _files
from . import _wire as W
from .batch import RecordBatch, scan_headers
from .errors import CrcMismatchError, InvalidOffsetError, KBatchError
from .index import OffsetIndex, TimeIndex, TransactionIndex

log = logging.getLogger("kbatch.segment")

_WINDOW = 16 * 1024 * 1024
_FIRST_WINDOW = 64 * 1024  # lookups usually end within a few batches of the index entry


class LogOffsetPosition(NamedTuple):
    offset: int
    position: int
    size: int


class TimestampAndOffset(NamedTuple):
    """A lookup answer: the record's timestamp, offset and its batch's leader epoch (None if unknown)."""

    timestamp: int
    offset: int
    leader_epoch: int | None


def _epoch(ple: int) -> int | None:
    return None if ple < 0 else int(ple)


def _batch_at(buf, s, i):
    """A RecordBatch / LegacyRecordBatch for row i of a scan."""
    pos, size, magic = int(s["position"][i]), int(s["size"][i]), int(s["magic"][i])
    if magic == 2:
        return RecordBatch(buf, pos, size, int(s["base_offset"][i]), int(s["last_offset"][i]),
                           int(s["partition_leader_epoch"][i]), int(s["crc"][i]), int(s["attributes"][i]),
                           int(s["first_timestamp"][i]), int(s["max_timestamp"][i]), int(s["producer_id"][i]),
                           int(s["producer_epoch"][i]), int(s["base_sequence"][i]), int(s["record_count"][i]))
    from .legacy import LegacyRecordBatch
    return LegacyRecordBatch(buf, pos, size, magic, int(s["base_offset"][i]), int(s["crc"][i]),
                             int(s["attributes"][i]) & 0xFF, int(s["first_timestamp"][i]), verify_crc=False)


def time_floor(magic: int, attributes: int) -> int:
    """Below which a batch's max timestamp is ignored by the time index (DESIGN.md decision 5):
    -1 as in Kafka, Long.MIN_VALUE for extended (bit 7) batches so historical data is indexed."""
    if magic == 2 and attributes & W.TIMESTAMP_EXTENDED_FLAG_MASK:
        return W.INT64_MIN
    return W.NO_TIMESTAMP


class MaxTimestampTracker:
    """maxTimestampSoFar / shallowOffsetOfMaxTimestampSoFar: only a strictly larger batch max
    timestamp moves it, and the offset is that batch's last offset. `timestamp` None = none yet."""

    __slots__ = ("timestamp", "offset")

    def __init__(self, timestamp=None, offset=None):
        self.timestamp = timestamp
        self.offset = offset

    def update(self, max_ts: int, last_offset: int, magic: int, attributes: int) -> None:
        if max_ts > time_floor(magic, attributes) and (self.timestamp is None or max_ts > self.timestamp):
            self.timestamp = max_ts
            self.offset = last_offset

    def update_rows(self, s) -> None:
        for ts, off, magic, attrs in zip(s["max_timestamp"].tolist(), s["last_offset"].tolist(),
                                         s["magic"].tolist(), s["attributes"].tolist()):
            self.update(ts, off, magic, attrs)


class IndexBuild(NamedTuple):
    """What the broker's recovery would write for a .log: index bytes, time index bytes, the
    valid byte count, the max timestamp tracker, the last offset (None if no batch), and the error
    that stopped the scan early (None when the whole file was read)."""

    index: bytes
    timeindex: bytes
    valid_bytes: int
    max_timestamp: int | None
    offset_of_max_timestamp: int | None
    last_offset: int | None
    error: KBatchError | None
    final_time_entry: bool  # whether the last .timeindex entry is the close-time one (not periodic)
    last_indexed_position: int


_OFF = struct.Struct(">ii")
_TIME = struct.Struct(">qi")


def build_indexes(buf, base_offset: int, index_interval_bytes: int = W.DEFAULT_INDEX_INTERVAL_BYTES, *,
                  verify_crc: bool = True, stop_on_error: bool = False) -> IndexBuild:
    """Index a .log buffer as LogSegment.recover does (kafka-format.md §5.1-5.2):
    before each batch, if (its position - the last indexed position) > interval, add
    (batch last offset, batch position) to .index and (maxTimestampSoFar, offsetOfMax) to
    .timeindex when the timestamp grew; the first batch is never indexed; a final time entry at
    the end. A partial last batch ends the scan. A corrupt batch raises, or with stop_on_error ends
    the scan there (recovery truncates at it)."""
    index = bytearray()
    timeindex = bytearray()
    tracker = MaxTimestampTracker()
    last_indexed_pos = 0
    last_idx_off = None
    last_time_ts = None
    last_offset = None
    error = None
    gen = scan_headers(buf, 0, None, False)
    valid = 0
    try:
        while True:
            try:
                s = next(gen)
            except StopIteration as stop:
                valid = stop.value
                break
            cols = [s[k].tolist() for k in ("position", "size", "magic", "last_offset", "max_timestamp",
                                            "attributes", "base_offset")]
            for pos, size, magic, last, max_ts, attrs, first in zip(*cols):
                if verify_crc:
                    _check_crc(buf, pos, size, magic, first)
                rel = last - base_offset
                if not 0 <= rel <= W.INT32_MAX:
                    raise InvalidOffsetError("Batch offset out of the segment's int32 relative range",
                                             expected=f"{base_offset} <= offset <= {base_offset + W.INT32_MAX}",
                                             found=last, position=pos)
                if last_offset is not None and last <= last_offset:
                    raise InvalidOffsetError("Offsets go backwards in the log", expected=f"> {last_offset}",
                                             found=last, position=pos, base_offset=first)
                tracker.update(max_ts, last, magic, attrs)
                if pos - last_indexed_pos > index_interval_bytes:
                    index += _OFF.pack(rel, pos)
                    last_idx_off = last
                    if tracker.timestamp is not None and (last_time_ts is None or tracker.timestamp > last_time_ts):
                        timeindex += _TIME.pack(tracker.timestamp, tracker.offset - base_offset)
                        last_time_ts = tracker.timestamp
                    last_indexed_pos = pos
                last_offset = last
                valid = pos + size
    except KBatchError as e:
        if not stop_on_error:
            raise
        error = e
    del last_idx_off
    final = tracker.timestamp is not None and (last_time_ts is None or tracker.timestamp > last_time_ts)
    if final:
        timeindex += _TIME.pack(tracker.timestamp, tracker.offset - base_offset)
    return IndexBuild(bytes(index), bytes(timeindex), valid, tracker.timestamp, tracker.offset, last_offset, error,
                      final, last_indexed_pos)


def _check_crc(buf, pos, size, magic, base):
    if magic == 2:
        (stored,) = struct.unpack_from(">I", buf, pos + W.CRC_OFFSET)
        computed = _backend.core.crc32c(buf[pos + W.ATTRIBUTES_OFFSET:pos + size])
    else:
        import zlib
        (stored,) = struct.unpack_from(">I", buf, pos + W.LOG_OVERHEAD)
        computed = zlib.crc32(buf[pos + W.LOG_OVERHEAD + W.LEGACY_MAGIC_OFFSET:pos + size])
    if stored != computed:
        raise CrcMismatchError(stored=stored, computed=computed, position=pos, base_offset=base)


class FileRecords:
    """A `.log` file mapped read-only (Kafka's FileRecords): bounded memory at any size.

    A writable FileRecords also appends; its map is refreshed lazily after writes.
    """

    def __init__(self, path, *, writable: bool = False):
        self.path = os.fspath(path)
        self.writable = writable
        # unbuffered: an append is in the OS as soon as append() returns (a process crash keeps it)
        self._file = open(self.path, "r+b" if writable else "rb", buffering=0)
        self._size = os.fstat(self._file.fileno()).st_size
        self._map = None
        self._map_size = -1

    @classmethod
    def open(cls, path, *, writable: bool = False) -> "FileRecords":
        return cls(path, writable=writable)

    @property
    def size_in_bytes(self) -> int:
        return self._size

    def __len__(self):
        return self._size

    def buffer(self):
        """The file's bytes (an mmap, or b"" when empty). Views into it stay valid after appends."""
        if self._map_size != self._size:
            self._map = mmap.mmap(self._file.fileno(), 0, access=mmap.ACCESS_READ) if self._size else b""
            self._map_size = self._size
        return self._map

    # ---- reading
    def headers(self, start: int = 0, verify_crc: bool = False, first_window: int = _WINDOW):
        return scan_headers(self.buffer(), start, None, verify_crc, first_window)

    @property
    def valid_bytes(self) -> int:
        """Where complete batches end; bytes after it are a partial (torn) batch."""
        gen = self.headers()
        while True:
            try:
                next(gen)
            except StopIteration as stop:
                return stop.value

    @property
    def truncated_bytes(self) -> int:
        return self._size - self.valid_bytes

    def batches(self, start: int = 0, verify_crc: bool = True):
        """Complete batches from byte `start` (RecordBatch / LegacyRecordBatch, positions absolute)."""
        buf = self.buffer()
        for s in self.headers(start, verify_crc):
            ok = s["crc_valid"].tolist()
            for i in range(len(ok)):
                b = _batch_at(buf, s, i)
                if verify_crc and not ok[i]:
                    b.ensure_valid()
                yield b

    def __iter__(self):
        return self.batches()

    def search_for_offset_with_size(self, target_offset: int, starting_position: int = 0):
        """The first batch from `starting_position` whose last offset >= target, as
        (last offset, position, size), or None (FileRecords.searchForOffsetWithSize)."""
        for s in self.headers(starting_position, first_window=_FIRST_WINDOW):
            hit = np.flatnonzero(s["last_offset"] >= target_offset)
            if len(hit):
                i = int(hit[0])
                return LogOffsetPosition(int(s["last_offset"][i]), int(s["position"][i]), int(s["size"][i]))
        return None

    def search_for_timestamp(self, target: int, starting_position: int = 0, starting_offset: int = 0):
        """The first record with timestamp >= target and offset >= starting_offset, scanning from
        `starting_position` and skipping batches whose max timestamp < target
        (FileRecords.searchForTimestamp). Records without a timestamp never match."""
        buf = self.buffer()
        for s in self.headers(starting_position, first_window=_FIRST_WINDOW):
            cand = np.flatnonzero((s["max_timestamp"] >= target) & (s["last_offset"] >= starting_offset))
            for i in cand.tolist():
                hit = first_record_at_or_after(_batch_at(buf, s, i), target, starting_offset)
                if hit is not None:
                    return hit
        return None

    def largest_timestamp_after(self, starting_position: int) -> int:
        """Largest batch max timestamp from a position (Kafka's version ignores negatives)."""
        best = W.NO_TIMESTAMP
        for s in self.headers(starting_position):
            if len(s["max_timestamp"]):
                best = max(best, int(s["max_timestamp"].max()))
        return best

    # ---- writing
    def append(self, data) -> int:
        """Append bytes at the end; returns the position they start at."""
        if not self.writable:
            raise KBatchError(f"{self.path} is open read-only", expected="a writable log", found="read-only")
        pos = self._size
        self._file.seek(pos)
        self._file.write(data)
        self._size += len(data)
        return pos

    def flush(self) -> None:
        if self.writable:
            self._file.flush()
            os.fsync(self._file.fileno())

    def truncate_to(self, size: int) -> int:
        """Cut the file to `size` bytes; returns how many bytes went."""
        if not self.writable:
            raise KBatchError(f"{self.path} is open read-only", expected="a writable log", found="read-only")
        gone = self._size - size
        self._file.truncate(size)
        self._file.flush()
        os.fsync(self._file.fileno())
        self._size = size
        return gone

    def close(self) -> None:
        self.flush()
        self._file.close()
        m, self._map = self._map, None
        self._map_size = -1
        if isinstance(m, mmap.mmap):
            try:
                m.close()
            except BufferError:  # batches still point into it; it closes when they go
                pass


def first_record_at_or_after(batch, target: int, starting_offset: int = 0):
    """(timestamp, offset, leader epoch) of the batch's first record with ts >= target and
    offset >= starting_offset, or None."""
    if batch.magic == 2 and batch.timestamp_type == W.TimestampType.LOG_APPEND_TIME:
        # every record carries the batch's max timestamp: no need to decode
        if batch.max_timestamp != batch.no_timestamp and batch.max_timestamp >= target:
            if batch.base_offset >= starting_offset and batch.record_count > 0 and not batch.is_control:
                return TimestampAndOffset(batch.max_timestamp, batch.base_offset, _epoch(batch.partition_leader_epoch))
    for rec in batch:
        if rec.timestamp is not None and rec.timestamp >= target and rec.offset >= starting_offset:
            return TimestampAndOffset(rec.timestamp, rec.offset, _epoch(batch.partition_leader_epoch))
    return None


class LogSegment:
    """One segment: the .log and its indexes, named by the 20-digit base offset.

    Opened for reading, indexes are mapped from disk (or built in memory when missing or corrupt;
    `index_problem` says why). Opened writable (the active segment of a Log), it keeps the
    broker's append state: max timestamp so far, bytes since the last index entry, the rolling
    timestamp and creation time used by segment.ms.
    """

    def __init__(self, directory, base_offset: int, *, writable: bool = False,
                 index_interval_bytes: int = W.DEFAULT_INDEX_INTERVAL_BYTES,
                 max_index_size: int = W.DEFAULT_SEGMENT_INDEX_BYTES, created_ms: int | None = None,
                 roll_jitter_ms: int = 0, _create: bool = False):
        self.directory = os.fspath(directory)
        self.base_offset = base_offset
        self.index_interval_bytes = index_interval_bytes
        self.max_index_size = max_index_size
        self.writable = writable
        self.roll_jitter_ms = roll_jitter_ms
        self.created_ms = int(time.time() * 1000) if created_ms is None else created_ms
        self.index_problem = None
        self.recovered_bytes_truncated = 0
        if _create:
            open(self.path(_files.LOG_SUFFIX), "xb").close()
        self.log = FileRecords(self.path(_files.LOG_SUFFIX), writable=writable)
        self._offset_index = None
        self._time_index = None
        self._txn_index = None
        self._tracker = None            # MaxTimestampTracker, loaded lazily
        self.bytes_since_last_index_entry = 0
        self.rolling_based_timestamp = None
        if _create:
            self._tracker = MaxTimestampTracker()
            self._offset_index = OffsetIndex.writable(self.path(".index"), base_offset, max_index_size=max_index_size)
            self._time_index = TimeIndex.writable(self.path(".timeindex"), base_offset, max_index_size=max_index_size)

    def path(self, suffix: str) -> str:
        return _files.segment_path(self.directory, self.base_offset, suffix)

    # ---- construction
    @classmethod
    def open(cls, directory, base_offset: int, **kw) -> "LogSegment":
        return cls(directory, base_offset, **kw)

    @classmethod
    def create(cls, directory, base_offset: int, **kw) -> "LogSegment":
        return cls(directory, base_offset, writable=True, _create=True, **kw)

    def _load_indexes(self) -> None:
        """Map .index/.timeindex; rebuild them in memory when missing or failing the sanity check."""
        try:
            oi = OffsetIndex.open(self.path(".index"), self.base_offset, max_index_size=self.max_index_size)
            ti = TimeIndex.open(self.path(".timeindex"), self.base_offset, max_index_size=self.max_index_size)
            oi.sanity_check()
            ti.sanity_check()
        except (OSError, KBatchError) as e:
            self.index_problem = e
            built = build_indexes(self.log.buffer(), self.base_offset, self.index_interval_bytes,
                                  verify_crc=False, stop_on_error=True)
            oi = OffsetIndex(self.base_offset, built.index, max_index_size=self.max_index_size)
            ti = TimeIndex(self.base_offset, built.timeindex, max_index_size=self.max_index_size)
        self._offset_index, self._time_index = oi, ti

    @property
    def offset_index(self) -> OffsetIndex:
        if self._offset_index is None:
            self._load_indexes()
        return self._offset_index

    @property
    def time_index(self) -> TimeIndex:
        if self._time_index is None:
            self._load_indexes()
        return self._time_index

    @property
    def txn_index(self) -> TransactionIndex:
        if self._txn_index is None:
            p = self.path(".txnindex")
            self._txn_index = (TransactionIndex.open(p, self.base_offset) if os.path.exists(p)
                               else TransactionIndex(self.base_offset, path=p if self.writable else None))
        return self._txn_index

    def use_indexes(self, offset_index: OffsetIndex, time_index: TimeIndex, tracker: MaxTimestampTracker) -> None:
        """Install indexes and the max-timestamp state (after a rebuild or recovery)."""
        for old in (self._offset_index, self._time_index):
            if old is not None and old not in (offset_index, time_index):
                old.close()
        self._offset_index, self._time_index, self._tracker = offset_index, time_index, tracker

    # ---- facts
    @property
    def size(self) -> int:
        return self.log.size_in_bytes

    def _max_tracker(self) -> MaxTimestampTracker:
        if self._tracker is None:
            # the time index's last entry, then any batches after the last offset-index entry (a
            # broker's active segment has no final time entry yet)
            last = self.time_index.last_entry
            t = MaxTimestampTracker(*(last if last is not None else (None, None)))
            oi = self.offset_index
            start = oi.entry(oi.entries - 1).position if oi.entries else 0
            for s in self.log.headers(start):
                t.update_rows(s)
            self._tracker = t
        return self._tracker

    @property
    def max_timestamp_so_far(self) -> int | None:
        """The largest batch max timestamp indexed (decision 5 floors), None when there is none."""
        return self._max_tracker().timestamp

    @property
    def offset_of_max_timestamp_so_far(self) -> int | None:
        return self._max_tracker().offset

    def last_modified_ms(self) -> int:
        return _files.mtime_ms(self.log.path)

    @property
    def largest_timestamp(self) -> int:
        """max_timestamp_so_far when known, else the .log's last-modified time (LogSegment.largestTimestamp;
        an extended segment's negative max counts as known, DESIGN.md decision 5)."""
        ts = self.max_timestamp_so_far
        return self.last_modified_ms() if ts is None else ts

    def read_next_offset(self) -> int:
        """The offset after the segment's last batch (its base offset when empty)."""
        oi = self.offset_index
        start = oi.entry(oi.entries - 1).position if oi.entries else 0
        nxt = self.base_offset
        for s in self.log.headers(start):
            if len(s["last_offset"]):
                nxt = int(s["last_offset"][-1]) + 1
        return nxt

    # ---- lookups
    def translate_offset(self, offset: int, starting_file_position: int = 0):
        """The first batch with last offset >= `offset` as (last offset, position, size), or None
        (LogSegment.translateOffset: index lookup, then scan)."""
        mapping = self.offset_index.lookup(offset)
        return self.log.search_for_offset_with_size(offset, max(mapping.position, starting_file_position))

    def find_offset_by_timestamp(self, target: int, starting_offset: int = 0):
        """The first record with timestamp >= target and offset >= starting_offset, as
        TimestampAndOffset, or None (LogSegment.findOffsetByTimestamp)."""
        ts_off = self.time_index.lookup(target)
        position = self.offset_index.lookup(max(ts_off.offset, starting_offset)).position
        return self.log.search_for_timestamp(target, position, starting_offset)

    def find_offsets_by_timestamps(self, targets: np.ndarray, starting_offset: int = 0):
        """find_offset_by_timestamp for many targets at once -> (offsets, timestamps, epochs) int64
        arrays, offset -1 where there is no record. Headers are scanned once, window by window,
        and each batch holding an answer is decoded once."""
        targets = np.asarray(targets, dtype=np.int64)
        order = np.argsort(targets, kind="stable")
        ts_sorted = targets[order]
        n = len(targets)
        out_off = np.full(n, -1, dtype=np.int64)
        out_ts = np.full(n, W.NO_TIMESTAMP, dtype=np.int64)
        out_ep = np.full(n, -1, dtype=np.int64)
        if n == 0:
            return out_off, out_ts, out_ep
        # index first: nothing before the lowest target's index position can hold an answer
        lo_pos = int(self.offset_index.lookup(max(self.time_index.lookup(int(ts_sorted[0])).offset,
                                                  starting_offset)).position)
        buf = self.log.buffer()
        running = W.INT64_MIN
        k = 0  # next unresolved sorted target
        for s in self.log.headers(lo_pos):
            if k >= n:
                break
            mx = np.where(s["last_offset"] >= starting_offset, s["max_timestamp"], W.INT64_MIN)
            pmax = np.maximum.accumulate(np.maximum(mx, running)) if len(mx) else mx
            if not len(pmax):
                continue
            running = int(pmax[-1])
            # sorted targets <= running are answered in this window: row = first with prefix max >= t
            kend = int(np.searchsorted(ts_sorted, running, side="right"))
            rows = np.searchsorted(pmax, ts_sorted[k:kend], side="left")
            # uncompressed v2 batches: one find_timestamps_v2 kernel call for the whole window
            v2 = (s["magic"][rows] == 2) & ((s["attributes"][rows] & W.COMPRESSION_CODEC_MASK) == 0)
            if v2.any():
                self._answer_in_sections(buf, s, rows[v2], k + np.flatnonzero(v2), ts_sorted, order,
                                         starting_offset, out_off, out_ts, out_ep)
            # the others (compressed, legacy) batch by batch; rows is non-decreasing (targets are
            # sorted), so each batch's targets are one slice
            rest = np.flatnonzero(~v2)
            uniq, first, counts = np.unique(rows[rest], return_index=True, return_counts=True)
            for row, f0, c in zip(uniq.tolist(), first.tolist(), counts.tolist()):
                sel = k + rest[f0:f0 + c]
                self._answer_in_batch(_batch_at(buf, s, row), ts_sorted, sel, order, starting_offset,
                                      out_off, out_ts, out_ep)
            k = kend
        # a candidate batch without a matching record (no timestamps, offsets below the start):
        # finish those one by one from the slow path
        for j in np.flatnonzero(out_off[order[:k]] < 0).tolist():
            hit = self.find_offset_by_timestamp(int(ts_sorted[j]), starting_offset)
            if hit is not None:
                i = order[j]
                out_off[i], out_ts[i], out_ep[i] = hit.offset, hit.timestamp, -1 if hit.leader_epoch is None else hit.leader_epoch
        return out_off, out_ts, out_ep

    @staticmethod
    def _answer_in_sections(buf, s, rows, sel, ts_sorted, order, starting_offset, out_off, out_ts, out_ep):
        """Answer sorted targets ts_sorted[sel] from the uncompressed v2 batches at scan rows `rows`
        (one per target, non-decreasing) with one find_timestamps_v2 call: each batch is checked as
        decoding it would check it, but no record object is made."""
        uniq, which = np.unique(rows, return_inverse=True)
        pos = s["position"][uniq]
        offs, stamps = _backend.core.find_timestamps_v2(
            buf, pos + W.RECORDS_OFFSET, pos + s["size"][uniq], s["record_count"][uniq], s["base_offset"][uniq],
            s["first_timestamp"][uniq], s["max_timestamp"][uniq], s["attributes"][uniq], which, ts_sorted[sel],
            starting_offset)
        hit = offs >= 0
        idx = order[sel[hit]]
        out_off[idx], out_ts[idx] = offs[hit], stamps[hit]
        out_ep[idx] = s["partition_leader_epoch"][uniq][which[hit]]

    @staticmethod
    def _answer_in_batch(batch, ts_sorted, sel, order, starting_offset, out_off, out_ts, out_ep):
        epoch = batch.partition_leader_epoch
        if batch.magic == 2 and batch.timestamp_type == W.TimestampType.LOG_APPEND_TIME:
            hit = first_record_at_or_after(batch, int(ts_sorted[sel[0]]), starting_offset)
            if hit is not None:
                idx = order[sel]
                out_off[idx], out_ts[idx], out_ep[idx] = hit.offset, hit.timestamp, epoch
            return
        # first record with ts >= t is the first where the running max reaches t
        run, offs, stamps = [], [], []
        best = None
        for r in batch:
            if r.timestamp is not None and r.offset >= starting_offset:
                best = r.timestamp if best is None or r.timestamp > best else best
                if not run or best > run[-1]:
                    run.append(best)
                    offs.append(r.offset)
                    stamps.append(r.timestamp)
        if not run:
            return
        import bisect
        for i in sel.tolist():
            j = bisect.bisect_left(run, int(ts_sorted[i]))
            if j < len(run):
                o = int(order[i])
                out_off[o], out_ts[o], out_ep[o] = offs[j], stamps[j], epoch

    def max_timestamp_and_offset(self):
        """MAX_TIMESTAMP within this segment: the first record of the batch whose max timestamp is
        the segment's max, whose timestamp equals it; None when the segment has no timestamps."""
        target = self.max_timestamp_so_far
        if target is None:
            return None
        position = self.offset_index.lookup(self.offset_of_max_timestamp_so_far).position
        buf = self.log.buffer()
        for s in self.log.headers(position, first_window=_FIRST_WINDOW):
            for i in np.flatnonzero(s["max_timestamp"] == target).tolist():
                b = _batch_at(buf, s, i)
                for rec in b:
                    if rec.timestamp == target:
                        return TimestampAndOffset(target, rec.offset, _epoch(b.partition_leader_epoch))
        return None

    # ---- writing (active segment)
    def load_first_batch_timestamp(self) -> None:
        """The rolling timestamp after a restart: the first batch's max timestamp (getFirstBatchTimestamp)."""
        if self.rolling_based_timestamp is None:
            for s in self.log.headers(0, first_window=_FIRST_WINDOW):
                if len(s["max_timestamp"]):
                    self.rolling_based_timestamp = int(s["max_timestamp"][0])
                break

    def time_waited_for_roll(self, now_ms: int, message_timestamp: int) -> int:
        """message time minus the rolling timestamp when that is >= 0, else now minus creation time."""
        self.load_first_batch_timestamp()
        if self.rolling_based_timestamp is not None and self.rolling_based_timestamp >= 0:
            return message_timestamp - self.rolling_based_timestamp
        return now_ms - self.created_ms

    def should_roll(self, *, now_ms: int, max_timestamp_in_messages: int, max_offset_in_messages: int,
                    messages_size: int, max_segment_bytes: int, max_segment_ms: int) -> bool:
        """LogSegment.shouldRoll (kafka-format.md §6.3)."""
        reached_roll_ms = (self.time_waited_for_roll(now_ms, max_timestamp_in_messages)
                           > max_segment_ms - self.roll_jitter_ms)
        size = self.size
        return (size > max_segment_bytes - messages_size or (size > 0 and reached_roll_ms)
                or self.offset_index.is_full() or self.time_index.is_full()
                or not 0 <= max_offset_in_messages - self.base_offset <= W.INT32_MAX)

    def append_batch(self, data, last_offset: int, max_timestamp: int, magic: int, attributes: int) -> int:
        """Append one batch (LogSegment.append): bytes to .log, index entries by the
        index.interval.bytes rule. Returns the batch's position."""
        if not self.writable:
            raise KBatchError(f"segment {self.base_offset} is read-only", expected="the active segment",
                              found="a read-only segment")
        rel = last_offset - self.base_offset
        if not 0 <= rel <= W.INT32_MAX:
            raise InvalidOffsetError("Offset out of the segment's int32 relative range",
                                     expected=f"{self.base_offset} <= offset <= {self.base_offset + W.INT32_MAX}",
                                     found=last_offset)
        position = self.log.append(data)
        if position == 0:
            self.rolling_based_timestamp = max_timestamp
        tracker = self._max_tracker()
        tracker.update(max_timestamp, last_offset, magic, attributes)
        if self.bytes_since_last_index_entry > self.index_interval_bytes:
            self.offset_index.append(last_offset, position)
            if tracker.timestamp is not None:
                self.time_index.maybe_append(tracker.timestamp, tracker.offset)
            self.bytes_since_last_index_entry = 0
        self.bytes_since_last_index_entry += len(data)
        return position

    def on_become_inactive(self) -> None:
        """The final time-index entry when the segment stops being active (files stay trimmed)."""
        t = self._max_tracker()
        if t.timestamp is not None and self.writable:
            self.time_index.maybe_append(t.timestamp, t.offset, skip_full_check=True)

    def flush(self) -> None:
        self.log.flush()
        for idx in (self._offset_index, self._time_index):
            if idx is not None:
                idx.flush()

    def close(self) -> None:
        if self.writable:
            self.on_become_inactive()
        self.log.close()
        for idx in (self._offset_index, self._time_index):
            if idx is not None:
                idx.close()

    def delete_files(self) -> None:
        self.close()
        for suffix in (".log", ".index", ".timeindex", ".txnindex"):
            try:
                os.unlink(self.path(suffix))
            except FileNotFoundError:
                pass

    def __repr__(self):
        return f"LogSegment(base_offset={self.base_offset}, size={self.size}, path={self.path('.log')!r})"


__all__ = ["FileRecords", "LogSegment", "LogOffsetPosition", "TimestampAndOffset", "build_indexes",
           "scan_headers", "MaxTimestampTracker"]
