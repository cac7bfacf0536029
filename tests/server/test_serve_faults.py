"""What the fault-injection probe of issue 32 found in kbatch serve, one regression test each:
abandoned JoinGroups, one large request stalling every connection, duplicate partitions in a Fetch,
null arrays and unknown codecs raising inside handlers, requests in flight holding unbounded memory,
empty groups never forgotten, a graceful stop printing a CancelledError. Loopback only; every
socket has a timeout and every wait a bound."""
from __future__ import annotations

import logging
import os
import re
import signal
import socket
import struct
import subprocess
import sys
import threading
import time

import pytest

pytest.importorskip("kafka.protocol.api_message", reason="kbatch serve needs kafka-python >= 3 (the serve extra)")

import kbatch  # noqa: E402
from kbatch import _wire as W  # noqa: E402
from kbatch.server import serve  # noqa: E402

from support.serve_support import NOW, RawClient, log_records, request_class, write_topic  # noqa: E402

ApiVersionsRequest = request_class(18)
MetadataRequest = request_class(3)
FetchRequest = request_class(1)
ProduceRequest = request_class(0)
OffsetCommitRequest = request_class(8)
OffsetFetchRequest = request_class(9)
J, S, H, L = request_class(11), request_class(14), request_class(12), request_class(13)


@pytest.fixture
def logdir(tmp_path):
    d = tmp_path / "logs"
    d.mkdir()
    return d


def _errors_logged(caplog):
    return [r for r in caplog.records if r.levelno >= logging.ERROR or r.exc_info]


# ------------------------------------------------------------------------------------ a. pending members
def _join(c, member_id, *, session=300, rebalance=60000, meta=b"m"):
    return c.call(J(group_id="g", session_timeout_ms=session, rebalance_timeout_ms=rebalance, member_id=member_id,
                    group_instance_id=None, protocol_type="consumer",
                    protocols=[J.JoinGroupRequestProtocol(name="range", metadata=meta)]), 5)[0]


def test_a_join_abandoned_after_member_id_required_expires_after_its_session_timeout(logdir):
    """Kafka forgets a pending member after its session timeout; a later rebalance must not wait for it
    (here it would wait the 60 s rebalance timeout, longer than the client's 30 s socket timeout)."""
    write_topic(str(logdir), "t", 0, batches=1)
    with serve(str(logdir), group_initial_rebalance_delay_ms=0, group_min_session_timeout_ms=100) as srv, \
            RawClient(srv.bootstrap, timeout=30) as b, RawClient(srv.bootstrap, timeout=30) as a:
        r = _join(b, "", session=10000)
        assert r.error_code == 79
        member = r.member_id
        r = _join(b, member, session=10000)
        assert r.error_code == 0 and r.generation_id == 1
        r = b.call(S(group_id="g", generation_id=1, member_id=member, group_instance_id=None,
                     assignments=[S.SyncGroupRequestAssignment(member_id=member, assignment=b"a")]), 3)[0]
        assert r.error_code == 0
        # another client gets its member id, then never comes back
        abandoned = _join(a, "", session=300)
        assert abandoned.error_code == 79
        assert srv.call(lambda: list(srv.broker.coordinator.groups["g"].pending_members)) == [abandoned.member_id]
        # the member in the group changes its subscription: a rebalance that must not wait for the other one
        r = _join(b, member, session=10000, meta=b"changed")
        assert r.error_code == 0 and r.generation_id == 2
        assert [m.member_id for m in r.members] == [member]
        assert srv.call(lambda: list(srv.broker.coordinator.groups["g"].pending_members)) == []
        # coming back with the forgotten id is an unknown member, as in Kafka
        assert _join(a, abandoned.member_id, session=300).error_code == 25


