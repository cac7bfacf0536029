"""OffsetForLeaderEpoch (key 23, v2-4, flexible from 4): the end offset of a leader epoch, which the
Java consumer asks to validate its position after a metadata update (KIP-320): the largest epoch
<= the one asked for and the start offset of the next epoch, or the log end offset for the latest
(`Log.end_offset_for_epoch`, the partition's LeaderEpochFileCache). The client's current leader
epoch is checked as Fetch checks it (FENCED_LEADER_EPOCH / UNKNOWN_LEADER_EPOCH). A log whose
batches carry no epoch has an empty cache: this node has led it since its start at the epoch
Metadata announces, so that epoch ends at the log end offset, as a broker that assigned it would
answer (as if its cache held that epoch from offset 0); any other epoch is undefined (-1, -1)."""
from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

from kafka.protocol.consumer.offsets import OffsetForLeaderEpochRequest, OffsetForLeaderEpochResponse

from ..protocol import Api, register
from ...errors import KBatchError
from . import _errors as E

API = register(Api(23, "OffsetForLeaderEpoch", OffsetForLeaderEpochRequest, OffsetForLeaderEpochResponse,
                   min_version=2, max_version=4, first_flexible=4))

if TYPE_CHECKING:
    from kafka.protocol.api_message import ApiMessage
    from kafka.protocol.data_container import DataContainer

    from ._context import BrokerContext
    from ..partition import Partition
    from ..protocol import Request

UNDEFINED = -1


async def handle(broker: BrokerContext, request: Request, client_host: str) -> ApiMessage:
    cls = request.api.response
    T = cls.OffsetForLeaderTopicResult
    topics: list[DataContainer] = []
    for t in request.body.topics:
        parts = []
        for p in t.partitions:
            err, epoch, end = await _end_offset(broker.partition(t.topic, p.partition), p)
            parts.append(T.EpochEndOffset(error_code=err, partition=p.partition, leader_epoch=epoch, end_offset=end))
        topics.append(T(topic=t.topic, partitions=parts))
    return request.response(throttle_time_ms=0, topics=topics)


async def _end_offset(part: Partition | None, p: DataContainer) -> tuple[int, int, int]:
    if part is None:
        return E.UNKNOWN_TOPIC_OR_PARTITION, UNDEFINED, UNDEFINED
    err = E.check_leader_epoch(p.current_leader_epoch, part.leader_epoch)
    if err:
        return err, UNDEFINED, UNDEFINED
    try:
        found = await asyncio.to_thread(_lookup, part, p.leader_epoch)
    except KBatchError as e:
        return E.code_of(e, f"OffsetForLeaderEpoch on {part.name}"), UNDEFINED, UNDEFINED
    return (E.NONE, UNDEFINED, UNDEFINED) if found is None else (E.NONE, found[0], found[1])


def _lookup(part: Partition, epoch: int) -> tuple[int, int] | None:
    """Off the event loop: the epoch cache may be built from every batch header on first use."""
    if epoch < 0:
        return None
    found = part.log.end_offset_for_epoch(epoch)
    if found is None and part.log.leader_epoch_cache.latest_epoch() is None and epoch == part.leader_epoch:
        return part.leader_epoch, part.high_watermark
    if found is not None and found[0] == part.leader_epoch:  # the latest epoch ends at what is served
        return found[0], min(found[1], part.high_watermark)
    return found
