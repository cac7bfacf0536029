"""DescribeCluster (key 60, v0-2, flexible from 0): the cluster id and this node, its only broker and
its controller, as the Admin client's describeCluster asks (KIP-700). Endpoint type 2 (controllers,
asked of a KRaft controller) gets UNSUPPORTED_ENDPOINT_TYPE, as a broker answers it."""
from __future__ import annotations

from typing import TYPE_CHECKING

from kafka.protocol.admin.cluster import DescribeClusterRequest, DescribeClusterResponse

from ..protocol import Api, register
from . import _errors as E

API = register(Api(60, "DescribeCluster", DescribeClusterRequest, DescribeClusterResponse, min_version=0,
                   max_version=2, first_flexible=0))

if TYPE_CHECKING:
    from kafka.protocol.api_message import ApiMessage

    from ._context import BrokerContext
    from ..protocol import Request

BROKERS_ENDPOINT = 1
UNSUPPORTED_ENDPOINT_TYPE = 119
NO_AUTHORIZED_OPERATIONS = None  # encodes as Integer.MIN_VALUE: not asked for (kafka-python's bitfield)


async def handle(broker: BrokerContext, request: Request, client_host: str) -> ApiMessage:
    body, v = request.body, request.version
    if v >= 1 and body.endpoint_type != BROKERS_ENDPOINT:
        return request.response(throttle_time_ms=0, error_code=UNSUPPORTED_ENDPOINT_TYPE,
                                error_message="The broker does not support ENDPOINT_TYPE_CONTROLLER",
                                endpoint_type=body.endpoint_type, cluster_id="", controller_id=-1, brokers=[],
                                authorized_operations=NO_AUTHORIZED_OPERATIONS)
    B = request.api.response.DescribeClusterBroker
    brokers = [B(broker_id=broker.node_id, host=broker.host, port=broker.port, rack=None, is_fenced=False)]
    return request.response(throttle_time_ms=0, error_code=E.NONE, error_message=None,
                            endpoint_type=BROKERS_ENDPOINT, cluster_id=broker.cluster_id,
                            controller_id=broker.node_id, brokers=brokers,
                            authorized_operations=NO_AUTHORIZED_OPERATIONS)
