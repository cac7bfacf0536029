"""Idempotent producer state, as a broker keeps it (Kafka's ProducerStateManager / ProducerAppendInfo).

Per partition, each producer id has an epoch and the metadata of its last five batches (first and
last sequence, first and last offset). A produce request's batch is checked before it is appended:

- a batch equal to one of the last five (same epoch, same first and last sequence) is a retried
  duplicate: it is not written again and the original offsets are returned (error NONE);
- an epoch below the current one is fenced: 47 INVALID_PRODUCER_EPOCH;
- a new epoch must start at sequence 0, and within an epoch each batch must continue the last
  sequence: 45 OUT_OF_ORDER_SEQUENCE_NUMBER, with Kafka's messages. A producer id with no state
  (new, or whose batches are gone) may start at any sequence, as in Kafka since KIP-360.

The state is rebuilt from the log's batch headers the first time a partition sees an idempotent
batch (Kafka loads it from `.snapshot` files and the log after them), so a restart keeps
duplicate detection. Open transactions found on the way give the last stable offset.

Producer ids come from `ProducerIdManager`, which hands out blocks and persists the end of the
current block in the served directory, so ids are never reused across restarts.
"""
from __future__ import annotations

import os
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from ..log import files as _files
from ..log.producer_state import NUM_BATCHES_TO_RETAIN, BatchMetadata, ProducerStateEntry
from .. import _wire as W

if TYPE_CHECKING:
    from ..record.batch import Batch

class ProducerStateError(Exception):
    """A batch refused by the producer-state checks; `error_code` is Kafka's."""

    def __init__(self, error_code: int, message: str) -> None:
        self.error_code = error_code
        super().__init__(message)


def _last_sequence(base_sequence: int, record_count: int) -> int:
    if base_sequence == W.NO_SEQUENCE:
        return W.NO_SEQUENCE
    return W.increment_sequence(base_sequence, record_count - 1)


def _in_sequence(last_seq: int, next_seq: int) -> bool:
    return next_seq == W.increment_sequence(last_seq, 1)


class ProducerStateManager:
    """The producer state of one partition (see the module docstring)."""

    def __init__(self, topic_partition: str) -> None:
        self.topic_partition = topic_partition
        self.producers: dict[int, ProducerStateEntry] = {}
        self.loaded = False

    # ---- loading
    def load_from_headers(self, header_rows: Iterable[dict[str, Any]]) -> None:
        """Rebuild from batch header scans (kbatch.record.batch.scan_headers rows, in offset order)."""
        for s in header_rows:
            cols = [s[k].tolist() for k in ("magic", "producer_id", "producer_epoch", "base_sequence", "base_offset",
                                             "last_offset", "attributes", "max_timestamp", "record_count")]
            for magic, pid, epoch, seq, base, last, attrs, max_ts, count in zip(*cols):
                if magic < 2 or pid < 0:
                    continue
                e = self.producers.get(pid)
                if e is None:
                    e = self.producers[pid] = ProducerStateEntry(pid, epoch)
                if epoch > e.producer_epoch:
                    e.new_epoch(epoch)
                if attrs & W.CONTROL_FLAG_MASK:
                    e.current_txn_first_offset = None          # commit or abort marker ends the transaction
                    continue
                if attrs & W.TRANSACTIONAL_FLAG_MASK and e.current_txn_first_offset is None:
                    e.current_txn_first_offset = base
                if seq >= 0:
                    e.batches.append(BatchMetadata(seq, _last_sequence(seq, count), base, last, max_ts))
        self.loaded = True

    # ---- checks before an append (UnifiedLog.analyzeAndValidateProducerState)
    def check(self, batch: Batch, offset: int) -> BatchMetadata | None:
        """None when `batch` may be appended at `offset`; the BatchMetadata of the original when it
        is a duplicate; raises ProducerStateError otherwise."""
        pid = batch.producer_id
        if pid < 0:
            return None
        e = self.producers.get(pid)
        last_seq = _last_sequence(batch.base_sequence, batch.record_count)
        if e is not None:
            dup = e.find_duplicate(batch.producer_epoch, batch.base_sequence, last_seq)
            if dup is not None:
                return dup
        epoch, first_seq = batch.producer_epoch, batch.base_sequence
        current_epoch = e.producer_epoch if e is not None else W.NO_PRODUCER_EPOCH
        if epoch < current_epoch:
            raise ProducerStateError(47, f"Epoch of producer {pid} at offset {offset} in {self.topic_partition} is "
                                         f"{epoch}, which is smaller than the last seen epoch {current_epoch}")
        if epoch != current_epoch:
            if first_seq != 0 and current_epoch != W.NO_PRODUCER_EPOCH:
                raise ProducerStateError(45, f"Invalid sequence number for new epoch of producer {pid}at offset "
                                             f"{offset} in partition {self.topic_partition}: {epoch} (request epoch), "
                                             f"{first_seq} (seq. number), {current_epoch} (current producer epoch)")
        elif e is not None and e.batches and not _in_sequence(e.last_seq, first_seq):
            raise ProducerStateError(45, f"Out of order sequence number for producer {pid} at offset {offset} in "
                                         f"partition {self.topic_partition}: {first_seq} (incoming seq. number), "
                                         f"{e.last_seq} (current end sequence number)")
        return None

    def update(self, batch: Batch, first_offset: int, last_offset: int, timestamp: int) -> None:
        """Record an appended batch."""
        pid = batch.producer_id
        if pid < 0:
            return
        e = self.producers.get(pid)
        if e is None or batch.producer_epoch != e.producer_epoch:
            e = self.producers[pid] = ProducerStateEntry(pid, batch.producer_epoch)
        e.batches.append(BatchMetadata(batch.base_sequence, _last_sequence(batch.base_sequence, batch.record_count),
                                       first_offset, last_offset, timestamp))

    def first_unstable_offset(self) -> int | None:
        """The first offset of the oldest open transaction, or None (LSO = min(this, high watermark))."""
        open_txns = [e.current_txn_first_offset for e in self.producers.values()
                     if e.current_txn_first_offset is not None]
        return min(open_txns) if open_txns else None


class ProducerIdManager:
    """Hands out producer ids in blocks; the end of the current block is kept in
    `<dir>/kbatch-producer-id-block` (as a broker's block is kept in the cluster metadata), so a
    restarted server never hands out an id it gave before. Without a writable directory the ids
    start above the current time in ms (unique across restarts unless the clock goes back)."""

    BLOCK_SIZE = 1000
    FILE = "kbatch-producer-id-block"

    def __init__(self, directory: str | None, now_ms: int) -> None:
        self.path = None if directory is None else os.path.join(directory, self.FILE)
        start = now_ms
        if self.path is not None:
            try:
                with open(self.path) as f:
                    start = int(f.read().strip() or 0)
            except FileNotFoundError:
                start = 0
            except ValueError:
                start = now_ms
        self.next_id = start
        self.block_end = start

    def generate(self) -> int:
        if self.next_id >= self.block_end:
            self.block_end = self.next_id + self.BLOCK_SIZE
            if self.path is not None:
                _files.atomic_write(self.path, f"{self.block_end}\n".encode())
        pid = self.next_id
        self.next_id += 1
        return pid


__all__ = ["ProducerStateManager", "ProducerStateEntry", "ProducerStateError", "ProducerIdManager",
           "BatchMetadata", "NUM_BATCHES_TO_RETAIN"]
