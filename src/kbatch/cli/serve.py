"""`kbatch serve`: a Kafka protocol endpoint over a log directory (kbatch.server, docs/serve.md)."""

import dataclasses
import logging
import os
import sys
from collections.abc import Callable, Sequence
from typing import IO, TYPE_CHECKING

import kbatch

from ._common import EXIT_OK, UsageProblem, emit, flags, run

if TYPE_CHECKING:
    import typer

    from .._typing import PathLike
    from ..server import Server


def cmd_serve(path: "PathLike", *, listen: str = "127.0.0.1:9092", writable: bool = False,
              read_only: bool = False, auto_create_topics: bool = False, config: Sequence[str] = (),
              advertised_host: str | None = None, num_partitions: int = 1,
              group_initial_rebalance_delay_ms: int = 3000, flush_messages: int | None = None,
              offsets_retention_minutes: int = 10080, queued_max_request_bytes: int = 209715200,
              fetch_max_bytes: int = 57671680, request_read_timeout_ms: int = 30000, quiet: bool = False, as_json: bool = False, out: IO[str] | None = None, err: IO[str] | None = None,
              ready: "Callable[[Server], object] | None" = None) -> int:
    """Serve `path` until SIGINT/SIGTERM; exit 0 after a clean stop.

    Read-only unless `writable`: nothing in the directory changes (Produce is refused, commits are
    kept in memory). Every argument and the listen address are checked before anything on disk is
    touched: a bad one is a usage problem (exit 2). `as_json`: one JSON line on `out` when the
    server listens (address, mode, topics and partitions) and one when it has stopped."""
    out = out or sys.stdout
    err = err or sys.stderr
    if read_only and writable:
        raise UsageProblem("--read-only and --writable contradict each other (read-only is the default)")
    if not writable and auto_create_topics:
        raise UsageProblem("--auto-create-topics creates directories: it needs --writable")
    if not os.path.isdir(path):
        raise UsageProblem(f"{path} is not a directory")
    try:
        from ..server.socket_server import ListenError, parse_listen, run as run_server
    except ImportError as e:
        raise UsageProblem(str(e)) from None
    try:
        parse_listen(listen)
    except ValueError as e:
        raise UsageProblem(f"--listen: {e}") from None
    if num_partitions < 1:
        raise UsageProblem(f"--num-partitions must be at least 1, not {num_partitions}")
    if flush_messages is not None and flush_messages < 1:
        raise UsageProblem(f"--flush-messages must be at least 1, not {flush_messages}")
    if group_initial_rebalance_delay_ms < 0:
        raise UsageProblem(f"--group-initial-rebalance-delay-ms must not be negative, not "
                           f"{group_initial_rebalance_delay_ms}")
    for flag, limit in (("--offsets-retention-minutes", offsets_retention_minutes),
                        ("--queued-max-request-bytes", queued_max_request_bytes), ("--fetch-max-bytes", fetch_max_bytes),
                        ("--request-read-timeout-ms", request_read_timeout_ms)):
        if limit < 1:
            raise UsageProblem(f"{flag} must be at least 1, not {limit}")
    topic_config = {}
    for item in config:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise UsageProblem(f"--config takes NAME=VALUE (a Kafka topic config), not {item!r}")
        topic_config[key.strip()] = value.strip()
    try:
        kbatch.LogConfig.from_properties(topic_config)
    except kbatch.KBatchError as e:
        raise UsageProblem(f"--config: {e}") from None

    handler = logging.StreamHandler(err)
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    server_log = logging.getLogger("kbatch")
    server_log.addHandler(handler)
    server_log.setLevel(logging.WARNING if quiet else logging.INFO)
    started: list[Server] = []

    def on_ready(server: "Server") -> None:
        started.append(server)
        if as_json:
            broker = server.broker
            topics = broker.topics()
            emit(out, {"event": "listening", "listen": server.listen_address, "bootstrap": server.bootstrap,
                       "directory": broker.directory, "mode": "read-only" if broker.read_only else "writable",
                       "topics": topics, "partitions": sum(len(p) for p in topics.values())})
            out.flush()
        if ready is not None:
            ready(server)

    try:
        run_server(path, listen=listen, read_only=not writable, auto_create_topics=auto_create_topics,
                   topic_config=topic_config, advertised_host=advertised_host, num_partitions=num_partitions,
                   group_initial_rebalance_delay_ms=group_initial_rebalance_delay_ms, flush_messages=flush_messages,
                   offsets_retention_minutes=offsets_retention_minutes,
                   queued_max_request_bytes=queued_max_request_bytes, fetch_max_bytes=fetch_max_bytes,
                   request_read_timeout_ms=request_read_timeout_ms, ready=on_ready)
    except ListenError as e:
        raise UsageProblem(str(e)) from None
    finally:
        server_log.removeHandler(handler)
    if as_json and started:
        emit(out, {"event": "stopped", "connections": dataclasses.asdict(started[0].broker.connections)})
        out.flush()
    return EXIT_OK


