"""Transactions as the cleaner walks the log (Kafka's CleanedTransactionMetadata): which data
batches belong to aborted transactions, and when a marker may get its delete horizon."""
from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from .. import _wire as W

if TYPE_CHECKING:
    from ..record.batch import Batch


@dataclass(frozen=True)
class AbortedTxn:
    """One aborted transaction (Kafka's AbortedTxn): its producer, first data offset, marker offset."""

    producer_id: int
    first_offset: int
    last_offset: int


class CleanedTransactionMetadata:
    """Tracks transactions while the cleaner walks the log (Kafka's CleanedTransactionMetadata).

    `on_batch_read` says whether a data batch belongs to an aborted transaction;
    `on_control_batch_read` says whether a marker's transaction had no data batch in this pass,
    so the marker may get its delete horizon, and go once that has passed. A batch read in this
    pass keeps its marker alive even when all its records go, as in Kafka: the marker gets its
    horizon on the next pass (Kafka 4.4.0's cleaner, tests/system/test_real_kafka_writes.py).
    """

    def __init__(self, aborted: list[AbortedTxn]) -> None:
        self._aborted = sorted(aborted, key=lambda a: a.first_offset)
        self._next = 0
        self._ongoing_aborted: dict[int, list[Any]] = {}   # pid -> [AbortedTxn, batches read]
        self._ongoing_committed: dict[int, int] = {}  # pid -> batches read
        #: (producer id, marker offset) of the ABORT markers kept because this run read their
        #: transaction's batches: the cleaned segments' .txnindex entries (Kafka's cleanedIndex)
        self.indexed_aborts: set[tuple[int, int]] = set()

    def _consume_aborted_up_to(self, offset: int) -> None:
        while self._next < len(self._aborted) and self._aborted[self._next].first_offset <= offset:
            a = self._aborted[self._next]
            self._next += 1
            self._ongoing_aborted.setdefault(a.producer_id, [a, 0])

    def on_batch_read(self, batch: Batch) -> bool:
        """True when `batch` (a data batch) is part of an aborted transaction."""
        return self.on_data_batch(batch.last_offset, batch.is_transactional, batch.producer_id)

    def on_data_batch(self, last_offset: int, transactional: bool, producer_id: int) -> bool:
        """on_batch_read from a data batch's header fields."""
        if self._next < len(self._aborted):
            self._consume_aborted_up_to(last_offset)
        if not transactional:
            return False
        entry = self._ongoing_aborted.get(producer_id)
        if entry is not None:
            entry[1] += 1  # Kafka: lastObservedBatchOffset
            return True
        self._ongoing_committed[producer_id] = self._ongoing_committed.get(producer_id, 0) + 1
        return False

    def on_control_batch_read(self, batch: Batch) -> bool:
        """True when no batch of the marker's transaction was read in this run (the marker may get
        its horizon, and be discarded once that has passed)."""
        self._consume_aborted_up_to(batch.last_offset)
        controls = batch.control_records()
        if not controls:
            return True  # an empty control batch was already cleaned
        ctype = controls[0].type
        pid = batch.producer_id
        if ctype == W.ControlRecordType.ABORT:
            entry = self._ongoing_aborted.pop(pid, None)
            self._ongoing_committed.pop(pid, None)
            if entry is not None and entry[1]:
                self.indexed_aborts.add((pid, batch.last_offset))
                return False
            return True
        if ctype == W.ControlRecordType.COMMIT:
            kept = self._ongoing_committed.pop(pid, None)
            return not kept
        return False


__all__ = ["AbortedTxn", "CleanedTransactionMetadata"]
