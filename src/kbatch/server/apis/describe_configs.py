"""DescribeConfigs (key 32, v1-4, flexible from 4): the configs a client reads of a topic or of this
broker, with Kafka's names, values as Kafka prints them, and Kafka's sources (KIP-226):

- a topic: every topic config serve applies to it (`Broker.log_config`): DYNAMIC_TOPIC_CONFIG for a
  per-topic value (`ServerConfig.topic_configs`), STATIC_BROKER_CONFIG for a value given to every
  topic (`--config`, as a broker's `log.*` setting in server.properties), else DEFAULT_CONFIG with
  the default serve applies; synonyms (v1+ include_synonyms) in Kafka's order, topic first, each
  with its broker name (`log.segment.bytes` for `segment.bytes`, ...);
- this broker (resource name its node id, or "" for the cluster-wide defaults): the settings serve
  runs with, read-only (nothing here changes a running server).

An unknown topic gets UNKNOWN_TOPIC_OR_PARTITION, another broker's id or a resource type serve has
no configs for (BROKER_LOGGER, ...) INVALID_REQUEST, with Kafka's messages. A key asked for that
the resource does not have is left out, as a broker leaves it out."""
from __future__ import annotations

from dataclasses import fields
from typing import TYPE_CHECKING, Any

from kafka.protocol.admin.configs import DescribeConfigsRequest, DescribeConfigsResponse

from ..protocol import Api, register
from ... import _wire as W
from ...log.unified_log import LogConfig
from . import _errors as E

API = register(Api(32, "DescribeConfigs", DescribeConfigsRequest, DescribeConfigsResponse, min_version=1,
                   max_version=4, first_flexible=4))

if TYPE_CHECKING:
    from kafka.protocol.api_message import ApiMessage
    from kafka.protocol.data_container import DataContainer

    from ._context import BrokerContext
    from ..protocol import Request

TOPIC, BROKER = 2, 4  # ConfigResource.Type
# ConfigEntry.ConfigSource
DYNAMIC_TOPIC_CONFIG, STATIC_BROKER_CONFIG, DEFAULT_CONFIG = 1, 4, 5
# ConfigDef.Type (DescribeConfigs v3+)
BOOLEAN, STRING, INT, LONG, LIST = 1, 2, 3, 5, 7

#: topic config -> (its broker-wide synonym, its type): Kafka's ServerTopicConfigSynonyms
TOPIC_SYNONYMS: dict[str, tuple[str, int]] = {
    "segment.bytes": ("log.segment.bytes", INT),
    "segment.ms": ("log.roll.ms", LONG),
    "segment.jitter.ms": ("log.roll.jitter.ms", LONG),
    "segment.index.bytes": ("log.index.size.max.bytes", INT),
    "index.interval.bytes": ("log.index.interval.bytes", INT),
    "retention.ms": ("log.retention.ms", LONG),
    "retention.bytes": ("log.retention.bytes", LONG),
    "message.timestamp.type": ("log.message.timestamp.type", STRING),
    "message.timestamp.before.max.ms": ("log.message.timestamp.before.max.ms", LONG),
    "message.timestamp.after.max.ms": ("log.message.timestamp.after.max.ms", LONG),
    "cleanup.policy": ("log.cleanup.policy", LIST),
    "compression.type": ("compression.type", STRING),
    "compression.gzip.level": ("compression.gzip.level", INT),
    "compression.lz4.level": ("compression.lz4.level", INT),
    "compression.zstd.level": ("compression.zstd.level", INT),
    "max.message.bytes": ("message.max.bytes", INT),
    "flush.messages": ("log.flush.interval.messages", LONG),
    "flush.ms": ("log.flush.interval.ms", LONG),
    "delete.retention.ms": ("log.cleaner.delete.retention.ms", LONG),
    "min.compaction.lag.ms": ("log.cleaner.min.compaction.lag.ms", LONG),
    "max.compaction.lag.ms": ("log.cleaner.max.compaction.lag.ms", LONG),
    "file.delete.delay.ms": ("log.segment.delete.delay.ms", LONG),
    "min.cleanable.dirty.ratio": ("log.cleaner.min.cleanable.ratio", STRING),
    "min.insync.replicas": ("min.insync.replicas", INT),
    "unclean.leader.election.enable": ("unclean.leader.election.enable", BOOLEAN),
    "preallocate": ("log.preallocate", BOOLEAN),
    "local.retention.ms": ("log.local.retention.ms", LONG),
    "local.retention.bytes": ("log.local.retention.bytes", LONG),
}

#: broker settings with no default of their own (Kafka takes it from log.roll.hours and
#: log.roll.jitter.hours): a broker lists no DEFAULT_CONFIG synonym for their topic configs
_NO_DEFAULT = frozenset({"log.roll.ms", "log.roll.jitter.ms"})


async def handle(broker: BrokerContext, request: Request, client_host: str) -> ApiMessage:
    body, v = request.body, request.version
    R = request.api.response.DescribeConfigsResult
    results: list[DataContainer] = []
    for res in body.resources:
        synonyms = v >= 1 and bool(body.include_synonyms)
        if res.resource_type == TOPIC and res.resource_name not in broker.topics():
            results.append(R(error_code=E.UNKNOWN_TOPIC_OR_PARTITION,
                             error_message=f"The topic '{res.resource_name}' does not exist.",
                             resource_type=res.resource_type, resource_name=res.resource_name, configs=[]))
            continue
        if res.resource_type == TOPIC:
            entries = topic_configs(broker, res.resource_name)
        elif res.resource_type == BROKER and res.resource_name in ("", str(broker.node_id)):
            entries = broker_configs(broker)
        else:
            msg = (f"Unexpected broker id, expected {broker.node_id} or empty string, but received "
                   f"{res.resource_name}" if res.resource_type == BROKER
                   else f"Unsupported resource type: {res.resource_type}")
            results.append(R(error_code=E.INVALID_REQUEST, error_message=msg, resource_type=res.resource_type,
                             resource_name=res.resource_name, configs=[]))
            continue
        wanted = None if res.configuration_keys is None else set(res.configuration_keys)
        configs = [_entry(R, e, synonyms, v) for e in entries if wanted is None or e.name in wanted]
        results.append(R(error_code=E.NONE, error_message=None, resource_type=res.resource_type,
                         resource_name=res.resource_name, configs=configs))
    return request.response(throttle_time_ms=0, results=results)


