"""LogSegment (.log + .index + .timeindex + .txnindex; the .log is a kbatch.record.file_records.FileRecords).

Reading follows Kafka's FileRecords / LogSegment: a partial last batch is not an error (its bytes
are reported), offset and timestamp lookups go index first, then scan batch headers from the
index's position (kafka-format.md §5.1, §5.2, §5.4). `build_indexes` holds the broker's indexing
rules in one place; recovery, `rebuild_indexes`, `verify_indexes` and the writer all follow it.

Files are never memory-mapped: a .log is read in windows with pread into private buffers, so a
file truncated by another process gives a kbatch error (FileChangedError), never SIGBUS. Scans
that reuse their buffers read the next large window in a thread while the current one is parsed. A segment
opens its .log once and keeps that file: a compaction or retention that replaces or deletes it
later leaves this reader with the old bytes. Index files are read lazily, and only while the .log
at the segment's path is still the file this segment opened (otherwise they may describe a new
generation, and the indexes are built from the opened .log instead).

An index entry is used only after the log agrees with it (the batch it names is where it says,
with the offsets and timestamps it says, in a form a broker of some version wrote:
index_rules.time_entry_form); when the log contradicts an entry, the segment stops trusting its
index files, builds its indexes from the .log, says so in `problems` (and the "kbatch.log.segment"
logger), and answers from the scan.

Lookups check the CRC of every batch they read. When one meets bytes it cannot read (a failed CRC,
a length field that is wrong, bytes that are not a batch), the segment reads the whole .log once
(ReadableScan: after damage it goes on at the next byte where a complete batch with a valid CRC
starts), builds its indexes from the batches that can be read, reports each range it could not
read (`unread`, `problems`: file, byte, size, the offsets around it) and answers over the readable
batches, so an answer is the same whatever lookup found the damage first.
"""
from __future__ import annotations

import logging
import os
import struct
import time
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any, NamedTuple, TypedDict, TypeVar

import numpy as np
import numpy.typing as npt

from .. import _backend
from . import files as _files
from .. import _wire as W
from ..record.batch import scan_headers
from ..record.file_records import (FIRST_WINDOW, WINDOW, MAX_SEGMENT_BYTES, FileRecords, LogOffsetPosition, Rows,
                                   SourceFileRecords, TimestampAndOffset, Window, batch_at, epoch_or_none, shift_error,
                                   first_record_at_or_after, is_partial_tail, iter_file_batches, next_batch_start, open_records,
                                   scan_buffer, scan_windows)
from ..errors import InvalidOffsetError, KBatchError, StorageError
from .index import OffsetIndex, TimeIndex, TransactionIndex
from .index_rules import time_entry_form
from .index_rules import time_floor as time_floor  # re-exported: its home was here (cli/dump_log imports it)
from .index_build import _OFF, _TIME, IndexBuild as IndexBuild, MaxTimestampTracker, build_indexes
from .segment_files import RemoteSegmentFiles, SegmentFiles

_T = TypeVar("_T")
log = logging.getLogger("kbatch.log.segment")

if TYPE_CHECKING:
    from typing_extensions import Unpack

    from .._typing import BytesLike, PathLike
    from .index import TimestampOffset

    from ..record.batch import Batch


_KERNEL_MIN_RECORDS = 32  # below this, decoding the few Record objects costs less than a kernel call
_ONE_TARGET = np.zeros(1, dtype=np.int64)


def _first_in_row(s: Window, i: int, target: int, starting_offset: int) -> TimestampAndOffset | None:
    """first_record_at_or_after for row i of a window: an uncompressed CreateTime v2 batch of many
    records through the find_timestamps_v2 kernel (every record checked, no Record objects), any
    other batch through its records."""
    attrs = int(s["attributes"][i])
    if (s["magic"][i] != 2 or attrs & (W.COMPRESSION_CODEC_MASK | W.TIMESTAMP_TYPE_MASK)
            or s["record_count"][i] < _KERNEL_MIN_RECORDS):
        return first_record_at_or_after(batch_at(s, i), target, starting_offset)
    j = slice(i, i + 1)
    pos = s["position"][j] - s["origin"]
    try:
        offs, stamps = _backend.core.find_timestamps_v2(
            s["buf"], pos + W.RECORDS_OFFSET, pos + s["size"][j], s["record_count"][j], s["base_offset"][j],
            s["first_timestamp"][j], s["max_timestamp"][j], s["attributes"][j], _ONE_TARGET,
            np.array((target,), dtype=np.int64), starting_offset)
    except KBatchError as e:
        raise shift_error(e, s["origin"])  # window positions -> file positions
    if offs[0] < 0:
        return None
    return TimestampAndOffset(int(stamps[0]), int(offs[0]), epoch_or_none(int(s["partition_leader_epoch"][i])))


def _runs(sorted_rows: Rows) -> tuple[Rows, Rows, Rows]:
    """np.unique(.., return_index, return_counts) of a non-decreasing array, without sorting it."""
    if not len(sorted_rows):
        return sorted_rows, sorted_rows, sorted_rows
    first = np.flatnonzero(np.diff(sorted_rows, prepend=sorted_rows[0] - 1))
    return sorted_rows[first], first, np.diff(first, append=len(sorted_rows))


_V2_OFFSETS = struct.Struct(">qiibIhi")  # baseOffset .. lastOffsetDelta
_V2_MAX = struct.Struct(">qiibIhiqq")    # baseOffset .. maxTimestamp


def _header_offsets(head: bytes, available: int) -> tuple[int, int] | None:
    """(base offset, last offset) of the batch whose header starts `head`, or None when these
    bytes cannot start a complete batch of the `available` bytes (wrong size or magic)."""
    if len(head) < W.HEADER_SIZE_UP_TO_MAGIC:
        return None
    offset, size = struct.unpack_from(">qi", head, 0)
    magic = head[W.MAGIC_OFFSET]
    if magic == 2:
        if size + W.LOG_OVERHEAD < W.RECORD_BATCH_OVERHEAD or len(head) < W.RECORD_BATCH_OVERHEAD:
            return None
        delta = _V2_OFFSETS.unpack_from(head, 0)[6]
        last = offset + delta
    elif magic in (0, 1):
        if size < W.RECORD_OVERHEAD_V0:
            return None
        last = offset
    else:
        return None
    if size + W.LOG_OVERHEAD > available:
        return None
    return offset, last


