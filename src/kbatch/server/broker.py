"""The served log directory as a single-node broker: its partitions, configuration and API handlers.

Topics are the `<topic>-<partition>` directories under the served directory, each opened as a
kbatch `Log` (writable unless read-only, so a writer holds each directory's lock; the served directory's own `.lock` is held too, as a broker holds its log directory's). Requests are
dispatched to one handler per API (`kbatch.server.apis`, named after Kafka's API names).
"""
from __future__ import annotations

import asyncio
import dataclasses
import logging
import os
import re
import shutil
import time
import uuid
from typing import TYPE_CHECKING, TypedDict

from ..log import files as _files
from ..log.unified_log import Log, LogConfig
from . import apis
from .config import ServerConfig
from .group_coordinator import OFFSETS_TOPIC, GroupCoordinator, partition_for
from .fetch_session import FetchSessionCache
from .memory_pool import MemoryPool
from .partition import Partition
from .producer_state import ProducerIdManager

if TYPE_CHECKING:
    from .._typing import PathLike
    from .apis._context import Handler
    from .protocol import Answer, Request

logger = logging.getLogger("kbatch.server")

_LEGAL_TOPIC = re.compile(r"^[a-zA-Z0-9._-]{1,249}$")
#: how long a deleted partition's files stay open for answers in flight (Kafka: file.delete.delay.ms, 60 s)
DELETE_DELAY_S = 5.0


@dataclasses.dataclass
class ConnectionStats:
    """What happened to the connections of one server, counted as they end (`Broker.connections`).

    accepted: connections opened; closed: ended by the client at a request boundary (the normal
    end); lost: the client went away inside a request or while an answer was being written;
    refused: closed by the server for a frame that cannot be a request (Kafka closes those too);
    timed_out: closed by the server because a request's bytes did not all arrive within
    request_read_timeout_ms; dropped: closed by the server because of an error of its own (a fault
    to fix: nothing a client did calls for it). Each connection that has ended is in exactly one of
    the last five."""

    accepted: int = 0
    closed: int = 0
    lost: int = 0
    refused: int = 0
    timed_out: int = 0
    dropped: int = 0


class ServeOptions(TypedDict, total=False):
    """ServerConfig's fields but host and port (serve and run take them as `listen`), as keyword
    arguments."""

    advertised_host: str | None
    read_only: bool
    auto_create_topics: bool
    num_partitions: int
    node_id: int | None
    cluster_id: str | None
    topic_config: dict[str, str]
    topic_configs: dict[str, dict[str, str]]
    flush_messages: int | None
    offsets_topic_num_partitions: int | None
    group_initial_rebalance_delay_ms: int
    group_min_session_timeout_ms: int
    group_max_session_timeout_ms: int
    socket_request_max_bytes: int
    queued_max_request_bytes: int
    request_read_timeout_ms: int
    fetch_max_bytes: int
    offsets_retention_minutes: int
    offsets_retention_check_interval_ms: int
    shutdown_timeout_s: float


class ServerOptions(ServeOptions, total=False):
    """ServerConfig's fields as keyword arguments (Server, ServerThread)."""

    host: str
    port: int


def _read_properties(path: str) -> dict[str, str]:
    out = {}
    try:
        with open(path, encoding="utf-8") as f:
            for line in f:
                line = line.strip()
                if line and not line.startswith("#") and "=" in line:
                    k, v = line.split("=", 1)
                    out[k.strip()] = v.strip()
    except OSError:
        pass
    return out


