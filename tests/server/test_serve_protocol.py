"""kbatch serve over raw sockets: negotiation, every advertised version against a second codec (kio),
Fetch bytes against the segment files, Produce through the validator (KIP-937 error 32),
idempotence, ListOffsets against Log.offset_for, and malformed input that must close only the
offending connection. Loopback only; every socket has a timeout. The tests taking `backend` run the
server on both kernel backends (it runs in this process, on kbatch._backend.core)."""
from __future__ import annotations

import os
import shutil
import socket
import struct
import threading
import time

import pytest

pytest.importorskip("kafka.protocol.api_message", reason="kbatch serve needs kafka-python >= 3 (the serve extra)")

import kbatch  # noqa: E402
from kbatch import _wire as W  # noqa: E402
from kbatch.server import protocol as P  # noqa: E402
from kbatch.server import serve  # noqa: E402

from support.serve_support import (NOW, RawClient, kio_decode, log_records, request_class, write_broker_dir,  # noqa: E402
                           write_topic, write_transactions)

try:
    import kio  # noqa: F401
    HAVE_KIO = True
except ImportError:  # kio needs Python >= 3.11
    HAVE_KIO = False
needs_kio = pytest.mark.skipif(not HAVE_KIO, reason="kio (the second codec) needs Python >= 3.11")

ApiVersionsRequest = request_class(18)
MetadataRequest = request_class(3)
FetchRequest = request_class(1)
ListOffsetsRequest = request_class(2)
ProduceRequest = request_class(0)
InitProducerIdRequest = request_class(22)


@pytest.fixture
def logdir(tmp_path):
    d = tmp_path / "logs"
    d.mkdir()
    return d


@pytest.fixture
def server(logdir):
    records = write_topic(str(logdir), "t", 0, batches=6, per_batch=5)
    with serve(str(logdir), group_initial_rebalance_delay_ms=0) as srv:
        srv.records = records
        yield srv


def fetch_req(topic, partition, offset, version, *, max_bytes=1 << 20, part_max=1 << 20, min_bytes=0, wait=0,
              isolation=0):
    R = FetchRequest
    return R(replica_id=-1, max_wait_ms=wait, min_bytes=min_bytes, max_bytes=max_bytes, isolation_level=isolation,
             session_id=0, session_epoch=-1, topics=[R.FetchTopic(topic=topic, partitions=[R.FetchTopic.FetchPartition(
                 partition=partition, current_leader_epoch=-1, fetch_offset=offset, last_fetched_epoch=-1,
                 log_start_offset=-1, partition_max_bytes=part_max)])], forgotten_topics_data=[], rack_id="")


def list_offsets_req(pairs, version, isolation=0):
    R = ListOffsetsRequest
    topics = {}
    for (topic, partition), ts in pairs:
        topics.setdefault(topic, []).append(R.ListOffsetsTopic.ListOffsetsPartition(
            partition_index=partition, current_leader_epoch=-1, timestamp=ts, max_num_offsets=1))
    return R(replica_id=-1, isolation_level=isolation,
             topics=[R.ListOffsetsTopic(name=t, partitions=ps) for t, ps in topics.items()])


def produce_req(topic, partition, records, acks=-1):
    R = ProduceRequest
    return R(transactional_id=None, acks=acks, timeout_ms=5000, topic_data=[R.TopicProduceData(
        name=topic, partition_data=[R.TopicProduceData.PartitionProduceData(index=partition, records=records)])])


def batch(records, **kw):
    kw.setdefault("timestamp_extended", False)
    b = kbatch.BatchBuilder(magic=2, **kw)
    for ts, key, value in records:
        b.append(ts, key, value)
    return b.build()


# ------------------------------------------------------------------------------------ negotiation
def test_api_versions_every_version_lists_the_table(server):
    with RawClient(server.bootstrap) as c:
        for v in range(0, 5):
            req = ApiVersionsRequest(client_software_name="kbatch-test", client_software_version="1.0")
            resp, body = c.call(req, v)
            assert resp.error_code == 0
            got = {(k.api_key, k.min_version, k.max_version) for k in resp.api_keys}
            assert got == {(a.key, a.min_version, a.max_version) for a in P.APIS.values()}
            if HAVE_KIO:
                obj, again = kio_decode(18, v, "response", body)
                assert again == body  # the second codec writes the same bytes back


def test_api_versions_above_range_is_answered_at_v0_with_its_own_range(server):
    with RawClient(server.bootstrap) as c:
        # ApiVersions v5 (unknown to the server): the body must not be parsed; header v2 of a future version
        frame = struct.pack(">hhih", 18, 5, 77, 4) + b"test" + b"\x00" + b"\xff\xfe-not-parsed"
        c.send_frame(struct.pack(">i", len(frame)) + frame)
        resp = c.read_frame()
        # v0 layout (KIP-511): correlation id, error 35, [api key 18, min 0, max 4], no throttle time
        assert resp == struct.pack(">ihi", 77, 35, 1) + struct.pack(">hhh", 18, 0, 4)
        # the connection stays usable
        r, _ = c.call(ApiVersionsRequest(client_software_name="x", client_software_version="1"), 3)
        assert r.error_code == 0


def test_api_versions_v3_with_invalid_software_name_gets_invalid_request(server):
    # (Kafka answers at the request's version here; only UNSUPPORTED_VERSION is answered at v0)
    with RawClient(server.bootstrap) as c:
        c.send_frame(c.request_bytes(ApiVersionsRequest(client_software_name="-bad name-",
                                                        client_software_version="1"), 3))
        body = c.read_frame()[4:]
        assert body == struct.pack(">hbih", 42, 1, 0, 0)[:-1]  # error 42, no keys, throttle 0, no tags
        if HAVE_KIO:
            obj, again = kio_decode(18, 3, "response", body)
            assert obj.error_code == 42 and again == body


def test_unknown_tagged_field_in_a_flexible_request_is_skipped(server):
    with RawClient(server.bootstrap) as c:
        raw = c.request_bytes(ApiVersionsRequest(client_software_name="kbatch-test", client_software_version="1"), 3)
        assert raw.endswith(b"\x00")  # the body's tagged-field section: none
        raw = raw[:-1] + b"\x01" + b"\x2a" + b"\x03abc"  # one unknown tag (42) with 3 bytes
        raw = struct.pack(">i", len(raw) - 4) + raw[4:]
        c.send_frame(raw)
        frame = c.read_frame()
        from kbatch.server.protocol import APIS
        r = APIS[18].response.decode(frame[4:], version=3)
        assert r.error_code == 0 and len(r.api_keys) == len(APIS)


