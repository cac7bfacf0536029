"""kbatch serve with Kafka's own Java clients (kafka-clients of the pinned Kafka versions, 4.4.0 and
3.9.2, from the cached distribution; tests/support/java/KafkaDriver.java and ServeClientDriver.java
compiled against its jars), over loopback, each run in a subprocess with a timeout.

A read-only server over a log directory holding several partitions written in every codec with a
leader epoch, and a partition of transactions (committed, aborted, one still open):
- KafkaConsumer.assign: every record, read_committed and read_uncommitted, equals kbatch's read path
  (`kbatch.log.fetch.read_log`), leader epochs included; beginningOffsets / endOffsets (the last
  stable offset for read_committed); offsetsForTimes equals `Log.offsets_for_times`; seek;
- KafkaConsumer.subscribe in a classic group: commitSync, committed; a second member of the group
  resumes at the commits, which carry leader epochs, so the client validates its position with
  OffsetForLeaderEpoch; the consumer reads through fetch sessions (KIP-227);
- Admin: describeCluster, describeTopics, describeConfigs (topics and the broker), listOffsets
  (earliest, latest, maxTimestamp, times) against `Log.offset_for`;
and a writable server: KafkaProducer, idempotent, acks=all, one producer per codec, records back from
disk byte for byte in batches of that codec.

Every consumer names group.protocol=classic: serve answers the classic group protocol, not KIP-848's
ConsumerGroupHeartbeat (docs/serve.md)."""
from __future__ import annotations

import logging
import os
import shutil

import pytest

pytest.importorskip("kafka.protocol.api_message", reason="kbatch serve needs kafka-python >= 3 (the serve extra)")

import kbatch  # noqa: E402
from kbatch import _wire as W  # noqa: E402
from kbatch.log.fetch import IsolationLevel, read_log  # noqa: E402
from kbatch.server import serve  # noqa: E402

from support.kafka_broker import KafkaUnavailable  # noqa: E402
from support.kafka_driver import (SERVE_SOURCE, JavaDriver, Send, consume, create_topics, list_offsets,  # noqa: E402
                                  produce, read_consumed)
from support.serve_support import NOW, RawClient, request_class, write_transactions  # noqa: E402

RUN_TIMEOUT = 240.0
EPOCH = 3            # the leader epoch the data partitions' batches carry (as a broker's would)
PARTITIONS = 3
START_TS = NOW - 3_600_000
CODECS = [W.Compression.NONE, W.Compression.GZIP, W.Compression.SNAPPY, W.Compression.LZ4, W.Compression.ZSTD]
TIME_TARGETS = [0, START_TS + 7_500, START_TS + 30_000, START_TS + 10_000_000]
SEEKS = [0, 7, 1000]


def _write_data(root: str) -> None:
    """Topic "t": PARTITIONS partitions of 6 batches (codecs cycling, a different count per
    partition), leader epoch EPOCH from offset 0; topic "tx": committed, aborted and open
    transactions (support.serve_support.write_transactions)."""
    for p in range(PARTITIONS):
        log = kbatch.Log.create(os.path.join(root, f"t-{p}"), kbatch.LogConfig(segment_bytes=1024), now_ms=NOW)
        try:
            log.assign_epoch_start_offset(EPOCH, 0)
            n = 0
            for b in range(6):
                bb = kbatch.BatchBuilder(magic=2, compression=CODECS[(b + p) % len(CODECS)], timestamp_extended=False)
                for _ in range(3 + p):
                    bb.append(START_TS + n * 1000 + p, b"k%d" % n, b"v-%d-%d-" % (p, n) + bytes(range(n % 40)),
                              headers=[("h", b"%d" % n), ("null", None)])
                    n += 1
                log.append(bb.build(), now_ms=NOW)
        finally:
            log.close()
    write_transactions(root, "tx", 0)


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory):
    root = str(tmp_path_factory.mktemp("serve-java"))
    _write_data(root)
    return root


@pytest.fixture(scope="module")
def server(data_dir):
    with serve(data_dir, listen="127.0.0.1:0", read_only=True, group_initial_rebalance_delay_ms=300) as srv:
        yield srv