class IndexContradiction(Exception):
    """Internal: an index entry the log does not agree with (the segment falls back to a scan)."""


class SegmentSettings(TypedDict, total=False):
    """A Log's settings for each of its segments (keyword arguments of LogSegment)."""

    index_interval_bytes: int
    max_index_size: int
    created_ms: int | None
    roll_jitter_ms: int


class SegmentOptions(SegmentSettings, total=False):
    """LogSegment's keyword arguments (LogSegment.open / create)."""

    writable: bool
    files: SegmentFiles | None


class SegmentMark(NamedTuple):
    """A writable segment's state before a write, to put it back if the write fails."""

    log_size: int
    index_entries: int
    time_entries: int
    tracker: tuple[int | None, int | None]
    bytes_since_last_index_entry: int
    rolling_based_timestamp: int | None
    writable: bool


# ------------------------------------------------------------------------------------ reading around damage
class SegmentDamaged(Exception):
    """Internal: a lookup's scan met bytes it cannot read (a batch that cannot be framed, a length
    running past the end, a failed CRC); the segment then reads around them (LogSegment.readable)."""


class UnreadRange(NamedTuple):
    """Bytes of a .log that could not be read: `size` bytes from byte `position`, between the
    readable batches ending at offset `after_offset` and starting at `before_offset` (None: none
    before it / none after it in the segment, or not known). `bound`: a timestamp every record in
    it is older than, when a .timeindex entry after it, checked against the readable batches, says
    so (None: it may hold any timestamp)."""

    file: str
    position: int
    size: int
    after_offset: int | None
    before_offset: int | None
    bound: int | None
    message: str
    partial: bool = False   # a partial batch at the end of the file (a torn write: is_partial_tail)
    why: str = ""           # what the bytes are (the error, or incomplete_batch's description)


_READABLE_COLUMNS = ("position", "size", "base_offset", "last_offset", "max_timestamp", "magic", "attributes")


class ReadableScan:
    """Every batch of a .log that can be framed and whose CRC holds, found by reading the whole file
    and, after bytes that cannot be read, going on at the next byte where such a batch starts
    (next_batch_start). `rows`: their header columns; `runs`: the byte ranges of consecutive
    readable batches; `gaps`: (position, size, why) of what lies between."""

    def __init__(self, records: FileRecords, base_offset: int) -> None:
        size = records.size_in_bytes
        parts: dict[str, list[npt.NDArray[np.int64]]] = {k: [] for k in _READABLE_COLUMNS}
        self.gaps: list[tuple[int, int, str, KBatchError | None]] = []
        pos = 0
        last_offset: int | None = None
        while pos < size:
            end = pos
            why, error = "", None
            gen = scan_windows(records.read, size, pos, True, WINDOW)
            try:
                while True:
                    s = next(gen)
                    bad = np.flatnonzero(~s["crc_valid"].astype(bool))
                    n = int(bad[0]) if len(bad) else len(s["position"])  # the readable rows before the first bad one
                    for k in _READABLE_COLUMNS:
                        parts[k].append(np.asarray(s[k][:n], dtype=np.int64))
                    if n:
                        last_offset = int(s["last_offset"][n - 1])
                        end = int(s["position"][n - 1] + s["size"][n - 1])
                    if len(bad):
                        # its length field is not covered by the CRC either: look for the next batch
                        # from the byte after its start rather than from where its length says it ends
                        end = int(s["position"][n])
                        why = (f"the batch at byte {end} (offsets {int(s['base_offset'][n])}..{int(s['last_offset'][n])} "
                               f"by its header) fails its CRC check")
                        break
            except StopIteration as stop:
                end = int(stop.value)
                if end < size:
                    why = records.incomplete(end, "the segment")
            except KBatchError as e:
                if isinstance(e, StorageError):
                    raise
                why, error = str(e), e
            finally:
                gen.close()
            if end >= size:
                break
            low = base_offset if last_offset is None else last_offset + 1
            nxt = next_batch_start(records.read, size, end + 1, low, base_offset + W.INT32_MAX)
            stop_at = size if nxt is None else nxt
            self._gap(end, stop_at - end, why, error)
            pos = stop_at
        self.rows = {k: (np.concatenate(v) if v else np.zeros(0, dtype=np.int64)) for k, v in parts.items()}
        pos_, size_ = self.rows["position"], self.rows["size"]
        breaks = np.flatnonzero(pos_[1:] != pos_[:-1] + size_[:-1]) + 1 if len(pos_) else pos_
        starts = np.concatenate(([0], breaks)).astype(np.intp) if len(pos_) else np.zeros(0, dtype=np.intp)
        ends = np.concatenate((breaks, [len(pos_)])).astype(np.intp) if len(pos_) else starts
        self.runs = [(int(pos_[a]), int(pos_[b - 1] + size_[b - 1])) for a, b in zip(starts.tolist(), ends.tolist())]

    def _gap(self, position: int, size: int, why: str, error: KBatchError | None) -> None:
        if self.gaps and self.gaps[-1][0] + self.gaps[-1][1] == position:  # one range, several reasons
            p, n, w, e = self.gaps[-1]
            self.gaps[-1] = (p, n + size, f"{w}; then {why}" if why and why not in w else w, e or error)
        else:
            self.gaps.append((position, size, why, error))


