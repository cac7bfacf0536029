"""SyncGroup (key 14): the leader's assignment is relayed to every member."""
from __future__ import annotations

from typing import TYPE_CHECKING

from kafka.protocol.consumer.group import SyncGroupRequest, SyncGroupResponse

from ..protocol import Api, register

API = register(Api(14, "SyncGroup", SyncGroupRequest, SyncGroupResponse, min_version=0, max_version=3, first_flexible=4))

if TYPE_CHECKING:
    from kafka.protocol.api_message import ApiMessage

    from ._context import BrokerContext
    from ..protocol import Request


async def handle(broker: BrokerContext, request: Request, client_host: str) -> ApiMessage:
    body, v = request.body, request.version
    res = await broker.coordinator.sync_group(
        group_id=body.group_id, generation_id=body.generation_id, member_id=body.member_id,
        protocol_type=body.protocol_type if v >= 5 else None, protocol_name=body.protocol_name if v >= 5 else None,
        assignments=[(a.member_id, bytes(a.assignment)) for a in body.assignments],
        group_instance_id=body.group_instance_id if v >= 3 else None)
    return request.response(throttle_time_ms=0, error_code=res["error_code"], assignment=res.get("assignment", b""))
