"""JoinGroup (key 11): the GroupCoordinator's join phase; v4+ asks an unknown member to rejoin with
the member id it is given (MEMBER_ID_REQUIRED)."""
from __future__ import annotations

from typing import TYPE_CHECKING

from kafka.protocol.consumer.group import JoinGroupRequest, JoinGroupResponse

from ..protocol import Api, register

API = register(Api(11, "JoinGroup", JoinGroupRequest, JoinGroupResponse, min_version=0, max_version=5, first_flexible=6))

if TYPE_CHECKING:
    from kafka.protocol.api_message import ApiMessage

    from ._context import BrokerContext
    from ..protocol import Request


async def handle(broker: BrokerContext, request: Request, client_host: str) -> ApiMessage:
    body, v = request.body, request.version
    cls = request.api.response
    res = await broker.coordinator.join_group(
        group_id=body.group_id, member_id=body.member_id or "",
        group_instance_id=body.group_instance_id if v >= 5 else None, client_id=request.client_id or "",
        client_host="/" + client_host, session_timeout=body.session_timeout_ms,
        rebalance_timeout=body.rebalance_timeout_ms if v >= 1 else -1, protocol_type=body.protocol_type,
        protocols=[(p.name, bytes(p.metadata)) for p in body.protocols], require_known_member_id=v >= 4)
    members = [cls.JoinGroupResponseMember(member_id=m, group_instance_id=i, metadata=meta)
               for m, i, meta in res.get("members", [])]
    return request.response(throttle_time_ms=0, error_code=res["error_code"],
                            generation_id=res.get("generation_id", -1), protocol_type=res.get("protocol_type"),
                            protocol_name=res.get("protocol_name") or ("" if v < 7 else None),
                            leader=res.get("leader") or "", member_id=res.get("member_id") or "", members=members)
