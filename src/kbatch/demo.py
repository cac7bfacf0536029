"""The main job: generate sample Kafka topic directories, then read and analyse them with Spark.

    python -m kbatch.demo [--dir ./sample-data] [--records 20000] [--no-spark] [--report | --no-report]

1. writes ./sample-data/<topic>-<partition>/ folders of segments with indexes (only into a new or
   empty directory, or one an earlier run made and marked with a `.kbatch-demo` file): several
   partitions and segments, every codec, legacy magic 0/1 message sets, historical negative
   timestamps (KIP-228 extended flag), records with future timestamps, tombstones that keep a
   payload (KIP-87), and a transaction committed and one aborted (control batches);
2. starts a local Spark session and reads them with the `kafka-segments` data source (the JVM
   reader where its jar loads, the Python one otherwise; the demo says which);
3. prints counts per partition, the KIP-937 timestamp report, offsets for a chosen time, and
   what compaction saves (kbatch.compact on a copy, when kbatch has it);
4. ends by auditing the sample data and writing its report page (`kbatch report`, the report
   extra) to ./sample-data/report.html, and prints its path (with --no-spark only when --report).
"""
from __future__ import annotations

import argparse
import os
import shutil
import struct
import sys
import tempfile
import time
from typing import IO, TYPE_CHECKING, TypedDict

from . import _wire as W
from .record.file_records import iter_batches
from .record.builder import BatchBuilder, build_end_txn_marker

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

DAY = 86_400_000
HOUR = 3_600_000
CODECS = [W.Compression.NONE, W.Compression.GZIP, W.Compression.SNAPPY, W.Compression.LZ4, W.Compression.ZSTD]


def say(msg: str) -> None:
    print(f"[kbatch.demo] {msg}", flush=True)


# ------------------------------------------------------------------------------------ writing logs
class _SegmentWriter:
    """Appends batches to `<20-digit base>.log` files with `.index` / `.timeindex` entries written
    as a broker writes them (an entry once more than index_interval bytes were appended since
    the last one; a final time-index entry on roll). Used when kbatch.Log is not available."""

    def __init__(self, path: str, segment_bytes: int, index_interval: int = W.DEFAULT_INDEX_INTERVAL_BYTES):
        self.path = path
        self.segment_bytes = segment_bytes
        self.index_interval = index_interval
        os.makedirs(path, exist_ok=True)
        self.log: IO[bytes] | None = None
        self.index: IO[bytes]
        self.tindex: IO[bytes]

    def _roll(self, base_offset: int) -> None:
        self._close_segment()
        name = os.path.join(self.path, f"{base_offset:020d}")
        self.base = base_offset
        self.log = open(name + ".log", "wb")
        self.index = open(name + ".index", "wb")
        self.tindex = open(name + ".timeindex", "wb")
        self.size = 0
        self.since_entry = 0
        self.max_ts = W.INT64_MIN
        self.offset_of_max = base_offset
        self.last_time_entry = W.INT64_MIN

    def _time_entry(self) -> None:
        if self.max_ts > self.last_time_entry:
            self.tindex.write(struct.pack(">qi", self.max_ts, self.offset_of_max - self.base))
            self.last_time_entry = self.max_ts

    def _close_segment(self) -> None:
        if self.log is not None:
            self._time_entry()
            for f in (self.log, self.index, self.tindex):
                f.close()
            self.log = None

    def append(self, data: bytes) -> None:
        batches = list(iter_batches(data))
        first = batches[0]
        if self.log is None or (self.size > 0 and self.size + len(data) > self.segment_bytes):
            self._roll(first.base_offset)
        log = self.log
        assert log is not None  # _roll opened it
        for b in batches:
            if self.since_entry > self.index_interval:
                self.index.write(struct.pack(">ii", b.last_offset - self.base, self.size))
                self._time_entry()
                self.since_entry = 0
            if b.max_timestamp > self.max_ts:
                self.max_ts = b.max_timestamp
                self.offset_of_max = b.last_offset
            log.write(b.raw)
            self.size += b.size_in_bytes
            self.since_entry += b.size_in_bytes

    def close(self) -> None:
        self._close_segment()


class _LogWriter:
    """Appends through kbatch.Log (validation, offsets, rolling and indexes as a broker does)."""

    def __init__(self, path: str, segment_bytes: int, now_ms: int):
        from .log.unified_log import Log, LogConfig

        cfg = LogConfig(segment_bytes=segment_bytes, segment_ms=2**62, retention_ms=2**62, timestamp_extended=True)
        self.now_ms = now_ms
        self.log = Log.create(path, cfg, now_ms=now_ms)

    def append(self, data: bytes) -> None:
        # a producer sends base offset 0 (the log assigns offsets); data with transaction markers is
        # appended as a coordinator would (from_client=False), which accepts control batches
        from_client = not any(b.is_control for b in iter_batches(data))
        if from_client:
            data = bytes(8) + data[8:]  # base offset is outside the CRC
        self.log.append(data, now_ms=self.now_ms, from_client=from_client)

    def close(self) -> None:
        self.log.close()


