"""ProducerStateManager's snapshot files (`<20-digit offset>.snapshot` in a partition directory).

Layout (storage/src/main/resources/message/ProducerSnapshot.json, version 1, read with
kbatch.schema): int16 version, uint32 CRC-32C of every byte after the CRC field (byte 6 on), an
int32 count of 46-byte producer entries. `read_snapshot` checks both as
ProducerStateManager.readSnapshot does and raises CorruptSnapshotError with Kafka's messages.
"""
from __future__ import annotations

import struct
from collections.abc import Sequence
from typing import TYPE_CHECKING, NamedTuple

from .. import _backend
from .. import _wire as W
from ..errors import CorruptRecordError, CorruptSnapshotError

if TYPE_CHECKING:
    from .._typing import Buffer
from ..schema import MESSAGES, read_message

SUFFIX = ".snapshot"  # LogFileUtils.PRODUCER_SNAPSHOT_FILE_SUFFIX
CRC_OFFSET = 2
PRODUCER_ENTRIES_OFFSET = CRC_OFFSET + 4


class ProducerStateEntry(NamedTuple):
    """One producer's state; batch fields are None when lastOffset < 0 (no batch metadata)."""

    producer_id: int
    producer_epoch: int
    coordinator_epoch: int
    last_timestamp: int
    current_txn_first_offset: int | None
    first_sequence: int | None
    last_sequence: int | None
    last_offset: int | None
    offset_delta: int | None
    timestamp: int | None


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
        out.append(ProducerStateEntry(
            entry["producerId"], entry["epoch"], entry["coordinatorEpoch"], entry["timestamp"],
            entry["currentTxnFirstOffset"] if entry["currentTxnFirstOffset"] >= 0 else None,
            first_seq, entry["lastSequence"] if has_batch else None, entry["lastOffset"] if has_batch else None,
            entry["offsetDelta"] if has_batch else None, entry["timestamp"] if has_batch else None))
    return out


def write_snapshot(entries: Sequence[ProducerStateEntry]) -> bytes:
    """The bytes ProducerStateManager.writeSnapshot writes for `entries` (ProducerStateEntry)."""
    body = struct.pack(">i", len(entries))
    for e in entries:
        has_batch = e.last_offset is not None
        body += struct.pack(">qhiqiqiq", e.producer_id, e.producer_epoch, e.last_sequence if has_batch else -1,
                            e.last_offset if has_batch else -1, e.offset_delta if has_batch else 0,
                            e.last_timestamp, e.coordinator_epoch,
                            -1 if e.current_txn_first_offset is None else e.current_txn_first_offset)
    return struct.pack(">hI", 1, _backend.core.crc32c(body)) + body


def format_entry(e: ProducerStateEntry) -> str:
    """The line kafka-dump-log prints for a snapshot entry."""
    txn = "OptionalLong.empty" if e.current_txn_first_offset is None else f"OptionalLong[{e.current_txn_first_offset}]"
    line = (f"producerId: {e.producer_id} producerEpoch: {e.producer_epoch} coordinatorEpoch: {e.coordinator_epoch} "
            f"currentTxnFirstOffset: {txn} lastTimestamp: {e.last_timestamp} ")
    if e.last_offset is not None:
        line += (f"firstSequence: {e.first_sequence} lastSequence: {e.last_sequence} lastOffset: {e.last_offset} "
                 f"offsetDelta: {e.offset_delta} timestamp: {e.timestamp}")
    return line


__all__ = ["SUFFIX", "ProducerStateEntry", "read_snapshot", "write_snapshot", "format_entry"]