@pytest.mark.parametrize("frame, why", [
    (struct.pack(">hhih", 999, 0, 1, -1), "unknown api key"),
    (struct.pack(">hhih", 1, 3, 1, -1), "fetch v3 is below the advertised range"),
    (struct.pack(">hhih", 3, 13, 1, -1), "metadata v13 is above the advertised range"),
    (struct.pack(">hhih", 3, 12, 1, -1) + b"\x00\xff\xff\xff\xff\x0f", "metadata body the schema cannot read"),
    (b"\x00\x12", "shorter than a header"),
])
def test_malformed_requests_close_only_their_connection(server, frame, why, caplog):
    with RawClient(server.bootstrap) as bad, RawClient(server.bootstrap) as good:
        good.call(ApiVersionsRequest(), 0)
        bad.send_frame(struct.pack(">i", len(frame)) + frame)
        assert bad.closed_by_server(), why
        r, _ = good.call(MetadataRequest(topics=None, allow_auto_topic_creation=False), 9)
        assert [t.name for t in r.topics] == ["t"]
    assert any("Closing connection" in rec.message for rec in caplog.records)


@pytest.mark.parametrize("prefix", [struct.pack(">i", -5), struct.pack(">i", 200 * 1024 * 1024)])
def test_negative_or_oversized_size_prefix_closes_the_connection(server, prefix):
    with RawClient(server.bootstrap) as bad:
        bad.send_frame(prefix + b"\x00" * 16)
        assert bad.closed_by_server()
    with RawClient(server.bootstrap) as good:
        assert good.call(ApiVersionsRequest(), 0)[0].error_code == 0


def test_truncated_frame_and_abrupt_disconnects_leave_the_server_serving(server):
    for cut in (2, 4, 10):
        s = socket.create_connection(("127.0.0.1", server.port), timeout=5)
        with RawClient(server.bootstrap) as c:
            raw = c.request_bytes(fetch_req("t", 0, 0, 12), 12)
        s.sendall(raw[:cut])
        s.close()
    # a client that asks for a large fetch and disconnects before reading the response
    s = socket.create_connection(("127.0.0.1", server.port), timeout=5)
    with RawClient(server.bootstrap) as c:
        raw = c.request_bytes(fetch_req("t", 0, 0, 12), 12)
    s.sendall(raw)
    s.close()
    with RawClient(server.bootstrap) as c:
        r, _ = c.call(fetch_req("t", 0, 0, 12), 12)
        assert r.responses[0].partitions[0].error_code == 0


# ------------------------------------------------------------------------------------ metadata
def test_metadata_every_version(server):
    with RawClient(server.bootstrap) as c:
        for v in range(0, 13):
            topics = [] if v == 0 else None
            r, body = c.call(MetadataRequest(topics=topics, allow_auto_topic_creation=False), v)
            assert [b.port for b in r.brokers] == [server.port]
            assert [(t.name, t.error_code, [p.partition_index for p in t.partitions]) for t in r.topics] == \
                [("t", 0, [0])]
            if HAVE_KIO:
                _, again = kio_decode(3, v, "response", body)
                assert again == body


def test_metadata_unknown_topic_and_auto_create(logdir):
    write_topic(str(logdir), "t", 0, batches=1)
    R = MetadataRequest
    with serve(str(logdir)) as srv, RawClient(srv.bootstrap) as c:
        r, _ = c.call(R(topics=[R.MetadataRequestTopic(name="nope")], allow_auto_topic_creation=True), 9)
        assert r.topics[0].error_code == 3
    assert not (logdir / "nope-0").exists()
    with serve(str(logdir), auto_create_topics=True, num_partitions=2) as srv, RawClient(srv.bootstrap) as c:
        r, _ = c.call(R(topics=[R.MetadataRequestTopic(name="fresh")], allow_auto_topic_creation=True), 9)
        assert r.topics[0].error_code == 0 and [p.partition_index for p in r.topics[0].partitions] == [0, 1]
    assert (logdir / "fresh-0").is_dir() and (logdir / "fresh-1").is_dir()


# ------------------------------------------------------------------------------------ fetch
def _segment_bytes(logdir, name="t-0"):
    with open(os.path.join(logdir, name, "00000000000000000000.log"), "rb") as f:
        return f.read()


@pytest.mark.parametrize("version", range(4, 13))
def test_fetch_serves_the_segment_bytes_at_every_version(server, logdir, version):
    data = _segment_bytes(logdir)
    with RawClient(server.bootstrap) as c:
        r, body = c.call(fetch_req("t", 0, 0, version), version)
        p = r.responses[0].partitions[0]
        assert p.error_code == 0 and p.high_watermark == 30 and p.last_stable_offset == 30
        assert bytes(p.records) == data
        if HAVE_KIO:
            _, again = kio_decode(1, version, "response", body)
            assert again == body


def test_fetch_from_a_mid_batch_offset_starts_at_its_batch(server, logdir):
    data = _segment_bytes(logdir)
    starts = [b.position for b in kbatch.iter_batches(data)]
    with RawClient(server.bootstrap) as c:
        r, _ = c.call(fetch_req("t", 0, 7, 12), 12)  # offset 7 is inside the second batch (5-9)
        assert bytes(r.responses[0].partitions[0].records) == data[starts[1]:]
        r, _ = c.call(fetch_req("t", 0, 30, 12), 12)  # the log end: nothing, no error
        assert r.responses[0].partitions[0].error_code == 0 and bytes(r.responses[0].partitions[0].records) == b""
        r, _ = c.call(fetch_req("t", 0, 31, 12), 12)
        assert r.responses[0].partitions[0].error_code == 1  # OFFSET_OUT_OF_RANGE
        r, _ = c.call(fetch_req("nope", 0, 0, 12), 12)
        assert r.responses[0].partitions[0].error_code == 3