@pytest.fixture(scope="module")
def drivers(kafka_dist):
    """(KafkaDriver, ServeClientDriver) compiled against this Kafka version's kafka-clients."""
    try:
        return JavaDriver(kafka_dist), JavaDriver(kafka_dist, SERVE_SOURCE)
    except KafkaUnavailable as e:
        pytest.skip(f"real Kafka: Kafka {kafka_dist.version}: {e}")


def _partitions(root):
    return sorted(d for d in os.listdir(root) if d.rsplit("-", 1)[0] in ("t", "tx"))


def _expected(root, isolation):
    """What a consumer must get from each partition: kbatch's read path."""
    out = {}
    for d in _partitions(root):
        log = kbatch.Log.open(os.path.join(root, d))
        try:
            res = read_log(log, 0, isolation=isolation)
            out[d] = [(r.offset, r.timestamp, None if r.key is None else bytes(r.key),
                       None if r.value is None else bytes(r.value),
                       tuple((k, None if v is None else bytes(v)) for k, v in r.headers),
                       None if b.partition_leader_epoch < 0 else b.partition_leader_epoch)
                      for b, r in res.records()]
        finally:
            log.close()
    return out


def _got(records):
    out = {}
    for c in records:
        out.setdefault(f"{c.topic}-{c.partition}", []).append(
            (c.offset, c.timestamp, c.key, c.value, c.headers, c.leader_epoch))
    return out


def _end_offsets(root, read_committed):
    out = {}
    for d in _partitions(root):
        log = kbatch.Log.open(os.path.join(root, d))
        try:
            res = read_log(log, 0, isolation=IsolationLevel.READ_COMMITTED if read_committed
                           else IsolationLevel.READ_UNCOMMITTED)
            out[d] = res.last_stable_offset if read_committed else res.high_watermark
        finally:
            log.close()
    return out


class _Requests(logging.Handler):
    """The "<API> v<version>" of every request the server logs at DEBUG (connection.py)."""

    def __init__(self):
        super().__init__(logging.DEBUG)
        self.seen: set[str] = set()

    def emit(self, record):
        msg = record.getMessage()
        if " from " in msg:
            self.seen.add(msg.split(" from ")[0])


@pytest.fixture(scope="module")
def runs(drivers, server, tmp_path_factory):
    """Every read-side call, made once per Kafka version: KafkaDriver (consume at both isolation
    levels, Admin listOffsets) and ServeClientDriver (positions at both levels, two members of a
    group one after the other, Admin describe*, a KIP-848 consumer) run side by side, each one JVM.
    What the server was asked (API and version) and its fetch-session counters are kept too."""
    from concurrent.futures import ThreadPoolExecutor

    kafka_driver, serve_driver = drivers
    out = tmp_path_factory.mktemp("java-runs")
    sessions = server.broker.fetch_sessions
    before = (sessions.created, sessions.incremental, sessions.closed)
    requests = _Requests()
    logger = logging.getLogger("kbatch.server")
    level = logger.level
    logger.addHandler(requests)
    logger.setLevel(logging.DEBUG)
    group = f"java-{out.name}"
    try:
        with ThreadPoolExecutor(2) as pool:
            kd = pool.submit(kafka_driver.run, server.bootstrap, [
                consume(["t", "tx"], out / "read_committed.jsonl", "read_committed"),
                consume(["t", "tx"], out / "read_uncommitted.jsonl", "read_uncommitted"),
                list_offsets(["t", "tx"], TIME_TARGETS),
                list_offsets(["t", "tx"], TIME_TARGETS, "read_committed")], timeout=RUN_TIMEOUT)
            sd = pool.submit(serve_driver.run, server.bootstrap, [
                *({"op": "positions", "topics": ["t", "tx"], "isolation": iso, "timestamps": TIME_TARGETS,
                   "seeks": SEEKS} for iso in ("read_committed", "read_uncommitted")),
                *({"op": "group", "topics": ["t", "tx"], "group": group, "isolation": "read_committed",
                   "out": str(out / f"group-{i}.jsonl")} for i in (1, 2)),
                {"op": "describe", "topics": ["t", "tx"]},
                {"op": "group", "topics": ["t"], "group": "kip848", "protocol": "consumer",
                 "out": str(out / "kip848.jsonl")}], timeout=RUN_TIMEOUT)
            consumed_rc, consumed_ru, listed, listed_rc = kd.result()
            pos_rc, pos_ru, group1, group2, described, kip848 = sd.result()
    finally:
        logger.removeHandler(requests)
        logger.setLevel(level)
    return {"consume": {"read_committed": (consumed_rc, read_consumed(out / "read_committed.jsonl")),
                        "read_uncommitted": (consumed_ru, read_consumed(out / "read_uncommitted.jsonl"))},
            "list_offsets": {"read_uncommitted": listed, "read_committed": listed_rc}, "positions": {"read_committed": pos_rc, "read_uncommitted": pos_ru},
            "group": (group1, read_consumed(out / "group-1.jsonl"), group2, read_consumed(out / "group-2.jsonl")),
            "describe": described, "kip848": kip848, "requests": requests.seen,
            "sessions": tuple(a - b for a, b in zip((sessions.created, sessions.incremental, sessions.closed), before))}


