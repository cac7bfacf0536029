"""The read path's slice read (Kafka's LocalLog.read -> FetchDataInfo): where a fetch's bytes are,
not the bytes.

`read_slice(log, fetch_offset, max_bytes, ...)` answers a Fetch for one partition as a broker does
(UnifiedLog.read / LogSegment.read): the segment holding `fetch_offset` (its index, checked
against the log), the byte range from the batch holding it up to `max_bytes` (KIP-74: the first
batch whole when `min_one_message`), never past the high watermark or, for read_committed, the
last stable offset; the aborted transactions a read_committed consumer needs; and the damage
answer of kbatch.log.fetch (`hole_at`, `unreadable_at`, `undecided_at`, `OffsetOrder`): an offset
inside bytes that could not be read, or behind a torn middle segment, or a last stable offset
that damage may have hidden a marker behind, is an error, never a silent jump past them; a slice
ends before a batch whose base offset is out of order. The records
come back as a `SegmentSlice` (segment, position, size), as Kafka's FetchDataInfo wraps a
FileRecords slice, so `kbatch serve` sends them with sendfile without reading them.

It lives beside kbatch.log.fetch (whose FetchResult reads batches for every other reader) and
uses its rules; `serve`'s Fetch reads partitions only through it.
"""
from __future__ import annotations

import bisect
from typing import TYPE_CHECKING, NamedTuple

from .fetch import (IsolationLevel, OffsetOrder, UnreadableRange, collect_aborted_txns, hole_at, transaction_state,
                    undecided_at, unreadable_at)

if TYPE_CHECKING:
    from .index import AbortedTxn
    from .segment import LogSegment
    from .partition_log import PartitionLog


class LogOffsetMetadata(NamedTuple):
    """Where the fetch offset is (Kafka's LogOffsetMetadata): the offset, the base offset of the
    segment holding it and the byte position there of the batch holding it."""

    message_offset: int
    segment_base_offset: int
    relative_position: int


class SegmentSlice(NamedTuple):
    """`size` bytes at `position` of one segment's .log (Kafka's FileRecords.slice)."""

    segment: LogSegment
    position: int
    size: int

    @property
    def path(self) -> str:
        return self.segment.log.path

    def read(self) -> bytes:
        """The bytes themselves (a reader that does not send the file)."""
        return bytes(self.segment.log.read(self.position, self.size))


class FetchDataInfo(NamedTuple):
    """One partition's answer to a fetch (Kafka's FetchDataInfo, with the bounds it was read to)."""

    #: where the fetch offset is (None when nothing was read: out of range, nothing new, damage)
    fetch_offset_metadata: LogOffsetMetadata | None
    #: the bytes to send (None: none)
    records: SegmentSlice | None
    #: read_committed: the aborted transactions overlapping what may be sent; None otherwise
    aborted_transactions: list[AbortedTxn] | None
    high_watermark: int
    #: reads stopped before this offset: the last stable offset (read_committed) or the high watermark
    upper_offset: int
    #: the fetch offset is below the log start or past the high watermark (OFFSET_OUT_OF_RANGE)
    out_of_range: bool = False
    #: bytes that could not be read hide the fetch offset (CORRUPT_MESSAGE)
    unreadable: UnreadableRange | None = None


def _stable_offset(log: PartitionLog, high_watermark: int) -> int:
    fuo = transaction_state(log).first_unstable_offset
    return high_watermark if fuo is None else min(fuo, high_watermark)


def _order(orders: dict[int, OffsetOrder] | None, seg: LogSegment) -> OffsetOrder:
    """The OffsetOrder of `seg` a caller keeps (a new one when it keeps none, or the segment was
    truncated since it was checked)."""
    order = None if orders is None else orders.get(seg.base_offset)
    if order is None or order.hi > seg.size:
        order = OffsetOrder()
        if orders is not None:
            orders[seg.base_offset] = order
    return order