def test_fetch_max_bytes_smaller_than_a_batch_returns_the_first_batch_whole(server, logdir):
    data = _segment_bytes(logdir)
    first = next(kbatch.iter_batches(data)).size_in_bytes
    with RawClient(server.bootstrap) as c:
        r, _ = c.call(fetch_req("t", 0, 0, 12, max_bytes=10, part_max=10), 12)  # KIP-74
        assert bytes(r.responses[0].partitions[0].records) == data[:first]
        r, _ = c.call(fetch_req("t", 0, 0, 12, part_max=first + 7), 12)  # a partial trailing batch, as Kafka
        assert bytes(r.responses[0].partitions[0].records) == data[:first + 7]


def test_large_fetch_goes_through_sendfile_and_matches_the_library_encoding(logdir):
    from kbatch.server.connection import SENDFILE_MIN_BYTES

    write_topic(str(logdir), "big", 0, batches=40, per_batch=200, step_ms=10)
    data = _segment_bytes(logdir, "big-0")
    assert len(data) > 2 * SENDFILE_MIN_BYTES
    with serve(str(logdir)) as srv, RawClient(srv.bootstrap) as c:
        for v in (4, 11, 12):
            r, body = c.call(fetch_req("big", 0, 0, v, max_bytes=1 << 24, part_max=1 << 24), v)
            assert bytes(r.responses[0].partitions[0].records) == data
            # the same response encoded by the library in one piece, bytes read: identical
            direct = r.encode()
            assert bytes(direct) == body


def test_encode_with_slices_equals_a_whole_encoding(tmp_path):
    path = tmp_path / "seg"
    path.write_bytes(os.urandom(5000))
    fd = os.open(path, os.O_RDONLY)
    try:
        for version in (4, 12):
            R = P.APIS[1].response
            T, PD = R.FetchableTopicResponse, R.FetchableTopicResponse.PartitionData

            def response(records):
                parts = [PD(partition_index=i, error_code=0, high_watermark=9, last_stable_offset=9, log_start_offset=0,
                            aborted_transactions=None, preferred_read_replica=-1, records=r)
                         for i, r in enumerate(records)]
                return R(version=version, throttle_time_ms=0, error_code=0, session_id=0,
                         responses=[T(topic="t", partitions=parts)])

            slices = [P.FileSlice(fd, 10, 300), P.FileSlice(fd, 1000, 4000), P.FileSlice(fd, 0, 0)]
            req = P.Request(P.APIS[1], version, 5, "c", None, 0)
            resp = response([b""] * 3)
            pieces = P.encode_with_slices(req, resp, list(zip(resp.responses[0].partitions, slices)))
            joined = b"".join(p.read() if isinstance(p, P.FileSlice) else p for p in pieces)
            whole = P.encode_response(req, response([s.read() for s in slices]))
            assert joined == bytes(whole)
    finally:
        os.close(fd)


def test_long_poll_wakes_on_append(server):
    got = {}

    def poll():
        with RawClient(server.bootstrap) as c:
            t0 = time.monotonic()
            r, _ = c.call(fetch_req("t", 0, 30, 12, min_bytes=1, wait=8000), 12)
            got["elapsed"] = time.monotonic() - t0
            got["records"] = bytes(r.responses[0].partitions[0].records)

    th = threading.Thread(target=poll)
    th.start()
    time.sleep(0.3)
    with RawClient(server.bootstrap) as c:
        r, _ = c.call(produce_req("t", 0, batch([(NOW, b"k", b"late")])), 9)
        assert r.responses[0].partition_responses[0].base_offset == 30
    th.join(10)
    assert got["elapsed"] < 5 and [bytes(x.value) for x in kbatch.iter_batches(got["records"]).__next__()] == [b"late"]


def test_long_poll_times_out_with_nothing(server):
    with RawClient(server.bootstrap) as c:
        t0 = time.monotonic()
        r, _ = c.call(fetch_req("t", 0, 30, 12, min_bytes=1, wait=300), 12)
        assert 0.25 < time.monotonic() - t0 < 3
        assert bytes(r.responses[0].partitions[0].records) == b""


def test_read_committed_stops_at_the_last_stable_offset_and_lists_aborted_transactions(logdir, backend):
    visible = write_transactions(str(logdir))
    with serve(str(logdir)) as srv, RawClient(srv.bootstrap) as c:
        r, _ = c.call(fetch_req("tx", 0, 0, 12, isolation=1), 12)
        p = r.responses[0].partitions[0]
        assert p.high_watermark == 9 and p.last_stable_offset == 7
        assert [(a.producer_id, a.first_offset) for a in p.aborted_transactions] == [(1001, 3)]
        offsets = [rec.offset for b in kbatch.iter_batches(bytes(p.records)) for rec in b
                   if not b.is_control and not (b.producer_id == 1001)]
        assert offsets == visible and max(b.last_offset for b in kbatch.iter_batches(bytes(p.records))) < 7
        r, _ = c.call(fetch_req("tx", 0, 0, 12, isolation=0), 12)
        p = r.responses[0].partitions[0]
        assert p.aborted_transactions is None and p.last_stable_offset == 7
        assert max(b.last_offset for b in kbatch.iter_batches(bytes(p.records))) == 8
        lo, _ = c.call(list_offsets_req([(("tx", 0), -1)], 7, isolation=1), 7)
        assert lo.topics[0].partitions[0].offset == 7
        lo, _ = c.call(list_offsets_req([(("tx", 0), -1)], 7, isolation=0), 7)
        assert lo.topics[0].partitions[0].offset == 9


# ------------------------------------------------------------------------------------ list offsets
def test_list_offsets_matches_log_offset_for_at_every_version(server, logdir, backend):
    recs = server.records
    first_ts, last_ts = recs[0][1], recs[-1][1]
    targets = [first_ts - 10 ** 6, first_ts, first_ts + 1, recs[12][1], last_ts, last_ts + 1, 0]
    log = kbatch.Log.open(str(logdir / "t-0"))
    try:
        want = {t: log.offset_for(t) for t in targets}
    finally:
        log.close()
    with RawClient(server.bootstrap) as c:
        for v in range(1, 8):
            for t in targets:
                r, body = c.call(list_offsets_req([(("t", 0), t)], v), v)
                p = r.topics[0].partitions[0]
                hit = want[t]
                assert (p.error_code, p.offset, p.timestamp) == \
                    ((0, -1, -1) if hit is None else (0, hit.offset, hit.timestamp)), (v, t)
                if HAVE_KIO:
                    _, again = kio_decode(2, v, "response", body)
                    assert again == body
            r, _ = c.call(list_offsets_req([(("t", 0), -2), (("t", 1), -1)], v), v)
            assert (r.topics[0].partitions[0].offset, r.topics[0].partitions[0].timestamp) == (0, -1)
            assert r.topics[0].partitions[1].error_code == 3
            r, _ = c.call(list_offsets_req([(("t", 0), -1)], v), v)
            assert r.topics[0].partitions[0].offset == 30


