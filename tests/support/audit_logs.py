"""Partition directories with planted anomalies, for `kbatch audit` and `kbatch report`.

A `PlantedLog` writes v2 batches of chosen producer ids, epochs, sequences, timestamps, leader
epochs and transactions straight into segment files (no validator in between: the point is to
write what a broker should never have written), then `write()` lays them out as
`<base offset>.log` segments. `clean()` is a background every anomaly is planted into: plain,
idempotent and transactional producers, all in order, with no finding of any severity. `PLANTS`
names one builder per anomaly; each returns what the audit must find (check id and offset).
"""
from __future__ import annotations

import os
import struct
from dataclasses import dataclass, field
from typing import Callable

import kbatch
from kbatch import _wire as W

NOW = 1_714_554_000_000  # 2024-05-01T09:00:00Z
STEP = 1000              # ms between batches of the background


@dataclass
class PlantedLog:
    path: str
    clock: int = NOW
    next_offset: int = 0
    leader_epoch: int = 0
    segments: list[list[bytes]] = field(default_factory=lambda: [[]])
    seqs: dict[tuple[int, int], int] = field(default_factory=dict)  # (pid, epoch) -> next sequence

    def _add(self, data: bytes) -> tuple[int, int]:
        base = self.next_offset
        (delta,) = struct.unpack_from(">i", data, W.LAST_OFFSET_DELTA_OFFSET)
        self.segments[-1].append(data)
        self.next_offset = base + delta + 1
        return base, base + delta

    def data(self, n: int = 3, *, pid: int = -1, epoch: int = 0, seq: int | None = None, txn: bool = False,
             ts: int | None = None, stamps: list[int] | None = None, value_size: int = 20,
             leader_epoch: int | None = None, log_append_time: int | None = None) -> tuple[int, int]:
        """A data batch of n records at the next offset; returns (base, last offset). An idempotent
        producer's sequence continues from its last batch unless `seq` says otherwise."""
        self.clock += STEP
        t = self.clock if ts is None else ts
        if pid >= 0 and seq is None:
            seq = self.seqs.get((pid, epoch), 0)
        b = kbatch.BatchBuilder(base_offset=self.next_offset, timestamp_extended=False,
                                producer_id=pid, producer_epoch=epoch if pid >= 0 else -1,
                                base_sequence=seq if pid >= 0 else -1, is_transactional=txn,
                                partition_leader_epoch=self.leader_epoch if leader_epoch is None else leader_epoch,
                                timestamp_type=(kbatch.TimestampType.LOG_APPEND_TIME if log_append_time is not None
                                                else kbatch.TimestampType.CREATE_TIME),
                                log_append_time=log_append_time)
        for i in range(n):
            b.append(stamps[i] if stamps else t, b"k%d" % (self.next_offset + i), b"v" * value_size)
        if pid >= 0 and seq is not None:
            self.seqs[(pid, epoch)] = max(self.seqs.get((pid, epoch), 0), seq + n)
        return self._add(b.build())

    def marker(self, pid: int, epoch: int = 0, commit: bool = True, ts: int | None = None) -> tuple[int, int]:
        self.clock += STEP
        data = kbatch.build_end_txn_marker(producer_id=pid, producer_epoch=epoch, commit=commit,
                                           coordinator_epoch=1, base_offset=self.next_offset,
                                           timestamp=self.clock if ts is None else ts,
                                           partition_leader_epoch=self.leader_epoch)
        return self._add(data)

    def empty(self, pid: int, epoch: int = 0, n: int = 2) -> tuple[int, int]:
        """An empty batch, as the log cleaner leaves one to keep a producer's last sequence: the
        header of an n-record batch (offsets kept) with no records."""
        base, last = self.data(n, pid=pid, epoch=epoch)
        data = bytearray(self.segments[-1].pop()[:W.RECORD_BATCH_OVERHEAD])
        struct.pack_into(">i", data, W.LENGTH_OFFSET, W.RECORD_BATCH_OVERHEAD - W.LOG_OVERHEAD)
        struct.pack_into(">i", data, W.RECORDS_COUNT_OFFSET, 0)
        struct.pack_into(">I", data, W.CRC_OFFSET, kbatch.crc32c(bytes(data[W.ATTRIBUTES_OFFSET:])))
        self.segments[-1].append(bytes(data))
        return base, last

    def roll(self) -> None:
        self.segments.append([])

    def segment_bases(self) -> list[int]:
        bases = []
        for seg in self.segments:
            if seg:
                (base,) = struct.unpack_from(">q", seg[0], 0)
                bases.append(base)
        return bases

    def write(self) -> str:
        os.makedirs(self.path, exist_ok=True)
        for seg in self.segments:
            if not seg:
                continue
            (base,) = struct.unpack_from(">q", seg[0], 0)
            with open(os.path.join(self.path, f"{base:020d}.log"), "wb") as f:
                f.write(b"".join(seg))
        self._write_txn_indexes()
        return self.path

    def _write_txn_indexes(self) -> None:
        """A .txnindex for each segment holding an ABORT marker, as a broker writes it (until a
        batch that does not decode: the planted damage; what follows is not known)."""
        from kbatch.log.producer_state import OngoingTxns, marker_type, txn_index_bytes

        ongoing = OngoingTxns()
        for seg in self.segments:
            if not seg:
                continue
            (base,) = struct.unpack_from(">q", seg[0], 0)
            entries = []
            try:
                for data in seg:
                    (b,) = list(kbatch.iter_batches(data))
                    got = ongoing.on_batch(b.producer_id, b.base_offset, b.is_transactional, b.is_control,
                                           marker_type(b)) if b.magic >= 2 else None
                    if got is not None:
                        entries.append(got)
            except (kbatch.KBatchError, ValueError):
                return
            if entries:
                with open(os.path.join(self.path, f"{base:020d}.txnindex"), "wb") as f:
                    f.write(txn_index_bytes(entries))

    def file_of(self, offset: int) -> tuple[str, int]:
        """(.log path, byte position) of the batch holding `offset`."""
        for seg in self.segments:
            pos = 0
            for data in seg:
                (base,) = struct.unpack_from(">q", data, 0)
                (delta,) = struct.unpack_from(">i", data, W.LAST_OFFSET_DELTA_OFFSET)
                if base <= offset <= base + delta:
                    (first,) = struct.unpack_from(">q", seg[0], 0)
                    return os.path.join(self.path, f"{first:020d}.log"), pos
                pos += len(data)
        raise KeyError(offset)