# ------------------------------------------------------------------------------------ b. large requests
def _answered_meanwhile(srv, big_request, small_request, small_ok, api_key: int, version: int):
    """Send `big_request` (a frame of more than 2 MB) and, on a second connection, `small_request`
    in a loop until the big answer's first byte arrives: (the big answer decoded, how many small
    requests were answered before it). Ordering, not a time limit."""
    from kbatch.server.protocol import APIS

    events: list[str] = []
    lock = threading.Lock()
    with RawClient(srv.bootstrap, timeout=120) as big, RawClient(srv.bootstrap, timeout=120) as small:
        frame = big.request_bytes(big_request, version)
        assert len(frame) > 2_000_000
        big.send_frame(frame)
        done = threading.Event()

        def other():
            while not done.is_set():
                r, _ = small.call(small_request, version)
                assert small_ok(r)
                with lock:
                    events.append("small")

        t = threading.Thread(target=other, daemon=True)
        t.start()
        head = big._read_exactly(4)  # the server writes its answer once it has worked it all out
        with lock:
            events.append("big")
        answer = big._read_exactly(struct.unpack(">i", head)[0])
        done.set()
        t.join(60)
        assert not t.is_alive()
        (corr,) = struct.unpack_from(">i", answer, 0)
        assert corr == big.correlation_id
        return APIS[api_key].response.decode(answer[5:], version=version), events.index("big")


def test_a_large_metadata_request_does_not_stall_other_connections(logdir, caplog):
    """A Metadata request naming 100,000 topics (2.3 MB) is worked through while another client is answered:
    the other client's requests are answered before the large one (ordering, not a time limit)."""
    write_topic(str(logdir), "t", 0, batches=1)
    names = [f"missing-topic-{i:07d}" for i in range(100_000)]
    req = MetadataRequest(topics=[MetadataRequest.MetadataRequestTopic(name=n, topic_id=None) for n in names],
                          allow_auto_topic_creation=False, include_topic_authorized_operations=False)
    small = MetadataRequest(topics=[MetadataRequest.MetadataRequestTopic(name="t", topic_id=None)],
                            allow_auto_topic_creation=False)
    with serve(str(logdir)) as srv:
        decoded, first = _answered_meanwhile(srv, req, small, lambda r: r.topics[0].error_code == 0, 3, 12)
    assert len(decoded.topics) == 100_000 and {t.error_code for t in decoded.topics} == {3}
    assert first >= 3, f"only {first} small requests were answered first"
    assert not _errors_logged(caplog)


def test_a_fetch_naming_many_partitions_does_not_stall_other_connections(logdir, caplog):
    """The same for a Fetch naming 100,001 distinct partitions (all but one of topics that do not
    exist): reading them takes turns with the other connections."""
    write_topic(str(logdir), "t", 0, batches=4, per_batch=10)
    wanted = [("t", 0, 0)] + [(f"missing-topic-{i:07d}", 0, 0) for i in range(100_000)]
    with serve(str(logdir), read_only=True) as srv:
        decoded, first = _answered_meanwhile(srv, _fetch(wanted), _fetch([("t", 0, 0)]),
                                             lambda r: r.responses[0].partitions[0].error_code == 0, 1, 12)
    got = [(x.topic, p.error_code) for x in decoded.responses for p in x.partitions]
    assert len(got) == 100_001 and got[0] == ("t", 0) and {e for _t, e in got[1:]} == {3}
    assert first >= 3, f"only {first} small requests were answered first"
    assert not _errors_logged(caplog)


def test_a_request_above_socket_request_max_bytes_is_refused_before_it_is_read(logdir):
    write_topic(str(logdir), "t", 0, batches=1)
    with serve(str(logdir), socket_request_max_bytes=1000) as srv:
        with RawClient(srv.bootstrap) as bad:
            bad.send_frame(struct.pack(">i", 1001) + b"\x00" * 1001)
            assert bad.closed_by_server()
        with RawClient(srv.bootstrap) as good:
            assert good.call(ApiVersionsRequest(), 0)[0].error_code == 0
        assert srv.broker.connections.refused == 1


# ------------------------------------------------------------------------------------ c. duplicate partitions
def _fetch(partitions, *, max_bytes=2**31 - 1, part_max=1 << 20):
    R = FetchRequest
    return R(replica_id=-1, max_wait_ms=0, min_bytes=0, max_bytes=max_bytes, isolation_level=0, session_id=0,
             session_epoch=-1, topics=[R.FetchTopic(topic=t, partitions=[R.FetchTopic.FetchPartition(
                 partition=p, current_leader_epoch=-1, fetch_offset=o, last_fetched_epoch=-1, log_start_offset=-1,
                 partition_max_bytes=part_max)]) for t, p, o in partitions], forgotten_topics_data=[], rack_id="")


