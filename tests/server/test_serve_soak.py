"""kbatch serve under sustained multi-partition fetches (issue 28, item 2): large Fetch responses
are written whole and in order on one connection, and kcat, confluent-kafka, kafka-python and
aiokafka each read a 4-partition topic of 2 M records to the end with no disconnect: every record
exactly once (count and a checksum of offsets per partition), nothing logged at ERROR by the
server, no connection dropped or refused by it.

The topic is built once per session with kbatch's writer (small records, 1000 to a batch,
segments of 4 MiB so fetches cross segment boundaries). KBATCH_SOAK=1 makes it 12 M records and
adds a round with the four clients reading at the same time (docs/serve.md, "Tests").
Loopback only; every client runs in a subprocess with a deadline and a timeout."""
from __future__ import annotations

import asyncio
import json
import logging
import os
import shutil
import struct
import subprocess
import sys
import threading
import time

import pytest

pytest.importorskip("kafka.protocol.api_message", reason="kbatch serve needs kafka-python >= 3 (the serve extra)")

import kbatch  # noqa: E402
from kbatch.server import serve  # noqa: E402
from kbatch.server.protocol import APIS  # noqa: E402

from support.serve_support import RawClient, request_class  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
DRIVER = os.path.join(os.path.dirname(HERE), "support", "serve_clients", "soak.py")
LONG = os.environ.get("KBATCH_SOAK", "").strip() not in ("", "0")
PARTITIONS = 4
RECORDS = 12_000_000 if LONG else 2_000_000   # over the topic's 4 partitions
PER_BATCH = 1000
DEADLINE_S = 600 if LONG else 150             # a client's own deadline; the subprocess gets 60 s more
TS = 1_700_000_000_000
FetchRequest = request_class(1)


def _has(module):
    return subprocess.run([sys.executable, "-c", f"import {module}"], capture_output=True, timeout=60).returncode == 0


