"""InitProducerId (key 22): a new producer id (epoch 0) for an idempotent producer, or, when a v3+
request names its current id and epoch (KIP-360), the same id with the epoch bumped. Transactional
ids are refused: kbatch serve has no transaction coordinator."""
from __future__ import annotations

from typing import TYPE_CHECKING

from kafka.protocol.producer.transaction import InitProducerIdRequest, InitProducerIdResponse

from ..protocol import Api, register
from . import _errors as E

API = register(Api(22, "InitProducerId", InitProducerIdRequest, InitProducerIdResponse, min_version=0, max_version=4, first_flexible=2))

if TYPE_CHECKING:
    from kafka.protocol.api_message import ApiMessage

    from ._context import BrokerContext
    from ..protocol import Request


MAX_EPOCH = 32767


async def handle(broker: BrokerContext, request: Request, client_host: str) -> ApiMessage:
    body, v = request.body, request.version
    if body.transactional_id is not None:
        return request.response(throttle_time_ms=0, error_code=E.TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
                                producer_id=-1, producer_epoch=-1)
    if v >= 3 and body.producer_id >= 0 and 0 <= body.producer_epoch < MAX_EPOCH - 1:
        return request.response(throttle_time_ms=0, error_code=E.NONE, producer_id=body.producer_id,
                                producer_epoch=body.producer_epoch + 1)
    return request.response(throttle_time_ms=0, error_code=E.NONE, producer_id=broker.producer_ids.generate(),
                            producer_epoch=0)
