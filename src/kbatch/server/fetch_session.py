"""Fetch sessions (KIP-227, Fetch v7+), as Kafka's FetchSession/FetchManager keep them.

A consumer's first Fetch (session id 0, epoch 0) is a full request: it names every partition and
gets every partition back, and, when the cache has room, the id of a new session holding those
partitions. Its next requests are incremental (that id, epoch 1, 2, ...): they name only the
partitions whose fetch offset (or limits) changed, or that are forgotten, and the answer carries
only the partitions with something new: records, an error, or a changed high watermark, last stable
offset or log start offset. Epoch -1 closes a session (and asks a sessionless full fetch); an
unknown id is FETCH_SESSION_ID_NOT_FOUND, a wrong epoch INVALID_FETCH_SESSION_EPOCH, as a broker
answers, and the client then starts over with a full request.

The cache is bounded (Kafka's max.incremental.fetch.session.cache.slots, 1000): a new session
takes the place of one idle for min.incremental.fetch.session.eviction.ms (120 s), else of the
least recently used one with fewer partitions; when neither exists, the answer is sessionless
(id 0), which tells the client to keep sending full requests.
"""
from __future__ import annotations

import random
import time
from collections import OrderedDict
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from collections.abc import Iterable

INVALID_SESSION_ID = 0
INITIAL_EPOCH = 0
FINAL_EPOCH = -1
MAX_SESSIONS = 1000            # max.incremental.fetch.session.cache.slots
EVICTION_MS = 120_000          # min.incremental.fetch.session.eviction.ms

TopicPartition = tuple[str, int]


class CachedPartition:
    """One partition of a session: what the client last asked (the field names of a Fetch
    request's partition, so the read loop takes either) and what it was last told."""

    __slots__ = ("partition", "fetch_offset", "partition_max_bytes", "current_leader_epoch", "log_start_offset",
                 "last_fetched_epoch", "high_watermark", "last_stable_offset", "sent_log_start_offset")

    def __init__(self, p: Any) -> None:
        self.partition: int = p.partition
        self.high_watermark = self.last_stable_offset = self.sent_log_start_offset = -1
        self.update(p)

    def update(self, p: Any) -> None:
        self.fetch_offset: int = p.fetch_offset
        self.partition_max_bytes: int = p.partition_max_bytes
        self.current_leader_epoch: int = getattr(p, "current_leader_epoch", -1)
        self.log_start_offset: int = getattr(p, "log_start_offset", -1)
        self.last_fetched_epoch: int = getattr(p, "last_fetched_epoch", -1)

    def must_respond(self, error_code: int, has_records: bool, high_watermark: int, last_stable_offset: int,
                     log_start_offset: int) -> bool:
        """Whether an incremental answer includes this partition (CachedPartition.maybeUpdateResponseData);
        what was sent is remembered either way."""
        changed = (high_watermark, last_stable_offset, log_start_offset) != (
            self.high_watermark, self.last_stable_offset, self.sent_log_start_offset)
        self.high_watermark, self.last_stable_offset = high_watermark, last_stable_offset
        self.sent_log_start_offset = log_start_offset
        return has_records or error_code != 0 or changed


class FetchSession:
    __slots__ = ("id", "epoch", "partitions", "last_used_ms")

    def __init__(self, session_id: int, partitions: OrderedDict[TopicPartition, CachedPartition], now_ms: int) -> None:
        self.id = session_id
        self.epoch = 1  # the epoch the next incremental request must carry
        self.partitions = partitions
        self.last_used_ms = now_ms

    def apply(self, topics: Iterable[Any], forgotten: Iterable[Any] | None) -> None:
        """An incremental request's changes: partitions named are added or updated, forgotten ones dropped."""
        for t in topics:
            for p in t.partitions:
                cached = self.partitions.get((t.topic, p.partition))
                if cached is None:
                    self.partitions[(t.topic, p.partition)] = CachedPartition(p)
                else:
                    cached.update(p)
        for f in forgotten or ():
            for index in f.partitions:
                self.partitions.pop((f.topic, index), None)

    def rotate(self, served: Iterable[TopicPartition]) -> None:
        """Partitions that returned records go to the end of the session's order, so a size-limited
        answer serves the others first next time (IncrementalFetchContext)."""
        for tp in served:
            if tp in self.partitions:
                self.partitions.move_to_end(tp)


class FetchSessionCache:
    def __init__(self, max_sessions: int = MAX_SESSIONS, eviction_ms: int = EVICTION_MS) -> None:
        self.max_sessions, self.eviction_ms = max_sessions, eviction_ms
        self._sessions: OrderedDict[int, FetchSession] = OrderedDict()  # least recently used first
        # counted for the server's log and tests: sessions opened, incremental requests answered, sessions
        # closed by their client (epoch -1) and evicted
        self.created = self.incremental = self.closed = self.evicted = 0

    def __len__(self) -> int:
        return len(self._sessions)

    def session_ids(self) -> set[int]:
        return set(self._sessions)

    def get(self, session_id: int) -> FetchSession | None:
        s = self._sessions.get(session_id)
        if s is not None:
            self.incremental += 1
            s.last_used_ms = _now_ms()
            self._sessions.move_to_end(session_id)
        return s

    def remove(self, session_id: int) -> FetchSession | None:
        s = self._sessions.pop(session_id, None)
        self.closed += s is not None
        return s

    def create(self, partitions: OrderedDict[TopicPartition, CachedPartition]) -> FetchSession | None:
        """A new session, or None when the cache is full of sessions it may not evict."""
        now = _now_ms()
        if len(self._sessions) >= self.max_sessions and not self._evict_one(now, len(partitions)):
            return None
        while True:
            sid = random.randint(1, 2 ** 31 - 1)
            if sid not in self._sessions:
                break
        s = FetchSession(sid, partitions, now)
        self._sessions[sid] = s
        self.created += 1
        return s

    def _evict_one(self, now: int, size: int) -> bool:
        stale = next((s for s in self._sessions.values() if now - s.last_used_ms >= self.eviction_ms), None)
        victim = stale or next((s for s in self._sessions.values() if len(s.partitions) < size), None)
        if victim is None:
            return False
        del self._sessions[victim.id]
        self.evicted += 1
        return True


def _now_ms() -> int:
    return int(time.monotonic() * 1000)


__all__ = ["CachedPartition", "FetchSession", "FetchSessionCache", "FINAL_EPOCH", "INITIAL_EPOCH",
           "INVALID_SESSION_ID"]