# ------------------------------------------------------------------------------------ LogSegment
class LogSegment:
    """One segment: the .log and its indexes, named by the 20-digit base offset.

    Opened for reading, indexes are read from disk (or built in memory when missing, corrupt, of
    another generation, or contradicted by the log; `index_problem` says why). Opened writable
    (the active segment of a Log), it keeps the broker's append state: max timestamp so far, bytes
    since the last index entry, the rolling timestamp and creation time used by segment.ms.
    """

    def __init__(self, directory: PathLike, base_offset: int, *, writable: bool = False,
                 index_interval_bytes: int = W.DEFAULT_INDEX_INTERVAL_BYTES,
                 max_index_size: int = W.DEFAULT_SEGMENT_INDEX_BYTES, created_ms: int | None = None,
                 roll_jitter_ms: int = 0, _create: bool = False, files: SegmentFiles | None = None) -> None:
        self.directory = directory if isinstance(directory, str) else os.fspath(directory)
        self.base_offset = base_offset
        self.files = files or SegmentFiles(_files.segment_path(self.directory, base_offset, ""), base_offset)
        self.index_interval_bytes = index_interval_bytes
        self.max_index_size = max_index_size
        self.writable = writable or _create
        self.roll_jitter_ms = roll_jitter_ms
        self.created_ms = int(time.time() * 1000) if created_ms is None else created_ms
        self.index_problem: OSError | KBatchError | None = None
        self.problems: list[str] = []   # what a reader could not trust or read (also logged)
        self.contradictions: list[str] = []   # the problems that are index entries the log contradicts
        self.unread: list[UnreadRange] = []   # the problems that are bytes it could not read
        self.readable: ReadableScan | None = None  # set once the whole .log was read (indexes built from it)
        self.indexes_from_scan = False  # indexes built from the .log itself (nothing to verify)
        self.log = self.files.open_log(writable=writable, create=_create)
        self._offset_index: OffsetIndex | None = None
        self._time_index: TimeIndex | None = None
        self._txn_index: TransactionIndex | None = None
        self._tracker: MaxTimestampTracker | None = None  # loaded lazily
        self.bytes_since_last_index_entry = 0
        self.rolling_based_timestamp: int | None = None
        if _create:
            self._tracker = MaxTimestampTracker()
            self.indexes_from_scan = True
            try:
                self._offset_index = OffsetIndex.writable(self.path(".index"), base_offset,
                                                          max_index_size=max_index_size)
                self._time_index = TimeIndex.writable(self.path(".timeindex"), base_offset,
                                                      max_index_size=max_index_size)
            except BaseException:  # a segment is created whole or not at all
                self.delete_files()
                raise

    def path(self, suffix: str) -> str:
        return self.files.path(suffix)

    # ---- construction
    @classmethod
    def open(cls, directory: PathLike, base_offset: int, **kw: Unpack[SegmentOptions]) -> "LogSegment":
        return cls(directory, base_offset, **kw)

    @classmethod
    def create(cls, directory: PathLike, base_offset: int, **kw: Unpack[SegmentOptions]) -> "LogSegment":
        return cls(directory, base_offset, _create=True, **kw)

    def _read_index_files(self) -> tuple[OffsetIndex, TimeIndex]:
        """The index files as they are now, if they belong to the .log this segment opened."""
        # .timeindex first: the writer adds a time entry only after the offset entry of the same
        # batch, so every time entry read here has its offset entry in the .index read next
        td = self.files.read_index(".timeindex")
        od = self.files.read_index(".index")
        if self.files.log_replaced(self.log):
            raise StorageError("the .log at this path was replaced (compaction?) after this reader opened it; its "
                               "index files belong to the new one", path=self.path(_files.LOG_SUFFIX))
        oi = OffsetIndex(self.base_offset, od, path=self.path(".index"), max_index_size=self.max_index_size)
        ti = TimeIndex(self.base_offset, td, path=self.path(".timeindex"), max_index_size=self.max_index_size)
        oi.sanity_check()
        ti.sanity_check()
        # entries past the bytes this reader sees describe appends made after it opened the .log
        # (or one in flight when it did: its batch runs past the size this reader saw)
        n = oi.entries
        size = self.log.size_in_bytes
        while n and oi.entry(n - 1).position >= size:
            n -= 1
        if n and self._cut_by_snapshot(oi.entry(n - 1).position):
            n -= 1
        if n < oi.entries:
            limit = oi.entry(n - 1).offset if n else self.base_offset - 1
            m = ti.entries
            while m and ti.entry(m - 1).offset > limit:
                m -= 1
            oi.truncate_entries(n)
            ti.truncate_entries(m)
        return oi, ti

    def _cut_by_snapshot(self, position: int) -> bool:
        """Whether a batch header at `position` declares a batch that ends past this reader's size."""
        head = self.log.read(position, W.HEADER_SIZE_UP_TO_MAGIC)
        if len(head) < W.HEADER_SIZE_UP_TO_MAGIC or head[W.MAGIC_OFFSET] not in (0, 1, 2):
            return False  # not a batch header: left for the checks at use to report
        sz: int = struct.unpack_from(">i", head, W.SIZE_OFFSET)[0]
        return sz >= 0 and position + W.LOG_OVERHEAD + sz > self.log.size_in_bytes

    def _load_indexes(self) -> None:
        """Read .index/.timeindex; build them in memory when missing, failing the sanity check, or
        of another generation of the .log."""
        try:
            oi, ti = self._read_index_files()
        except (OSError, KBatchError) as e:
            if isinstance(e, FileNotFoundError):
                e = StorageError("index file is missing", path=e.filename)
            self.index_problem = e
            self._build_in_memory()
            return
        self._offset_index, self._time_index = oi, ti

    def _build_in_memory(self) -> None:
        """Indexes built from the .log itself, as a broker's recovery would write them, over every
        batch that can be read (framed, CRC holding), reading on after bytes that cannot be; those
        bytes are reported (`unread`, `problems`)."""
        on_disk = self._time_index if self._time_index is not None and not self.indexes_from_scan else None
        if on_disk is None:
            try:
                on_disk = TimeIndex(self.base_offset, self.files.read_index(".timeindex"),
                                    max_index_size=self.max_index_size)
            except (OSError, KBatchError):
                on_disk = None
        scan = ReadableScan(self.log, self.base_offset)
        rows = scan.rows
        index, timeindex = bytearray(), bytearray()
        tracker = MaxTimestampTracker()
        last_indexed_pos, last_time_ts = 0, None
        running = np.full(len(rows["position"]), W.INT64_MIN, dtype=np.int64)
        for i, (pos, last, max_ts, magic, attrs) in enumerate(zip(*(rows[k].tolist() for k in (
                "position", "last_offset", "max_timestamp", "magic", "attributes")))):
            tracker.update(max_ts, last, magic, attrs)
            if tracker.timestamp is not None:
                running[i] = tracker.timestamp
            if pos - last_indexed_pos > self.index_interval_bytes and 0 <= last - self.base_offset <= W.INT32_MAX:
                index += _OFF.pack(last - self.base_offset, pos)
                if tracker.timestamp is not None and (last_time_ts is None or tracker.timestamp > last_time_ts):
                    assert tracker.offset is not None  # set with the timestamp
                    timeindex += _TIME.pack(tracker.timestamp, tracker.offset - self.base_offset)
                    last_time_ts = tracker.timestamp
                last_indexed_pos = pos
        if tracker.timestamp is not None and (last_time_ts is None or tracker.timestamp > last_time_ts):
            assert tracker.offset is not None
            timeindex += _TIME.pack(tracker.timestamp, tracker.offset - self.base_offset)
        self._offset_index = OffsetIndex(self.base_offset, bytes(index), max_index_size=self.max_index_size)
        self._time_index = TimeIndex(self.base_offset, bytes(timeindex), max_index_size=self.max_index_size)
        self._tracker = tracker
        self.indexes_from_scan = True
        self.readable = scan
        firsts, lasts = rows["base_offset"], rows["last_offset"]
        for position, size, why, error in scan.gaps:
            k = int(np.searchsorted(rows["position"], position))  # readable batches before the gap
            after = int(lasts[k - 1]) if k else None
            before = int(firsts[k]) if k < len(firsts) else None
            if before is None:  # nothing readable after it: the torn-tail form, with the same text
                self.report_unreadable(position, error, after_offset=after, why=why)
                continue
            bound = self._bound_after(on_disk, before, rows, running)
            where = f"offsets after {after}" if after is not None else "the start of the segment"
            msg = (f"{self.path('.log')}: {size} bytes from byte {position} could not be read ({why}); "
                   f"skipped from {where} to the next readable batch at byte {position + size} (offset {before})")
            self._unread(UnreadRange(self.path(".log"), position, size, after, before, bound, msg, False, why))

    def _bound_after(self, on_disk: TimeIndex | None, offset: int | None, rows: dict[str, npt.NDArray[np.int64]],
                     running: npt.NDArray[np.int64]) -> int | None:
        """A timestamp every record before `offset` is older than, from the first on-disk .timeindex
        entry (T, O) with O >= `offset`: a broker writes T where the segment's max first reaches
        it, in the batch holding O, so every earlier record is older than T. Used only when that
        batch is readable and agrees (its max timestamp is T, the readable batches before it are
        all older, O names it as a broker does); None otherwise."""
        if on_disk is None or offset is None:
            return None
        for slot in range(on_disk.entries):
            ts, off = on_disk.entry(slot)
            if off < offset:
                continue
            i = int(np.searchsorted(rows["last_offset"], off))
            if i >= len(rows["last_offset"]) or int(rows["base_offset"][i]) > off:
                return None
            if int(rows["max_timestamp"][i]) != ts or (i and int(running[i - 1]) >= ts):
                return None
            return int(ts)
        return None

    def _unread(self, r: UnreadRange) -> None:
        if any(u.position <= r.position < u.position + u.size for u in self.unread):
            return  # inside a range already reported (a scan that stopped there, then the full read)
        for u in [u for u in self.unread if r.position <= u.position < r.position + r.size]:
            self.unread.remove(u)  # a part of it reported before: the whole range replaces it
            if u.message in self.problems:
                self.problems.remove(u.message)
        self.unread.append(r)
        if r.message not in self.problems:
            log.warning("%s", r.message)
            self.problems.append(r.message)

    def distrust_indexes(self, why: str) -> None:
        """The log contradicts an index entry: say so, and answer from indexes built from the log."""
        msg = f"{self.path('.log')}: {why}; answering from a scan of the log instead"
        log.warning("%s", msg)
        self.problems.append(msg)
        self.contradictions.append(msg)
        self.index_problem = KBatchError(why)
        if self.writable:  # the writer's own indexes are exact; never replace them here
            raise KBatchError(msg)
        self._build_in_memory()

    @property
    def offset_index(self) -> OffsetIndex:
        if self._offset_index is None:
            self._load_indexes()
        assert self._offset_index is not None  # read or built
        return self._offset_index

    @property
    def time_index(self) -> TimeIndex:
        if self._time_index is None:
            self._load_indexes()
        assert self._time_index is not None  # read or built
        return self._time_index

    @property
    def txn_index(self) -> TransactionIndex:
        if self._txn_index is None:
            p = self.path(".txnindex")
            self._txn_index = (TransactionIndex(self.base_offset, TransactionIndex.parse(self.files.read_index(
                ".txnindex"), p), path=p) if self.files.has(".txnindex")
                               else TransactionIndex(self.base_offset, path=p if self.writable else None))
        return self._txn_index

    def use_indexes(self, offset_index: OffsetIndex, time_index: TimeIndex, tracker: MaxTimestampTracker) -> None:
        """Install indexes and the max-timestamp state (after a rebuild or recovery)."""
        for old in (self._offset_index, self._time_index):
            if old is not None and old not in (offset_index, time_index):
                old.close()
        self._offset_index, self._time_index, self._tracker = offset_index, time_index, tracker
        self.indexes_from_scan = True

    # ---- checking index entries against the log
    def _entry_position(self, target_offset: int) -> int:
        """Where to start scanning for `target_offset`: the offset index's position, once the log
        agrees (a batch starts there, and the entry names it as a broker does: its last offset or
        a later one, or its first offset)."""
        mapping = self.offset_index.lookup(target_offset)
        if mapping.position == 0 and mapping.offset == self.base_offset:
            return 0
        if self.indexes_from_scan:
            return mapping.position
        head = self.log.read(mapping.position, W.RECORD_BATCH_OVERHEAD)
        found = _header_offsets(head, self.log.size_in_bytes - mapping.position)
        if found is None:
            raise IndexContradiction(f".index entry (offset {mapping.offset}, position {mapping.position}) points to "
                                     f"bytes that are not the start of a batch (the log has {self.log.size_in_bytes} "
                                     f"bytes)")
        base, last = found
        # 2.0+ brokers name the append's last offset (>= the last offset of the batch there, for a
        # follower's chunk); 0.8-1.1 brokers named its first offset (docs/broker-data.md)
        if not (base <= mapping.offset and (last <= mapping.offset or base == mapping.offset)):
            raise IndexContradiction(f".index entry says offset {mapping.offset} is at position {mapping.position}, "
                                     f"but the batch there holds offsets {base}..{last}")
        return mapping.position

    def last_entry_position(self) -> int:
        """Where to read the batches after the last offset-index entry from (checked against the log)."""
        oi = self.offset_index
        return self._entry_position(oi.entry(oi.entries - 1).offset) if oi.entries else 0

    def _check_time_entry(self, s: Window, entry: TimestampOffset) -> bool:
        """Check a .timeindex entry (T, O) against a window holding the batch B that ends at or
        after O: B must hold O, its max timestamp must be <= T, and O must name B in a form a
        broker writes (index_rules.time_entry_form: B's last offset, or the record of B holding T
        as Kafka 0.11-3.6 leaders wrote it). True once checked."""
        hit = np.flatnonzero(s["last_offset"] >= entry.offset)
        if not len(hit):
            return False
        i = int(hit[0])
        if not self._names_batch(s, i, entry.timestamp, entry.offset, exact_max=False):
            raise IndexContradiction(f".timeindex entry (timestamp {entry.timestamp}, offset {entry.offset}) does not "
                                     f"match the log: the batch there holds offsets {int(s['base_offset'][i])}.."
                                     f"{int(s['last_offset'][i])} with max timestamp {int(s['max_timestamp'][i])}")
        return True

    @staticmethod
    def _names_batch(s: Window, i: int, timestamp: int, offset: int, *, exact_max: bool) -> bool:
        """Whether (timestamp, offset), a time index entry or the max-timestamp claim, names the
        batch at row i as a broker names it (index_rules.time_entry_form); exact_max: the batch's
        max timestamp must be the timestamp itself (the claim), not just at most it."""
        base, last, mx = int(s["base_offset"][i]), int(s["last_offset"][i]), int(s["max_timestamp"][i])
        if mx > timestamp or (exact_max and mx != timestamp):
            return False

        def first_with(t: int) -> int | None:
            found = first_record_at_or_after(batch_at(s, i), t)
            return None if found is None or found.timestamp != t else found.offset
        try:
            return time_entry_form(timestamp, offset, base, last, mx, first_with) is not None
        except KBatchError:
            return False  # the batch's records cannot be read: the entry cannot be checked against them

    def _guarded(self, fn: Callable[..., _T], *args: Any) -> _T:
        """Run a lookup; if the log contradicts an index entry it used, or its scan met bytes it
        cannot read, build the indexes from what the log holds (reading around those bytes) and
        run it again. An error it still meets (records that do not decode in a batch whose CRC
        holds) names the file."""
        try:
            for _ in range(2):
                try:
                    return fn(*args)
                except IndexContradiction as e:
                    self.distrust_indexes(str(e))
                except SegmentDamaged as e:
                    if self.writable:  # a writer's segment was recovered: it holds nothing it cannot read
                        raise KBatchError(f"{self.path('.log')}: {e}") from None
                    self._build_in_memory()
            return fn(*args)
        except KBatchError as e:
            if not isinstance(e, StorageError) and not e.reason.startswith(self.path(".log")):
                e.update(reason=f"{self.path('.log')}: {e.reason}")
            raise

    # ---- facts
    @property
    def size(self) -> int:
        return self.log.size_in_bytes

    def _max_tracker(self) -> MaxTimestampTracker:
        if self._tracker is None:
            self._tracker = self._guarded(self._compute_tracker)
        return self._tracker

    def _compute_tracker(self) -> MaxTimestampTracker:
        # the time index's last entry, then any batches after the last offset-index entry (a
        # broker's active segment has no final time entry yet)
        last = self.time_index.last_entry
        t = MaxTimestampTracker(*(last if last is not None else (None, None)))
        for s in self.lookup_windows(self.last_entry_position(), WINDOW):
            t.update_rows(s)
        return t

    @property
    def max_timestamp_so_far(self) -> int | None:
        """The largest batch max timestamp indexed (decision 5 floors), None when there is none."""
        return self._max_tracker().timestamp

    @property
    def offset_of_max_timestamp_so_far(self) -> int | None:
        return self._max_tracker().offset

    def last_modified_ms(self) -> int:
        return self.files.log_mtime_ms(self.log)

    @property
    def largest_timestamp(self) -> int:
        """max_timestamp_so_far when known, else the .log's last-modified time (LogSegment.largestTimestamp;
        an extended segment's negative max counts as known, DESIGN.md decision 5)."""
        ts = self.max_timestamp_so_far
        return self.last_modified_ms() if ts is None else ts

    def read_next_offset(self) -> int:
        """The offset after the segment's last complete batch (its base offset when empty)."""
        return self.read_end()[0]

    def read_end(self) -> tuple[int, int]:
        """(next offset, where complete batches end) from the last index entry on. Bytes after the
        end that are not a complete batch are reported in `problems`."""
        return self._guarded(self._read_end)

    def _read_end(self) -> tuple[int, int]:
        start = self.last_entry_position()
        nxt = self.base_offset
        gen = self.log.scan(start, reuse=True)
        error: KBatchError | None = None
        end = start
        try:
            while True:
                s = next(gen)
                if len(s["last_offset"]):
                    nxt = int(s["last_offset"][-1]) + 1
                    end = int(s["position"][-1] + s["size"][-1])
        except StopIteration as stop:
            end = stop.value
        except KBatchError as e:
            if isinstance(e, StorageError):
                raise
            error = e
        if end < self.size:
            self.report_unreadable(end, error, after_offset=nxt - 1 if nxt > self.base_offset else None)
        return nxt, end

    def windows(self, start: int = 0, *, verify_crc: bool = False, first_window: int = WINDOW,
                reuse: bool = False) -> Iterator[Window]:
        """The .log's scan windows from `start` (`reuse`: buffers reused from one window to the
        next, for callers that keep nothing of a window); a scan that reaches the end short of the
        file's size reports the bytes it could not read in `problems`."""
        gen = self.log.scan(start, verify_crc, first_window, reuse=reuse)
        while True:
            try:
                s = next(gen)
            except StopIteration as stop:
                if stop.value < self.size:
                    self.report_unreadable(stop.value)
                return
            yield s

    def lookup_windows(self, start: int = 0, first_window: int = FIRST_WINDOW) -> Iterator[Window]:
        """The scan windows a lookup reads from `start`, every batch's CRC checked. Until the
        segment was read in full, bytes it cannot read raise SegmentDamaged (the lookup is then run
        again over `readable`); after, only the readable batches are handed out, run by run."""
        if self.readable is not None:
            for a, b in self.readable.runs:
                if b > start:
                    yield from scan_windows(self.log.read, b, max(a, start), False, first_window)
            return
        gen = self.log.scan(start, True, first_window, reuse=True)
        try:
            while True:
                try:
                    s = next(gen)
                except StopIteration as stop:
                    if stop.value < self.size:
                        raise SegmentDamaged(f"bytes from byte {stop.value} are not a complete batch") from None
                    return
                except KBatchError as e:
                    if isinstance(e, StorageError):
                        raise
                    raise SegmentDamaged(str(e)) from None
                if not s["crc_valid"].all():
                    raise SegmentDamaged("a batch fails its CRC check")
                yield s
        finally:
            gen.close()

    def report_unreadable(self, position: int, error: KBatchError | None = None, *, after_offset: int | None = None,
                          why: str = "") -> None:
        """Bytes from `position` to the end could not be read: `error`, or `why` (neither: what
        is there, said by incomplete_batch)."""
        if error is None and not why:
            why = self.log.incomplete(position, "the segment")
        partial = error is None and is_partial_tail(why)
        what = str(error) if error is not None else why
        why = f": {error}" if error is not None else f" ({why})"
        msg = f"{self.path('.log')}: {self.size - position} bytes from byte {position} could not be read{why}"
        self._unread(UnreadRange(self.path(".log"), position, self.size - position, after_offset, None, None, msg,
                                 partial, what))

    # ---- lookups
    def translate_offset(self, offset: int, starting_file_position: int = 0) -> LogOffsetPosition | None:
        """The first batch with last offset >= `offset` as (last offset, position, size), or None
        (LogSegment.translateOffset: index lookup, then scan)."""
        return self._guarded(self._translate_offset, offset, starting_file_position)

    def _translate_offset(self, offset: int, starting_file_position: int) -> LogOffsetPosition | None:
        pos = self._entry_position(offset)
        return self.log.search_for_offset_with_size(offset, max(pos, starting_file_position))

    def find_offset_by_timestamp(self, target: int, starting_offset: int = 0) -> TimestampAndOffset | None:
        """The first record with timestamp >= target and offset >= starting_offset, as
        TimestampAndOffset, or None (LogSegment.findOffsetByTimestamp)."""
        return self._guarded(self._find_offset_by_timestamp, target, starting_offset)

    def _find_offset_by_timestamp(self, target: int, starting_offset: int) -> TimestampAndOffset | None:
        ts_off = self.time_index.lookup(target)
        has_entry = ts_off.timestamp != W.NO_TIMESTAMP or ts_off.offset != self.base_offset
        position = self._entry_position(max(ts_off.offset, starting_offset))
        check: TimestampOffset | None = (ts_off if has_entry and not self.indexes_from_scan
                                         and ts_off.offset >= starting_offset else None)
        if has_entry and ts_off.timestamp < target and ts_off.offset >= starting_offset:
            past = self._past_time_entry(position, ts_off)
            if past is not None:  # the entry's batch agrees with it and ends below the target: skip it unread
                position, check = past, None
        for s in self.lookup_windows(position):
            if check is not None and self._check_time_entry(s, check):
                check = None
            cand = np.flatnonzero((s["max_timestamp"] >= target) & (s["last_offset"] >= starting_offset))
            for i in cand.tolist():
                hit = _first_in_row(s, i, target, starting_offset)
                if hit is not None:
                    return hit
        if check is not None:
            raise IndexContradiction(f".timeindex entry (timestamp {check.timestamp}, offset {check.offset}) names an "
                                     f"offset the log does not hold")
        self._check_max_claim(target)
        return None

    def _past_time_entry(self, position: int, entry: TimestampOffset) -> int | None:
        """Where the batch after the one at `position` starts, when that batch is the .timeindex
        entry's (a v2 batch ending at its offset, max timestamp <= its timestamp: the entry is then
        checked); None otherwise. Read from the batch's header alone."""
        head = self.log.read(position, W.RECORD_BATCH_OVERHEAD)
        if len(head) < W.RECORD_BATCH_OVERHEAD or head[W.MAGIC_OFFSET] != 2:
            return None
        base, size, _ple, _magic, _crc, _attrs, delta, _first, max_ts = _V2_MAX.unpack_from(head, 0)
        end = position + W.LOG_OVERHEAD + size
        if base + delta != entry.offset or max_ts > entry.timestamp or end > self.log.size_in_bytes:
            return None
        return int(end)

    def _check_max_claim(self, target: int) -> None:
        """Nothing >= target was found although the indexes say this segment's max is >= target:
        the batch they name must then really have that max timestamp."""
        if self.indexes_from_scan:
            return
        t = self._max_tracker()
        if t.timestamp is None or t.timestamp < target:
            return
        self._find_max_batch(t)

    def _find_max_batch(self, t: MaxTimestampTracker) -> tuple[Window, int]:
        assert t.offset is not None and t.timestamp is not None  # set together
        position = self._entry_position(t.offset)
        for s in self.lookup_windows(position):
            hit = np.flatnonzero(s["last_offset"] >= t.offset)
            if len(hit):
                i = int(hit[0])
                if not self._names_batch(s, i, t.timestamp, t.offset, exact_max=True):
                    raise IndexContradiction(
                        f"the indexes say the segment's max timestamp {t.timestamp} is in the batch holding offset "
                        f"{t.offset}, but the batch there holds offsets {int(s['base_offset'][i])}.."
                        f"{int(s['last_offset'][i])} with max timestamp {int(s['max_timestamp'][i])}")
                return s, i
        raise IndexContradiction(f"the indexes say the segment's max timestamp {t.timestamp} is at offset {t.offset}, "
                                 f"which the log does not hold")

    def find_offsets_by_timestamps(self, targets: npt.ArrayLike, starting_offset: int = 0
                                   ) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64], npt.NDArray[np.int64]]:
        """find_offset_by_timestamp for many targets at once -> (offsets, timestamps, epochs) int64
        arrays, offset -1 where there is no record. Headers are scanned once, window by window,
        and each batch holding an answer is decoded once."""
        return self._guarded(self._find_offsets_by_timestamps, targets, starting_offset)

    def _find_offsets_by_timestamps(self, targets: npt.ArrayLike, starting_offset: int
                                    ) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64], npt.NDArray[np.int64]]:
        target_array = np.asarray(targets, dtype=np.int64)
        order = np.argsort(target_array)  # equal targets have equal answers: any order among them will do
        ts_sorted = target_array[order]
        n = len(target_array)
        out_off = np.full(n, -1, dtype=np.int64)
        out_ts = np.full(n, W.NO_TIMESTAMP, dtype=np.int64)
        out_ep = np.full(n, -1, dtype=np.int64)
        if n == 0:
            return out_off, out_ts, out_ep
        # index first: nothing before the lowest target's index position can hold an answer
        ts_off = self.time_index.lookup(int(ts_sorted[0]))
        lo_pos = self._entry_position(max(ts_off.offset, starting_offset))
        has_entry = ts_off.timestamp != W.NO_TIMESTAMP or ts_off.offset != self.base_offset
        check: TimestampOffset | None = (ts_off if has_entry and not self.indexes_from_scan
                                         and ts_off.offset >= starting_offset else None)
        running = W.INT64_MIN
        k = 0  # next unresolved sorted target
        for s in self.lookup_windows(lo_pos, WINDOW):
            if check is not None and self._check_time_entry(s, check):
                check = None
            if k >= n:
                if check is None:
                    break
                continue
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
                self._answer_in_sections(s, rows[v2], k + np.flatnonzero(v2), ts_sorted, order,
                                         starting_offset, out_off, out_ts, out_ep)
            # the others (compressed, legacy) batch by batch; rows is non-decreasing (targets are
            # sorted), so each batch's targets are one slice
            rest = np.flatnonzero(~v2)
            uniq, first, counts = _runs(rows[rest])
            for row, f0, c in zip(uniq.tolist(), first.tolist(), counts.tolist()):
                sel = k + rest[f0:f0 + c]
                self._answer_in_batch(batch_at(s, row), ts_sorted, sel, order, starting_offset,
                                      out_off, out_ts, out_ep)
            k = kend
        if check is not None:
            raise IndexContradiction(f".timeindex entry (timestamp {check.timestamp}, offset {check.offset}) names an "
                                     f"offset the log does not hold")
        if k < n:
            self._check_max_claim(int(ts_sorted[k]))
        # a candidate batch without a matching record (no timestamps, offsets below the start):
        # finish those one by one from the slow path
        for j in np.flatnonzero(out_off[order[:k]] < 0).tolist():
            hit = self._find_offset_by_timestamp(int(ts_sorted[j]), starting_offset)
            if hit is not None:
                i = order[j]
                out_off[i], out_ts[i], out_ep[i] = hit.offset, hit.timestamp, -1 if hit.leader_epoch is None else hit.leader_epoch
        return out_off, out_ts, out_ep

    @staticmethod
    def _answer_in_sections(s: Window, rows: Rows, sel: Rows, ts_sorted: npt.NDArray[np.int64], order: Rows,
                            starting_offset: int, out_off: npt.NDArray[np.int64], out_ts: npt.NDArray[np.int64],
                            out_ep: npt.NDArray[np.int64]) -> None:
        """Answer sorted targets ts_sorted[sel] from the uncompressed v2 batches at scan rows `rows`
        (one per target, non-decreasing) with one find_timestamps_v2 call: each batch is checked as
        decoding it would check it, but no record object is made."""
        uniq, first, _counts = _runs(rows)
        which = np.cumsum(np.diff(rows, prepend=rows[:1]) != 0)  # rows are sorted: their run number
        pos = s["position"][uniq] - s["origin"]
        try:
            offs, stamps = _backend.core.find_timestamps_v2(
                s["buf"], pos + W.RECORDS_OFFSET, pos + s["size"][uniq], s["record_count"][uniq],
                s["base_offset"][uniq], s["first_timestamp"][uniq], s["max_timestamp"][uniq], s["attributes"][uniq],
                which, ts_sorted[sel], starting_offset)
        except KBatchError as e:
            raise shift_error(e, s["origin"])  # window positions -> file positions
        hit = offs >= 0
        idx = order[sel[hit]]
        out_off[idx], out_ts[idx] = offs[hit], stamps[hit]
        out_ep[idx] = s["partition_leader_epoch"][uniq][which[hit]]

    @staticmethod
    def _answer_in_batch(batch: Batch, ts_sorted: npt.NDArray[np.int64], sel: Rows, order: Rows, starting_offset: int,
                         out_off: npt.NDArray[np.int64], out_ts: npt.NDArray[np.int64],
                         out_ep: npt.NDArray[np.int64]) -> None:
        epoch = batch.partition_leader_epoch
        if batch.magic == 2 and batch.timestamp_type == W.TimestampType.LOG_APPEND_TIME:
            hit = first_record_at_or_after(batch, int(ts_sorted[sel[0]]), starting_offset)
            if hit is not None:
                idx = order[sel]
                out_off[idx], out_ts[idx], out_ep[idx] = hit.offset, hit.timestamp, epoch
            return
        # first record with ts >= t is the first where the running max reaches t
        run: list[int] = []
        offs: list[int] = []
        stamps: list[int] = []
        best: int | None = None
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

    def max_timestamp_and_offset(self) -> TimestampAndOffset | None:
        """MAX_TIMESTAMP within this segment: the first record of the batch whose max timestamp is
        the segment's max, whose timestamp equals it; None when the segment has no timestamps."""
        return self._guarded(self._max_timestamp_and_offset)

    def _max_timestamp_and_offset(self) -> TimestampAndOffset | None:
        t = self._max_tracker()
        if t.timestamp is None or t.offset is None:  # both are set together
            return None
        target = t.timestamp
        if not self.indexes_from_scan:
            self._find_max_batch(t)
        position = self._entry_position(t.offset)
        for s in self.lookup_windows(position):
            for i in np.flatnonzero(s["max_timestamp"] == target).tolist():
                b = batch_at(s, i)
                for rec in b:
                    if rec.timestamp == target:
                        return TimestampAndOffset(target, rec.offset, epoch_or_none(b.partition_leader_epoch))
        return None

    # ---- writing (active segment)
    def load_first_batch_timestamp(self) -> None:
        """The rolling timestamp after a restart: the first batch's max timestamp (getFirstBatchTimestamp)."""
        if self.rolling_based_timestamp is None:
            for s in self.log.scan(0, first_window=FIRST_WINDOW, reuse=True):
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

    def mark(self) -> SegmentMark:
        t = self._max_tracker()
        return SegmentMark(self.log.size_in_bytes, self.offset_index.entries, self.time_index.entries,
                           (t.timestamp, t.offset), self.bytes_since_last_index_entry, self.rolling_based_timestamp,
                           self.writable)

    def rollback(self, m: SegmentMark) -> None:
        """Put the files and the append state back as they were at `m` (after a failed write)."""
        if self.log.size_in_bytes != m.log_size:
            self.log.truncate_to(m.log_size)
        self.offset_index.truncate_entries(m.index_entries, durable=True)
        self.time_index.truncate_entries(m.time_entries, durable=True)
        self._tracker = MaxTimestampTracker(*m.tracker)
        self.bytes_since_last_index_entry = m.bytes_since_last_index_entry
        self.rolling_based_timestamp = m.rolling_based_timestamp

    def append_batch(self, data: BytesLike, last_offset: int, max_timestamp: int, magic: int, attributes: int) -> int:
        """Append one batch (LogSegment.append): bytes to .log, index entries by the
        index.interval.bytes rule. Returns the batch's position. A failed write raises
        LogWriteError with the segment's files and state as they were before the call."""
        if not self.writable:
            raise KBatchError(f"segment {self.base_offset} is read-only", expected="the active segment",
                              found="a read-only segment")
        rel = last_offset - self.base_offset
        if not 0 <= rel <= W.INT32_MAX:
            raise InvalidOffsetError("Offset out of the segment's int32 relative range",
                                     expected=f"{self.base_offset} <= offset <= {self.base_offset + W.INT32_MAX}",
                                     found=last_offset)
        before = self.mark()
        try:
            position = self.log.append(data)
            if position == 0:
                self.rolling_based_timestamp = max_timestamp
            tracker = self._max_tracker()
            tracker.update(max_timestamp, last_offset, magic, attributes)
            if self.bytes_since_last_index_entry > self.index_interval_bytes:
                self.offset_index.append(last_offset, position)
                if tracker.timestamp is not None and tracker.offset is not None:  # set together
                    self.time_index.maybe_append(tracker.timestamp, tracker.offset)
                self.bytes_since_last_index_entry = 0
            self.bytes_since_last_index_entry += len(data)
        except BaseException:
            self.rollback(before)
            raise
        return position

    def on_become_inactive(self) -> None:
        """The final time-index entry when the segment stops being active (files stay trimmed)."""
        t = self._max_tracker()
        if t.timestamp is not None and t.offset is not None and self.writable:  # timestamp and offset are set together
            self.time_index.maybe_append(t.timestamp, t.offset, skip_full_check=True)

    def become_read_only(self) -> None:
        """After a roll: data and indexes flushed, the writer's handles closed; the segment keeps
        its .log open for reading and its indexes in memory."""
        self.flush()
        for idx in (self._offset_index, self._time_index):
            if idx is not None:
                idx.close_file()
        self.log.writable = False
        self.writable = False

    def flush(self) -> None:
        self.log.flush()
        for idx in (self._offset_index, self._time_index):
            if idx is not None:
                idx.flush()

    def close(self) -> None:
        try:
            if self.writable and not self.log.closed:
                self.on_become_inactive()
        finally:
            self.log.close()
            for idx in (self._offset_index, self._time_index):
                if idx is not None:
                    idx.close()

    def release(self) -> None:
        """Close the files without writing anything (a writer's open that failed)."""
        self.log.close_quietly()
        for idx in (self._offset_index, self._time_index):
            if idx is not None:
                idx.close_quietly()

    def delete_files(self) -> None:
        """Close, then delete the .log first (the segment is gone at once) and then its indexes; a
        crash in between leaves orphaned index files, which a writer's open removes."""
        self.close()
        for suffix in (".log", ".index", ".timeindex", ".txnindex"):
            _files.crash_point(f"delete:{os.path.basename(self.path(suffix))}")
            try:
                os.unlink(self.path(suffix))
            except FileNotFoundError:
                pass

    def __repr__(self) -> str:
        return f"LogSegment(base_offset={self.base_offset}, size={self.size}, path={self.path('.log')!r})"


__all__ = ["FileRecords", "SourceFileRecords", "open_records", "SegmentFiles", "RemoteSegmentFiles", "iter_file_batches", "LogSegment", "LogOffsetPosition", "TimestampAndOffset", "build_indexes",
           "scan_headers", "scan_windows", "scan_buffer", "MaxTimestampTracker", "MAX_SEGMENT_BYTES"]