@pytest.mark.parametrize("isolation", ["read_committed", "read_uncommitted"])
def test_consumer_assign_reads_what_the_read_path_reads(runs, data_dir, isolation):
    level = IsolationLevel.READ_COMMITTED if isolation == "read_committed" else IsolationLevel.READ_UNCOMMITTED
    r, records = runs["consume"][isolation]
    expected = _expected(data_dir, level)
    got = _got(records)
    assert r["records"] == sum(len(v) for v in expected.values())
    assert got == {k: v for k, v in expected.items() if v}
    # the transactional partition: aborted and open transactions only under read_uncommitted, never markers
    tx = [o for o, *_ in expected["tx-0"]]
    assert tx == ([0, 1, 6] if isolation == "read_committed" else [0, 1, 3, 4, 6, 7, 8])
    assert all(le == EPOCH for part, rows in got.items() if part.startswith("t-") for *_, le in rows)


@pytest.mark.parametrize("isolation", ["read_committed", "read_uncommitted"])
def test_consumer_positions_offsets_for_times_and_seek(runs, data_dir, isolation):
    r = runs["positions"][isolation]
    read_committed = isolation == "read_committed"
    ends = _end_offsets(data_dir, read_committed)
    assert r["end"] == ends
    assert r["beginning"] == {d: 0 for d in _partitions(data_dir)}
    level = IsolationLevel.READ_COMMITTED if read_committed else IsolationLevel.READ_UNCOMMITTED
    expected = _expected(data_dir, level)
    for d in _partitions(data_dir):
        log = kbatch.Log.open(os.path.join(data_dir, d))
        try:
            hits = log.offsets_for_times(TIME_TARGETS)
        finally:
            log.close()
        want = []
        for t, h in zip(TIME_TARGETS, hits):
            if h is None or h.offset >= ends[d]:  # a broker answers only below what the isolation level can fetch
                want.append([t, None, None, None])
            else:
                want.append([t, h.offset, h.timestamp, h.leader_epoch])
        assert r["times"][d] == want, d
        # seek(offset): the first record the consumer then gets is the first record at or after it
        offsets = [o for o, *_ in expected[d]]
        assert r["seeks"][d] == [[s, next((o for o in offsets if o >= s), None)] for s in SEEKS], d


def test_consumer_group_commits_and_resumes(runs, data_dir):
    """Two members one after the other in a classic group: the first reads everything (read_committed)
    and commits; the second resumes at the commits and reads nothing more."""
    r1, first, r2, second = runs["group"]
    expected = _expected(data_dir, IsolationLevel.READ_COMMITTED)
    ends = _end_offsets(data_dir, True)
    assert r1["assigned"] == _partitions(data_dir) == r2["assigned"]
    assert _got(first) == {k: v for k, v in expected.items() if v}
    assert r1["committed"] == ends == r2["committed"]
    assert r2["records"] == 0 and not second


def test_consumer_uses_fetch_sessions_and_epoch_validation(runs):
    """The Java consumers' fetches go through KIP-227 sessions (full, then incremental requests, closed
    when the consumer closes), and the second group member's position, from a commit carrying a
    leader epoch, is validated with OffsetForLeaderEpoch."""
    assert "OffsetForLeaderEpoch v4" in runs["requests"], sorted(runs["requests"])
    created, incremental, closed = runs["sessions"]
    # one session per consumer that fetched (2 consume, 2 positions, 2 group members at least)
    assert created >= 6 and incremental >= created and closed >= 6, runs["sessions"]


