"""Consumer groups (Kafka's classic GroupCoordinator) and committed offsets in `__consumer_offsets`.

Group membership follows Kafka's classic protocol state machine: Empty -> PreparingRebalance
(members join; with JoinGroup v4+ an unknown member first gets MEMBER_ID_REQUIRED and a member id)
-> CompletingRebalance (the leader gets the members' subscriptions and sends the assignment in
SyncGroup) -> Stable; a join, a leave, a changed subscription or a session timeout starts a new
rebalance, and members learn of it from REBALANCE_IN_PROGRESS on Heartbeat. Static members
(KIP-345, `group.instance.id`, JoinGroup v5+) join without the MEMBER_ID_REQUIRED round trip, and one
that comes back (a restart) takes its old member id's place and assignment; in a Stable group whose
protocol stays the same that is no rebalance (GroupCoordinator.updateStaticMemberAndRebalance), and
the replaced member id is FENCED_INSTANCE_ID from then on.

Committed offsets and group metadata are records of a real `__consumer_offsets` log in the served
directory, written with kbatch (`kbatch.schema.coordinator_records`: Kafka's key and value schemas; key
version 1 with value version 3, group key 2 with value 3, as Kafka writes them) and appended
before the commit is answered; they are read back at start, so a restarted server keeps them and
`kbatch dump` shows them. The partition of a group is Kafka's: abs(Java hashCode(group)) modulo
the number of `__consumer_offsets` partitions (the existing ones, else `offsets_topic_num_partitions`).

Committed offsets expire as Kafka's offsets.retention.minutes says (GroupMetadata.removeExpiredOffsets,
KIP-211): those of an Empty group that used the group protocol once it has been empty for the
retention, those of a group that only commits (no protocol type) each retention after its commit;
an Empty group with no offsets left is forgotten. Both are written as tombstones, checked every
offsets.retention.check.interval.ms.

What differs from Kafka: a restarted server restores each group's generation and protocol but not
its members (they rejoin).
"""
from __future__ import annotations

import asyncio
import collections
import enum
import logging
import time
import uuid
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Protocol, TypedDict

from ..schema import coordinator_records as cr
from ..record.builder import BatchBuilder

if TYPE_CHECKING:
    from typing_extensions import Required  # typing's from 3.11; kbatch runs on 3.10

    from .partition import Partition

#: a member's supported protocols in its order of preference: [(name, metadata bytes)]
Protocols = list[tuple[str, bytes]]
#: committed offsets asked for: (topic, partition) -> (offset, leader epoch or None/-1, metadata or None)
OffsetsToCommit = dict[tuple[str, int], tuple[int, "int | None", "str | None"]]


class GroupAnswer(TypedDict, total=False):
    """A JoinGroup or SyncGroup answer (the response's fields); error_code is always there."""

    error_code: Required[int]
    member_id: str
    generation_id: int
    protocol_type: str | None
    protocol_name: str | None
    leader: str | None
    members: list[tuple[str, str | None, bytes]]  # the leader's: (member id, group instance id, metadata)
    assignment: bytes

logger = logging.getLogger("kbatch.server.groups")

OFFSETS_TOPIC = "__consumer_offsets"

# Kafka error codes used here
NONE = 0
OFFSET_METADATA_TOO_LARGE = 12
COORDINATOR_NOT_AVAILABLE = 15
ILLEGAL_GENERATION = 22
INCONSISTENT_GROUP_PROTOCOL = 23
INVALID_GROUP_ID = 24
UNKNOWN_MEMBER_ID = 25
INVALID_SESSION_TIMEOUT = 26
REBALANCE_IN_PROGRESS = 27
UNKNOWN_TOPIC_OR_PARTITION = 3
MEMBER_ID_REQUIRED = 79
FENCED_INSTANCE_ID = 82


def _fenced(g: "Group", group_instance_id: str | None, member_id: str) -> bool:
    """A static member's request from a member id its instance id no longer maps to (KIP-345)."""
    if group_instance_id is None:
        return False
    current = g.static_members.get(group_instance_id)
    return current is not None and current != member_id


