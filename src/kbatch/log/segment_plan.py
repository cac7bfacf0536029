"""Planning reads over a directory of Kafka partition folders: the planner every parallel reader
shares (the Spark readers, kbatch.scan's planned ranges, the Ray datasource).

A root directory holds `<topic>-<partition>/` folders of segments (`<20-digit base offset>.log`
with `.index` and `.timeindex` beside it), or a tiered-storage layout (kbatch.log.layout), on local
disk or in object storage (kbatch._fs). This module finds them, turns offset and time bounds
into byte ranges with the indexes (KIP-33) so that skipped bytes are never read, and splits a
large segment at batch boundaries taken from its `.index`.

It reads indexes itself with numpy (a read-only view of Kafka's layout, kafka-format.md §5); when
kbatch's storage layer (`kbatch.Log`) is importable, time lookups go through it instead.
"""
from __future__ import annotations

import logging
import os
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt

from .. import _fs
from .. import _wire as W
from ..record.file_records import iter_batches

if TYPE_CHECKING:
    from ..record.batch import Batch
    from .._typing import Buffer
    from ..log.unified_log import Log
    from ..log.partition_files import PartitionFiles
    from ..log.segment_files import SegmentFiles

#: an aborted transaction: (producer id, first offset, last offset: its ABORT marker's)
Aborted = tuple[int, int, int]

log = logging.getLogger("kbatch.spark")
_OFFSET_ENTRY = np.dtype([("rel", ">i4"), ("pos", ">i4")])
_TIME_ENTRY = np.dtype([("ts", ">i8"), ("rel", ">i4")])
INT64_MIN, INT64_MAX = W.INT64_MIN, W.INT64_MAX


@dataclass
class Segment:
    path: str                       # the .log (a local path or a URI)
    base_offset: int
    size: int
    files: SegmentFiles | None = field(default=None, repr=False, compare=False)  # (driver side)


@dataclass
class TopicPartition:
    topic: str
    partition: int
    path: str
    segments: list[Segment] = field(default_factory=list)


def list_partitions(root: str, topics: Iterable[str] | None = None,
                    topic_pattern: str | None = None, require_partitions: bool = False,
                    include_internal: bool = False) -> list[TopicPartition]:
    """Every partition folder under `root` (or `root` itself when it is one), in any layout
    kbatch.log.layout reads (broker `<topic>-<p>`, Kafka's LocalTieredStorage, Aiven's tiered
    storage), local or remote (s3://, gs://, hdfs://: one listing per directory), sorted, each
    with its segments in base-offset order. require_partitions (a batch read): a root with no
    partition folder at all, before topics narrow them, is an error, not an empty read (a stream
    waits for partitions to appear). Internal topics (`__consumer_offsets`, `_schemas`, ...:
    kbatch.log.topics) are left out unless named in `topics`, `include_internal` is set, or
    `root` is that partition itself (the `includeInternalTopics` option)."""
    from ..log.partition_files import find_partition_files
    from ..log.topics import left_out

    root = root if _fs.is_remote(root) else os.fspath(root)
    if not _fs.isdir(root):
        raise FileNotFoundError(f"kafka-segments: no such directory: {root}")
    wanted = None if topics is None else set(topics)
    pattern = re.compile(topic_pattern) if topic_pattern else None
    out: list[TopicPartition] = []
    found = False
    for part in find_partition_files(root, require_segments=False):
        if part.topic is None or part.partition is None:  # named so together, or neither
            continue
        found = True
        if wanted is not None and part.topic not in wanted:
            continue
        if pattern is not None and not pattern.fullmatch(part.topic):
            continue
        if left_out(part.topic, named=wanted is not None and part.topic in wanted or part.path == root,
                    include_internal=include_internal):
            continue
        for problem in part.problems:
            log.warning("kafka-segments: %s", problem)
        out.append(topic_partition(part))
    if require_partitions and not found:
        raise FileNotFoundError(no_partitions_message(root, _fs.listdir(root)))
    out.sort(key=lambda tp: (tp.topic, tp.partition))
    return out


def topic_partition(part: PartitionFiles) -> TopicPartition:
    """A listed partition (kbatch.log.partition_files) as the planner's TopicPartition: its
    segments with their sizes, in base-offset order."""
    assert part.topic is not None and part.partition is not None
    segs = [Segment(f.path(".log"), f.base_offset, _log_size(f), f) for f in part.segments
            if f.base_offset is not None]  # a listing names every segment by its base offset
    return TopicPartition(part.topic, part.partition, part.path, segs)


