"""kbatch serve against clients that stop halfway (issue 38): requests whose bytes do not all arrive
are dropped with their connection after request_read_timeout_ms, half-sent requests at the
queued.max.request.bytes limit never keep another client's small requests out, and a null where a
request may hold none closes only that connection, never a handler traceback. Loopback only; every
socket has a timeout and every wait a bound."""
from __future__ import annotations

import asyncio
import json
import logging
import signal
import socket
import struct
import subprocess
import sys
import threading
import time

import pytest

pytest.importorskip("kafka.protocol.api_message", reason="kbatch serve needs kafka-python >= 3 (the serve extra)")

from kbatch.server import serve  # noqa: E402
from kbatch.server.memory_pool import LARGE_REQUEST_BYTES, SMALL_REQUEST_BYTES, MemoryPool  # noqa: E402
from kbatch.server.protocol import APIS  # noqa: E402

from support.serve_support import RawClient, request_class, write_topic  # noqa: E402

ApiVersionsRequest = request_class(18)
MetadataRequest = request_class(3)
OffsetCommitRequest = request_class(8)
OffsetFetchRequest = request_class(9)
MiB = 1 << 20
WAIT_S = 60.0  # the bound on every wait for the server to reach a state


@pytest.fixture
def logdir(tmp_path):
    d = tmp_path / "logs"
    d.mkdir()
    write_topic(str(d), "t", 0, batches=1)
    return d


def _errors_logged(caplog):
    return [r for r in caplog.records if r.levelno >= logging.ERROR or r.exc_info]


def _until(srv, condition, what):
    """Poll condition() on the server's loop until it holds, at most WAIT_S."""
    deadline = time.monotonic() + WAIT_S
    while not srv.call(condition):
        assert time.monotonic() < deadline, f"the server never got to: {what}"
        time.sleep(0.02)


def _half_sent(port, size, body=b""):
    """A connection that announces a `size`-byte request, sends `body` of it and then nothing."""
    s = socket.create_connection(("127.0.0.1", port), timeout=30)
    s.sendall(struct.pack(">i", size) + body)
    return s


def _still_open(s):
    s.setblocking(False)
    try:
        return s.recv(1) != b""
    except BlockingIOError:
        return True
    except OSError:
        return False
    finally:
        s.setblocking(True)


def _medium_metadata():
    """A Metadata request of about 540 KB (between the pool's small and large requests)."""
    names = [f"missing-topic-{i:07d}" for i in range(20_000)]
    return MetadataRequest(topics=[MetadataRequest.MetadataRequestTopic(name=n, topic_id=None) for n in names],
                           allow_auto_topic_creation=False, include_topic_authorized_operations=False)


# ------------------------------------------------------------------------------------ the pool's rules
async def _settle():
    """Let the tasks started run until they wait (a few turns of the loop)."""
    for _ in range(10):
        await asyncio.sleep(0)


def _pool_run(capacity, script):
    """Run `script(pool, order)` on a fresh event loop: it starts acquires as tasks and returns
    them; what got through is in `order` (sizes, as admitted)."""
    async def main():
        pool = MemoryPool(capacity)
        order: list[int] = []

        async def acquire(size):
            await pool.acquire(size)
            order.append(size)
            return size

        def take(size):  # every wait bounded
            return asyncio.wait_for(acquire(size), 10)

        return await script(pool, take, order)
    return asyncio.run(main())


def test_pool_small_requests_never_wait_and_large_ones_leave_a_quarter():
    async def script(pool, take, order):
        a = asyncio.ensure_future(take(100 * MiB))
        b = asyncio.ensure_future(take(100 * MiB))
        await _settle()
        assert order == [100 * MiB] and pool.waiting_bytes == 100 * MiB  # large: at most 150 of 200 MiB
        await take(SMALL_REQUEST_BYTES)   # small: at once
        await take(500_000)               # in between: the free quarter
        assert pool.used == 100 * MiB + SMALL_REQUEST_BYTES + 500_000
        pool.release(100 * MiB)
        await asyncio.wait_for(b, 10)
        assert order[-1] == 100 * MiB and pool.waiting_bytes == 0
        pool.release(100 * MiB)
        pool.release(SMALL_REQUEST_BYTES)
        pool.release(500_000)
        assert (pool.used, pool.held, pool.large_used) == (0, 0, 0)
        await a
    _pool_run(200 * MiB, script)


