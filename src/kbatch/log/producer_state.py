"""Producer state of a partition: ProducerStateManager's snapshot files (`<20-digit offset>.snapshot`
in a partition directory) and the open transactions a log's batches leave (`OngoingTxns`: each
producer's `currentTxnFirstOffset`, what a `.txnindex` entry and the last stable offset come from).

Layout (storage/src/main/resources/message/ProducerSnapshot.json, version 1, read with
kbatch.schema): int16 version, uint32 CRC-32C of every byte after the CRC field (byte 6 on), an
int32 count of 46-byte producer entries. `read_snapshot` checks both as
ProducerStateManager.readSnapshot does and raises CorruptSnapshotError with Kafka's messages.
"""
from __future__ import annotations

import struct
from collections import deque
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from .. import _backend
from .. import _wire as W
from ..errors import CorruptRecordError, CorruptSnapshotError, KBatchError
from .index import AbortedTxn

if TYPE_CHECKING:
    from .._typing import Buffer
    from ..record.batch import Batch
    from ..record.file_records import Window
from ..schema import MESSAGES, read_message

SUFFIX = ".snapshot"  # LogFileUtils.PRODUCER_SNAPSHOT_FILE_SUFFIX
CRC_OFFSET = 2
PRODUCER_ENTRIES_OFFSET = CRC_OFFSET + 4


NUM_BATCHES_TO_RETAIN = 5  # ProducerStateEntry.NUM_BATCHES_TO_RETAIN: the batches kept per producer


@dataclass
class BatchMetadata:
    """One appended batch of a producer: its sequences, offsets and max timestamp."""

    first_seq: int
    last_seq: int
    first_offset: int
    last_offset: int
    timestamp: int


@dataclass(eq=True)
class ProducerStateEntry:
    """One producer's state (Kafka's ProducerStateEntry): its epoch, the coordinator epoch of its last
    marker, its open transaction's first offset, and the metadata of its last batches (at most
    NUM_BATCHES_TO_RETAIN: serve's duplicate check uses them; a snapshot file keeps the last one).
    The batch fields (first_sequence ... timestamp) are None when there is no batch metadata
    (lastOffset < 0 in a snapshot)."""

    producer_id: int
    producer_epoch: int = W.NO_PRODUCER_EPOCH
    coordinator_epoch: int = -1
    last_timestamp: int = W.NO_TIMESTAMP
    current_txn_first_offset: int | None = None
    batches: deque[BatchMetadata] = field(default_factory=lambda: deque(maxlen=NUM_BATCHES_TO_RETAIN))

    @property
    def _last(self) -> BatchMetadata | None:
        return self.batches[-1] if self.batches else None

    @property
    def first_sequence(self) -> int | None:
        return None if self._last is None else self._last.first_seq

    @property
    def last_sequence(self) -> int | None:
        return None if self._last is None else self._last.last_seq

    @property
    def last_offset(self) -> int | None:
        return None if self._last is None else self._last.last_offset

    @property
    def offset_delta(self) -> int | None:
        return None if self._last is None else self._last.last_offset - self._last.first_offset

    @property
    def timestamp(self) -> int | None:
        return None if self._last is None else self._last.timestamp

    @property
    def last_seq(self) -> int:
        """The last sequence appended, NO_SEQUENCE when none (the next batch's check)."""
        return W.NO_SEQUENCE if self._last is None else self._last.last_seq

    def new_epoch(self, epoch: int) -> None:
        """A bump of the producer's epoch: its batches of the old epoch no longer count."""
        self.producer_epoch = epoch
        self.batches = deque(maxlen=NUM_BATCHES_TO_RETAIN)

    def find_duplicate(self, epoch: int, first_seq: int, last_seq: int) -> BatchMetadata | None:
        """The batch of the same epoch and sequences appended before (a producer's retry), if any."""
        if epoch != self.producer_epoch:
            return None
        for b in self.batches:
            if b.first_seq == first_seq and b.last_seq == last_seq:
                return b
        return None

    def _asdict(self) -> dict[str, int | None]:
        """The fields a snapshot holds, as kafka-dump-log's JSON names them (in snake_case)."""
        return {"producer_id": self.producer_id, "producer_epoch": self.producer_epoch,
                "coordinator_epoch": self.coordinator_epoch, "last_timestamp": self.last_timestamp,
                "current_txn_first_offset": self.current_txn_first_offset, "first_sequence": self.first_sequence,
                "last_sequence": self.last_sequence, "last_offset": self.last_offset,
                "offset_delta": self.offset_delta, "timestamp": self.timestamp}


