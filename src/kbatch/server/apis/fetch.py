"""Fetch (key 1): record bytes straight from segment files (Partition.read gives FileSlices; the
connection sends them with os.sendfile), KIP-74 limits (max_bytes over the response,
partition_max_bytes per partition, the first batch whole even when larger), long polling
(max_wait_ms until min_bytes are there or an append wakes us), isolation levels (read_committed
stops at the last stable offset and lists the aborted transactions overlapping what it sends, both
from kbatch.log.fetch, the read path every reader takes: `.txnindex`, else the log's markers).

Fetch sessions (KIP-227, v7+) as Kafka keeps them (server/fetch_session.py): a full request with
epoch 0 opens a session, incremental requests update it and are answered with the partitions that
have something new; epoch -1 closes one; an unknown id gets FETCH_SESSION_ID_NOT_FOUND and a wrong
epoch INVALID_FETCH_SESSION_EPOCH.
"""
from __future__ import annotations

import asyncio
import time
from collections import OrderedDict
from typing import TYPE_CHECKING, Any

from kafka.protocol.consumer.fetch import FetchRequest, FetchResponse

from ..fetch_session import FINAL_EPOCH, INITIAL_EPOCH, INVALID_SESSION_ID, CachedPartition, FetchSession
from ..protocol import Api, register, take_turns
from . import _errors as E

API = register(Api(1, "Fetch", FetchRequest, FetchResponse, min_version=4, max_version=12, first_flexible=12))

if TYPE_CHECKING:
    from kafka.protocol.api_message import ApiMessage

    from kafka.protocol.data_container import DataContainer

    from ._context import BrokerContext as Broker
    from ..partition import Partition, ReadResult
    from ..protocol import Request, Slices

    #: one partition's outcome: (topic, partition, error code, the partition when served, what was read)
    _Result = tuple[str, int, int, Partition | None, ReadResult | None]


async def handle(broker: Broker, request: Request, client_host: str) -> ApiMessage | tuple[ApiMessage, Slices]:
    body, v = request.body, request.version
    read_committed = body.isolation_level == 1
    # one entry per partition, where it was first named, with what it was last asked (Kafka keys a
    # LinkedHashMap by partition), so naming a partition twice never doubles the answer
    by_partition = {(t.topic, p.partition): (t.topic, p) for t in body.topics for p in t.partitions}
    wanted: list[tuple[str, Any]] = list(by_partition.values())
    # fetch.max.bytes caps what a client asks for (KafkaApis.handleFetchRequest)
    max_bytes = min(body.max_bytes, broker.config.fetch_max_bytes)
    session: FetchSession | None = None
    open_session = False
    if v >= 7:
        cache = broker.fetch_sessions
        if body.session_epoch in (INITIAL_EPOCH, FINAL_EPOCH):  # a full request (FetchManager.newContext)
            if body.session_id != INVALID_SESSION_ID:
                cache.remove(body.session_id)
            open_session = body.session_epoch == INITIAL_EPOCH
        else:
            session = cache.get(body.session_id)
            if session is None:
                return request.response(throttle_time_ms=0, error_code=E.FETCH_SESSION_ID_NOT_FOUND, session_id=0,
                                        responses=[])
            if body.session_epoch != session.epoch:
                return request.response(throttle_time_ms=0, error_code=E.INVALID_FETCH_SESSION_EPOCH, session_id=0,
                                        responses=[])
            session.apply(body.topics, body.forgotten_topics_data)
            session.epoch = 1 if session.epoch == 2 ** 31 - 1 else session.epoch + 1
            wanted = [(tp[0], cp) for tp, cp in session.partitions.items()]
    for i, (topic, p) in enumerate(wanted):  # the last stable offset (in every answer) needs the open transactions
        await take_turns(i)
        part = broker.partition(topic, p.partition)
        if part is not None:
            await part.ensure_transaction_state()
    deadline = time.monotonic() + max(0, body.max_wait_ms) / 1000.0
    while True:
        results, total, errors = await _read_all(broker, wanted, max_bytes, v, read_committed)
        remaining = deadline - time.monotonic()
        # no partitions (the Java consumer closing its session): answered at once, as ReplicaManager.fetchMessages
        if total >= body.min_bytes or errors or remaining <= 0 or broker.closing or not wanted:
            break
        waiters = [p.waiter() for p in {broker.partition(t, q.partition) for t, q in wanted} if p is not None]
        waiters.append(broker.closing_waiter())
        done, pending = await asyncio.wait(waiters, timeout=remaining, return_when=asyncio.FIRST_COMPLETED)
        for f in pending:
            f.cancel()
        if not done:
            results, total, errors = await _read_all(broker, wanted, max_bytes, v, read_committed)
            break
    session_id = INVALID_SESSION_ID
    if open_session:
        created = broker.fetch_sessions.create(OrderedDict(((t, p.partition), CachedPartition(p)) for t, p in wanted))
        if created is not None:
            _changed(created, results)  # remember what this full answer tells the client
            session_id = created.id
    elif session is not None:
        session_id = session.id
        results = _changed(session, results)
        session.rotate((t, i) for t, i, _e, _p, rr in results if rr is not None and rr.records is not None
                       and rr.records.size > 0)
    return _response(request, results, session_id)