def test_kip848_consumer_protocol_is_refused_clearly(runs):
    """serve answers the classic group protocol only: a Java consumer set to group.protocol=consumer
    stops with the client's own explanation (UnsupportedVersionException), never hangs."""
    r = runs["kip848"]
    assert r["error"].startswith("org.apache.kafka.common.errors.UnsupportedVersionException"), r
    assert "group.protocol=classic" in r["error"] or "CONSUMER_GROUP_HEARTBEAT" in r["error"], r


def test_admin_describe_cluster_topics_configs(runs, server):
    r = runs["describe"]
    broker = server.broker
    assert r["cluster"] == {"id": broker.cluster_id, "controller": broker.node_id,
                            "nodes": [[broker.node_id, broker.host, broker.port]]}
    node = broker.node_id
    assert r["topics"] == {
        "t": {"internal": False, "partitions": [[p, node, [node], [node]] for p in range(PARTITIONS)]},
        "tx": {"internal": False, "partitions": [[0, node, [node], [node]]]}}
    topic = r["configs"]["topic:t"]
    # Kafka's names, values as Kafka prints them, and DEFAULT_CONFIG for what nobody set
    assert topic["cleanup.policy"] == ["delete", "DEFAULT_CONFIG", False, False, True]
    assert topic["message.timestamp.type"] == ["CreateTime", "DEFAULT_CONFIG", False, False, True]
    assert topic["segment.bytes"][0] == "1073741824"
    assert topic["max.message.bytes"][0] == str(W.DEFAULT_MAX_MESSAGE_BYTES)
    assert r["configs"]["topic:tx"] == topic
    brk = r["configs"][f"broker:{node}"]
    assert brk["node.id"][:3] == [str(node), "STATIC_BROKER_CONFIG", True]
    assert brk["log.dirs"][0] == broker.directory
    assert brk["log.segment.bytes"][:2] == ["1073741824", "DEFAULT_CONFIG"]


@pytest.mark.parametrize("isolation", ["read_committed", "read_uncommitted"])
def test_admin_list_offsets(runs, data_dir, isolation):
    """Admin.listOffsets: earliest, latest (the last stable offset for read_committed), maxTimestamp
    and times, against the log; a broker answers only below what the isolation level can fetch."""
    r = runs["list_offsets"][isolation]
    ends = _end_offsets(data_dir, isolation == "read_committed")
    for d in _partitions(data_dir):
        log = kbatch.Log.open(os.path.join(data_dir, d))
        try:
            end = log.end_offset()
            mx = log.offset_for(kbatch.MAX_TIMESTAMP)
            hits = log.offsets_for_times(TIME_TARGETS)
        finally:
            log.close()
        got = r["partitions"][d]
        epoch = EPOCH if d.startswith("t-") else None
        assert got["latest"][0] == ends[d] <= end
        assert got["earliest"][0] == 0
        assert got["max_timestamp"] == ([mx.offset, mx.timestamp, epoch] if mx.offset < ends[d] else [-1, -1, None])
        assert got["times"] == [[t, -1, -1, None] if h is None or h.offset >= ends[d]
                                else [t, h.offset, h.timestamp, h.leader_epoch] for t, h in zip(TIME_TARGETS, hits)]
    if isolation == "read_committed":
        assert r["partitions"]["tx-0"]["latest"][0] == 7  # the open transaction's first offset