def no_partitions_message(root: str, names: Iterable[str]) -> str:
    """What a batch read of a directory without partition folders says (the JVM reader's words too)."""
    names = sorted(names)
    shown = ", ".join(names[:5]) + (f" and {len(names) - 5} more" if len(names) > 5 else "")
    return (f"kafka-segments: no partition folders under {root}: expected <topic>-<partition> folders or a "
            f"tiered-storage layout (docs/remote.md), found {shown or 'an empty directory'}")


def _log_size(files: SegmentFiles) -> int:
    sizes = getattr(files, "sizes", None) or getattr(getattr(files, "inner", None), "sizes", None)
    if sizes and sizes.get(".log", (None,))[0] is not None:
        return int(sizes[".log"][0])
    return _fs.getsize(files.path(".log"))


# ------------------------------------------------------------------------------------ indexes
def _entries(data: bytes, dtype: np.dtype[np.void]) -> npt.NDArray[np.void]:
    """Entries of an index file, cut at the zero-filled tail of a preallocated file (an entry
    with relative offset 0 after the first one, as DumpLogSegments stops)."""
    raw = np.frombuffer(data, dtype=np.uint8)
    n = len(raw) // dtype.itemsize
    entries: npt.NDArray[np.void] = raw[:n * dtype.itemsize].view(dtype)
    if n > 1:
        zero = np.flatnonzero(entries["rel"][1:] == 0)
        if zero.size:
            entries = entries[:zero[0] + 1]
    return entries


def _read_index(seg: Segment, suffix: str, dtype: np.dtype[np.void]) -> npt.NDArray[np.void]:
    files = seg.files
    if files is None:
        from ..log.layout import segment_files_for

        files = seg.files = segment_files_for(seg.path)
    try:
        return _entries(files.read_index(suffix), dtype)
    except FileNotFoundError:
        return np.zeros(0, dtype)


def offset_index(seg: Segment) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]:
    """(absolute offsets, positions) of the segment's `.index` as int64 arrays."""
    e = _read_index(seg, ".index", _OFFSET_ENTRY)
    return e["rel"].astype(np.int64) + seg.base_offset, e["pos"].astype(np.int64)


def time_index(seg: Segment) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]:
    """(timestamps, absolute offsets) of the segment's `.timeindex` as int64 arrays."""
    e = _read_index(seg, ".timeindex", _TIME_ENTRY)
    return e["ts"].astype(np.int64), e["rel"].astype(np.int64) + seg.base_offset


def position_for_offset(seg: Segment, offset: int) -> int:
    """Byte position of the largest indexed batch start whose offset <= `offset` (0 if none)."""
    offs, pos = offset_index(seg)
    i = int(np.searchsorted(offs, offset, side="right")) - 1
    return int(pos[i]) if i >= 0 else 0


def end_position_for_offset(seg: Segment, end_offset: int) -> int:
    """A byte position after which no batch holds an offset < end_offset: the start of the
    entry after the first index entry whose offset >= end_offset (the file size if none)."""
    offs, pos = offset_index(seg)
    i = int(np.searchsorted(offs, end_offset, side="left"))
    return int(pos[i + 1]) if i + 1 < len(pos) else seg.size


def read_range(path: str, start: int, end: int, size: int | None = None) -> bytes:
    """Bytes [start, end) of a segment: the read path's planned slice read
    (kbatch.log.fetch_data.read_file_slice: one pread of a local file, one ranged request of a
    remote object; `size`, known from planning, spares a metadata request)."""
    from ..log.fetch_data import read_file_slice

    return read_file_slice(path, start, end, size)


_read_range = read_range


def offset_for_time_in_segment(seg: Segment, target: int, min_offset: int | None = None) -> tuple[int, int] | None:
    """(offset, timestamp) of the first record with timestamp >= target in this segment, or None.

    Kafka's LogSegment.findOffsetByTimestamp: time index lookup, then offset index lookup, then
    a scan of batch headers from there; only the matching batch's records are decoded.
    """
    ts, offs = time_index(seg)
    i = int(np.searchsorted(ts, target, side="right")) - 1
    from_offset = int(offs[i]) if i >= 0 else seg.base_offset
    if min_offset is not None:
        from_offset = max(from_offset, min_offset)
    start = position_for_offset(seg, from_offset)
    data = read_range(seg.path, start, seg.size, seg.size)
    for batch in iter_batches(data, verify_crc=False, strict=False):
        if batch.is_control or batch.max_timestamp < target:
            continue
        for rec in batch:
            if rec.timestamp is not None and rec.timestamp >= target and (min_offset is None or rec.offset >= min_offset):
                return rec.offset, rec.timestamp
    return None


