"""`kbatch stats`: what a partition holds, per partition, from one pass over its batches.

Records, bytes, offset and time ranges, codecs, batch sizes, producers and transactions,
tombstones and an estimate of how many distinct keys there are (HyperLogLog over Kafka's murmur2
of each key, 2^14 registers: about 1% standard error). The batches are those a read_uncommitted
consumer reads from the log start, through the read path (kbatch.log.fetch: the same as cat and
serve), header windows at a time (local pread or ranged reads of remote objects), records decoded
into Arrow columns; every CRC is checked. Bytes that cannot be read are named on stderr with the
offsets behind them (reading goes on at the next segment) and make the exit code 1; a partial
batch at the end of the last segment is ignored, as Kafka does.
"""

import logging
import sys
from collections.abc import Callable, Sequence
from typing import IO, TYPE_CHECKING, Any

import numpy as np

from .. import _wire as W
from ..errors import KBatchError, StorageError
from ._common import (EXIT_OK, EXIT_PROBLEMS, EXIT_USAGE, emit, flags, format_time, log_bytes, progress_bar, run,
                      selected_partitions, topic_list)

if TYPE_CHECKING:
    import pyarrow as pa
    import typer

    from .._typing import PathLike
    from ..log.layout import Partition
    from ..log.unified_log import Log

HLL_P = 14  # 16384 registers


class KeyCardinality:
    """A HyperLogLog sketch of binary keys (hash: Kafka's murmur2 kernel, then a 32-bit finalizer
    so that keys differing in one byte spread over the registers)."""

    def __init__(self, p: int = HLL_P) -> None:
        self.p = p
        self.registers = np.zeros(1 << p, dtype=np.uint8)

    def add(self, keys: "pa.Array") -> None:
        """Add the non-null values of a pyarrow binary column."""
        from ..columns.partitioner import murmur2

        if keys.null_count == len(keys):
            return
        hashes = murmur2(keys)
        if hashes is None:  # a null-typed column
            return
        h = hashes.astype(np.uint32)
        if keys.null_count:
            h = h[np.asarray(keys.is_valid())]
        h ^= h >> np.uint32(16)                       # fmix32 (MurmurHash3's finalizer)
        h *= np.uint32(0x85EBCA6B)
        h ^= h >> np.uint32(13)
        h *= np.uint32(0xC2B2AE35)
        h ^= h >> np.uint32(16)
        idx = (h >> np.uint32(32 - self.p)).astype(np.int64)
        rest = (h << np.uint32(self.p)).astype(np.uint64) & np.uint64(0xFFFFFFFF)
        width = 32 - self.p
        # rank: position of the first 1 bit in the remaining `width` bits (width + 1 when all zero)
        nz = rest > 0
        rank = np.full(len(h), width + 1, dtype=np.int64)
        rank[nz] = 32 - np.floor(np.log2(rest[nz].astype(np.float64))).astype(np.int64)
        np.maximum.at(self.registers, idx, rank.astype(np.uint8))

    def estimate(self) -> int:
        m = len(self.registers)
        alpha = 0.7213 / (1 + 1.079 / m)
        raw = alpha * m * m / float(np.sum(np.power(2.0, -self.registers.astype(np.float64))))
        zeros = int(np.count_nonzero(self.registers == 0))
        if raw <= 2.5 * m and zeros:
            return int(round(m * np.log(m / zeros)))  # linear counting for small sets
        return int(round(raw))


#: the figures only records give: a --fast stats leaves them out (null, named in "omitted")
RECORD_FIGURES = ("tombstones", "null_keys", "key_cardinality_estimate")


