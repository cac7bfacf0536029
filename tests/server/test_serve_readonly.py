"""`kbatch serve` is read-only unless --writable (issue 28, item 7), checks its arguments and binds
its listen address before anything on disk is touched, and says where it listens with --json.

Every test snapshots the served directory (each file's bytes and mtime, each folder's listing and
mtime) before the command and compares after: a read-only server started and stopped, and every
failed start (a bad port, a host that cannot be resolved, a port in use, a bad config), even with
--writable, leave it exactly as it was. A read-only server over a partition whose active segment
ends in a torn batch serves the intact records and leaves the torn bytes where they are.
Loopback only; every wait is bounded."""
from __future__ import annotations

import json
import os
import selectors
import signal
import socket
import subprocess
import sys
import time

import pytest

pytest.importorskip("kafka.protocol.api_message", reason="kbatch serve needs kafka-python >= 3 (the serve extra)")
pytest.importorskip("typer", reason="the CLI needs the cli extra")

import kbatch  # noqa: E402

from support.serve_support import NOW, RawClient, request_class, write_topic  # noqa: E402

WAIT_S = 60
FetchRequest = request_class(1)
ProduceRequest = request_class(0)
ListOffsetsRequest = request_class(2)
OffsetCommitRequest = request_class(8)
OffsetFetchRequest = request_class(9)


def snapshot(root):
    """{relative path: (bytes, mtime_ns)} for files, {relative path/: (listing, mtime_ns)} for folders."""
    out = {}
    for dirpath, dirs, files in os.walk(root):
        rel = os.path.relpath(dirpath, root)
        out[rel + "/"] = (sorted(dirs + files), os.stat(dirpath).st_mtime_ns)
        for f in files:
            p = os.path.join(dirpath, f)
            with open(p, "rb") as fh:
                out[os.path.join(rel, f)] = (fh.read(), os.stat(p).st_mtime_ns)
    return out


def as_a_broker_left_it(root, topic="t", partitions=2):
    """Partitions as a broker's copy holds them: several segments each, no kbatch bookkeeping
    (no .lock, no .kbatch-recovery-checkpoint: a writer would recover every segment), and the last
    partition's active segment ends in a torn batch (its first 40 bytes). Returns {partition:
    (intact end offset, bytes of complete batches in the active segment)}."""
    out = {}
    for p in range(partitions):
        write_topic(root, topic, p, batches=12, per_batch=20, segment_bytes=2048)
        d = os.path.join(root, f"{topic}-{p}")
        for name in (".lock", ".kbatch-recovery-checkpoint"):
            if os.path.exists(os.path.join(d, name)):
                os.unlink(os.path.join(d, name))
        log = kbatch.Log.open(d)
        try:
            end = log.end_offset()
            active = log.segments[-1]
            path = os.path.join(d, f"{active.base_offset:020d}.log")
        finally:
            log.close()
        with open(path, "rb") as f:
            intact = f.read()
        if p == partitions - 1:
            b = kbatch.BatchBuilder(magic=2, base_offset=end, timestamp_extended=False)
            b.append(NOW, b"torn", b"a batch cut short by a crash" * 4)
            with open(path, "ab") as f:
                f.write(b.build()[:40])
        out[p] = (end, intact, path)
    return out


def kbatch_cli(*args):
    return [sys.executable, "-m", "kbatch.cli", "serve", *map(str, args)]


def read_line(proc, timeout=WAIT_S):
    """One line of proc's stdout, or None when the process ends or the time is up."""
    sel = selectors.DefaultSelector()
    sel.register(proc.stdout, selectors.EVENT_READ)
    deadline = time.monotonic() + timeout
    try:
        while time.monotonic() < deadline:
            if sel.select(timeout=max(0.0, deadline - time.monotonic())):
                line = proc.stdout.readline()
                return line or None
        return None
    finally:
        sel.close()


