"""ListOffsets on real-broker data: the session's Kafka broker (each pinned version) is written by
confluent-kafka (librdkafka) producers, its partition folders are copied while a transaction is
still open, and `kbatch serve` over the copy must answer every ListOffsets query as the broker
answered it: earliest, latest, max timestamp (-3), -4 / -5, times that hit a record, fall between two
timestamps, come after the last or before the first, and timestamps out of order across and
within batches, under both isolation levels (latest under read_committed is the last stable offset,
the open transaction's first offset), at the versions clients send (1, 4, 7, 9).

Where serve's ListOffsets went wrong elsewhere: redpanda#4322 (the LSO where -1 was due), #4473
(v0 given another meaning), #17829 (no max-timestamp lookup)."""
from __future__ import annotations

import shutil
import time
from typing import Any

import pytest

pytest.importorskip("kafka.protocol.api_message", reason="kbatch serve needs kafka-python >= 3 (the serve extra)")
ck = pytest.importorskip("confluent_kafka", reason="the producers and the admin client are confluent-kafka's")

from kbatch.server import serve  # noqa: E402

from support.serve_support import RawClient, request_class  # noqa: E402

MINUTE = 60_000
T0 = int(time.time() * 1000) - 3 * 60 * MINUTE  # well inside any timestamp bound the broker applies
#: partition 0, one batch per list (flushed one by one): duplicate timestamps, a time going back
#: within a batch and across batches, the maximum twice and not at the end, gaps of half an hour
#: (segment.ms below rolls a segment at each, so the lookups cross segments and time indexes)
PLAIN_BATCHES = [
    [T0, T0 + 1000, T0 + 1000],
    [T0 + 30 * MINUTE, T0 + 30 * MINUTE - 500, T0 + 30 * MINUTE + 2000],
    [T0 + 20 * MINUTE, T0 + 60 * MINUTE],
    [T0 + 90 * MINUTE, T0 + 85 * MINUTE, T0 + 90 * MINUTE],
    [T0 + 70 * MINUTE],
]
#: partition 1: a committed transaction, an open one, then plain records after it
TXN_COMMITTED = [T0 + 5 * MINUTE, T0 + 6 * MINUTE]
TXN_OPEN = [T0 + 40 * MINUTE, T0 + 41 * MINUTE]
AFTER_OPEN = [T0 + 50 * MINUTE, T0 + 100 * MINUTE]
_ALL = [t for b in PLAIN_BATCHES for t in b] + TXN_COMMITTED + TXN_OPEN + AFTER_OPEN
TIME_TARGETS = sorted({
    0, T0 - 1,                                              # before the first
    *_ALL,                                                  # each a hit
    *(t + 1 for t in _ALL), *(t - 1 for t in _ALL),         # between two timestamps
    T0 + 20 * MINUTE - 1, T0 + 65 * MINUTE,
    max(_ALL) + 1, max(_ALL) + 10 * MINUTE,                 # after the last
})
SPECIAL = [-1, -2, -3, -4, -5]
#: ListOffsets versions: 1 (the oldest both answer), 4 (leader epochs), 7 (-3), 9 (-4, -5)
VERSIONS = [1, 4, 7, 9]
TOPIC_CONFIG = {"segment.ms": str(10 * MINUTE), "index.interval.bytes": "1"}


def _request(topic: str, target: int, isolation: int) -> Any:
    R = request_class(2)
    return R(replica_id=-1, isolation_level=isolation, timeout_ms=1000, topics=[R.ListOffsetsTopic(
        name=topic, partitions=[R.ListOffsetsTopic.ListOffsetsPartition(
            partition_index=p, current_leader_epoch=-1, timestamp=target, max_num_offsets=1) for p in (0, 1)])])


def _answers(bootstrap: str, topic: str) -> dict[tuple[int, int, int], list[tuple[int, ...]]]:
    """(version, isolation, target) -> per partition (index, error, timestamp, offset, leader epoch)."""
    out: dict[tuple[int, int, int], list[tuple[int, ...]]] = {}
    with RawClient(bootstrap, timeout=30) as c:
        for v in VERSIONS:
            for iso in (0, 1):
                for target in SPECIAL + TIME_TARGETS:
                    if v < 7 and target < -2:  # clients never send these there; versions below
                        continue
                    resp, _ = c.call(_request(topic, target, iso), v)
                    out[(v, iso, target)] = sorted(
                        (p.partition_index, p.error_code, p.timestamp, p.offset, p.leader_epoch)
                        for t in resp.topics for p in t.partitions)
    return out