def partition_stats(log: "Log", advance: Callable[[int], object] = lambda n: None, *, fast: bool = False,
                    trust_headers: bool = False) -> dict[str, Any]:
    """The statistics of one open Log (see the module docstring): the header figures from the
    summary (kbatch.log.summary), the record figures (tombstones, null keys, distinct keys, and
    the timestamps a header cannot give) from a walk of the records read, or, `fast`, left out."""
    from ..log.summary import summarize

    sm = summarize(log, isolation=None, skip_unreadable=True, timestamps=not fast, trust_headers=trust_headers)
    ru, rc = sm.read_uncommitted, sm.read_committed
    assert ru is not None and rc is not None
    st: dict[str, Any] = dict(
        segments=sm.segments, bytes=log.size, batches=sm.batches, records=ru.records,
        log_start_offset=sm.log_start_offset, first_offset=sm.first_batch_offset, last_offset=sm.last_batch_offset,
        end_offset=sm.high_watermark, min_timestamp=ru.min_timestamp, max_timestamp=ru.max_timestamp,
        records_without_timestamp=ru.records_without_timestamp, codecs=sm.codecs, magic=sm.magic,
        batch_bytes_min=sm.batch_bytes_min, batch_bytes_max=sm.batch_bytes_max, batch_bytes_mean=None,
        records_per_batch_mean=None, producers=len({p.producer_id for p in ru.producers}),
        idempotent_batches=sm.idempotent_batches, transactional_batches=sm.transactional_batches,
        transactional_records=sm.transactional_records, commits=sm.commits, aborts=sm.aborts,
        control_batches=sm.control_batches, empty_batches=sm.empty_batches, tombstones=None, null_keys=None,
        key_cardinality_estimate=None, last_stable_offset=sm.last_stable_offset,
        read_committed=dict(records=rc.records, first_offset=rc.first_offset, last_offset=rc.last_offset,
                            min_timestamp=rc.min_timestamp, max_timestamp=rc.max_timestamp,
                            aborted_batches=rc.aborted_batches, aborted_records=rc.aborted_records),
        first_record_offset=ru.first_offset, last_record_offset=ru.last_offset,
        per_producer=[dict(producer_id=p.producer_id, producer_epoch=p.producer_epoch, batches=p.batches,
                           records=p.records, first_offset=p.first_offset, last_offset=p.last_offset,
                           last_sequence=p.last_sequence) for p in ru.producers],
        crc=sm.crc, cached_segments=sm.cached_segments, cached_bytes=sm.cached_bytes,
        scanned_bytes=sm.scanned_bytes, fallbacks=sm.fallbacks, omitted=list(sm.omitted),
        problems=[str(r) for r in sm.unreadable] + sm.problems)
    if sm.batches:
        st["batch_bytes_mean"] = round(sm.bytes / sm.batches, 1)
        st["records_per_batch_mean"] = round(ru.records / sm.batches, 2)
    if fast:
        st["omitted"] += [f for f in RECORD_FIGURES if f not in st["omitted"]]
        advance(sm.log_bytes)
    else:
        st.update(_record_figures(log, advance))
    return st


def _record_figures(log: "Log", advance: Callable[[int], object]) -> dict[str, Any]:
    """tombstones, null keys, distinct keys: the records a read_uncommitted read gives from the
    log start, decoded into columns (no headers), through the read path as the summary reads it."""
    import pyarrow.compute as pc

    from ..columns.decode import iter_record_batches
    from ..log.fetch import IsolationLevel, read_log

    hll = KeyCardinality()
    out: dict[str, Any] = dict(tombstones=0, null_keys=0)
    res = read_log(log, log.log_start_offset, isolation=IsolationLevel.READ_UNCOMMITTED, skip_unreadable=True)
    for w in res.windows():
        a, b = w.span()
        origin = w.window["origin"]
        for rb in iter_record_batches(memoryview(w.window["buf"])[a - origin:b - origin], include_headers=False,
                                      verify_crc=False):
            key = rb.column("key")
            out["null_keys"] += key.null_count
            hll.add(key)
            out["tombstones"] += int(pc.sum(rb.column("isTombstone")).as_py() or 0)
        advance(b - a)
    out["key_cardinality_estimate"] = hll.estimate()
    return out


_BUCKETS = {"s": 1000, "m": 60_000, "h": 3_600_000, "d": 86_400_000}


def parse_bucket(text: str) -> int:
    """"1m", "1h", "1d", "15m", "30s" -> milliseconds (UsageProblem otherwise)."""
    from ._common import UsageProblem

    t = text.strip().lower()
    if len(t) >= 2 and t[-1] in _BUCKETS and t[:-1].isdigit() and int(t[:-1]) > 0:
        return int(t[:-1]) * _BUCKETS[t[-1]]
    raise UsageProblem(f"--histogram {text!r}: expected a bucket length such as 1m, 1h or 1d")


