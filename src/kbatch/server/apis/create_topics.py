"""CreateTopics (key 19, v2-7, flexible from 5): new topics in a writable server, as a one-node
KRaft controller creates them (ReplicationControlManager.createTopic): empty partition directories
0..n-1, a topic id in each `partition.metadata`, the request's configs as the topic's own
(DescribeConfigs shows them as DYNAMIC_TOPIC_CONFIG; kept while the server runs).

Checked per topic, each with Kafka's error and message: a name used twice in the request
(INVALID_REQUEST), an illegal name or one colliding with an existing topic's once '.' and '_' are
the same (INVALID_TOPIC_EXCEPTION), an existing topic (TOPIC_ALREADY_EXISTS), a partition count
that is 0 or below -1 (INVALID_PARTITIONS), a replication factor other than 1 or -1: this node is
the only broker (INVALID_REPLICATION_FACTOR), a manual assignment with counts set
(INVALID_REQUEST) or naming another broker or a gap (INVALID_REPLICA_ASSIGNMENT), a config Kafka
does not know or a bad value (INVALID_CONFIG). validate_only runs the checks and creates nothing.
A read-only server answers TOPIC_AUTHORIZATION_FAILED, as it answers Produce."""
from __future__ import annotations

import re
import uuid
from collections import Counter
from typing import TYPE_CHECKING

from kafka.protocol.admin.topics import CreateTopicsRequest, CreateTopicsResponse

from ..group_coordinator import OFFSETS_TOPIC
from ..protocol import Api, register
from ...errors import KBatchError
from ...log.log_config import KAFKA_TOPIC_CONFIGS
from ...log.unified_log import LogConfig
from . import _errors as E
from .describe_configs import topic_configs

API = register(Api(19, "CreateTopics", CreateTopicsRequest, CreateTopicsResponse, min_version=2, max_version=7,
                   first_flexible=5))

if TYPE_CHECKING:
    from kafka.protocol.api_message import ApiMessage
    from kafka.protocol.data_container import DataContainer

    from ._context import BrokerContext
    from ..protocol import Request

TOPIC_ALREADY_EXISTS = 36
INVALID_PARTITIONS = 37
INVALID_REPLICATION_FACTOR = 38
INVALID_REPLICA_ASSIGNMENT = 39
INVALID_CONFIG = 40
_LEGAL = re.compile(r"^[a-zA-Z0-9._-]+$")
MAX_NAME_LENGTH = 249
READ_ONLY_MESSAGE = "kbatch serve is read-only: start it with --writable to create topics"


class _Refused(Exception):
    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code, self.message = code, message


def topic_name_problem(name: str) -> str | None:
    """Kafka's Topic.validate message for an illegal topic name, or None."""
    if not name:
        return "Topic name is illegal, it can't be empty"
    if name in (".", ".."):
        return "Topic name cannot be \".\" or \"..\""
    if len(name) > MAX_NAME_LENGTH:
        return (f"Topic name is illegal, it can't be longer than {MAX_NAME_LENGTH} characters, "
                f"topic name: {name}")
    if not _LEGAL.match(name):
        return (f"Topic name \"{name}\" is illegal, it contains a character other than ASCII "
                "alphanumerics, '.', '_' and '-'")
    return None