def offset_for_time(tp: TopicPartition, target: int) -> tuple[int, int] | None:
    """(offset, timestamp) of the first record of the partition with timestamp >= target, or None
    (KIP-79 semantics, any int64 target, negative ones included)."""
    log_cls = _storage_log()
    if log_cls is not None:
        lg = log_cls.open(tp.path)
        try:
            res = lg.offsets_for_times([target])[0]
        finally:
            lg.close()
        if res is None or res.timestamp is None:  # a timestamp lookup's answer has its timestamp
            return None
        return int(res.offset), int(res.timestamp)
    for seg in tp.segments:
        found = offset_for_time_in_segment(seg, target)
        if found is not None:
            return found
    return None


def _storage_log() -> type[Log] | None:
    if os.environ.get("KBATCH_SPARK_OWN_INDEX"):
        return None
    try:
        from ..log.unified_log import Log  # kbatch's storage layer, when present
    except ImportError:
        return None
    return Log


def end_offset(tp: TopicPartition) -> int:
    """The log end offset (next offset to be written) of a partition."""
    for seg in reversed(tp.segments):
        offs, pos = offset_index(seg)
        start = int(pos[-1]) if len(pos) else 0
        last = None
        for b in iter_batches(read_range(seg.path, start, seg.size, seg.size), verify_crc=False, strict=False):
            last = b.last_offset
        if last is not None:
            return last + 1
    return tp.segments[0].base_offset if tp.segments else 0


# ------------------------------------------------------------------------------------ transactions
def aborted_transactions(tp: TopicPartition) -> list[Aborted]:
    """The partition's aborted transactions as (producer id, first offset, last offset) tuples, the
    last offset being the ABORT marker's (AbortedTxn, kafka-format.md 3 and 5.5), by the read
    path's rule (kbatch.log.fetch.aborted_transactions: the segments' `.txnindex` files when every
    segment has one, else the log's control batches). The JVM reader computes the same list
    (Planner.abortedTransactions)."""
    return transaction_state(tp, need_open=False)[0]


def transaction_state(tp: TopicPartition, need_open: bool = True, skip_unreadable: bool = False
                      ) -> tuple[list[Aborted], int | None]:
    """(the partition's aborted transactions as aborted_transactions gives them, the first offset
    of the earliest transaction with no marker yet or None): read_committed reads stop there, at
    the last stable offset (kbatch.log.fetch.aborted_transactions with need_open). A transaction
    whose marker unreadable bytes may hide (kbatch.log.fetch.UnknownTxn) is that first offset too
    (undecided_at names the damage there), unless skip_unreadable: then its records are left out
    as an aborted transaction's are, and the read goes on to the transactions really open."""
    state = _txn_state(tp)
    aborted = [(t.producer_id, t.first_offset, t.last_offset) for t in state.aborted]
    if skip_unreadable:
        return aborted + [(u.producer_id, u.first_offset, u.last_offset) for u in state.unknown], state.first_open_offset
    return aborted, state.first_unstable_offset


def undecided_at(tp: TopicPartition, offset: int) -> Any:
    """The UnreadableRange a strict read_committed read stopping at `offset` meets when that offset
    is the first of a transaction unreadable bytes leave undecided, else None (the read path's
    kbatch.log.fetch.undecided_at)."""
    from ..log.fetch import undecided_at as rule

    return rule(_txn_state(tp), offset)


_TXN_STATES: dict[tuple[Any, ...], Any] = {}


