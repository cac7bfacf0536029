"""OffsetFetch (key 9): committed offsets (-1 and empty metadata where none is committed);
topics null (v2+) asks for every committed partition of the group."""
from __future__ import annotations

from typing import TYPE_CHECKING

from kafka.protocol.consumer.group import OffsetFetchRequest, OffsetFetchResponse

from ..protocol import Api, register
from . import _errors as E

API = register(Api(9, "OffsetFetch", OffsetFetchRequest, OffsetFetchResponse, min_version=1, max_version=7, first_flexible=6))

if TYPE_CHECKING:
    from kafka.protocol.api_message import ApiMessage
    from kafka.protocol.data_container import DataContainer

    from ._context import BrokerContext
    from ..protocol import Request


async def handle(broker: BrokerContext, request: Request, client_host: str) -> ApiMessage:
    body = request.body
    cls = request.api.response
    T = cls.OffsetFetchResponseTopic
    P = T.OffsetFetchResponsePartition
    wanted = None if body.topics is None else [(t.name, i) for t in body.topics for i in t.partition_indexes]
    found = broker.coordinator.fetch_offsets(body.group_id, wanted)
    topics: list[DataContainer] = []
    for (topic, index), value in found:
        if not topics or topics[-1].name != topic:
            topics.append(T(name=topic, partitions=[]))
        topics[-1].partitions.append(P(
            partition_index=index, committed_offset=-1 if value is None else value.offset,
            committed_leader_epoch=-1 if value is None else value.leader_epoch,
            metadata="" if value is None else value.metadata, error_code=E.NONE))
    return request.response(throttle_time_ms=0, topics=topics, error_code=E.NONE)