def _segment(logdir, name="t-0"):
    return (logdir / name / "00000000000000000000.log").read_bytes()


def test_a_fetch_naming_one_partition_2000_times_answers_it_once(logdir):
    """Kafka keys a Fetch's partitions by partition (a LinkedHashMap: the first position, the last
    entry's values): one answer per partition, never 2,000 copies of its records."""
    write_topic(str(logdir), "t", 0, batches=20, per_batch=50)
    write_topic(str(logdir), "u", 0, batches=2, per_batch=5)
    seg = _segment(logdir)
    wanted = [("t", 0, 0)] * 1999 + [("u", 0, 0), ("t", 0, 0)]
    with serve(str(logdir), read_only=True) as srv, RawClient(srv.bootstrap) as c:
        r, body = c.call(_fetch(wanted), 12)
    got = [(t.topic, p.partition_index, bytes(p.records)) for t in r.responses for p in t.partitions]
    assert got == [("t", 0, seg), ("u", 0, _segment(logdir, "u-0"))]
    assert len(body) < len(seg) + 4096


def test_fetch_max_bytes_caps_what_a_client_asks_for(logdir):
    """fetch.max.bytes bounds a response whatever max_bytes the request says: the bytes up to the
    limit (a broker's slice of the segment, a partial batch at its end), the first batch whole even when
    larger (KIP-74), nothing for the partitions after the limit."""
    write_topic(str(logdir), "t", 0, batches=6, per_batch=5)
    write_topic(str(logdir), "u", 0, batches=6, per_batch=5)
    first = next(kbatch.iter_batches(_segment(logdir)))
    with serve(str(logdir), read_only=True, fetch_max_bytes=first.size_in_bytes + 10) as srv, \
            RawClient(srv.bootstrap) as c:
        r, _ = c.call(_fetch([("t", 0, 0), ("u", 0, 0)]), 12)
    parts = [p for t in r.responses for p in t.partitions]
    assert bytes(parts[0].records) == _segment(logdir)[:first.size_in_bytes + 10]
    assert bytes(parts[1].records) == b"" and parts[1].error_code == 0


# ------------------------------------------------------------------------------------ d. null arrays, codecs
def _header(key, version, corr=7):
    return struct.pack(">hhih", key, version, corr, 3) + b"bad"


NULL_FRAMES = [
    # Fetch v4: replica_id, max_wait, min_bytes, max_bytes, isolation, topics = null
    (_header(1, 4) + struct.pack(">iiiibi", -1, 0, 0, 1000, 0, -1), "topics"),
    # Fetch v4 with one topic whose partitions array is null
    (_header(1, 4) + struct.pack(">iiiibi", -1, 0, 0, 1000, 0, 1) + struct.pack(">h", 1) + b"t" + struct.pack(">i", -1),
     "topics[0].partitions"),
    # Produce v3: transactional_id null, acks -1, timeout, topic_data = null
    (_header(0, 3) + struct.pack(">hhii", -1, -1, 1000, -1), "topic_data"),
    # Produce v3 with one topic whose partition_data is null
    (_header(0, 3) + struct.pack(">hhii", -1, -1, 1000, 1) + struct.pack(">h", 1) + b"t" + struct.pack(">i", -1),
     "topic_data[0].partition_data"),
    # ListOffsets v1: replica_id, topics = null
    (_header(2, 1) + struct.pack(">ii", -1, -1), "topics"),
    # Fetch v4, a topic name that is a null string
    (_header(1, 4) + struct.pack(">iiiibi", -1, 0, 0, 1000, 0, 1) + struct.pack(">hi", -1, 0), "topics[0].topic"),
]


@pytest.mark.parametrize("frame, field", NULL_FRAMES, ids=[f"{i}-{f}" for i, (_, f) in enumerate(NULL_FRAMES)])
def test_null_in_a_non_nullable_field_is_an_invalid_request_and_closes_only_that_connection(logdir, caplog, frame,
                                                                                            field):
    """Kafka's parser refuses these ("non-nullable field X was serialized as null": InvalidRequestException)
    and closes the connection; nothing reaches a handler, nothing is logged as an error."""
    write_topic(str(logdir), "t", 0, batches=1)
    with serve(str(logdir), group_initial_rebalance_delay_ms=0) as srv, RawClient(srv.bootstrap) as bad, \
            RawClient(srv.bootstrap) as good:
        bad.send_frame(struct.pack(">i", len(frame)) + frame)
        assert bad.closed_by_server()
        r, _ = good.call(MetadataRequest(topics=None, allow_auto_topic_creation=False), 9)
        assert [t.name for t in r.topics] == ["t"]
        assert srv.broker.connections.refused == 1 and srv.broker.connections.dropped == 0
    assert not _errors_logged(caplog)
    assert any(f"non-nullable field {field} was serialized as null" in r.getMessage() for r in caplog.records)


