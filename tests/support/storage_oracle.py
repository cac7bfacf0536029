"""Independent oracles for the storage tests.

Written from kafka-format.md §5-6 without using kbatch.log.index / segment / log:
- `read_segment`: every batch and record of a .log, decoded through the public reader;
- `expected_index_bytes`: .index / .timeindex bytes from the broker's rules;
- `brute_offset_for_time`: ListOffsets by decoding every record (§5.4, with the
  largestTimestamp/mtime segment choice);
- `RollSimulation`: UnifiedLog.maybeRoll / LogSegment.shouldRoll and deleteOldSegments (§6.3).
"""
from __future__ import annotations

import os
import struct
from dataclasses import dataclass, field

import kbatch

INT32_MAX = 2**31 - 1
INT64_MIN = -(2**63)


@dataclass
class BatchInfo:
    position: int
    size: int
    base_offset: int
    last_offset: int
    max_timestamp: int
    extended: bool
    magic: int
    records: list  # (offset, timestamp or None)
    epoch: int


def read_segment(path) -> list:
    with open(path, "rb") as f:
        data = f.read()
    out = []
    for b in kbatch.iter_batches(data, strict=False):
        recs = [(r.offset, r.timestamp) for r in b]
        out.append(BatchInfo(b.position, b.size_in_bytes, b.base_offset, b.last_offset, b.max_timestamp,
                             bool(b.timestamp_extended), b.magic, recs, b.partition_leader_epoch))
    return out


def counts_for_time_index(b: BatchInfo, ts: int) -> bool:
    """DESIGN.md decision 5: -1 is the floor for Kafka batches, Long.MIN_VALUE for extended ones."""
    return ts > (INT64_MIN if (b.extended and b.magic == 2) else -1)


def expected_index_bytes(batches, base_offset: int, interval: int):
    index, timeindex = b"", b""
    max_ts = max_off = None
    last_pos = 0
    last_time = None
    for b in batches:
        if counts_for_time_index(b, b.max_timestamp) and (max_ts is None or b.max_timestamp > max_ts):
            max_ts, max_off = b.max_timestamp, b.last_offset
        if b.position - last_pos > interval:
            index += struct.pack(">ii", b.last_offset - base_offset, b.position)
            if max_ts is not None and (last_time is None or max_ts > last_time):
                timeindex += struct.pack(">qi", max_ts, max_off - base_offset)
                last_time = max_ts
            last_pos = b.position
    if max_ts is not None and (last_time is None or max_ts > last_time):
        timeindex += struct.pack(">qi", max_ts, max_off - base_offset)
    return index, timeindex


def segment_largest_timestamp(path, batches) -> int:
    best = None
    for b in batches:
        if counts_for_time_index(b, b.max_timestamp) and (best is None or b.max_timestamp > best):
            best = b.max_timestamp
    if best is None:
        return os.stat(path).st_mtime_ns // 1_000_000
    return best


def log_segments(directory) -> list:
    """[(base offset, .log path, batches)] in offset order."""
    names = sorted(n for n in os.listdir(directory) if n.endswith(".log") and len(n) == 24)
    return [(int(n[:20]), os.path.join(directory, n), read_segment(os.path.join(directory, n))) for n in names]


def brute_offset_for_time(segments, target: int, start_offset: int = 0):
    """(offset, timestamp, epoch or None) of the first record with ts >= target in the first segment
    whose largest timestamp >= target, or None."""
    for _base, path, batches in segments:
        if segment_largest_timestamp(path, batches) >= target:
            for b in batches:
                for off, ts in b.records:
                    if ts is not None and ts >= target and off >= start_offset:
                        return off, ts, (None if b.epoch < 0 else b.epoch)
            return None
    return None


def brute_max_timestamp(segments):
    best = None  # (ts, offset)
    for _base, _path, batches in segments:
        for b in batches:
            if counts_for_time_index(b, b.max_timestamp) and (best is None or b.max_timestamp > best[0]):
                ts = b.max_timestamp
                off = next(o for o, t in b.records if t == ts)
                best = (ts, off)
    return best


@dataclass
class SimSegment:
    base: int
    created: int
    size: int = 0
    rolling_ts: int | None = None
    max_ts: int | None = None
    since_index: int = 0
    index_entries: int = 0
    time_entries: int = 0
    last_time: int | None = None
    sizes: list = field(default_factory=list)


class RollSimulation:
    """Kafka's roll and retention rules over (size, max timestamp, first, last, now) appends.
    Every append here is one batch, as the tests make them."""

    def __init__(self, cfg, now: int):
        self.cfg = cfg
        self.segments = [SimSegment(0, now)]
        self.leo = 0

    def append(self, size: int, max_ts: int, first: int, last: int, now: int, extended: bool = False):
        seg = self.segments[-1]
        if seg.rolling_ts is not None and seg.rolling_ts >= 0:
            waited = max_ts - seg.rolling_ts
        else:
            waited = now - seg.created
        max_idx = self.cfg.segment_index_bytes // 8
        max_time = self.cfg.segment_index_bytes // 12
        if (seg.size > self.cfg.segment_bytes - size or (seg.size > 0 and waited > self.cfg.segment_ms)
                or seg.index_entries >= max_idx or seg.time_entries >= max_time - 1
                or not 0 <= last - seg.base <= INT32_MAX):
            base = max(first, self.leo)
            if not (seg.base == base and seg.size == 0):
                self._close(seg)
                self.segments.append(SimSegment(base, now))
            seg = self.segments[-1]
        if seg.size == 0:
            seg.rolling_ts = max_ts
        floor = INT64_MIN if extended else -1
        if max_ts > floor and (seg.max_ts is None or max_ts > seg.max_ts):
            seg.max_ts = max_ts
        if seg.since_index > self.cfg.index_interval_bytes:
            seg.index_entries += 1
            if seg.max_ts is not None and (seg.last_time is None or seg.max_ts > seg.last_time):
                seg.time_entries += 1
                seg.last_time = seg.max_ts
            seg.since_index = 0
        seg.since_index += size
        seg.size += size
        seg.sizes.append(size)
        self.leo = last + 1

    def _close(self, seg):
        if seg.max_ts is not None and (seg.last_time is None or seg.max_ts > seg.last_time):
            seg.time_entries += 1
            seg.last_time = seg.max_ts

    def bases(self):
        return [s.base for s in self.segments]

    def delete_old(self, now: int, mtimes: dict) -> list:
        """deleteRetentionMsBreachedSegments then deleteRetentionSizeBreachedSegments."""
        gone = []
        largest = lambda s: s.max_ts if s.max_ts is not None else mtimes[s.base]  # noqa: E731
        if self.cfg.retention_ms >= 0:
            gone += self._delete(lambda s: now - largest(s) > self.cfg.retention_ms, now)
        total = sum(s.size for s in self.segments)
        if self.cfg.retention_bytes >= 0 and total >= self.cfg.retention_bytes:
            diff = [total - self.cfg.retention_bytes]

            def pred(s):
                if diff[0] - s.size >= 0:
                    diff[0] -= s.size
                    return True
                return False

            gone += self._delete(pred, now)
        return gone

    def _delete(self, pred, now):
        deletable = []
        for i, s in enumerate(self.segments):
            last = i == len(self.segments) - 1
            if last and s.size == 0:
                break
            if not pred(s):
                break
            deletable.append(s)
        if not deletable:
            return []
        if len(deletable) == len(self.segments):
            self._close(self.segments[-1])
            self.segments.append(SimSegment(self.leo, now))
        for s in deletable:
            self.segments.remove(s)
        return [s.base for s in deletable]