def test_list_offsets_special_and_negative_targets(server):
    with RawClient(server.bootstrap) as c:
        r, _ = c.call(list_offsets_req([(("t", 0), -3)], 7), 7)  # MAX_TIMESTAMP (KIP-734)
        p = r.topics[0].partitions[0]
        assert (p.offset, p.timestamp) == (29, server.records[-1][1])
        r, _ = c.call(list_offsets_req([(("t", 0), -3)], 6), 6)  # not before v7
        assert r.topics[0].partitions[0].error_code == 35
        for t in (-4, -5, -7, -(2 ** 63)):  # any other negative target: UNSUPPORTED_VERSION, as Kafka
            r, _ = c.call(list_offsets_req([(("t", 0), t)], 7), 7)
            assert r.topics[0].partitions[0].error_code == 35
        r, _ = c.call(list_offsets_req([(("t", 0), -2), (("t", 0), -2)], 7), 7)  # duplicate partition
        assert [p.error_code for p in r.topics[0].partitions] == [42, 42]


# ------------------------------------------------------------------------------------ produce
@pytest.mark.parametrize("version", range(3, 10))
def test_produce_every_version_appends_what_the_validator_writes(server, logdir, backend, version):
    data = batch([(NOW, b"a", b"1"), (NOW + 1, None, b"2"), (NOW + 2, b"c", None)])
    with RawClient(server.bootstrap) as c:
        r, body = c.call(produce_req("t", 0, data), version)
        pr = r.responses[0].partition_responses[0]
        assert (pr.error_code, pr.base_offset) == (0, 30)
        if HAVE_KIO:
            _, again = kio_decode(0, version, "response", body)
            assert again == body
    got = log_records(str(logdir / "t-0"))[30:]
    assert [(o, ts, k, v) for o, ts, k, v, _ in got] == [(30, NOW, b"a", b"1"), (31, NOW + 1, None, b"2"),
                                                         (32, NOW + 2, b"c", None)]


def test_future_timestamp_gets_error_32_with_kafkas_message_and_nothing_is_appended(logdir, backend):
    write_topic(str(logdir), "t", 0, batches=1)
    before = _segment_bytes(logdir)
    with serve(str(logdir), topic_config={"message.timestamp.after.max.ms": "3600000"}) as srv, \
            RawClient(srv.bootstrap) as c:
        now = int(time.time() * 1000)
        future = now + 2 * 3_600_000
        data = batch([(now, b"ok", b"1"), (future, b"late", b"2")])
        for version in (7, 9):
            r, _ = c.call(produce_req("t", 0, data), version)
            pr = r.responses[0].partition_responses[0]
            assert pr.error_code == 32 and pr.base_offset == -1
            if version >= 8:
                assert pr.error_message == "One or more records have been rejected due to invalid timestamp"
                [e] = pr.record_errors
                assert e.batch_index == 1
                assert e.batch_index_error_message.startswith(f"Timestamp {future} of message with offset 1 is out "
                                                              f"of range. The timestamp should be within [")
    assert _segment_bytes(logdir) == before


def test_read_only_refuses_produce_and_writes_nothing(logdir):
    write_topic(str(logdir), "t", 0, batches=1)
    snapshot = {p: open(os.path.join(dp, p), "rb").read() for dp, _, fs in os.walk(logdir) for p in fs}
    with serve(str(logdir), read_only=True) as srv, RawClient(srv.bootstrap) as c:
        r, _ = c.call(produce_req("t", 0, batch([(NOW, b"k", b"v")])), 9)
        assert r.responses[0].partition_responses[0].error_code == 29
        r, _ = c.call(fetch_req("t", 0, 0, 12), 12)
        assert r.responses[0].partitions[0].error_code == 0
    after = {p: open(os.path.join(dp, p), "rb").read() for dp, _, fs in os.walk(logdir) for p in fs}
    assert after == snapshot


def test_produce_request_rules(server):
    two = batch([(NOW, b"a", b"1")]) + batch([(NOW, b"b", b"2")])
    zstd = batch([(NOW, b"a", b"1")], compression=W.Compression.ZSTD)
    corrupt = bytearray(batch([(NOW, b"a", b"1")]))
    corrupt[-1] ^= 0xFF
    with RawClient(server.bootstrap) as c:
        assert c.call(produce_req("t", 0, two), 9)[0].responses[0].partition_responses[0].error_code == 87
        assert c.call(produce_req("t", 0, zstd), 6)[0].responses[0].partition_responses[0].error_code == 76
        assert c.call(produce_req("t", 0, zstd), 7)[0].responses[0].partition_responses[0].error_code == 0
        assert c.call(produce_req("t", 0, bytes(corrupt)), 9)[0].responses[0].partition_responses[0].error_code == 2
        assert c.call(produce_req("nope", 0, zstd), 9)[0].responses[0].partition_responses[0].error_code == 3
        assert c.call(produce_req("__consumer_offsets", 0, zstd), 9)[0].responses[0] \
            .partition_responses[0].error_code in (3, 17)  # internal topic: never appended to by clients
        # acks=0: no response at all; the next answer belongs to the next request
        c.send_frame(c.request_bytes(produce_req("t", 0, zstd, acks=0), 9))
        r, _ = c.call(ApiVersionsRequest(), 0)
        assert r.error_code == 0
        # a failed acks=0 produce closes the connection, as Kafka does, so the client learns of it
        c.send_frame(c.request_bytes(produce_req("nope", 0, zstd, acks=0), 9))
        assert c.closed_by_server()


def _idem(pid, epoch, seq, values):
    return batch([(NOW, b"k", v) for v in values], producer_id=pid, producer_epoch=epoch, base_sequence=seq)


