"""The always-on subset of librdkafka's test programs (issue 43), as our own tests with confluent-kafka
(which bundles librdkafka): building librdkafka's test-runner took 4.8 and 9.2 minutes on this 2-core machine (measured:
tools/librdkafka_suite.py build), too long for the default suite, so the full programs run in the
KBATCH_CONFORMANCE=1 tier (tests/server/test_conformance.py) and these repeat the checks of the
consumer, offset, ListOffsets, fetch-session and group programs against a writable server set up as
librdkafka's "default" test scenario (auto-created topics of 4 partitions):

- 0015_offsets_seek: seek to offsets inside each partition, the next message is at that offset;
- 0031_get_offsets: the watermarks queried from the server and cached from fetches;
- 0034_offset_reset: a fetch offset past the end with auto.offset.reset latest / earliest / error;
- 0054_offset_time: offsets_for_times for each produced timestamp, between them and after the last;
- 0030_offset_commit / 0099_commit_metadata: commits (sync, async, with metadata) read back by
  committed() and resumed from by the group's next member;
- 0069_consumer_add_parts / 0051_assign_adds: partitions added to and removed from a running
  assignment (the consumer's fetch session changes under it), every message read once;
- 0113_cooperative_rebalance (its first check): two members of a cooperative-sticky group split the
  partitions, then the survivor of a leave owns them all and reads on;
- 0102_static_group_rebalance (its restart check): a static member (group.instance.id) restarts and
  gets its partitions back without the other member being revoked.
"""
from __future__ import annotations

import time
import uuid

import pytest

pytest.importorskip("kafka.protocol.api_message", reason="kbatch serve needs kafka-python >= 3 (the serve extra)")
ck = pytest.importorskip("confluent_kafka", reason="the subset runs librdkafka through confluent-kafka")

from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition  # noqa: E402

from kbatch.server import serve  # noqa: E402

PARTITIONS = 4
PER_PARTITION = 50
T0 = int(time.time() * 1000) - 3_600_000
STEP_MS = 100


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    root = tmp_path_factory.mktemp("librdkafka-subset")
    with serve(str(root), listen="127.0.0.1:0", read_only=False, auto_create_topics=True,
               num_partitions=PARTITIONS, group_initial_rebalance_delay_ms=0) as srv:
        yield srv


def _produce(bootstrap: str, topic: str) -> dict[int, list[tuple[int, int, bytes]]]:
    """PER_PARTITION messages to each partition, timestamps T0 + i * STEP_MS (auto-creates the topic);
    partition -> [(offset, timestamp, value)] as delivered."""
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, "enable.idempotence": True})
    delivered: dict[int, list[tuple[int, int, bytes]]] = {i: [] for i in range(PARTITIONS)}
    errors: list[str] = []

    def done(err, msg):
        if err is not None:
            errors.append(str(err))
        else:
            delivered[msg.partition()].append((msg.offset(), msg.timestamp()[1], msg.value()))

    for i in range(PER_PARTITION):
        for part in range(PARTITIONS):
            p.produce(topic, value=b"%d:%d" % (part, i), key=b"k%d" % i, partition=part,
                      timestamp=T0 + i * STEP_MS, on_delivery=done)
        p.poll(0)
    assert p.flush(30) == 0
    assert not errors, errors[:3]
    for rows in delivered.values():
        rows.sort()
        assert [o for o, _, _ in rows] == list(range(PER_PARTITION))
    return delivered


@pytest.fixture(scope="module")
def topic(server):
    name = f"subset-{uuid.uuid4().hex[:8]}"
    return name, _produce(server.bootstrap, name)


def _consumer(bootstrap: str, **conf) -> Consumer:
    base = {"bootstrap.servers": bootstrap, "group.id": f"g-{uuid.uuid4().hex[:8]}", "enable.auto.commit": False,
            "auto.offset.reset": "earliest", "enable.partition.eof": True, "session.timeout.ms": 6000,
            "heartbeat.interval.ms": 500, "fetch.wait.max.ms": 100}
    base.update(conf)
    return Consumer(base)


def _drain(c: Consumer, want: int, timeout: float = 20.0) -> list:
    """Messages until `want` are read (errors other than EOF fail)."""
    out: list = []
    deadline = time.monotonic() + timeout
    while len(out) < want and time.monotonic() < deadline:
        m = c.poll(0.2)
        if m is None:
            continue
        if m.error():
            assert m.error().code() == KafkaError._PARTITION_EOF, m.error()
            continue
        out.append(m)
    return out


