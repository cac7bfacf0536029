"""One served partition: its `Log`, appends in order, reads for Fetch, waiters for long polls.

Kafka's Partition / UnifiedLog.read in small: a single node is its own only replica, so the high
watermark is the log end offset once an append has returned. Appends are serialized by a lock and
run off the event loop (validation runs in nogil kernels); readers on the loop only ever look
below the high watermark, whose byte position is recorded when an append finishes, so a batch
being written is never served.

Record bytes are not read for Fetch: `read` returns a FileSlice of the segment file (position and
size, as LogSegment.read does), sent later with os.sendfile or os.pread on a file descriptor of
our own (a truncated file gives a short read, never a SIGBUS).
"""
from __future__ import annotations

import asyncio
import bisect
import logging
import os
import time
from typing import TYPE_CHECKING

from .. import _wire as W
from ..record.file_records import iter_batches
from ..errors import KBatchError
from ..log.fetch import (OffsetOrder, cached_transaction_state, collect_aborted_txns, hole_at, transaction_state,
                         undecided_at, unreadable_at)
from .producer_state import ProducerStateError, ProducerStateManager
from .protocol import FileSlice

if TYPE_CHECKING:
    from .._typing import Buffer
    from ..log.index import AbortedTxn
    from ..log.unified_log import Log, OffsetAndTimestamp
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
        self._orders: dict[int, OffsetOrder] = {}
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

    def _wake(self) -> None:
        for fut in list(self._waiters):
            if not fut.done():
                fut.set_result(None)

    # ---- reads (UnifiedLog.read / LogSegment.read)
    def read(self, fetch_offset: int, max_bytes: int, min_one_message: bool, read_committed: bool) -> ReadResult:
        hw = self.high_watermark
        if fetch_offset < self.log_start_offset or fetch_offset > hw:
            return ReadResult(1)  # OFFSET_OUT_OF_RANGE
        upper = self.last_stable_offset if read_committed else hw
        if fetch_offset >= upper:
            undecided = undecided_at(transaction_state(self.log), upper) if read_committed else None
            if undecided is not None:  # the read path's rule: damage hiding a marker is no LSO
                logger.error("%s: Fetch at offset %d (read_committed): %s (CORRUPT_MESSAGE)", self.name, fetch_offset,
                             undecided)
                return ReadResult(2)  # CORRUPT_MESSAGE
            return ReadResult(0, None, [] if read_committed else None)
        segments = self.log.segments
        bases = [s.base_offset for s in segments]
        i = max(0, bisect.bisect_right(bases, fetch_offset) - 1)
        while i < len(segments):
            seg = segments[i]
            start = seg.translate_offset(fetch_offset)
            hole = hole_at(seg, fetch_offset, start.offset) if start is not None else None
            if hole is not None:  # the read path's rule: an offset inside unreadable bytes is never skipped
                logger.error("%s: Fetch at offset %d: %s (CORRUPT_MESSAGE)", self.name, fetch_offset, hole.message)
                return ReadResult(2)  # CORRUPT_MESSAGE
            if start is None or start.offset < fetch_offset:
                if i + 1 < len(segments) and fetch_offset < bases[i + 1]:
                    hit = unreadable_at(seg, fetch_offset)  # the read path's rule
                    if hit is not None:  # a torn or damaged middle segment: never a silent jump past it
                        readable = hit[0]
                        logger.error("%s: Fetch at offset %d: %d bytes from byte %d of %s could not be read; "
                                     "offsets up to %d are in or behind them (CORRUPT_MESSAGE)", self.name,
                                     fetch_offset, seg.size - readable, readable, seg.log.path, bases[i + 1] - 1)
                        return ReadResult(2)  # CORRUPT_MESSAGE
                i += 1
                continue
            if seg.base_offset == self._hw_segment and upper == hw:
                max_position = self._hw_position
            elif upper < (bases[i + 1] if i + 1 < len(bases) else hw + 1):
                end = seg.translate_offset(upper)
                max_position = end.position if end is not None else \
                    self._hw_position if seg.base_offset == self._hw_segment else seg.size
            else:
                max_position = seg.size
            if start.position >= max_position:
                return ReadResult(0, None, [] if read_committed else None)
            limit = max(max_bytes, start.size) if min_one_message else max_bytes
            size = min(max_position - start.position, limit)
            if size <= 0:
                return ReadResult(0, None, [] if read_committed else None)
            # the read path's rule: a base offset out of order (no CRC covers it) is damage, never sent
            bad = self._order(seg).first_bad(seg, fetch_offset, start.position + size,
                                            bases[i + 1] if i + 1 < len(bases) else None)
            if bad is not None:
                if bad[0] <= start.position:
                    logger.error("%s: Fetch at offset %d: %s: %s (CORRUPT_MESSAGE)", self.name, fetch_offset,
                                 seg.log.path, bad[1])
                    return ReadResult(2)  # CORRUPT_MESSAGE
                size = bad[0] - start.position
            aborted = self._aborted(i, fetch_offset, hw) if read_committed else None
            return ReadResult(0, FileSlice(self._fd(seg), start.position, size), aborted)
        return ReadResult(0, None, [] if read_committed else None)

    def _order(self, seg: LogSegment) -> OffsetOrder:
        order = self._orders.get(seg.base_offset)
        if order is None or order.hi > seg.size:  # new, or truncated since: check again
            order = self._orders[seg.base_offset] = OffsetOrder()
        return order

    def _aborted(self, i: int, fetch_offset: int, upper: int) -> list[AbortedTxn]:
        """Aborted transactions overlapping [fetch_offset, upper), by the read path's rule
        (kbatch.log.fetch: the segments' .txnindex when every segment has one, else the log's
        ABORT markers), sorted by first offset as a consumer expects them."""
        return collect_aborted_txns(transaction_state(self.log).aborted, fetch_offset, upper)

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
        for fd in self._fds.values():
            try:
                os.close(fd)
            except OSError:
                pass
        self._fds.clear()
        for fut in list(self._waiters):
            if not fut.done():
                fut.cancel()
        self.log.close()


__all__ = ["Partition", "AppendResult", "ReadResult", "ProducerStateError"]
