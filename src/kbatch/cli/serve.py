"""`kbatch serve`: a Kafka protocol endpoint over a log directory (kbatch.server, docs/serve.md)."""

import logging
import os
import sys
from collections.abc import Callable, Sequence
from typing import IO, TYPE_CHECKING

from ._common import EXIT_OK, UsageProblem, run

if TYPE_CHECKING:
    import typer

    from .._typing import PathLike
    from ..server import Server


def cmd_serve(path: "PathLike", *, listen: str = "127.0.0.1:9092", read_only: bool = False,
              auto_create_topics: bool = False, config: Sequence[str] = (), advertised_host: str | None = None,
              num_partitions: int = 1, group_initial_rebalance_delay_ms: int = 3000, flush_messages: int | None = None,
              quiet: bool = False, err: IO[str] | None = None,
              ready: "Callable[[Server], object] | None" = None) -> int:
    """Serve `path` until SIGINT/SIGTERM; exit 0 after a clean stop."""
    err = err or sys.stderr
    if not os.path.isdir(path):
        raise UsageProblem(f"{path} is not a directory")
    try:
        from ..server import parse_listen, run as run_server
    except ImportError as e:
        raise UsageProblem(str(e)) from None
    try:
        parse_listen(listen)
    except ValueError as e:
        raise UsageProblem(str(e)) from None
    topic_config = {}
    for item in config:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise UsageProblem(f"--config takes NAME=VALUE (a Kafka topic config), not {item!r}")
        topic_config[key.strip()] = value.strip()
    handler = logging.StreamHandler(err)
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    server_log = logging.getLogger("kbatch")
    server_log.addHandler(handler)
    server_log.setLevel(logging.WARNING if quiet else logging.INFO)

    try:
        run_server(path, listen=listen, read_only=read_only, auto_create_topics=auto_create_topics,
                   topic_config=topic_config, advertised_host=advertised_host, num_partitions=num_partitions,
                   group_initial_rebalance_delay_ms=group_initial_rebalance_delay_ms, flush_messages=flush_messages,
                   ready=ready)
    finally:
        server_log.removeHandler(handler)
    return EXIT_OK


def register(app: "typer.Typer") -> None:
    from typing import Annotated, List, Optional

    import typer

    @app.command(help="Serve a log directory of <topic>-<partition> folders to Kafka clients: produce "
                      "(validated, KIP-937 error 32), fetch (bytes straight from the segments), offsets by "
                      "time (KIP-79), consumer groups with offsets kept in __consumer_offsets. docs/serve.md")
    def serve(path: Annotated[str, typer.Argument(help="Log directory holding <topic>-<partition> folders.")],
              listen: Annotated[str, typer.Option("--listen", help="HOST:PORT to listen on (port 0: any free port).")] = "127.0.0.1:9092",
              read_only: Annotated[bool, typer.Option("--read-only", help="Never write: Produce is refused (TOPIC_AUTHORIZATION_FAILED), commits are kept in memory.")] = False,
              auto_create_topics: Annotated[bool, typer.Option("--auto-create-topics", help="Create a topic a client asks for in Metadata (auto.create.topics.enable).")] = False,
              config: Annotated[Optional[List[str]], typer.Option("--config", "-c", help="A Kafka topic config for every topic, NAME=VALUE (e.g. message.timestamp.after.max.ms=3600000). Repeatable.")] = None,
              advertised_host: Annotated[Optional[str], typer.Option("--advertised-host", help="Host clients are told to connect to (default: the listen host).")] = None,
              num_partitions: Annotated[int, typer.Option("--num-partitions", help="Partitions of an auto-created topic.")] = 1,
              rebalance_delay_ms: Annotated[int, typer.Option("--group-initial-rebalance-delay-ms", help="group.initial.rebalance.delay.ms.")] = 3000,
              flush_messages: Annotated[Optional[int], typer.Option("--flush-messages", help="fsync after this many records, before answering (flush.messages; default: the OS page cache, as Kafka).")] = None,
              quiet: Annotated[bool, typer.Option("--quiet", "-q", help="Warnings and errors only.")] = False) -> None:
        run(cmd_serve, path, listen=listen, read_only=read_only, auto_create_topics=auto_create_topics,
            config=list(config or []), advertised_host=advertised_host, num_partitions=num_partitions,
            group_initial_rebalance_delay_ms=rebalance_delay_ms, flush_messages=flush_messages, quiet=quiet)