def _writer(path: str, segment_bytes: int, now_ms: int, legacy: bool = False) -> _LogWriter | _SegmentWriter:
    """kbatch.Log when this build has it (legacy message sets excepted: a current broker would
    up-convert them), else the small writer above."""
    if not legacy:
        try:
            return _LogWriter(path, segment_bytes, now_ms)
        except ImportError:
            pass
    return _SegmentWriter(path, segment_bytes)


# ------------------------------------------------------------------------------------ sample data
MARKER = ".kbatch-demo"   # marks a directory the demo made; only such a directory's topics are replaced
REPORT = "report.html"    # the sample data's page (kbatch report), written last
TOPICS = ("orders-0", "orders-1", "orders-2", "payments-0", "legacy-0")


class DemoDirectoryError(Exception):
    """The demo was pointed at a directory it did not make and that is not empty."""


def prepare_root(root: str) -> None:
    """Make `root` ready for the sample topics without touching anything the demo did not write:
    a missing or empty directory is created/used and marked as the demo's (MARKER); in a marked
    directory only the demo's own topic directories are replaced; any other directory is refused."""
    if os.path.lexists(root) and not os.path.isdir(root):
        raise DemoDirectoryError(f"{root} exists and is not a directory; give --dir a new or empty directory")
    if os.path.isdir(root):
        names = os.listdir(root)
        if names and MARKER not in names:
            raise DemoDirectoryError(
                f"{root} is not empty and was not made by the demo (no {MARKER} file in it); the demo writes only "
                f"into a new or empty directory, or one it made itself. Give --dir another directory.")
        for name in TOPICS:
            p = os.path.join(root, name)
            if os.path.isdir(p) and not os.path.islink(p):
                shutil.rmtree(p)
    else:
        os.makedirs(root)
    with open(os.path.join(root, MARKER), "w") as f:
        f.write("Sample topics written by `python -m kbatch.demo`; the demo replaces them when run again here.\n")


class DemoSummary(TypedDict):
    """What generate wrote: its clock, and each partition's offsets."""

    now_ms: int
    partitions: dict[str, int]