def test_idempotent_producer_duplicates_gaps_and_epochs(server, logdir, backend):
    with RawClient(server.bootstrap) as c:
        r, _ = c.call(InitProducerIdRequest(transactional_id=None, transaction_timeout_ms=60000), 4)
        pid, epoch = r.producer_id, r.producer_epoch
        assert r.error_code == 0 and pid >= 0 and epoch == 0

        def send(data):
            pr = c.call(produce_req("t", 0, data), 9)[0].responses[0].partition_responses[0]
            return pr.error_code, pr.base_offset

        assert send(_idem(pid, 0, 0, [b"a", b"b"])) == (0, 30)
        assert send(_idem(pid, 0, 2, [b"c"])) == (0, 32)
        assert send(_idem(pid, 0, 0, [b"a", b"b"])) == (0, 30)        # retried duplicate: original offsets
        assert send(_idem(pid, 0, 5, [b"x"]))[0] == 45                 # a gap: OUT_OF_ORDER_SEQUENCE_NUMBER
        assert send(_idem(pid, 1, 3, [b"x"]))[0] == 45                 # a new epoch must start at 0
        assert send(_idem(pid, 1, 0, [b"d"])) == (0, 33)
        assert send(_idem(pid, 0, 3, [b"x"]))[0] == 47                 # fenced: INVALID_PRODUCER_EPOCH
        # a producer id with no state at epoch -1 (NO_PRODUCER_EPOCH): any sequence is taken, as Kafka's
        # ProducerAppendInfo does (this one made the check fail with an AttributeError)
        assert send(_idem(pid + 1, -1, 7, [b"e"])) == (0, 34)
        r, _ = c.call(InitProducerIdRequest(transactional_id=None, transaction_timeout_ms=60000, producer_id=pid,
                                            producer_epoch=1), 4)
        assert (r.producer_id, r.producer_epoch) == (pid, 2)            # KIP-360 epoch bump
        r, _ = c.call(InitProducerIdRequest(transactional_id="tx", transaction_timeout_ms=60000), 4)
        assert r.error_code == 53                                      # no transactions
    values = [v for _, _, _, v, _ in log_records(str(logdir / "t-0"))[30:]]
    assert values == [b"a", b"b", b"c", b"d", b"e"]


def test_producer_state_and_ids_survive_a_restart(logdir):
    write_topic(str(logdir), "t", 0, batches=1)
    with serve(str(logdir)) as srv, RawClient(srv.bootstrap) as c:
        pid = c.call(InitProducerIdRequest(transactional_id=None, transaction_timeout_ms=1), 0)[0].producer_id
        assert c.call(produce_req("t", 0, _idem(pid, 0, 0, [b"once"])), 9)[0].responses[0] \
            .partition_responses[0].base_offset == 5
    with serve(str(logdir)) as srv, RawClient(srv.bootstrap) as c:
        pr = c.call(produce_req("t", 0, _idem(pid, 0, 0, [b"once"])), 9)[0].responses[0].partition_responses[0]
        assert (pr.error_code, pr.base_offset) == (0, 5)
        assert c.call(InitProducerIdRequest(transactional_id=None, transaction_timeout_ms=1), 0)[0].producer_id > pid
    assert [v for _, _, _, v, _ in log_records(str(logdir / "t-0"))].count(b"once") == 1


def test_init_producer_id_every_version(server):
    with RawClient(server.bootstrap) as c:
        ids = set()
        for v in range(0, 5):
            r, body = c.call(InitProducerIdRequest(transactional_id=None, transaction_timeout_ms=1000), v)
            assert r.error_code == 0
            ids.add(r.producer_id)
            if HAVE_KIO:
                _, again = kio_decode(22, v, "response", body)
                assert again == body
        assert len(ids) == 5


# ------------------------------------------------------------------------------------ shutdown
def test_stop_returns_promptly_with_a_long_poll_in_flight(logdir):
    write_topic(str(logdir), "t", 0, batches=1)
    srv = serve(str(logdir)).start()
    c = RawClient(srv.bootstrap)
    c.send_frame(c.request_bytes(fetch_req("t", 0, 5, 12, min_bytes=1, wait=30000), 12))
    time.sleep(0.2)
    t0 = time.monotonic()
    srv.stop()
    assert time.monotonic() - t0 < 5
    c.close()
    # the directory is released: a writer can open it
    log = kbatch.Log.open(str(logdir / "t-0"), kbatch.LogConfig(), writable=True)
    log.close()


def test_copy_of_a_served_directory_is_unchanged_by_reading(logdir, tmp_path):
    write_topic(str(logdir), "t", 0, batches=3)
    copy = tmp_path / "copy"
    shutil.copytree(logdir, copy)
    with serve(str(logdir), read_only=True) as srv, RawClient(srv.bootstrap) as c:
        c.call(fetch_req("t", 0, 0, 12), 12)
        c.call(list_offsets_req([(("t", 0), NOW)], 7), 7)
    for dp, _, fs in os.walk(copy):
        for f in fs:
            rel = os.path.relpath(os.path.join(dp, f), copy)
            assert open(os.path.join(logdir, rel), "rb").read() == open(os.path.join(dp, f), "rb").read()


# ------------------------------------------------------------------------------------ groups, every version
def _group_cycle(c, v_join, v_sync, v_hb, v_leave, v_commit, v_fetch, v_find, group):
    J, S, H, L = request_class(11), request_class(14), request_class(12), request_class(13)
    OC, OF, FC = request_class(8), request_class(9), request_class(10)
    checked = []

    def call(req, v, key):
        r, body = c.call(req, v)
        if HAVE_KIO and v >= _KIO_MIN.get(key, 0):
            _, again = kio_decode(key, v, "response", body)
            assert again == body, (key, v)
            checked.append((key, v))
        return r

    r = call(FC(key=group, key_type=0), v_find, 10)
    assert r.error_code == 0 and r.port == c.sock.getpeername()[1]
    proto = [J.JoinGroupRequestProtocol(name="range", metadata=b"\x00\x01sub")]
    join = J(group_id=group, session_timeout_ms=10000, rebalance_timeout_ms=10000, member_id="",
             group_instance_id=None, protocol_type="consumer", protocols=proto)
    r = call(join, v_join, 11)
    if v_join >= 4:  # KIP-394: an unknown member first gets its id
        assert r.error_code == 79 and r.member_id
        join.member_id = r.member_id
        r = call(join, v_join, 11)
    assert r.error_code == 0 and r.leader == r.member_id and r.generation_id == 1
    assert [(m.member_id, bytes(m.metadata)) for m in r.members] == [(r.member_id, b"\x00\x01sub")]
    member, gen = r.member_id, r.generation_id
    r = call(S(group_id=group, generation_id=gen, member_id=member, group_instance_id=None,
               assignments=[S.SyncGroupRequestAssignment(member_id=member, assignment=b"assigned")]), v_sync, 14)
    assert r.error_code == 0 and bytes(r.assignment) == b"assigned"
    assert call(H(group_id=group, generation_id=gen, member_id=member, group_instance_id=None), v_hb, 12).error_code == 0
    assert call(H(group_id=group, generation_id=gen + 1, member_id=member, group_instance_id=None), v_hb,
                12).error_code == 22
    T = OC.OffsetCommitRequestTopic
    r = call(OC(group_id=group, generation_id_or_member_epoch=gen, member_id=member, group_instance_id=None,
                retention_time_ms=-1, topics=[T(name="t", partitions=[T.OffsetCommitRequestPartition(
                    partition_index=0, committed_offset=17, committed_leader_epoch=0, committed_metadata="md")])]),
             v_commit, 8)
    assert r.topics[0].partitions[0].error_code == 0
    r = call(OF(group_id=group, topics=[OF.OffsetFetchRequestTopic(name="t", partition_indexes=[0, 1])],
                require_stable=False), v_fetch, 9)
    got = [(p.partition_index, p.committed_offset, p.metadata) for p in r.topics[0].partitions]
    assert got == [(0, 17, "md"), (1, -1, "")]
    leave = L(group_id=group, member_id=member, members=[L.MemberIdentity(member_id=member, group_instance_id=None)])
    r = call(leave, v_leave, 13)
    assert r.error_code == 0
    return checked


