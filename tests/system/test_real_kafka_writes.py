"""kbatch writes, the broker serves; and the broker's KIP-937 / KIP-32 answers over the wire
(docs/real-kafka.md, "kbatch writes, the broker serves").

Per Kafka version, one broker for the module:

1. topics are created while it runs (so its metadata has them and their topic ids);
2. raw Produce requests (kbatch's own batch bytes) meet its LogValidator: the INVALID_TIMESTAMP
   record errors must be kbatch's messages for the same bytes at the broker's clock, and a
   LogAppendTime topic must store the bytes kbatch's validate_and_assign writes at the broker's time;
3. kbatch writes partitions (Log.append with every codec, idempotent and transactional producers,
   committed and aborted markers, tombstones, headers; Log.append_table; `kbatch import`; the Spark
   writer (a local session);
   kbatch.compact, one and two passes) into temporary directories;
4. the broker is stopped; each written partition replaces a created partition's files (the broker's
   own partition.metadata, so the topic id, is kept), twice: "-k" topics with the recovery point at
   the log end (the broker serves kbatch's indexes, .txnindex and producer snapshots as they are)
   and "-r" topics with it at 0 (the broker's recovery reads and checks every batch and rebuilds the
   indexes); the clean-shutdown marker is removed so the recovery points are used;
5. the broker is started again: it must log no WARN/ERROR about those partitions, and Kafka's own
   consumer (read_uncommitted and read_committed) must read exactly what kbatch wrote: offsets,
   timestamps and their type, keys, values, headers, leader epochs; stopped again, the `.log` files
   must be the bytes kbatch wrote (nothing truncated), and the "-r" partitions' rebuilt .txnindex
   the bytes kbatch wrote.
"""
from __future__ import annotations

import random
import re
import shutil
import struct
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

import kbatch
from kbatch import _wire as W
from kbatch.log import checkpoints as ckpt
from kbatch.record.builder import build_end_txn_marker
from support.kafka_broker import KafkaBroker
from support.kafka_driver import Consumed, consume, create_topics, read_consumed

pytestmark = pytest.mark.real_kafka

CODECS = ("none", "gzip", "snappy", "lz4", "zstd")
T0 = 1_700_000_000_000  # the records' CreateTime (the broker keeps every record: log.retention.ms=-1)
NOW = T0 + 3_600_000  # kbatch's clock while it writes
EPOCH = 0  # a new topic's leader epoch: what the broker would stamp on these batches
SEGMENT = {"segment_bytes": 8192, "index_interval_bytes": 1024}
_FILE = re.compile(r"^\d{20}\.(log|index|timeindex|txnindex|snapshot)$")


@dataclass(frozen=True)
class Rec:
    """One data record as kbatch wrote it (aborted: in a transaction that ended with ABORT)."""

    offset: int
    timestamp: int
    key: bytes | None
    value: bytes | None
    headers: tuple[tuple[str, bytes | None], ...]
    leader_epoch: int | None
    aborted: bool = False
    timestamp_type: str = "CreateTime"


