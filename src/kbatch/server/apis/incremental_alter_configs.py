"""IncrementalAlterConfigs (key 44, v0-1, flexible from 1): a topic's own configs changed in a
writable server (KIP-339: SET, DELETE, and APPEND / SUBTRACT for list configs such as
cleanup.policy, starting from the topic's own value or else the config's default, as Kafka's
ConfigAdminManager does); the topic's logs validate and roll by the new configs from the next append
on, DescribeConfigs shows them as DYNAMIC_TOPIC_CONFIG, and they are kept while the server runs.

Refused with Kafka's codes: an unknown topic (UNKNOWN_TOPIC_OR_PARTITION), a config Kafka does not
know, a bad value, APPEND / SUBTRACT on a config that is not a list, an unknown operation
(INVALID_CONFIG), one key altered twice (INVALID_REQUEST). This broker's own settings are its
command line's, fixed while it runs (INVALID_CONFIG); other resource types INVALID_REQUEST.
validate_only checks and changes nothing; a read-only server answers TOPIC_AUTHORIZATION_FAILED
(CLUSTER_AUTHORIZATION_FAILED for the broker), as it answers Produce."""
from __future__ import annotations

from collections import Counter
from typing import TYPE_CHECKING

from kafka.protocol.admin.configs import IncrementalAlterConfigsRequest, IncrementalAlterConfigsResponse

from ..protocol import Api, register
from ...errors import KBatchError
from ...log.log_config import KAFKA_TOPIC_CONFIGS
from ...log.unified_log import LogConfig
from . import _errors as E
from .describe_configs import BROKER, LIST, TOPIC, TOPIC_SYNONYMS, _applied

API = register(Api(44, "IncrementalAlterConfigs", IncrementalAlterConfigsRequest, IncrementalAlterConfigsResponse,
                   min_version=0, max_version=1, first_flexible=1))

if TYPE_CHECKING:
    from kafka.protocol.api_message import ApiMessage
    from kafka.protocol.data_container import DataContainer

    from ._context import BrokerContext
    from ..protocol import Request

SET, DELETE, APPEND, SUBTRACT = 0, 1, 2, 3
CLUSTER_AUTHORIZATION_FAILED = 31
INVALID_CONFIG = 40


class _Refused(Exception):
    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code, self.message = code, message


def altered(broker: BrokerContext, topic: str, ops: list[DataContainer]) -> dict[str, str]:
    """The topic's own configs after `ops`, or _Refused."""
    own = dict(broker.config.topic_configs.get(topic, {}))
    defaults = _applied(LogConfig())
    keys = Counter((op.name, op.config_operation) for op in ops)
    if any(n > 1 for n in keys.values()) or len({op.name for op in ops}) != len(ops):
        raise _Refused(E.INVALID_REQUEST, "Error due to duplicate config keys")
    for op in ops:
        if op.name not in KAFKA_TOPIC_CONFIGS:
            raise _Refused(INVALID_CONFIG, f"Unknown topic config name: {op.name}")
        if op.config_operation == SET:
            if op.value is None:
                raise _Refused(INVALID_CONFIG, f"Null value not supported for topic configs: {op.name}")
            own[op.name] = op.value
        elif op.config_operation == DELETE:
            own.pop(op.name, None)
        elif op.config_operation in (APPEND, SUBTRACT):
            if TOPIC_SYNONYMS.get(op.name, ("", 0))[1] != LIST:
                what = "append" if op.config_operation == APPEND else "subtract"
                raise _Refused(INVALID_CONFIG, f"Config value {what} is not allowed for config key: {op.name}")
            current = own.get(op.name, defaults.get(op.name, ""))
            values = [v for v in current.split(",") if v]
            given = [v.strip() for v in (op.value or "").split(",") if v.strip()]
            if op.config_operation == APPEND:
                values += [v for v in given if v not in values]
            else:
                values = [v for v in values if v not in given]
            own[op.name] = ",".join(values)
        else:
            raise _Refused(INVALID_CONFIG, f"Unknown config operation {op.config_operation} for {op.name}")
    try:
        LogConfig.from_properties({**broker.config.topic_config, **own})
    except KBatchError as e:
        raise _Refused(INVALID_CONFIG, str(e).splitlines()[0]) from None
    return own


async def handle(broker: BrokerContext, request: Request, client_host: str) -> ApiMessage:
    body = request.body
    R = request.api.response.AlterConfigsResourceResponse
    results: list[DataContainer] = []
    for res in body.resources:
        try:
            if res.resource_type == TOPIC:
                if broker.read_only:
                    raise _Refused(E.TOPIC_AUTHORIZATION_FAILED,
                                   "kbatch serve is read-only: start it with --writable to alter topic configs")
                if res.resource_name not in broker.topics():
                    raise _Refused(E.UNKNOWN_TOPIC_OR_PARTITION, f"The topic '{res.resource_name}' does not exist.")
                own = altered(broker, res.resource_name, list(res.configs))
                if not body.validate_only:
                    await broker.alter_topic_config(res.resource_name, own)
            elif res.resource_type == BROKER:
                if broker.read_only:
                    raise _Refused(CLUSTER_AUTHORIZATION_FAILED, "kbatch serve is read-only")
                raise _Refused(INVALID_CONFIG, "kbatch serve's broker settings are its command line's: they cannot "
                                               "be altered while it runs")
            else:
                raise _Refused(E.INVALID_REQUEST, f"Unsupported resource type: {res.resource_type}")
            code, message = E.NONE, None
        except _Refused as r:
            code, message = r.code, r.message
        results.append(R(error_code=code, error_message=message, resource_type=res.resource_type,
                         resource_name=res.resource_name))
    return request.response(throttle_time_ms=0, responses=results)
