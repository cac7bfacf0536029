"""Listening, running and stopping (Kafka's SocketServer and KafkaServer start/shutdown).

- `Server(directory, config)`: `await start()` opens the partitions and listens; `await stop()` stops
  accepting, lets requests in flight finish (long polls are woken), closes connections, then
  flushes and closes every log.
- `serve(directory, ...)`: the same on a background thread with its own event loop, as a context
  manager; port 0 picks a free port (`.port`, `.bootstrap`). For tests and embedding.
- `run(directory, ...)`: blocking, until SIGINT/SIGTERM (the CLI).
"""
from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
import signal
import threading
from collections.abc import Callable, Coroutine
from typing import TYPE_CHECKING, Any, TypeVar

from .broker import Broker, ServerConfig
from .connection import RequestDeadlines, handle_connection

if TYPE_CHECKING:
    from types import TracebackType

    from typing_extensions import Unpack

    from .._typing import PathLike
    from .broker import ServeOptions, ServerOptions

_T = TypeVar("_T")

logger = logging.getLogger("kbatch.server")


class ListenError(OSError):
    """The listen address cannot be used: a host that does not resolve or is not this machine's, a
    port in use or not permitted. Raised by Server.start before the directory is opened."""


def check_port(port: int) -> None:
    if not 0 <= port <= 65535:
        raise ValueError(f"port {port} is not a TCP port (0-65535; 0 picks a free one)")


def _host_port(host: str, port: int) -> str:
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


class Server:
    def __init__(self, directory: PathLike, config: ServerConfig | None = None,
                 **options: Unpack[ServerOptions]) -> None:
        self.config = dataclasses.replace(config or ServerConfig(), **options)
        self.directory = directory
        self._broker: Broker | None = None
        self._server: asyncio.Server | None = None
        self._tasks: set[asyncio.Task[Any]] = set()
        self._deadlines = RequestDeadlines(self.config.request_read_timeout_ms)

    @property
    def broker(self) -> Broker:
        """The served directory (once started)."""
        if self._broker is None:
            raise RuntimeError("the server is not started")
        return self._broker

    @property
    def port(self) -> int:
        return self.broker.port

    @property
    def bootstrap(self) -> str:
        """What clients are told to connect to: the advertised host and the port, "host:port"."""
        return f"{self.broker.host}:{self.broker.port}"

    @property
    def listen_address(self) -> str:
        """Where the server listens (the address bound, which may differ from the advertised one)."""
        if self._server is None or not self._server.sockets:
            raise RuntimeError("the server is not listening")
        host, port = self._server.sockets[0].getsockname()[:2]
        return _host_port(host, port)

    async def start(self) -> "Server":
        """Check the configuration, listen (bound, not yet accepting), then open the directory and
        accept: an address that cannot be used fails before anything on disk is touched (a
        read-only server touches nothing at all; a writable one locks and recovers after this)."""
        broker = Broker(self.directory, self.config)  # reads meta.properties, checks the topic configs
        server = await self._listen()
        try:
            await asyncio.to_thread(broker.open)
        except BaseException:
            server.close()
            await server.wait_closed()
            raise
        self._broker, self._server = broker, server
        broker.port = server.sockets[0].getsockname()[1]
        try:
            await server.start_serving()
        except BaseException:
            await self.stop()
            raise
        broker.coordinator.start_cleanup()
        self._deadlines.start()
        logger.info("kbatch serve: %s on %s (%d partitions%s)", broker.directory, self.bootstrap,
                    len(broker.partitions), ", read-only" if broker.read_only else ", writable")
        return self

    async def _listen(self) -> asyncio.Server:
        host, port = self.config.host, self.config.port
        try:
            check_port(port)
            return await asyncio.start_server(self._accept, host, port, reuse_address=True, start_serving=False)
        except (OSError, OverflowError, ValueError, UnicodeError) as e:
            reason = e.strerror if isinstance(e, OSError) and e.strerror else str(e)
            raise ListenError(f"cannot listen on {_host_port(host, port)}: {reason}") from None

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None  # this coroutine's
        self._tasks.add(task)
        try:
            await handle_connection(self.broker, reader, writer, self._deadlines)
        except asyncio.CancelledError:
            # stop() cancels connections idle in a read: that is this task's normal end (returning
            # keeps asyncio's stream callback from logging the cancellation as an error)
            if not self.broker.closing:
                raise
        finally:
            self._tasks.discard(task)

    async def stop(self) -> None:
        if self._server is None:
            return
        broker = self.broker
        self._server.close()
        self._deadlines.stop()
        broker.begin_shutdown()
        if self._tasks:  # requests in flight finish (long polls return at once); idle reads are cancelled
            done, pending = await asyncio.wait(list(self._tasks), timeout=0.2)
            for t in pending:
                t.cancel()
            if pending:
                await asyncio.wait(pending, timeout=self.config.shutdown_timeout_s)
        await self._server.wait_closed()
        self._server = None
        await asyncio.to_thread(broker.close)
        logger.info("kbatch serve: stopped")