def _admin_answers(bootstrap: str, topic: str) -> dict[tuple[str, str], list[tuple[int, int]]]:
    """The same through confluent-kafka's AdminClient.list_offsets (what an application calls)."""
    from confluent_kafka import IsolationLevel, TopicPartition
    from confluent_kafka.admin import AdminClient, OffsetSpec

    admin = AdminClient({"bootstrap.servers": bootstrap})
    specs = {"earliest": OffsetSpec.earliest(), "latest": OffsetSpec.latest(),
             "max": OffsetSpec.max_timestamp(), "t20": OffsetSpec.for_timestamp(T0 + 20 * MINUTE),
             "after": OffsetSpec.for_timestamp(max(_ALL) + 1)}
    out = {}
    for name, spec in specs.items():
        for iso in (IsolationLevel.READ_UNCOMMITTED, IsolationLevel.READ_COMMITTED):
            futures = admin.list_offsets({TopicPartition(topic, p): spec for p in (0, 1)}, isolation_level=iso,
                                         request_timeout=30)
            out[(name, str(iso))] = sorted((tp.partition, f.result(timeout=30).offset) for tp, f in futures.items())
    return out


def _produce_plain(bootstrap: str, topic: str) -> None:
    p = ck.Producer({"bootstrap.servers": bootstrap, "linger.ms": 0, "message.timeout.ms": 60000,
                     "enable.idempotence": False, "acks": "all"})
    for batch in PLAIN_BATCHES:
        for i, ts in enumerate(batch):
            p.produce(topic, partition=0, key=b"k%d" % i, value=b"plain-%d" % ts, timestamp=ts)
        assert p.flush(60) == 0


def _produce_after_open(bootstrap: str, topic: str) -> None:
    p = ck.Producer({"bootstrap.servers": bootstrap, "linger.ms": 0, "enable.idempotence": False})
    for ts in AFTER_OPEN:
        p.produce(topic, partition=1, value=b"after-%d" % ts, timestamp=ts)
        assert p.flush(60) == 0


def _transactional(bootstrap: str, topic: str) -> Any:
    """A producer left with a transaction open on partition 1 (after a committed one)."""
    tx = ck.Producer({"bootstrap.servers": bootstrap, "transactional.id": f"lo-{topic}",
                      "transaction.timeout.ms": 600_000, "linger.ms": 0})
    tx.init_transactions(60)
    for stamps, commit in ((TXN_COMMITTED, True), (TXN_OPEN, False)):
        tx.begin_transaction()
        for ts in stamps:
            tx.produce(topic, partition=1, value=b"tx-%d" % ts, timestamp=ts)
        assert tx.flush(60) == 0
        if commit:
            tx.commit_transaction(60)
    return tx


@pytest.fixture(scope="module")
def both(kafka_broker, tmp_path_factory):
    """(broker's answers, serve's answers) over the same partitions, a transaction open in both."""
    from confluent_kafka.admin import AdminClient, NewTopic

    broker = kafka_broker.start()
    topic = f"list-offsets-{broker.version.replace('.', '-')}"
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    for f in admin.create_topics([NewTopic(topic, 2, 1, config=TOPIC_CONFIG)]).values():
        f.result(60)
    _produce_plain(broker.bootstrap, topic)
    tx = _transactional(broker.bootstrap, topic)
    try:
        _produce_after_open(broker.bootstrap, topic)
        root = tmp_path_factory.mktemp("list-offsets-copy")
        want = _answers(broker.bootstrap, topic), _admin_answers(broker.bootstrap, topic)
        for p in (0, 1):
            shutil.copytree(broker.partition_dir(topic, p), root / f"{topic}-{p}")
        # the copy is taken after the answers: nothing was written between (the producers are idle)
        again = _answers(broker.bootstrap, topic)
        assert again == want[0], "the broker's answers moved while the copy was taken"
    finally:
        tx.abort_transaction(60)
    with serve(str(root), listen="127.0.0.1:0", read_only=True) as srv:
        got = _answers(srv.bootstrap, topic), _admin_answers(srv.bootstrap, topic)
    return want, got


def test_the_data_is_what_the_set_needs(both):
    """The broker saw the open transaction (LSO below the high watermark on partition 1), and the
    time lookups land before, inside and after the log."""
    (want, _), _ = both
    latest_uncommitted = dict((p[0], p[3]) for p in want[(9, 0, -1)])
    latest_committed = dict((p[0], p[3]) for p in want[(9, 1, -1)])
    assert latest_uncommitted[0] == latest_committed[0] == sum(map(len, PLAIN_BATCHES))
    # committed txn (2 + marker), open txn (2), then the plain records after it
    assert latest_committed[1] == 3 < latest_uncommitted[1] == 3 + len(TXN_OPEN) + len(AFTER_OPEN)
    offsets = [p[3] for key, parts in want.items() if key[2] >= 0 for p in parts]
    assert 0 in offsets and -1 in offsets and len(set(offsets)) > 5


@pytest.mark.parametrize("version", VERSIONS)
def test_list_offsets_equal_the_broker(both, version):
    (want, _), (got, _) = both
    diffs = [(key, want[key], got.get(key)) for key in want if key[0] == version and got.get(key) != want[key]]
    assert not diffs, "\n".join(f"v{k[0]} isolation {k[1]} target {k[2]}: broker {w}, serve {g}"
                                for k, w, g in diffs[:10])


def test_admin_list_offsets_equal_the_broker(both):
    (_, want), (_, got) = both
    assert got == want