@pytest.fixture(scope="session")
def soak_topic(tmp_path_factory):
    """A directory with topic `soak`: 4 partitions of RECORDS / 4 records each; returns (root, ends)."""
    root = str(tmp_path_factory.mktemp("soak"))
    per_partition = RECORDS // PARTITIONS
    ends = {}
    for p in range(PARTITIONS):
        b = kbatch.BatchBuilder(magic=2, timestamp_extended=False)
        for i in range(PER_BATCH):
            b.append(TS + i, None, b"p%d-%06d" % (p, i))
        data = b.build()
        log = kbatch.Log.create(os.path.join(root, f"soak-{p}"), kbatch.LogConfig(segment_bytes=4 << 20), now_ms=TS)
        try:
            for _ in range(per_partition // PER_BATCH):
                log.append(data, now_ms=TS, from_client=False)  # the log assigns the offsets
            ends[p] = log.end_offset()
        finally:
            log.close()
    assert sum(ends.values()) == RECORDS
    return root, ends


class ServerLog(logging.Handler):
    """What the server (kbatch.*) and its event loop (asyncio) log at WARNING and above."""

    def __init__(self):
        super().__init__(logging.WARNING)
        self.records = []

    def emit(self, record):
        self.records.append(f"{record.levelname} {record.name}: {record.getMessage()}")

    def errors(self):
        return [r for r in self.records if r.startswith(("ERROR", "CRITICAL"))]


@pytest.fixture
def server_log():
    handler = ServerLog()
    loggers = [logging.getLogger("kbatch"), logging.getLogger("asyncio")]
    for lg in loggers:
        lg.addHandler(handler)
    try:
        yield handler
    finally:
        for lg in loggers:
            lg.removeHandler(handler)


def expected(ends):
    """Per partition: [count, sum of offsets, sum of squares, offsets out of order] of reading 0..end-1."""
    return {str(p): [e, e * (e - 1) // 2, (e - 1) * e * (2 * e - 1) // 6, 0] for p, e in ends.items()}


def tally_kcat(text):
    stats = {}
    nxt = {}
    for line in text.splitlines():
        p, o = line.split()
        o = int(o)
        s = stats.setdefault(p, [0, 0, 0, 0])
        s[0] += 1
        s[1] += o
        s[2] += o * o
        if o != nxt.get(p, 0):
            s[3] += 1
        nxt[p] = o + 1
    return stats


def read_everything(client, bootstrap, ends):
    """Run one client over the whole topic; returns its result: partitions (tallies), errors, finished."""
    if client == "kcat":
        kcat = shutil.which("kcat")
        start = time.monotonic()
        r = subprocess.run([kcat, "-b", bootstrap, "-C", "-t", "soak", "-o", "beginning", "-e", "-q",
                            "-f", "%p %o\\n"], capture_output=True, text=True, timeout=DEADLINE_S + 60)
        return {"partitions": tally_kcat(r.stdout), "finished": r.returncode == 0,
                "seconds": round(time.monotonic() - start, 3),
                "errors": [line for line in r.stderr.splitlines() if line.strip()][:20]}
    r = subprocess.run([sys.executable, DRIVER, client, bootstrap, "soak", json.dumps(ends), str(DEADLINE_S)],
                       capture_output=True, text=True, timeout=DEADLINE_S + 60)
    assert r.returncode == 0, f"{client} driver failed:\n{r.stderr[-3000:]}"
    return json.loads(r.stdout)


def skip_reason(client):
    if client == "kcat":
        return None if shutil.which("kcat") else \
            "kcat is not installed (Debian package kcat; python3 dev.py test installs it when run as root)"
    module = {"confluent-kafka": "confluent_kafka", "kafka-python": "kafka", "aiokafka": "aiokafka"}[client]
    return None if _has(module) else f"{client} is not installed"


CLIENTS = ["kcat", "confluent-kafka", "kafka-python", "aiokafka"]


@pytest.mark.parametrize("client", CLIENTS)
def test_a_client_reads_a_4_partition_topic_to_the_end_with_no_disconnect(client, soak_topic, server_log):
    reason = skip_reason(client)
    if reason:
        pytest.skip(reason)
    root, ends = soak_topic
    with serve(root, read_only=True) as srv:
        out = read_everything(client, srv.bootstrap, ends)
        stats = srv.broker.connections
    got = sum(s[0] for s in out["partitions"].values())
    print(f"{client}: {got} records of {RECORDS} ({out.get('seconds', '?')} s), server connections: {stats}")
    assert out["errors"] == [], out["errors"]
    assert out["finished"], out
    assert out["partitions"] == expected(ends)
    assert server_log.errors() == []
    assert stats.dropped == 0 and stats.refused == 0, stats


def test_every_client_at_once(soak_topic, server_log):
    """KBATCH_SOAK=1 only: the four clients read the whole topic at the same time from one server."""
    if not LONG:
        pytest.skip("the long soak runs with KBATCH_SOAK=1")
    root, ends = soak_topic
    clients = [c for c in CLIENTS if skip_reason(c) is None]
    results = {}
    with serve(root, read_only=True) as srv:
        threads = [threading.Thread(target=lambda c=c: results.__setitem__(c, read_everything(c, srv.bootstrap, ends)))
                   for c in clients]
        for t in threads:
            t.start()
        for t in threads:
            t.join(DEADLINE_S + 120)
        stats = srv.broker.connections
    print(f"server connections: {stats}")
    for c in clients:
        assert c in results, f"{c} did not finish"
        assert results[c]["errors"] == [] and results[c]["finished"], (c, results[c])
        assert results[c]["partitions"] == expected(ends), c
    assert server_log.errors() == []
    assert stats.dropped == 0 and stats.refused == 0, stats


# ------------------------------------------------------------------------------------ raw
def _fetch_all(offset, part_max):
    R = FetchRequest
    return R(replica_id=-1, max_wait_ms=0, min_bytes=0, max_bytes=1 << 30, isolation_level=0, session_id=0,
             session_epoch=-1, topics=[R.FetchTopic(topic="soak", partitions=[R.FetchTopic.FetchPartition(
                 partition=p, current_leader_epoch=-1, fetch_offset=offset, last_fetched_epoch=-1,
                 log_start_offset=-1, partition_max_bytes=part_max) for p in range(PARTITIONS)])],
             forgotten_topics_data=[], rack_id="")


def _slices_on_disk(root, offset, part_max):
    """What each partition's records field must hold: the first segment's bytes from the batch
    holding `offset`, at most part_max (these fetches stay inside the first segment)."""
    out = []
    for p in range(PARTITIONS):
        log = kbatch.Log.open(os.path.join(root, f"soak-{p}"))
        try:
            seg = log.segments[0]
            start = seg.translate_offset(offset).position
            with open(os.path.join(root, f"soak-{p}", "00000000000000000000.log"), "rb") as f:
                f.seek(start)
                out.append(f.read(min(part_max, seg.size - start)))
        finally:
            log.close()
    return out


async def _no_sendfile(self, *args, **kwargs):
    raise asyncio.SendfileNotAvailableError("this test's event loop cannot sendfile")


@pytest.mark.parametrize("version,path", [(11, "sendfile"), (12, "sendfile"), (12, "read and write")])
def test_large_fetch_responses_are_written_whole_and_in_order(version, path, soak_topic, server_log, monkeypatch):
    """Two pipelined Fetch requests of 4 x 3 MiB on one connection, read as they come: both answers
    whole (the socket fills up, so the server must wait for it to drain many times), in request
    order, each partition's records the segment's bytes. Before the fix the server wrote with
    os.sendfile on the transport's socket and, when the socket was full, asked the loop to watch
    it (add_writer), which asyncio refuses for a socket a transport owns: the connection was
    closed a few MiB into the first answer. "read and write": an event loop whose sendfile is not
    available (as uvloop's), so slices are read and written through the transport."""
    if path == "read and write":
        monkeypatch.setattr(asyncio.BaseEventLoop, "sendfile", _no_sendfile)
    root, _ends = soak_topic
    part_max = 3 << 20
    firsts = (0, 1500)
    with serve(root, read_only=True) as srv, RawClient(srv.bootstrap, timeout=60) as c:
        frames = b"".join(c.request_bytes(_fetch_all(o, part_max), version) for o in firsts)
        c.send_frame(frames)
        answers = [c.read_frame() for _ in firsts]
        stats = srv.broker.connections
    Response = APIS[1].response
    for i, (offset, frame) in enumerate(zip(firsts, answers)):
        (corr,) = struct.unpack_from(">i", frame, 0)
        assert corr == c.correlation_id - len(firsts) + 1 + i  # in request order
        body = frame[5:] if version >= 12 else frame[4:]
        r = Response.decode(body, version=version)
        parts = r.responses[0].partitions
        assert [p.error_code for p in parts] == [0] * PARTITIONS
        assert [bytes(p.records) for p in parts] == _slices_on_disk(root, offset, part_max)
    assert server_log.errors() == []
    assert stats.dropped == 0 and stats.lost == 0 and stats.refused == 0, stats
