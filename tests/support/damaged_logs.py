"""Damaged partition directories for the lookup tests, and the answer Kafka would give over what
can still be read.

Written without kbatch.log (the batches come from the public BatchBuilder, the index files from
`storage_oracle.expected_index_bytes`, the damage is byte surgery on the files):

- `build_partition`: segments of multi-record CreateTime batches, timestamps rising with the offset
  (`ts_of(offset)`), with the trimmed .index/.timeindex a broker's recovery writes;
- damage: `bad_length` (a length field that runs past the end, or one that lands the next header in
  the middle of a batch: a structural error), `crc_flip` (a timestamp changed, the CRC left as it
  was), `bad_timestamp_crc_fixed` (a timestamp changed and the CRC recomputed: a valid batch the
  index files contradict), `garbage_index` / `missing_index`;
- `old_broker_partition`: a Kafka 2.0-3.6 leader's partition (tests/support/broker_eras.py), whose
  .timeindex names the record holding each batch's max timestamp, inside the batch;
- `Partition.readable_answer(T)`: the first offset with timestamp >= T over the batches that can be
  read and whose CRC holds (the first segment whose readable largest timestamp >= T, as Kafka).
"""
from __future__ import annotations

import os
import struct
from dataclasses import dataclass, field
from pathlib import Path

import kbatch

from . import storage_oracle as oracle
from .broker_eras import BrokerSegment

TS0 = 1_700_000_000_000
STEP = 10  # ms between consecutive offsets
PER_BATCH = 10
VALUE = 200


def ts_of(offset: int) -> int:
    return TS0 + offset * STEP


def make_batch(base: int, n: int = PER_BATCH, *, value_size: int = VALUE, stamps: list[int] | None = None,
               epoch: int = 5) -> bytes:
    b = kbatch.BatchBuilder(base_offset=base, partition_leader_epoch=epoch)
    for i in range(n):
        b.append(ts_of(base + i) if stamps is None else stamps[i], b"k%d" % (base + i), bytes([65 + i % 26]) * value_size)
    return b.build()


@dataclass
class Batch:
    segment: int       # segment base offset
    position: int
    size: int
    base: int
    last: int
    records: list      # [(offset, timestamp)]
    readable: bool = True


@dataclass
class Partition:
    path: Path
    batches: list = field(default_factory=list)   # every batch as written, in log order

    def log_file(self, base: int) -> Path:
        return self.path / f"{base:020d}.log"

    def batch(self, i: int) -> Batch:
        return self.batches[i]

    def segment_bases(self) -> list[int]:
        return sorted({b.segment for b in self.batches})

    def readable_answer(self, target: int) -> tuple[int, int] | None:
        """(offset, timestamp) Kafka would answer over the readable batches, or None."""
        for base in self.segment_bases():
            seg = [b for b in self.batches if b.segment == base and b.readable]
            stamps = [ts for b in seg for _o, ts in b.records]
            if stamps and max(stamps) >= target:
                for b in seg:
                    for off, ts in b.records:
                        if ts >= target:
                            return off, ts
        return None

    def unreadable(self) -> list[Batch]:
        return [b for b in self.batches if not b.readable]

    def rewrite_indexes(self, base: int) -> None:
        """The .index/.timeindex a broker's recovery would write for the segment's .log as it is now."""
        batches = oracle.read_segment(self.log_file(base))
        index, timeindex = oracle.expected_index_bytes(batches, base, 4096)
        (self.path / f"{base:020d}.index").write_bytes(index)
        (self.path / f"{base:020d}.timeindex").write_bytes(timeindex)