class ServerThread:
    """A Server on a daemon thread with its own event loop (see `serve`)."""

    def __init__(self, directory: PathLike, **options: Unpack[ServerOptions]) -> None:
        self.server = Server(directory, **options)
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._started = threading.Event()
        self._error: BaseException | None = None

    def start(self) -> "ServerThread":
        self._thread = threading.Thread(target=self._run, name="kbatch-serve", daemon=True)
        self._thread.start()
        self._started.wait()
        if self._error is not None:
            raise self._error
        return self

    def _run(self) -> None:
        loop = self._loop = asyncio.new_event_loop()
        try:
            loop.run_until_complete(self.server.start())
        except BaseException as e:  # surfaced by start()
            self._error = e
            self._started.set()
            loop.close()
            return
        self._started.set()
        try:
            loop.run_forever()
        finally:
            loop.run_until_complete(self.server.stop())
            loop.run_until_complete(loop.shutdown_default_executor())
            loop.close()

    def stop(self) -> None:
        if self._thread is None or self._loop is None:
            return
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join()
        self._thread = None

    @property
    def port(self) -> int:
        return self.server.port

    @property
    def bootstrap(self) -> str:
        return self.server.bootstrap

    @property
    def broker(self) -> Broker:
        return self.server.broker

    def call(self, fn: Callable[..., Coroutine[Any, Any, _T] | _T], *args: object) -> _T:
        """Run fn(*args) on the server's event loop and return its result (for tests)."""
        if self._loop is None:
            raise RuntimeError("the server is not started")
        fut = asyncio.run_coroutine_threadsafe(_call(fn, *args), self._loop)
        return fut.result(timeout=30)

    def __enter__(self) -> ServerThread:
        return self.start() if self._thread is None else self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.stop()


async def _call(fn: Callable[..., Coroutine[Any, Any, _T] | _T], *args: object) -> _T:
    out = fn(*args)
    if asyncio.iscoroutine(out):
        result: _T = await out
        return result
    return out


def serve(directory: PathLike, *, listen: str = "127.0.0.1:0", **options: Unpack[ServeOptions]) -> ServerThread:
    """Serve `directory` on a background thread; use as a context manager:

        with kbatch.server.serve("logs", read_only=True) as srv:
            consumer = KafkaConsumer(bootstrap_servers=srv.bootstrap, ...)

    listen is "host:port" (port 0: any free port). Other options are ServerConfig fields.
    """
    host, port = parse_listen(listen)
    return ServerThread(directory, host=host, port=port, **options)


def parse_listen(listen: str) -> tuple[str, int]:
    """"HOST:PORT" (an IPv6 host in brackets) -> (host, port); ValueError for anything else,
    a port above 65535 included. The host is resolved only when the server binds."""
    host, sep, port = listen.rpartition(":")
    if not sep or not port.isdigit():
        raise ValueError(f"listen must be HOST:PORT, not {listen!r}")
    number = int(port)
    check_port(number)
    return host.strip("[]") or "127.0.0.1", number


def run(directory: PathLike, *, listen: str = "127.0.0.1:9092", ready: Callable[[Server], object] | None = None,
        **options: Unpack[ServeOptions]) -> None:
    """Serve until SIGINT or SIGTERM (the `kbatch serve` command); ready(server) once it listens."""
    host, port = parse_listen(listen)

    async def main() -> None:
        server = Server(directory, host=host, port=port, **options)
        await server.start()
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            with contextlib.suppress(NotImplementedError, RuntimeError):
                loop.add_signal_handler(sig, stop.set)
        if ready is not None:
            ready(server)
        try:
            await stop.wait()
        finally:
            await server.stop()

    asyncio.run(main())


__all__ = ["Server", "ServerThread", "ListenError", "serve", "run", "parse_listen"]
