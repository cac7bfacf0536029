"""OffsetCommit (key 8): offsets are appended to `__consumer_offsets` before the answer."""
from __future__ import annotations

from typing import TYPE_CHECKING

from kafka.protocol.consumer.group import OffsetCommitRequest, OffsetCommitResponse

from ..protocol import Api, register

API = register(Api(8, "OffsetCommit", OffsetCommitRequest, OffsetCommitResponse, min_version=2, max_version=8, first_flexible=8))

if TYPE_CHECKING:
    from kafka.protocol.api_message import ApiMessage

    from ._context import BrokerContext
    from ..protocol import Request


async def handle(broker: BrokerContext, request: Request, client_host: str) -> ApiMessage:
    body, v = request.body, request.version
    cls = request.api.response
    offsets = {}
    for t in body.topics:
        for p in t.partitions:
            offsets[(t.name, p.partition_index)] = (p.committed_offset, p.committed_leader_epoch if v >= 6 else -1,
                                                    p.committed_metadata)
    errors = await broker.coordinator.commit_offsets(group_id=body.group_id,
                                                     generation_id=body.generation_id_or_member_epoch,
                                                     member_id=body.member_id, offsets=offsets)
    topics = []
    for t in body.topics:
        T = cls.OffsetCommitResponseTopic
        topics.append(T(name=t.name, partitions=[T.OffsetCommitResponsePartition(
            partition_index=p.partition_index, error_code=errors[(t.name, p.partition_index)]) for p in t.partitions]))
    return request.response(throttle_time_ms=0, topics=topics)