def test_idempotent_producer_every_codec(drivers, tmp_path):
    """One idempotent producer per codec (acks=all) into a writable server: the offsets it is told,
    and the records and codecs on disk."""
    kafka_driver, _ = drivers
    root = tmp_path / "produce"
    root.mkdir()
    kbatch.Log.create(str(root / "p-0"), kbatch.LogConfig(), now_ms=NOW).close()
    names = ["none", "gzip", "snappy", "lz4", "zstd"]
    sends = [Send("p", 0, b"key-%d-%d" % (i, j), b"%s value %d " % (n.encode(), j) * (j + 1), NOW + j,
                  [("codec", n.encode())], p=i) for i, n in enumerate(names) for j in range(3)]
    steps = []
    for i in range(len(names)):
        steps += [s for s in sends if s.p == i] + [{"p": i, "flush": True}]
    with serve(str(root), listen="127.0.0.1:0", read_only=False) as srv:
        [r] = kafka_driver.run(srv.bootstrap, [produce(
            [{"enable.idempotence": "true", "acks": "all", "compression.type": n, "linger.ms": "50"} for n in names],
            steps)], timeout=RUN_TIMEOUT)
    assert [row[2] for row in r["sent"]] == list(range(len(sends)))
    log = kbatch.Log.open(str(root / "p-0"))
    try:
        batches = list(log.batches())
        got = [(rec.offset, rec.timestamp, bytes(rec.key), bytes(rec.value), [(k, bytes(v)) for k, v in rec.headers])
               for b in batches for rec in b]
        codecs = [W.Compression(b.compression) for b in batches]
        pids = {b.producer_id for b in batches}
        sequences = [(b.producer_id, b.base_sequence, b.record_count) for b in batches]
    finally:
        log.close()
    order = [s for s in steps if isinstance(s, Send)]
    assert got == [(i, s.timestamp, s.key, s.value, s.headers) for i, s in enumerate(order)]
    # each producer's batches (one or more, as its sender drains them) are in its codec
    assert [c for b in batches for c in [dict(rec.headers)["codec"] for rec in b][:1]] == \
        [names[c].encode() for c in codecs]
    assert sorted(set(codecs)) == CODECS
    # idempotent: a producer id each, and each producer's sequences from 0 without a gap
    assert len(pids) == len(names) and min(pids) >= 0
    next_seq: dict[int, int] = {}
    for pid, seq, count in sequences:
        assert seq == next_seq.get(pid, 0), sequences
        next_seq[pid] = seq + count


# ------------------------------------------------------------------------------------ the broker as oracle
def _fetch_req(topics, isolation):
    R = request_class(1)
    return R(replica_id=-1, max_wait_ms=0, min_bytes=0, max_bytes=50 << 20, isolation_level=isolation,
             session_id=0, session_epoch=-1, topics=[R.FetchTopic(topic=t, partitions=[R.FetchTopic.FetchPartition(
                 partition=p, current_leader_epoch=-1, fetch_offset=0, last_fetched_epoch=-1, log_start_offset=-1,
                 partition_max_bytes=50 << 20) for p in ps]) for t, ps in topics.items()],
             forgotten_topics_data=[], rack_id="")


def _list_offsets_req(topic, partitions, target, isolation):
    R = request_class(2)
    return R(replica_id=-1, isolation_level=isolation, timeout_ms=1000, topics=[R.ListOffsetsTopic(
        name=topic, partitions=[R.ListOffsetsTopic.ListOffsetsPartition(
            partition_index=p, current_leader_epoch=-1, timestamp=target, max_num_offsets=1) for p in partitions])])


def _epoch_req(topic, partitions, epoch):
    R = request_class(23)
    T = R.OffsetForLeaderTopic
    return R(replica_id=-1, topics=[T(topic=topic, partitions=[T.OffsetForLeaderPartition(
        partition=p, current_leader_epoch=-1, leader_epoch=epoch) for p in partitions])])


def _configs_req(topic):
    R = request_class(32)
    return R(resources=[R.DescribeConfigsResource(resource_type=2, resource_name=topic, configuration_keys=None),
                        R.DescribeConfigsResource(resource_type=2, resource_name="no-such-topic",
                                                  configuration_keys=None)],
             include_synonyms=True, include_documentation=False)


def _answers(bootstrap, topic, partitions, targets):
    """What one server answers to the same raw requests: Fetch (both isolation levels: high watermark,
    last stable offset, log start, aborted transactions, the record bytes), ListOffsets (every special
    target and some times, both levels), OffsetForLeaderEpoch, DescribeConfigs."""
    out = {}
    with RawClient(bootstrap, timeout=30) as c:
        for iso in (0, 1):
            resp, _ = c.call(_fetch_req({topic: partitions}, iso), 12)
            out[f"fetch-{iso}"] = sorted(
                (p.partition_index, p.error_code, p.high_watermark, p.last_stable_offset, p.log_start_offset,
                 sorted((a.producer_id, a.first_offset) for a in p.aborted_transactions or ()), bytes(p.records or b""))
                for t in resp.responses for p in t.partitions)
            for target in [-1, -2, -3, -4, -5, *targets]:
                resp, _ = c.call(_list_offsets_req(topic, partitions, target, iso), 9)  # v9: -5, and Kafka 3.9 has it
                out[f"list-{iso}-{target}"] = sorted((p.partition_index, p.error_code, p.timestamp, p.offset,
                                                      p.leader_epoch) for t in resp.topics for p in t.partitions)
        for epoch in (0, 1, 7):
            resp, _ = c.call(_epoch_req(topic, partitions, epoch), 4)
            out[f"epoch-{epoch}"] = sorted((p.partition, p.error_code, p.leader_epoch, p.end_offset)
                                           for t in resp.topics for p in t.partitions)
        resp, _ = c.call(_configs_req(topic), 4)
        out["configs"] = {r.resource_name: (r.error_code, {e.name: (e.config_source, [s.name for s in e.synonyms])
                                                           for e in r.configs}) for r in resp.results}
    return out