def _txn_state(tp: TopicPartition) -> Any:
    """kbatch.log.fetch.aborted_transactions over the partition's segments (the header pass made
    once per partition as it is: its segments' paths and sizes)."""
    from ..log.fetch import TxnSource, aborted_transactions as rule
    from ..record.file_records import scan_buffer

    key = (tp.topic, tp.partition, tuple((seg.path, seg.size) for seg in tp.segments))
    hit = _TXN_STATES.get(key)
    if hit is not None:
        return hit

    def source(seg: Segment) -> TxnSource:
        def txn_index() -> bytes | None:
            files = seg.files
            if files is None:
                from ..log.layout import segment_files_for

                files = seg.files = segment_files_for(seg.path)
            try:  # any layout, local or remote (an Aiven copy keeps it inside its .indexes object)
                return files.read_index(".txnindex")
            except FileNotFoundError:
                return None

        return TxnSource(seg.path, txn_index, lambda: scan_buffer(_read_range(seg.path, 0, seg.size)), seg.size,
                         seg.base_offset, lambda pos, n: _read_range(seg.path, pos, pos + n))

    state = rule(source(seg) for seg in tp.segments)
    if len(_TXN_STATES) > 4096:
        _TXN_STATES.clear()
    _TXN_STATES[key] = state
    return state


def check_markers(data: Buffer, start: int, aborted: Iterable[Aborted], lo: int, hi: int, verify_crc: bool) -> None:
    """read_committed: every transaction marker of data (bytes from file position `start`) with an
    offset in [lo, hi) must agree with the aborted list (an ABORT marker is the last offset of an
    aborted transaction of its producer, a COMMIT marker is not): an index that contradicts the log
    gives no answer. Raises CorruptIndexError at the marker batch."""
    from ..errors import CorruptIndexError, KBatchError
    from ..log.producer_state import marker_type  # the read path's: a transactional control batch's type

    last = {(pid, last_offset) for pid, _first, last_offset in aborted}
    for b in _whole_batches(data):
        if b.magic != 2 or not b.is_control or not lo <= b.base_offset < hi:
            continue
        try:
            if verify_crc:
                b.ensure_valid()
            kind = marker_type(b)
        except KBatchError as e:
            e.update(shift=start)  # positions in `data` -> in the file
            raise
        if kind not in (W.ControlRecordType.ABORT, W.ControlRecordType.COMMIT):
            continue
        listed = (b.producer_id, b.base_offset) in last
        if listed != (kind == W.ControlRecordType.ABORT):
            raise CorruptIndexError(
                "The transaction index contradicts the log", position=start + b.position, base_offset=b.base_offset,
                expected=f"{'an ABORT' if listed else 'a COMMIT'} marker of producer {b.producer_id} at offset "
                         f"{b.base_offset}", found=W.ControlRecordType(kind).name)


def _whole_batches(data: Buffer) -> Iterator[Batch]:
    """iter_batches(data) without CRC checks up to the first framing error (a bad header: the
    decode of the same bytes raises it, after the rows before it)."""
    from ..errors import KBatchError

    gen = iter_batches(data, verify_crc=False, strict=False)
    while True:
        try:
            b = next(gen)
        except (StopIteration, KBatchError):
            return
        yield b


def aborted_mask(pid: npt.NDArray[np.int64], transactional: npt.NDArray[np.bool_], offsets: npt.NDArray[np.int64],
                 aborted: Iterable[Aborted]) -> npt.NDArray[np.bool_]:
    """Rows of aborted transactions: transactional rows of a producer between the first offset and
    the marker of one of its aborted transactions."""
    mask = np.zeros(len(offsets), dtype=bool)
    for p, first, last_offset in aborted:
        mask |= transactional & (pid == p) & (offsets >= first) & (offsets <= last_offset)
    return mask


# ------------------------------------------------------------------------------------ planning
@dataclass
class Slice:
    """One input partition: bytes [start, end) of one segment, rows with offset in
    [start_offset, end_offset) (None: unbounded), and for read_committed the partition's aborted
    transactions overlapping those offsets (None for read_uncommitted)."""

    topic: str
    partition: int
    path: str
    start: int
    end: int
    file_size: int
    start_offset: int | None
    end_offset: int | None
    aborted: list[Aborted] | None = None
    #: the base offset of the partition's next segment; None for the last (active) segment, the only
    #: one whose partial last batch is ignored (kbatch.log.fetch.partial_tail_ignored)
    next_base: int | None = None
    #: a batch boundary before `start` (an `.index` entry's position; `start` when none): the batches
    #: from there to `start` show whether the slice's first batch follows their offsets
    lookback: int | None = None