class Entry:
    """One config as described: its value and source, and the synonyms behind it (first wins)."""

    __slots__ = ("name", "value", "source", "read_only", "config_type", "synonyms")

    def __init__(self, name: str, value: str | None, source: int, read_only: bool, config_type: int,
                 synonyms: list[tuple[str, str | None, int]]) -> None:
        self.name, self.value, self.source, self.read_only = name, value, source, read_only
        self.config_type, self.synonyms = config_type, synonyms


def _entry(R: Any, e: Entry, synonyms: bool, v: int) -> DataContainer:
    C = R.DescribeConfigsResourceResult
    syn = [C.DescribeConfigsSynonym(name=n, value=val, source=s) for n, val, s in e.synonyms] if synonyms else []
    return C(name=e.name, value=e.value, read_only=e.read_only, config_source=e.source,
             is_default=e.source == DEFAULT_CONFIG, is_sensitive=False, synonyms=syn,
             config_type=e.config_type if v >= 3 else 0, documentation=None)


def kafka_value(value: Any) -> str:
    """A config value as Kafka prints it (true/false, CreateTime, a list joined with commas)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, W.TimestampType):
        return "CreateTime" if value == W.TimestampType.CREATE_TIME else "LogAppendTime"
    if isinstance(value, (list, tuple, set)):
        return ",".join(str(x) for x in value)
    return str(value)


def _applied(config: LogConfig) -> dict[str, str]:
    """Kafka topic config name -> the value serve applies (LogConfig's fields, then its extras)."""
    out = {f.name.replace("_", "."): kafka_value(getattr(config, f.name))
           for f in fields(config) if f.name not in ("extra", "timestamp_extended")}
    out.update({k: kafka_value(val) for k, val in config.extra.items()})
    return out


def topic_configs(broker: BrokerContext, topic: str) -> list[Entry]:
    applied = _applied(broker.log_config(topic))
    defaults = _applied(LogConfig())
    static = _applied(LogConfig.from_properties(broker.config.topic_config))
    per_topic = {k.replace("_", ".") for k in broker.config.topic_configs.get(topic, {})}
    everywhere = {k.replace("_", ".") for k in broker.config.topic_config}
    out = []
    for name, value in sorted(applied.items()):
        synonym, ctype = TOPIC_SYNONYMS.get(name, (name, STRING))
        chain: list[tuple[str, str | None, int]] = []
        if name in per_topic:
            chain.append((name, value, DYNAMIC_TOPIC_CONFIG))
        if name in everywhere:
            chain.append((synonym, static.get(name), STATIC_BROKER_CONFIG))
        if name in defaults and synonym not in _NO_DEFAULT:
            chain.append((synonym, defaults[name], DEFAULT_CONFIG))
        source = chain[0][2] if chain else DEFAULT_CONFIG
        out.append(Entry(name, value, source, False, ctype, chain))
    return out


def broker_configs(broker: BrokerContext) -> list[Entry]:
    """This node's settings: its identity and listener, what serve was started with, and the
    broker-wide synonyms of the topic configs (what every topic gets unless it says otherwise)."""
    c = broker.config
    own: list[tuple[str, Any, Any, int]] = [  # name, value, Kafka's default (None: always given), type
        ("node.id", broker.node_id, None, INT),
        ("broker.id", broker.node_id, None, INT),
        ("log.dirs", broker.directory, None, STRING),
        ("advertised.listeners", f"PLAINTEXT://{broker.host}:{broker.port}", None, LIST),
        ("auto.create.topics.enable", c.auto_create_topics, True, BOOLEAN),
        ("num.partitions", c.num_partitions, 1, INT),
        ("group.initial.rebalance.delay.ms", c.group_initial_rebalance_delay_ms, 3000, INT),
        ("group.min.session.timeout.ms", c.group_min_session_timeout_ms, 6000, INT),
        ("group.max.session.timeout.ms", c.group_max_session_timeout_ms, 1800000, INT),
        ("socket.request.max.bytes", c.socket_request_max_bytes, 104857600, INT),
    ]
    out = []
    for name, value, default, ctype in own:
        text = kafka_value(value)
        source = DEFAULT_CONFIG if default is not None and text == kafka_value(default) else STATIC_BROKER_CONFIG
        out.append(Entry(name, text, source, True, ctype, [(name, text, source)]))
    applied = _applied(LogConfig.from_properties(c.topic_config))
    everywhere = {k.replace("_", ".") for k in c.topic_config}
    for name, value in sorted(applied.items()):
        synonym, ctype = TOPIC_SYNONYMS.get(name, (name, STRING))
        source = STATIC_BROKER_CONFIG if name in everywhere else DEFAULT_CONFIG
        out.append(Entry(synonym, value, source, True, ctype, [(synonym, value, source)]))
    return sorted(out, key=lambda e: e.name)