_KIO_MIN = {8: 2, 9: 1, 11: 2}  # kio (Kafka 4.x schemas) lacks the versions KIP-896 removed


def test_group_apis_every_version(server):
    from kbatch.server.protocol import APIS

    top = max(APIS[k].max_version for k in (8, 9, 10, 11, 12, 13, 14))
    with RawClient(server.bootstrap) as c:
        for i in range(top + 1):
            v = {k: min(max(i, APIS[k].min_version), APIS[k].max_version) for k in (8, 9, 10, 11, 12, 13, 14)}
            _group_cycle(c, v[11], v[14], v[12], v[13], v[8], v[9], v[10], f"grp-{i}")


def test_committed_offsets_are_records_of_consumer_offsets_and_survive_a_restart(logdir):
    from kbatch.schema import coordinator_records as cr

    write_topic(str(logdir), "t", 0, batches=1)
    with serve(str(logdir), group_initial_rebalance_delay_ms=0) as srv, RawClient(srv.bootstrap) as c:
        _group_cycle(c, 5, 3, 3, 2, 8, 7, 3, "restart-me")
    records = log_records(str(logdir / "__consumer_offsets-0"))
    decoded = [cr.decode(k, v) for _, _, k, v, _ in records]
    commits = [(k, v) for k, v in decoded if isinstance(k, cr.OffsetCommitKey)]
    assert [(k.group, k.topic, k.partition, v.offset, v.metadata, v.leader_epoch) for k, v in commits] == \
        [("restart-me", "t", 0, 17, "md", 0)]
    groups = [(k, v) for k, v in decoded if isinstance(k, cr.GroupMetadataKey)]
    assert groups[0][1].generation == 1 and groups[0][1].protocol == "range" and len(groups[0][1].members) == 1
    assert groups[-1][1].members == ()  # the member left: an empty group, generation 2
    # `kbatch dump --offsets-decoder` reads what the server wrote, as kafka-dump-log would
    import io as _io

    from kbatch.cli import cmd_dump

    out = _io.StringIO()
    assert cmd_dump([str(logdir / "__consumer_offsets-0" / "00000000000000000000.log")], decoder="offsets",
                    print_data_log=True, out=out, err=_io.StringIO()) == 0
    text = out.getvalue()
    assert '"group":"restart-me","topic":"t","partition":0' in text and '"offset":17' in text
    OF = request_class(9)
    with serve(str(logdir), read_only=True) as srv, RawClient(srv.bootstrap) as c:
        r, _ = c.call(OF(group_id="restart-me", topics=None, require_stable=False), 7)
        assert [(t.name, p.partition_index, p.committed_offset) for t in r.topics for p in t.partitions] == \
            [("t", 0, 17)]
    with serve(str(logdir), group_initial_rebalance_delay_ms=0) as srv, RawClient(srv.bootstrap) as c:
        _group_cycle(c, 5, 3, 3, 2, 8, 7, 3, "another-group")  # a restarted server keeps one partition
    assert sorted(p.name for p in logdir.iterdir() if p.name.startswith("__consumer_offsets")) == \
        ["__consumer_offsets-0"]


def test_session_timeout_removes_a_silent_member(logdir):
    write_topic(str(logdir), "t", 0, batches=1)
    J, H = request_class(11), request_class(12)
    with serve(str(logdir), group_initial_rebalance_delay_ms=0, group_min_session_timeout_ms=100) as srv, \
            RawClient(srv.bootstrap) as c:
        r, _ = c.call(J(group_id="g", session_timeout_ms=300, rebalance_timeout_ms=300, member_id="",
                        protocol_type="consumer", protocols=[J.JoinGroupRequestProtocol(name="range", metadata=b"")]), 3)
        assert r.error_code == 0
        time.sleep(1.0)
        r, _ = c.call(H(group_id="g", generation_id=r.generation_id, member_id=r.member_id), 3)
        assert r.error_code == 25  # UNKNOWN_MEMBER_ID: expired


# ------------------------------------------------------------------------------------ a broker's directory
def test_a_brokers_directory_keeps_its_node_cluster_topic_id_and_leader_epoch(logdir):
    tid = write_broker_dir(logdir)
    with serve(str(logdir)) as srv, RawClient(srv.bootstrap) as c:
        r, _ = c.call(MetadataRequest(topics=None, allow_auto_topic_creation=False), 12)
        assert [b.node_id for b in r.brokers] == [3] and r.cluster_id == "Kb4tchTestClusterId0001"
        assert r.controller_id == 3
        [t] = r.topics
        assert t.topic_id == tid and t.partitions[0].leader_id == 3 and t.partitions[0].leader_epoch == 4
        lo, _ = c.call(list_offsets_req([(("b", 0), -1)], 7), 7)
        assert (lo.topics[0].partitions[0].offset, lo.topics[0].partitions[0].leader_epoch) == (11, 4)
        lo, _ = c.call(list_offsets_req([(("b", 0), NOW)], 7), 7)
        assert (lo.topics[0].partitions[0].offset, lo.topics[0].partitions[0].leader_epoch) == (10, 4)
        for epoch, err in ((4, 0), (-1, 0), (3, 74), (5, 75)):  # FENCED / UNKNOWN_LEADER_EPOCH
            req = fetch_req("b", 0, 0, 12)
            req.topics[0].partitions[0].current_leader_epoch = epoch
            r, _ = c.call(req, 12)
            assert r.responses[0].partitions[0].error_code == err
        r, _ = c.call(produce_req("b", 0, batch([(NOW, b"k", b"new")])), 9)
        assert r.responses[0].partition_responses[0].base_offset == 11
    log = kbatch.Log.open(str(logdir / "b-0"))
    try:
        assert [b.partition_leader_epoch for b in log.batches()][-2:] == [4, 4]  # appends keep the leader epoch
    finally:
        log.close()