def test_pool_a_request_larger_than_its_share_gets_in_alone_and_small_ones_still_pass():
    async def script(pool, take, order):
        await take(2 * MiB)
        big = asyncio.ensure_future(take(10 * MiB))  # more than the whole pool: waits for the 2 MiB one
        await _settle()
        assert order == [2 * MiB]
        pool.release(2 * MiB)
        await asyncio.wait_for(big, 10)
        await take(1000)  # small, over the capacity
        assert pool.used == 10 * MiB + 1000
        medium = asyncio.ensure_future(take(LARGE_REQUEST_BYTES))  # not small: waits for room
        await _settle()
        assert LARGE_REQUEST_BYTES not in order
        pool.release(10 * MiB)
        await asyncio.wait_for(medium, 10)
    _pool_run(4 * MiB, script)


# ------------------------------------------------------------------------------------ half-sent requests
def test_two_half_sent_100_mib_requests_do_not_stall_another_clients_small_requests(logdir, caplog):
    """Issue 38: two sockets that send only a 100 MiB size prefix sit at the 200 MiB pool's limit (one
    read, one waiting for room); another client's ApiVersions and a 540 KB Metadata are answered
    meanwhile, well before the half-sent requests' timeout (the client's 10 s socket timeout, against
    a 10 minute read timeout); the half-sent connections stay open until they go away."""
    with serve(str(logdir), request_read_timeout_ms=600_000) as srv:
        pool = srv.broker.request_memory
        assert (srv.broker.config.queued_max_request_bytes, srv.broker.config.socket_request_max_bytes) == \
            (200 * MiB, 100 * MiB)  # Kafka's defaults and this server's
        stalled = [_half_sent(srv.port, 100 * MiB) for _ in range(2)]
        _until(srv, lambda: pool.used + pool.waiting_bytes == 200 * MiB, "both half-sent requests at the pool")
        with RawClient(srv.bootstrap, timeout=10) as other:
            assert other.call(ApiVersionsRequest(), 0)[0].error_code == 0
            r, _ = other.call(_medium_metadata(), 12)
            assert len(r.topics) == 20_000
        assert all(_still_open(s) for s in stalled)
        for s in stalled:
            s.close()
        _until(srv, lambda: pool.used == 0 and pool.waiting_bytes == 0, "the pool given back")
        assert srv.broker.connections.lost == 2 and srv.broker.connections.timed_out == 0
    assert not _errors_logged(caplog)