def _with_codec(data: bytes, codec: int) -> bytes:
    """A v2 batch with its compression bits set to `codec` and its CRC recomputed."""
    b = bytearray(data)
    attrs = struct.unpack_from(">h", b, W.ATTRIBUTES_OFFSET)[0]
    struct.pack_into(">h", b, W.ATTRIBUTES_OFFSET, (attrs & ~W.COMPRESSION_CODEC_MASK) | codec)
    struct.pack_into(">I", b, W.CRC_OFFSET, kbatch.crc32c(bytes(b[W.ATTRIBUTES_OFFSET:])))
    return bytes(b)


@pytest.mark.parametrize("codec", [5, 6, 7])
def test_produce_with_an_unknown_codec_gets_unsupported_compression_type(logdir, caplog, codec):
    write_topic(str(logdir), "t", 0, batches=1)
    bb = kbatch.BatchBuilder(magic=2, timestamp_extended=False)
    bb.append(NOW, b"k", b"v")
    data = _with_codec(bb.build(), codec)
    before = log_records(str(logdir / "t-0"))
    R = ProduceRequest
    req = R(transactional_id=None, acks=-1, timeout_ms=5000, topic_data=[R.TopicProduceData(
        name="t", partition_data=[R.TopicProduceData.PartitionProduceData(index=0, records=data)])])
    with serve(str(logdir)) as srv, RawClient(srv.bootstrap) as c:
        for v in (3, 9):
            r, _ = c.call(req, v)
            p = r.responses[0].partition_responses[0]
            assert p.error_code == 76 and p.base_offset == -1
            assert v < 8 or f"Unknown compression type id: {codec}" in p.error_message
        assert c.call(ApiVersionsRequest(), 0)[0].error_code == 0  # the connection stays open
    assert log_records(str(logdir / "t-0")) == before
    assert not _errors_logged(caplog)


