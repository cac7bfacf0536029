"""`kbatch serve`: a single-node Kafka protocol endpoint over a directory of `<topic>-<partition>` logs.

    with kbatch.server.serve("/data/kafka-logs", listen="127.0.0.1:0") as srv:
        ...  # any Kafka client with bootstrap servers srv.bootstrap

Modules by concern: `protocol` (advertised APIs, message codec from kafka-python's schema-generated
classes, framing), `connection` (one asyncio task per connection, in-order answers, request
deadlines), `memory_pool` (queued.max.request.bytes shared so that no few clients starve the rest),
`socket_server` (listening, start and graceful stop), `broker` (the served directory),
`partition` (a Log: appends, reads, long polls), `apis` (one handler per Kafka API),
`producer_state` (idempotence), `group_coordinator` (groups and `__consumer_offsets`).
See docs/serve.md for the APIs, versions and what differs from a Kafka broker.
"""
from .broker import Broker, ServerConfig
from .socket_server import Server, ServerThread, parse_listen, run, serve

__all__ = ["serve", "run", "Server", "ServerThread", "ServerConfig", "Broker", "parse_listen"]