class Broker:
    def __init__(self, directory: PathLike, config: ServerConfig) -> None:
        self.directory = os.path.abspath(os.fspath(directory))
        if not os.path.isdir(self.directory):
            raise FileNotFoundError(f"kbatch serve: {self.directory} is not a directory")
        self.config = config
        self.read_only = config.read_only
        meta = _read_properties(os.path.join(self.directory, "meta.properties"))
        self.node_id = config.node_id if config.node_id is not None else \
            int(meta.get("node.id", meta.get("broker.id", 0)))
        self.cluster_id = config.cluster_id or meta.get("cluster.id") or _stable_cluster_id(self.directory)
        self.partitions: dict[tuple[str, int], Partition] = {}
        self.topic_ids: dict[str, bytes] = {}
        self.host = config.advertised_host or (config.host if config.host not in ("", "0.0.0.0", "::") else "127.0.0.1")
        self.port = config.port
        self.producer_ids = ProducerIdManager(None if self.read_only else self.directory, int(time.time() * 1000))
        self.coordinator = GroupCoordinator(self, initial_rebalance_delay_ms=config.group_initial_rebalance_delay_ms,
                                            min_session_timeout_ms=config.group_min_session_timeout_ms,
                                            max_session_timeout_ms=config.group_max_session_timeout_ms,
                                            offsets_retention_ms=config.offsets_retention_minutes * 60000,
                                            offsets_retention_check_interval_ms=config.offsets_retention_check_interval_ms)
        self.request_memory = MemoryPool(config.queued_max_request_bytes)
        for topic in ("", *config.topic_configs):  # a bad topic config fails here, before anything is opened
            self.log_config(topic)
        self.handlers: dict[int, Handler] = apis.HANDLERS
        self._create_lock: asyncio.Lock | None = None
        self.closing = False
        self._closing_future: asyncio.Future[None] | None = None
        self._offsets_partitions: int | None = None
        self._dir_lock: _files.DirLock | None = None
        #: deleted partitions waiting for readers to finish (file.delete.delay.ms): (deadline, partition, renamed dir)
        self._deleted: list[tuple[float, Partition, str]] = []
        self.connections = ConnectionStats()
        self.fetch_sessions = FetchSessionCache()  # KIP-227 (server/fetch_session.py)

    def closing_waiter(self) -> asyncio.Future[None]:
        """An awaitable that completes when shutdown begins (long polls wait on it too)."""
        if self._closing_future is None:
            self._closing_future = asyncio.get_running_loop().create_future()
        return asyncio.shield(self._closing_future)

    def begin_shutdown(self) -> None:
        self.closing = True
        if self._closing_future is not None and not self._closing_future.done():
            self._closing_future.set_result(None)

    # ---- opening and closing
    def open(self) -> None:
        """Lock the directory (a writer), then open every partition directory (recovery and locks
        as `Log` does for a writer)."""
        if not self.read_only:
            self._lock_directory()
        names = sorted(os.listdir(self.directory))
        try:
            for name in names:
                path = os.path.join(self.directory, name)
                parsed = _files.parse_partition_dir(name)
                if parsed is None or not os.path.isdir(path):
                    continue
                topic, index = parsed
                if topic == "__cluster_metadata":  # KRaft's own log: a broker never serves it to clients
                    continue
                self._open_partition(topic, index, path)
            self.offsets_topic_partition_count()
            self.coordinator.load()
        except BaseException:
            self.close()
            raise

    def _open_partition(self, topic: str, index: int, path: str) -> Partition:
        cfg = self.log_config(topic)
        log = Log.open(path, cfg, writable=not self.read_only)
        part = Partition(topic, index, log, flush_messages=self.config.flush_messages)
        self.partitions[(topic, index)] = part
        tid = _topic_id(path)
        if tid is not None:
            self.topic_ids.setdefault(topic, tid)
        return part

    def log_config(self, topic: str) -> LogConfig:
        props = dict(self.config.topic_config)
        if topic == OFFSETS_TOPIC:
            props.update({"cleanup.policy": "compact", "segment.bytes": str(100 * 1024 * 1024)})
        props.update(self.config.topic_configs.get(topic, {}))
        return LogConfig.from_properties(props)

    def _lock_directory(self) -> None:
        """`<dir>/.lock`, held while serving, as a broker holds its log directory's (kbatch's DirLock:
        a running broker or another writer is refused with LogDirectoryLockedError; the partitions'
        own writers then see that this process owns the log directory)."""
        self._dir_lock = _files.DirLock.acquire(self.directory, "serve")

    def close(self) -> None:
        self.coordinator.shutdown()
        self._purge_deleted()
        for part in self.partitions.values():
            try:
                part.close()
            except Exception as e:  # close what can be closed; report the rest
                logger.error("Closing %s failed: %s", part.name, e)
        self.partitions.clear()
        lock, self._dir_lock = self._dir_lock, None
        if lock is not None:
            lock.release()

    # ---- topics
    def topics(self) -> dict[str, list[int]]:
        out: dict[str, list[int]] = {}
        for (topic, index) in self.partitions:
            out.setdefault(topic, []).append(index)
        return {t: sorted(p) for t, p in sorted(out.items())}

    def partition(self, topic: str, index: int) -> Partition | None:
        return self.partitions.get((topic, index))

    def has_partition(self, topic: str, index: int) -> bool:
        return (topic, index) in self.partitions

    def topic_id(self, topic: str) -> uuid.UUID:
        """From partition.metadata when a broker wrote one, else the zero UUID (no topic id)."""
        return uuid.UUID(bytes=self.topic_ids.get(topic, bytes(16)))

    async def create_topic(self, topic: str) -> bool:
        """Auto-create a topic with num_partitions partitions (auto.create.topics.enable), a new topic
        id as a broker's auto-creation gives it."""
        if self.read_only or not self.config.auto_create_topics or not _LEGAL_TOPIC.match(topic) \
                or topic in (".", ".."):
            return False
        try:
            await self.create_new_topic(topic, self.config.num_partitions, {})
        except FileExistsError:
            pass
        return True

    async def create_new_topic(self, topic: str, partitions: int, configs: dict[str, str]) -> uuid.UUID:
        """CreateTopics: `partitions` empty partition directories with a new topic id in each
        `partition.metadata` (as a broker writes it) and `configs` as the topic's own configs (kept
        while the server runs). The caller has validated the request. The directories are made and
        the logs opened off the event loop (fsyncs), so other connections are answered meanwhile."""
        async with self._topic_lock():
            if topic in self.topics():
                raise FileExistsError(topic)
            topic_id = uuid.uuid4()
            if configs:
                self.config.topic_configs[topic] = dict(configs)
            parts = await asyncio.to_thread(self._new_partitions, topic, topic_id.bytes, range(partitions))
            self.topic_ids[topic] = topic_id.bytes
            for part in parts:
                self.partitions[(topic, part.index)] = part
            logger.info("Created topic %s with %d partition(s)", topic, partitions)
        return topic_id

    async def add_partitions(self, topic: str, count: int) -> None:
        """CreatePartitions: the topic grows to `count` partitions (validated by the caller)."""
        async with self._topic_lock():
            have = len(self.topics().get(topic, []))
            parts = await asyncio.to_thread(self._new_partitions, topic, self.topic_ids.get(topic), range(have, count))
            for part in parts:
                self.partitions[(topic, part.index)] = part
            logger.info("Topic %s now has %d partition(s) (CreatePartitions)", topic, count)

    async def alter_topic_config(self, topic: str, configs: dict[str, str]) -> None:
        """IncrementalAlterConfigs: `configs` become the topic's own configs; its logs validate and
        roll by them from the next append on (UnifiedLog.updateConfig)."""
        if configs:
            self.config.topic_configs[topic] = dict(configs)
        else:
            self.config.topic_configs.pop(topic, None)
        new = self.log_config(topic)
        for (t, _), part in list(self.partitions.items()):
            if t == topic:
                await part.update_config(new)
        logger.info("Topic %s configs now %s (IncrementalAlterConfigs)", topic, configs)

    def _topic_lock(self) -> asyncio.Lock:
        if self._create_lock is None:
            self._create_lock = asyncio.Lock()
        return self._create_lock

    def _new_partitions(self, topic: str, topic_id: bytes | None, indexes: range) -> list[Partition]:
        """Empty partition directories, partition.metadata carrying the topic id, opened (in a
        worker thread: nothing here touches the broker's tables)."""
        import base64

        out = []
        cfg = self.log_config(topic)
        for index in indexes:
            path = os.path.join(self.directory, f"{topic}-{index}")
            os.makedirs(path, exist_ok=True)
            if topic_id is not None:
                text = "version: 0\ntopic_id: " + base64.urlsafe_b64encode(topic_id).decode().rstrip("=") + "\n"
                with open(os.path.join(path, "partition.metadata"), "w", encoding="utf-8") as f:
                    f.write(text)
            log = Log.open(path, cfg, writable=True)
            out.append(Partition(topic, index, log, flush_messages=self.config.flush_messages))
        return out

    async def delete_topic(self, topic: str) -> None:
        """DeleteTopics: the topic is gone from Metadata, Fetch and ListOffsets at once; each
        partition's log is closed (after an append in progress), its directory renamed
        `<topic>-<p>.<id>-delete` as Kafka renames it, and deleted once answers in flight that send
        its bytes are done (Kafka's file.delete.delay.ms, shortened)."""
        parts = [self.partitions.pop(k) for k in [k for k in self.partitions if k[0] == topic]]
        self.topic_ids.pop(topic, None)
        self.config.topic_configs.pop(topic, None)
        for part in parts:
            await part.retire()
            renamed = os.path.join(self.directory, f"{part.name}.{uuid.uuid4().hex}-delete")
            await asyncio.to_thread(os.rename, part.log.directory, renamed)
            self._deleted.append((time.monotonic() + DELETE_DELAY_S, part, renamed))
        logger.info("Deleted topic %s (DeleteTopics)", topic)
        asyncio.get_running_loop().call_later(DELETE_DELAY_S + 0.1, self._purge_soon)

    def _purge_soon(self) -> None:
        """The deleted partitions that are due, removed in a worker thread (rmtree of many files)."""
        now = time.monotonic()
        due = [d for d in self._deleted if d[0] <= now]
        self._deleted = [d for d in self._deleted if d[0] > now]
        asyncio.get_running_loop().run_in_executor(None, _remove_deleted, due)

    def _purge_deleted(self) -> None:
        """Every deleted partition's files, now (the server is closing)."""
        due, self._deleted = self._deleted, []
        _remove_deleted(due)

    # ---- __consumer_offsets
    def offsets_partitions(self) -> list[Partition]:
        return [p for (t, _), p in sorted(self.partitions.items()) if t == OFFSETS_TOPIC]

    def offsets_topic_partition_count(self) -> int:
        """offsets.topic.num.partitions, fixed when the directory is opened: as configured; else the
        count of the directory's __consumer_offsets partitions when they are 0..n-1 (kbatch creates
        one; a whole broker directory has Kafka's 50); else, for a partial copy of a broker's,
        Kafka's default 50; 1 when there are none."""
        if self._offsets_partitions is None:
            if self.config.offsets_topic_num_partitions is not None:
                n = self.config.offsets_topic_num_partitions
            else:
                existing = sorted(i for (t, i) in self.partitions if t == OFFSETS_TOPIC)
                if not existing:
                    n = 1
                elif existing == list(range(len(existing))):
                    n = len(existing)
                else:
                    n = max(50, existing[-1] + 1)
            self._offsets_partitions = n
        return self._offsets_partitions

    async def offsets_partition_for(self, group_id: str) -> Partition:
        n = self.offsets_topic_partition_count()
        index = partition_for(group_id, n)
        part = self.partition(OFFSETS_TOPIC, index)
        if part is None:
            if self._create_lock is None:
                self._create_lock = asyncio.Lock()
            async with self._create_lock:
                part = self.partition(OFFSETS_TOPIC, index)
                if part is None:  # only the partition this group needs
                    path = os.path.join(self.directory, f"{OFFSETS_TOPIC}-{index}")
                    os.makedirs(path, exist_ok=True)
                    part = self._open_partition(OFFSETS_TOPIC, index, path)
        return part

    # ---- dispatch
    async def handle(self, request: Request, client_host: str) -> Answer:
        handler = self.handlers[request.api.key]
        return await handler(self, request, client_host)


def _remove_deleted(due: list[tuple[float, Partition, str]]) -> None:
    for _, part, path in due:
        part.release_files()
        shutil.rmtree(path, ignore_errors=True)


def _topic_id(path: str) -> bytes | None:
    """The topic id in `partition.metadata` (version: 0 / topic_id: <base64 uuid>), if any."""
    props: dict[str, str] = {}
    try:
        with open(os.path.join(path, "partition.metadata"), encoding="utf-8") as f:
            for line in f:
                if ":" in line:
                    k, v = line.split(":", 1)
                    props[k.strip()] = v.strip()
    except OSError:
        return None
    import base64

    raw = props.get("topic_id")
    if not raw:
        return None
    try:
        data = base64.urlsafe_b64decode(raw + "=" * (-len(raw) % 4))
    except ValueError:
        return None
    return data if len(data) == 16 else None


def _stable_cluster_id(directory: str) -> str:
    import base64

    u = uuid.uuid5(uuid.NAMESPACE_URL, "kbatch-serve:" + directory)
    return base64.urlsafe_b64encode(u.bytes).decode().rstrip("=")


__all__ = ["Broker", "ConnectionStats", "MemoryPool", "ServerConfig", "ServerOptions", "ServeOptions"]
