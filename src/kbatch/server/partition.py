"""One served partition: its `Log`, appends in order, reads for Fetch, waiters for long polls.

Kafka's Partition / UnifiedLog.read in small: a single node is its own only replica, so the high
watermark is the log end offset once an append has returned. Appends are serialized by a lock and
run off the event loop (validation runs in nogil kernels); readers on the loop only ever look
below the high watermark, whose byte position is recorded when an append finishes, so a batch
being written is never served.

Record bytes are not read for Fetch: `read` asks the read path's slice read
(kbatch.log.fetch_data.read_slice, as UnifiedLog.read answers with a FetchDataInfo) and returns a
FileSlice of the segment file (position and size), sent later with os.sendfile or os.pread on a file descriptor of
our own (a truncated file gives a short read, never a SIGBUS).
"""
from __future__ import annotations

import asyncio
import logging
import os
import time
from typing import TYPE_CHECKING

from .. import _wire as W
from ..record.file_records import iter_batches
from ..errors import KBatchError
from ..log.fetch import IsolationLevel, OffsetOrder, cached_transaction_state, transaction_state
from ..log.fetch_data import read_slice
from .producer_state import ProducerStateError, ProducerStateManager
from .protocol import FileSlice

if TYPE_CHECKING:
    from .._typing import Buffer
    from ..log.index import AbortedTxn
    from ..log.unified_log import Log, LogConfig, OffsetAndTimestamp
    from ..log.segment import LogSegment
    from ..log.validator import AppendInfo

logger = logging.getLogger("kbatch.server")


class AppendResult:
    __slots__ = ("first_offset", "last_offset", "log_append_time", "duplicate")

    def __init__(self, first_offset: int, last_offset: int, log_append_time: int | None,
                 duplicate: bool = False) -> None:
        self.first_offset, self.last_offset = first_offset, last_offset
        self.log_append_time, self.duplicate = log_append_time, duplicate


class ReadResult:
    __slots__ = ("error_code", "records", "aborted")

    def __init__(self, error_code: int = 0, records: FileSlice | None = None,
                 aborted: list[AbortedTxn] | None = None) -> None:
        self.error_code, self.records, self.aborted = error_code, records, aborted


