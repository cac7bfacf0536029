"""What `kbatch serve` is told: ServerConfig (its own module, below the broker and the API handlers
that both read it)."""
from __future__ import annotations

import dataclasses


@dataclasses.dataclass
class ServerConfig:
    """What `kbatch serve` is told (Kafka's broker config names in snake_case where one exists).

    topic_config: Kafka topic configs applied to every topic ("message.timestamp.after.max.ms": ...);
    topic_configs: per-topic overrides {topic: {name: value}}. flush_messages: Kafka's
    flush.messages (fsync after this many records before answering; None = the OS page cache, as
    Kafka's default). The group settings default to Kafka's (group.initial.rebalance.delay.ms 3 s),
    and so do socket.request.max.bytes (100 MiB), fetch.max.bytes (55 MiB) and offsets.retention.minutes
    (7 days). queued_max_request_bytes bounds the bytes of all requests being read or handled at
    once (Kafka's queued.max.request.bytes, unbounded there by default; 200 MiB here): above it,
    no connection reads another request body until memory is given back (server/memory_pool.py:
    small requests are never held up). request_read_timeout_ms: a request must be read within this
    long of its first byte (the rest of its size prefix, room in the pool, its body), else its
    connection is closed (30 s, the Java client's request.timeout.ms: a client would have given up
    on the request by then).
    """

    host: str = "127.0.0.1"
    port: int = 9092
    advertised_host: str | None = None
    read_only: bool = False
    auto_create_topics: bool = False
    num_partitions: int = 1
    node_id: int | None = None
    cluster_id: str | None = None
    topic_config: dict[str, str] = dataclasses.field(default_factory=dict)
    topic_configs: dict[str, dict[str, str]] = dataclasses.field(default_factory=dict)
    flush_messages: int | None = None
    offsets_topic_num_partitions: int | None = None
    group_initial_rebalance_delay_ms: int = 3000
    group_min_session_timeout_ms: int = 6000
    group_max_session_timeout_ms: int = 1800000
    socket_request_max_bytes: int = 104857600
    queued_max_request_bytes: int = 209715200
    request_read_timeout_ms: int = 30000
    fetch_max_bytes: int = 57671680
    offsets_retention_minutes: int = 10080
    offsets_retention_check_interval_ms: int = 600000
    shutdown_timeout_s: float = 10.0

__all__ = ["ServerConfig"]