def fetch_req(topic, partition, offset, version=12):
    R = FetchRequest
    return R(replica_id=-1, max_wait_ms=0, min_bytes=0, max_bytes=1 << 24, isolation_level=0, session_id=0,
             session_epoch=-1, topics=[R.FetchTopic(topic=topic, partitions=[R.FetchTopic.FetchPartition(
                 partition=partition, current_leader_epoch=-1, fetch_offset=offset, last_fetched_epoch=-1,
                 log_start_offset=-1, partition_max_bytes=1 << 24)])], forgotten_topics_data=[], rack_id="")


def produce_req(topic, partition):
    b = kbatch.BatchBuilder(magic=2, timestamp_extended=False)
    b.append(NOW, b"k", b"v")
    R = ProduceRequest
    return R(transactional_id=None, acks=-1, timeout_ms=5000, topic_data=[R.TopicProduceData(
        name=topic, partition_data=[R.TopicProduceData.PartitionProduceData(index=partition, records=b.build())])])


def latest_req(topic, partition):
    R = ListOffsetsRequest
    return R(replica_id=-1, isolation_level=0, timeout_ms=5000, topics=[R.ListOffsetsTopic(name=topic, partitions=[
        R.ListOffsetsTopic.ListOffsetsPartition(partition_index=partition, current_leader_epoch=-1, timestamp=-1,
                                                max_num_offsets=1)])])