# ------------------------------------------------------------------------------------ kbatch writes
class Writer:
    """Random producers appending through kbatch.Log, remembering every record they wrote."""

    def __init__(self, seed: int, keys: int | None = None) -> None:
        self.rng = random.Random(seed)
        self.keys = keys
        self.recs: list[Rec] = []
        self.i = 0

    def record(self) -> tuple[int, bytes | None, bytes | None, list[tuple[str, bytes | None]]]:
        rng = self.rng
        self.i += 1
        ts = T0 + self.i * 500 + rng.randrange(-30_000, 30_000)
        if self.keys is not None:
            key: bytes | None = b"key-%d" % rng.randrange(self.keys)
        else:
            key = rng.choice((None, b"", b"user-%d" % rng.randrange(40), rng.randbytes(rng.randrange(1, 12))))
        r = rng.random()
        value = None if r < 0.12 else b"" if r < 0.15 else (b"event %d " % self.i) * rng.randrange(1, 30)
        headers = [(rng.choice(("trace", "", "ünï")), None if rng.random() < 0.2 else rng.randbytes(rng.randrange(8)))
                   for _ in range(rng.choice((0, 0, 1, 2)))]
        return ts, key, value, headers

    def append(self, log: Any, codec: str, n: int, *, pid: int = -1, epoch: int = -1, seq: int = -1,
               txn: bool = False, extended: bool = False) -> list[Rec]:
        b = kbatch.BatchBuilder(magic=2, compression=kbatch.Compression[codec.upper()], timestamp_extended=extended,
                                producer_id=pid, producer_epoch=epoch, base_sequence=seq, is_transactional=txn)
        rows = [self.record() for _ in range(n)]
        for ts, key, value, headers in rows:
            b.append(ts, key, value, headers=headers)
        info = log.append(b.build(), now_ms=NOW)
        out = [Rec(info.first_offset + j, ts, key, value, tuple(h), EPOCH) for j, (ts, key, value, h) in enumerate(rows)]
        self.recs += out
        return out

    def end_txn(self, log: Any, pid: int, commit: bool, pending: list[Rec]) -> None:
        log.append(build_end_txn_marker(producer_id=pid, producer_epoch=0, commit=commit, coordinator_epoch=0,
                                        timestamp=NOW), now_ms=NOW, from_client=False)
        if not commit:
            aborted = {r.offset for r in pending}
            self.recs = [Rec(r.offset, r.timestamp, r.key, r.value, r.headers, r.leader_epoch, True)
                         if r.offset in aborted else r for r in self.recs]

    def producers(self, log: Any, codec: str, batches: int) -> None:
        """A plain producer (KIP-228 extended batches half the time), an idempotent one and two
        transactional ones taking turns; about a third of the transactions aborted."""
        rng = self.rng
        seq = {1000: 0, 2000: 0, 2001: 0}
        open_txn: dict[int, list[Rec]] = {2000: [], 2001: []}
        for _ in range(batches):
            n = rng.randrange(1, 12)
            who = rng.choice(("plain", "idem", 2000, 2001))
            if who == "plain":
                self.append(log, codec, n, extended=rng.random() < 0.5)
            elif who == "idem":
                self.append(log, codec, n, pid=1000, epoch=0, seq=seq[1000])
                seq[1000] += n
            else:
                assert isinstance(who, int)
                open_txn[who] += self.append(log, codec, n, pid=who, epoch=0, seq=seq[who], txn=True)
                seq[who] += n
                if rng.random() < 0.4:
                    self.end_txn(log, who, rng.random() < 0.65, open_txn[who])
                    open_txn[who] = []
        for pid, pending in open_txn.items():  # every transaction ends: the LSO is the log end
            if pending:
                self.end_txn(log, pid, rng.random() < 0.65, pending)


def _log(path: Path, **kw: Any) -> Any:
    log = kbatch.Log.create(path, kbatch.LogConfig(**{**SEGMENT, **kw}), now_ms=NOW)
    log.partition_leader_epoch = EPOCH
    return log


def _table_recs(recs: list[Rec]) -> Any:
    """The records as the Arrow columns append_table and `kbatch import` take (decode_columns' names)."""
    import pyarrow as pa

    return pa.table({
        "key": pa.array([r.key for r in recs], pa.binary()),
        "value": pa.array([r.value for r in recs], pa.binary()),
        "timestamp": pa.array([r.timestamp for r in recs], pa.timestamp("ms")),
        "headers": pa.array([[{"key": k, "value": v} for k, v in r.headers] for r in recs],
                            pa.list_(pa.struct([("key", pa.string()), ("value", pa.binary())]))),
    })


def _renumber(recs: list[Rec]) -> list[Rec]:
    return [Rec(i, r.timestamp, r.key, r.value, r.headers, EPOCH) for i, r in enumerate(recs)]


_SPARK: dict[str, Path] = {}


def spark_write(table: Any, root: Path) -> Path:
    """The rows through the Spark writer (df.write.format("kafka-segments"), a local session
    configured as tests/spark's): one partition, once per test run (the same for every version)."""
    import os

    if "dir" not in _SPARK:
        os.environ["PYSPARK_PYTHON"] = sys.executable
        from pyspark.sql import SparkSession

        import kbatch.spark as ks

        spark = (SparkSession.builder.master("local[2]").appName("kbatch-tests")
                 .config("spark.ui.enabled", "false").config("spark.ui.showConsoleProgress", "false")
                 .config("spark.sql.shuffle.partitions", "2").config("spark.sql.session.timeZone", "UTC")
                 .getOrCreate())
        ks.register(spark, pushdown=True)
        (spark.createDataFrame(table).coalesce(1).write.format("kafka-segments").mode("append")
         .option("topic", "spark").option("numPartitions", 1).option("segment.bytes", 8192).save(str(root)))
        _SPARK["dir"] = root / "spark-0"
    return _SPARK["dir"]