def read_snapshot(data: Buffer) -> list[ProducerStateEntry]:
    """The entries of a producer snapshot (bytes of the whole file)."""
    buf = bytes(data)
    valid = MESSAGES["ProducerSnapshot"]["valid"]
    if len(buf) < 2:
        raise CorruptSnapshotError("Snapshot failed schema validation: the file has no version", position=0,
                                   expected="2 bytes", found=len(buf))
    (version,) = struct.unpack_from(">h", buf, 0)
    if not valid[0] <= version <= valid[1]:
        raise CorruptSnapshotError(f"Snapshot contained an unknown file version {version}", position=0,
                                   expected=f"{valid[0]}..{valid[1]}", found=version)
    try:
        snap, _ = read_message("ProducerSnapshot", version, buf, 2, exact=False)
    except CorruptRecordError as e:
        raise CorruptSnapshotError(f"Snapshot failed schema validation: {e.reason}", position=e.position,
                                   expected=e.expected, found=e.found) from None
    computed = _backend.core.crc32c(buf[PRODUCER_ENTRIES_OFFSET:])
    if snap["crc"] != computed:
        raise CorruptSnapshotError(f"Snapshot is corrupt (CRC is no longer valid). Stored crc: {snap['crc']}. "
                                   f"Computed crc: {computed}", position=CRC_OFFSET, expected=computed,
                                   found=snap["crc"])
    out: list[ProducerStateEntry] = []
    for entry in snap["producerEntries"]:
        has_batch = entry["lastOffset"] >= 0
        first_seq = W.decrement_sequence(entry["lastSequence"], entry["offsetDelta"]) if has_batch else None
        pe = ProducerStateEntry(entry["producerId"], entry["epoch"], entry["coordinatorEpoch"], entry["timestamp"],
                                entry["currentTxnFirstOffset"] if entry["currentTxnFirstOffset"] >= 0 else None)
        if has_batch:
            assert first_seq is not None
            pe.batches.append(BatchMetadata(first_seq, entry["lastSequence"],
                                           entry["lastOffset"] - entry["offsetDelta"], entry["lastOffset"],
                                           entry["timestamp"]))
        out.append(pe)
    return out


def write_snapshot(entries: Sequence[ProducerStateEntry]) -> bytes:
    """The bytes ProducerStateManager.writeSnapshot writes for `entries` (ProducerStateEntry)."""
    body = struct.pack(">i", len(entries))
    for e in entries:
        last = e.batches[-1] if e.batches else None
        body += struct.pack(">qhiqiqiq", e.producer_id, e.producer_epoch, -1 if last is None else last.last_seq,
                            -1 if last is None else last.last_offset,
                            0 if last is None else last.last_offset - last.first_offset,
                            e.last_timestamp, e.coordinator_epoch,
                            -1 if e.current_txn_first_offset is None else e.current_txn_first_offset)
    return struct.pack(">hI", 1, _backend.core.crc32c(body)) + body


def format_entry(e: ProducerStateEntry) -> str:
    """The line kafka-dump-log prints for a snapshot entry."""
    txn = "OptionalLong.empty" if e.current_txn_first_offset is None else f"OptionalLong[{e.current_txn_first_offset}]"
    line = (f"producerId: {e.producer_id} producerEpoch: {e.producer_epoch} coordinatorEpoch: {e.coordinator_epoch} "
            f"currentTxnFirstOffset: {txn} lastTimestamp: {e.last_timestamp}")
    # kafka-dump-log 4.x's form: no trailing space when there is no batch metadata (3.x printed one)
    if e.last_offset is not None:
        line += (f" firstSequence: {e.first_sequence} lastSequence: {e.last_sequence} lastOffset: {e.last_offset} "
                 f"offsetDelta: {e.offset_delta} timestamp: {e.timestamp}")
    return line


