"""Heartbeat (key 12): keeps a member's session; REBALANCE_IN_PROGRESS tells it to rejoin."""


async def handle(broker, request, client_host):
    body = request.body
    err = broker.coordinator.heartbeat(group_id=body.group_id, generation_id=body.generation_id,
                                       member_id=body.member_id)
    return request.response(throttle_time_ms=0, error_code=err)