def register(app: "typer.Typer") -> None:
    from typing import Annotated, List, Optional

    import typer

    quiet_flag, json_flag = flags()

    @app.command(help="Serve a log directory of <topic>-<partition> folders to Kafka clients, read-only unless "
                      "--writable: fetch (bytes straight from the segments), offsets by time (KIP-79), consumer "
                      "groups; with --writable also produce (validated, KIP-937 error 32) and offsets kept in "
                      "__consumer_offsets. docs/serve.md")
    def serve(path: Annotated[str, typer.Argument(help="Log directory holding <topic>-<partition> folders.")],
              listen: Annotated[str, typer.Option("--listen", help="HOST:PORT to listen on (port 0: any free port).")] = "127.0.0.1:9092",
              writable: Annotated[bool, typer.Option("--writable", help="Accept Produce, keep commits in __consumer_offsets, create topics: the directory is locked, recovered (a torn tail is cut) and written. Without it nothing in the directory changes.")] = False,
              read_only: Annotated[bool, typer.Option("--read-only", help="The default: nothing in the directory changes; Produce is refused (TOPIC_AUTHORIZATION_FAILED), commits are kept in memory.")] = False,
              auto_create_topics: Annotated[bool, typer.Option("--auto-create-topics", help="Create a topic a client asks for in Metadata (auto.create.topics.enable; needs --writable).")] = False,
              config: Annotated[Optional[List[str]], typer.Option("--config", "-c", help="A Kafka topic config for every topic, NAME=VALUE (e.g. message.timestamp.after.max.ms=3600000). Repeatable.")] = None,
              advertised_host: Annotated[Optional[str], typer.Option("--advertised-host", help="Host clients are told to connect to (default: the listen host).")] = None,
              num_partitions: Annotated[int, typer.Option("--num-partitions", help="Partitions of an auto-created topic.")] = 1,
              rebalance_delay_ms: Annotated[int, typer.Option("--group-initial-rebalance-delay-ms", help="group.initial.rebalance.delay.ms.")] = 3000,
              flush_messages: Annotated[Optional[int], typer.Option("--flush-messages", help="fsync after this many records, before answering (flush.messages; default: the OS page cache, as Kafka).")] = None,
              offsets_retention_minutes: Annotated[int, typer.Option("--offsets-retention-minutes", help="Committed offsets of an empty group expire after this long, and the group with them (offsets.retention.minutes; 7 days).")] = 10080,
              queued_max_request_bytes: Annotated[int, typer.Option("--queued-max-request-bytes", help="Bytes of requests read or being handled at once, over all connections; above it no request body is read (queued.max.request.bytes; 200 MiB).")] = 209715200,
              fetch_max_bytes: Annotated[int, typer.Option("--fetch-max-bytes", help="Most record bytes in one Fetch answer, whatever the client asks (fetch.max.bytes; 55 MiB).")] = 57671680,
              request_read_timeout_ms: Annotated[int, typer.Option("--request-read-timeout-ms", help="A request's bytes must all arrive within this long, else its connection is closed (30 s).")] = 30000,
              as_json: Annotated[bool, json_flag] = False,
              quiet: Annotated[bool, typer.Option("--quiet", "-q", help="Warnings and errors only.")] = False) -> None:
        run(cmd_serve, path, listen=listen, writable=writable, read_only=read_only,
            auto_create_topics=auto_create_topics, config=list(config or []), advertised_host=advertised_host,
            num_partitions=num_partitions, group_initial_rebalance_delay_ms=rebalance_delay_ms,
            flush_messages=flush_messages, offsets_retention_minutes=offsets_retention_minutes,
            queued_max_request_bytes=queued_max_request_bytes, fetch_max_bytes=fetch_max_bytes,
            request_read_timeout_ms=request_read_timeout_ms, quiet=quiet, as_json=as_json)