class OngoingTxns:
    """Open transactions while a log is read or written in offset order (the part of Kafka's
    ProducerStateManager that `.txnindex` and the last stable offset come from).

    Per producer id: the offset of the first transactional data batch after its last marker
    (`currentTxnFirstOffset`). A transaction marker (a transactional control batch whose record
    is ABORT or COMMIT) ends that producer's transaction; for an ABORT, `on_batch` returns the
    `.txnindex` entry a broker writes at that moment: (producer id, first offset: the open
    transaction's, or the marker's own offset when none is open, last offset: the marker's, last
    stable offset: the first offset of the earliest transaction of another producer still open,
    else the marker's offset + 1). Non-transactional batches and control batches that are not
    markers change nothing."""

    def __init__(self, first_offsets: dict[int, int] | None = None) -> None:
        self.first_offsets: dict[int, int] = dict(first_offsets or {})

    def copy(self) -> OngoingTxns:
        return OngoingTxns(self.first_offsets)

    def on_batch(self, producer_id: int, base_offset: int, is_transactional: bool, is_control: bool,
                 marker: int | None = None) -> AbortedTxn | None:
        """Follow one batch (header fields; `marker`: the control record type of a control batch,
        W.ControlRecordType, None when unknown). Returns the AbortedTxn of an ABORT marker."""
        if not is_transactional or producer_id < 0:
            return None
        if not is_control:
            self.first_offsets.setdefault(producer_id, base_offset)
            return None
        if marker not in (W.ControlRecordType.ABORT, W.ControlRecordType.COMMIT):
            return None
        first = self.first_offsets.pop(producer_id, base_offset)
        if marker != W.ControlRecordType.ABORT:
            return None
        others = self.first_offsets.values()
        lso = min(others) if others else base_offset + 1
        return AbortedTxn(producer_id, first, base_offset, lso)

    def first_unstable_offset(self) -> int | None:
        """The first offset of the earliest open transaction (the last stable offset when the
        log's end is past it), or None."""
        return min(self.first_offsets.values()) if self.first_offsets else None


def ongoing_at(directory: str, base_offset: int) -> OngoingTxns | None:
    """The open transactions at `base_offset` of a local partition directory: empty at offset 0,
    else from `<base_offset>.snapshot` (a broker writes one at every roll, with each producer's
    currentTxnFirstOffset), None when there is none to read (a log whose start was trimmed: the
    transactions open before it are not known)."""
    import os

    if base_offset == 0:
        return OngoingTxns()
    path = os.path.join(directory, f"{base_offset:020d}{SUFFIX}")
    try:
        with open(path, "rb") as f:
            entries = read_snapshot(f.read())
    except (OSError, KBatchError):
        return None
    return OngoingTxns({e.producer_id: e.current_txn_first_offset for e in entries
                        if e.current_txn_first_offset is not None})


def follow_windows(windows: Iterable[Window], ongoing: OngoingTxns,
                   out: list[AbortedTxn] | None = None) -> list[AbortedTxn]:
    """Follow the batches of scan windows (kbatch.record.file_records' header columns, in offset
    order) with `ongoing`; returns the AbortedTxn of every ABORT marker met, in order, appended to
    `out` when given (so that the markers met before a scan error are kept). Only transactional
    control batches are decoded."""
    from ..record.file_records import _batch_at

    out = [] if out is None else out
    for s in windows:
        cols = [s[k].tolist() for k in ("magic", "attributes", "producer_id", "base_offset")]
        for i, (magic, attrs, pid, base) in enumerate(zip(*cols)):
            if magic < 2 or pid < 0 or not attrs & W.TRANSACTIONAL_FLAG_MASK:
                continue
            control = bool(attrs & W.CONTROL_FLAG_MASK)
            kind = marker_type(_batch_at(s, i)) if control else None
            entry = ongoing.on_batch(pid, base, True, control, kind)
            if entry is not None:
                out.append(entry)
    return out


def follow_segments(segments: Iterable[Iterable[Window]], ongoing: OngoingTxns | None = None
                    ) -> tuple[list[list[AbortedTxn]], OngoingTxns]:
    """follow_windows over each segment's scan windows in turn (the state carries from one segment
    to the next, as a transaction may span segments): the `.txnindex` entries of each segment, and
    the open transactions at the end."""
    ongoing = OngoingTxns() if ongoing is None else ongoing
    return [follow_windows(w, ongoing) for w in segments], ongoing


def txn_index_bytes(entries: Iterable[AbortedTxn]) -> bytes:
    """A `.txnindex` file holding `entries` (34 bytes each, kafka-format.md 5.5)."""
    from .index import TransactionIndex

    return TransactionIndex(0, entries).raw()


def marker_type(batch: Batch) -> int | None:
    """The control record type of a transactional control batch (W.ControlRecordType), None for
    any other batch. Errors name the batch."""
    if batch.magic < 2 or not batch.is_control or not batch.is_transactional:
        return None
    try:
        recs = batch.control_records()
    except KBatchError as e:
        raise e.at(position=batch.position, base_offset=batch.base_offset)
    return recs[0].type if recs else W.ControlRecordType.UNKNOWN


__all__ = ["OngoingTxns", "ongoing_at", "follow_windows", "follow_segments", "txn_index_bytes", "marker_type", "SUFFIX", "ProducerStateEntry", "BatchMetadata", "NUM_BATCHES_TO_RETAIN", "read_snapshot", "write_snapshot", "format_entry"]