def cmd_stats(path: "PathLike", *, topic: "str | Sequence[str] | None" = None, partition: int | None = None,
              as_json: bool = False, quiet: bool = False, out: IO[str] | None = None, err: IO[str] | None = None,
              include_internal: bool = False, fast: bool = False, trust_headers: bool = False,
              histogram: str | None = None, isolation: str = "read_uncommitted") -> int:
    from ..log.fetch import IsolationLevel
    from ..log.unified_log import Log
    from ._common import UsageProblem

    out = out or sys.stdout
    err = err or sys.stderr
    try:
        bucket = parse_bucket(histogram) if histogram is not None else None
        level = IsolationLevel.parse(isolation)
    except (UsageProblem, ValueError) as e:
        err.write(f"kbatch: {e}\n")
        return EXIT_USAGE
    logging.getLogger("kbatch.log.segment").addHandler(logging.NullHandler())
    parts = selected_partitions(path, topic_list(topic), include_internal=include_internal)
    parts = [p for p in parts if partition is None or p.partition == partition]
    code = EXIT_OK
    with progress_bar(log_bytes([p.path for p in parts]), "stats", quiet) as advance:
        for part in parts:
            try:
                log = Log.open(part.path)
            except KBatchError as e:
                err.write(f"kbatch: {part.path}: {e}\n")
                code = max(code, EXIT_USAGE if isinstance(e, StorageError) else EXIT_PROBLEMS)
                continue
            try:
                if bucket is not None:
                    st = _histogram(log, bucket, level, trust_headers)
                    advance(log.size)
                else:
                    st = partition_stats(log, advance, fast=fast, trust_headers=trust_headers)
            except KBatchError as e:
                err.write(f"kbatch: {part.path}: {e}\n")
                code = max(code, EXIT_USAGE if isinstance(e, StorageError) else EXIT_PROBLEMS)
                continue
            finally:
                log.close()
            for p in st["problems"]:
                err.write(f"kbatch: {p}\n")
            if st["problems"]:
                code = max(code, EXIT_PROBLEMS)
            if as_json:
                emit(out, dict(topic=part.topic, partition=part.partition, path=part.path, layout=log.layout, **st))
            elif bucket is not None:
                out.write(_histogram_text(part, st))
            else:
                out.write(_text(part, st))
    return code


def _histogram(log: "Log", bucket: int, isolation: int, trust_headers: bool) -> dict[str, Any]:
    """Records over time (kbatch.log.summary.histogram): a timestamps-only walk."""
    from ..log.summary import histogram

    hist, sm = histogram(log, bucket, isolation=isolation, skip_unreadable=True, trust_headers=trust_headers)
    rs = sm.level(isolation)
    return dict(isolation=rs.isolation, bucket_ms=bucket, records=rs.records,
                records_without_timestamp=rs.records_without_timestamp,
                histogram=[[k, v] for k, v in hist.items()], crc=sm.crc,
                problems=[str(r) for r in rs.unreadable] + sm.problems)


def _histogram_text(part: "Partition", st: dict[str, Any]) -> str:
    lines = [f"{part.topic}-{part.partition} ({part.path}): {st['records']} records ({st['isolation']}), "
             f"per {st['bucket_ms'] // 1000}s bucket"]
    lines += [f"  {format_time(k)}  {v}" for k, v in st["histogram"]]
    if st["records_without_timestamp"]:
        lines.append(f"  (no timestamp)            {st['records_without_timestamp']}")
    return "\n".join(lines) + "\n"


def _or_omitted(v: Any) -> str:
    return "omitted (--fast: needs the records)" if v is None else str(v)


