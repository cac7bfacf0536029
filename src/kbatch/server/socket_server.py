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

from .broker import Broker, ServerConfig
from .connection import handle_connection

logger = logging.getLogger("kbatch.server")


class Server:
    def __init__(self, directory, config: ServerConfig | None = None, **options):
        self.config = dataclasses.replace(config or ServerConfig(), **options)
        self.directory = directory
        self.broker = None
        self._server = None
        self._tasks: set = set()

    @property
    def port(self) -> int:
        return self.broker.port

    @property
    def bootstrap(self) -> str:
        return f"{self.broker.host}:{self.broker.port}"

    async def start(self) -> "Server":
        broker = Broker(self.directory, self.config)
        await asyncio.to_thread(broker.open)
        self.broker = broker
        try:
            self._server = await asyncio.start_server(self._accept, self.config.host, self.config.port,
                                                      reuse_address=True)
        except BaseException:
            broker.close()
            raise
        broker.port = self._server.sockets[0].getsockname()[1]
        logger.info("kbatch serve: %s on %s (%d partitions%s)", broker.directory, self.bootstrap,
                    len(broker.partitions), ", read-only" if broker.read_only else "")
        return self

    async def _accept(self, reader, writer) -> None:
        task = asyncio.current_task()
        self._tasks.add(task)
        try:
            await handle_connection(self.broker, reader, writer)
        finally:
            self._tasks.discard(task)

    async def stop(self) -> None:
        if self._server is None:
            return
        broker = self.broker
        self._server.close()
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

    def __init__(self, directory, **options):
        self.server = Server(directory, **options)
        self._loop = None
        self._thread = None
        self._started = threading.Event()
        self._error = None

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
        if self._thread is None:
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
    def broker(self):
        return self.server.broker

    def call(self, fn, *args):
        """Run fn(*args) on the server's event loop and return its result (for tests)."""
        fut = asyncio.run_coroutine_threadsafe(_call(fn, *args), self._loop)
        return fut.result(timeout=30)

    def __enter__(self):
        return self.start() if self._thread is None else self

    def __exit__(self, *exc):
        self.stop()


async def _call(fn, *args):
    out = fn(*args)
    return await out if asyncio.iscoroutine(out) else out


def serve(directory, *, listen: str = "127.0.0.1:0", **options) -> ServerThread:
    """Serve `directory` on a background thread; use as a context manager:

        with kbatch.server.serve("logs", read_only=True) as srv:
            consumer = KafkaConsumer(bootstrap_servers=srv.bootstrap, ...)

    listen is "host:port" (port 0: any free port). Other options are ServerConfig fields.
    """
    host, port = parse_listen(listen)
    return ServerThread(directory, host=host, port=port, **options)


def parse_listen(listen: str) -> tuple[str, int]:
    host, sep, port = listen.rpartition(":")
    if not sep or not port.isdigit():
        raise ValueError(f"listen must be HOST:PORT, not {listen!r}")
    return host.strip("[]") or "127.0.0.1", int(port)


def run(directory, *, listen: str = "127.0.0.1:9092", ready=None, **options) -> None:
    """Serve until SIGINT or SIGTERM (the `kbatch serve` command)."""
    host, port = parse_listen(listen)

    async def main():
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


__all__ = ["Server", "ServerThread", "serve", "run", "parse_listen"]