# ------------------------------------------------------------------------------------ the command
def test_kbatch_serve_command_serves_until_sigterm(logdir):
    import re
    import signal
    import subprocess
    import sys

    pytest.importorskip("typer", reason="the CLI needs the cli extra")
    write_topic(str(logdir), "t", 0, batches=1)
    proc = subprocess.Popen([sys.executable, "-m", "kbatch.cli", "serve", str(logdir), "--listen", "127.0.0.1:0",
                             "--read-only"], stderr=subprocess.PIPE, text=True)
    try:
        bootstrap = None
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and bootstrap is None:
            m = re.search(r" on (127\.0\.0\.1:\d+)", proc.stderr.readline())
            bootstrap = m.group(1) if m else None
        assert bootstrap, "no listening line on stderr"
        with RawClient(bootstrap) as c:
            r, _ = c.call(fetch_req("t", 0, 0, 12), 12)
            assert r.responses[0].partitions[0].error_code == 0
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(30) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)
    bad = subprocess.run([sys.executable, "-m", "kbatch.cli", "serve", str(logdir / "missing")], capture_output=True,
                         text=True, timeout=60)
    assert bad.returncode == 2 and "not a directory" in bad.stderr
    bad = subprocess.run([sys.executable, "-m", "kbatch.cli", "serve", str(logdir), "--listen", "nowhere"],
                         capture_output=True, text=True, timeout=60)
    assert bad.returncode == 2 and "HOST:PORT" in bad.stderr


def test_log_append_time_topic_stamps_the_append_time(logdir):
    os.makedirs(logdir / "lat-0")
    with serve(str(logdir), topic_configs={"lat": {"message.timestamp.type": "LogAppendTime"}}) as srv, \
            RawClient(srv.bootstrap) as c:
        before = int(time.time() * 1000)
        r, _ = c.call(produce_req("lat", 0, batch([(123, b"a", b"1"), (456, b"b", b"2")])), 9)
        pr = r.responses[0].partition_responses[0]
        assert pr.error_code == 0 and before <= pr.log_append_time_ms <= int(time.time() * 1000)
        fr, _ = c.call(fetch_req("lat", 0, 0, 12), 12)
        [b] = list(kbatch.iter_batches(bytes(fr.responses[0].partitions[0].records)))
        assert b.timestamp_type == W.TimestampType.LOG_APPEND_TIME
        assert [rec.timestamp for rec in b] == [pr.log_append_time_ms] * 2


def test_legacy_message_sets_are_served_as_they_are(logdir, backend):
    from support.serve_support import write_legacy

    v1 = write_legacy(str(logdir), "legacy", 0, magic=1)
    write_legacy(str(logdir), "old", 0, magic=0)
    with serve(str(logdir), read_only=True) as srv, RawClient(srv.bootstrap) as c:
        r, _ = c.call(fetch_req("legacy", 0, 4, 12), 12)
        raw = bytes(r.responses[0].partitions[0].records)
        seg = _segment_bytes(logdir, "legacy-0")
        starts = [b.position for b in kbatch.iter_batches(seg)]  # 3 messages, a gzip wrapper of 3, 3 messages
        assert raw == seg[starts[3]:]  # offset 4 is inside the wrapper: served from the wrapper on
        got = [(rec.offset, rec.timestamp, bytes(rec.key), bytes(rec.value)) for b in kbatch.iter_batches(raw)
               for rec in b]
        assert got[-6:] == v1[3:]
        lo, _ = c.call(list_offsets_req([(("legacy", 0), v1[5][1])], 7), 7)
        assert lo.topics[0].partitions[0].offset == 5
        lo, _ = c.call(list_offsets_req([(("old", 0), NOW - 10_000), (("old", 0), -2)], 7), 7)
        assert [p.error_code for p in lo.topics[0].partitions] == [42, 42]  # the duplicate rule comes first
        lo, _ = c.call(list_offsets_req([(("old", 0), NOW - 10_000)], 7), 7)
        assert lo.topics[0].partitions[0].error_code == 43  # magic 0: no timestamps to search
        lo, _ = c.call(list_offsets_req([(("old", 0), -1)], 7), 7)
        assert lo.topics[0].partitions[0].offset == 9


