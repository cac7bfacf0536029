"""CreatePartitions (key 37, v0-3, flexible from 2): a topic of a writable server grows to `count`
partitions, the new ones empty, carrying the topic's id (Broker.add_partitions). Kafka's checks and
messages: an unknown topic (UNKNOWN_TOPIC_OR_PARTITION), a count not above the current one
(INVALID_PARTITIONS), assignments that are not one per new partition or name another broker than
this one (INVALID_REPLICA_ASSIGNMENT), a topic named twice (INVALID_REQUEST); `__consumer_offsets`
keeps its partitions (the group coordinator's partition for a group is fixed by their count).
validate_only checks and changes nothing; a read-only server answers TOPIC_AUTHORIZATION_FAILED."""
from __future__ import annotations

from collections import Counter
from typing import TYPE_CHECKING

from kafka.protocol.admin.topics import CreatePartitionsRequest, CreatePartitionsResponse

from ..group_coordinator import OFFSETS_TOPIC
from ..protocol import Api, register
from . import _errors as E

API = register(Api(37, "CreatePartitions", CreatePartitionsRequest, CreatePartitionsResponse, min_version=0,
                   max_version=3, first_flexible=2))

if TYPE_CHECKING:
    from kafka.protocol.api_message import ApiMessage
    from kafka.protocol.data_container import DataContainer

    from ._context import BrokerContext
    from ..protocol import Request

INVALID_PARTITIONS = 37
INVALID_REPLICA_ASSIGNMENT = 39
READ_ONLY_MESSAGE = "kbatch serve is read-only: start it with --writable to create partitions"


def _problem(broker: BrokerContext, t: DataContainer) -> tuple[int, str] | None:
    known = broker.topics()
    if t.name not in known:
        return E.UNKNOWN_TOPIC_OR_PARTITION, f"The topic '{t.name}' does not exist."
    if t.name == OFFSETS_TOPIC:
        return E.INVALID_REQUEST, f"The partitions of the internal topic {OFFSETS_TOPIC} cannot be changed."
    have = len(known[t.name])
    if t.count < have:
        return INVALID_PARTITIONS, f"Topic currently has {have} partitions, which is higher than the requested {t.count}."
    if t.count == have:
        return INVALID_PARTITIONS, f"Topic already has {have} partitions."
    if t.assignments is not None:
        if len(t.assignments) != t.count - have:
            return INVALID_REPLICA_ASSIGNMENT, (f"Attempted to add {t.count - have} additional partition(s), but only "
                                                f"{len(t.assignments)} assignment(s) were specified.")
        for a in t.assignments:
            if list(a.broker_ids) != [broker.node_id]:
                return INVALID_REPLICA_ASSIGNMENT, (f"The manual partition assignment includes broker(s) "
                                                    f"{list(a.broker_ids)}, but only broker {broker.node_id} is "
                                                    f"registered: each partition gets exactly it.")
    return None


async def handle(broker: BrokerContext, request: Request, client_host: str) -> ApiMessage:
    body = request.body
    R = request.api.response.CreatePartitionsTopicResult
    counts = Counter(t.name for t in body.topics)
    results: list[DataContainer] = []
    answered: set[str] = set()
    for t in body.topics:
        if t.name in answered:
            continue
        answered.add(t.name)
        if counts[t.name] > 1:
            problem: tuple[int, str] | None = (E.INVALID_REQUEST, "Duplicate topic name.")
        elif broker.read_only:
            problem = (E.TOPIC_AUTHORIZATION_FAILED, READ_ONLY_MESSAGE)
        else:
            problem = _problem(broker, t)
        if problem is None and not body.validate_only:
            await broker.add_partitions(t.name, t.count)
        code, message = problem if problem is not None else (E.NONE, None)
        results.append(R(name=t.name, error_code=code, error_message=message))
    return request.response(throttle_time_ms=0, results=results)