class GroupState(enum.Enum):
    EMPTY = "Empty"
    PREPARING_REBALANCE = "PreparingRebalance"
    COMPLETING_REBALANCE = "CompletingRebalance"
    STABLE = "Stable"
    DEAD = "Dead"


def java_string_hash(s: str) -> int:
    """Java's String.hashCode (UTF-16 code units), as a signed int32."""
    h = 0
    data = s.encode("utf-16-be")
    for i in range(0, len(data), 2):
        h = (31 * h + ((data[i] << 8) | data[i + 1])) & 0xFFFFFFFF
    return h - (1 << 32) if h >= 1 << 31 else h


def partition_for(group_id: str, num_partitions: int) -> int:
    """GroupCoordinator.partitionFor: Utils.abs(groupId.hashCode) % partitions."""
    h = java_string_hash(group_id)
    return (0 if h == -(1 << 31) else abs(h)) % num_partitions


class Member:
    __slots__ = ("member_id", "group_instance_id", "client_id", "client_host", "session_timeout",
                 "rebalance_timeout", "protocol_type", "protocols", "assignment", "join_future", "sync_future",
                 "expiry")

    def __init__(self, member_id: str, group_instance_id: str | None, client_id: str, client_host: str,
                 session_timeout: int, rebalance_timeout: int, protocol_type: str, protocols: Protocols) -> None:
        self.member_id, self.group_instance_id = member_id, group_instance_id
        self.client_id, self.client_host = client_id, client_host
        self.session_timeout, self.rebalance_timeout = session_timeout, rebalance_timeout
        self.protocol_type, self.protocols = protocol_type, protocols  # [(name, metadata bytes)]
        self.assignment = b""
        self.join_future: asyncio.Future[GroupAnswer] | None = None
        self.sync_future: asyncio.Future[GroupAnswer] | None = None
        self.expiry: asyncio.TimerHandle | None = None

    def metadata(self, protocol: str) -> bytes:
        for name, meta in self.protocols:
            if name == protocol:
                return meta
        return b""


class Group:
    def __init__(self, group_id: str) -> None:
        self.group_id = group_id
        self.state = GroupState.EMPTY
        self.generation = 0
        self.protocol_type: str | None = None
        self.protocol_name: str | None = None
        self.leader_id: str | None = None
        self.members: dict[str, Member] = collections.OrderedDict()
        # members given an id by MEMBER_ID_REQUIRED that have not joined with it yet: id -> their expiry
        self.pending_members: dict[str, asyncio.TimerHandle] = {}
        self.rebalance_timer: asyncio.TimerHandle | None = None
        self.offsets: dict[tuple[str, int], cr.OffsetCommitValue] = {}  # (topic, partition) -> committed
        self.state_timestamp = int(time.time() * 1000)
        # KIP-345 static members: group instance id -> its current member id
        self.static_members: dict[str, str] = {}
        self.initial_delay_until = 0

    def supports(self, protocol_type: str, protocols: Sequence[tuple[str, bytes]]) -> bool:
        if not self.members:
            return bool(protocol_type) and bool(protocols)
        names = {p for p, _ in protocols}
        return protocol_type == self.protocol_type and bool(names & self._candidates())

    def _candidates(self) -> set[str]:
        sets = [set(p for p, _ in m.protocols) for m in self.members.values()]
        return set.intersection(*sets) if sets else set()

    def select_protocol(self) -> str:
        """Kafka's selectProtocol: the candidates all members support, voted by each member's order."""
        candidates = self._candidates()
        votes: collections.Counter[str] = collections.Counter()
        for m in self.members.values():
            for name, _ in m.protocols:
                if name in candidates:
                    votes[name] += 1
                    break
        best = max(votes.values())
        for m in self.members.values():  # ties: the first member's preference, deterministically
            for name, _ in m.protocols:
                if votes.get(name) == best:
                    return name
        raise AssertionError("no protocol")


class OffsetsHost(Protocol):
    """What the coordinator uses of its broker (kbatch.server.broker.Broker implements it): the
    `__consumer_offsets` partitions, and whether the broker writes or is shutting down."""

    read_only: bool
    closing: bool

    def offsets_partitions(self) -> list[Partition]: ...
    async def offsets_partition_for(self, group_id: str) -> Partition: ...
    def has_partition(self, topic: str, index: int) -> bool: ...