# ------------------------------------------------------------------------------------ e. memory in flight
def test_requests_in_flight_are_bounded_by_queued_max_request_bytes(logdir):
    """Four clients each announce a 400 KB request and send half of it: with a 1 MiB bound, two are
    read and the other two wait without being read; a small request still fits and is answered; when
    a partial sender goes away its memory is given back and a waiting one is read."""
    write_topic(str(logdir), "t", 0, batches=1)
    size = 400_000
    with serve(str(logdir), queued_max_request_bytes=1 << 20) as srv:
        pool = srv.broker.request_memory
        partial = []
        for _ in range(4):
            s = socket.create_connection(("127.0.0.1", srv.port), timeout=10)
            s.sendall(struct.pack(">i", size) + b"\x00" * (size // 2))
            partial.append(s)
        with RawClient(srv.bootstrap) as c:
            assert c.call(ApiVersionsRequest(), 0)[0].error_code == 0
        deadline = time.monotonic() + 30
        while srv.call(lambda: pool.used) != 2 * size and time.monotonic() < deadline:
            time.sleep(0.05)
        assert srv.call(lambda: pool.used) == 2 * size  # two admitted, two waiting for room
        partial[0].close()
        partial[1].close()
        while srv.call(lambda: pool.used) != 2 * size or srv.broker.connections.lost < 2:
            assert time.monotonic() < deadline
            time.sleep(0.05)
        for s in partial[2:]:
            s.close()
        while srv.call(lambda: pool.used) != 0:
            assert time.monotonic() < deadline
            time.sleep(0.05)
        assert srv.broker.connections.lost == 4
        with RawClient(srv.bootstrap) as c:
            assert c.call(ApiVersionsRequest(), 0)[0].error_code == 0


def _commit(c, group, offset, generation=-1, member=""):
    T = OffsetCommitRequest.OffsetCommitRequestTopic
    return c.call(OffsetCommitRequest(group_id=group, generation_id_or_member_epoch=generation, member_id=member,
                                      group_instance_id=None, retention_time_ms=-1, topics=[T(name="t", partitions=[
                                          T.OffsetCommitRequestPartition(partition_index=0, committed_offset=offset,
                                                                         committed_leader_epoch=-1,
                                                                         committed_metadata="")])]), 8)[0]


def _committed(c, group):
    r, _ = c.call(OffsetFetchRequest(group_id=group, topics=None, require_stable=False), 7)
    return [(t.name, p.partition_index, p.committed_offset) for t in r.topics for p in t.partitions]


def test_empty_groups_and_their_offsets_expire_after_the_retention(logdir):
    """offsets.retention.minutes: a group that only commits loses each offset a retention after its
    commit; an Empty group that used the group protocol loses its offsets a retention after it became
    empty; a group with no offsets left is forgotten, and tombstones make that survive a restart."""
    write_topic(str(logdir), "t", 0, batches=1)
    with serve(str(logdir), group_initial_rebalance_delay_ms=0, group_min_session_timeout_ms=100) as srv, \
            RawClient(srv.bootstrap) as c:
        coordinator = srv.broker.coordinator
        assert _commit(c, "simple", 5).topics[0].partitions[0].error_code == 0
        r = _join(c, "", session=10000)
        member = _join(c, r.member_id, session=10000).member_id
        assert c.call(S(group_id="g", generation_id=1, member_id=member, group_instance_id=None,
                        assignments=[S.SyncGroupRequestAssignment(member_id=member, assignment=b"a")]), 3)[0] \
            .error_code == 0
        assert _commit(c, "g", 7, generation=1, member=member).topics[0].partitions[0].error_code == 0
        now = int(time.time() * 1000)
        day = 24 * 3600 * 1000
        # within the retention (7 days by default) nothing goes; a live group never loses its offsets
        assert srv.call(coordinator.cleanup_group_metadata, now + day) == (0, 0)
        assert srv.call(coordinator.cleanup_group_metadata, now + 30 * day) == (1, 1)  # "simple" only
        assert _committed(c, "simple") == [] and _committed(c, "g") == [("t", 0, 7)]
        assert c.call(L(group_id="g", member_id=member), 2)[0].error_code == 0
        assert srv.call(lambda: coordinator.groups["g"].state.value) == "Empty"
        assert srv.call(coordinator.cleanup_group_metadata, int(time.time() * 1000) + day) == (0, 0)
        assert srv.call(coordinator.cleanup_group_metadata, int(time.time() * 1000) + 8 * day) == (1, 1)
        assert srv.call(lambda: sorted(coordinator.groups)) == []
    with serve(str(logdir), read_only=True) as srv, RawClient(srv.bootstrap) as c:
        assert _committed(c, "g") == [] and _committed(c, "simple") == []
        assert srv.call(lambda: sorted(srv.broker.coordinator.groups)) == []


def test_the_retention_check_runs_by_itself(logdir):
    write_topic(str(logdir), "t", 0, batches=1)
    with serve(str(logdir), offsets_retention_minutes=0, offsets_retention_check_interval_ms=50) as srv, \
            RawClient(srv.bootstrap) as c:
        assert _commit(c, "once", 3).topics[0].partitions[0].error_code == 0
        deadline = time.monotonic() + 30
        while srv.call(lambda: "once" in srv.broker.coordinator.groups):
            assert time.monotonic() < deadline, "the retention check never removed the group"
            time.sleep(0.05)
        assert _committed(c, "once") == []


# ------------------------------------------------------------------------------------ e. graceful stop
@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_a_graceful_stop_with_an_idle_client_prints_no_traceback(logdir, sig):
    pytest.importorskip("typer", reason="the CLI needs the cli extra")
    write_topic(str(logdir), "t", 0, batches=1)
    proc = subprocess.Popen([sys.executable, "-m", "kbatch.cli", "serve", str(logdir), "--listen", "127.0.0.1:0",
                             "--read-only", "--offsets-retention-minutes", "1", "--queued-max-request-bytes", "1048576",
                             "--fetch-max-bytes", "1000000"], stderr=subprocess.PIPE, text=True)
    try:
        bootstrap = None
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and bootstrap is None:
            m = re.search(r" on (127\.0\.0\.1:\d+)", proc.stderr.readline())
            bootstrap = m.group(1) if m else None
        assert bootstrap, "no listening line on stderr"
        idle = [RawClient(bootstrap) for _ in range(3)]
        idle[0].call(ApiVersionsRequest(), 0)  # one has talked, the others only connected
        half = idle[1]
        half.send_frame(struct.pack(">i", 100) + b"\x00" * 10)  # and one is inside a request
        proc.send_signal(sig)
        assert proc.wait(30) == 0
        err = proc.stderr.read()
        for c in idle:
            c.close()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)
    assert "Traceback" not in err and "CancelledError" not in err, err
    assert "kbatch serve: stopped" in err


@pytest.mark.parametrize("flag", ["--offsets-retention-minutes", "--queued-max-request-bytes", "--fetch-max-bytes",
                                  "--request-read-timeout-ms"])
def test_serve_limits_below_one_are_usage_errors(logdir, flag):
    pytest.importorskip("typer", reason="the CLI needs the cli extra")
    r = subprocess.run([sys.executable, "-m", "kbatch.cli", "serve", str(logdir), flag, "0"], capture_output=True,
                       text=True, timeout=60)
    assert r.returncode == 2 and f"{flag} must be at least 1, not 0" in r.stderr and "Traceback" not in r.stderr


# ------------------------------------------------------------------------------------ soak
SOAK_S = 90.0 if os.environ.get("KBATCH_SOAK", "").strip() not in ("", "0") else 20.0
SOAK_PRODUCERS, SOAK_PARTITIONS = 3, 4


def _malformed_frames():
    """Valid requests (ApiVersions, Metadata, Fetch, Produce to topic `junk`) to mutate."""
    c = RawClient.__new__(RawClient)
    c.correlation_id = 0
    bb = kbatch.BatchBuilder(magic=2, timestamp_extended=False)
    bb.append(NOW, b"junk", b"junk")
    R = ProduceRequest
    produce = R(transactional_id=None, acks=-1, timeout_ms=1000, topic_data=[R.TopicProduceData(
        name="junk", partition_data=[R.TopicProduceData.PartitionProduceData(index=0, records=bb.build())])])
    return [c.request_bytes(ApiVersionsRequest(), 3), c.request_bytes(MetadataRequest(topics=None,
                                                                                      allow_auto_topic_creation=False), 9),
            c.request_bytes(_fetch([("soak", 0, 0)]), 12), c.request_bytes(produce, 9)] + [
        struct.pack(">i", len(f)) + f for f, _ in NULL_FRAMES]


def _mutate(rng, frame):
    b = bytearray(frame)
    kind = rng.randrange(4)
    if kind == 0:
        for _ in range(rng.randint(1, 8)):
            b[rng.randrange(4, len(b))] = rng.randrange(256)
    elif kind == 1:
        b = b[:rng.randrange(4, len(b))]
        struct.pack_into(">i", b, 0, len(b) - 4)
    elif kind == 2:
        struct.pack_into(">i", b, 0, rng.choice([len(b), len(b) + 100, 1 << 20]))
    return bytes(b)


def test_soak_producers_consumers_and_a_client_sending_malformed_frames(logdir, caplog):
    """Three idempotent producers (acks=all), two consumers assigned two partitions each and one in a
    group read a 4-partition topic at the same time for SOAK_S seconds (KBATCH_SOAK=1: 90 s), while
    another client sends mutated and malformed frames on fresh connections. Every acknowledged record
    is read exactly once by each reader, at the offset acknowledged; nothing else is in the log; the
    server logs no error and drops no connection."""
    ck = pytest.importorskip("confluent_kafka", reason="the soak drives confluent-kafka clients")
    import random

    for p in range(SOAK_PARTITIONS):
        kbatch.Log.create(str(logdir / f"soak-{p}"), kbatch.LogConfig(segment_bytes=1 << 20), now_ms=NOW).close()
    kbatch.Log.create(str(logdir / "junk-0"), kbatch.LogConfig(), now_ms=NOW).close()
    caplog.set_level(logging.WARNING)
    acked: dict[tuple[int, int], bytes] = {}
    failures: list[str] = []
    consumed: dict[str, list[tuple[int, int, bytes]]] = {"assign-a": [], "assign-b": [], "group": []}
    stop_producing = threading.Event()
    produced_all = threading.Event()
    lock = threading.Lock()
    bad_connections = [0]
    with serve(str(logdir), group_initial_rebalance_delay_ms=0) as srv:
        deadline = time.monotonic() + SOAK_S + 120

        def producer(i):
            p = ck.Producer({"bootstrap.servers": srv.bootstrap, "enable.idempotence": True, "acks": "all",
                             "linger.ms": 5, "compression.type": ["none", "lz4", "zstd"][i % 3]})

            def done(err, msg):
                with lock:
                    if err:
                        failures.append(str(err))
                    else:
                        acked[(msg.partition(), msg.offset())] = msg.key()

            seq = 0
            while not stop_producing.is_set():
                for _ in range(200):
                    key = b"p%d-%08d" % (i, seq)
                    p.produce("soak", key=key, value=key * 4, partition=seq % SOAK_PARTITIONS, on_delivery=done)
                    seq += 1
                p.poll(0)
                time.sleep(0.01)
            assert p.flush(60) == 0

        def reader(name, partitions):
            conf = {"bootstrap.servers": srv.bootstrap, "group.id": f"soak-{name}", "auto.offset.reset": "earliest",
                    "enable.auto.commit": name == "group", "fetch.wait.max.ms": 50}
            c = ck.Consumer(conf)
            if partitions is None:
                c.subscribe(["soak"])
            else:
                c.assign([ck.TopicPartition("soak", p, 0) for p in partitions])
            try:
                while time.monotonic() < deadline:
                    for m in c.consume(1000, 0.2):
                        if m.error():
                            with lock:
                                failures.append(f"{name}: {m.error()}")
                            continue
                        consumed[name].append((m.partition(), m.offset(), m.key()))
                    if produced_all.is_set():
                        with lock:
                            want = sum(1 for p, _ in acked if partitions is None or p in partitions)
                        if len(consumed[name]) >= want:
                            break
            finally:
                c.close()

        def malformed():
            rng = random.Random(32)
            frames = _malformed_frames()
            while not stop_producing.is_set():
                frame = _mutate(rng, rng.choice(frames))
                with socket.create_connection(("127.0.0.1", srv.port), timeout=5) as s:
                    s.sendall(frame)
                    s.shutdown(socket.SHUT_WR)
                    try:
                        while s.recv(65536):
                            pass
                    except (ConnectionResetError, socket.timeout):
                        pass
                bad_connections[0] += 1

        threads = [threading.Thread(target=producer, args=(i,)) for i in range(SOAK_PRODUCERS)]
        threads += [threading.Thread(target=reader, args=("assign-a", [0, 1])),
                    threading.Thread(target=reader, args=("assign-b", [2, 3])),
                    threading.Thread(target=reader, args=("group", None)), threading.Thread(target=malformed)]
        for t in threads:
            t.daemon = True
            t.start()
        time.sleep(SOAK_S)
        stop_producing.set()
        for t in threads[:SOAK_PRODUCERS]:
            t.join(90)
        produced_all.set()
        for t in threads[SOAK_PRODUCERS:]:
            t.join(max(1.0, deadline - time.monotonic()))
        assert not any(t.is_alive() for t in threads), "a soak client did not finish in time"
        stats = srv.broker.connections
    print(f"soak: {len(acked)} records acknowledged, read by 3 readers; {bad_connections[0]} malformed-frame "
          f"connections; {stats}")
    assert failures == []
    assert len(acked) > 10_000 and bad_connections[0] > 100
    for p in range(SOAK_PARTITIONS):
        offsets = sorted(o for q, o in acked if q == p)
        assert offsets == list(range(len(offsets)))  # acknowledged at consecutive offsets, nothing lost between
        in_log = [(r[0], r[2]) for r in log_records(str(logdir / f"soak-{p}"))]
        assert in_log == [(o, acked[(p, o)]) for o in offsets]  # the log holds exactly what was acknowledged
    want = sorted((p, o, k) for (p, o), k in acked.items())
    assert sorted(consumed["assign-a"] + consumed["assign-b"]) == want
    assert sorted(consumed["group"]) == want
    assert not _errors_logged(caplog)
    assert stats.dropped == 0 and stats.refused > 0
