"""A topic's log configuration (Kafka's LogConfig): topic-config names in snake_case, Kafka's
defaults, `from_properties` for dotted names as a .properties file or kafka-configs gives them, and
the LogValidator a topic's appends go through."""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from typing import TYPE_CHECKING, Any

from .. import _wire as W
from ..errors import InvalidConfigurationError

if TYPE_CHECKING:
    from .validator import LogValidator

_TIMESTAMP_TYPES = {"createtime": W.TimestampType.CREATE_TIME, "logappendtime": W.TimestampType.LOG_APPEND_TIME}
_CODECS = {"producer": None, "uncompressed": W.Compression.NONE, "none": W.Compression.NONE,
           "gzip": W.Compression.GZIP, "snappy": W.Compression.SNAPPY, "lz4": W.Compression.LZ4,
           "zstd": W.Compression.ZSTD}


#: every topic-level config name Kafka accepts (TopicConfig, kafka-configs --entity-type topics);
#: those LogConfig has no field for are kept in LogConfig.extra
KAFKA_TOPIC_CONFIGS = frozenset({
    "cleanup.policy", "compression.type", "compression.gzip.level", "compression.lz4.level", "compression.zstd.level",
    "delete.retention.ms", "file.delete.delay.ms", "flush.messages", "flush.ms",
    "follower.replication.throttled.replicas", "index.interval.bytes", "leader.replication.throttled.replicas",
    "local.retention.bytes", "local.retention.ms", "max.compaction.lag.ms", "max.message.bytes",
    "message.downconversion.enable", "message.format.version", "message.timestamp.after.max.ms",
    "message.timestamp.before.max.ms", "message.timestamp.difference.max.ms", "message.timestamp.type",
    "min.cleanable.dirty.ratio", "min.compaction.lag.ms", "min.insync.replicas", "preallocate",
    "remote.storage.enable", "remote.log.copy.disable", "remote.log.delete.on.disable", "retention.bytes",
    "retention.ms", "segment.bytes", "segment.index.bytes", "segment.jitter.ms", "segment.ms",
    "unclean.leader.election.enable",
})


def _unknown_config(key: str, known: Mapping[str, Any]) -> InvalidConfigurationError:
    import difflib

    names = sorted(KAFKA_TOPIC_CONFIGS | {n.replace("_", ".") for n in known} | {"message.timestamp.extended"})
    close = difflib.get_close_matches(key.replace("_", "."), names, n=1, cutoff=0.6)
    hint = f" (did you mean {close[0]}?)" if close else ""
    return InvalidConfigurationError(f"Unknown topic config {key}{hint}", expected="a Kafka topic config name",
                                     found=key)


