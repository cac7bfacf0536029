"""Request handlers, one module per Kafka API (named as in Kafka's KafkaApis: handleProduceRequest ->
`produce.handle`, ...). Each handler is `async def handle(broker, request, client_host)` and returns
the response message, or None when no response is sent (Produce with acks=0)."""
from __future__ import annotations

from typing import TYPE_CHECKING

from . import api_versions, fetch, find_coordinator, heartbeat, init_producer_id, join_group, leave_group, list_offsets, metadata, offset_commit, offset_fetch, produce, sync_group

if TYPE_CHECKING:
    from ..broker import Handler

HANDLERS: dict[int, Handler] = {
    0: produce.handle,
    1: fetch.handle,
    2: list_offsets.handle,
    3: metadata.handle,
    8: offset_commit.handle,
    9: offset_fetch.handle,
    10: find_coordinator.handle,
    11: join_group.handle,
    12: heartbeat.handle,
    13: leave_group.handle,
    14: sync_group.handle,
    18: api_versions.handle,
    22: init_producer_id.handle,
}

__all__ = ["HANDLERS"]