def test_same_answers_as_the_broker(kafka_broker, drivers, tmp_path):
    """Kafka's Java producer writes transactions (committed, aborted) and plain records into the real
    broker; its partition folders, copied, are served by kbatch: the raw answers (Fetch: last stable
    offset, aborted transactions and record bytes; ListOffsets with every special target; leader
    epochs) are the broker's, and the Java consumer reads the same records from both."""
    kafka_driver, _ = drivers
    broker = kafka_broker.start()
    topic = f"serve-java-{broker.version.replace('.', '-')}"
    t0 = NOW - 600_000
    tx = {"transactional.id": f"tx-{topic}", "enable.idempotence": "true", "acks": "all", "compression.type": "lz4"}
    plain = {"acks": "all", "compression.type": "zstd"}
    steps: list = [{"p": 0, "begin": True}]
    steps += [Send(topic, i % 2, b"c%d" % i, b"committed-%d" % i, t0 + i, p=0) for i in range(4)]
    steps += [{"p": 0, "commit": True}, {"p": 0, "begin": True}]
    steps += [Send(topic, i % 2, b"a%d" % i, b"aborted-%d" % i, t0 + 10 + i, p=0) for i in range(4)]
    steps += [{"p": 0, "abort": True}]
    steps += [Send(topic, i % 2, b"p%d" % i, b"plain-%d" % i, t0 + 20 + i, p=1) for i in range(4)]
    steps += [{"p": 1, "flush": True}, {"p": 0, "begin": True}]
    steps += [Send(topic, i % 2, b"d%d" % i, b"committed-again-%d" % i, t0 + 30 + i, p=0) for i in range(2)]
    steps += [{"p": 0, "commit": True}]
    kafka_driver.run(broker.bootstrap, [create_topics([(topic, 2, {})]), produce([tx, plain], steps)],
                     timeout=RUN_TIMEOUT)
    root = tmp_path / "copy"
    root.mkdir()
    targets = [t0, t0 + 12, t0 + 25, t0 + 10_000]
    want = _answers(broker.bootstrap, topic, [0, 1], targets)
    for p in (0, 1):
        shutil.copytree(broker.partition_dir(topic, p), root / f"{topic}-{p}")
    with serve(str(root), listen="127.0.0.1:0", read_only=True) as srv:
        got = _answers(srv.bootstrap, topic, [0, 1], targets)
        out_serve, out_broker = tmp_path / "serve.jsonl", tmp_path / "broker.jsonl"
        kafka_driver.run(srv.bootstrap, [consume([topic], out_serve, "read_committed")], timeout=RUN_TIMEOUT)
    kafka_driver.run(broker.bootstrap, [consume([topic], out_broker, "read_committed")], timeout=RUN_TIMEOUT)
    # the broker wrote the aborted transaction's marker: both answer the same LSO and aborted list
    assert any(row[5] for row in want["fetch-1"]), want["fetch-1"]
    want_configs, got_configs = want.pop("configs"), got.pop("configs")
    for key in want:
        assert got[key] == want[key], key
    assert read_consumed(out_serve) == read_consumed(out_broker)
    assert len(read_consumed(out_serve)) == 10  # 4 + 4 plain + 2: the aborted 4 are not read
    # DescribeConfigs: the unknown topic's error, and every config serve describes is one the broker
    # describes, with the same broker synonyms
    assert got_configs["no-such-topic"][0] == want_configs["no-such-topic"][0] == 3
    served, known = got_configs[topic][1], want_configs[topic][1]
    assert served and set(served) <= set(known), set(served) - set(known)
    for name, (source, synonyms) in served.items():
        if known[name][0] == 5:  # DEFAULT_CONFIG on the broker too (the fixture sets a few, e.g. log.retention.ms)
            assert (source, synonyms) == known[name], name