def test_serve_is_read_only_by_default_and_serves_a_torn_partition_as_a_reader_does(tmp_path):
    root = tmp_path / "logs"
    root.mkdir()
    parts = as_a_broker_left_it(str(root))
    torn_end, torn_intact, torn_path = parts[1]
    before = snapshot(root)
    proc = subprocess.Popen(kbatch_cli(root, "--listen", "127.0.0.1:0", "--json"), stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    try:
        line = read_line(proc)
        assert line, f"no listening line: {proc.poll()} {proc.stderr.read() if proc.poll() is not None else ''}"
        started = json.loads(line)
        assert started["event"] == "listening" and started["mode"] == "read-only"
        assert started["topics"] == {"t": [0, 1]} and started["partitions"] == 2
        with RawClient(started["bootstrap"]) as c:
            for p, (end, intact, _path) in parts.items():
                r, _ = c.call(latest_req("t", p), 7)
                assert r.topics[0].partitions[0].offset == end  # the intact end, not past the torn bytes
            # the active segment from its first batch: every complete batch, not the torn one
            log = kbatch.Log.open(str(root / "t-1"))
            try:
                active_base = log.segments[-1].base_offset
            finally:
                log.close()
            r, _ = c.call(fetch_req("t", 1, active_base), 12)
            got = r.responses[0].partitions[0]
            assert got.error_code == 0 and got.high_watermark == torn_end
            assert bytes(got.records) == torn_intact
            assert r.responses[0].partitions[0].records is not None
            # Produce is refused with TOPIC_AUTHORIZATION_FAILED; a commit is kept in memory only
            r, _ = c.call(produce_req("t", 0), 9)
            assert r.responses[0].partition_responses[0].error_code == 29
            T = OffsetCommitRequest.OffsetCommitRequestTopic
            r, _ = c.call(OffsetCommitRequest(group_id="g", generation_id_or_member_epoch=-1, member_id="",
                                              group_instance_id=None, retention_time_ms=-1, topics=[T(
                                                  name="t", partitions=[T.OffsetCommitRequestPartition(
                                                      partition_index=0, committed_offset=5, committed_leader_epoch=-1,
                                                      committed_metadata="")])]), 8)
            assert r.topics[0].partitions[0].error_code == 0
            r, _ = c.call(OffsetFetchRequest(group_id="g", topics=None, require_stable=False), 7)
            assert [(t.name, p.committed_offset) for t in r.topics for p in t.partitions] == [("t", 5)]
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(WAIT_S) == 0
        stopped = json.loads(read_line(proc))
        assert stopped["event"] == "stopped" and stopped["connections"]["dropped"] == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(WAIT_S)
    assert snapshot(root) == before
    assert os.path.getsize(torn_path) == len(torn_intact) + 40  # the torn bytes are still there


def _one_line_exit_2(code, stderr, stdout, match):
    lines = stderr.strip().splitlines()
    assert code == 2, (code, stderr)
    assert len(lines) == 1 and "Traceback" not in stderr and match in lines[0], stderr
    assert stdout == ""


@pytest.mark.parametrize("mode", [[], ["--writable"]])
def test_a_start_that_fails_changes_nothing(mode, tmp_path):
    """A bad port, a host that cannot be resolved, a port in use, a bad topic config or
    contradictory flags: one line on stderr, exit 2, no traceback, the directory as it was, even with
    --writable (which would lock and recover it if it got that far). The port cases run the
    command as a process; the others call it in this process (typer's runner)."""
    from typer.testing import CliRunner

    from kbatch import cli

    root = tmp_path / "logs"
    root.mkdir()
    as_a_broker_left_it(str(root))
    before = snapshot(root)
    app, runner = cli.make_app(), CliRunner()

    def in_process(*args, match):
        r = runner.invoke(app, ["serve", str(root), *mode, *args])
        assert not isinstance(r.exception, Exception) or isinstance(r.exception, SystemExit), r.exception
        _one_line_exit_2(r.exit_code, r.stderr, r.stdout, match)

    def as_a_process(*args, match):
        r = subprocess.run(kbatch_cli(root, *mode, *args), capture_output=True, text=True, timeout=WAIT_S)
        _one_line_exit_2(r.returncode, r.stderr, r.stdout, match)

    as_a_process("--listen", "127.0.0.1:99999", match="0-65535")
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen(1)
        port = taken.getsockname()[1]
        as_a_process("--listen", f"127.0.0.1:{port}", match=f"cannot listen on 127.0.0.1:{port}")
        in_process("--listen", f"localhost:{port}", match=f"cannot listen on localhost:{port}")
    # a label longer than DNS allows: refused without a lookup leaving the machine
    in_process("--listen", "h" * 70 + ":9092", match="cannot listen on")
    in_process("--listen", "127.0.0.1:x", match="HOST:PORT")
    in_process("--listen", "127.0.0.1:-1", match="HOST:PORT")
    in_process("--config", "segment.bytes=lots", match="segment.bytes")
    in_process("--num-partitions", "0", match="--num-partitions")
    in_process("--read-only" if mode else "--auto-create-topics", match="--writable")
    assert snapshot(root) == before


def test_the_python_api_binds_before_it_opens_the_directory(tmp_path):
    from kbatch.server import Server, serve
    from kbatch.server.socket_server import ListenError

    root = tmp_path / "logs"
    root.mkdir()
    as_a_broker_left_it(str(root))
    before = snapshot(root)
    with pytest.raises(ValueError, match="0-65535"):
        serve(str(root), listen="127.0.0.1:99999")
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen(1)
        port = taken.getsockname()[1]
        with pytest.raises(ListenError, match=f"127.0.0.1:{port}"):
            serve(str(root), listen=f"127.0.0.1:{port}", read_only=False).start()
        import asyncio
        with pytest.raises(ListenError, match="0-65535"):
            asyncio.run(Server(str(root), host="127.0.0.1", port=70000, read_only=False).start())
    assert snapshot(root) == before


def test_writable_serves_produce_and_says_so(tmp_path):
    """--writable: the directory is locked and recovered (the torn tail cut, as a broker does) and
    Produce appends; the --json line says writable."""
    root = tmp_path / "logs"
    root.mkdir()
    parts = as_a_broker_left_it(str(root))
    torn_end, torn_intact, torn_path = parts[1]
    proc = subprocess.Popen(kbatch_cli(root, "--listen", "127.0.0.1:0", "--json", "--writable"),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        started = json.loads(read_line(proc))
        assert started["mode"] == "writable" and started["listen"] == started["bootstrap"]
        with RawClient(started["bootstrap"]) as c:
            r, _ = c.call(produce_req("t", 1), 9)
            assert r.responses[0].partition_responses[0].error_code == 0
            assert r.responses[0].partition_responses[0].base_offset == torn_end
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(WAIT_S) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(WAIT_S)
    with open(torn_path, "rb") as f:
        assert f.read(len(torn_intact) + 1)[:len(torn_intact)] == torn_intact
    log = kbatch.Log.open(str(root / "t-1"))
    try:
        assert log.end_offset() == torn_end + 1 and log.problems == []
    finally:
        log.close()
