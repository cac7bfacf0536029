"""Index files as Kafka brokers of each era wrote them while appending, for the index-rule tests.

Written from Kafka's source history (docs/broker-data.md), without kbatch.log.segment / index:
`LogSegment.append(largestOffset, largestTimestamp, offsetOfMaxTimestamp, records)` indexes when
more than index.interval.bytes were appended since the last entry (the counter starts at 0 when
the segment is opened, so spacing restarts after a broker restart); a clean shutdown or roll adds
the time index's final entry. What each era passes in:

| era | .index offset | .timeindex offset for an uncompressed CreateTime v2 leader append |
|---|---|---|
| 0.11-1.1 | the append's first offset | the first record holding the batch's max timestamp |
| 2.0-3.6 | the append's last offset | the first record holding the batch's max timestamp |
| 3.7+ | the append's last offset | the batch's last offset |

Followers (any era) append fetched chunks of several batches and pass the last offset of the first
batch holding the chunk's max timestamp; compressed and LogAppendTime batches pass the last offset.
"""
from __future__ import annotations

import struct

import kbatch

ERAS = {
    "0.11-1.1": dict(index_first_offset=True, record_offset=True),
    "2.0-3.6": dict(index_first_offset=False, record_offset=True),
    "3.7+": dict(index_first_offset=False, record_offset=False),
}


class BrokerSegment:
    """One segment's .log/.index/.timeindex bytes as a broker of `era` writes them."""

    def __init__(self, base_offset: int, era: str, interval: int = 4096):
        self.base = base_offset
        self.rules = ERAS[era]
        self.interval = interval
        self.log = b""
        self.index = b""
        self.timeindex = b""
        self.since = 0
        self.max_ts = None
        self.max_off = None
        self.last_time = None

    def restart(self) -> None:
        """A broker restart: the appended-bytes counter starts again from 0."""
        self.since = 0

    def append(self, batches: list, *, leader: bool = True) -> None:
        """One LogSegment.append of raw batches: a leader's produce (one batch) or a follower's
        fetched chunk (several)."""
        infos = [next(kbatch.iter_batches(b)) for b in batches]
        chunk = b"".join(batches)
        first, last = infos[0].base_offset, infos[-1].last_offset
        largest_ts, off_of_max = -1, None
        for b, info in zip(batches, infos):
            if info.max_timestamp > largest_ts:
                largest_ts = info.max_timestamp
                off_of_max = info.last_offset
                in_place = (leader and self.rules["record_offset"] and info.compression == 0
                            and info.timestamp_type == kbatch.TimestampType.CREATE_TIME)
                if in_place:  # LogValidator.assignOffsetsNonCompressed: the record's own offset
                    off_of_max = next(r.offset for r in info if r.timestamp == info.max_timestamp)
        position = len(self.log)
        self.log += chunk
        if largest_ts > (-1 if self.max_ts is None else self.max_ts):
            self.max_ts, self.max_off = largest_ts, off_of_max
        if self.since > self.interval:
            off = first if self.rules["index_first_offset"] else last
            self.index += struct.pack(">ii", off - self.base, position)
            self._maybe_time()
            self.since = 0
        self.since += len(chunk)

    def _maybe_time(self) -> None:
        if self.max_ts is not None and (self.last_time is None or self.max_ts > self.last_time):
            self.timeindex += struct.pack(">qi", self.max_ts, self.max_off - self.base)
            self.last_time = self.max_ts

    def close(self) -> None:
        """Clean shutdown or roll: the final time index entry."""
        self._maybe_time()

    def write(self, directory) -> None:
        stem = directory / f"{self.base:020d}"
        stem.with_suffix(".log").write_bytes(self.log)
        stem.with_suffix(".index").write_bytes(self.index)
        stem.with_suffix(".timeindex").write_bytes(self.timeindex)