def test_0015_offsets_seek(server, topic):
    name, delivered = topic
    c = _consumer(server.bootstrap)
    try:
        for part in range(PARTITIONS):
            for target in (0, 7, PER_PARTITION - 1):
                c.assign([TopicPartition(name, part, target)])
                [m] = _drain(c, 1)
                assert (m.partition(), m.offset(), m.value()) == (part, target, delivered[part][target][2])
            c.seek(TopicPartition(name, part, 3))
            [m] = _drain(c, 1)
            assert m.offset() == 3
    finally:
        c.close()


def test_0031_get_offsets(server, topic):
    name, _ = topic
    c = _consumer(server.bootstrap, **{"statistics.interval.ms": 0})
    try:
        for part in range(PARTITIONS):
            assert c.get_watermark_offsets(TopicPartition(name, part), timeout=10, cached=False) == (0, PER_PARTITION)
        c.assign([TopicPartition(name, 0, 0)])
        assert len(_drain(c, PER_PARTITION)) == PER_PARTITION
        # the high watermark the fetches carried, cached by the client
        assert c.get_watermark_offsets(TopicPartition(name, 0), cached=True) == (0, PER_PARTITION)
    finally:
        c.close()


@pytest.mark.parametrize("reset", ["latest", "earliest", "error"])
def test_0034_offset_reset(server, topic, reset):
    name, _ = topic
    c = _consumer(server.bootstrap, **{"auto.offset.reset": reset})
    got, eof, errors = [], None, []
    try:
        c.assign([TopicPartition(name, 1, PER_PARTITION + 5)])  # past the end: out of range
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline and eof is None and not errors:
            m = c.poll(0.2)
            if m is None:
                continue
            if m.error() and m.error().code() == KafkaError._PARTITION_EOF:
                eof = m.offset()
            elif m.error():
                errors.append(m.error().code())
            else:
                got.append(m.offset())
    finally:
        c.close()
    if reset == "latest":
        assert (got, eof, errors) == ([], PER_PARTITION, [])
    elif reset == "earliest":
        assert (got, eof, errors) == (list(range(PER_PARTITION)), PER_PARTITION, [])
    else:
        assert errors == [KafkaError._AUTO_OFFSET_RESET] and not got