def write_partitions(root: Path) -> dict[str, tuple[Path, list[Rec], dict[str, str]]]:
    """Every partition kbatch writes: name -> (directory, the records it holds, topic configs)."""
    out: dict[str, tuple[Path, list[Rec], dict[str, str]]] = {}
    for k, codec in enumerate(CODECS):
        w = Writer(100 + k)
        with _log(root / f"append-{codec}") as log:
            w.producers(log, codec, 60)
        out[f"append-{codec}"] = (root / f"append-{codec}", w.recs, {})
    # the columns path: Log.append_table and `kbatch import` of the same rows
    w = Writer(7)
    rows = [Rec(0, *w.record()[:3], (), EPOCH) for _ in range(400)]
    rows = [Rec(0, r.timestamp, r.key, r.value, tuple(h), EPOCH) for r, h in
            zip(rows, (w.record()[3] for _ in rows))]
    table = _table_recs(rows)
    with _log(root / "table") as log:
        log.append_table(table, now_ms=NOW, compression=kbatch.Compression.LZ4, records_per_batch=37)
    out["table"] = (root / "table", _renumber(rows), {})
    import pyarrow.parquet as pq

    pq.write_table(table, root / "rows.parquet")
    r = subprocess.run([sys.executable, "-m", "kbatch", "import", str(root / "rows.parquet"), "--to",
                        str(root / "imported"), "--topic", "import", "--compression", "zstd",
                        "--config", "segment.bytes=8192", "--config", "index.interval.bytes=1024"],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    out["import"] = (root / "imported" / "import-0", _renumber(rows), {})
    out["spark"] = (spark_write(table, root / "spark"), _renumber(rows), {})
    # compaction: keyed updates, tombstones, transactions; kbatch.compact once (tombstones get their
    # delete horizon, aborted data goes) and three times, two days apart (markers get theirs on the
    # second run, and tombstones and emptied transactions' markers go)
    w = Writer(11, keys=30)
    with _log(root / "keyed") as log:
        w.producers(log, "gzip", 120)
    for passes in (1, 3):
        d = root / f"compact-{passes}"
        shutil.copytree(root / "keyed", d)
        for p in range(passes):
            kbatch.compact(d, now_ms=NOW + p * 2 * 86_400_000, delete_retention_ms=86_400_000)
        # served under cleanup.policy=delete: the broker's own cleaner (on after the restart) would
        # clean these again at its clock, years past the horizons kbatch wrote at NOW
        out[f"compact-{passes}"] = (d, w.recs, {})
    return out


# ------------------------------------------------------------------------------------ reading back
def kbatch_records(path: Path) -> list[Rec]:
    """The data records of a partition as kbatch reads them (control batches left out)."""
    out = []
    with kbatch.Log.open(path) as log:
        for batch in log.batches():
            if batch.is_control:
                continue
            ple = batch.partition_leader_epoch
            for rec in batch:
                out.append(Rec(rec.offset, rec.timestamp, None if rec.key is None else bytes(rec.key),
                               None if rec.value is None else bytes(rec.value),
                               tuple((k, None if v is None else bytes(v)) for k, v in rec.headers),
                               None if ple < 0 else ple))
    return out


def _as_consumed(r: Rec) -> tuple[Any, ...]:
    return (r.offset, r.timestamp, r.timestamp_type, r.key, r.value, r.headers, r.leader_epoch)


def _consumed(c: Consumed) -> tuple[Any, ...]:
    return (c.offset, c.timestamp, c.timestamp_type, c.key, c.value, c.headers, c.leader_epoch)


def _first_difference(want: list[Any], got: list[Any]) -> str:
    for i, (a, b) in enumerate(zip(want, got)):
        if a != b:
            return f"record {i}: kbatch wrote {a!r}, the consumer read {b!r}"
    return f"kbatch wrote {len(want)} records, the consumer read {len(got)}"


# ------------------------------------------------------------------------------------ over the wire
AFTER_MAX, BEFORE_MAX = 3_600_000, 86_400_000
WIRE_TOPICS = [
    ("kip937", 1, {"message.timestamp.after.max.ms": str(AFTER_MAX), "message.timestamp.before.max.ms": str(BEFORE_MAX)}),
    ("lat", 1, {"message.timestamp.type": "LogAppendTime"}),
]
FAR_FUTURE = 4_102_444_800_000  # 2100-01-01: past after.max.ms whatever the clock
FAR_PAST = 1_000  # 1970: before before.max.ms whatever the clock
PRODUCE_VERSION = 9  # flexible, with record_errors (v8+); every 3.x and 4.x broker takes it
_BOUNDS = re.compile(r"within \[(-?\d+), (-?\d+)\]$")


# ------------------------------------------------------------------------------------ the real LogCleaner
MINUTE = 60_000
DELETE_RETENTION = 86_400_000
CLEANER_TIMEOUT_S = 180.0
# small, so a cleaned segment of ~2 KB gets a dozen .index entries to compare
CLEANED_INDEX_INTERVAL = 128
# small, so segments also roll on a full index and the cleaner's groups end where the summed
# index sizes would pass it (groupSegmentsBySize), not only at the active segment
CLEANED_INDEX_BYTES = 156
# records a day ahead of the clock (after.max.ms lifted): transaction markers carry the broker's
# clock, and a marker that opens a segment would otherwise stop rolling by message time there
CLEANED = ("cleaned", 1, {"cleanup.policy": "compact", "segment.ms": str(5 * MINUTE),
                          "min.cleanable.dirty.ratio": "0.01", "delete.retention.ms": str(DELETE_RETENTION),
                          "index.interval.bytes": str(CLEANED_INDEX_INTERVAL),
                          "segment.index.bytes": str(CLEANED_INDEX_BYTES),
                          "message.timestamp.after.max.ms": str(2**63 - 1)})


def cleaner_input(n: int = 600) -> dict[str, Any]:
    """Keyed updates, tombstones, headers, committed and aborted transactions, idempotent and
    transactional producers taking turns, rolling a segment every ~5 minutes of message time."""
    import time

    from support.kafka_driver import Send, abort, begin, commit, flush, produce

    rng = random.Random(29)
    t0 = int(time.time() * 1000) + 32 * 3_600_000
    producers = [{"enable.idempotence": "true", "compression.type": "lz4", "linger.ms": "5"},
                 {"transactional.id": "cleaned-txn", "compression.type": "gzip", "linger.ms": "5"}]
    steps: list[Any] = []
    i = 0
    while i < n:
        txn = rng.random() < 0.3
        if txn:
            steps.append(begin(1))
        for _ in range(rng.randrange(3, 25)):
            value = None if rng.random() < 0.12 else b"v%d " % i * rng.randrange(1, 20)
            headers = [("h", rng.randbytes(3))] if rng.random() < 0.3 else []
            steps.append(Send("cleaned", 0, b"key-%d" % rng.randrange(25), value, t0 + i * 3000, headers,
                              p=1 if txn else 0))
            i += 1
        steps.append(flush(1 if txn else 0))
        if txn:
            steps.append(abort(1) if rng.random() < 0.4 else commit(1))
    return produce(producers, steps)


def _cleaner_checkpoint(broker: KafkaBroker) -> dict[tuple[str, int], int]:
    path = broker.log_dir / "cleaner-offset-checkpoint"
    return ckpt.read_offset_checkpoint(path) if path.exists() else {}


def wait_cleaned(broker: KafkaBroker) -> None:
    """Until the cleaner's checkpoint for `cleaned-0` reaches the active segment (bounded)."""
    import time

    d = broker.partition_dir("cleaned", 0)
    deadline = time.monotonic() + CLEANER_TIMEOUT_S
    while True:
        active = max(int(f.name[:20]) for f in d.glob("*.log"))
        if _cleaner_checkpoint(broker).get(("cleaned", 0), -1) >= active:
            return
        if time.monotonic() > deadline:
            raise AssertionError(f"Kafka {broker.version}'s cleaner did not clean cleaned-0 up to {active} within "
                                 f"{CLEANER_TIMEOUT_S} s:\n{broker.log_text(since_start=True)[-3000:]}")
        time.sleep(0.5)


@dataclass
class Wire:
    """What the broker answered raw Produce requests of kbatch-built batches."""

    kip937: list[tuple[bytes, int, str | None, list[tuple[int, str]]]]  # batch, error, message, record errors
    lat: list[tuple[bytes, int, int]]  # batch sent, base offset, log_append_time_ms
    lat_stored: bytes  # the "lat" partition's .log as the broker wrote it
    java: list[tuple[int, str | None, str | None]]  # Java producer: timestamp sent, exception class, message


def _produce(client: Any, topic: str, data: bytes) -> Any:
    from support.serve_support import request_class

    R = request_class(0)
    req = R(transactional_id=None, acks=-1, timeout_ms=30_000, topic_data=[R.TopicProduceData(
        name=topic, partition_data=[R.TopicProduceData.PartitionProduceData(index=0, records=data)])])
    resp, _body = client.call(req, PRODUCE_VERSION)
    [t] = resp.responses
    [pr] = t.partition_responses
    return pr


def _batch(records: list[tuple[int, bytes | None, bytes | None, list[tuple[str, bytes | None]]]],
           codec: str = "none") -> bytes:
    b = kbatch.BatchBuilder(magic=2, compression=kbatch.Compression[codec.upper()], timestamp_extended=False)
    for ts, k, v, h in records:
        b.append(ts, k, v, headers=h)
    return b.build()


JAVA_STAMPS = (FAR_FUTURE, FAR_PAST, FAR_FUTURE + 12_345, 86_400_000)


def wire_checks(broker: KafkaBroker, driver: Any) -> Wire:
    import time

    from support.kafka_driver import Send, flush, produce
    from support.serve_support import RawClient

    now = int(time.time() * 1000)
    kip937_batches = [
        _batch([(now, b"a", b"ok", []), (FAR_FUTURE, b"b", b"future", []), (now - 1000, None, b"ok", []),
                (FAR_PAST, b"d", b"past", [("h", b"1")])]),
        _batch([(FAR_FUTURE + i, b"k", b"v" * i, []) for i in range(5)], "zstd"),
        _batch([(now + 2 * AFTER_MAX, b"x", None, [])], "gzip"),
    ]
    lat_batches = [_batch([(now - 5000 + i, b"k%d" % i, b"v" * i, [("n", b"%d" % i)]) for i in range(6)], c)
                   for c in CODECS]
    out = Wire([], [], b"", [])
    with RawClient(broker.bootstrap, timeout=60) as c:
        for data in kip937_batches:
            pr = _produce(c, "kip937", data)
            out.kip937.append((data, pr.error_code, pr.error_message,
                               [(e.batch_index, e.batch_index_error_message) for e in pr.record_errors]))
        for data in lat_batches:
            pr = _produce(c, "lat", data)
            assert pr.error_code == 0, pr
            out.lat.append((data, pr.base_offset, pr.log_append_time_ms))
    out.lat_stored = (broker.partition_dir("lat", 0) / ("0" * 20 + ".log")).read_bytes()
    # Kafka's Java producer, one record a batch (flushed): what it reports for each refused record
    steps: list[Any] = []
    for ts in JAVA_STAMPS:
        steps += [Send("kip937", 0, b"k", b"v", ts), flush()]
    [res] = driver.run(broker.bootstrap, [produce([{"enable.idempotence": "false", "acks": "1", "retries": "0",
                                                     "linger.ms": "0"}], steps, errors=True)])
    out.java = [(ts, row[4] if len(row) > 4 else None, row[5] if len(row) > 4 else None)
                for ts, row in zip(JAVA_STAMPS, res["sent"])]
    return out


@dataclass
class Served:
    version: str
    broker: KafkaBroker
    written: dict[str, tuple[Path, list[Rec], dict[str, str]]]
    consumed: dict[str, dict[str, list[Consumed]]]  # isolation -> topic -> records
    log_after_restart: str
    files_after: dict[str, dict[str, bytes]]  # topic -> file name -> bytes, after the broker stopped
    precleaned: Path  # cleaned-0 as the broker wrote it, before its cleaner ran


VARIANTS = ("k", "r")  # recovery point at the log end / at 0


def _replace_partition(broker: KafkaBroker, topic: str, src: Path) -> None:
    d = broker.partition_dir(topic, 0)
    assert (d / "partition.metadata").exists(), f"the broker has no partition.metadata for {topic}"
    for f in d.iterdir():
        if f.name != "partition.metadata":
            f.unlink()
    for f in src.iterdir():
        if _FILE.match(f.name) or f.name == "leader-epoch-checkpoint":
            shutil.copy2(f, d / f.name)


def _set_checkpoint(path: Path, offsets: dict[tuple[str, int], int | None]) -> None:
    """Set (or, for None, drop) partitions' entries in one of the broker's offset checkpoints."""
    have = ckpt.read_offset_checkpoint(path) if path.exists() else {}
    for tp, off in offsets.items():
        if off is None:
            have.pop(tp, None)
        else:
            have[tp] = off
    ckpt.write_offset_checkpoint(path, have)


@pytest.fixture(scope="module")
def served(kafka_dist: Any, kafka_driver: Any, tmp_path_factory: pytest.TempPathFactory) -> Any:
    work = tmp_path_factory.mktemp(f"kbatch-writes-{kafka_dist.version}-")
    written = write_partitions(work / "kbatch")
    # the log cleaner is off until the cleaner's input is copied (item 2), then on after the restart
    broker = KafkaBroker(kafka_dist, work / "broker", config={"log.cleaner.enable": "false"})
    try:
        broker.start()
        topics = [(f"kb-{name}-{v}", 1, dict(cfg)) for name, (_p, _r, cfg) in written.items() for v in VARIANTS]
        topics += WIRE_TOPICS
        kafka_driver.run(broker.bootstrap, [create_topics([*topics, CLEANED]), cleaner_input()])
        wire = wire_checks(broker, kafka_driver)
        broker.stop()
        assert broker.clean_shutdown_file.exists(), broker.log_text(since_start=True)[-3000:]
        assert ("cleaned", 0) not in _cleaner_checkpoint(broker), "the cleaner ran while log.cleaner.enable=false"
        precleaned = work / "precleaned"
        shutil.copytree(broker.partition_dir("cleaned", 0), precleaned)
        broker.extra["log.cleaner.enable"] = "true"
        recovery: dict[tuple[str, int], int | None] = {}
        high_watermark: dict[tuple[str, int], int | None] = {}
        for name, (path, _recs, _cfg) in written.items():
            with kbatch.Log.open(path) as log:
                end = log.end_offset()
            for v in VARIANTS:
                topic = f"kb-{name}-{v}"
                _replace_partition(broker, topic, path)
                recovery[(topic, 0)] = end if v == "k" else 0
                high_watermark[(topic, 0)] = end
        _set_checkpoint(broker.log_dir / "recovery-point-offset-checkpoint", recovery)
        _set_checkpoint(broker.log_dir / "replication-offset-checkpoint", high_watermark)
        # the log start offset: the first segment's base (no entry), as for a partition never trimmed
        _set_checkpoint(broker.log_dir / "log-start-offset-checkpoint", dict.fromkeys(recovery))
        broker.clean_shutdown_file.unlink(missing_ok=True)
        broker.start()
        log_text = broker.log_text(since_start=True)
        names = [t for t, _n, _c in topics if t.startswith("kb-")]
        out_u, out_c = work / "u.jsonl", work / "c.jsonl"
        kafka_driver.run(broker.bootstrap, [consume(names, out_u, "read_uncommitted"),
                                            consume(names, out_c, "read_committed")])
        consumed: dict[str, dict[str, list[Consumed]]] = {}
        for iso, f in (("read_uncommitted", out_u), ("read_committed", out_c)):
            by_topic: dict[str, list[Consumed]] = {t: [] for t in names}
            for c in read_consumed(f):
                by_topic[c.topic].append(c)
            consumed[iso] = by_topic
        wait_cleaned(broker)
        broker.stop()
        assert broker.clean_shutdown_file.exists(), broker.log_text(since_start=True)[-3000:]
        files = {t: {f.name: f.read_bytes() for f in broker.partition_dir(t, 0).iterdir() if f.is_file()}
                 for t in [*names, "cleaned"]}
        yield Served(kafka_dist.version, broker, written, consumed, log_text, files, precleaned), wire
    finally:
        broker.close()


def _topics(served: Served) -> list[tuple[str, str, str]]:
    return [(name, v, f"kb-{name}-{v}") for name in served.written for v in VARIANTS]


# ------------------------------------------------------------------------------------ the tests
def test_kbatch_wrote_its_input(served: Any) -> None:
    """The written partitions hold the records the writers made (compacted ones: a subset, with the
    last value of every key kept), so the comparisons below compare the input."""
    s, _wire = served
    for name, (path, recs, _cfg) in s.written.items():
        got = [(r.offset, r.timestamp, r.key, r.value, r.headers) for r in kbatch_records(path)]
        want = [(r.offset, r.timestamp, r.key, r.value, r.headers) for r in recs]
        if name.startswith("compact"):
            assert set(got) < set(want), name
            live = {r.key: r.offset for r in recs if not r.aborted}
            assert {o for o, *_ in got} >= {o for o in live.values()
                                             if next(r for r in recs if r.offset == o).value is not None}, name
        else:
            assert got == want, name


def test_broker_logs_no_problem_with_kbatch_partitions(served: Any) -> None:
    s, _wire = served
    bad = [line for line in s.log_after_restart.splitlines()
           if re.search(r"\] (WARN|ERROR) ", line) and "kb-" in line]
    assert not bad, "\n".join(bad[:20])


@pytest.mark.parametrize("isolation", ["read_uncommitted", "read_committed"])
def test_consumer_reads_what_kbatch_wrote(served: Any, isolation: str) -> None:
    s, _wire = served
    for name, v, topic in _topics(s):
        path, recs, _cfg = s.written[name]
        aborted = {r.offset for r in recs if r.aborted}
        want = [_as_consumed(r) for r in kbatch_records(path)
                if isolation == "read_uncommitted" or r.offset not in aborted]
        got = [_consumed(c) for c in s.consumed[isolation][topic]]
        assert got == want, f"{topic} ({isolation}): {_first_difference(want, got)}"
        assert want, topic


def test_broker_kept_the_segments(served: Any) -> None:
    """Nothing truncated or rewritten: every .log file is the bytes kbatch wrote, no more, no fewer;
    and the "-k" partitions' inactive segments keep kbatch's index files."""
    s, _wire = served
    for name, v, topic in _topics(s):
        path = s.written[name][0]
        mine = {f.name: f.read_bytes() for f in path.iterdir() if f.name.endswith(".log")}
        theirs = {n: b for n, b in s.files_after[topic].items() if n.endswith(".log")}
        assert sorted(theirs) == sorted(mine), topic
        for n in mine:
            assert theirs[n] == mine[n], f"{topic}/{n}: {len(mine[n])} bytes written, {len(theirs[n])} after"
        if v == "k":  # below the recovery point the broker took kbatch's indexes as they are
            for n in sorted(mine)[:-1]:
                for suffix in (".index", ".timeindex", ".txnindex"):
                    f = path / (n[:-4] + suffix)
                    if f.exists():
                        assert s.files_after[topic].get(f.name) == f.read_bytes(), f"{topic}/{f.name}"


def test_broker_recovery_txnindex_equals_kbatch(served: Any) -> None:
    """The "-r" partitions were recovered from offset 0: the broker rebuilt each segment's
    .txnindex from the batches; kbatch wrote the same bytes while appending. (Not the compacted
    ones: a cleaner keeps an aborted transaction's entry beside its marker after removing its data,
    while recovery indexes only transactions that still have data: the broker's own cleaned
    segments differ from its recovery the same way; docs/real-kafka.md.)"""
    s, _wire = served
    checked = 0
    for name, v, topic in _topics(s):
        if v != "r" or name.startswith("compact"):
            continue
        path = s.written[name][0]
        for f in sorted(path.glob("*.txnindex")):
            theirs = s.files_after[topic].get(f.name, b"")
            assert theirs == f.read_bytes(), f"{topic}/{f.name}"
            checked += bool(theirs)
    assert checked, "no aborted transaction in any recovered partition"


def test_kip937_record_errors_equal_kbatch(served: Any) -> None:
    """KIP-937 over the wire: the broker's INVALID_TIMESTAMP answer for kbatch's batches (error 32,
    the batch-level message, one record error per bad record) is kbatch's LogValidator's for the
    same bytes at the broker's clock (read back from the bounds the broker printed)."""
    _s, wire = served
    v = kbatch.LogValidator(before_max_ms=BEFORE_MAX, after_max_ms=AFTER_MAX)
    for data, code, message, record_errors in wire.kip937:
        assert code == 32 and record_errors, (code, message)
        m = _BOUNDS.search(record_errors[0][1])
        assert m, record_errors[0][1]
        lo, hi = int(m.group(1)), int(m.group(2))
        broker_now = hi - AFTER_MAX
        assert lo == broker_now - BEFORE_MAX, (lo, hi)
        with pytest.raises(kbatch.InvalidTimestampError) as e:
            v.validate(data, now_ms=broker_now)
        assert e.value.error_code == code
        assert e.value.reason == message
        assert [(i, msg) for _b, i, _o, msg in e.value.record_errors] == record_errors


def test_log_append_time_bytes_equal_kbatch(served: Any) -> None:
    """KIP-32 over the wire: a LogAppendTime topic stores what kbatch's validate_and_assign makes
    of the same batch with the broker's offset, leader epoch and time (the produce answer's
    log_append_time_ms): the same bytes, codec by codec (in place: the broker does not recompress)."""
    _s, wire = served
    v = kbatch.LogValidator(timestamp_type=kbatch.TimestampType.LOG_APPEND_TIME)
    stored = {b.base_offset: b for b in kbatch.iter_batches(wire.lat_stored)}
    assert len(stored) == len(wire.lat)
    for data, base, append_time in wire.lat:
        broker_batch = stored[base]
        theirs = bytes(wire.lat_stored[broker_batch.position:broker_batch.position + broker_batch.size_in_bytes])
        mine, info = v.validate_and_assign(data, next_offset=base, now_ms=append_time,
                                           partition_leader_epoch=broker_batch.partition_leader_epoch)
        assert mine == theirs, f"batch at {base} ({broker_batch.compression.name})"
        assert info.max_timestamp == append_time == broker_batch.max_timestamp
        assert [r.timestamp for r in broker_batch] == [append_time] * broker_batch.record_count


def _data_records(data: bytes) -> list[tuple[Any, ...]]:
    out = []
    for batch in kbatch.iter_batches(data):
        for r in batch:
            out.append((r.offset, r.timestamp, batch.is_control, None if r.key is None else bytes(r.key),
                        None if r.value is None else bytes(r.value),
                        tuple((k, None if v is None else bytes(v)) for k, v in r.headers)))
    return out


def _batch_headers(data: bytes) -> list[tuple[Any, ...]]:
    return [(b.base_offset, b.last_offset, b.record_count, b.has_delete_horizon, b.first_timestamp, b.max_timestamp,
             b.producer_id, b.is_transactional, b.is_control, b.compression) for b in kbatch.iter_batches(data)]


@pytest.fixture(scope="module")
def compacted(served: Any, tmp_path_factory: pytest.TempPathFactory) -> tuple[dict[str, bytes], dict[str, bytes]]:
    """(the broker's cleaned-0 after its cleaner ran, kbatch.compact of the same input with the
    broker's clock): file name -> bytes. The clock: the delete horizon the cleaner wrote into the
    batches it kept tombstones or markers in, less delete.retention.ms."""
    s, _wire = served
    theirs = s.files_after["cleaned"]
    horizons = {b.first_timestamp for n, data in theirs.items() if n.endswith(".log")
                for b in kbatch.iter_batches(data) if b.has_delete_horizon}
    assert len(horizons) == 1, f"the cleaner wrote delete horizons {sorted(horizons)}"
    now = horizons.pop() - DELETE_RETENTION
    d = tmp_path_factory.mktemp("kbatch-compact") / "cleaned-0"
    shutil.copytree(s.precleaned, d)
    kbatch.compact(d, now_ms=now, delete_retention_ms=DELETE_RETENTION, index_interval_bytes=CLEANED_INDEX_INTERVAL,
                   segment_index_bytes=CLEANED_INDEX_BYTES)
    mine = {f.name: f.read_bytes() for f in d.iterdir() if f.is_file()}
    return theirs, mine


def _segments(files: dict[str, bytes]) -> list[str]:
    """The .log file names, in offset order."""
    return sorted(n for n in files if n.endswith(".log"))


def test_compact_groups_segments_as_the_log_cleaner(served: Any,
                                                    compacted: tuple[dict[str, bytes], dict[str, bytes]]) -> None:
    """kbatch.compact groups the inactive segments as the broker's cleaner does (segment.bytes
    at Kafka's default, segment.index.bytes CLEANED_INDEX_BYTES on both sides): the same segment
    files, each cleaned segment named after the first of its group; the broker made more than one
    group and fewer groups than segments, so both ends of the rule are compared."""
    theirs, mine = compacted
    before = sorted(p.name for p in served[0].precleaned.glob("*.log"))
    cleaned = _segments(theirs)[:-1]
    assert 1 < len(cleaned) < len(before) - 1, (before, cleaned)
    assert _segments(mine) == _segments(theirs)


def test_compact_keeps_what_the_log_cleaner_keeps(compacted: tuple[dict[str, bytes], dict[str, bytes]]) -> None:
    """kbatch.compact of the broker's own pre-clean segments, at the broker's clock, keeps the
    records (offset, timestamp, key, value, headers; markers) the broker's LogCleaner kept, in the
    same batches of the same segments."""
    theirs, mine = compacted
    assert _segments(mine) == _segments(theirs)
    for name in _segments(theirs):
        want, got = _data_records(theirs[name]), _data_records(mine[name])
        assert got == want, (name, _first_difference(want, got))
        assert _batch_headers(mine[name]) == _batch_headers(theirs[name]), name


def _comparable(data: bytes) -> list[Any]:
    """Each batch's bytes; for an lz4 batch, its header without length and CRC and its records
    decompressed: kbatch's lz4 (python-lz4, liblz4 1.9.4) and lz4-java 1.10+ (Kafka 3.9, 4.x)
    compress the same records to frames a byte or two apart (docs/real-kafka.md)."""
    from kbatch.record.compression import decompress

    out: list[Any] = []
    for b in kbatch.iter_batches(data):
        raw = data[b.position:b.position + b.size_in_bytes]
        if b.compression == kbatch.Compression.LZ4:
            out.append(("lz4", raw[:8] + raw[12:17] + raw[21:61],
                        bytes(decompress(kbatch.Compression.LZ4, raw[61:], 2, 1 << 30, 0))))
        else:
            out.append(raw)
    return out


def test_compact_bytes_equal_the_log_cleaner(compacted: tuple[dict[str, bytes], dict[str, bytes]]) -> None:
    """The same files with the same bytes: each cleaned segment's .log batch for batch (headers,
    delete horizons, CRCs, records; lz4 frames aside), its .index and .timeindex as the broker's
    cleaner built them, its .txnindex (the aborted transactions it kept); the active segment
    untouched by both."""
    theirs, mine = compacted
    names = _segments(theirs)
    assert _segments(mine) == names
    for name in names[:-1]:
        assert _comparable(mine[name]) == _comparable(theirs[name]), name
        stem = name[:-4]
        assert mine.get(stem + ".txnindex", b"") == theirs.get(stem + ".txnindex", b""), name
        assert mine[stem + ".timeindex"] == theirs[stem + ".timeindex"], name
        if mine[name] == theirs[name]:
            assert mine[stem + ".index"] == theirs[stem + ".index"], name
        else:
            # a recompressed lz4 frame a byte apart moves the positions after it: the same
            # entries by offset, at the positions of the same batches in each file
            assert _index_by_batch(mine, stem) == _index_by_batch(theirs, stem), name
    active = names[-1]
    assert mine[active] == theirs[active]


def _index_by_batch(files: dict[str, bytes], stem: str) -> list[tuple[int, int]]:
    """A .index as (relative offset, ordinal of the batch at its position) pairs."""
    positions = {b.position: i for i, b in enumerate(kbatch.iter_batches(files[stem + ".log"]))}
    data = files[stem + ".index"]
    return [(rel, positions[pos]) for rel, pos in (struct.unpack_from(">ii", data, i) for i in range(0, len(data), 8))]


def test_kip937_java_producer_reports_kbatchs_message(served: Any) -> None:
    """Kafka's Java producer, sending one record a batch, fails each out-of-range record with
    InvalidTimestampException carrying the broker's record error: kbatch's message for a
    one-record batch with that timestamp at the broker's clock."""
    _s, wire = served
    v = kbatch.LogValidator(before_max_ms=BEFORE_MAX, after_max_ms=AFTER_MAX)
    assert len(wire.java) == len(JAVA_STAMPS)
    for ts, cls, message in wire.java:
        assert cls == "org.apache.kafka.common.errors.InvalidTimestampException", (ts, cls, message)
        assert message is not None
        m = _BOUNDS.search(message)
        assert m, message
        broker_now = int(m.group(2)) - AFTER_MAX
        with pytest.raises(kbatch.InvalidTimestampError) as e:
            v.validate(_batch([(ts, b"k", b"v", [])]), now_ms=broker_now)
        assert [msg for _b, _i, _o, msg in e.value.record_errors] == [message]
