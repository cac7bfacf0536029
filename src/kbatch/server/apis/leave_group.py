"""LeaveGroup (key 13): v0-2 name one member; v3+ a list of members, answered one by one."""
from __future__ import annotations

from typing import TYPE_CHECKING

from kafka.protocol.consumer.group import LeaveGroupRequest, LeaveGroupResponse

from ..protocol import Api, register

API = register(Api(13, "LeaveGroup", LeaveGroupRequest, LeaveGroupResponse, min_version=0, max_version=2, first_flexible=4))

if TYPE_CHECKING:
    from kafka.protocol.api_message import ApiMessage

    from ._context import BrokerContext
    from ..protocol import Request


async def handle(broker: BrokerContext, request: Request, client_host: str) -> ApiMessage:
    body, v = request.body, request.version
    cls = request.api.response
    ids = [m.member_id for m in body.members] if v >= 3 else [body.member_id]
    results = broker.coordinator.leave_group(body.group_id, ids)
    if v >= 3:
        members = [cls.MemberResponse(member_id=m, group_instance_id=None, error_code=e) for m, e in results]
        return request.response(throttle_time_ms=0, error_code=0, members=members)
    return request.response(throttle_time_ms=0, error_code=results[0][1])
