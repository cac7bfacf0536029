"""Request handlers, one module per Kafka API (named as in Kafka's KafkaApis: handleProduceRequest ->
`produce.handle`, ...). Each module opens with what it serves and registers its own key and
version range (`API = register(Api(...))`, protocol.APIS, as franz-go's kfake does); each handler is
`async def handle(broker, request, client_host)` (broker: what _context.BrokerContext says, which
kbatch.server.broker.Broker implements) and returns the response message, or None when no response
is sent (Produce with acks=0). The table of handlers is built from this module list:
an API is served by adding its module here."""
from __future__ import annotations

from typing import TYPE_CHECKING

from ..protocol import APIS
from . import (api_versions, create_partitions, create_topics, delete_topics, describe_cluster, describe_configs,
               fetch, find_coordinator, heartbeat, incremental_alter_configs, init_producer_id, join_group,
               leave_group, list_offsets, metadata, offset_commit, offset_fetch, offset_for_leader_epoch, produce,
               sync_group)

if TYPE_CHECKING:
    from ._context import Handler

MODULES = (produce, fetch, list_offsets, metadata, offset_commit, offset_fetch, find_coordinator, join_group,
           heartbeat, leave_group, sync_group, api_versions, init_producer_id, offset_for_leader_epoch,
           describe_configs, describe_cluster, create_topics, delete_topics, create_partitions,
           incremental_alter_configs)
HANDLERS: dict[int, Handler] = {m.API.key: m.handle for m in MODULES}
assert set(HANDLERS) == set(APIS), "every registered API has its handler module listed here"

__all__ = ["HANDLERS", "MODULES", "APIS"]
