"""Bytes of requests in flight across every connection (Kafka's queued.max.request.bytes and its
MemoryPool), shared so that clients whose requests sit half-sent cannot keep the others out.

A connection takes a request's size from the pool when its size prefix has arrived, before it
reads the body, and gives it back once the request is handled; while the pool cannot give it,
that connection reads nothing more. By size:
- a small request (up to SMALL_REQUEST_BYTES, 64 KiB: what a connection's stream buffers anyway)
  is counted but never waits, so ApiVersions, Metadata, Fetch and commits always get through;
- a large one (more than LARGE_REQUEST_BYTES, 1 MiB) waits while large requests would hold more
  than three quarters of the pool, so the last quarter stays open to the requests in between (a
  500 KB Produce is not held up by two 100 MiB requests whose clients stopped sending);
- any other waits while the pool would be over its capacity.
A request that may wait is let in, whatever its size, when no other such request is held, so the
rules alone never keep a legal request out; and each connection holds at most one request, which
is dropped if it is not read within request_read_timeout_ms of its first byte (connection.py):
what one client holds, or waits for, it holds for a bounded time. `used` may exceed the capacity by the small requests, at most 64 KiB a
connection.
"""
from __future__ import annotations

import asyncio

SMALL_REQUEST_BYTES = 64 * 1024
# also where connection.py decodes a request on a worker thread: kafka-python's codec takes about
# 1 s for a 3 MB Metadata request, time every other connection would otherwise wait
LARGE_REQUEST_BYTES = 1 << 20


class MemoryPool:
    def __init__(self, capacity: int) -> None:
        self.capacity = capacity
        self.large_capacity = capacity - capacity // 4
        self.used = 0          # every request's bytes
        self.held = 0          # the bytes of requests that may wait (above SMALL_REQUEST_BYTES)
        self.large_used = 0    # the bytes of requests above LARGE_REQUEST_BYTES
        self.waiting_bytes = 0  # the sizes of the requests waiting for room
        self._freed: asyncio.Event | None = None

    def fits(self, size: int) -> bool:
        if size <= SMALL_REQUEST_BYTES or not self.held:
            return True
        if self.used + size > self.capacity:
            return False
        return size <= LARGE_REQUEST_BYTES or self.large_used + size <= self.large_capacity

    async def acquire(self, size: int) -> None:
        if not self.fits(size):
            self.waiting_bytes += size
            try:
                while not self.fits(size):
                    if self._freed is None:
                        self._freed = asyncio.Event()
                    await self._freed.wait()
            finally:
                self.waiting_bytes -= size
        self._count(size, 1)

    def release(self, size: int) -> None:
        self._count(size, -1)
        if self._freed is not None:
            self._freed.set()
            self._freed = None

    def _count(self, size: int, sign: int) -> None:
        self.used += sign * size
        if size > SMALL_REQUEST_BYTES:
            self.held += sign * size
        if size > LARGE_REQUEST_BYTES:
            self.large_used += sign * size


__all__ = ["MemoryPool", "SMALL_REQUEST_BYTES", "LARGE_REQUEST_BYTES"]