def _check(broker: BrokerContext, t: DataContainer) -> tuple[int, dict[str, str]]:
    """(partition count, configs) of a creatable topic, or _Refused."""
    problem = topic_name_problem(t.name)
    if problem:
        raise _Refused(E.INVALID_TOPIC_EXCEPTION, problem)
    known = broker.topics()
    if t.name in known or t.name == OFFSETS_TOPIC:
        raise _Refused(TOPIC_ALREADY_EXISTS, f"Topic '{t.name}' already exists.")
    folded = t.name.replace(".", "_")
    for other in known:
        if other.replace(".", "_") == folded:
            raise _Refused(E.INVALID_TOPIC_EXCEPTION, f"Topic '{t.name}' collides with existing topic: {other}")
    if t.assignments:
        if t.num_partitions != -1 or t.replication_factor != -1:
            raise _Refused(E.INVALID_REQUEST, "A manual partition assignment was specified, but numPartitions "
                                              "or replicationFactor was not set to -1.")
        indexes = sorted(a.partition_index for a in t.assignments)
        if indexes != list(range(len(indexes))):
            raise _Refused(INVALID_REPLICA_ASSIGNMENT, f"Partitions were not numbered consecutively from 0: "
                                                       f"{indexes}")
        for a in t.assignments:
            if list(a.broker_ids) != [broker.node_id]:
                raise _Refused(INVALID_REPLICA_ASSIGNMENT,
                               f"The manual partition assignment includes broker(s) {list(a.broker_ids)}, but "
                               f"only broker {broker.node_id} is registered: each partition gets exactly it.")
        partitions = len(indexes)
    else:
        if t.num_partitions == -1:
            partitions = broker.config.num_partitions
        elif t.num_partitions <= 0:
            raise _Refused(INVALID_PARTITIONS, "Number of partitions was set to an invalid non-positive value.")
        else:
            partitions = t.num_partitions
        rf = t.replication_factor
        if rf == 0 or rf < -1:
            raise _Refused(INVALID_REPLICATION_FACTOR,
                           "Replication factor must be larger than 0, or -1 to use the default value.")
        if rf > 1:
            raise _Refused(INVALID_REPLICATION_FACTOR,
                           f"Unable to replicate the partition {rf} time(s): The target replication factor of "
                           f"{rf} cannot be reached because only 1 broker(s) are registered.")
    configs: dict[str, str] = {}
    for c in t.configs:
        if c.name not in KAFKA_TOPIC_CONFIGS:
            raise _Refused(INVALID_CONFIG, f"Unknown topic config name: {c.name}")
        if c.name in configs:
            raise _Refused(E.INVALID_REQUEST, f"Duplicate config key {c.name}")
        if c.value is None:
            raise _Refused(INVALID_CONFIG, f"Null value not supported for topic configs: {c.name}")
        configs[c.name] = c.value
    try:
        LogConfig.from_properties({**broker.config.topic_config, **configs})
    except KBatchError as e:
        raise _Refused(INVALID_CONFIG, str(e).splitlines()[0]) from None
    return partitions, configs


async def handle(broker: BrokerContext, request: Request, client_host: str) -> ApiMessage:
    body, v = request.body, request.version
    R = request.api.response.CreatableTopicResult
    counts = Counter(t.name for t in body.topics)
    dupes = {name for name, n in counts.items() if n > 1}
    results: list[DataContainer] = []
    for t in body.topics:
        if t.name in dupes:
            if any(r.name == t.name for r in results):
                continue  # Kafka answers a name named twice once
            results.append(R(name=t.name, error_code=E.INVALID_REQUEST, error_message="Duplicate topic name.",
                             topic_config_error_code=0, num_partitions=-1, replication_factor=-1, configs=None))
            continue
        try:
            if broker.read_only:
                raise _Refused(E.TOPIC_AUTHORIZATION_FAILED, READ_ONLY_MESSAGE)
            partitions, configs = _check(broker, t)
            if body.validate_only:
                topic_id, described = uuid.UUID(int=0), None
            else:
                topic_id = await broker.create_new_topic(t.name, partitions, configs)
                described = [R.CreatableTopicConfigs(name=e.name, value=e.value, read_only=e.read_only,
                                                     config_source=e.source, is_sensitive=False)
                             for e in topic_configs(broker, t.name)]
        except _Refused as r:
            results.append(R(name=t.name, error_code=r.code, error_message=r.message, topic_config_error_code=0,
                             num_partitions=-1, replication_factor=-1, configs=None))
            continue
        except FileExistsError:  # created by another request meanwhile
            results.append(R(name=t.name, error_code=TOPIC_ALREADY_EXISTS,
                             error_message=f"Topic '{t.name}' already exists.", topic_config_error_code=0,
                             num_partitions=-1, replication_factor=-1, configs=None))
            continue
        results.append(R(name=t.name, topic_id=topic_id, error_code=E.NONE, error_message=None,
                         topic_config_error_code=0, num_partitions=partitions, replication_factor=1,
                         configs=described if v >= 5 else None))
    return request.response(throttle_time_ms=0, topics=results)
