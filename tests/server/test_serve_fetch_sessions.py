"""Fetch sessions (KIP-227) over raw sockets: a full request opens a session, incremental requests
carry only changes and are answered with only what changed (records, a moved high watermark),
forgotten partitions leave the session, epoch -1 closes it, an unknown id is
FETCH_SESSION_ID_NOT_FOUND (70) and a wrong epoch INVALID_FETCH_SESSION_EPOCH (71); the cache is
bounded (server/fetch_session.py). Every answer decodes with kio too (a second codec)."""
from __future__ import annotations

import pytest

pytest.importorskip("kafka.protocol.api_message", reason="kbatch serve needs kafka-python >= 3 (the serve extra)")

import kbatch  # noqa: E402
from kbatch.server import serve  # noqa: E402
from kbatch.server.fetch_session import CachedPartition, FetchSessionCache  # noqa: E402

from support.serve_support import NOW, RawClient, kio_decode, request_class, write_topic  # noqa: E402

try:
    import kio  # noqa: F401
    HAVE_KIO = True
except ImportError:  # kio needs Python >= 3.11
    HAVE_KIO = False

FetchRequest = request_class(1)
ProduceRequest = request_class(0)
FETCH_SESSION_ID_NOT_FOUND, INVALID_FETCH_SESSION_EPOCH = 70, 71


@pytest.fixture
def server(tmp_path):
    for p in range(3):
        write_topic(str(tmp_path), "s", p, batches=3, per_batch=4)
    with serve(str(tmp_path), listen="127.0.0.1:0", group_initial_rebalance_delay_ms=0) as srv:
        yield srv


def fetch(session_id, epoch, parts, forgotten=(), min_bytes=0):
    """parts: [(topic, partition, offset)]; forgotten: [(topic, [partitions])]."""
    R = FetchRequest
    topics: dict[str, list] = {}
    for t, p, o in parts:
        topics.setdefault(t, []).append(R.FetchTopic.FetchPartition(
            partition=p, current_leader_epoch=-1, fetch_offset=o, last_fetched_epoch=-1, log_start_offset=-1,
            partition_max_bytes=1 << 20))
    return R(replica_id=-1, max_wait_ms=0, min_bytes=min_bytes, max_bytes=1 << 20, isolation_level=0,
             session_id=session_id, session_epoch=epoch,
             topics=[R.FetchTopic(topic=t, partitions=ps) for t, ps in topics.items()],
             forgotten_topics_data=[R.ForgottenTopic(topic=t, partitions=list(ps)) for t, ps in forgotten], rack_id="")


def answered(resp):
    return sorted((t.topic, p.partition_index, p.high_watermark, len(p.records or b""))
                  for t in resp.responses for p in t.partitions)


def call(c, req, version=12):
    resp, body = c.call(req, version)
    if HAVE_KIO:
        _obj, again = kio_decode(1, version, "response", body)
        assert again == bytes(body)
    return resp


@pytest.mark.parametrize("version", [7, 11, 12])
def test_full_then_incremental(server, version):
    end = 12
    with RawClient(server.bootstrap) as c:
        full = call(c, fetch(0, 0, [("s", p, 0) for p in range(3)]), version)
        assert full.error_code == 0 and full.session_id > 0
        assert [(t, p, hw) for t, p, hw, n in answered(full)] == [("s", p, end) for p in range(3)]
        assert all(n > 0 for *_, n in answered(full))
        sid = full.session_id
        # the client moves every position to the end: nothing new, nothing changed, an empty answer
        inc = call(c, fetch(sid, 1, [("s", p, end) for p in range(3)]), version)
        assert inc.error_code == 0 and inc.session_id == sid and answered(inc) == []
        # only s-1 is named (sent back to offset 6): only s-1 comes back, with its records
        inc = call(c, fetch(sid, 2, [("s", 1, 6)]), version)
        [(t, p, hw, n)] = answered(inc)
        assert (t, p, hw) == ("s", 1, end) and n > 0
        # an append moves the high watermark of s-2: it comes back with the new record
        b = kbatch.BatchBuilder(magic=2, timestamp_extended=False)
        b.append(NOW, b"k", b"new")
        R = ProduceRequest
        r, _ = c.call(R(transactional_id=None, acks=-1, timeout_ms=5000, topic_data=[R.TopicProduceData(
            name="s", partition_data=[R.TopicProduceData.PartitionProduceData(index=2, records=b.build())])]), 9)
        assert r.responses[0].partition_responses[0].error_code == 0
        inc = call(c, fetch(sid, 3, [("s", 1, end)]), version)
        got = answered(inc)
        # s-0 and s-1 at their unchanged ends are left out: only s-2, with the new record
        assert [(t, p, hw) for t, p, hw, _n in got] == [("s", 2, end + 1)] and got[0][3] > 0
        # forget s-2: the session answers for s-0 and s-1 only, and nothing changed there
        inc = call(c, fetch(sid, 4, [], forgotten=[("s", [2])]), version)
        assert answered(inc) == []
        assert sorted(server.broker.fetch_sessions.get(sid).partitions) == [("s", 0), ("s", 1)]
        # errors: a wrong epoch, an unknown id; the session survives a wrong epoch
        bad = call(c, fetch(sid, 9, []), version)
        assert (bad.error_code, bad.session_id, bad.responses) == (INVALID_FETCH_SESSION_EPOCH, 0, [])
        bad = call(c, fetch(sid ^ 0x5A5A, 1, []), version)
        assert (bad.error_code, bad.session_id, bad.responses) == (FETCH_SESSION_ID_NOT_FOUND, 0, [])
        assert call(c, fetch(sid, 5, []), version).error_code == 0  # a failed request does not use up an epoch
        # epoch -1 closes the session and is answered as a sessionless full fetch
        close = call(c, fetch(sid, -1, [("s", 0, 0)]), version)
        assert close.error_code == 0 and close.session_id == 0 and len(answered(close)) == 1
        assert call(c, fetch(sid, 6, []), version).error_code == FETCH_SESSION_ID_NOT_FOUND


