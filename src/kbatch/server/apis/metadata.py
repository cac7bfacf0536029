"""Metadata (key 3): this node as the only broker, leader of every partition; topics from the
served directory, created on request when auto-creation is on (auto.create.topics.enable)."""
from __future__ import annotations

import uuid
from typing import TYPE_CHECKING

from kafka.protocol.metadata.metadata import MetadataRequest, MetadataResponse

from ..protocol import Api, register, take_turns
from ..group_coordinator import OFFSETS_TOPIC
from .create_topics import topic_name_problem

API = register(Api(3, "Metadata", MetadataRequest, MetadataResponse, min_version=0, max_version=12, first_flexible=9))

if TYPE_CHECKING:
    from kafka.protocol.api_message import ApiMessage
    from kafka.protocol.data_container import DataContainer

    from ._context import BrokerContext
    from ..protocol import Request


UNKNOWN_TOPIC_OR_PARTITION = 3
INVALID_TOPIC_EXCEPTION = 17
NO_AUTHORIZED_OPERATIONS = None  # encodes as Integer.MIN_VALUE: "not requested"


async def handle(broker: BrokerContext, request: Request, client_host: str) -> ApiMessage:
    body, v = request.body, request.version
    cls = request.api.response
    known = broker.topics()
    names: list[str]
    if body.topics is None or (v == 0 and not body.topics):
        names = list(known)
    else:
        by_id = {broker.topic_id(t): t for t in known}
        names = []
        for i, t in enumerate(body.topics):
            await take_turns(i)
            name = t.name
            if name is None and v >= 10:
                name = by_id.get(t.topic_id)
            if name is not None:
                names.append(name)
    allow_create = v < 4 or body.allow_auto_topic_creation
    topics: list[DataContainer] = []
    for i, name in enumerate(names):
        await take_turns(i)
        if name not in known and allow_create and name != OFFSETS_TOPIC and await broker.create_topic(name):
            known = broker.topics()
        if name not in known:
            # an illegal name is INVALID_TOPIC_EXCEPTION, created or not (KafkaApis: Topic.validate)
            err = INVALID_TOPIC_EXCEPTION if topic_name_problem(name) else UNKNOWN_TOPIC_OR_PARTITION
            topics.append(_topic(cls, err, name, uuid.UUID(int=0), False, []))
            continue
        parts: list[DataContainer] = []
        for index in known[name]:
            p = broker.partition(name, index)
            assert p is not None  # one of broker.topics()
            parts.append(cls.MetadataResponseTopic.MetadataResponsePartition(
                error_code=0, partition_index=index, leader_id=broker.node_id, leader_epoch=p.leader_epoch,
                replica_nodes=[broker.node_id], isr_nodes=[broker.node_id], offline_replicas=[]))
        topics.append(_topic(cls, 0, name, broker.topic_id(name), name == OFFSETS_TOPIC, parts))
    brokers = [cls.MetadataResponseBroker(node_id=broker.node_id, host=broker.host, port=broker.port, rack=None)]
    return request.response(throttle_time_ms=0, brokers=brokers, cluster_id=broker.cluster_id,
                            controller_id=broker.node_id, topics=topics,
                            authorized_operations=NO_AUTHORIZED_OPERATIONS)


def _topic(cls: type[ApiMessage], error: int, name: str, topic_id: uuid.UUID, internal: bool,
           partitions: list[DataContainer]) -> DataContainer:
    return cls.MetadataResponseTopic(error_code=error, name=name, topic_id=topic_id, is_internal=internal,
                                     partitions=partitions, authorized_operations=NO_AUTHORIZED_OPERATIONS)