IDEM, TXN = 100, 200  # the background's idempotent and transactional producer ids


def clean(path: str, batches: int = 6) -> PlantedLog:
    """The background: plain batches, an idempotent producer and committed/aborted transactions,
    over two segments, all as a broker writes them."""
    log = PlantedLog(path)
    for i in range(batches):
        log.data(3)
        log.data(2, pid=IDEM)
        if i % 2 == 0:
            log.data(2, pid=TXN, txn=True)
            log.data(1, pid=TXN, txn=True)
            log.marker(TXN, commit=i % 4 == 0)
        if i == batches // 2:
            log.roll()
    return log


@dataclass
class Plant:
    """What a planted anomaly must give: its check id, the offset (base offset of the batch) and,
    for the audit, the options it runs with."""

    check: str
    offset: int | None
    options: dict[str, object] = field(default_factory=dict)
    segment_level: bool = False   # found in a file (position), not at an offset


def _tail(log: PlantedLog) -> None:
    """Some more clean batches after the anomaly (the anomaly is never the log's last word)."""
    for _ in range(2):
        log.data(3)
        log.data(2, pid=IDEM)


def plant_sequence_gap(log: PlantedLog) -> Plant:
    log.seqs[(IDEM, 0)] += 5
    base, _ = log.data(2, pid=IDEM)
    _tail(log)
    return Plant("producer.sequence-gap", base)


def plant_duplicate_sequence(log: PlantedLog) -> Plant:
    seq = log.seqs[(IDEM, 0)] - 2
    base, _ = log.data(2, pid=IDEM, seq=seq)
    _tail(log)
    return Plant("producer.duplicate-sequence", base)


def plant_fenced_epoch(log: PlantedLog) -> Plant:
    log.data(2, pid=300, epoch=1)
    log.data(2, pid=300, epoch=2)
    base, _ = log.data(2, pid=300, epoch=1)
    _tail(log)
    return Plant("producer.fenced-epoch", base)


def plant_epoch_back(log: PlantedLog) -> Plant:
    log.data(2, pid=400, epoch=5)
    base, _ = log.data(2, pid=400, epoch=3)
    _tail(log)
    return Plant("producer.epoch-back", base)


def plant_open_transaction(log: PlantedLog) -> Plant:
    _tail(log)
    base, _ = log.data(2, pid=500, txn=True)
    log.data(1)
    return Plant("transaction.open", base)


def plant_hanging_transaction(log: PlantedLog) -> Plant:
    base, _ = log.data(2, pid=500, txn=True)
    log.clock += 20 * 60_000  # the log goes on 20 minutes: over transaction.max.timeout.ms (15)
    _tail(log)
    return Plant("transaction.hanging", base)


def plant_marker_without_data(log: PlantedLog) -> Plant:
    base, _ = log.marker(600, commit=False)
    _tail(log)
    return Plant("transaction.marker-without-data", base)


def plant_future(log: PlantedLog) -> Plant:
    base, _ = log.data(2, ts=NOW + 30 * 86_400_000)
    log.roll()
    _tail(log)
    return Plant("timestamp.future", base)