def _text(part: "Partition", st: dict[str, Any]) -> str:
    codecs = ", ".join(f"{k} {v}" for k, v in sorted(st["codecs"].items())) or "-"
    rc = st["read_committed"]
    ts = (f"{format_time(st['min_timestamp'])} .. {format_time(st['max_timestamp'])}"
          if "min_timestamp" not in st["omitted"] else
          f"(min omitted: --fast) .. {format_time(st['max_timestamp'])}")
    without = st["records_without_timestamp"]
    lines = [
        f"{part.topic}-{part.partition} ({part.path})",
        f"  records        {st['records']} in {st['batches']} batches, {st['segments']} segment(s), {st['bytes']} bytes",
        f"  offsets        {st['first_offset'] if st['first_offset'] is not None else '-'} .. "
        f"{st['last_offset'] if st['last_offset'] is not None else '-'} (log start {st['log_start_offset']}, "
        f"end {st['end_offset']})",
        f"  timestamps     {ts}" + (f" ({without} without)" if without else ""),
        f"  codecs         {codecs} (batches)",
        f"  batch bytes    min {st['batch_bytes_min']} mean {st['batch_bytes_mean']} max {st['batch_bytes_max']}; "
        f"{st['records_per_batch_mean']} records per batch",
        f"  producers      {st['producers']} ({st['idempotent_batches']} idempotent batches)",
        f"  transactions   {st['transactional_batches']} transactional batches ({st['transactional_records']} "
        f"records), {st['commits']} commits, {st['aborts']} aborts",
        f"  read_committed {rc['records']} records up to the last stable offset {st['last_stable_offset']} "
        f"({rc['aborted_batches']} aborted batches left out)",
        f"  tombstones     {_or_omitted(st['tombstones'])}",
        f"  keys           " + (f"~{st['key_cardinality_estimate']} distinct, {st['null_keys']} null"
                                if st["key_cardinality_estimate"] is not None else _or_omitted(None)),
    ]
    prods = st["per_producer"]
    for p in prods[:10]:
        lines.append(f"  producer       {p['producer_id']} epoch {p['producer_epoch']}: {p['records']} records in "
                     f"{p['batches']} batches, offsets {p['first_offset']} .. {p['last_offset']}, "
                     f"last sequence {p['last_sequence']}")
    if len(prods) > 10:
        lines.append(f"  producer       ... {len(prods) - 10} more (--json lists them all)")
    return "\n".join(lines) + "\n"


def register(app: "typer.Typer") -> None:
    from typing import Annotated, List, Optional

    import typer

    quiet_flag, json_flag = flags()

    @app.command(help="Per partition: records (each isolation level), bytes, offset and time ranges, codecs, batch "
                      "sizes, producers and transactions, tombstones, an estimate of distinct keys; header figures "
                      "from batch headers (docs/summary.md). PATH may be a URI (s3://...).")
    def stats(path: Annotated[str, typer.Argument(help="Partition directory or log directory (local or a URI).")],
              topic: Annotated[Optional[List[str]], typer.Option("--topic", "-t", help="Only this topic, or topics matching this glob (repeatable).")] = None,
              partition: Annotated[Optional[int], typer.Option("--partition", "-p", min=0, help="Only this partition.")] = None,
              include_internal: Annotated[bool, typer.Option("--include-internal", help="Also __consumer_offsets, __transaction_state, __cluster_metadata, _schemas and other __ topics that no --topic names (left out by default, as Kafka's exclude.internal.topics).")] = False,
              fast: Annotated[bool, typer.Option("--fast", help="Header figures only: the figures that need the records (tombstones, keys, and timestamps no header gives) are left out, named in \"omitted\".")] = False,
              trust_headers: Annotated[bool, typer.Option("--trust-headers", help="Skip the CRC check of batches not verified before (a bit flipped inside a record goes unseen; lengths, magic, offsets and torn tails are still checked).")] = False,
              histogram: Annotated[Optional[str], typer.Option("--histogram", help="Records over time per bucket (1m, 1h, 1d...) from the records' own timestamps (a timestamps-only walk).")] = None,
              isolation: Annotated[str, typer.Option("--isolation", help="read_uncommitted or read_committed (for --histogram).")] = "read_uncommitted",
              as_json: Annotated[bool, json_flag] = False, quiet: Annotated[bool, quiet_flag] = False) -> None:
        run(cmd_stats, path, topic=topic, partition=partition, as_json=as_json, quiet=quiet,
            include_internal=include_internal, fast=fast, trust_headers=trust_headers, histogram=histogram,
            isolation=isolation)