def _complete_end(seg: Segment, lo: int, hi: int) -> int:
    """Where the whole batches of bytes [lo, hi) of the last (active) segment end: a split read
    plans up to there, so a partial batch there (what kbatch.log.fetch ignores, as Kafka does) is
    ignored by every input partition alike (unsplit, the reader at the end of the file ignores
    it). A bad header leaves `hi` (the reader fails on it, as the read path does)."""
    from types import SimpleNamespace

    from ..errors import KBatchError, StorageError
    from ..record.file_records import SourceFileRecords, open_records
    from .summary import _hop_scan

    records = open_records(seg.path, seg.size)
    try:
        # a local file's walk reads only the batch headers (the same end and errors as a scan of
        # every byte, which read the whole active segment once more per scan planned)
        local = not isinstance(records, SourceFileRecords) and seg.size <= W.INT32_MAX
        hop = SimpleNamespace(log=records, size=seg.size)  # the LogSegment fields _hop_scan reads
        gen = _hop_scan(hop, lo) if local else records.scan(lo, reuse=True)  # type: ignore[arg-type]
        while True:
            try:
                next(gen)
            except StopIteration as stop:
                return int(stop.value) if int(stop.value) < hi else hi
            except StorageError:
                raise
            except KBatchError:
                return hi
    finally:
        records.close()


def plan_partition(tp: TopicPartition, start_offset: int | None, end_offset: int | None,
                   max_bytes: int, aborted: list[Aborted] | None = None) -> list[Slice]:
    """Slices covering [start_offset, end_offset) of one partition, at most `max_bytes` each
    where the `.index` offers a batch boundary to split at."""
    out: list[Slice] = []
    if aborted is not None:
        lo = INT64_MIN if start_offset is None else start_offset
        hi = INT64_MAX if end_offset is None else end_offset
        aborted = [t for t in aborted if t[2] >= lo and t[1] < hi]  # TransactionIndex.collectAbortedTxns
    segs = tp.segments
    for k, seg in enumerate(segs):
        next_base = segs[k + 1].base_offset if k + 1 < len(segs) else None
        if end_offset is not None and seg.base_offset >= end_offset:
            break
        if start_offset is not None and next_base is not None and next_base <= start_offset:
            continue
        if seg.size == 0:
            continue
        lo = position_for_offset(seg, start_offset) if start_offset is not None and start_offset > seg.base_offset else 0
        hi = seg.size
        if end_offset is not None and (next_base is None or end_offset < next_base):
            hi = end_position_for_offset(seg, end_offset)
        if next_base is None and hi - lo > max_bytes:
            hi = min(hi, _complete_end(seg, lo, hi))
        if hi <= lo:
            continue
        cuts = [lo]
        entries: list[int] = []
        if hi - lo > max_bytes or lo > 0:
            _offs, pos = offset_index(seg)
            entries = pos.tolist()
            for p in entries:
                if cuts[-1] < p < hi and p - cuts[-1] >= max_bytes:
                    cuts.append(p)
        cuts.append(hi)
        for a, b in zip(cuts, cuts[1:]):
            before = [p for p in entries if p < a]
            out.append(Slice(tp.topic, tp.partition, seg.path, a, b, seg.size, start_offset, end_offset, aborted,
                             next_base, before[-1] if before else (0 if a > 0 else a)))
    return out


def offset_ranges(tp: TopicPartition, start_offset: int, end_offset: int | None,
                  max_bytes: int) -> list[tuple[int, int | None]]:
    """plan_partition's slices of offsets [start_offset, end_offset) as offset ranges [lo, hi)
    that cover them exactly, one a slice (a reader that reads offsets, not bytes: the read path's
    read_log takes a range each). A cut at an `.index` entry becomes that entry's offset (the
    batch there holds it: at most that one batch is decoded by both neighbours, each keeping its
    own rows); a cut at a segment's start, the segment's base offset."""
    cuts: list[int] = []
    for s in plan_partition(tp, start_offset, end_offset, max_bytes):
        seg = next((g for g in tp.segments if g.path == s.path), None)
        if seg is None:
            continue
        if s.start == 0:
            at = seg.base_offset
        else:
            offs, pos = offset_index(seg)
            i = int(np.searchsorted(pos, s.start, side="left"))
            if i >= len(pos) or int(pos[i]) != s.start:
                continue  # not an index entry (the first slice's own start): no cut
            at = int(offs[i])
        if start_offset < at and (end_offset is None or at < end_offset) and (not cuts or at > cuts[-1]):
            cuts.append(at)
    bounds: list[int | None] = [start_offset, *cuts, end_offset]
    return [(int(lo), hi) for lo, hi in zip(bounds, bounds[1:]) if lo is not None]
