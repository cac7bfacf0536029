"""One client connection: size-prefixed frames in, responses out, in order (Kafka's Processor).

A connection reads one request, answers it, and only then reads the next, as a broker mutes a
channel while a request is in flight; so a connection holds at most one request (bounded by
socket_request_max_bytes, Kafka's socket.request.max.bytes) and one response in memory, and the
record bytes of Fetch responses are never in memory at all (sendfile from the segment files).

A frame that cannot be a request (negative or oversized size, an unknown API key or version, a
body the schema cannot read) closes this connection with a logged reason, as Kafka does; other
connections and the data are not affected. ApiVersions above its range is answered at v0 (KIP-511).
"""
from __future__ import annotations

import asyncio
import logging
import os
import socket
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
_SENDFILE_CHUNK = 1 << 20


class ConnectionClosed(Exception):
    pass


async def handle_connection(broker: Broker, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    peer = writer.get_extra_info("peername")
    host = peer[0] if isinstance(peer, tuple) else str(peer)
    name = f"{peer[0]}:{peer[1]}" if isinstance(peer, tuple) else str(peer)
    max_bytes = broker.config.socket_request_max_bytes
    try:
        while not broker.closing:
            try:
                head = await reader.readexactly(4)
            except asyncio.IncompleteReadError as e:
                if e.partial:
                    logger.warning("Closing connection from %s: the stream ended inside a size prefix", name)
                return
            (size,) = struct.unpack(">i", head)
            if size < 0 or size > max_bytes:
                logger.warning("Closing connection from %s: request size %d is %s", name, size,
                               "negative" if size < 0 else f"larger than socket.request.max.bytes ({max_bytes})")
                return
            try:
                frame = await reader.readexactly(size)
            except asyncio.IncompleteReadError as e:
                logger.warning("Closing connection from %s: the stream ended after %d of %d request bytes",
                               name, len(e.partial), size)
                return
            try:
                request = decode_request(frame)
            except UnsupportedApiVersion as e:
                writer.write(encode_api_versions_fallback(e.correlation_id))
                await writer.drain()
                continue
            except KBatchError as e:
                logger.warning("Closing connection from %s: %s", name, e)
                return
            if logger.isEnabledFor(logging.DEBUG):
                logger.debug("%s v%d from %s (%s)", request.api.name, request.version, name, request.client_id)
            try:
                response = await broker.handle(request, host)
            except CloseConnection as e:
                logger.info("Closing connection from %s: %s", name, e)
                return
            if response is None:   # Produce with acks=0
                continue
            if isinstance(response, tuple):
                await _send_fetch(writer, request, *response)
            else:
                writer.write(encode_response(request, response))
                await writer.drain()
    except (ConnectionError, ConnectionClosed) as e:
        logger.info("Connection from %s closed: %s", name, e)
    except asyncio.CancelledError:
        raise
    except Exception:
        logger.exception("Closing connection from %s after an unexpected error", name)
    finally:
        writer.close()
        try:
            await writer.wait_closed()
        except (ConnectionError, OSError):
            pass


async def _send_fetch(writer: asyncio.StreamWriter, request: Request, response: ApiMessage, slices: Slices) -> None:
    total = sum(s.size for _, s in slices)
    if total < SENDFILE_MIN_BYTES:
        for part, sl in slices:
            part.records = sl.read()
        writer.write(encode_response(request, response))
        await writer.drain()
        return
    loop = asyncio.get_running_loop()
    for piece in encode_with_slices(request, response, slices):
        if not isinstance(piece, FileSlice):
            writer.write(piece)
            continue
        await writer.drain()
        sent = await _sendfile(loop, writer, piece)
        if sent != piece.size:
            # the segment file got shorter under us: the frame cannot be completed
            raise ConnectionClosed(f"segment file ended {piece.size - sent} bytes early while sending a fetch response")
    await writer.drain()


async def _sendfile(loop: asyncio.AbstractEventLoop, writer: asyncio.StreamWriter, piece: FileSlice) -> int:
    transport = writer.transport
    sock: socket.socket | None = transport.get_extra_info("socket")
    if sock is not None and transport.get_write_buffer_size() == 0 and hasattr(os, "sendfile"):
        # the transport has nothing queued, so the socket is ours until this returns: os.sendfile
        # straight from the segment file, waiting for writability only when the socket is full
        return await _sendfile_on_socket(loop, sock.fileno(), piece)
    f = os.fdopen(piece.fd, "rb", closefd=False, buffering=0)
    try:
        sent_at_once: int = await loop.sendfile(transport, f, piece.position, piece.size, fallback=False)
        return sent_at_once
    except (asyncio.SendfileNotAvailableError, NotImplementedError):
        pass  # e.g. an event loop without sendfile (uvloop): positional reads, no shared file offset
    sent = 0
    while sent < piece.size:
        data = os.pread(piece.fd, min(_SENDFILE_CHUNK, piece.size - sent), piece.position + sent)
        if not data:
            break
        writer.write(data)
        await writer.drain()
        sent += len(data)
    return sent


async def _sendfile_on_socket(loop: asyncio.AbstractEventLoop, sockfd: int, piece: FileSlice) -> int:
    sent = 0
    while sent < piece.size:
        n: int | None
        try:
            n = os.sendfile(sockfd, piece.fd, piece.position + sent, piece.size - sent)
        except BlockingIOError:
            n = None
        if n == 0:
            break  # the file ended early
        if n is None:
            fut: asyncio.Future[None] = loop.create_future()
            loop.add_writer(sockfd, _set_done, fut)
            try:
                await fut
            finally:
                loop.remove_writer(sockfd)
            continue
        sent += n
    return sent


def _set_done(fut: asyncio.Future[None]) -> None:
    if not fut.done():
        fut.set_result(None)


__all__ = ["handle_connection", "SENDFILE_MIN_BYTES"]