def _changed(session: FetchSession, results: list[_Result]) -> list[_Result]:
    """The results an incremental answer carries (what changed since the session's last answer)."""
    out = []
    for r in results:
        topic, index, err, part, rr = r
        cached = session.partitions.get((topic, index))
        has_records = rr is not None and rr.records is not None and rr.records.size > 0
        if part is None:
            hw = lso = start = -1
        else:
            hw, lso, start = part.high_watermark, part.last_stable_offset, part.log_start_offset
        if cached is None or cached.must_respond(err, has_records, hw, lso, start):
            out.append(r)
    return out


async def _read_all(broker: Broker, wanted: list[tuple[str, DataContainer]], max_bytes: int, v: int,
                    read_committed: bool) -> tuple[list[_Result], int, bool]:
    remaining = max_bytes
    min_one = True   # KIP-74: the first non-empty partition may exceed the limits by one batch
    results: list[_Result] = []
    total, errors = 0, False
    for i, (topic, p) in enumerate(wanted):
        await take_turns(i)  # a Fetch naming many partitions leaves room for other connections
        part = broker.partition(topic, p.partition)
        if part is None:
            results.append((topic, p.partition, E.UNKNOWN_TOPIC_OR_PARTITION, None, None))
            errors = True
            continue
        err = E.check_leader_epoch(p.current_leader_epoch, part.leader_epoch) if v >= 9 else E.NONE
        if err:
            results.append((topic, p.partition, err, part, None))
            errors = True
            continue
        limit = min(p.partition_max_bytes, remaining)
        rr = part.read(p.fetch_offset, limit, min_one, read_committed) if (limit > 0 or min_one) else None
        if rr is None:
            results.append((topic, p.partition, E.NONE, part, None))
            continue
        if rr.error_code:
            errors = True
        if rr.records is not None:
            total += rr.records.size
            remaining -= rr.records.size
            min_one = False
        results.append((topic, p.partition, rr.error_code, part, rr))
    return results, total, errors


def _response(request: Request, results: list[_Result], session_id: int = INVALID_SESSION_ID) -> tuple[ApiMessage, Slices]:
    cls = request.api.response
    T = cls.FetchableTopicResponse
    P = T.PartitionData
    topics: list[DataContainer] = []
    slices: Slices = []
    for topic, index, err, part, rr in results:
        if not topics or topics[-1].topic != topic:
            topics.append(T(topic=topic, partitions=[]))
        aborted = None
        if rr is not None and rr.aborted is not None:
            aborted = [P.AbortedTransaction(producer_id=a.producer_id, first_offset=a.first_offset)
                       for a in rr.aborted]
        pd = P(partition_index=index, error_code=err,
               high_watermark=part.high_watermark if part is not None else -1,
               last_stable_offset=part.last_stable_offset if part is not None else -1,
               log_start_offset=part.log_start_offset if part is not None else -1,
               aborted_transactions=aborted, preferred_read_replica=-1, records=b"")
        if rr is not None and rr.records is not None:
            slices.append((pd, rr.records))
        topics[-1].partitions.append(pd)
    resp = request.response(throttle_time_ms=0, error_code=E.NONE, session_id=session_id, responses=topics)
    return resp, slices
