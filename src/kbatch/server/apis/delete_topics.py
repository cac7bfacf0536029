"""DeleteTopics (key 20, v1-6, flexible from 4): topics deleted from a writable server, by name
(v0-5 `topic_names`, v6 `topics[].name`) or by topic id (v6): gone from Metadata, Fetch and
ListOffsets at once, their directories renamed `<topic>-<p>.<id>-delete` and removed when answers
in flight are done (Broker.delete_topic). An unknown name gets UNKNOWN_TOPIC_OR_PARTITION, an
unknown id UNKNOWN_TOPIC_ID, a name or id named twice INVALID_REQUEST, the group coordinator's
`__consumer_offsets` INVALID_REQUEST (Kafka refuses deleting internal topics from clients); a
read-only server answers TOPIC_AUTHORIZATION_FAILED, as it answers Produce."""
from __future__ import annotations

import uuid
from collections import Counter
from typing import TYPE_CHECKING

from kafka.protocol.admin.topics import DeleteTopicsRequest, DeleteTopicsResponse

from ..group_coordinator import OFFSETS_TOPIC
from ..protocol import Api, register
from . import _errors as E

API = register(Api(20, "DeleteTopics", DeleteTopicsRequest, DeleteTopicsResponse, min_version=1, max_version=6,
                   first_flexible=4))

if TYPE_CHECKING:
    from kafka.protocol.api_message import ApiMessage
    from kafka.protocol.data_container import DataContainer

    from ._context import BrokerContext
    from ..protocol import Request

UNKNOWN_TOPIC_ID = 100
ZERO = uuid.UUID(int=0)
READ_ONLY_MESSAGE = "kbatch serve is read-only: start it with --writable to delete topics"


async def handle(broker: BrokerContext, request: Request, client_host: str) -> ApiMessage:
    body, v = request.body, request.version
    R = request.api.response.DeletableTopicResult
    # (name, topic id) as asked: v6 names either, older versions names only
    asked: list[tuple[str | None, uuid.UUID]] = (
        [(t.name, t.topic_id or ZERO) for t in body.topics] if v >= 6 else [(n, ZERO) for n in body.topic_names])
    counts = Counter(name if name is not None else tid for name, tid in asked)
    results: list[DataContainer] = []
    answered: set[object] = set()
    for name, tid in asked:
        key = name if name is not None else tid
        if key in answered:
            continue
        answered.add(key)
        if counts[key] > 1:
            what = "name" if name is not None else "id"
            results.append(R(name=name, topic_id=tid, error_code=E.INVALID_REQUEST,
                             error_message=f"Duplicate topic {what}."))
            continue
        if name is None:
            name = next((t for t in broker.topics() if broker.topic_id(t) == tid and tid != ZERO), None)
            if name is None:
                results.append(R(name=None, topic_id=tid, error_code=UNKNOWN_TOPIC_ID,
                                 error_message="This server does not host this topic ID."))
                continue
        if broker.read_only:
            code, message = E.TOPIC_AUTHORIZATION_FAILED, READ_ONLY_MESSAGE
        elif name == OFFSETS_TOPIC:
            code, message = E.INVALID_REQUEST, f"Cannot delete internal topic {OFFSETS_TOPIC}"
        elif name not in broker.topics():
            code, message = E.UNKNOWN_TOPIC_OR_PARTITION, "This server does not host this topic-partition."
        else:
            tid = broker.topic_id(name)
            await broker.delete_topic(name)
            code, message = E.NONE, None
        results.append(R(name=name, topic_id=tid, error_code=code, error_message=message))
    return request.response(throttle_time_ms=0, responses=results)