def test_0054_offset_time(server, topic):
    name, delivered = topic
    c = _consumer(server.bootstrap)
    try:
        for part in (0, 3):
            for offset, ts, _ in delivered[part][::7]:
                [r] = c.offsets_for_times([TopicPartition(name, part, ts)], timeout=10)
                assert r.offset == offset
                [r] = c.offsets_for_times([TopicPartition(name, part, ts - STEP_MS // 2)], timeout=10)
                assert r.offset == offset  # between two timestamps: the later one's
            last_ts = delivered[part][-1][1]
            [r] = c.offsets_for_times([TopicPartition(name, part, last_ts + 1)], timeout=10)
            assert r.offset == -1  # after the last: the end (OFFSET_END)
            [r] = c.offsets_for_times([TopicPartition(name, part, 0)], timeout=10)
            assert r.offset == 0
    finally:
        c.close()


def test_0030_offset_commit_and_0099_metadata(server, topic):
    name, _ = topic
    group = f"commit-{uuid.uuid4().hex[:8]}"
    c = _consumer(server.bootstrap, **{"group.id": group})
    try:
        c.subscribe([name])
        got = _drain(c, PER_PARTITION * PARTITIONS)
        assert len(got) == PER_PARTITION * PARTITIONS
        c.commit(offsets=[TopicPartition(name, 0, 11, metadata="meta-0")], asynchronous=False)
        c.commit(offsets=[TopicPartition(name, 1, 22)], asynchronous=True)
        c.commit(offsets=[TopicPartition(name, 2, 33, metadata="")], asynchronous=False)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            committed = c.committed([TopicPartition(name, p) for p in range(PARTITIONS)], timeout=10)
            if committed[1].offset == 22:
                break
            time.sleep(0.1)
        assert [(t.partition, t.offset) for t in committed] == [(0, 11), (1, 22), (2, 33), (3, -1001)]
        assert committed[0].metadata == "meta-0"
    finally:
        c.close()
    # the group's next member resumes at the commits
    c = _consumer(server.bootstrap, **{"group.id": group})
    try:
        c.subscribe([name])
        got = _drain(c, (PER_PARTITION - 11) + (PER_PARTITION - 22) + (PER_PARTITION - 33) + PER_PARTITION)
        first = {}
        for m in got:
            first.setdefault(m.partition(), m.offset())
        assert first == {0: 11, 1: 22, 2: 33, 3: 0}
    finally:
        c.close()


def test_0069_assign_adds_and_removes_partitions(server, topic):
    """Incremental assign / unassign while reading: the fetch session gains and loses partitions."""
    name, delivered = topic
    c = _consumer(server.bootstrap)
    seen: dict[int, list[int]] = {}
    try:
        c.assign([TopicPartition(name, 0, 0)])
        for m in _drain(c, 10):
            seen.setdefault(m.partition(), []).append(m.offset())
        c.incremental_assign([TopicPartition(name, 1, 0), TopicPartition(name, 2, 0)])
        for m in _drain(c, 30):
            seen.setdefault(m.partition(), []).append(m.offset())
        c.incremental_unassign([TopicPartition(name, 1)])
        c.incremental_assign([TopicPartition(name, 3, 0)])
        want_rest = sum(PER_PARTITION - len(seen.get(p, [])) for p in (0, 2, 3))
        for m in _drain(c, want_rest):
            seen.setdefault(m.partition(), []).append(m.offset())
        assert not _drain(c, 1, timeout=1.0)  # partition 1 is no longer fetched
    finally:
        c.close()
    for p in (0, 2, 3):
        assert seen[p] == list(range(PER_PARTITION)), p
    assert seen.get(1, []) == list(range(len(seen.get(1, []))))


def test_0113_cooperative_rebalance(server, topic):
    name, _ = topic
    group = f"coop-{uuid.uuid4().hex[:8]}"
    conf = {"group.id": group, "partition.assignment.strategy": "cooperative-sticky"}
    a, b = _consumer(server.bootstrap, **conf), _consumer(server.bootstrap, **conf)
    try:
        a.subscribe([name])
        deadline = time.monotonic() + 20
        while len(a.assignment()) < PARTITIONS and time.monotonic() < deadline:
            a.poll(0.2)
        assert len(a.assignment()) == PARTITIONS
        b.subscribe([name])
        while time.monotonic() < deadline:
            a.poll(0.1)
            b.poll(0.1)
            if len(a.assignment()) + len(b.assignment()) == PARTITIONS and b.assignment() and a.assignment():
                break
        owned_a = {t.partition for t in a.assignment()}
        owned_b = {t.partition for t in b.assignment()}
        assert owned_a and owned_b and owned_a | owned_b == set(range(PARTITIONS)) and not owned_a & owned_b
        b.close()
        deadline = time.monotonic() + 20
        while len(a.assignment()) < PARTITIONS and time.monotonic() < deadline:
            a.poll(0.2)
        assert {t.partition for t in a.assignment()} == set(range(PARTITIONS))
    finally:
        a.close()


def test_0102_static_member_restart_keeps_the_assignment(server, topic):
    """KIP-345: a static member (group.instance.id) that restarts takes its old place without a
    rebalance: the other member keeps its partitions, the restarted one gets its old ones back at
    once (well within session.timeout.ms)."""
    name, _ = topic
    group = f"static-{uuid.uuid4().hex[:8]}"
    events: dict[str, list[str]] = {"a": [], "b": [], "b2": []}

    def consumer(who: str, instance: str) -> Consumer:
        c = _consumer(server.bootstrap, **{"group.id": group, "group.instance.id": instance,
                                           "session.timeout.ms": 6000})
        c.subscribe([name], on_assign=lambda _c, ps: events[who].append("assign"),
                    on_revoke=lambda _c, ps: events[who].append("revoke"))
        return c

    def settle(cs: list[Consumer], want: int, timeout: float = 20.0) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for c in cs:
                c.poll(0.1)
            if sum(len(c.assignment()) for c in cs) == want and all(c.assignment() for c in cs):
                return
        raise AssertionError([c.assignment() for c in cs])

    a, b = consumer("a", "c1"), consumer("b", "c2")
    b2 = None
    try:
        settle([a, b], PARTITIONS)
        owned_a, owned_b = {t.partition for t in a.assignment()}, {t.partition for t in b.assignment()}
        seen_a = list(events["a"])
        b.close()  # a static member sends no LeaveGroup
        t0 = time.monotonic()
        b2 = consumer("b2", "c2")
        settle([a, b2], PARTITIONS)
        took = time.monotonic() - t0
        assert {t.partition for t in b2.assignment()} == owned_b
        assert {t.partition for t in a.assignment()} == owned_a
        assert events["a"] == seen_a, events  # no revoke, no new assignment for the other member
        assert took < 5.0, took
    finally:
        a.close()
        if b2 is not None:
            b2.close()