class GroupCoordinator:
    def __init__(self, broker: OffsetsHost, *, initial_rebalance_delay_ms: int = 3000, min_session_timeout_ms: int = 6000,
                 max_session_timeout_ms: int = 1800000, max_metadata_bytes: int = 4096,
                 offsets_retention_ms: int = 7 * 24 * 3600 * 1000,
                 offsets_retention_check_interval_ms: int = 600000) -> None:
        self.broker = broker
        self.offsets_retention_ms = offsets_retention_ms
        self.offsets_retention_check_interval_ms = offsets_retention_check_interval_ms
        self._cleanup_timer: asyncio.TimerHandle | None = None
        self._cleanup_task: asyncio.Task[None] | None = None
        self.initial_rebalance_delay_ms = initial_rebalance_delay_ms
        self.min_session_timeout_ms = min_session_timeout_ms
        self.max_session_timeout_ms = max_session_timeout_ms
        self.max_metadata_bytes = max_metadata_bytes
        self.groups: dict[str, Group] = {}
        self._write_lock: asyncio.Lock | None = None

    # ---- persistence
    def load(self) -> None:
        """Read every `__consumer_offsets` partition: the last record per key wins, tombstones delete."""
        for part in self.broker.offsets_partitions():
            for batch in part.log.batches(verify_crc=True):
                if batch.is_control:
                    continue
                for rec in batch:
                    if rec.key is None:
                        continue
                    try:
                        record = cr.decode(bytes(rec.key), None if rec.value is None else bytes(rec.value))
                    except Exception as e:
                        logger.warning("Skipping an unreadable %s record at offset %d of %s: %s", OFFSETS_TOPIC,
                                       rec.offset, part.name, e)
                        continue
                    self._replay(record)

    def _replay(self, record: cr.GroupRecord) -> None:
        key, value = record
        if isinstance(key, cr.OffsetCommitKey):
            g = self._group(key.group)
            if value is None:
                g.offsets.pop((key.topic, key.partition), None)
            elif isinstance(value, cr.OffsetCommitValue):
                g.offsets[(key.topic, key.partition)] = value
        elif isinstance(key, cr.GroupMetadataKey):
            if value is None:
                self.groups.pop(key.group, None)
            elif isinstance(value, cr.GroupMetadataValue):
                g = self._group(key.group)
                g.generation = value.generation
                g.protocol_type = value.protocol_type or None
                g.protocol_name = value.protocol
                if value.current_state_timestamp >= 0:
                    g.state_timestamp = value.current_state_timestamp

    def _group(self, group_id: str) -> Group:
        g = self.groups.get(group_id)
        if g is None:
            g = self.groups[group_id] = Group(group_id)
        return g

    async def _append(self, group_id: str, records: Iterable[tuple[cr.ClassicGroupKey, cr.ClassicGroupValue]]) -> None:
        """Append (key, value) coordinator records for a group to its __consumer_offsets partition."""
        if self.broker.read_only:
            return
        part = await self.broker.offsets_partition_for(group_id)
        now = int(time.time() * 1000)
        b = BatchBuilder(magic=2)
        for key, value in records:
            b.append(now, cr.encode_key(key), cr.encode_value(value))
        data = b.build()
        if self._write_lock is None:
            self._write_lock = asyncio.Lock()
        async with self._write_lock:
            await asyncio.to_thread(self._append_sync, part, data, now)

    @staticmethod
    def _append_sync(part: Partition, data: bytes, now: int) -> None:
        part.log.append(data, now_ms=now, from_client=False)
        part.log.flush()

    def _group_record(self, g: Group) -> tuple[cr.GroupMetadataKey, cr.GroupMetadataValue]:
        members = tuple(cr.MemberMetadata(
            member_id=m.member_id, group_instance_id=m.group_instance_id, client_id=m.client_id,
            client_host=m.client_host, rebalance_timeout=m.rebalance_timeout, session_timeout=m.session_timeout,
            subscription=m.metadata(g.protocol_name) if g.protocol_name else b"", assignment=m.assignment)
            for m in g.members.values())
        value = cr.GroupMetadataValue(protocol_type=g.protocol_type or "", generation=g.generation,
                                      protocol=g.protocol_name, leader=g.leader_id, members=members,
                                      current_state_timestamp=g.state_timestamp)
        return cr.GroupMetadataKey(g.group_id), value

    # ---- JoinGroup
    async def join_group(self, *, group_id: str, member_id: str, group_instance_id: str | None, client_id: str,
                         client_host: str, session_timeout: int, rebalance_timeout: int, protocol_type: str,
                         protocols: Sequence[tuple[str, bytes]], require_known_member_id: bool) -> GroupAnswer:
        if not group_id:
            return GroupAnswer(error_code=INVALID_GROUP_ID, member_id=member_id)
        if not self.min_session_timeout_ms <= session_timeout <= self.max_session_timeout_ms:
            return GroupAnswer(error_code=INVALID_SESSION_TIMEOUT, member_id=member_id)
        g = self._group(group_id)
        if not g.supports(protocol_type, protocols):
            return GroupAnswer(error_code=INCONSISTENT_GROUP_PROTOCOL, member_id=member_id)
        if rebalance_timeout < 0:
            rebalance_timeout = session_timeout
        static_id = g.static_members.get(group_instance_id) if group_instance_id is not None else None
        if member_id and static_id is not None and static_id != member_id:
            # another process took this instance id over (KIP-345): this one is fenced
            return GroupAnswer(error_code=FENCED_INSTANCE_ID, member_id=member_id)
        if not member_id and group_instance_id is not None and static_id is not None:
            # a static member back (a restart) takes its old member's place, assignment and all
            return await self._replace_static_member(g, group_instance_id, static_id,
                                                     f"{client_id}-{uuid.uuid4()}", list(protocols),
                                                     session_timeout, rebalance_timeout)
        if not member_id:
            new_id = f"{client_id}-{uuid.uuid4()}"
            if require_known_member_id and group_instance_id is None:  # static members skip it (KIP-345)
                # a client that never comes back with its id is forgotten after the session timeout
                # (GroupCoordinator's pending-member heartbeat expiry), else every later rebalance
                # would wait for it
                g.pending_members[new_id] = asyncio.get_running_loop().call_later(
                    session_timeout / 1000.0, self._expire_pending, g, new_id)
                return GroupAnswer(error_code=MEMBER_ID_REQUIRED, member_id=new_id)
            member_id = new_id
        elif member_id in g.pending_members:
            g.pending_members.pop(member_id).cancel()
        elif member_id not in g.members:
            return GroupAnswer(error_code=UNKNOWN_MEMBER_ID, member_id=member_id)
        m = g.members.get(member_id)
        loop = asyncio.get_running_loop()
        if m is None:
            m = Member(member_id, group_instance_id, client_id, client_host, session_timeout, rebalance_timeout,
                       protocol_type, list(protocols))
            g.members[member_id] = m
            if group_instance_id is not None:
                g.static_members[group_instance_id] = member_id
            if g.protocol_type is None:
                g.protocol_type = protocol_type
            self._prepare_rebalance(g)
        else:
            changed = list(protocols) != m.protocols
            m.protocols = list(protocols)
            m.session_timeout, m.rebalance_timeout = session_timeout, rebalance_timeout
            if g.state == GroupState.STABLE and not changed and member_id != g.leader_id:
                # a follower rejoining with the same subscription gets the current generation back
                return self._join_response(g, m)
            if g.state in (GroupState.STABLE, GroupState.COMPLETING_REBALANCE):
                self._prepare_rebalance(g)
        fut: asyncio.Future[GroupAnswer] = loop.create_future()
        m.join_future = fut
        self._cancel_expiry(m)
        self._maybe_complete_join(g)
        return await fut

    async def _replace_static_member(self, g: Group, instance_id: str, old_id: str, new_id: str,
                                     protocols: Protocols, session_timeout: int,
                                     rebalance_timeout: int) -> GroupAnswer:
        """GroupCoordinator.updateStaticMemberAndRebalance: the new member id replaces the old one
        (its pending join or sync is answered FENCED_INSTANCE_ID); a stable group whose protocol
        stays the same is not rebalanced: the member gets the current generation back, with the
        leader as it was, so it does not assign (its SyncGroup then returns its old assignment)."""
        old = g.members.pop(old_id)
        self._cancel_expiry(old)
        for fut in (old.join_future, old.sync_future):
            if fut is not None and not fut.done():
                fut.set_result(GroupAnswer(error_code=FENCED_INSTANCE_ID, member_id=old_id, assignment=b""))
        current_leader = g.leader_id
        m = Member(new_id, instance_id, old.client_id, old.client_host, session_timeout, rebalance_timeout,
                   old.protocol_type, protocols)
        m.assignment = old.assignment
        g.members[new_id] = m
        g.static_members[instance_id] = new_id
        if g.leader_id == old_id:
            g.leader_id = new_id
        logger.info("Static member %s of group %s rejoined as %s", instance_id, g.group_id, new_id)
        if g.state == GroupState.STABLE and g.select_protocol() == g.protocol_name:
            self._schedule_expiry(g, m)
            await self._append(g.group_id, [self._group_record(g)])
            return GroupAnswer(error_code=NONE, generation_id=g.generation, protocol_type=g.protocol_type,
                               protocol_name=g.protocol_name, leader=current_leader, member_id=new_id, members=[])
        if g.state in (GroupState.STABLE, GroupState.COMPLETING_REBALANCE):
            self._prepare_rebalance(g)
        joined: asyncio.Future[GroupAnswer] = asyncio.get_running_loop().create_future()
        m.join_future = joined
        self._maybe_complete_join(g)
        return await joined

    def _prepare_rebalance(self, g: Group) -> None:
        if g.state == GroupState.PREPARING_REBALANCE:
            return
        # members waiting for a SyncGroup answer learn that a new rebalance started
        for m in g.members.values():
            if m.sync_future is not None and not m.sync_future.done():
                m.sync_future.set_result(GroupAnswer(error_code=REBALANCE_IN_PROGRESS, assignment=b""))
            m.sync_future = None
        initial = g.state == GroupState.EMPTY
        delay = (self.initial_rebalance_delay_ms if initial
                 else max((m.rebalance_timeout for m in g.members.values()), default=0))
        g.state = GroupState.PREPARING_REBALANCE
        now = int(time.time() * 1000)
        g.state_timestamp = now
        # an empty group waits group.initial.rebalance.delay.ms for more members (InitialDelayedJoin)
        g.initial_delay_until = now + delay if initial else 0
        loop = asyncio.get_running_loop()
        if g.rebalance_timer is not None:
            g.rebalance_timer.cancel()
        g.rebalance_timer = loop.call_later(delay / 1000.0, self._rebalance_deadline, g, now)

    def _rebalance_deadline(self, g: Group, started: int) -> None:
        if g.state != GroupState.PREPARING_REBALANCE or g.state_timestamp != started:
            return
        # members that did not rejoin in time are removed (GroupCoordinator.onCompleteJoin)
        for mid, m in list(g.members.items()):
            if m.join_future is None:
                self._remove_member(g, mid)
        g.rebalance_timer = None
        self._complete_join(g)

    def _maybe_complete_join(self, g: Group) -> None:
        if g.state != GroupState.PREPARING_REBALANCE:
            return
        all_joined = all(m.join_future is not None for m in g.members.values()) and not g.pending_members
        if all_joined and time.time() * 1000 >= g.initial_delay_until:
            if g.rebalance_timer is not None:
                g.rebalance_timer.cancel()
                g.rebalance_timer = None
            self._complete_join(g)

    def _complete_join(self, g: Group) -> None:
        g.generation += 1
        g.state_timestamp = int(time.time() * 1000)
        if not g.members:
            g.state = GroupState.EMPTY
            g.protocol_name = None
            g.leader_id = None
            asyncio.ensure_future(self._append(g.group_id, [self._group_record(g)]))
            return
        g.protocol_name = g.select_protocol()
        if g.leader_id not in g.members:
            g.leader_id = next(iter(g.members))
        g.state = GroupState.COMPLETING_REBALANCE
        for m in g.members.values():
            fut, m.join_future = m.join_future, None
            if fut is not None and not fut.done():
                fut.set_result(self._join_response(g, m))
            self._schedule_expiry(g, m)

    def _join_response(self, g: Group, m: Member) -> GroupAnswer:
        members = []
        if m.member_id == g.leader_id and g.protocol_name is not None:
            members = [(x.member_id, x.group_instance_id, x.metadata(g.protocol_name)) for x in g.members.values()]
        return GroupAnswer(error_code=NONE, generation_id=g.generation, protocol_type=g.protocol_type,
                    protocol_name=g.protocol_name, leader=g.leader_id, member_id=m.member_id, members=members)

    # ---- SyncGroup
    async def sync_group(self, *, group_id: str, generation_id: int, member_id: str, protocol_type: str | None = None,
                         protocol_name: str | None = None, assignments: Iterable[tuple[str, bytes]] = (),
                         group_instance_id: str | None = None) -> GroupAnswer:
        g = self.groups.get(group_id)
        if g is not None and _fenced(g, group_instance_id, member_id):
            return GroupAnswer(error_code=FENCED_INSTANCE_ID, assignment=b"")
        if g is None or member_id not in g.members:
            return GroupAnswer(error_code=UNKNOWN_MEMBER_ID, assignment=b"")
        if generation_id != g.generation:
            return GroupAnswer(error_code=ILLEGAL_GENERATION, assignment=b"")
        if (protocol_type is not None and protocol_type != g.protocol_type) or \
                (protocol_name is not None and protocol_name != g.protocol_name):
            return GroupAnswer(error_code=INCONSISTENT_GROUP_PROTOCOL, assignment=b"")
        m = g.members[member_id]
        self._schedule_expiry(g, m)
        if g.state == GroupState.PREPARING_REBALANCE:
            return GroupAnswer(error_code=REBALANCE_IN_PROGRESS, assignment=b"")
        if g.state == GroupState.STABLE:
            return GroupAnswer(error_code=NONE, assignment=m.assignment)
        if g.state != GroupState.COMPLETING_REBALANCE:
            return GroupAnswer(error_code=UNKNOWN_MEMBER_ID, assignment=b"")
        fut: asyncio.Future[GroupAnswer] = asyncio.get_running_loop().create_future()
        m.sync_future = fut
        if member_id == g.leader_id:
            given = dict(assignments)
            for x in g.members.values():
                x.assignment = given.get(x.member_id, b"")
            generation = g.generation
            await self._append(g.group_id, [self._group_record(g)])
            if g.generation == generation and g.state == GroupState.COMPLETING_REBALANCE:
                g.state = GroupState.STABLE
                g.state_timestamp = int(time.time() * 1000)
                for x in g.members.values():
                    if x.sync_future is not None and not x.sync_future.done():
                        x.sync_future.set_result(GroupAnswer(error_code=NONE, assignment=x.assignment))
                    x.sync_future = None
        return await fut

    # ---- Heartbeat
    def heartbeat(self, *, group_id: str, generation_id: int, member_id: str,
                  group_instance_id: str | None = None) -> int:
        g = self.groups.get(group_id)
        if g is not None and _fenced(g, group_instance_id, member_id):
            return FENCED_INSTANCE_ID
        if g is None or member_id not in g.members:
            return UNKNOWN_MEMBER_ID
        if generation_id != g.generation:
            return ILLEGAL_GENERATION
        self._schedule_expiry(g, g.members[member_id])
        if g.state == GroupState.PREPARING_REBALANCE:
            return REBALANCE_IN_PROGRESS
        return NONE

    # ---- LeaveGroup
    def leave_group(self, group_id: str, member_ids: Iterable[str]) -> list[tuple[str, int]]:
        """[(member id, error code)] for each member asked to leave."""
        g = self.groups.get(group_id)
        out: list[tuple[str, int]] = []
        for mid in member_ids:
            if g is None or mid not in g.members:
                if g is not None and mid in g.pending_members:
                    g.pending_members.pop(mid).cancel()
                    out.append((mid, NONE))
                else:
                    out.append((mid, UNKNOWN_MEMBER_ID))
                continue
            self._remove_member(g, mid)
            out.append((mid, NONE))
        if g is not None and any(e == NONE for _, e in out):
            if g.state in (GroupState.STABLE, GroupState.COMPLETING_REBALANCE) or \
                    (g.state == GroupState.EMPTY and g.members):
                self._prepare_rebalance(g)
            self._maybe_complete_join(g)
            if g.state == GroupState.PREPARING_REBALANCE and not g.members:
                if g.rebalance_timer is not None:
                    g.rebalance_timer.cancel()
                    g.rebalance_timer = None
                self._complete_join(g)
        return out

    def _remove_member(self, g: Group, member_id: str) -> None:
        m = g.members.pop(member_id, None)
        if m is None:
            return
        if m.group_instance_id is not None and g.static_members.get(m.group_instance_id) == member_id:
            del g.static_members[m.group_instance_id]
        self._cancel_expiry(m)
        for fut in (m.join_future, m.sync_future):
            if fut is not None and not fut.done():
                fut.set_result(GroupAnswer(error_code=UNKNOWN_MEMBER_ID, member_id=member_id, assignment=b""))
        if g.leader_id == member_id:
            g.leader_id = next(iter(g.members), None)

    # ---- session timeouts
    def _schedule_expiry(self, g: Group, m: Member) -> None:
        self._cancel_expiry(m)
        m.expiry = asyncio.get_running_loop().call_later(m.session_timeout / 1000.0, self._expire, g, m)

    @staticmethod
    def _cancel_expiry(m: Member) -> None:
        if m.expiry is not None:
            m.expiry.cancel()
            m.expiry = None

    def _expire(self, g: Group, m: Member) -> None:
        if g.members.get(m.member_id) is not m or m.join_future is not None:
            return
        logger.info("Member %s of group %s has failed, removing it from the group (session timeout %d ms)",
                    m.member_id, g.group_id, m.session_timeout)
        self._remove_member(g, m.member_id)
        if g.state in (GroupState.STABLE, GroupState.COMPLETING_REBALANCE):
            self._prepare_rebalance(g)
        self._maybe_complete_join(g)
        if g.state == GroupState.PREPARING_REBALANCE and not g.members:
            self._complete_join(g)

    def _expire_pending(self, g: Group, member_id: str) -> None:
        if g.pending_members.pop(member_id, None) is None:
            return
        logger.info("Pending member %s of group %s has failed to join within the session timeout, "
                    "removing it", member_id, g.group_id)
        self._maybe_complete_join(g)

    # ---- offsets
    async def commit_offsets(self, *, group_id: str, generation_id: int, member_id: str,
                             offsets: OffsetsToCommit) -> dict[tuple[str, int], int]:
        """offsets: {(topic, partition): (offset, leader_epoch, metadata)} -> {(topic, partition): error}"""
        g = self.groups.get(group_id)
        if not group_id:
            return {tp: INVALID_GROUP_ID for tp in offsets}
        if g is None or not g.members:
            # no members: only "simple" commits (generation -1) from consumers that assign themselves
            if generation_id >= 0:
                return {tp: ILLEGAL_GENERATION if g is None else UNKNOWN_MEMBER_ID for tp in offsets}
        elif member_id not in g.members:
            return {tp: UNKNOWN_MEMBER_ID for tp in offsets}
        elif generation_id != g.generation:
            return {tp: ILLEGAL_GENERATION for tp in offsets}
        elif g.state == GroupState.COMPLETING_REBALANCE:
            # the member and generation are valid only once it has its JoinGroup answer: it will
            # sync next (ClassicGroup.validateOffsetCommit checks member, generation, then this)
            return {tp: REBALANCE_IN_PROGRESS for tp in offsets}
        g = self._group(group_id)
        now = int(time.time() * 1000)
        result: dict[tuple[str, int], int] = {}
        records: list[tuple[cr.OffsetCommitKey, cr.OffsetCommitValue]] = []
        for (topic, partition), (offset, epoch, metadata) in offsets.items():
            if metadata is not None and len(metadata.encode("utf-8")) > self.max_metadata_bytes:
                result[(topic, partition)] = OFFSET_METADATA_TOO_LARGE
                continue
            if not self.broker.has_partition(topic, partition):
                result[(topic, partition)] = UNKNOWN_TOPIC_OR_PARTITION
                continue
            value = cr.OffsetCommitValue(offset=offset, metadata=metadata or "", commit_timestamp=now,
                                         leader_epoch=epoch if epoch is not None else -1)
            records.append((cr.OffsetCommitKey(group_id, topic, partition), value))
            result[(topic, partition)] = NONE
        if records:
            await self._append(group_id, records)
            for key, value in records:
                g.offsets[(key.topic, key.partition)] = value
        return result

    def fetch_offsets(self, group_id: str, partitions: Iterable[tuple[str, int]] | None
                      ) -> list[tuple[tuple[str, int], cr.OffsetCommitValue | None]]:
        """partitions: [(topic, partition)] or None for all -> [((topic, partition), OffsetCommitValue | None)]"""
        g = self.groups.get(group_id)
        offsets = g.offsets if g is not None else {}
        if partitions is None:
            return sorted(offsets.items())
        return [(tp, offsets.get(tp)) for tp in partitions]

    # ---- offsets.retention.minutes (GroupMetadataManager.cleanupGroupMetadata)
    def start_cleanup(self) -> None:
        """Check for expired offsets and groups every offsets_retention_check_interval_ms (on the
        running event loop, until shutdown)."""
        loop = asyncio.get_running_loop()
        self._cleanup_timer = loop.call_later(self.offsets_retention_check_interval_ms / 1000.0, self._cleanup_due)

    def _cleanup_due(self) -> None:
        self._cleanup_task = asyncio.ensure_future(self._cleanup_and_reschedule())

    async def _cleanup_and_reschedule(self) -> None:
        try:
            await self.cleanup_group_metadata(int(time.time() * 1000))
        except Exception:  # a failed write is retried at the next check; serving goes on
            logger.exception("Expiring group metadata failed")
        if not self.broker.closing:
            self.start_cleanup()

    async def cleanup_group_metadata(self, now: int) -> tuple[int, int]:
        """Expire offsets and forget Empty groups left without any; (offsets, groups) removed."""
        expired_offsets = expired_groups = 0
        for group_id, g in list(self.groups.items()):
            if g.members or g.pending_members or g.state != GroupState.EMPTY:
                continue  # a live group keeps its offsets (kbatch does not track subscriptions)
            if g.protocol_type is not None:
                gone = list(g.offsets) if now - g.state_timestamp >= self.offsets_retention_ms else []
            else:
                gone = [tp for tp, v in g.offsets.items() if (v.expire_timestamp if v.expire_timestamp >= 0
                        else v.commit_timestamp + self.offsets_retention_ms) <= now]
            records: list[tuple[cr.ClassicGroupKey, cr.ClassicGroupValue]] = [
                (cr.OffsetCommitKey(group_id, t, p), None) for t, p in gone]
            forget = len(gone) == len(g.offsets)
            if forget:
                records.append((cr.GroupMetadataKey(group_id), None))
            if not records:
                continue
            # forgotten before the write, so a member joining meanwhile sees what the log will say
            for tp in gone:
                g.offsets.pop(tp, None)
            expired_offsets += len(gone)
            if forget:
                g.state = GroupState.DEAD
                del self.groups[group_id]
                expired_groups += 1
            await self._append(group_id, records)
        if expired_offsets or expired_groups:
            logger.info("Removed %d expired offsets and %d empty groups", expired_offsets, expired_groups)
        return expired_offsets, expired_groups

    def shutdown(self) -> None:
        if self._cleanup_timer is not None:
            self._cleanup_timer.cancel()
        if self._cleanup_task is not None:
            self._cleanup_task.cancel()
        for g in self.groups.values():
            if g.rebalance_timer is not None:
                g.rebalance_timer.cancel()
            for timer in g.pending_members.values():
                timer.cancel()
            for m in g.members.values():
                self._cancel_expiry(m)
                for fut in (m.join_future, m.sync_future):
                    if fut is not None and not fut.done():
                        fut.cancel()


__all__ = ["GroupCoordinator", "OffsetsHost", "Group", "GroupState", "Member", "partition_for", "java_string_hash", "OFFSETS_TOPIC"]
