"""One client connection: size-prefixed frames in, responses out, in order (Kafka's Processor).

A connection reads one request, answers it, and only then reads the next, as a broker mutes a
channel while a request is in flight; so a connection holds at most one request (bounded by
socket_request_max_bytes, Kafka's socket.request.max.bytes) and one response in memory, and the
record bytes of Fetch responses are never in memory at all (sendfile from the segment files). All
connections together hold at most queued_max_request_bytes of requests (Broker.request_memory,
memory_pool.py): a connection waits for room before it reads a request's body, and gives the
room back once the request is handled, before the answer is written (a client slow to read its
answers holds no share of the pool). A large request is decoded and answered off the event loop,
and handlers yield between chunks of work, so one request never stalls the other connections.

A request must be read within request_read_timeout_ms of its first byte (the rest of its size
prefix, room in the pool, its body). A client that stops sending, or trickles, in the middle of a
request has its connection closed (one warning naming it), so it holds memory, or a place in the
pool's queue, for a bounded time only; waiting between requests is not bounded (an idle
connection holds none).

A frame that cannot be a request (negative or oversized size, an unknown API key or version, a
body the schema cannot read) closes this connection with a logged reason, as Kafka does; other
connections and the data are not affected. ApiVersions above its range is answered at v0 (KIP-511).
"""
from __future__ import annotations

import asyncio
import logging
import os
import struct
import sys
from typing import TYPE_CHECKING, Any

from ..errors import KBatchError
from .memory_pool import LARGE_REQUEST_BYTES
from .protocol import (CloseConnection, FileSlice, Request, Slices, UnsupportedApiVersion, decode_request,
                       encode_api_versions_fallback, encode_response, encode_with_slices)

if TYPE_CHECKING:
    from kafka.protocol.api_message import ApiMessage

    from .broker import Broker
    from .memory_pool import MemoryPool

logger = logging.getLogger("kbatch.server")

# Fetch responses with less record data than this are read and sent in one write; larger ones go
# through sendfile (fewer syscalls for small polls, no copy for large ones).
SENDFILE_MIN_BYTES = 64 * 1024
_READ_CHUNK = 1 << 20  # the read-and-write fallback's piece


class ConnectionClosed(Exception):
    pass


class _ReadTimedOut(Exception):
    """A request was not read within request_read_timeout_ms."""


class _Incoming:
    """The request being read: its size once its size prefix has arrived (-1 before), whether the
    pool has room for it yet, and when it must have been read."""

    __slots__ = ("task", "deadline", "size", "admitted", "expired")

    def __init__(self, task: asyncio.Task[Any], deadline: float) -> None:
        self.task, self.deadline = task, deadline
        self.size = -1
        self.admitted = self.expired = False

    def __str__(self) -> str:
        if self.size < 0:
            return "a size prefix did not all arrive"
        if not self.admitted:
            return f"a {self.size}-byte request found no room in queued_max_request_bytes"
        return f"a {self.size}-byte request did not all arrive"


