"""What a request handler uses of the broker: `BrokerContext`, a Protocol that
kbatch.server.broker.Broker implements (mypy checks it where the broker calls a handler). The
handlers name this, never the Broker class, so the broker imports its handlers and nothing imports
back (as Kafka's KafkaApis is handed its ReplicaManager, GroupCoordinator and configs)."""
from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    import asyncio
    import uuid
    from collections.abc import Awaitable, Callable

    from ...log.unified_log import LogConfig
    from ..config import ServerConfig
    from ..fetch_session import FetchSessionCache
    from ..group_coordinator import GroupCoordinator
    from ..partition import Partition
    from ..producer_state import ProducerIdManager
    from ..protocol import Answer, Request


class BrokerContext(Protocol):
    """The served directory as the handlers see it: configuration, identity, partitions, the group
    coordinator, fetch sessions and producer ids."""

    config: ServerConfig
    read_only: bool
    node_id: int
    cluster_id: str
    host: str
    port: int
    directory: str
    closing: bool
    coordinator: GroupCoordinator
    fetch_sessions: FetchSessionCache
    producer_ids: ProducerIdManager

    def closing_waiter(self) -> asyncio.Future[None]: ...
    def topics(self) -> dict[str, list[int]]: ...
    def partition(self, topic: str, index: int) -> Partition | None: ...
    def topic_id(self, topic: str) -> uuid.UUID: ...
    async def create_topic(self, topic: str) -> bool: ...
    async def create_new_topic(self, topic: str, partitions: int, configs: dict[str, str]) -> uuid.UUID: ...
    async def delete_topic(self, topic: str) -> None: ...
    async def add_partitions(self, topic: str, count: int) -> None: ...
    async def alter_topic_config(self, topic: str, configs: dict[str, str]) -> None: ...
    def log_config(self, topic: str) -> LogConfig: ...


if TYPE_CHECKING:
    #: an API handler: (broker, request, client host) -> its answer
    Handler = Callable[[BrokerContext, Request, str], Awaitable[Answer]]

__all__ = ["BrokerContext", "Handler"]
