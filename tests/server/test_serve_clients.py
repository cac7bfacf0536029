"""kbatch serve with real Kafka clients, each in a subprocess with a timeout, over loopback:
confluent-kafka (librdkafka 2.x), kafka-python 3.x, kafka-python 2.0.2 (Debian's python3-kafka under
the system Python), aiokafka and kcat (librdkafka 2.0, Debian).

Per client: produce every codec it has (idempotent where it can) and read every record back byte for
byte, and from disk with kbatch; offsetsForTimes against Log.offsets_for_times over data that holds
negative timestamps; a future timestamp gets error 32 and nothing is appended; a group commits,
the server restarts, and the group resumes at its commit. Rebalances of two members (a second member
joining a stable group, one leaving; eager and cooperative assignors); broker-shaped directories,
legacy message sets, transactions, and the real broker directories of tests/data/brokers, consumed
by every client."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time

import pytest

pytest.importorskip("kafka.protocol.api_message", reason="kbatch serve needs kafka-python >= 3 (the serve extra)")

import kbatch  # noqa: E402
from kbatch.schema import coordinator_records as cr  # noqa: E402
from kbatch.server import serve  # noqa: E402

from support.serve_support import NOW, log_records, write_broker_dir, write_legacy, write_topic, write_transactions  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
DRIVERS = os.path.join(os.path.dirname(HERE), "support", "serve_clients")
SYSTEM_PY = "/usr/bin/python3"
RUN_TIMEOUT = 90
FUTURE_LIMIT_MS = 3_600_000
# group.initial.rebalance.delay.ms: Kafka's 3 s shortened, not to 0. With no delay a new group's first
# generation completes before a client has the topic's metadata, so its leader assigns nothing and
# rejoins at once; kafka-python 3.0.12 then sometimes drops the SyncGroup answer of that quick second
# generation (seen in its debug log: received, never applied, heartbeats stop).
SERVER_OPTIONS = dict(group_initial_rebalance_delay_ms=300,
                      topic_config={"message.timestamp.after.max.ms": str(FUTURE_LIMIT_MS)})


def _has(module, python=sys.executable):
    return subprocess.run([python, "-c", f"import {module}"], capture_output=True, timeout=60).returncode == 0


def _kp2():
    if not os.path.exists(SYSTEM_PY):
        return "no /usr/bin/python3"
    r = subprocess.run([SYSTEM_PY, "-c", "import kafka; print(kafka.__version__)"], capture_output=True, text=True,
                       timeout=60)
    if r.returncode != 0 or not r.stdout.startswith("2."):
        return "Debian's python3-kafka (kafka-python 2.0.2) is not installed (python3 dev.py test installs it as root)"
    return None


# name: (command, codecs, idempotent producer, reason to skip or None)
CLIENTS = {
    "confluent-kafka": ([sys.executable, os.path.join(DRIVERS, "confluent.py")],
                        ["none", "gzip", "snappy", "lz4", "zstd"], True,
                        None if _has("confluent_kafka") else "confluent-kafka is not installed"),
    "kafka-python": ([sys.executable, os.path.join(DRIVERS, "kafka_python.py")],
                     [None, "gzip", "snappy", "lz4", "zstd"], True, None),
    "aiokafka": ([sys.executable, os.path.join(DRIVERS, "aiokafka_client.py")],
                 [None, "gzip", "snappy", "lz4", "zstd"], True, None if _has("aiokafka") else "aiokafka is not installed"),
    "kafka-python-2.0.2": ([SYSTEM_PY, os.path.join(DRIVERS, "kafka_python.py")], [None, "gzip"], False, _kp2()),
}


def run_plan(client, bootstrap, plan):
    cmd = CLIENTS[client][0]
    env = dict(os.environ, PYTHONPATH="") if cmd[0] == SYSTEM_PY else None
    r = subprocess.run(cmd + [bootstrap], input=json.dumps(plan), capture_output=True, text=True,
                       timeout=RUN_TIMEOUT, env=env)
    assert r.returncode == 0, f"{client} driver failed:\n{r.stderr[-3000:]}"
    return json.loads(r.stdout)


def hexb(b):
    return None if b is None else bytes(b).hex()


def records_to_send(n, start_ts, tag):
    out = []
    for i in range(n):
        key = None if i == 1 else b"%s-k%d" % (tag, i)
        value = None if i == 2 else b"%s-value-%d-" % (tag, i) + bytes(range(i * 7 % 256))
        out.append([hexb(key), hexb(value), start_ts + i, [["h", hexb(b"%d" % i)], ["trace", hexb(b"")]]])
    return out


def make_dir(root):
    """p-0: empty (clients produce); g-0: 30 records (groups); r-0: records with negative and
    out-of-order timestamps (offsets for times)."""
    os.makedirs(os.path.join(root, "p-0"))
    write_topic(root, "g", 0, batches=6, per_batch=5, codecs=[kbatch.Compression.NONE, kbatch.Compression.GZIP])
    path = os.path.join(root, "r-0")
    log = kbatch.Log.create(path, kbatch.LogConfig(), now_ms=NOW)
    stamps = [[-86_400_000, -5, 0, 7], [100, 50, 200], [NOW - 5000, NOW - 9000, NOW - 1000]]
    try:
        for group in stamps:
            b = kbatch.BatchBuilder(magic=2, timestamp_extended=False)
            for ts in group:
                b.append(ts, b"k", b"ts=%d" % ts)
            log.append(b.build(), now_ms=NOW)
    finally:
        log.close()
    return [t for g in stamps for t in g]


@pytest.fixture
def served_dir(tmp_path):
    root = str(tmp_path / "logs")
    os.makedirs(root)
    stamps = make_dir(root)
    return root, stamps


@pytest.mark.parametrize("client", list(CLIENTS))
def test_client_produces_consumes_looks_up_and_resumes_a_group(client, served_dir):
    _cmd, codecs, idempotent, skip = CLIENTS[client]
    if skip:
        pytest.skip(skip)
    root, stamps = served_dir
    sent, plan = [], [{"op": "version"}]
    for i, codec in enumerate(codecs):
        recs = records_to_send(6, NOW - 60_000 + i * 100, (codec or "none").encode())
        sent += recs
        plan.append({"op": "produce", "topic": "p", "partition": 0, "codec": codec, "records": recs,
                     "idempotent": idempotent and i % 2 == 0, "acks": "all" if i % 2 == 0 else 1})
    plan.append({"op": "consume", "topic": "p", "partition": 0, "offset": 0, "count": len(sent)})
    targets = [0, 1, 7, 8, 60, 150, 201, NOW - 9000, NOW - 4999, NOW]
    plan.append({"op": "times", "topic": "r", "partition": 0, "targets": targets})
    future = [[hexb(b"f"), hexb(b"future"), int(time.time() * 1000) + 2 * FUTURE_LIMIT_MS, []]]
    plan.append({"op": "produce", "topic": "p", "partition": 0, "codec": codecs[0], "records": future,
                 "expect_error": True})
    plan.append({"op": "group", "topic": "g", "group": f"grp-{client}", "count": 12})

    with serve(root, **SERVER_OPTIONS) as srv:
        out = run_plan(client, srv.bootstrap, plan)
    version, *produced, consumed, times, refused, group = out
    print(client, version)

    # every record back, byte for byte, at the offsets the producer was told; and on disk
    offsets = [o for p in produced for o in p["offsets"]]
    assert offsets == list(range(len(sent))), produced
    want = [[o, ts, k, v, h] for o, (k, v, ts, h) in enumerate(sent)]
    assert consumed["records"] == want
    disk = [[o, ts, hexb(k), hexb(v), [[hk, hexb(hv)] for hk, hv in h]] for o, ts, k, v, h in log_records(
        os.path.join(root, "p-0"))]
    assert disk == want

    # offsets for times: exactly kbatch's answers (KIP-79), over negative and out-of-order timestamps
    log = kbatch.Log.open(os.path.join(root, "r-0"))
    try:
        expect = [None if a is None else [a.offset, a.timestamp] for a in log.offsets_for_times(targets)]
    finally:
        log.close()
    if client == "confluent-kafka":  # librdkafka gives the offset only
        expect = [None if a is None else [a[0], t] for a, t in zip(expect, targets)]
    assert times["answers"] == expect

    # a record an hour and more ahead: error 32 (INVALID_TIMESTAMP), nothing appended
    assert "offsets" not in refused, refused
    assert refused.get("code") == 32 or "InvalidTimestamp" in refused.get("error", ""), refused
    assert len(log_records(os.path.join(root, "p-0"))) == len(sent)

    # a group: 12 records, commit, restart, resume at 12
    assert group["offsets"] == list(range(12)) and group["committed"] == 12
    with serve(root, **SERVER_OPTIONS) as srv:
        [again] = run_plan(client, srv.bootstrap, [{"op": "group", "topic": "g", "group": f"grp-{client}", "count": 5}])
    assert again["offsets"] == list(range(12, 17)) and again["committed"] == 17
    commits = _committed_records(root, f"grp-{client}")
    assert commits[-1] == 17


def _committed_records(root, group):
    out = []
    for name in sorted(os.listdir(root)):
        if not name.startswith("__consumer_offsets-"):
            continue
        for o, ts, k, v, _ in log_records(os.path.join(root, name)):
            key, value = cr.decode(k, v)
            if isinstance(key, cr.OffsetCommitKey) and key.group == group:
                assert value.metadata in ("", "kbatch-test") and value.version == 3 and key.version == 1
                out.append(value.offset)
    return out


def test_kcat(served_dir):
    kcat = shutil.which("kcat")
    if kcat is None:
        pytest.skip("kcat is not installed (Debian package kcat; python3 dev.py test installs it as root)")
    root, _stamps = served_dir
    lines = [f"k{i}:value {i}" for i in range(20)]

    def run(*args, stdin=None):
        r = subprocess.run([kcat, "-b", srv.bootstrap, *args], input=stdin, capture_output=True, text=True,
                           timeout=60)
        assert r.returncode == 0, r.stderr
        return r.stdout

    with serve(root, **SERVER_OPTIONS) as srv:
        for codec in ("none", "gzip", "snappy", "lz4", "zstd"):
            run("-P", "-t", "p", "-p", "0", "-K:", "-z", codec, "-X", "enable.idempotence=true", stdin="\n".join(lines) + "\n")
        got = run("-C", "-t", "p", "-p", "0", "-o", "beginning", "-e", "-f", "%o|%k|%s\n").splitlines()
        assert got == [f"{i}|k{i % 20}|value {i % 20}" for i in range(100)]
        disk = [(o, k.decode(), v.decode()) for o, _ts, k, v, _h in log_records(os.path.join(root, "p-0"))]
        assert disk == [(i, f"k{i % 20}", f"value {i % 20}") for i in range(100)]
        # kcat -Q: offsets by time (ListOffsets v2 from librdkafka 2.0)
        log = kbatch.Log.open(os.path.join(root, "r-0"))
        try:
            for t in (0, 8, 150, NOW - 9000):
                want = log.offset_for(t)
                out = run("-Q", "-t", f"r:0:{t}")
                assert f"offset {want.offset}" in out, out
        finally:
            log.close()
        got = run("-G", "grp-kcat", "-c", "12", "-f", "%o\n", "-X", "auto.offset.reset=earliest", "g").split()
        assert got == [str(i) for i in range(12)]
    with serve(root, **SERVER_OPTIONS) as srv:
        got = run("-G", "grp-kcat", "-c", "5", "-f", "%o\n", "-X", "auto.offset.reset=earliest", "g").split()
        assert got == [str(i) for i in range(12, 17)]
        # read-only refuses produce with an authorization error, and the data stays as it was
    with serve(root, read_only=True, **SERVER_OPTIONS) as srv:
        r = subprocess.run([kcat, "-b", srv.bootstrap, "-P", "-t", "p", "-p", "0"], input="x\n", capture_output=True,
                           text=True, timeout=60)
        assert "authoriz" in (r.stderr + r.stdout).lower()
    assert len(log_records(os.path.join(root, "p-0"))) == 100


@pytest.mark.parametrize("strategy", ["range", "cooperative-sticky"])
def test_two_members_rebalance_and_one_leaves_confluent(strategy, tmp_path):
    """Two librdkafka members of one group share a two-partition topic; when one leaves the other
    gets both partitions (eager and cooperative assignors: the coordinator relays either)."""
    if CLIENTS["confluent-kafka"][3]:
        pytest.skip(CLIENTS["confluent-kafka"][3])
    root = str(tmp_path / "logs")
    os.makedirs(root)
    write_topic(root, "m", 0, batches=1)
    write_topic(root, "m", 1, batches=1)
    with serve(root, **SERVER_OPTIONS) as srv:
        [out] = run_plan("confluent-kafka", srv.bootstrap, [{"op": "rebalance", "topic": "m", "group": "pair",
                                                             "strategy": strategy}])
    assert out.get("ok") == [True, True], out
    assert out["split"] == [[0], [1]] and out["after_leave"] == [0, 1]


def test_a_second_member_joins_a_stable_group_and_leaves_kafka_python(tmp_path):
    """kafka-python members, one process each: A alone holds both partitions; B joins the stable
    group (A learns of the rebalance from its heartbeat and rejoins), they split; B leaves, A gets both."""
    import threading

    root = str(tmp_path / "logs")
    os.makedirs(root)
    write_topic(root, "m", 0, batches=1)
    write_topic(root, "m", 1, batches=1)
    cmd = CLIENTS["kafka-python"][0]

    def start(name):
        stop = str(tmp_path / f"stop-{name}")
        p = subprocess.Popen(cmd + [srv.bootstrap], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True)
        p.stdin.write(json.dumps([{"op": "member", "topic": "m", "group": "pair", "stop_file": stop}]))
        p.stdin.close()
        seen = []
        threading.Thread(target=lambda: [seen.append(json.loads(line.split(" ", 1)[1]))
                                         for line in p.stderr if line.startswith("assignment ")],
                         daemon=True).start()
        return p, stop, seen

    def wait_for(seen, want, seconds=40):
        end = time.time() + seconds
        while time.time() < end:
            if seen and seen[-1] == want:
                return True
            time.sleep(0.05)
        return False

    with serve(root, **SERVER_OPTIONS) as srv:
        a, a_stop, a_seen = start("a")
        b = None
        try:
            assert wait_for(a_seen, [0, 1]), a_seen
            b, b_stop, b_seen = start("b")
            deadline = time.time() + 40
            while time.time() < deadline and not (a_seen[-1:] and b_seen[-1:] and
                                                  sorted([a_seen[-1], b_seen[-1]]) == [[0], [1]]):
                time.sleep(0.05)
            assert sorted([a_seen[-1], b_seen[-1]]) == [[0], [1]], (a_seen, b_seen)
            open(b_stop, "w").close()
            assert b.wait(30) == 0
            assert wait_for(a_seen, [0, 1]), a_seen
        finally:
            open(a_stop, "w").close()
            for p in (a, b):
                if p is not None:
                    try:
                        p.wait(30)
                    except subprocess.TimeoutExpired:
                        p.kill()


@pytest.mark.parametrize("client", list(CLIENTS))
def test_broker_shaped_directory_and_transactions_with_every_client(client, tmp_path):
    """A directory as a broker leaves it (meta.properties, partition.metadata with a topic id, leader
    epoch 4 and its checkpoint), a partition of magic 1 message sets as an older broker wrote them
    (served as they are), and data with a committed, an aborted and an open transaction (with
    the .txnindex entry): every client reads it; read_committed consumers see the committed and
    plain records only."""
    if CLIENTS[client][3]:
        pytest.skip(CLIENTS[client][3])
    root = str(tmp_path / "logs")
    os.makedirs(root)
    visible = write_transactions(root)
    write_broker_dir(root)
    legacy = write_legacy(root, "legacy", 0, magic=1)
    want_b = [[o, ts, hexb(k), hexb(v), [[hk, hexb(hv)] for hk, hv in h]]
              for o, ts, k, v, h in log_records(os.path.join(root, "b-0"))]
    with serve(root, read_only=True) as srv:
        [rc, ru, b, lg] = run_plan(client, srv.bootstrap, [
            {"op": "consume", "topic": "tx", "partition": 0, "offset": 0, "count": len(visible), "isolation": "read_committed"},
            {"op": "consume", "topic": "tx", "partition": 0, "offset": 0, "count": 7},
            {"op": "consume", "topic": "b", "partition": 0, "offset": 0, "count": len(want_b)},
            {"op": "consume", "topic": "legacy", "partition": 0, "offset": 0, "count": len(legacy)}])
    assert b["records"] == want_b
    assert [r[:4] for r in lg["records"]] == [[o, ts, hexb(k), hexb(v)] for o, ts, k, v in legacy]
    got = [r[0] for r in ru["records"]]
    if "unsupported" in rc:  # kafka-python 2.0.2 reads uncommitted only, and hands out the two
        assert got == [0, 1, 2, 3, 4, 5, 6]  # transaction markers (2, 5) as records: its own behaviour
    else:
        assert [r[0] for r in rc["records"]] == visible
        assert got == [0, 1, 3, 4, 6, 7, 8]


def _broker_data_names():
    from support.serve_support import BROKER_DATA

    return sorted(n for n in os.listdir(BROKER_DATA) if os.path.isdir(os.path.join(BROKER_DATA, n))) \
        if os.path.isdir(BROKER_DATA) else []


@pytest.mark.parametrize("name", _broker_data_names())
def test_real_broker_directories_with_every_client(name, tmp_path):
    """The data directories real brokers wrote (tests/data/brokers: Kafka 2.1, 2.7.1, 3.1.0, 3.7.0)
    served read-only: every client reads every data partition back as kbatch reads it from disk
    (offsets, timestamps, keys, values, headers), and the groups committed in the archived
    __consumer_offsets are answered by OffsetFetch with their last commits."""
    from support.serve_support import RawClient, broker_data_copy, request_class

    root = broker_data_copy(name, str(tmp_path / name))
    parts = sorted(d for d in os.listdir(root) if os.path.isdir(os.path.join(root, d))
                   and not d.startswith("__") and d.rsplit("-", 1)[-1].isdigit())
    want = {}
    for d in parts:
        log = kbatch.Log.open(os.path.join(root, d))
        try:
            codecs = {int(b.compression) for b in log.batches()}
            start = log.beginning_offset()
        finally:
            log.close()
        recs = [[o, ts, hexb(k), hexb(v), [[hk, hexb(hv)] for hk, hv in h]]
                for o, ts, k, v, h in log_records(os.path.join(root, d))]
        want[d] = (start, recs, codecs)
    commits = {}
    for d in sorted(os.listdir(root)):
        if d.startswith("__consumer_offsets-"):
            for _o, _ts, k, v, _h in log_records(os.path.join(root, d)):
                key, value = cr.decode(k, v)
                if isinstance(key, cr.OffsetCommitKey):
                    if value is None:
                        commits.pop((key.group, key.topic, key.partition), None)
                    else:
                        commits[(key.group, key.topic, key.partition)] = value.offset
    with serve(root, read_only=True) as srv:
        for client, (_cmd, codecs, _idem, skip) in CLIENTS.items():
            if skip:
                continue
            plan = []
            for d, (start, recs, used) in want.items():
                topic, index = d.rsplit("-", 1)
                if recs and (used <= {kbatch.Compression.NONE, kbatch.Compression.GZIP} or len(codecs) > 2):
                    plan.append({"op": "consume", "topic": topic, "partition": int(index), "offset": start,
                                 "count": len(recs)})
            results = run_plan(client, srv.bootstrap, plan)
            for step, got in zip(plan, results):
                expect = want[f"{step['topic']}-{step['partition']}"][1]
                assert got.get("records") == expect, (client, step["topic"], got)
        OF, MD = request_class(9), request_class(3)
        with RawClient(srv.bootstrap) as c:
            md, _ = c.call(MD(topics=None, allow_auto_topic_creation=False), 12)
            served = sorted(f"{t.name}-{p.partition_index}" for t in md.topics for p in t.partitions)
            assert served == sorted(d for d in os.listdir(root) if d.rsplit("-", 1)[-1].isdigit()
                                    and not d.startswith("__cluster_metadata"))
            for group in sorted({g for g, _, _ in commits}):
                r, _ = c.call(OF(group_id=group, topics=None, require_stable=False), 7)
                got = {(group, t.name, p.partition_index): p.committed_offset for t in r.topics for p in t.partitions}
                assert got == {k: v for k, v in commits.items() if k[0] == group}
    print(name, {d: len(w[1]) for d, w in want.items()}, "groups:", sorted({g for g, _, _ in commits}))


@pytest.mark.parametrize("txn_index", [False, True])
@pytest.mark.parametrize("client", [c for c in CLIENTS if c != "kafka-python-2.0.2"])
def test_read_committed_consumer_gets_only_committed_records(client, txn_index, tmp_path):
    """Issue 28 item 1: aborted transactions (from .txnindex, or, with none, from the ABORT
    markers: kbatch.log.fetch) are listed in the Fetch response and the last stable offset stops
    before the open transaction, so a read_committed client gets the committed and plain records
    only; read_uncommitted gets every data record."""
    from support import partitions as P

    if CLIENTS[client][3]:
        pytest.skip(CLIENTS[client][3])
    root = str(tmp_path / "logs")
    os.makedirs(root)
    built = P.transactional(os.path.join(root, "tx-0"), txn_index=txn_index)
    with serve(root, read_only=True) as srv:
        [rc, ru] = run_plan(client, srv.bootstrap, [
            {"op": "consume", "topic": "tx", "partition": 0, "offset": 0, "count": len(built.committed),
             "isolation": "read_committed"},
            {"op": "consume", "topic": "tx", "partition": 0, "offset": 0, "count": len(built.uncommitted)}])
    assert [r[0] for r in rc["records"]] == built.committed
    assert [r[0] for r in ru["records"]] == built.uncommitted
