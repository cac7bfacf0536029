"""Arrow columns for Kafka records, with Spark's Kafka-source schema.

`decode_columns(data, topic, partition)` turns any buffer of batches (magic 0, 1, 2, mixed, any
codec) into a `pyarrow.Table` whose columns have the names and types Spark's built-in Kafka
source uses, so a job can swap sources without touching the rest:

    key binary, value binary, topic string, partition int32, offset int64,
    timestamp timestamp[us, tz=UTC], timestampType int32,
    headers list<struct<key: string, value: binary>>   (include_headers; null when a record has none)

plus kbatch's `isTombstone` bool and, with batch_fields=True, `producerId` int64, `producerEpoch`
int16, `baseSequence` int32, `isTransactional` bool, `isControl` bool.

Rules:
- "no timestamp" (-1, or Long.MIN_VALUE in an extended batch, DESIGN.md decision 1) is null.
  Timestamps are milliseconds on the wire and microseconds in Spark; a millisecond value whose
  microsecond form does not fit in int64 (|ts| > 9.2e15 ms, about 292,000 years) is null as well.
- Control batches (transaction markers) are not rows, as consumers never see them; pass
  include_control=True to get them (then `isControl` tells them apart).
- `offset` ranges: rows with start_offset <= offset < end_offset; whole batches outside the
  range are never decompressed or decoded.

Magic 2 records are decoded by the backend kernel `decode_columns_v2` (kbatch._core_py holds its
contract), straight into the offsets/data/validity buffers of the Arrow arrays: the Cython core
creates no Python object per record. Keys and values are copied once into those buffers (so a table does not keep the input
alive). Legacy (magic 0/1) batches go through the record objects of `legacy.py`.
"""
from __future__ import annotations

import os
import threading
from collections import deque
from collections.abc import Callable, Generator, Iterable, Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt

from ..errors import MissingDependencyError

try:
    import pyarrow as pa
    import pyarrow.compute as pc
except ModuleNotFoundError as e:  # Arrow is optional: the codec, storage and CLI run without it
    raise MissingDependencyError("kbatch's Arrow columns (kbatch.columns.decode, decode_columns)", "pyarrow", "arrow") from e

from .. import _backend
from .. import _wire as W
from ..record.batch import HeaderScan, as_view, scan_headers, truncation_error
from ..record.compression import check_codec, decompress
from ..errors import CrcMismatchError, KBatchError

if TYPE_CHECKING:
    from .._core import ByteView, ColumnsJob, Record
    from .._typing import Buffer

#: a kernel result: Arrow-layout numpy columns by name (kbatch._core_py.decode_columns_v2)
Columns = dict[str, npt.NDArray[Any]]
#: per-batch (producer_id, producer_epoch, base_sequence, attributes), indexed by batch_index
BatchFields = tuple[npt.NDArray[Any], ...]

HEADER_TYPE = pa.list_(pa.field("element", pa.struct([pa.field("key", pa.string()), pa.field("value", pa.binary())])))

KAFKA_SCHEMA = pa.schema([
    pa.field("key", pa.binary()),
    pa.field("value", pa.binary()),
    pa.field("topic", pa.string()),
    pa.field("partition", pa.int32()),
    pa.field("offset", pa.int64()),
    pa.field("timestamp", pa.timestamp("us", tz="UTC")),
    pa.field("timestampType", pa.int32()),
])
"""Spark's Kafka-source columns, without headers (Spark adds `headers` with includeHeaders=true)."""

TOMBSTONE_FIELD = pa.field("isTombstone", pa.bool_())
BATCH_FIELDS = [
    pa.field("producerId", pa.int64()),
    pa.field("producerEpoch", pa.int16()),
    pa.field("baseSequence", pa.int32()),
    pa.field("isTransactional", pa.bool_()),
    pa.field("isControl", pa.bool_()),
]

# The Spark DDL of the same columns, for the data source's schema().
SPARK_DDL = ("key binary, value binary, topic string, partition int, offset bigint, timestamp timestamp, "
             "timestampType int")
SPARK_HEADERS_DDL = "headers array<struct<key: string, value: binary>>"
SPARK_BATCH_DDL = ("producerId bigint, producerEpoch smallint, baseSequence int, isTransactional boolean, "
                   "isControl boolean")

DEFAULT_CHUNK_ROWS = 32768
DEFAULT_CHUNK_BYTES = 16 * 1024 * 1024  # (decompressed) record bytes a chunk holds, about
_MAX_CHUNK_BYTES = 64 * 1024 * 1024  # records bytes per kernel call (int32 Arrow offsets stay safe)
_US_LIMIT = (2**63 - 1) // 1000      # largest |ms| whose microseconds fit in int64


def schema(include_headers: bool = True, batch_fields: bool = False, tombstone: bool = True) -> pa.Schema:
    """The Arrow schema decode_columns produces for these options."""
    fields = list(KAFKA_SCHEMA)
    if include_headers:
        fields.append(pa.field("headers", HEADER_TYPE))
    if tombstone:
        fields.append(TOMBSTONE_FIELD)
    if batch_fields:
        fields.extend(BATCH_FIELDS)
    return pa.schema(fields)


def spark_ddl(include_headers: bool = True, batch_fields: bool = False, tombstone: bool = True) -> str:
    """The Spark DDL string matching schema(...)."""
    parts = [SPARK_DDL]
    if include_headers:
        parts.append(SPARK_HEADERS_DDL)
    if tombstone:
        parts.append("isTombstone boolean")
    if batch_fields:
        parts.append(SPARK_BATCH_DDL)
    return ", ".join(parts)