def test_a_fetch_naming_no_partition_is_answered_at_once(server):
    """The Java consumer closes its session with a Fetch of epoch -1 and no partitions, min_bytes 1:
    a broker answers it at once instead of waiting max_wait_ms (here ten minutes, far beyond the
    client's 30 s socket timeout, so a wait fails the test)."""
    with RawClient(server.bootstrap, timeout=30) as c:
        full = call(c, fetch(0, 0, [("s", 0, 12)]))
        R = FetchRequest
        req = R(replica_id=-1, max_wait_ms=600_000, min_bytes=1, max_bytes=1 << 20, isolation_level=0,
                session_id=full.session_id, session_epoch=-1, topics=[], forgotten_topics_data=[], rack_id="")
        r = call(c, req)
        assert (r.error_code, r.session_id, r.responses) == (0, 0, [])
        assert server.broker.fetch_sessions.get(full.session_id) is None


def test_unknown_partition_is_answered_every_time(server):
    with RawClient(server.bootstrap) as c:
        full = call(c, fetch(0, 0, [("s", 0, 12), ("missing", 0, 0)]))
        sid = full.session_id
        errs = {(t.topic, p.partition_index): p.error_code for t in full.responses for p in t.partitions}
        assert errs == {("s", 0): 0, ("missing", 0): 3}
        inc = call(c, fetch(sid, 1, []))
        assert [(t.topic, p.partition_index, p.error_code) for t in inc.responses for p in t.partitions] == [
            ("missing", 0, 3)]


def test_sessionless_requests_open_nothing(server):
    with RawClient(server.bootstrap) as c:
        r = call(c, fetch(0, -1, [("s", 0, 0)]))
        assert r.error_code == 0 and r.session_id == 0
    assert len(server.broker.fetch_sessions) == 0


def test_cache_is_bounded():
    """max_sessions sessions at most: a new one evicts a stale one, else a smaller one, else is not made."""
    class P:
        def __init__(self, i):
            self.partition, self.fetch_offset, self.partition_max_bytes = i, 0, 1

    def parts(n):
        from collections import OrderedDict
        return OrderedDict((("t", i), CachedPartition(P(i))) for i in range(n))

    cache = FetchSessionCache(max_sessions=2, eviction_ms=10 ** 9)
    a, b = cache.create(parts(2)), cache.create(parts(3))
    assert a is not None and b is not None and len(cache) == 2
    assert cache.create(parts(1)) is None and len(cache) == 2  # nothing smaller to evict
    c = cache.create(parts(3))  # evicts a (2 partitions), the least recently used smaller one
    assert c is not None and cache.get(a.id) is None and cache.get(b.id) is b and cache.evicted == 1
    stale = FetchSessionCache(max_sessions=1, eviction_ms=0)
    first = stale.create(parts(5))
    second = stale.create(parts(1))  # the first is idle past the eviction time
    assert first is not None and second is not None and stale.get(first.id) is None and len(stale) == 1
