"""Produce (key 0): one batch per partition through the topic's LogValidator (Log.append, client
origin: KIP-937 error 32 with Kafka's messages and per-record errors at v8+, LogAppendTime,
KIP-228), idempotence checks (producer_state), offsets assigned by the Log. The answer is sent
after the append has returned (and been fsynced when flush_messages says so); acks=0 gets none."""
from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, TypedDict

from kafka.protocol.producer.produce import ProduceRequest, ProduceResponse

from ...record.file_records import iter_batches
from ...errors import KBatchError
from ..group_coordinator import OFFSETS_TOPIC
from ..partition import ProducerStateError
from ..protocol import Api, CloseConnection, register, take_turns
from . import _errors as E

API = register(Api(0, "Produce", ProduceRequest, ProduceResponse, min_version=3, max_version=9, first_flexible=9))

if TYPE_CHECKING:
    from ...record.batch import Batch
    from kafka.protocol.api_message import ApiMessage
    from kafka.protocol.data_container import DataContainer

    from ._context import BrokerContext
    from ..protocol import Request


class _Result(TypedDict, total=False):
    """One partition's answer (PartitionProduceResponse's fields)."""

    error_code: int
    base_offset: int
    log_append_time_ms: int
    log_start_offset: int
    error_message: str | None
    record_errors: list[tuple[int, str | None]]


async def handle(broker: BrokerContext, request: Request, client_host: str) -> ApiMessage | None:
    body, v = request.body, request.version
    cls = request.api.response
    P = cls.TopicProduceResponse.PartitionProduceResponse
    acks = body.acks
    topics: list[DataContainer] = []
    done = 0
    for t in body.topic_data:
        parts: list[DataContainer] = []
        for pd in t.partition_data:
            await take_turns(done)  # a request naming many partitions leaves room for other connections
            done += 1
            res: _Result
            if acks not in (-1, 0, 1):
                res = _Result(error_code=E.INVALID_REQUIRED_ACKS)
            elif body.transactional_id is not None:
                res = _Result(error_code=E.TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
                              error_message="kbatch serve does not serve transactions")
            else:
                res = await _append(broker, t.name, pd.index, pd.records, v)
            res.setdefault("base_offset", -1)
            res.setdefault("log_append_time_ms", -1)
            res.setdefault("log_start_offset", -1)
            res.setdefault("record_errors", [])
            res.setdefault("error_message", None)
            parts.append(P(index=pd.index, error_code=res["error_code"], base_offset=res["base_offset"],
                           log_append_time_ms=res["log_append_time_ms"], log_start_offset=res["log_start_offset"],
                           error_message=res["error_message"], record_errors=[P.BatchIndexAndErrorMessage(batch_index=i, batch_index_error_message=m)
                                          for i, m in res["record_errors"]]))
        topics.append(cls.TopicProduceResponse(name=t.name, partition_responses=parts))
    if acks == 0:
        # no answer; but a failed acks=0 produce closes the connection so the client notices (KafkaApis)
        failed = [p for t in topics for p in t.partition_responses if p.error_code]
        if failed:
            raise CloseConnection(f"an acks=0 produce failed with error {failed[0].error_code}")
        return None
    return request.response(responses=topics, throttle_time_ms=0)


async def _append(broker: BrokerContext, topic: str, index: int, records: bytes | None, version: int) -> _Result:
    part = broker.partition(topic, index)
    if part is None:
        return _Result(error_code=E.UNKNOWN_TOPIC_OR_PARTITION)
    if topic == OFFSETS_TOPIC:
        return _Result(error_code=E.INVALID_TOPIC_EXCEPTION, error_message=f"Cannot append to internal topic {topic}")
    if broker.read_only:
        return _Result(error_code=E.TOPIC_AUTHORIZATION_FAILED,
                       error_message="kbatch serve is read-only: start it with --writable to accept produce")
    if records is None:
        return _Result(error_code=E.INVALID_RECORD, error_message="Produce request has no records")
    data = memoryview(records)
    # ProduceRequest.validateRecords: v3+ carries exactly one magic 2 batch; zstd needs v7+
    try:
        found = list(_first_two(data))
        if len(found) != 1 or found[0].magic != 2:
            return _Result(error_code=E.INVALID_RECORD,
                           error_message=f"Produce requests with version {version} are only allowed to contain "
                                         f"exactly one record batch with magic version 2")
        codec = found[0].compression  # codec ids 5-7: UnsupportedCodecError, UNSUPPORTED_COMPRESSION_TYPE
    except KBatchError as e:
        return _error(e)
    if codec == 4 and version < 7:
        return _Result(error_code=E.UNSUPPORTED_COMPRESSION_TYPE,
                       error_message="Produce requests with version < 7 cannot carry zstd-compressed batches")
    try:
        result = await part.append(data)
    except ProducerStateError as e:
        return _Result(error_code=e.error_code, error_message=str(e))
    except KBatchError as e:
        return _error(e)
    except Exception as e:
        return _Result(error_code=E.code_of(e, f"a produce to {part.name}"), error_message=str(e))
    return _Result(error_code=E.NONE, base_offset=result.first_offset,
                   log_append_time_ms=-1 if result.log_append_time is None else result.log_append_time,
                   log_start_offset=part.log_start_offset)


def _first_two(data: memoryview) -> Iterator[Batch]:
    for i, b in enumerate(iter_batches(data, verify_crc=False, strict=True)):
        yield b
        if i:
            return


def _error(e: KBatchError) -> _Result:
    errs = [(r.record_index, r.message) for r in getattr(e, "record_errors", ())]
    return _Result(error_code=e.error_code if e.error_code is not None else E.CORRUPT_MESSAGE,
                error_message=e.reason, record_errors=errs)