@dataclass
class LogConfig:
    """A topic's log configuration: Kafka's topic-config names in snake_case, Kafka's defaults.

    message_timestamp_*_max_ms default to Long.MAX_VALUE as in Kafka 3.6-3.9 (Kafka 4.0 sets
    after.max.ms to one hour). timestamp_extended is the KIP-228 "new broker" switch (batches
    written with bit 7, DESIGN.md decision 1); off by default so bytes are Kafka's.
    """

    segment_bytes: int = 1073741824
    segment_ms: int = 604800000
    segment_jitter_ms: int = 0
    segment_index_bytes: int = W.DEFAULT_SEGMENT_INDEX_BYTES
    index_interval_bytes: int = W.DEFAULT_INDEX_INTERVAL_BYTES
    retention_ms: int = 604800000
    retention_bytes: int = -1
    message_timestamp_type: W.TimestampType = W.TimestampType.CREATE_TIME
    message_timestamp_before_max_ms: int = W.INT64_MAX
    message_timestamp_after_max_ms: int = W.INT64_MAX
    cleanup_policy: str = "delete"
    compression_type: str = "producer"
    compression_gzip_level: int = W.GZIP_LEVELS[2]
    compression_lz4_level: int = W.LZ4_LEVELS[2]
    compression_zstd_level: int = W.ZSTD_LEVELS[2]
    max_message_bytes: int = W.DEFAULT_MAX_MESSAGE_BYTES
    timestamp_extended: bool = False
    extra: dict[str, Any] = field(default_factory=dict, repr=False)  # unknown names, with their values as given

    def __post_init__(self) -> None:
        t = self.message_timestamp_type
        if isinstance(t, str):
            key = t.replace("_", "").replace(" ", "").lower()
            if key not in _TIMESTAMP_TYPES:
                raise InvalidConfigurationError("Invalid message.timestamp.type",
                                                expected="CreateTime or LogAppendTime", found=t)
            self.message_timestamp_type = _TIMESTAMP_TYPES[key]
        else:
            self.message_timestamp_type = W.TimestampType(t)
        if str(self.compression_type).lower() not in _CODECS:
            raise InvalidConfigurationError("Invalid compression.type", expected=", ".join(_CODECS),
                                            found=self.compression_type)
        from ..record.compression import check_level
        for codec in (W.Compression.GZIP, W.Compression.LZ4, W.Compression.ZSTD):
            name = f"compression_{codec.name.lower()}_level"
            try:
                check_level(codec, getattr(self, name))
            except InvalidConfigurationError as e:
                raise InvalidConfigurationError(f"Invalid value for {name.replace('_', '.')}", expected=e.expected,
                                                found=e.found) from None
        policies = self.cleanup_policies
        if not policies or not policies <= {"delete", "compact"}:
            raise InvalidConfigurationError("Invalid cleanup.policy", expected="delete and/or compact",
                                            found=self.cleanup_policy)
        # Kafka's int configs: segment.bytes above 2147483647 would need positions .index cannot hold
        for name, low, high in (("segment_bytes", 14, W.INT32_MAX), ("segment_ms", 1, W.INT64_MAX),
                                ("segment_jitter_ms", 0, W.INT64_MAX),
                                ("segment_index_bytes", W.TIME_INDEX_ENTRY_SIZE * 2, W.INT32_MAX),
                                ("index_interval_bytes", 0, W.INT32_MAX), ("max_message_bytes", 0, W.INT32_MAX)):
            v = getattr(self, name)
            if not isinstance(v, int) or not low <= v <= high:
                raise InvalidConfigurationError(f"Invalid value for {name.replace('_', '.')}",
                                                expected=f"an integer in [{low}, {high}]", found=v)

    @property
    def cleanup_policies(self) -> set[str]:
        p = self.cleanup_policy
        items = p if isinstance(p, (list, tuple, set)) else str(p).split(",")
        return {s.strip().lower() for s in items if s.strip()}

    @property
    def compression(self) -> W.Compression | None:
        """The topic codec (a Compression), or None for compression.type=producer."""
        return _CODECS[str(self.compression_type).lower()]

    @property
    def compression_level(self) -> int | None:
        """The topic codec's level (compression.<codec>.level), None for producer, none and snappy.
        Batches rebuilt for a "producer" topic keep their codec at its default level, as Kafka's
        BrokerCompressionType.targetCompression does."""
        codec = self.compression
        if codec in (W.Compression.GZIP, W.Compression.LZ4, W.Compression.ZSTD):
            level: int = getattr(self, f"compression_{codec.name.lower()}_level")
            return level
        return None

    @classmethod
    def from_properties(cls, props: Mapping[str, Any]) -> "LogConfig":
        """From Kafka's dotted names ("segment.bytes": "1024", ...) or snake_case names; values
        may be strings as in a .properties file. Kafka's topic configs that kbatch has no use for
        (min.insync.replicas, ...) are kept in `extra`; a name Kafka does not know either is refused
        with InvalidConfigurationError naming the closest valid one, as kafka-configs refuses it."""
        known = {f.name: f for f in fields(cls) if f.name != "extra"}
        kw: dict[str, Any] = {}
        extra: dict[str, Any] = {}
        for key, value in props.items():
            name = key.replace(".", "_").replace("-", "_")
            if name == "message_timestamp_extended":
                name = "timestamp_extended"
            if name not in known:
                if key not in KAFKA_TOPIC_CONFIGS and name.replace("_", ".") not in KAFKA_TOPIC_CONFIGS:
                    raise _unknown_config(key, known)
                extra[key] = value
                continue
            default = known[name].default
            if isinstance(default, bool):
                if isinstance(value, str):
                    if value.lower() not in ("true", "false"):
                        raise InvalidConfigurationError(f"Invalid value for {key}", expected="true or false",
                                                        found=value)
                    value = value.lower() == "true"
                kw[name] = bool(value)
            elif isinstance(default, int) and name != "message_timestamp_type":
                try:
                    kw[name] = int(value)
                except (TypeError, ValueError):
                    raise InvalidConfigurationError(f"Invalid value for {key}", expected="an integer",
                                                    found=value) from None
            else:
                kw[name] = value
        return cls(**kw, extra=extra)

    def validator(self, topic_partition: str | None = None) -> LogValidator:
        from .validator import LogValidator
        return LogValidator(self.message_timestamp_type, self.message_timestamp_before_max_ms,
                            self.message_timestamp_after_max_ms, compacted="compact" in self.cleanup_policies,
                            max_message_bytes=self.max_message_bytes, compression=self.compression,
                            compression_level=self.compression_level, timestamp_extended=self.timestamp_extended, topic_partition=topic_partition)


__all__ = ["LogConfig", "KAFKA_TOPIC_CONFIGS"]
