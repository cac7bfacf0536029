"""One client connection: size-prefixed frames in, responses out, in order (Kafka's Processor).

A connection reads one request, answers it, and only then reads the next, as a broker mutes a
channel while a request is in flight; so a connection holds at most one request (bounded by
socket_request_max_bytes, Kafka's socket.request.max.bytes) and one response in memory, and the
record bytes of Fetch responses are never in memory at all (sendfile from the segment files). All
connections together hold at most queued_max_request_bytes of requests (Broker.request_memory):
a connection waits for room before it reads a request's body. A large request is decoded and
answered off the event loop, and handlers yield between chunks of work, so one request never
stalls the other connections.

A frame that cannot be a request (negative or oversized size, an unknown API key or version, a
body the schema cannot read) closes this connection with a logged reason, as Kafka does; other
connections and the data are not affected. ApiVersions above its range is answered at v0 (KIP-511).
"""
from __future__ import annotations

import asyncio
import logging
import os
import struct
from typing import TYPE_CHECKING

from ..errors import KBatchError
from .protocol import (CloseConnection, FileSlice, Request, Slices, UnsupportedApiVersion, decode_request,
                       encode_api_versions_fallback, encode_response, encode_with_slices)

if TYPE_CHECKING:
    from kafka.protocol.api_message import ApiMessage

    from .broker import Broker

logger = logging.getLogger("kbatch.server")

# Fetch responses with less record data than this are read and sent in one write; larger ones go
# through sendfile (fewer syscalls for small polls, no copy for large ones).
SENDFILE_MIN_BYTES = 64 * 1024
# Requests at least this large are decoded (and answered) on a worker thread: kafka-python's codec
# takes about 1 s for a 3 MB Metadata request, time every other connection would otherwise wait.
LARGE_REQUEST_BYTES = 1 << 20
_READ_CHUNK = 1 << 20  # the read-and-write fallback's piece


class ConnectionClosed(Exception):
    pass


async def handle_connection(broker: Broker, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    peer = writer.get_extra_info("peername")
    host = peer[0] if isinstance(peer, tuple) else str(peer)
    name = f"{peer[0]}:{peer[1]}" if isinstance(peer, tuple) else str(peer)
    max_bytes = broker.config.socket_request_max_bytes
    stats = broker.connections
    stats.accepted += 1
    out = _Responder(writer)
    outcome = "closed"  # how this connection ended: a ConnectionStats counter
    try:
        while not broker.closing:
            try:
                head = await reader.readexactly(4)
            except asyncio.IncompleteReadError as e:
                if e.partial:
                    outcome = "lost"
                    logger.warning("Closing connection from %s: the stream ended inside a size prefix", name)
                return
            except ConnectionError as e:  # reset between requests: the client closed the connection
                logger.info("Connection from %s closed: %s", name, e)
                return
            (size,) = struct.unpack(">i", head)
            if size < 0 or size > max_bytes:
                outcome = "refused"
                logger.warning("Closing connection from %s: request size %d is %s", name, size,
                               "negative" if size < 0 else f"larger than socket.request.max.bytes ({max_bytes})")
                return
            pool = broker.request_memory
            await pool.acquire(size)   # queued.max.request.bytes: wait here, reading nothing, while full
            try:
                try:
                    frame = await reader.readexactly(size)
                except asyncio.IncompleteReadError as e:
                    outcome = "lost"
                    logger.warning("Closing connection from %s: the stream ended after %d of %d request bytes",
                                   name, len(e.partial), size)
                    return
                large = size >= LARGE_REQUEST_BYTES
                try:
                    # a large body is decoded on a worker thread, so the event loop keeps serving others
                    request = await asyncio.to_thread(decode_request, frame) if large else decode_request(frame)
                except UnsupportedApiVersion as e:
                    await out.send(encode_api_versions_fallback(e.correlation_id))
                    continue
                except KBatchError as e:
                    outcome = "refused"
                    logger.warning("Closing connection from %s: %s", name, e)
                    return
                del frame
                if logger.isEnabledFor(logging.DEBUG):
                    logger.debug("%s v%d from %s (%s)", request.api.name, request.version, name, request.client_id)
                try:
                    response = await broker.handle(request, host)
                except CloseConnection as e:
                    outcome = "refused"
                    logger.info("Closing connection from %s: %s", name, e)
                    return
                if response is None:   # Produce with acks=0
                    continue
                if isinstance(response, tuple):
                    await out.send_fetch(request, *response)
                elif large:
                    await out.send(await asyncio.to_thread(encode_response, request, response))
                else:
                    await out.send(encode_response(request, response))
            finally:
                pool.release(size)
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


__all__ = ["handle_connection", "SENDFILE_MIN_BYTES"]