def test_a_writer_holds_the_directory_lock_as_a_broker_does(logdir):
    """A process holding `<dir>/.lock` (as a running broker does, with a POSIX lock) keeps a writing
    kbatch serve out; read-only serving still works."""
    import subprocess
    import sys

    from kbatch.errors import LogDirectoryLockedError

    write_topic(str(logdir), "t", 0, batches=1)
    holder = subprocess.Popen([sys.executable, "-c", "import fcntl, os, sys, time; "
                               f"fd = os.open({str(logdir / '.lock')!r}, os.O_RDWR | os.O_CREAT); "
                               "fcntl.lockf(fd, fcntl.LOCK_EX); print('locked', flush=True); time.sleep(60)"],
                              stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "locked"
        with pytest.raises(LogDirectoryLockedError, match="another writer holds"):
            serve(str(logdir)).start()
        with serve(str(logdir), read_only=True) as srv, RawClient(srv.bootstrap) as c:
            assert c.call(fetch_req("t", 0, 0, 12), 12)[0].responses[0].partitions[0].error_code == 0
    finally:
        holder.kill()
        holder.wait(10)
    with serve(str(logdir)) as srv:  # released: a writer may serve it now
        assert srv.port > 0


def test_flush_messages_fsyncs_before_the_answer(logdir, monkeypatch):
    """flush.messages=N: the log is flushed (fsync) once N records are unflushed, before the answer;
    the default, like Kafka's, leaves it to the OS page cache."""
    write_topic(str(logdir), "t", 0, batches=1)
    flushed = []
    real = kbatch.Log.flush
    monkeypatch.setattr(kbatch.Log, "flush", lambda self: (flushed.append(self.topic), real(self))[1])
    with serve(str(logdir), flush_messages=2) as srv, RawClient(srv.bootstrap) as c:
        for i in range(3):
            assert c.call(produce_req("t", 0, batch([(NOW, b"k", b"%d" % i)])), 9)[0].responses[0] \
                .partition_responses[0].error_code == 0
            assert flushed.count("t") == (i + 1) // 2   # after the 2nd record, not the 1st or 3rd
    flushed.clear()
    with serve(str(logdir)) as srv, RawClient(srv.bootstrap) as c:
        c.call(produce_req("t", 0, batch([(NOW, b"k", b"x")])), 9)
        assert flushed == []


def test_oversized_batch_gets_message_too_large(logdir):
    write_topic(str(logdir), "t", 0, batches=1)
    with serve(str(logdir), topic_config={"max.message.bytes": "1000"}) as srv, RawClient(srv.bootstrap) as c:
        pr = c.call(produce_req("t", 0, batch([(NOW, b"k", b"x" * 2000)])), 9)[0].responses[0].partition_responses[0]
        assert pr.error_code == 10 and "exceeds the maximum configured value of 1000" in pr.error_message


def test_decode_request_never_fails_with_anything_but_a_kbatch_error():
    """Any frame is a request or an InvalidRequestError naming why (hypothesis: truncations, bit
    flips and random bytes around valid requests of every advertised API)."""
    from hypothesis import given
    from hypothesis import strategies as st

    from kbatch.errors import InvalidRequestError

    samples = []
    with_header = RawClient.__new__(RawClient)
    with_header.correlation_id = 0
    samples.append(with_header.request_bytes(fetch_req("t", 0, 5, 12), 12)[4:])
    samples.append(with_header.request_bytes(produce_req("t", 0, batch([(NOW, b"k", b"v")])), 9)[4:])
    samples.append(with_header.request_bytes(list_offsets_req([(("t", 0), 5)], 7), 7)[4:])
    samples.append(with_header.request_bytes(MetadataRequest(topics=None, allow_auto_topic_creation=False), 12)[4:])
    samples.append(with_header.request_bytes(ApiVersionsRequest(client_software_name="a", client_software_version="1"), 3)[4:])

    @given(st.sampled_from(samples), st.integers(0, 400), st.integers(0, 255), st.integers(0, 400),
           st.binary(max_size=64))
    def check(frame, at, xor, cut, junk):
        data = bytearray(frame)
        if at < len(data):
            data[at] ^= xor
        data = bytes(data[:cut] if cut < len(data) else data) + junk
        try:
            req = P.decode_request(data)
        except InvalidRequestError:
            return
        assert req.api.min_version <= req.version <= req.api.max_version

    check()


def test_fetch_inside_a_torn_middle_segment_is_an_error_not_a_jump(tmp_path, backend):
    """Issue 28 item 4 through serve: a fetch offset in bytes that cannot be read gets
    CORRUPT_MESSAGE (2), not the records after the hole."""
    from support import partitions as PT

    built = PT.plain(str(tmp_path / "t-0"))
    _target, lost, nxt = PT.tear_middle_segment(built.path)
    with serve(str(tmp_path), read_only=True) as srv, RawClient(srv.bootstrap) as c:
        r, _ = c.call(fetch_req("t", 0, lost + 1, 12), 12)
        p = r.responses[0].partitions[0]
        assert p.error_code == 2 and bytes(p.records or b"") == b""
        r, _ = c.call(fetch_req("t", 0, nxt, 12), 12)  # after the hole: served
        p = r.responses[0].partitions[0]
        assert p.error_code == 0 and next(iter(kbatch.iter_batches(bytes(p.records)))).base_offset == nxt


def test_offset_commit_checks_member_and_generation_before_a_rebalance_in_progress(logdir):
    """ClassicGroup.validateOffsetCommit's order (librdkafka's 0113 v_commit_during_rebalance): while the
    group completes a rebalance, a commit of the old generation is ILLEGAL_GENERATION and an unknown
    member's UNKNOWN_MEMBER_ID; only a member of the new generation that has not synced yet gets
    REBALANCE_IN_PROGRESS."""
    import threading

    write_topic(str(logdir), "t", 0, batches=1)
    J, OC = request_class(11), request_class(8)
    proto = [J.JoinGroupRequestProtocol(name="range", metadata=b"")]

    def join(c, member_id):
        r, _ = c.call(J(group_id="g", session_timeout_ms=10000, rebalance_timeout_ms=10000, member_id=member_id,
                        protocol_type="consumer", protocols=proto), 3)
        return r

    def commit(c, generation, member_id):
        T = OC.OffsetCommitRequestTopic
        r, _ = c.call(OC(group_id="g", generation_id_or_member_epoch=generation, member_id=member_id,
                         group_instance_id=None, retention_time_ms=-1,
                         topics=[T(name="t", partitions=[T.OffsetCommitRequestPartition(
                             partition_index=0, committed_offset=1, committed_leader_epoch=-1,
                             committed_metadata="")])]), 7)
        return r.topics[0].partitions[0].error_code

    with serve(str(logdir), group_initial_rebalance_delay_ms=0) as srv, RawClient(srv.bootstrap) as a, \
            RawClient(srv.bootstrap, timeout=30) as b:
        first = join(a, "")
        assert (first.error_code, first.generation_id) == (0, 1)
        joined = {}
        t = threading.Thread(target=lambda: joined.setdefault("b", join(b, "")))
        t.start()
        time.sleep(0.5)  # b waits for a to rejoin
        again = join(a, first.member_id)  # completes the join: generation 2, CompletingRebalance
        t.join(10)
        assert again.generation_id == joined["b"].generation_id == 2
        assert commit(a, 1, first.member_id) == 22  # ILLEGAL_GENERATION
        assert commit(a, 2, "nobody") == 25  # UNKNOWN_MEMBER_ID
        assert commit(a, 2, first.member_id) == 27  # REBALANCE_IN_PROGRESS: it must sync first
