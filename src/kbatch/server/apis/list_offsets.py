"""ListOffsets (key 2): KIP-79 lookups exactly as `Log.offset_for` (first record with timestamp >=
target, from the log start), -2 EARLIEST, -1 LATEST (the high watermark, or the last stable offset
for read_committed), -3 MAX_TIMESTAMP (v7+), -4 EARLIEST_LOCAL (v8+, KIP-405: with no tiered
storage the local log starts at the log start, so EARLIEST's answer), -5 LATEST_TIERED (v9+: nothing
is tiered, so offset -1 with epoch -1, as a broker without remote storage answers); v10's timeout
is for remote reads and has nothing to wait for. Any other negative target, or a special one on too
old a version, gets UNSUPPORTED_VERSION; a partition named twice gets INVALID_REQUEST (KafkaApis)."""
from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

from kafka.protocol.consumer.offsets import ListOffsetsRequest, ListOffsetsResponse

from ..protocol import Api, register, take_turns
from ... import _wire as W
from ...errors import KBatchError
from . import _errors as E

API = register(Api(2, "ListOffsets", ListOffsetsRequest, ListOffsetsResponse, min_version=1, max_version=10, first_flexible=6))

if TYPE_CHECKING:
    from kafka.protocol.api_message import ApiMessage

    from kafka.protocol.data_container import DataContainer

    from ...log.unified_log import OffsetAndTimestamp
    from ._context import BrokerContext
    from ..partition import Partition
    from ..protocol import Request


EARLIEST_LOCAL, LATEST_TIERED = -4, -5
_SPECS = {-1: W.OffsetSpec.LATEST, -2: W.OffsetSpec.EARLIEST, -3: W.OffsetSpec.MAX_TIMESTAMP,
          EARLIEST_LOCAL: W.OffsetSpec.EARLIEST}
_MIN_VERSION = {-1: 1, -2: 1, -3: 7, EARLIEST_LOCAL: 8, LATEST_TIERED: 9}


async def handle(broker: BrokerContext, request: Request, client_host: str) -> ApiMessage:
    body, v = request.body, request.version
    cls = request.api.response
    P = cls.ListOffsetsTopicResponse.ListOffsetsPartitionResponse
    read_committed = v >= 2 and body.isolation_level == 1
    seen: set[tuple[str, int]] = set()
    dupes: set[tuple[str, int]] = set()
    for t in body.topics:
        for p in t.partitions:
            tp = (t.name, p.partition_index)
            (dupes if tp in seen else seen).add(tp)
    topics: list[DataContainer] = []
    done = 0
    for t in body.topics:
        parts: list[DataContainer] = []
        for p in t.partitions:
            await take_turns(done)  # a request naming many partitions leaves room for other connections
            done += 1
            err, ts, off, epoch = await _lookup(broker, t.name, p, v, read_committed, (t.name, p.partition_index) in dupes)
            parts.append(P(partition_index=p.partition_index, error_code=err, timestamp=ts, offset=off, leader_epoch=epoch))
        topics.append(cls.ListOffsetsTopicResponse(name=t.name, partitions=parts))
    return request.response(throttle_time_ms=0, topics=topics)


class _MagicV0:
    """_search's answer for a magic 0 log: it has no timestamps (error 43, as Kafka)."""


_MAGIC_V0 = _MagicV0()


def _search(part: Partition, t: int) -> OffsetAndTimestamp | _MagicV0 | None:
    """Off the event loop: the lookup (index search and header scans in nogil kernels)."""
    if t >= 0 and part.magic() == W.MAGIC_VALUE_V0:  # magic 0 has no timestamps (error 43, as Kafka)
        return _MAGIC_V0
    return part.offset_for(_SPECS.get(t, t))


async def _lookup(broker: BrokerContext, topic: str, p: DataContainer, version: int, read_committed: bool,
                  duplicate: bool) -> tuple[int, int, int, int]:
    if duplicate:
        return E.INVALID_REQUEST, -1, -1, -1
    part = broker.partition(topic, p.partition_index)
    if part is None:
        return E.UNKNOWN_TOPIC_OR_PARTITION, -1, -1, -1
    if version >= 4:
        err = E.check_leader_epoch(p.current_leader_epoch, part.leader_epoch)
        if err:
            return err, -1, -1, -1
    t = p.timestamp
    if t < 0 and (t not in _MIN_VERSION or version < _MIN_VERSION[t]):
        return E.UNSUPPORTED_VERSION, -1, -1, -1
    if t == LATEST_TIERED:
        return E.NONE, -1, -1, -1
    if read_committed:
        await part.ensure_transaction_state()
    fetchable = part.last_stable_offset if read_committed else part.high_watermark
    if t == -1:
        return E.NONE, -1, fetchable, part.leader_epoch
    try:
        hit = await asyncio.to_thread(_search, part, t)
    except KBatchError as e:
        return E.code_of(e, f"ListOffsets on {part.name}"), -1, -1, -1
    if isinstance(hit, _MagicV0):
        return E.UNSUPPORTED_FOR_MESSAGE_FORMAT, -1, -1, -1
    if hit is None or (t not in (-2, EARLIEST_LOCAL) and hit.offset >= fetchable):
        return E.NONE, -1, -1, -1
    ts = -1 if hit.timestamp is None else hit.timestamp
    return E.NONE, ts, hit.offset, -1 if hit.leader_epoch is None else hit.leader_epoch