def read_slice(log: PartitionLog, fetch_offset: int, max_bytes: int, *, min_one_message: bool = True,
               isolation: IsolationLevel | int = IsolationLevel.READ_UNCOMMITTED,
               high_watermark: int | None = None, high_watermark_position: tuple[int, int] | None = None,
               offset_orders: dict[int, OffsetOrder] | None = None) -> FetchDataInfo:
    """Read `log` from `fetch_offset` as a broker answers a Fetch (see the module docstring).

    high_watermark: reads stop before it (default: the log end offset); a server that publishes
    its high watermark after each append gives its own. high_watermark_position: (segment base
    offset, byte position) where the batches below the high watermark end in that segment (default:
    where the active segment's complete batches end), so a batch being written is never sent.
    offset_orders: {segment base offset: OffsetOrder} a caller keeps between reads (serve, per
    partition), so that the offset order of the bytes sent is checked once per byte; without it
    each read checks its own slice."""
    hw = log.end_offset() if high_watermark is None else high_watermark
    committed = int(isolation) == IsolationLevel.READ_COMMITTED
    upper = _stable_offset(log, hw) if committed else hw
    segments = log.segments
    if high_watermark_position is None:
        active = segments[-1] if segments else None
        high_watermark_position = (0, 0) if active is None else (active.base_offset, active.read_end()[1])
    hw_segment, hw_position = high_watermark_position
    nothing = FetchDataInfo(None, None, [] if committed else None, hw, upper)
    if fetch_offset < log.log_start_offset or fetch_offset > hw:
        return nothing._replace(aborted_transactions=None, out_of_range=True)
    if fetch_offset >= upper:
        undecided = undecided_at(transaction_state(log), upper) if committed else None
        if undecided is not None:  # damage that may hide a marker is no last stable offset
            return nothing._replace(aborted_transactions=None, unreadable=undecided)
        return nothing
    bases = segments.base_offsets()
    i = max(0, bisect.bisect_right(bases, fetch_offset) - 1)  # the segment holding it (LogSegments.floor)
    while i < len(segments):
        seg = segments[i]
        start = seg.translate_offset(fetch_offset)
        hole = hole_at(seg, fetch_offset, start.offset) if start is not None else None
        if hole is not None:  # an offset inside unreadable bytes is never skipped
            return nothing._replace(aborted_transactions=None, unreadable=UnreadableRange(
                hole.file, hole.position, hole.size, hole.after_offset, hole.before_offset, hole.why))
        if start is None or start.offset < fetch_offset:
            if i + 1 < len(segments) and fetch_offset < bases[i + 1]:
                hit = unreadable_at(seg, fetch_offset)
                if hit is not None:  # a torn or damaged middle segment: never a silent jump past it
                    return nothing._replace(aborted_transactions=None, unreadable=UnreadableRange(
                        seg.log.path, hit[0], seg.size - hit[0], hit[1], bases[i + 1], hit[2]))
            i += 1
            continue
        if seg.base_offset == hw_segment and upper == hw:
            max_position = hw_position
        elif upper < (bases[i + 1] if i + 1 < len(bases) else hw + 1):
            end = seg.translate_offset(upper)
            max_position = end.position if end is not None else hw_position if seg.base_offset == hw_segment \
                else seg.size
        else:
            max_position = seg.size
        if start.position >= max_position:
            return nothing
        limit = max(max_bytes, start.size) if min_one_message else max_bytes
        size = min(max_position - start.position, limit)
        if size <= 0:
            return nothing
        # the read path's rule: a base offset out of order (no CRC covers it) is damage, never sent
        bad = _order(offset_orders, seg).first_bad(seg, fetch_offset, start.position + size,
                                                   bases[i + 1] if i + 1 < len(bases) else None)
        if bad is not None:
            if bad[0] <= start.position:
                return nothing._replace(aborted_transactions=None, unreadable=UnreadableRange(
                    seg.log.path, bad[0], seg.size - bad[0], None, bases[i + 1] if i + 1 < len(bases) else None,
                    bad[1]))
            size = bad[0] - start.position
        # the aborted transactions up to the high watermark, as a broker lists them (LogSegment.collectAbortedTxns)
        aborted = collect_aborted_txns(transaction_state(log).aborted, fetch_offset, hw) if committed else None
        where = LogOffsetMetadata(fetch_offset, seg.base_offset, start.position)
        return FetchDataInfo(where, SegmentSlice(seg, start.position, size), aborted, hw, upper)
    return nothing


def read_file_slice(path: str, start: int, end: int, size: int | None = None) -> bytes:
    """Bytes [start, end) of a segment file by its path, for a reader that planned its slices
    without a Log (the Python Spark reader's executors): one pread of a local file, one ranged
    request of a remote object (`size`, the file's size when known, spares a metadata request).
    Never a memory map: a file truncated under it gives a kbatch error, not SIGBUS."""
    from ..record.file_records import open_records

    records = open_records(path, size)
    try:
        return records.read(start, end - start)
    finally:
        records.close()


__all__ = ["FetchDataInfo", "LogOffsetMetadata", "SegmentSlice", "read_slice", "read_file_slice"]