class Partition:
    def __init__(self, topic: str, index: int, log: Log, *, flush_messages: int | None = None) -> None:
        self.topic = topic
        self.index = index
        self.name = f"{topic}-{index}"
        self.log = log
        self.flush_messages = flush_messages
        self._unflushed = 0
        self.producer_state = ProducerStateManager(self.name)
        self._state_lock = asyncio.Lock()
        self._append_lock = asyncio.Lock()
        self._waiters: set[asyncio.Future[None]] = set()
        self._fds: dict[int, int] = {}
        self._orders: dict[int, OffsetOrder] = {}  # per segment: the bytes whose offset order read_slice checked
        latest = log.offset_for(W.OffsetSpec.LATEST)
        assert latest is not None  # LATEST always has an answer
        self.leader_epoch = latest.leader_epoch if latest.leader_epoch is not None else 0
        if log.writable:
            log.partition_leader_epoch = self.leader_epoch
        self._set_high_watermark()

    # ---- facts
    def _set_high_watermark(self) -> None:
        self.high_watermark = self.log.end_offset()
        seg = self.log.segments[-1] if self.log.segments else None
        self._hw_segment: int | None = None if seg is None else seg.base_offset
        # where the last complete batch ends: a writable log was recovered (a torn tail cut off)
        # and only grows by whole batches; a read-only one is left as it is, and a partial batch
        # at its end (a torn write) is not served, as a reader ignores it
        self._hw_position = 0 if seg is None else seg.size if self.log.writable else seg.read_end()[1]

    @property
    def log_start_offset(self) -> int:
        return self.log.beginning_offset()

    @property
    def last_stable_offset(self) -> int:
        """The first offset of the earliest transaction with no marker yet, or the high watermark
        (kbatch.log.fetch, the read path every reader takes)."""
        fuo = transaction_state(self.log).first_unstable_offset
        return self.high_watermark if fuo is None else min(fuo, self.high_watermark)

    async def ensure_transaction_state(self) -> None:
        """Read the log's transactions (aborted ones, the open ones: the last stable offset) off the
        event loop; later calls only read what was appended since (kbatch.log.fetch)."""
        if cached_transaction_state(self.log) is None:
            await asyncio.to_thread(transaction_state, self.log)

    async def ensure_producer_state(self) -> None:
        """Rebuild the producer state from the log's batch headers once (off the event loop)."""
        if self.producer_state.loaded:
            return
        async with self._state_lock:
            if not self.producer_state.loaded:
                segments = list(self.log.segments)
                await asyncio.to_thread(self.producer_state.load_from_headers,
                                        (s for seg in segments for s in seg.log.headers()))

    # ---- appends
    async def append(self, data: Buffer, now_ms: int | None = None) -> AppendResult:
        """Validate and append one produce request's records (Log.append, client origin), after the
        idempotence checks; returns the assigned offsets. Raises KBatchError or ProducerStateError."""
        first = None
        try:
            for b in iter_batches(data, verify_crc=False, strict=False):
                first = b
                break
        except KBatchError:
            first = None  # Log.append reports the exact error
        if first is not None and first.magic >= 2 and first.producer_id >= 0:
            await self.ensure_producer_state()
        async with self._append_lock:
            if first is not None and first.magic >= 2 and first.producer_id >= 0:
                dup = self.producer_state.check(first, self.log.end_offset())
                if dup is not None:
                    return AppendResult(dup.first_offset, dup.last_offset, None, duplicate=True)
            now = int(time.time() * 1000) if now_ms is None else now_ms
            info = await asyncio.to_thread(self._append_durably, data, now)
            if first is not None and first.magic >= 2 and first.producer_id >= 0:
                self.producer_state.update(first, info.first_offset, info.last_offset, info.max_timestamp)
            self._set_high_watermark()
        self._wake()
        return AppendResult(info.first_offset, info.last_offset, info.log_append_time)

    def _append_durably(self, data: Buffer, now: int) -> AppendInfo:
        info = self.log.append(data, now_ms=now, from_client=True)
        self._unflushed += info.record_count
        if self.flush_messages is not None and self._unflushed >= self.flush_messages:
            self.log.flush()
            self._unflushed = 0
        return info

    # ---- long polls
    def waiter(self) -> asyncio.Future[None]:
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._waiters.add(fut)
        fut.add_done_callback(self._waiters.discard)
        return fut

    async def update_config(self, config: LogConfig) -> None:
        """A topic config changed: appends after the one in progress use it."""
        async with self._append_lock:
            self.log.update_config(config)

    async def retire(self) -> None:
        """Its topic was deleted: once an append in progress has finished, close the log (its
        checkpoints written, its lock released) and answer every long poll waiting on it. The file
        descriptors of answers in flight stay open until release_files()."""
        async with self._append_lock:
            await asyncio.to_thread(self.log.close)  # checkpoints and fsyncs: off the event loop
        self._wake()

    def release_files(self) -> None:
        for fd in self._fds.values():
            try:
                os.close(fd)
            except OSError:
                pass
        self._fds.clear()

    def _wake(self) -> None:
        for fut in list(self._waiters):
            if not fut.done():
                fut.set_result(None)

    # ---- reads (UnifiedLog.read / LogSegment.read: kbatch.log.fetch_data.read_slice)
    def read(self, fetch_offset: int, max_bytes: int, min_one_message: bool, read_committed: bool) -> ReadResult:
        """One partition of a Fetch, by the read path's slice read, up to the high watermark this
        partition published (and its byte position); the records stay in the segment file."""
        info = read_slice(self.log, fetch_offset, max_bytes, min_one_message=min_one_message,
                          isolation=IsolationLevel.READ_COMMITTED if read_committed else IsolationLevel.READ_UNCOMMITTED,
                          high_watermark=self.high_watermark,
                          high_watermark_position=(-1 if self._hw_segment is None else self._hw_segment,
                                                   self._hw_position), offset_orders=self._orders)
        if info.out_of_range:
            return ReadResult(1)  # OFFSET_OUT_OF_RANGE
        if info.unreadable is not None:
            logger.error("%s: Fetch at offset %d: %s (CORRUPT_MESSAGE)", self.name, fetch_offset, info.unreadable)
            return ReadResult(2)  # CORRUPT_MESSAGE
        if info.records is None:
            return ReadResult(0, None, info.aborted_transactions)
        rec = info.records
        return ReadResult(0, FileSlice(self._fd(rec.segment), rec.position, rec.size), info.aborted_transactions)

    def _fd(self, seg: LogSegment) -> int:
        fd = self._fds.get(seg.base_offset)
        if fd is None:
            fd = self._fds[seg.base_offset] = os.open(seg.log.path, os.O_RDONLY | getattr(os, "O_CLOEXEC", 0))
        return fd

    # ---- lookups
    def offset_for(self, target: int | W.OffsetSpec) -> OffsetAndTimestamp | None:
        return self.log.offset_for(target)

    def magic(self) -> int | None:
        return self.log.magic()

    def close(self) -> None:
        self.release_files()
        for fut in list(self._waiters):
            if not fut.done():
                fut.cancel()
        self.log.close()


__all__ = ["Partition", "AppendResult", "ReadResult", "ProducerStateError"]