class RequestDeadlines:
    """request_read_timeout_ms for every connection of one server: the requests being read, and a
    sweep a few times a timeout (at most every second) that cancels the read of each one past its
    deadline. One sweep instead of a timer per request, which would cost more than reading a
    small request; a late request is dropped at most a quarter of the timeout (or 1 s) late."""

    def __init__(self, timeout_ms: int) -> None:
        if not timeout_ms >= 1:
            raise ValueError(f"request_read_timeout_ms must be at least 1, not {timeout_ms}")
        self.timeout_ms = timeout_ms
        self.timeout_s = timeout_ms / 1000
        self.period = min(1.0, max(0.01, self.timeout_s / 4))
        self.reading: set[_Incoming] = set()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._timer: asyncio.TimerHandle | None = None

    def start(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._timer = self._loop.call_later(self.period, self._sweep)

    def stop(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

    def _sweep(self) -> None:
        assert self._loop is not None  # started
        now = self._loop.time()
        late = [r for r in self.reading if r.deadline <= now]
        for r in late:
            self.reading.discard(r)
            r.expired = True
            r.task.cancel()  # lands in the read or the wait for room: _read_in_time turns it into _ReadTimedOut
        self._timer = self._loop.call_later(self.period, self._sweep)

    async def read(self, reader: asyncio.StreamReader, first: bytes, pool: MemoryPool, max_bytes: int,
                   incoming: _Incoming) -> bytes:
        """_read_request, dropped with _ReadTimedOut when the sweep finds it past its deadline."""
        self.reading.add(incoming)
        try:
            return await _read_request(reader, first, pool, max_bytes, incoming)
        except asyncio.CancelledError:
            if not incoming.expired:
                raise  # the server is stopping
            if sys.version_info >= (3, 11):
                incoming.task.uncancel()
            raise _ReadTimedOut from None
        finally:
            self.reading.discard(incoming)


async def _read_request(reader: asyncio.StreamReader, first: bytes, pool: MemoryPool, max_bytes: int,
                        incoming: _Incoming) -> bytes:
    """The rest of the size prefix, room in the pool, then the body: the frame, its size taken from
    the pool (the caller gives it back). A size that cannot be a request is _Refused unread."""
    head = first + await reader.readexactly(3)
    (size,) = struct.unpack(">i", head)
    if size < 0 or size > max_bytes:
        raise _Refused(f"request size {size} is " + ("negative" if size < 0 else
                                                     f"larger than socket.request.max.bytes ({max_bytes})"))
    incoming.size = size
    await pool.acquire(size)   # queued.max.request.bytes: wait here, reading nothing, while full
    incoming.admitted = True
    try:
        return await reader.readexactly(size)
    except BaseException:
        pool.release(size)
        raise


class _Refused(Exception):
    """A request Kafka would not answer: its connection is closed, the reason logged at `level`."""

    def __init__(self, reason: object, level: int = logging.WARNING) -> None:
        super().__init__(reason)
        self.reason, self.level = reason, level


class _FetchAnswer:
    """A Fetch response still to be framed around its segment slices (sent with sendfile)."""

    __slots__ = ("request", "response", "slices")

    def __init__(self, request: Request, response: ApiMessage, slices: Slices) -> None:
        self.request, self.response, self.slices = request, response, slices


async def _answer(broker: Broker, frame: bytes, host: str, name: str) -> bytes | bytearray | _FetchAnswer | None:
    """Decode one request frame and handle it: the framed answer, a Fetch answer to send from the
    segment files, or None (no answer). Raises _Refused where Kafka closes the connection."""
    large = len(frame) >= LARGE_REQUEST_BYTES
    try:
        # a large body is decoded on a worker thread, so the event loop keeps serving others
        request = await asyncio.to_thread(decode_request, frame) if large else decode_request(frame)
    except UnsupportedApiVersion as e:
        return encode_api_versions_fallback(e.correlation_id)
    except KBatchError as e:
        raise _Refused(e) from None
    if logger.isEnabledFor(logging.DEBUG):
        logger.debug("%s v%d from %s (%s)", request.api.name, request.version, name, request.client_id)
    try:
        response = await broker.handle(request, host)
    except CloseConnection as e:
        raise _Refused(e, logging.INFO) from None
    if response is None:   # Produce with acks=0
        return None
    if isinstance(response, tuple):
        return _FetchAnswer(request, *response)
    if large:
        return await asyncio.to_thread(encode_response, request, response)
    return encode_response(request, response)


async def handle_connection(broker: Broker, reader: asyncio.StreamReader, writer: asyncio.StreamWriter,
                            deadlines: RequestDeadlines) -> None:
    peer = writer.get_extra_info("peername")
    host = peer[0] if isinstance(peer, tuple) else str(peer)
    name = f"{peer[0]}:{peer[1]}" if isinstance(peer, tuple) else str(peer)
    max_bytes = broker.config.socket_request_max_bytes
    task = asyncio.current_task()
    assert task is not None  # this coroutine's
    loop = asyncio.get_running_loop()
    stats = broker.connections
    stats.accepted += 1
    out = _Responder(writer)
    outcome = "closed"  # how this connection ended: a ConnectionStats counter
    pool = broker.request_memory
    try:
        while not broker.closing:
            try:
                first = await reader.readexactly(1)   # idle between requests: no bound
            except asyncio.IncompleteReadError:
                return
            except ConnectionError as e:  # reset between requests: the client closed the connection
                logger.info("Connection from %s closed: %s", name, e)
                return
            # the whole request within the bound, from its first byte: waiting for room in the pool
            # counts too (the client's own request timeout runs all the while)
            incoming = _Incoming(task, loop.time() + deadlines.timeout_s)
            try:
                frame = await deadlines.read(reader, first, pool, max_bytes, incoming)
                try:
                    answer = await _answer(broker, frame, host, name)
                    del frame
                finally:
                    pool.release(incoming.size)
            except _ReadTimedOut:
                outcome = "timed_out"
                logger.warning("Closing connection from %s: %s within %d ms (request_read_timeout_ms)", name,
                               incoming, deadlines.timeout_ms)
                return
            except asyncio.IncompleteReadError as e:
                outcome = "lost"
                if incoming.size < 0:
                    logger.warning("Closing connection from %s: the stream ended inside a size prefix", name)
                else:
                    logger.warning("Closing connection from %s: the stream ended after %d of %d request bytes",
                                   name, len(e.partial), incoming.size)
                return
            except _Refused as e:
                outcome = "refused"
                logger.log(e.level, "Closing connection from %s: %s", name, e.reason)
                return
            if answer is None:   # Produce with acks=0
                continue
            if isinstance(answer, _FetchAnswer):
                await out.send_fetch(answer.request, answer.response, answer.slices)
            else:
                await out.send(answer)
    except ConnectionError as e:
        outcome = "lost"
        logger.info("Connection from %s closed: %s", name, e)
    except ConnectionClosed as e:
        outcome = "dropped"
        logger.warning("Closing connection from %s: %s", name, e)
    except asyncio.CancelledError:
        raise
    except Exception:
        outcome = "dropped"
        logger.exception("Closing connection from %s after an unexpected error", name)
    finally:
        setattr(stats, outcome, getattr(stats, outcome) + 1)
        writer.close()
        try:
            await writer.wait_closed()
        except (ConnectionError, OSError):
            pass


class _Responder:
    """Writes one connection's responses, in order, through its asyncio transport and nothing else.

    Fetch record bytes go from the segment file to the socket with the event loop's transport-level
    sendfile (`loop.sendfile`): it waits until what was written before (the response's framing) has
    left the transport's buffer, takes the socket from the transport for the duration, and hands it
    back, so the transport's own reading and writing never race with it. The socket is never
    written to, or waited on, behind the transport's back. Where the loop or the transport cannot
    sendfile (uvloop, TLS), the slice is read with positional reads (os.pread: the descriptor is
    shared by every connection, so its file offset is never relied on) and written in order."""

    __slots__ = ("writer", "loop", "native")

    def __init__(self, writer: asyncio.StreamWriter) -> None:
        self.writer = writer
        self.loop = asyncio.get_running_loop()
        self.native = hasattr(os, "sendfile")  # cleared when this transport turns out unable to sendfile

    async def send(self, data: bytes | bytearray) -> None:
        self.writer.write(data)
        await self.writer.drain()

    async def send_fetch(self, request: Request, response: ApiMessage, slices: Slices) -> None:
        total = sum(s.size for _, s in slices)
        if total < SENDFILE_MIN_BYTES:
            for part, sl in slices:
                part.records = sl.read()
            await self.send(encode_response(request, response))
            return
        for piece in encode_with_slices(request, response, slices):
            if not isinstance(piece, FileSlice):
                self.writer.write(piece)   # framing: buffered by the transport, ahead of the slice
                continue
            sent = await self._send_slice(piece)
            if sent != piece.size:
                # the segment file got shorter under us: the frame cannot be completed
                raise ConnectionClosed(f"segment file ended {piece.size - sent} bytes early while sending a "
                                       "fetch response")
        await self.writer.drain()

    async def _send_slice(self, piece: FileSlice) -> int:
        transport = self.writer.transport
        if transport.is_closing():
            raise ConnectionResetError("the connection was closed while a fetch response was being written")
        if self.native:
            f = os.fdopen(piece.fd, "rb", closefd=False, buffering=0)
            try:
                # one sendfile for the whole slice (the loop waits for writability as often as needed)
                sent: int = await self.loop.sendfile(transport, f, piece.position, piece.size, fallback=False)
                return sent
            except (asyncio.SendfileNotAvailableError, NotImplementedError):
                # nothing was sent: this loop or transport cannot sendfile (or the first os.sendfile
                # failed, when a closed connection shows up in the write below)
                self.native = False
            except RuntimeError:
                if transport.is_closing():
                    raise ConnectionResetError("the connection was closed while a fetch response was being "
                                               "written") from None
                self.native = False  # e.g. a TLS transport: sendfile only with asyncio's own fallback
            finally:
                f.close()  # closefd=False: the partition's descriptor stays open
        sent = 0
        while sent < piece.size:
            data = os.pread(piece.fd, min(_READ_CHUNK, piece.size - sent), piece.position + sent)
            if not data:
                break
            self.writer.write(data)
            await self.writer.drain()
            sent += len(data)
        return sent


__all__ = ["handle_connection", "RequestDeadlines", "SENDFILE_MIN_BYTES"]