# ------------------------------------------------------------------------------------ kernel glue
def _columns_from_records(records_per_batch: Iterable[tuple[int, Sequence[Record]]],
                          include_headers: bool) -> Columns:
    """The decode_columns_v2 result layout, built from Record objects (legacy batches).
    records_per_batch: [(ttype, [Record, ...]), ...]."""
    offs: list[int] = []
    tss: list[int] = []
    tsv: list[bool] = []
    ttypes: list[int] = []
    tombs: list[bool] = []
    bidx: list[int] = []
    keys: list[ByteView | None] = []
    values: list[ByteView | None] = []
    hcounts: list[int] = []
    hkeys: list[bytes] = []
    hvals: list[ByteView | None] = []
    for i, (ttype, recs) in enumerate(records_per_batch):
        for r in recs:
            offs.append(r.offset)
            ts = r.timestamp
            tsv.append(ts is not None)
            tss.append(0 if ts is None else ts)
            ttypes.append(int(ttype))
            tombs.append(bool(r.is_tombstone))
            bidx.append(i)
            keys.append(r.key)
            values.append(r.value)
            if include_headers:
                hcounts.append(len(r.headers))
                for hk, hv in r.headers:
                    hkeys.append(hk.encode("utf-8") if isinstance(hk, str) else bytes(hk))
                    hvals.append(hv)
            else:
                hcounts.append(0)
    out = {
        "offset": np.array(offs, dtype=np.int64),
        "timestamp": np.array(tss, dtype=np.int64),
        "timestamp_valid": np.array(tsv, dtype=np.bool_),
        "timestamp_type": np.array(ttypes, dtype=np.int32),
        "is_tombstone": np.array(tombs, dtype=np.bool_),
        "batch_index": np.array(bidx, dtype=np.int32),
        "header_offsets": _offsets([hcounts]) if hcounts else np.zeros(1, np.int32),
    }
    for name, blobs in (("key", keys), ("value", values), ("header_key", hkeys), ("header_value", hvals)):
        lens = [0 if b is None else len(b) for b in blobs]
        out[name + "_offsets"] = _offsets([lens])
        out[name + "_data"] = np.frombuffer(b"".join(bytes(b) for b in blobs if b is not None), dtype=np.uint8)
        if name != "header_key":
            out[name + "_valid"] = np.array([b is not None for b in blobs], dtype=np.bool_)
    stamps = [t for t, ok in zip(tss, tsv) if ok]
    out["stats"] = np.array([len(tss) - len(stamps), min(stamps, default=W.INT64_MAX), max(stamps, default=W.INT64_MIN),
                             sum(b is None for b in keys), sum(b is None for b in values),
                             sum(b is None for b in hvals)], dtype=np.int64)
    return out


def _offsets(lens_lists: Sequence[Sequence[int]]) -> npt.NDArray[np.int32]:
    lens = np.array(lens_lists[0], dtype=np.int64)
    o = np.zeros(len(lens) + 1, dtype=np.int64)
    np.cumsum(lens, out=o[1:])
    return o.astype(np.int32)


# ------------------------------------------------------------------------------------ Arrow assembly
def _validity(valid: npt.NDArray[np.bool_]) -> tuple[pa.Buffer | None, int]:
    if valid.all():
        return None, 0
    return pa.py_buffer(np.packbits(valid, bitorder="little")), int(len(valid) - np.count_nonzero(valid))


def _binary(offsets: npt.NDArray[np.int32], data: npt.NDArray[np.uint8], valid: npt.NDArray[np.bool_] | None,
            typ: pa.DataType = pa.binary(), nulls: int | None = None) -> pa.Array:
    """A binary/string array; `nulls` (when known) spares the pass that counts them."""
    n = len(offsets) - 1
    if valid is None or nulls == 0:
        vbuf, nulls = None, 0
    else:
        vbuf, nulls = _validity(valid)
    return pa.Array.from_buffers(typ, n, [vbuf, pa.py_buffer(offsets), pa.py_buffer(data)], null_count=nulls)


def _fixed(typ: pa.DataType, dtype: type[np.generic], values: npt.NDArray[Any]) -> pa.Array:
    """A fixed-width array without nulls over a numpy column's memory (pyarrow.array's checks
    cost more than the wrapping; a column of another dtype or layout is converted first)."""
    values = np.ascontiguousarray(values, dtype)
    return pa.Array.from_buffers(typ, len(values), [None, pa.py_buffer(values)], null_count=0)


def _header_keys(offsets: npt.NDArray[np.int32], data: npt.NDArray[np.uint8]) -> pa.Array:
    arr = _binary(offsets, data, None, pa.string())
    if not len(data) or int(data.max()) < 0x80:  # ASCII is UTF-8 (the kernel made the offsets)
        return arr
    try:
        arr.validate(full=True)
        return arr
    except pa.ArrowInvalid:  # not UTF-8: decode with replacement, as the record objects do
        raw = _binary(offsets, data, None).to_pylist()
        return pa.array([b.decode("utf-8", "replace") for b in raw], pa.string())