def build_partition(directory: Path, *, batches: int = 100, segments: int = 1, per_batch: int = PER_BATCH,
                    name: str = "t-0") -> Partition:
    """`segments` segments of `batches` batches in all; offset o has timestamp ts_of(o)."""
    path = Path(directory) / name
    path.mkdir(parents=True, exist_ok=True)
    part = Partition(path)
    per_segment = -(-batches // segments)
    offset = 0
    for s in range(segments):
        base = offset
        data = bytearray()
        for _ in range(min(per_segment, batches - s * per_segment)):
            raw = make_batch(offset, per_batch)
            part.batches.append(Batch(base, len(data), len(raw), offset, offset + per_batch - 1,
                                      [(o, ts_of(o)) for o in range(offset, offset + per_batch)]))
            data += raw
            offset += per_batch
        part.log_file(base).write_bytes(bytes(data))
        part.rewrite_indexes(base)
    return part


def _patch(path: Path, position: int, data: bytes) -> None:
    with open(path, "r+b") as f:
        f.seek(position)
        f.write(data)


def bad_length(part: Partition, i: int, *, past_end: bool = True, delta: int | None = None) -> Batch:
    """Batch i's length field made wrong: past_end, it runs past the end of the file (the scan
    stops there as at a torn tail); otherwise it is 100 bytes short (or `delta` bytes off), so the
    next header read lands inside a batch (a structural error). Batch i is unreadable; the batches
    after it are intact."""
    b = part.batch(i)
    size = os.path.getsize(part.log_file(b.segment))
    new = size * 2 if past_end and delta is None else b.size - 12 + (-100 if delta is None else delta)
    _patch(part.log_file(b.segment), b.position + 8, struct.pack(">i", new))
    b.readable = False
    return b


_MAX_TS_AT = 8 + 4 + 4 + 1 + 4 + 2 + 4 + 8  # baseOffset, length, leader epoch, magic, crc, attributes, lastOffsetDelta, baseTimestamp


def crc_flip(part: Partition, i: int, new_max: int) -> Batch:
    """Batch i's max timestamp (header) and base timestamp set so that its records read as if
    they started at `new_max`, the CRC left as it was: the batch fails its CRC check."""
    b = part.batch(i)
    base_ts_at = _MAX_TS_AT - 8
    first = new_max - (b.records[-1][1] - b.records[0][1])
    _patch(part.log_file(b.segment), b.position + base_ts_at, struct.pack(">qq", first, new_max))
    b.readable = False
    return b


def bad_timestamp_crc_fixed(part: Partition, i: int, new_max: int) -> Batch:
    """Batch i's timestamps moved (as crc_flip) and its CRC recomputed: a valid batch whose
    timestamps the (unchanged) index files contradict."""
    b = part.batch(i)
    crc_flip(part, i, new_max)
    b.readable = True
    shift = new_max - b.records[-1][1]
    b.records = [(o, ts + shift) for o, ts in b.records]
    p = part.log_file(b.segment)
    with open(p, "r+b") as f:
        f.seek(b.position)
        raw = f.read(b.size)
    crc = kbatch.crc32c(raw[21:])
    _patch(p, b.position + 17, struct.pack(">I", crc))
    return b


def garbage_index(part: Partition, base: int = 0) -> None:
    """.index and .timeindex replaced by bytes of the right sizes that name nothing real."""
    (part.path / f"{base:020d}.index").write_bytes(struct.pack(">ii", 7, 13) * 5)
    (part.path / f"{base:020d}.timeindex").write_bytes(struct.pack(">qi", ts_of(3), 1) + struct.pack(">qi", ts_of(900), 2))


def missing_index(part: Partition, base: int = 0) -> None:
    for suffix in (".index", ".timeindex"):
        p = part.path / f"{base:020d}{suffix}"
        if p.exists():
            p.unlink()


def old_broker_partition(directory: Path, *, batches: int = 60, name: str = "old-0") -> Partition:
    """A partition a Kafka 2.0-3.6 leader wrote: each batch's max timestamp sits on a record in
    the middle of the batch, and the .timeindex names that record's offset (not the batch's last)."""
    path = Path(directory) / name
    path.mkdir(parents=True, exist_ok=True)
    part = Partition(path)
    seg = BrokerSegment(0, "2.0-3.6")
    offset = 0
    for _ in range(batches):
        # the max sits on record 3 of 6: later records are older (a producer's out-of-order sends)
        stamps = [ts_of(offset + k) for k in range(6)]
        stamps[3] = ts_of(offset + 5) + 1
        stamps[4], stamps[5] = ts_of(offset + 3), ts_of(offset + 4)
        raw = make_batch(offset, 6, stamps=stamps, value_size=700)
        part.batches.append(Batch(0, len(seg.log), len(raw), offset, offset + 5,
                                  [(offset + k, stamps[k]) for k in range(6)]))
        seg.append([raw])
        offset += 6
    seg.close()
    seg.write(path)
    return part
