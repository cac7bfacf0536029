"""FindCoordinator (key 10): this node coordinates every group; transaction coordinators are not served."""
from __future__ import annotations

from typing import TYPE_CHECKING

from kafka.protocol.metadata.find_coordinator import FindCoordinatorRequest, FindCoordinatorResponse

from ..protocol import Api, register
from . import _errors as E

API = register(Api(10, "FindCoordinator", FindCoordinatorRequest, FindCoordinatorResponse, min_version=0, max_version=3, first_flexible=3))

if TYPE_CHECKING:
    from kafka.protocol.api_message import ApiMessage

    from ._context import BrokerContext
    from ..protocol import Request


async def handle(broker: BrokerContext, request: Request, client_host: str) -> ApiMessage:
    body, v = request.body, request.version
    if v >= 1 and body.key_type != 0:
        return request.response(throttle_time_ms=0, error_code=E.TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
                                error_message="kbatch serve has no transaction coordinator",
                                node_id=-1, host="", port=-1)
    return request.response(throttle_time_ms=0, error_code=E.NONE, error_message=None, node_id=broker.node_id,
                            host=broker.host, port=broker.port)
