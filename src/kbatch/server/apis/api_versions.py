"""ApiVersions (key 18): the advertised table (protocol.APIS). A v3+ request must name the client
software validly (ApiVersionsRequest.isValid), else INVALID_REQUEST, as Kafka answers."""
from __future__ import annotations

import re
from typing import TYPE_CHECKING

from kafka.protocol.metadata.api_versions import ApiVersionsRequest, ApiVersionsResponse

from ..protocol import Api, APIS, register

API = register(Api(18, "ApiVersions", ApiVersionsRequest, ApiVersionsResponse, min_version=0, max_version=4, first_flexible=3))

if TYPE_CHECKING:
    from kafka.protocol.api_message import ApiMessage

    from ._context import BrokerContext
    from ..protocol import Request


_SOFTWARE = re.compile(r"^[a-zA-Z0-9](?:[a-zA-Z0-9\-.]*[a-zA-Z0-9])?$")
INVALID_REQUEST = 42


async def handle(broker: BrokerContext, request: Request, client_host: str) -> ApiMessage:
    body = request.body
    if request.version >= 3 and not (_SOFTWARE.match(body.client_software_name or "")
                                     and _SOFTWARE.match(body.client_software_version or "")):
        return request.response(error_code=INVALID_REQUEST, api_keys=[], throttle_time_ms=0)
    cls = request.api.response
    keys = [cls.ApiVersion(api_key=a.key, min_version=a.min_version, max_version=a.max_version)
            for a in sorted(APIS.values(), key=lambda a: a.key)]
    return request.response(error_code=0, api_keys=keys, throttle_time_ms=0)
