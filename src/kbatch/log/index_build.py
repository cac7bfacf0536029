"""A segment's indexes built from its .log, as a broker builds them (LogSegment.append /
recover: an .index entry every index.interval.bytes, a .timeindex entry when the max timestamp
grows, the close-time entry): `build_indexes` holds those rules in one place; recovery,
`rebuild_indexes`, `verify_indexes`, the writer and a segment that stops trusting its index files
all follow it. DESIGN.md decision 5: extended batches index negative timestamps."""
from __future__ import annotations

import struct
from typing import TYPE_CHECKING, NamedTuple

from .. import _wire as W
from ..errors import InvalidOffsetError, KBatchError, StorageError
from ..record.file_records import WINDOW, FileRecords, Scan, Window, crc_error_at, scan_buffer
from .index_rules import time_floor

if TYPE_CHECKING:
    from .._typing import Buffer


class MaxTimestampTracker:
    """maxTimestampSoFar / shallowOffsetOfMaxTimestampSoFar: only a strictly larger batch max
    timestamp moves it, and the offset is that batch's last offset. `timestamp` None = none yet."""

    __slots__ = ("timestamp", "offset")

    def __init__(self, timestamp: int | None = None, offset: int | None = None) -> None:
        self.timestamp = timestamp
        self.offset = offset

    def update(self, max_ts: int, last_offset: int, magic: int, attributes: int) -> None:
        if max_ts > time_floor(magic, attributes) and (self.timestamp is None or max_ts > self.timestamp):
            self.timestamp = max_ts
            self.offset = last_offset

    def update_rows(self, s: Window) -> None:
        for ts, off, magic, attrs in zip(s["max_timestamp"].tolist(), s["last_offset"].tolist(),
                                         s["magic"].tolist(), s["attributes"].tolist()):
            self.update(ts, off, magic, attrs)


class IndexBuild(NamedTuple):
    """What the broker's recovery would write for a .log: index bytes, time index bytes, the
    valid byte count, the max timestamp tracker, the last offset (None if no batch), and the error
    that stopped the scan early (None when the whole file was read)."""

    index: bytes  # type: ignore[assignment]  # the field's name shadows tuple.index (callers use it)
    timeindex: bytes
    valid_bytes: int
    max_timestamp: int | None
    offset_of_max_timestamp: int | None
    last_offset: int | None
    error: KBatchError | None
    final_time_entry: bool  # whether the last .timeindex entry is the close-time one (not periodic)
    last_indexed_position: int


_OFF = struct.Struct(">ii")
_SIZE = struct.Struct(">i")
_TIME = struct.Struct(">qi")


def _windows(source: FileRecords | Buffer, start: int = 0, verify_crc: bool = False,
             first_window: int = WINDOW) -> Scan:
    """scan_windows over a FileRecords or any buffer."""
    if isinstance(source, FileRecords):
        return source.scan(start, verify_crc, first_window, reuse=True)
    return scan_buffer(source, start, verify_crc, first_window)


def build_indexes(source: FileRecords | Buffer, base_offset: int, index_interval_bytes: int = W.DEFAULT_INDEX_INTERVAL_BYTES, *,
                  verify_crc: bool = True, stop_on_error: bool = False) -> IndexBuild:
    """Index a .log (a FileRecords or a buffer) as LogSegment.recover does (kafka-format.md
    §5.1-5.2): before each batch, if (its position - the last indexed position) > interval, add
    (batch last offset, batch position) to .index and (maxTimestampSoFar, offsetOfMax) to
    .timeindex when the timestamp grew; the first batch is never indexed; a final time entry at
    the end. A partial last batch ends the scan. A corrupt batch raises, or with stop_on_error ends
    the scan there, every batch before it kept (recovery truncates at it, as Kafka does)."""
    index = bytearray()
    timeindex = bytearray()
    tracker = MaxTimestampTracker()
    last_indexed_pos = 0
    last_time_ts: int | None = None
    last_offset: int | None = None
    error: KBatchError | None = None
    gen = _windows(source, 0, verify_crc)
    valid = 0
    try:
        while True:
            try:
                s = next(gen)
            except StopIteration as stop:
                valid = stop.value
                break
            cols = [s[k].tolist() for k in ("position", "size", "magic", "last_offset", "max_timestamp",
                                            "attributes", "base_offset", "crc_valid")]
            for i, (pos, size, magic, last, max_ts, attrs, first, ok) in enumerate(zip(*cols)):
                if verify_crc and not ok:
                    raise crc_error_at(s, i)
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
                    if tracker.timestamp is not None and (last_time_ts is None or tracker.timestamp > last_time_ts):
                        assert tracker.offset is not None  # set with the timestamp
                        timeindex += _TIME.pack(tracker.timestamp, tracker.offset - base_offset)
                        last_time_ts = tracker.timestamp
                    last_indexed_pos = pos
                last_offset = last
                valid = pos + size
    except KBatchError as e:
        if not stop_on_error or isinstance(e, StorageError):
            raise
        error = e
    final = tracker.timestamp is not None and (last_time_ts is None or tracker.timestamp > last_time_ts)
    if final:
        assert tracker.offset is not None  # set with the timestamp
        timeindex += _TIME.pack(tracker.timestamp, tracker.offset - base_offset)
    return IndexBuild(bytes(index), bytes(timeindex), valid, tracker.timestamp, tracker.offset, last_offset, error,
                      final, last_indexed_pos)


__all__ = ["MaxTimestampTracker", "IndexBuild", "build_indexes"]
