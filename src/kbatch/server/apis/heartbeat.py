"""Heartbeat (key 12): keeps a member's session; REBALANCE_IN_PROGRESS tells it to rejoin."""
from __future__ import annotations

from typing import TYPE_CHECKING

from kafka.protocol.consumer.group import HeartbeatRequest, HeartbeatResponse

from ..protocol import Api, register

API = register(Api(12, "Heartbeat", HeartbeatRequest, HeartbeatResponse, min_version=0, max_version=3, first_flexible=4))

if TYPE_CHECKING:
    from kafka.protocol.api_message import ApiMessage

    from ._context import BrokerContext
    from ..protocol import Request


async def handle(broker: BrokerContext, request: Request, client_host: str) -> ApiMessage:
    body, v = request.body, request.version
    err = broker.coordinator.heartbeat(group_id=body.group_id, generation_id=body.generation_id,
                                       member_id=body.member_id,
                                       group_instance_id=body.group_instance_id if v >= 3 else None)
    return request.response(throttle_time_ms=0, error_code=err)