def plant_too_old(log: PlantedLog) -> Plant:
    base, _ = log.data(2, ts=log.clock - 3 * 3_600_000)
    _tail(log)
    return Plant("timestamp.too-old", base, {"before_max_ms": 3_600_000})


def plant_negative(log: PlantedLog) -> Plant:
    base, _ = log.data(2, ts=-5000)
    _tail(log)
    return Plant("timestamp.negative", base)


def plant_microseconds(log: PlantedLog) -> Plant:
    base, _ = log.data(2, ts=log.clock * 1000)
    _tail(log)
    return Plant("timestamp.unit", base)


def plant_nanoseconds(log: PlantedLog) -> Plant:
    base, _ = log.data(2, ts=log.clock * 1_000_000)
    _tail(log)
    return Plant("timestamp.unit", base)


def plant_backwards(log: PlantedLog) -> Plant:
    base, _ = log.data(2, ts=log.clock - 2 * 86_400_000)
    _tail(log)
    return Plant("timestamp.backwards", base)


def plant_empty_batch(log: PlantedLog) -> Plant:
    base, _ = log.empty(IDEM)
    _tail(log)
    return Plant("storage.empty-batch", base)


def plant_leader_epoch_back(log: PlantedLog) -> Plant:
    log.leader_epoch = 3
    log.data(2)
    base, _ = log.data(2, leader_epoch=2)
    _tail(log)
    return Plant("storage.leader-epoch-back", base)


def plant_oversized(log: PlantedLog) -> Plant:
    base, _ = log.data(1, value_size=5000)
    _tail(log)
    return Plant("storage.oversized", base, {"max_message_bytes": 4000})


def _flip(path: str, position: int) -> None:
    with open(path, "r+b") as f:
        f.seek(position)
        b = f.read(1)
        f.seek(position)
        f.write(bytes([b[0] ^ 0x10]))


def plant_crc(log: PlantedLog) -> Plant:
    base, _ = log.data(2, value_size=50)
    _tail(log)
    return Plant("storage.crc", base, {"after_write": lambda p: _flip(*_at(log, base, 70))})


def plant_truncated(log: PlantedLog) -> Plant:
    _tail(log)

    def cut(p: str) -> None:
        path = os.path.join(log.path, f"{log.segment_bases()[-1]:020d}.log")
        os.truncate(path, os.path.getsize(path) - 7)
    return Plant("storage.truncated", None, {"after_write": cut}, segment_level=True)


def plant_forged_length(log: PlantedLog) -> Plant:
    base, _ = log.data(2)
    _tail(log)

    def forge(p: str) -> None:
        path, pos = log.file_of(base)
        with open(path, "r+b") as f:
            f.seek(pos + W.LENGTH_OFFSET)
            f.write(struct.pack(">i", 3))  # below any batch's overhead
    return Plant("storage.corrupt", base, {"after_write": forge}, segment_level=True)


def plant_index(log: PlantedLog) -> Plant:
    _tail(log)

    def bad_index(p: str) -> None:
        kbatch.rebuild_indexes(p, index_interval_bytes=1)
        path = os.path.join(p, f"{log.segment_bases()[0]:020d}.index")
        with open(path, "r+b") as f:  # entry 1 points 13 bytes into a batch
            f.seek(8 + 4)
            (pos,) = struct.unpack(">i", f.read(4))
            f.seek(8 + 4)
            f.write(struct.pack(">i", pos + 13))
    return Plant("storage.index", None, {"after_write": bad_index}, segment_level=True)


def _at(log: PlantedLog, base: int, delta: int) -> tuple[str, int]:
    path, pos = log.file_of(base)
    return path, pos + delta


#: every anomaly, by name: builder(log) -> Plant (the background is clean(); write() comes after)
PLANTS: dict[str, Callable[[PlantedLog], Plant]] = {
    "sequence-gap": plant_sequence_gap, "duplicate-sequence": plant_duplicate_sequence,
    "fenced-epoch": plant_fenced_epoch, "epoch-back": plant_epoch_back,
    "open-transaction": plant_open_transaction, "hanging-transaction": plant_hanging_transaction,
    "marker-without-data": plant_marker_without_data, "future": plant_future, "too-old": plant_too_old,
    "negative": plant_negative, "microseconds": plant_microseconds, "nanoseconds": plant_nanoseconds,
    "backwards": plant_backwards, "empty-batch": plant_empty_batch, "leader-epoch-back": plant_leader_epoch_back,
    "oversized": plant_oversized, "crc": plant_crc, "truncated": plant_truncated,
    "forged-length": plant_forged_length, "index": plant_index,
}


def planted(path: str, name: str) -> tuple[PlantedLog, Plant]:
    """A clean partition at `path` with the anomaly `name` planted, written to disk."""
    log = clean(path)
    plant = PLANTS[name](log)
    log.write()
    after = plant.options.pop("after_write", None)
    if after is not None:
        after(path)  # type: ignore[operator]
    return log, plant
