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
_HEADER_COLUMNS = ("size", "base_offset", "last_offset", "magic", "attributes", "producer_id", "record_count")


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


def partition_stats(log: "Log", advance: Callable[[int], object] = lambda n: None) -> dict[str, Any]:
    """The statistics of one open Log (see the module docstring)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    from ..columns.decode import iter_record_batches
    from ..log.fetch import IsolationLevel, read_log
    from ..record.control import parse_control_record
    from ..record.file_records import batch_at

    st: dict[str, Any] = dict(segments=len(log.segments), bytes=log.size, batches=0, records=0,
              log_start_offset=log.beginning_offset(), first_offset=None, last_offset=None,
              end_offset=log.end_offset(), min_timestamp=None, max_timestamp=None, records_without_timestamp=0,
              codecs={}, magic={}, batch_bytes_min=None, batch_bytes_max=None, batch_bytes_mean=None,
              records_per_batch_mean=None, producers=0, idempotent_batches=0, transactional_batches=0,
              transactional_records=0, commits=0, aborts=0, control_batches=0, tombstones=0, null_keys=0,
              key_cardinality_estimate=0, problems=[])
    sizes_sum = 0
    producers: set[int] = set()
    hll = KeyCardinality()
    lo_ts: int | None = None
    hi_ts: int | None = None
    # what a read_uncommitted consumer reads from the log start, through the read path: the same
    # batches as cat and serve, unreadable bytes named (and read on at the next segment), a partial
    # batch at the end of the active segment ignored; every CRC checked
    res = read_log(log, log.beginning_offset(), isolation=IsolationLevel.READ_UNCOMMITTED, skip_unreadable=True)
    for w in res.windows():
        s = {k: w.window[k][w.start:w.stop] for k in _HEADER_COLUMNS}
        n = w.stop - w.start
        size = s["size"]
        st["batches"] += n
        sizes_sum += int(size.sum())
        mn, mx = int(size.min()), int(size.max())
        st["batch_bytes_min"] = mn if st["batch_bytes_min"] is None else min(st["batch_bytes_min"], mn)
        st["batch_bytes_max"] = mx if st["batch_bytes_max"] is None else max(st["batch_bytes_max"], mx)
        if st["first_offset"] is None:
            st["first_offset"] = int(s["base_offset"][0])
        st["last_offset"] = int(s["last_offset"][-1])
        magic, attrs = s["magic"], s["attributes"]
        for m, c in zip(*np.unique(magic, return_counts=True)):
            st["magic"][int(m)] = st["magic"].get(int(m), 0) + int(c)
        codec = np.where(magic == 2, attrs & W.COMPRESSION_CODEC_MASK, attrs & W.LEGACY_COMPRESSION_CODEC_MASK)
        for cc, c in zip(*np.unique(codec, return_counts=True)):
            name = W.Compression(int(cc)).name.lower()
            st["codecs"][name] = st["codecs"].get(name, 0) + int(c)
        v2 = magic == 2
        pids = s["producer_id"][v2]
        producers.update(np.unique(pids[pids >= 0]).tolist())
        st["idempotent_batches"] += int(np.count_nonzero(pids >= 0))
        txn = v2 & ((attrs & W.TRANSACTIONAL_FLAG_MASK) != 0)
        ctl = v2 & ((attrs & W.CONTROL_FLAG_MASK) != 0)
        st["transactional_batches"] += int(np.count_nonzero(txn & ~ctl))
        st["transactional_records"] += int(s["record_count"][txn & ~ctl].sum())
        st["control_batches"] += int(np.count_nonzero(ctl))
        for i in (np.flatnonzero(ctl) + w.start).tolist():
            for r in batch_at(w.window, i):
                kind = parse_control_record(r).type
                if kind == W.ControlRecordType.COMMIT:
                    st["commits"] += 1
                elif kind == W.ControlRecordType.ABORT:
                    st["aborts"] += 1
        # the batches' records, decoded into columns (control records left out)
        a, b = w.span()
        origin = w.window["origin"]
        for rb in iter_record_batches(memoryview(w.window["buf"])[a - origin:b - origin], include_headers=False,
                                      verify_crc=False):
            st["records"] += rb.num_rows
            key = rb.column("key")
            st["null_keys"] += key.null_count
            hll.add(key)
            st["tombstones"] += int(pc.sum(rb.column("isTombstone")).as_py() or 0)
            ts = rb.column("timestamp")
            st["records_without_timestamp"] += ts.null_count
            if ts.null_count < len(ts):
                mm = pc.min_max(ts.cast(pa.int64()))  # microseconds (Spark's timestamp) of ms values
                t0, t1 = mm["min"].as_py() // 1000, mm["max"].as_py() // 1000
                lo_ts = t0 if lo_ts is None else min(lo_ts, t0)
                hi_ts = t1 if hi_ts is None else max(hi_ts, t1)
        advance(b - a)
    st["problems"] = [str(r) for r in res.unreadable] + res.problems()
    st["min_timestamp"], st["max_timestamp"] = lo_ts, hi_ts
    st["producers"] = len(producers)
    if st["batches"]:
        st["batch_bytes_mean"] = round(sizes_sum / st["batches"], 1)
        st["records_per_batch_mean"] = round(st["records"] / st["batches"], 2)
    st["key_cardinality_estimate"] = hll.estimate()
    return st


def cmd_stats(path: "PathLike", *, topic: "str | Sequence[str] | None" = None, partition: int | None = None,
              as_json: bool = False, quiet: bool = False, out: IO[str] | None = None, err: IO[str] | None = None,
              include_internal: bool = False) -> int:
    from ..log.unified_log import Log

    out = out or sys.stdout
    err = err or sys.stderr
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
                st = partition_stats(log, advance)
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
            else:
                out.write(_text(part, st))
    return code


def _text(part: "Partition", st: dict[str, Any]) -> str:
    codecs = ", ".join(f"{k} {v}" for k, v in sorted(st["codecs"].items())) or "-"
    lines = [
        f"{part.topic}-{part.partition} ({part.path})",
        f"  records        {st['records']} in {st['batches']} batches, {st['segments']} segment(s), {st['bytes']} bytes",
        f"  offsets        {st['first_offset'] if st['first_offset'] is not None else '-'} .. "
        f"{st['last_offset'] if st['last_offset'] is not None else '-'} (log start {st['log_start_offset']}, "
        f"end {st['end_offset']})",
        f"  timestamps     {format_time(st['min_timestamp'])} .. {format_time(st['max_timestamp'])}"
        + (f" ({st['records_without_timestamp']} without)" if st["records_without_timestamp"] else ""),
        f"  codecs         {codecs} (batches)",
        f"  batch bytes    min {st['batch_bytes_min']} mean {st['batch_bytes_mean']} max {st['batch_bytes_max']}; "
        f"{st['records_per_batch_mean']} records per batch",
        f"  producers      {st['producers']} ({st['idempotent_batches']} idempotent batches)",
        f"  transactions   {st['transactional_batches']} transactional batches ({st['transactional_records']} "
        f"records), {st['commits']} commits, {st['aborts']} aborts",
        f"  tombstones     {st['tombstones']}",
        f"  keys           ~{st['key_cardinality_estimate']} distinct, {st['null_keys']} null",
    ]
    return "\n".join(lines) + "\n"


def register(app: "typer.Typer") -> None:
    from typing import Annotated, List, Optional

    import typer

    quiet_flag, json_flag = flags()

    @app.command(help="Per partition: records, bytes, offset and time ranges, codecs, batch sizes, producers and "
                      "transactions, tombstones, an estimate of distinct keys. PATH may be a URI (s3://...).")
    def stats(path: Annotated[str, typer.Argument(help="Partition directory or log directory (local or a URI).")],
              topic: Annotated[Optional[List[str]], typer.Option("--topic", "-t", help="Only this topic, or topics matching this glob (repeatable).")] = None,
              partition: Annotated[Optional[int], typer.Option("--partition", "-p", min=0, help="Only this partition.")] = None,
              include_internal: Annotated[bool, typer.Option("--include-internal", help="Also __consumer_offsets, __transaction_state, __cluster_metadata, _schemas and other __ topics that no --topic names (left out by default, as Kafka's exclude.internal.topics).")] = False,
              as_json: Annotated[bool, json_flag] = False, quiet: Annotated[bool, quiet_flag] = False) -> None:
        run(cmd_stats, path, topic=topic, partition=partition, as_json=as_json, quiet=quiet,
            include_internal=include_internal)