def test_many_half_sent_requests_of_every_size_do_not_stall_small_requests(logdir, caplog):
    """Twenty connections announcing 100 MiB and twenty announcing 60 KiB (half sent), all silent:
    the pool holds what its rules let in, the rest wait; small requests are answered meanwhile."""
    with serve(str(logdir), request_read_timeout_ms=600_000) as srv:
        pool = srv.broker.request_memory
        small = 60 * 1024
        stalled = [_half_sent(srv.port, 100 * MiB) for _ in range(20)]
        stalled += [_half_sent(srv.port, small, b"\x00" * (small // 2)) for _ in range(20)]
        _until(srv, lambda: pool.used + pool.waiting_bytes == 20 * (100 * MiB + small), "all of them at the pool")
        assert srv.call(lambda: pool.large_used) == 100 * MiB  # one large at a time: the others wait unread
        with RawClient(srv.bootstrap, timeout=10) as other:
            for _ in range(3):
                assert other.call(ApiVersionsRequest(), 0)[0].error_code == 0
                r, _ = other.call(MetadataRequest(topics=None, allow_auto_topic_creation=False), 12)
                assert [t.name for t in r.topics] == ["t"]
        for s in stalled:
            s.close()
        _until(srv, lambda: pool.used == 0 and pool.waiting_bytes == 0, "the pool given back")
    assert not _errors_logged(caplog)


def test_a_request_whose_bytes_do_not_all_arrive_in_time_is_dropped_with_its_connection(logdir, caplog):
    """With request_read_timeout_ms 1000: a request that stops after 10 of its 1000 bytes, a size
    prefix that stops after 2 bytes, a request that trickles a byte every 50 ms (never idle, but
    never complete) and a 2 MiB request that finds no room in the pool (held by the test) are each
    dropped with their connection, one warning apiece naming the peer and no traceback; a client
    connected all along is still served, and the pool is given back."""
    caplog.set_level(logging.INFO, logger="kbatch.server")
    with serve(str(logdir), request_read_timeout_ms=1000, queued_max_request_bytes=4 * MiB) as srv, \
            RawClient(srv.bootstrap) as good:
        pool = srv.broker.request_memory
        assert good.call(ApiVersionsRequest(), 0)[0].error_code == 0
        srv.call(pool.acquire, 3 * MiB)  # as a large request being handled would
        body = _half_sent(srv.port, 1000, b"\x00" * 10)
        prefix = socket.create_connection(("127.0.0.1", srv.port), timeout=30)
        prefix.sendall(b"\x00\x00")
        roomless = _half_sent(srv.port, 2 * MiB)
        trickle = _half_sent(srv.port, 1000)
        stop = threading.Event()

        def drip():
            for _ in range(400):  # 20 s of a byte every 50 ms, fewer than the 1000 announced
                try:
                    trickle.send(b"\x00")
                except OSError:
                    return
                if stop.wait(0.05):
                    return

        t = threading.Thread(target=drip, daemon=True)
        t.start()
        dropped = (body, prefix, roomless, trickle)
        try:
            for s in dropped:
                assert s.recv(1) == b"", "the server closes the connection"
        finally:
            stop.set()
            t.join(30)
        ports = {s.getsockname()[1] for s in dropped}
        for s in dropped:
            s.close()
        assert good.call(ApiVersionsRequest(), 0)[0].error_code == 0
        assert srv.broker.connections.timed_out == 4 and srv.broker.connections.dropped == 0
        srv.call(pool.release, 3 * MiB)
        assert srv.call(lambda: (pool.used, pool.waiting_bytes)) == (0, 0)
    warned = [r.getMessage() for r in caplog.records if "within 1000 ms (request_read_timeout_ms)" in r.getMessage()]
    assert len(warned) == 4 and {int(m.split(":")[1].split()[0]) for m in warned} == ports, warned
    assert sum("a size prefix did not all arrive" in m for m in warned) == 1
    assert sum("a 1000-byte request did not all arrive" in m for m in warned) == 2
    assert sum(f"a {2 * MiB}-byte request found no room in queued_max_request_bytes" in m for m in warned) == 1
    assert not _errors_logged(caplog)


def test_kbatch_serve_request_read_timeout_ms_drops_a_half_sent_request(logdir):
    """The command's --request-read-timeout-ms: a half-sent request is dropped with its connection,
    one warning on stderr, no traceback, and the stopped line counts it `timed_out`."""
    pytest.importorskip("typer", reason="the CLI needs the cli extra")
    proc = subprocess.Popen([sys.executable, "-m", "kbatch.cli", "serve", str(logdir), "--listen", "127.0.0.1:0",
                             "--request-read-timeout-ms", "500", "--json"], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    try:
        listening = json.loads(proc.stdout.readline())
        with _half_sent(int(listening["listen"].rsplit(":", 1)[1]), 100, b"\x00" * 10) as s:
            assert s.recv(1) == b""
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)
    assert proc.returncode == 0
    assert json.loads(out)["connections"] == {"accepted": 1, "closed": 0, "lost": 0, "refused": 0, "timed_out": 1,
                                              "dropped": 0}
    assert "a 100-byte request did not all arrive within 500 ms" in err and "Traceback" not in err, err


def test_request_read_timeout_ms_below_one_is_refused():
    with pytest.raises(ValueError, match="request_read_timeout_ms must be at least 1, not 0"):
        serve(".", request_read_timeout_ms=0)


# ------------------------------------------------------------------------------------ nulls
def test_offset_fetch_with_a_null_partition_list_closes_only_its_connection_without_a_traceback(logdir, caplog):
    """OffsetFetch's `topics` may be null from v2 (every committed partition of the group), a topic's
    `partition_indexes` never (Kafka's OffsetFetchRequest.json): Kafka's parser refuses that
    ("non-nullable field partitionIndexes was serialized as null") and closes the connection; here
    too, with a warning and no handler traceback. A null `topics` at v2+ is answered."""
    T = OffsetFetchRequest.OffsetFetchRequestTopic
    C = OffsetCommitRequest.OffsetCommitRequestTopic
    with serve(str(logdir), group_initial_rebalance_delay_ms=0) as srv:
        with RawClient(srv.bootstrap) as c:
            r, _ = c.call(OffsetCommitRequest(group_id="g", generation_id_or_member_epoch=-1, member_id="",
                                              group_instance_id=None, retention_time_ms=-1, topics=[C(name="t", partitions=[
                                                  C.OffsetCommitRequestPartition(partition_index=0, committed_offset=3,
                                                                                 committed_leader_epoch=-1,
                                                                                 committed_metadata="m")])]), 2)
            assert r.topics[0].partitions[0].error_code == 0
        for v in range(APIS[9].min_version, APIS[9].max_version + 1):
            with RawClient(srv.bootstrap) as bad:
                bad.send_frame(bad.request_bytes(OffsetFetchRequest(
                    group_id="g", topics=[T(name="t", partition_indexes=None)], require_stable=False), v))
                assert bad.closed_by_server()
            with RawClient(srv.bootstrap) as c:
                if v >= 2:
                    r, _ = c.call(OffsetFetchRequest(group_id="g", topics=None, require_stable=False), v)
                    assert [(t.name, p.partition_index, p.committed_offset) for t in r.topics for p in t.partitions] \
                        == [("t", 0, 3)]
                else:
                    c.send_frame(c.request_bytes(OffsetFetchRequest(group_id="g", topics=None), v))
                    assert c.closed_by_server()
        versions = APIS[9].max_version - APIS[9].min_version + 1
        assert srv.broker.connections.refused == versions + 1 and srv.broker.connections.dropped == 0
    assert not _errors_logged(caplog)
    refused = [r.getMessage() for r in caplog.records if "was serialized as null" in r.getMessage()]
    assert sum("non-nullable field topics[0].partition_indexes" in m for m in refused) == versions
    assert sum("non-nullable field topics was" in m for m in refused) == 1


def _null_cases():
    """(api key, version, path, nullable) for every array, struct and string field of every request
    served, at every version, down to three levels (each enclosing struct array given one element)."""
    def walk(fields, version, path, depth):
        for f in fields.values():
            if not f.for_version_q(version) or f.tagged_field_q(version):
                continue
            here = (*path, f.name)
            if f.is_array() or f.is_struct() or f.type_str in ("string", "bytes", "records"):
                yield here, f.nullable_for_version_q(version)
            if depth < 3 and f.is_struct_array():
                yield from walk(f.array_of.fields, version, here, depth + 1)
            elif depth < 3 and f.is_struct():
                yield from walk(f.fields, version, here, depth + 1)
    for key, api in sorted(APIS.items()):
        for v in range(api.min_version, api.max_version + 1):
            for path, nullable in walk(api.request.fields, v, (), 0):
                yield key, v, path, nullable


def _request_with(key, path, value):
    """A request of API `key` with defaults everywhere but `value` at `path`."""
    api = APIS[key]
    req = api.request(acks=-1, timeout_ms=1000) if key == 0 else api.request()
    obj, fields = req, api.request.fields
    for name in path[:-1]:
        f = fields[name]
        if f.is_struct_array():
            inner = f.array_of.data_class()
            setattr(obj, name, [inner])
            fields = f.array_of.fields
        else:
            inner = f.data_class()
            setattr(obj, name, inner)
            fields = f.fields
        obj = inner
    setattr(obj, path[-1], value)
    return req


def _empty_frames(c, key, path, v):
    out = []
    for empty in ([], "", b""):
        c.correlation_id -= 1  # the same correlation id as the frame with the null
        try:
            out.append(c.request_bytes(_request_with(key, path, empty), v))
        except Exception:  # not a value of this field's type
            pass
    return out


_NULL_KEYS = sorted({c[0] for c in _null_cases()})


@pytest.mark.parametrize("key", _NULL_KEYS, ids=[APIS[k].name for k in _NULL_KEYS])
def test_a_null_in_any_field_of_any_request_is_answered_or_refused_never_a_traceback(logdir, caplog, key):
    """Every field that can hold a null, set to null in turn, at every version served: where the schema
    allows null the request is answered, where it does not the connection is closed as Kafka's
    parser does ("non-nullable field X was serialized as null"); no handler ever raises."""
    caplog.set_level(logging.INFO, logger="kbatch.server")
    cases = [c for c in _null_cases() if c[0] == key]
    refused = 0
    with serve(str(logdir), group_initial_rebalance_delay_ms=0, group_min_session_timeout_ms=0) as srv:
        for _, v, path, nullable in cases:
            with RawClient(srv.bootstrap) as c:
                try:
                    frame = c.request_bytes(_request_with(key, path, None), v)
                except Exception:  # the library cannot write a null there (a struct): not a case
                    continue
                if frame in _empty_frames(c, key, path, v):
                    continue  # the library wrote an empty value, not a null (Metadata v0's topics)
                c.send_frame(frame)
                if nullable:
                    assert c.read_frame(), (v, path)
                else:
                    assert c.closed_by_server(), (v, path)
                    refused += 1
        assert srv.broker.connections.refused == refused and srv.broker.connections.dropped == 0
    assert not _errors_logged(caplog), [r.getMessage() for r in _errors_logged(caplog)]