def generate(root: str, records: int = 20000, now_ms: int | None = None, seed: int = 7,
             segment_bytes: int = 96 * 1024) -> DemoSummary:
    """Write the sample topics under `root` (see prepare_root: only a new, empty or demo-made
    directory). Returns a summary dict."""
    import random

    import logging

    logging.getLogger("kbatch.log.validator").setLevel(logging.ERROR)  # the demo says it once, below
    rng = random.Random(seed)
    now_ms = int(time.time() * 1000) if now_ms is None else now_ms
    prepare_root(root)
    summary = DemoSummary(now_ms=now_ms, partitions={})
    per_part = max(records // 3, 50)
    seg_bytes = segment_bytes

    # orders: 3 partitions, every v2 codec, headers, tombstones with payloads, future and historical timestamps
    for p in range(3):
        w = _writer(os.path.join(root, f"orders-{p}"), seg_bytes, now_ms)
        off = 0
        n = 0
        k = 0
        while n < per_part:
            codec = CODECS[k % len(CODECS)]
            k += 1
            size = rng.randint(20, 120)
            b = BatchBuilder(compression=codec, base_offset=off)
            for i in range(size):
                ts = now_ms - DAY + (n * DAY) // per_part
                if n % 997 == 13:
                    ts = now_ms + 2 * HOUR + n  # from the future (KIP-937 "too new")
                elif n % 1499 == 7:
                    ts = -(50 * 365 * DAY) - n  # 1920: a historical negative timestamp (KIP-228)
                key = f"customer-{rng.randint(0, 400)}".encode()
                if n % 211 == 5:
                    b.append(ts, key, b"last-known-state", tombstone=True)   # KIP-87 tombstone with a payload
                elif n % 307 == 11:
                    b.append(ts, key, None)                                   # classic null-value tombstone
                else:
                    value = (f'{{"order":{n},"amount":{rng.randint(1, 99999)},"note":"'
                             + "x" * rng.randint(10, 200) + '"}').encode()
                    hdrs = [("source", b"demo"), ("seq", str(n).encode())] if n % 5 == 0 else ()
                    b.append(ts, key, value, headers=hdrs)
                n += 1
            w.append(b.build())
            off += size
        w.close()
        summary["partitions"][f"orders-{p}"] = n

    # payments: idempotent/transactional producer, one committed and one aborted transaction
    w = _writer(os.path.join(root, "payments-0"), seg_bytes, now_ms)
    off = 0
    for txn, commit in ((1, True), (2, False), (3, True)):
        # sequences count data records only: a marker takes an offset, not a sequence number
        b = BatchBuilder(compression=W.Compression.LZ4, base_offset=off, producer_id=4242, producer_epoch=0,
                         base_sequence=(txn - 1) * 30, is_transactional=True)
        for i in range(30):
            b.append(now_ms - HOUR + off + i, f"pay-{txn}-{i}".encode(), f"amount={i * 10}".encode())
        off += 30
        w.append(b.build() + build_end_txn_marker(producer_id=4242, producer_epoch=0, commit=commit,
                                                  coordinator_epoch=1, base_offset=off,
                                                  timestamp=now_ms - HOUR + off))
        off += 1
    w.close()
    summary["partitions"]["payments-0"] = off

    # legacy: magic 0 and magic 1 message sets (plain and compressed), as old brokers wrote them
    w = _writer(os.path.join(root, "legacy-0"), seg_bytes, now_ms, legacy=True)
    off = 0
    for magic in (0, 1):
        for codec in (W.Compression.NONE, W.Compression.GZIP, W.Compression.SNAPPY, W.Compression.LZ4):
            b = BatchBuilder(magic=magic, compression=codec, base_offset=off)
            for i in range(25):
                b.append(now_ms - 2 * DAY + off + i, f"old-{off + i}".encode(), b"legacy value")
            w.append(b.build())
            off += 25
    # and a LogAppendTime v2 batch
    b = BatchBuilder(base_offset=off, timestamp_type=W.TimestampType.LOG_APPEND_TIME, log_append_time=now_ms - DAY,
                     compression=W.Compression.ZSTD)
    for i in range(25):
        b.append(None, f"lat-{i}".encode(), b"stamped by the broker")
    w.append(b.build())
    off += 25
    w.close()
    summary["partitions"]["legacy-0"] = off
    return summary


# ------------------------------------------------------------------------------------ the job
def _spark_session() -> SparkSession:
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    spark = (SparkSession.builder.master(os.environ.get("KBATCH_SPARK_MASTER", "local[*]"))
             .appName("kbatch-demo")
             .config("spark.ui.enabled", "false")
             .config("spark.ui.showConsoleProgress", "false")
             .config("spark.sql.shuffle.partitions", "4")
             .config("spark.sql.session.timeZone", "UTC")
             .config("spark.driver.extraJavaOptions", "-Dlog4j2.level=ERROR")
             .getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    return spark


def _show(df: DataFrame, n: int = 30) -> None:
    rows = df.collect()
    cols = df.columns
    widths = [max(len(c), *(len(str(r[c])) for r in rows)) if rows else len(c) for c in cols]
    print("  " + "  ".join(c.ljust(w) for c, w in zip(cols, widths)))
    for r in rows[:n]:
        print("  " + "  ".join(str(r[c]).ljust(w) for c, w in zip(cols, widths)))


def run(root: str = "./sample-data", records: int = 20000, spark_enabled: bool = True,
        with_report: bool | None = None) -> int:
    """The demo; `with_report` (default: with Spark, the whole demo) ends it with the audit's page."""
    page = spark_enabled if with_report is None else with_report
    t0 = time.time()
    root = os.path.abspath(root)
    say(f"writing sample topics under {root} ({records} order records in 3 partitions, plus payments-0 and legacy-0) ...")
    summary = generate(root, records)
    now_ms = summary["now_ms"]
    say("  (some orders carry timestamps 2 hours in the future: Kafka 4.0 would reject those batches, "
        "KIP-937; others date from 1920, written with the KIP-228 extended-timestamp flag)")
    for name, n in summary["partitions"].items():
        segs = sorted(f for f in os.listdir(os.path.join(root, name)) if f.endswith(".log"))
        say(f"  {name}: {n} offsets in {len(segs)} segment(s)")
    if not spark_enabled:
        return _report(root, now_ms) if page else 0
    say("starting a local Spark session (local[*]) ...")
    spark = _spark_session()
    import kbatch.spark as ks
    from pyspark.sql import functions as F

    reader = ks.register(spark, pushdown=True)  # the JVM reader where its jar loads, else the Python one
    say(f"{reader}")
    say("reading with spark.read.format('kafka-segments') (control batches are not rows) ...")
    df = spark.read.format("kafka-segments").option("includeHeaders", "true").load(root)
    counts = (df.groupBy("topic", "partition")
              .agg(F.count("*").alias("records"), F.sum(F.col("isTombstone").cast("int")).alias("tombstones"),
                   F.min("offset").alias("firstOffset"), F.max("offset").alias("lastOffset"),
                   F.min("timestamp").alias("minTimestamp"), F.max("timestamp").alias("maxTimestamp"))
              .orderBy("topic", "partition"))
    say("records per partition:")
    _show(counts)

    say("KIP-937 timestamp report (before_max_ms = 7 days, after_max_ms = 1 hour) ...")
    report = ks.timestamp_report(df, before_max_ms=7 * DAY, after_max_ms=HOUR, now=now_ms)
    _show(report)

    target = now_ms - 12 * HOUR
    say(f"offsets for time {target} (12 hours ago), one Spark task per partition ...")
    _show(ks.offsets_for_times(root, target, spark))
    say("  (Kafka answers the first offset, in offset order, whose timestamp >= the target: in orders that is an "
        "early record stamped in the future; legacy-0 has nothing that recent)")

    say("rows since that time, via startingTimestamp (the time index skips older bytes) ...")
    recent = spark.read.format("kafka-segments").option("startingTimestamp", str(target)).load(root)
    say(f"  {recent.count()} rows")

    _compaction(root, now_ms)
    spark.stop()
    say(f"Spark part done in {time.time() - t0:.1f} s")
    return _report(root, now_ms) if page else 0  # the page's path is the demo's last line


def _report(root: str, now_ms: int) -> int:
    """The audit of the sample data and its page (kbatch report), judged by the sample's clock;
    the page's path is the demo's last line."""
    from .cli.report import write_report
    from .log.audit import AuditConfig
    from .log.findings import counts

    path = os.path.join(root, REPORT)
    say("kbatch audit + report over the sample data (one header walk, CRCs checked) ...")
    try:
        result = write_report([root], path, config=AuditConfig(now=now_ms, cache=False, record_timestamps=True), title="kbatch demo: sample data")
    except ModuleNotFoundError as e:
        say(f"report: skipped: it needs plotly ({e}): pip install 'kafka-kbatch[report]'")
        return 0
    n = counts(result.findings)
    say(f"  findings: {n['error']} error(s), {n['warning']} warning(s), {n['info']} info (the sample's future and "
        f"1920 timestamps, its transactions); `kbatch audit {root}` lists them")
    say(f"report: {path}")
    return 0


def _compaction(root: str, now_ms: int) -> None:
    try:
        import kbatch

        compact = kbatch.compact
    except (ImportError, AttributeError) as e:
        say(f"compaction: skipped, kbatch.compact is not available in this build ({e})")
        return
    tmp = tempfile.mkdtemp(prefix="kbatch-compact-")
    try:
        say("compaction (kbatch.compact on a copy of orders-0) ...")
        src = os.path.join(root, "orders-0")
        dst = os.path.join(tmp, "orders-0")
        shutil.copytree(src, dst)
        before = sum(os.path.getsize(os.path.join(dst, f)) for f in os.listdir(dst) if f.endswith(".log"))
        result = compact(dst, now_ms=now_ms, delete_retention_ms=DAY)
        after = sum(os.path.getsize(os.path.join(dst, f)) for f in os.listdir(dst) if f.endswith(".log"))
        saved = before - after
        detail = ""
        if result is not None and hasattr(result, "records_read"):
            detail = (f"; records {result.records_read} -> {result.records_written}, "
                      f"tombstones kept {getattr(result, 'tombstones_kept', '?')}")
        say(f"  .log bytes {before} -> {after} (saved {saved}, {100.0 * saved / max(before, 1):.1f}%){detail}")
    except Exception as e:  # noqa: BLE001 - the demo reports and goes on
        say(f"compaction: failed: {type(e).__name__}: {e}")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m kbatch.demo", description=__doc__.split("\n\n")[0])
    ap.add_argument("--dir", default="./sample-data", help="where to write the sample topics")
    ap.add_argument("--records", type=int, default=20000, help="records across the orders partitions")
    ap.add_argument("--no-spark", action="store_true", help="only generate the sample data (and the report with --report)")
    ap.add_argument("--report", action=argparse.BooleanOptionalAction, default=None,
                    help="end with the audit's report page (default: with Spark)")
    args = ap.parse_args(argv)
    try:
        return run(args.dir, args.records, not args.no_spark, args.report)
    except DemoDirectoryError as e:
        print(f"[kbatch.demo] {e}", file=sys.stderr, flush=True)
        return 2


if __name__ == "__main__":
    sys.exit(main())