def _repeat_string(value: str | None, n: int) -> pa.Array:
    """`value` n times as a string array, its buffers made by numpy (several times faster than
    pyarrow.repeat for a string)."""
    raw = None if value is None else value.encode()
    if raw is None or not raw or len(raw) * n > np.iinfo(np.int32).max:
        return pa.repeat(pa.scalar(value, pa.string()), n)
    offsets = np.arange(0, (n + 1) * len(raw), len(raw), dtype=np.int32)
    return pa.Array.from_buffers(pa.string(), n, [None, pa.py_buffer(offsets), pa.py_buffer(raw * n)], null_count=0)


def _repeat_int32(value: int | None, n: int) -> pa.Array:
    if value is None:
        return pa.nulls(n, pa.int32())
    return pa.array(np.full(n, value, np.int32))


class _Assembler:
    """Kernel results -> pyarrow.RecordBatch, with the topic and partition columns made once and
    sliced for each chunk (they hold the same value on every row)."""

    def __init__(self, topic: str | None, partition: int | None, include_headers: bool, batch_fields: bool,
                 tombstone: bool, columns: frozenset[str] | None = None) -> None:
        self.topic, self.partition = topic, partition
        self.include_headers, self.batch_fields, self.tombstone = include_headers, batch_fields, tombstone
        full = schema(include_headers, batch_fields, tombstone)
        #: the columns built (None: all): a projection's others are never made into arrays
        self.columns = columns
        self.schema = full if columns is None else pa.schema([f for f in full if f.name in columns])
        self._consts: tuple[pa.Array, pa.Array] | None = None

    def _constant(self, n: int) -> tuple[pa.Array, pa.Array]:
        if self._consts is None or len(self._consts[0]) < n:
            # as long as the first chunk (a small decode pays for its rows only), then doubling
            cap = n if self._consts is None else max(n, 2 * len(self._consts[0]))
            self._consts = (_repeat_string(self.topic, cap), _repeat_int32(self.partition, cap))
        t, p = self._consts
        return (t, p) if len(t) == n else (t.slice(0, n), p.slice(0, n))

    def __call__(self, cols: Columns, batch_fields: BatchFields | None) -> pa.RecordBatch:
        """batch_fields: None or per-batch numpy arrays (producer_id, producer_epoch, base_sequence,
        attributes) indexed by batch_index. Only the columns of self.schema are built."""
        n = len(cols["offset"])
        ts_nulls, ts_min, ts_max, k_nulls, v_nulls, hv_nulls = cols["stats"].tolist()
        want = self.columns

        def timestamp() -> pa.Array:
            ts = cols["timestamp"]  # ms, 0 where null
            if ts_min < -_US_LIMIT or ts_max > _US_LIMIT:  # beyond microseconds: null too
                vbuf, nulls = _validity(cols["timestamp_valid"] & (ts >= -_US_LIMIT) & (ts <= _US_LIMIT))
            elif ts_nulls:
                vbuf, nulls = _validity(cols["timestamp_valid"])
            else:
                vbuf, nulls = None, 0
            # microseconds in place (the kernel's column is this call's own, its memory already paged
            # in); out-of-range values wrap in the multiply: they are null
            return pa.Array.from_buffers(pa.timestamp("us", tz="UTC"), n,
                                         [vbuf, pa.py_buffer(np.multiply(ts, 1000, out=ts))], null_count=nulls)

        def headers() -> pa.Array:
            hoff = cols["header_offsets"]
            hk = _header_keys(cols["header_key_offsets"], cols["header_key_data"])
            hv = _binary(cols["header_value_offsets"], cols["header_value_data"], cols["header_value_valid"],
                         nulls=hv_nulls)
            struct_arr = pa.StructArray.from_arrays([hk, hv], fields=list(HEADER_TYPE.value_type))
            if n and hoff[n] == 0:  # no record has headers
                lvbuf, lnulls = pa.py_buffer(np.zeros((n + 7) // 8, np.uint8)), n
            else:
                lvbuf, lnulls = _validity(hoff[1:] != hoff[:-1])
            return pa.Array.from_buffers(HEADER_TYPE, n, [lvbuf, pa.py_buffer(hoff)], null_count=lnulls,
                                         children=[struct_arr])

        def tombstone() -> pa.Array:
            # packed by numpy: pyarrow's conversion of a bool array is several times slower
            tomb = pa.py_buffer(np.packbits(cols["is_tombstone"], bitorder="little"))
            return pa.Array.from_buffers(pa.bool_(), n, [None, tomb], null_count=0)

        build: dict[str, Callable[[], pa.Array]] = {
            "key": lambda: _binary(cols["key_offsets"], cols["key_data"], cols["key_valid"], nulls=k_nulls),
            "value": lambda: _binary(cols["value_offsets"], cols["value_data"], cols["value_valid"], nulls=v_nulls),
            "topic": lambda: self._constant(n)[0],
            "partition": lambda: self._constant(n)[1],
            "offset": lambda: _fixed(pa.int64(), np.int64, cols["offset"]),
            "timestamp": timestamp,
            "timestampType": lambda: _fixed(pa.int32(), np.int32, cols["timestamp_type"]),
            "headers": headers,
            "isTombstone": tombstone,
        }
        if batch_fields is not None:
            pid, epoch, seq, attrs = batch_fields
            bi = cols["batch_index"]
            build.update({
                "producerId": lambda: pa.array(pid[bi].astype(np.int64)),
                "producerEpoch": lambda: pa.array(epoch[bi].astype(np.int16)),
                "baseSequence": lambda: pa.array(seq[bi].astype(np.int32)),
                "isTransactional": lambda: pa.array((attrs[bi] & W.TRANSACTIONAL_FLAG_MASK) != 0),
                "isControl": lambda: pa.array((attrs[bi] & W.CONTROL_FLAG_MASK) != 0)})
        if want is None and batch_fields is None and self.batch_fields:
            raise ValueError("batch_fields were asked for: give the chunk's batch fields")
        return pa.RecordBatch.from_arrays([build[f.name]() for f in self.schema], schema=self.schema)


def _assemble(cols: Columns, topic: str | None, partition: int | None, include_headers: bool,
              batch_fields: BatchFields | None, tombstone: bool = True) -> pa.RecordBatch:
    """A pyarrow.RecordBatch from a kernel result (one-off form of _Assembler)."""
    return _Assembler(topic, partition, include_headers, batch_fields is not None, tombstone)(cols, batch_fields)


# ------------------------------------------------------------------------------------ decoding
_SCAN = ("position", "size", "magic", "base_offset", "last_offset", "crc", "attributes", "first_timestamp",
         "max_timestamp", "producer_id", "producer_epoch", "base_sequence", "record_count")
_LEGACY, _PLAIN, _COMPRESSED = 0, 1, 2  # kinds of batches a chunk holds (one kind a chunk)


class _Batches:
    """Header columns (numpy, one entry per batch) of batches decoded together, all of one kind."""

    __slots__ = ("kind", "c")

    def __init__(self, kind: int, c: Columns) -> None:
        self.kind = kind
        self.c = c

    def __len__(self) -> int:
        return len(self.c["position"])

    def take(self, lo: int, hi: int) -> "_Batches":
        return _Batches(self.kind, {k: v[lo:hi] for k, v in self.c.items()})

    def then(self, other: "_Batches") -> "_Batches":
        return _Batches(self.kind, {k: np.concatenate((v, other.c[k])) for k, v in self.c.items()})

    def plan(self, chunk_rows: int, chunk_bytes: int) -> list[tuple[int, int]]:
        """[(lo, hi)]: consecutive ranges, each ending at the first batch that brings it to
        chunk_rows rows, or before the batch that would take it past chunk_bytes (never empty)."""
        rows = np.cumsum(np.maximum(self.c["record_count"], 1), dtype=np.int64)
        size = np.cumsum(self.c["size"], dtype=np.int64)
        out: list[tuple[int, int]] = []
        lo, n = 0, len(rows)
        while lo < n:
            r0 = rows[lo - 1] if lo else 0
            b0 = size[lo - 1] if lo else 0
            hi = min(int(np.searchsorted(rows, r0 + chunk_rows, "left")) + 1,
                     int(np.searchsorted(size, b0 + chunk_bytes, "right")), n)
            hi = max(hi, lo + 1)
            out.append((lo, hi))
            lo = hi
        return out


def _plain_job(buf: memoryview, b: _Batches, include_headers: bool, verify_crc: bool,
               copy: tuple[bool, bool] = (True, True)) -> ColumnsJob:
    """Uncompressed v2 batches: the kernel reads their records in place and checks each batch's
    CRC right before its records (so they are read from cache). copy: (keys, values) to copy (a
    projection without them steps over their bytes)."""
    c = b.c
    starts = c["position"] + W.RECORDS_OFFSET
    job: ColumnsJob = _backend.core.ColumnsJob(
        buf, starts, c["position"] + c["size"], c["record_count"], c["base_offset"], c["first_timestamp"],
        c["max_timestamp"], c["attributes"], include_headers, c["crc"].astype(np.int64) if verify_crc else None,
        *copy)
    return job


def _decode_plain(buf: memoryview, b: _Batches, include_headers: bool, verify_crc: bool,
                  copy: tuple[bool, bool] = (True, True)) -> Columns:
    job = _plain_job(buf, b, include_headers, verify_crc, copy)
    job.run()
    return job.result()


def _decode_compressed(buf: memoryview, b: _Batches, include_headers: bool, verify_crc: bool,
                       max_decompressed_bytes: int, chunk_bytes: int,
                       copy: tuple[bool, bool] = (True, True)) -> Iterator[tuple[Columns, int, int]]:
    """Compressed v2 batches: CRC over the stored bytes, decompress, decode; yields (kernel result,
    index of the run's first batch, index after its last) per run of batches holding up to
    chunk_bytes decompressed bytes (one batch at least), so no more is decompressed at a time."""
    c = {k: v.tolist() for k, v in b.c.items()}
    k, n = 0, len(b)
    while k < n:
        parts: list[bytes] = []
        starts: list[int] = []
        ends: list[int] = []
        at, first = 0, k
        while k < n and (k == first or at < chunk_bytes):
            p, s, base = c["position"][k], c["size"][k], c["base_offset"][k]
            if verify_crc:
                _check_crc(buf, p, s, 2, base, c["crc"][k])
            codec = check_codec(c["attributes"][k] & W.COMPRESSION_CODEC_MASK, 2, p + W.ATTRIBUTES_OFFSET)
            try:
                raw = decompress(codec, buf[p + W.RECORDS_OFFSET:p + s], 2, max_decompressed_bytes,
                                 p + W.RECORDS_OFFSET)
            except KBatchError as e:
                raise e.at(base_offset=base)
            parts.append(raw)
            starts.append(at)
            at += len(raw)
            ends.append(at)
            k += 1
        data = parts[0] if len(parts) == 1 else b"".join(parts)
        del parts, raw
        sel = slice(first, k)
        try:
            cols = _backend.core.decode_columns_v2(
                data, np.array(starts, np.int64), np.array(ends, np.int64), b.c["record_count"][sel],
                b.c["base_offset"][sel], b.c["first_timestamp"][sel], b.c["max_timestamp"][sel],
                b.c["attributes"][sel], include_headers, None, *copy)
        except KBatchError as e:
            if e.position is not None:
                i = min(int(np.searchsorted(np.array(ends), e.position, side="right")), k - first - 1)
                e.reason += (f" (at byte {e.position - starts[i]} of the decompressed records of the batch "
                             f"at byte {c['position'][first + i]})")
                e.position = c["position"][first + i]
                e.base_offset = None
                e.at(base_offset=c["base_offset"][first + i])
            raise
        del data  # the columns hold copies: let the decompressed bytes go before the next run
        yield cols, first, k


def _decode_legacy(buf: memoryview, b: _Batches, include_headers: bool, max_decompressed_bytes: int,
                   verify_crc: bool) -> Columns:
    from ..record.legacy import LegacyRecordBatch

    per_batch = []
    c = {k: v.tolist() for k, v in b.c.items()}
    for p, s, m, base, crc, a, ts in zip(c["position"], c["size"], c["magic"], c["base_offset"], c["crc"],
                                         c["attributes"], c["first_timestamp"]):
        if verify_crc:
            _check_crc(buf, p, s, m, base, crc)
        lb = LegacyRecordBatch(buf, p, s, m, base, crc, a & 0xFF, ts, max_decompressed_bytes, verify_crc)
        per_batch.append((lb.timestamp_type, lb.records()))
    return _columns_from_records(per_batch, include_headers)


_POOL: tuple[int, ThreadPoolExecutor, int] | None = None  # (the pid that made it, the pool, its threads)
_POOL_LOCK = threading.Lock()


#: a plain chunk's walk given to a decode thread, and its future
_Walk = tuple["_Ahead", Future[None]]


def _decode_pool() -> tuple[ThreadPoolExecutor, int] | None:
    """The threads that decode chunks ahead of the one being assembled, and how many (one a CPU,
    at most 8: the walk is bound by memory beyond that); None on one CPU. A forked child makes its
    own: the parent's threads do not exist there."""
    global _POOL
    # the CPUs this process may run on (a container's or taskset's share), not the machine's
    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    workers = min(cpus, 8)
    if workers < 2:
        return None
    with _POOL_LOCK:
        if _POOL is None or _POOL[0] != os.getpid():
            _POOL = (os.getpid(), ThreadPoolExecutor(workers, thread_name_prefix="kbatch-decode"), workers)
        return _POOL[1], _POOL[2]


class _Ahead:
    """A plain chunk's walk for a decode thread (its memory is taken and given back on the caller's
    thread: Arrow's pool reuses freed memory only on the thread that freed it, and memory taken on
    a decode thread and freed on the caller's went back to the system each time, to be faulted in
    again); drop() lets go of the job, and so of the caller's buffer, when the walk was cancelled
    before it ran (a cancelled call stays queued until a thread reaches it)."""

    __slots__ = ("job",)

    def __init__(self, job: ColumnsJob) -> None:
        self.job: ColumnsJob | None = job

    def __call__(self) -> None:
        assert self.job is not None  # dropped only once cancelled: never run after
        self.job.run()

    def drop(self) -> None:
        self.job = None


def iter_record_batches(data: Buffer, topic: str | None = None, partition: int | None = None, *,
                        include_headers: bool = True, batch_fields: bool = False, include_control: bool = False,
                        tombstone: bool = True, verify_crc: bool = True, strict: bool = True,
                        start_offset: int | None = None, end_offset: int | None = None,
                        chunk_rows: int = DEFAULT_CHUNK_ROWS, chunk_bytes: int = DEFAULT_CHUNK_BYTES,
                        max_decompressed_bytes: int = W.DEFAULT_MAX_DECOMPRESSED_BYTES,
                        use_threads: bool = True, key_schema: Any = None,
                        value_schema: Any = None, on_decode_error: Any = "fail",
                        columns: Iterable[str] | None = None) -> Generator[pa.RecordBatch, None, int]:
    """Yield pyarrow.RecordBatch objects of about `chunk_rows` rows and at most about
    `chunk_bytes` bytes of (decompressed) records each; a batch is never split, so a chunk holds
    one batch at least.

    start_offset/end_offset select rows with start_offset <= offset < end_offset; batches wholly
    outside are skipped unread. The generator's return value (StopIteration.value) is the
    position where complete batches end.
    use_threads: decode the records of uncompressed chunks on other threads (one a CPU), ahead of
    the chunk being yielded, as pyarrow's readers do; chunks, rows and errors come in the same order
    either way. Pass False where the caller already runs one decode a core (a Spark task).
    key_schema/value_schema: as decode_columns', chunk by chunk: every chunk has the first chunk's
    column types (a later chunk whose values decode to another type is cast to it, a field it
    lacks null; one that cannot be cast raises). With a fixed reader schema (`subject=` or
    `reader_schema=`) the rows equal decode_columns' (docs/schemas.md). on_decode_error: as
    decode_columns' (a callable gets the row's index in the whole stream).
    columns: the columns to build (None: every one), in the schema's order: the others are never
    made into arrays, and a key or value left out is never given to its format (projection).
    """
    fmts = {name: fmt for name, fmt in (("key", key_schema), ("value", value_schema))
            if fmt is not None and (columns is None or name in columns)}
    wanted = None if columns is None else frozenset(columns)
    # a format names the offset of a value it cannot decode: the offsets are built for it
    built = wanted if wanted is None or not fmts else wanted | {"offset"}
    binary = _iter_binary(data, topic, partition, include_headers=include_headers, batch_fields=batch_fields,
                          include_control=include_control, tombstone=tombstone, verify_crc=verify_crc, strict=strict,
                          start_offset=start_offset, end_offset=end_offset, chunk_rows=chunk_rows,
                          chunk_bytes=chunk_bytes, max_decompressed_bytes=max_decompressed_bytes,
                          use_threads=use_threads, columns=built)
    handler = _on_error(on_decode_error)
    if not fmts:
        return (yield from binary)
    types: dict[str, pa.DataType] = {}
    seen = 0
    try:
        while True:
            try:
                rb = next(binary)
            except StopIteration as stop:
                return int(stop.value)
            at = seen
            shifted = None if handler is None else (lambda row, error: handler(at + row, error))
            typed = _typed_chunk(rb, fmts, types, shifted, topic, partition)
            yield typed if built == wanted else typed.drop_columns(["offset"])
            seen += rb.num_rows
    finally:
        binary.close()  # an abandoned caller: the decode threads let go of the buffer now


def _on_error(mode: Any) -> Any:
    """on_decode_error= -> the on_error a format's decode_column takes (None: raise)."""
    if mode is None or mode == "fail":
        return None
    if mode == "null":
        return lambda row, error: None
    if callable(mode):
        return mode
    raise ValueError(f"on_decode_error must be 'fail', 'null' or a callable (row, error), not {mode!r}")


def _typed_values(fmt: Any, column: Any, offsets: Any, name: str, on_error: Any, topic: str | None,
                  partition: int | None) -> pa.Array:
    """A format's typed column; its error (a kbatch.values.SchemaError, duck-typed: it names key or
    value, offset and schema id) also names the topic and partition, as the read path's damage does."""
    try:
        return fmt.decode_column(column, offsets, name, **({} if on_error is None else {"on_error": on_error}))
    except KBatchError as e:
        locate = getattr(e, "located", None)
        if topic is not None and locate is not None:
            locate(topic=topic, partition=partition)
        raise


def _typed_chunk(rb: pa.RecordBatch, fmts: dict[str, Any], types: dict[str, pa.DataType],
                 on_error: Any = None, topic: str | None = None, partition: int | None = None) -> pa.RecordBatch:
    """One chunk with its key/value columns decoded by kbatch.values formats (duck-typed: the values
    package is above this layer), cast to the types the first chunk had."""
    names = rb.schema.names
    cols = list(rb.columns)
    fields = list(rb.schema)
    offsets = cols[names.index("offset")]
    for name, fmt in fmts.items():
        i = names.index(name)
        col = _typed_values(fmt, cols[i], offsets, name, on_error, topic, partition)
        want = types.setdefault(name, col.type)
        if col.type != want:
            try:
                col = col.cast(want)
            except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as e:
                first = int(offsets[0].as_py()) if len(offsets) else None
                raise KBatchError(f"the {name}s from offset {first} decode to {col.type}, an earlier chunk's to "
                                  f"{want}, and one cannot be cast to the other ({e}): give the format a reader "
                                  f"schema (subject= or reader_schema=) so that every chunk has one type") from None
        cols[i] = col
        fields[i] = pa.field(name, want)
    return pa.RecordBatch.from_arrays(cols, schema=pa.schema(fields, metadata=rb.schema.metadata))


def _iter_binary(data: Buffer, topic: str | None, partition: int | None, *, include_headers: bool,
                 batch_fields: bool, include_control: bool, tombstone: bool, verify_crc: bool, strict: bool,
                 start_offset: int | None, end_offset: int | None, chunk_rows: int, chunk_bytes: int,
                 max_decompressed_bytes: int, use_threads: bool,
                 columns: frozenset[str] | None = None) -> Generator[pa.RecordBatch, None, int]:
    """iter_record_batches' binary columns."""
    buf = as_view(data)
    lo = W.INT64_MIN if start_offset is None else start_offset
    hi = W.INT64_MAX if end_offset is None else end_offset
    chunk_bytes = max(1, min(int(chunk_bytes), _MAX_CHUNK_BYTES))
    assemble = _Assembler(topic, partition, include_headers, batch_fields, tombstone, columns)
    # the kernel copies only the keys and values the columns hold (a key-only read steps over values)
    copy = (columns is None or "key" in columns, columns is None or "value" in columns)

    def results(b: _Batches, ahead: _Walk | None) -> Iterator[tuple[Columns, int, int]]:
        """(kernel result, index in b of its first batch, index after its last batch); `ahead`:
        a plain chunk's job and the walk running on another thread."""
        if ahead is not None:
            ahead[1].result()  # the walk itself never raises: its error comes from the job
            assert ahead[0].job is not None
            yield ahead[0].job.result(), 0, len(b)
        elif b.kind == _PLAIN:
            yield _decode_plain(buf, b, include_headers, verify_crc, copy), 0, len(b)
        elif b.kind == _COMPRESSED:
            yield from _decode_compressed(buf, b, include_headers, verify_crc, max_decompressed_bytes, chunk_bytes,
                                          copy)
        else:
            yield _decode_legacy(buf, b, include_headers, max_decompressed_bytes, verify_crc), 0, len(b)

    def decode(b: _Batches, ahead: _Walk | None = None) -> Iterator[tuple[pa.RecordBatch | None, int]]:
        """(record batch or None, index after the last batch it holds), run after run."""
        for cols, first, end in results(b, ahead):
            rb = None
            if cols["offset"].size:
                bf: BatchFields | None = None
                if batch_fields:
                    if b.kind == _LEGACY:
                        n_b = len(b)
                        bf = (np.full(n_b, -1, np.int64), np.full(n_b, -1, np.int16), np.full(n_b, -1, np.int32),
                              np.zeros(n_b, np.int16))
                    else:
                        bf = tuple(b.c[k][first:] for k in ("producer_id", "producer_epoch", "base_sequence",
                                                            "attributes"))
                rb = assemble(cols, bf)
                if start_offset is not None or end_offset is not None:
                    off = cols["offset"]
                    if off.min() < lo or off.max() >= hi:
                        rb = rb.filter(pa.array((off >= lo) & (off < hi)))
            yield (rb if rb is not None and rb.num_rows else None), end

    def flush(b: _Batches, ahead: _Walk | None = None) -> Iterator[pa.RecordBatch]:
        """Yield the chunk's rows; on a bad batch, first yield the rows of the good batches
        before it (one batch at a time), then raise the bad batch's error."""
        done = 0
        try:
            for rb, end in decode(b, ahead):
                if rb is not None:
                    yield rb
                done = end
        except KBatchError:
            if len(b) - done <= 1:
                raise
            for k in range(done, len(b)):
                for rb, _end in decode(b.take(k, k + 1)):  # raises at the bad batch
                    if rb is not None:
                        yield rb
            raise

    def chunks() -> Generator[_Batches, None, int]:
        """The chunks to decode, in order (a scan error after the chunks before it); returns
        the position where complete batches end."""
        scan = HeaderScan(scan_headers(buf), stop_on_error=True)
        pending: _Batches | None = None  # the last, possibly unfinished, chunk: more batches of its kind may follow
        done = False
        valid = 0
        while not done:
            s = next(scan, None)
            if s is None:
                break
            c = {k: s[k] for k in _SCAN}
            magic, attrs = c["magic"], c["attributes"]
            v2 = magic == 2
            past = np.flatnonzero(v2 & (c["base_offset"] >= hi))
            if len(past):  # offsets only rise: nothing after this batch is wanted
                cut = int(past[0])
                done = True
                valid = int(c["position"][cut])
                c = {k: v[:cut] for k, v in c.items()}
                magic, attrs, v2 = magic[:cut], attrs[:cut], v2[:cut]
            keep = c["last_offset"] >= lo
            if not include_control:
                keep &= ~(v2 & ((attrs & W.CONTROL_FLAG_MASK) != 0))
            idx = np.flatnonzero(keep)
            if not len(idx):
                continue
            kind = np.where(v2, np.where((attrs & W.COMPRESSION_CODEC_MASK) != 0, _COMPRESSED, _PLAIN), _LEGACY)[idx]
            breaks = np.flatnonzero(kind[1:] != kind[:-1]) + 1
            for run in np.split(idx, breaks):
                b = _Batches(int(kind[np.searchsorted(idx, run[0])]), {k: v[run] for k, v in c.items()})
                if pending is not None:
                    if pending.kind == b.kind:
                        b = pending.then(b)
                    else:
                        yield pending
                    pending = None
                ranges = b.plan(chunk_rows, chunk_bytes if b.kind == _PLAIN else _MAX_CHUNK_BYTES)
                for r_lo, r_hi in ranges[:-1]:
                    yield b.take(r_lo, r_hi)
                pending = b.take(*ranges[-1])
        if pending is not None:
            yield pending
        if scan.error is not None:  # after the chunks before the bad header
            raise scan.error
        if not done:
            valid = scan.end
        if strict and not done and valid < len(buf):
            raise truncation_error(buf, valid)
        return valid

    threads = _decode_pool() if use_threads else None
    depth = 0 if threads is None else threads[1]  # chunks decoded ahead of the one being yielded
    queue: deque[tuple[_Batches, _Walk | None]] = deque()
    source = chunks()
    failure: Exception | None = None  # raised once the chunks before it are yielded
    valid = 0
    exhausted = False
    try:
        while True:
            while not exhausted and len(queue) <= depth:
                try:
                    chunk = next(source)
                except StopIteration as stop:
                    valid, exhausted = stop.value, True
                    break
                except Exception as e:  # noqa: BLE001 - its turn comes after the chunks before it
                    failure, exhausted = e, True
                    break
                ahead: _Walk | None = None
                if threads is not None and chunk.kind == _PLAIN:
                    walk = _Ahead(_plain_job(buf, chunk, include_headers, verify_crc, copy))
                    ahead = (walk, threads[0].submit(walk))
                queue.append((chunk, ahead))
            if not queue:
                break
            chunk, ahead = queue.popleft()
            yield from flush(chunk, ahead)
        if failure is not None:
            raise failure
    finally:
        # abandoned early: no thread reads the caller's buffer after this (it may be a map about to
        # close), and no queued call holds it
        for _chunk, ahead in queue:
            if ahead is not None:
                if ahead[1].cancel():
                    ahead[0].drop()
                else:
                    ahead[1].exception()
    return valid


def _check_crc(buf: memoryview, pos: int, size: int, magic: int, base: int, stored: int) -> None:
    # the scan ran without CRC checks (so skipped batches cost nothing); check the ones we decode
    if magic == 2:
        computed = _backend.core.crc32c(buf[pos + W.ATTRIBUTES_OFFSET:pos + size])
    else:
        import zlib
        computed = zlib.crc32(buf[pos + W.LOG_OVERHEAD + W.LEGACY_MAGIC_OFFSET:pos + size])
    if computed != stored:
        raise CrcMismatchError(stored=stored, computed=computed, position=pos, base_offset=base)


def decode_columns(data: Buffer, topic: str | None = None, partition: int | None = None, *, include_headers: bool = True,
                   batch_fields: bool = False, include_control: bool = False, verify_crc: bool = True,
                   strict: bool = True, start_offset: int | None = None, end_offset: int | None = None,
                   chunk_rows: int = DEFAULT_CHUNK_ROWS, chunk_bytes: int = DEFAULT_CHUNK_BYTES,
                   max_decompressed_bytes: int = W.DEFAULT_MAX_DECOMPRESSED_BYTES, use_threads: bool = True,
                   key_schema: Any = None, value_schema: Any = None, on_decode_error: Any = "fail") -> pa.Table:
    """Decode every record of `data` into a pyarrow.Table with Spark's Kafka-source columns.

    data: any buffer (bytes, mmap, memoryview, numpy uint8) of batches, magic 0/1/2 mixed.
    topic/partition fill the `topic` and `partition` columns (null when None).
    include_headers: add the `headers` column (null for a record without headers).
    batch_fields: add producerId, producerEpoch, baseSequence, isTransactional, isControl.
    include_control: also return the records of control batches (transaction markers).
    strict: raise TruncatedDataError for a partial last batch (False: ignore it, as Kafka does).
    start_offset/end_offset: keep rows with start_offset <= offset < end_offset.
    The table has one chunk per `chunk_rows` rows or `chunk_bytes` bytes of (decompressed) records,
    whichever comes first (a batch is never split across chunks); no more than about chunk_bytes
    is decompressed at a time.
    use_threads: decode uncompressed chunks on several threads (one a CPU), as pyarrow's readers
    do; the table is the same either way.
    key_schema/value_schema: a `kbatch.values` format (Avro, JsonSchema, Protobuf over a schema
    source) for Confluent-framed keys/values: the column becomes a typed one (a struct for records)
    of the same name, decoded after the binary columns (docs/schemas.md).
    on_decode_error: a key/value that does not decode (wrong magic byte, unknown schema id, payload
    that does not fit): "fail" raises (the default), "null" makes it null, a callable is called
    with (row index, kbatch.values.SchemaError) and the value is null (collect dead letters with
    it). A schema source that cannot answer raises whatever this says.
    """
    batches = list(iter_record_batches(
        data, topic, partition, include_headers=include_headers, batch_fields=batch_fields,
        include_control=include_control, verify_crc=verify_crc, strict=strict, start_offset=start_offset,
        end_offset=end_offset, chunk_rows=chunk_rows, chunk_bytes=chunk_bytes,
        max_decompressed_bytes=max_decompressed_bytes, use_threads=use_threads))
    table = pa.Table.from_batches(batches, schema=schema(include_headers, batch_fields))
    handler = _on_error(on_decode_error)
    for name, fmt in (("key", key_schema), ("value", value_schema)):
        if fmt is not None:  # a kbatch.values format (duck-typed: the values package is above this layer)
            typed = _typed_values(fmt, table.column(name), table.column("offset"), name, handler, topic, partition)
            table = table.set_column(table.schema.get_field_index(name), pa.field(name, typed.type), typed)
    return table


_PER_MS = {"s": (1000, 1), "ms": (1, 1), "us": (1, 1000), "ns": (1, 1_000_000)}  # unit -> (multiply, divide)


def timestamps_ms(column: pa.Array | pa.ChunkedArray) -> npt.NDArray[np.int64]:
    """The `timestamp` column back in int64 milliseconds, with nulls as Long.MIN_VALUE. The
    column's own unit is honoured (decode_columns gives microseconds, as Spark; a Parquet file
    written elsewhere may hold s, ms or ns); an int64 column is taken as milliseconds already.
    Sub-millisecond parts are floored, as Kafka stores milliseconds."""
    arr = column.combine_chunks() if isinstance(column, pa.ChunkedArray) else column
    unit = arr.type.unit if pa.types.is_timestamp(arr.type) else "ms"
    raw = pc.fill_null(arr.cast(pa.int64()), W.INT64_MIN).to_numpy(zero_copy_only=False)
    mul, div = _PER_MS[unit]
    ms = raw * mul if mul != 1 else (raw // div if div != 1 else raw)
    return np.where(raw == W.INT64_MIN, W.INT64_MIN, ms)


__all__ = ["decode_columns", "iter_record_batches", "KAFKA_SCHEMA", "HEADER_TYPE", "schema", "spark_ddl",
           "timestamps_ms"]
