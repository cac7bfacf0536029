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

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from . import _backend
from . import _wire as W
from .batch import _as_view, scan_headers, truncation_error
from .compression import check_codec, decompress
from .errors import CrcMismatchError, KBatchError

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
def _columns_from_records(records_per_batch, include_headers: bool) -> dict:
    """The decode_columns_v2 result layout, built from Record objects (legacy batches).
    records_per_batch: [(ttype, [Record, ...]), ...]."""
    offs, tss, tsv, ttypes, tombs, bidx = [], [], [], [], [], []
    keys, values, hcounts, hkeys, hvals = [], [], [], [], []
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
    return out


def _offsets(lens_lists) -> np.ndarray:
    lens = np.array(lens_lists[0], dtype=np.int64)
    o = np.zeros(len(lens) + 1, dtype=np.int64)
    np.cumsum(lens, out=o[1:])
    return o.astype(np.int32)


# ------------------------------------------------------------------------------------ Arrow assembly
def _validity(valid: np.ndarray):
    if valid.all():
        return None, 0
    return pa.py_buffer(np.packbits(valid, bitorder="little")), int(len(valid) - np.count_nonzero(valid))


def _binary(offsets, data, valid, typ=pa.binary()):
    n = len(offsets) - 1
    vbuf, nulls = (None, 0) if valid is None else _validity(valid)
    return pa.Array.from_buffers(typ, n, [vbuf, pa.py_buffer(offsets), pa.py_buffer(data)], null_count=nulls)


def _header_keys(offsets, data):
    arr = _binary(offsets, data, None, pa.string())
    try:
        arr.validate(full=True)
        return arr
    except pa.ArrowInvalid:  # not UTF-8: decode with replacement, as the record objects do
        raw = _binary(offsets, data, None).to_pylist()
        return pa.array([b.decode("utf-8", "replace") for b in raw], pa.string())


def _assemble(cols: dict, topic: str, partition: int, include_headers: bool, batch_fields, tombstone=True):
    """A pyarrow.RecordBatch from a kernel result. batch_fields: None or per-batch numpy arrays
    (producer_id, producer_epoch, base_sequence, attributes) indexed by batch_index."""
    n = len(cols["offset"])
    ts = cols["timestamp"]
    ok = cols["timestamp_valid"] & (ts >= -_US_LIMIT) & (ts <= _US_LIMIT)
    us = np.where(ok, ts, 0) * 1000
    vbuf, nulls = _validity(ok)
    arrays = [
        _binary(cols["key_offsets"], cols["key_data"], cols["key_valid"]),
        _binary(cols["value_offsets"], cols["value_data"], cols["value_valid"]),
        pa.repeat(pa.scalar(topic, pa.string()), n),
        pa.repeat(pa.scalar(partition, pa.int32()), n),
        pa.array(cols["offset"]),
        pa.Array.from_buffers(pa.timestamp("us", tz="UTC"), n, [vbuf, pa.py_buffer(us)], null_count=nulls),
        pa.array(cols["timestamp_type"]),
    ]
    if include_headers:
        hoff = cols["header_offsets"]
        counts = np.diff(hoff)
        hk = _header_keys(cols["header_key_offsets"], cols["header_key_data"])
        hv = _binary(cols["header_value_offsets"], cols["header_value_data"], cols["header_value_valid"])
        struct_arr = pa.StructArray.from_arrays([hk, hv], fields=list(HEADER_TYPE.value_type))
        lvbuf, lnulls = _validity(counts > 0)
        arrays.append(pa.Array.from_buffers(HEADER_TYPE, n, [lvbuf, pa.py_buffer(hoff)], null_count=lnulls,
                                            children=[struct_arr]))
    if tombstone:
        arrays.append(pa.array(cols["is_tombstone"]))
    if batch_fields is not None:
        pid, epoch, seq, attrs = batch_fields
        bi = cols["batch_index"]
        arrays += [pa.array(pid[bi].astype(np.int64)), pa.array(epoch[bi].astype(np.int16)),
                   pa.array(seq[bi].astype(np.int32)),
                   pa.array((attrs[bi] & W.TRANSACTIONAL_FLAG_MASK) != 0),
                   pa.array((attrs[bi] & W.CONTROL_FLAG_MASK) != 0)]
    return pa.RecordBatch.from_arrays(arrays, schema=schema(include_headers, batch_fields is not None, tombstone))


# ------------------------------------------------------------------------------------ decoding
class _Chunk:
    """Batches gathered for one kernel call (all magic 2, or all legacy)."""

    __slots__ = ("legacy", "rows", "nbytes", "pos", "size", "base", "last", "count", "attrs", "first_ts",
                 "max_ts", "pid", "epoch", "seq", "crc", "magic")

    def __init__(self, legacy):
        self.legacy = legacy
        self.rows = 0
        self.nbytes = 0
        for name in ("pos", "size", "base", "last", "count", "attrs", "first_ts", "max_ts", "pid", "epoch",
                     "seq", "crc", "magic"):
            setattr(self, name, [])

    def row(self, k):
        return (self.pos[k], self.size[k], self.magic[k], self.base[k], self.last[k], self.crc[k], self.attrs[k],
                self.first_ts[k], self.max_ts[k], self.pid[k], self.epoch[k], self.seq[k], self.count[k])

    def add(self, row):
        (pos, size, magic, base, last, crc, attrs, first_ts, max_ts, pid, epoch, seq, count) = row
        self.pos.append(pos)
        self.size.append(size)
        self.magic.append(magic)
        self.base.append(base)
        self.last.append(last)
        self.crc.append(crc)
        self.attrs.append(attrs)
        self.first_ts.append(first_ts)
        self.max_ts.append(max_ts)
        self.pid.append(pid)
        self.epoch.append(epoch)
        self.seq.append(seq)
        self.count.append(count)
        self.rows += max(count, 1)
        self.nbytes += size


def _decode_v2_chunk(buf, ch: _Chunk, include_headers: bool, max_decompressed_bytes: int) -> dict:
    attrs = np.array(ch.attrs, dtype=np.int16)
    pos = np.array(ch.pos, dtype=np.int64)
    size = np.array(ch.size, dtype=np.int64)
    codecs = attrs & W.COMPRESSION_CODEC_MASK
    sections = None
    if codecs.any():
        # build one buffer of decompressed record sections; remember where each came from
        parts, starts, ends, at = [], [], [], 0
        for p, s, a, base in zip(ch.pos, ch.size, ch.attrs, ch.base):
            raw = buf[p + W.RECORDS_OFFSET:p + s]
            codec = check_codec(a & W.COMPRESSION_CODEC_MASK, 2, p + W.ATTRIBUTES_OFFSET)
            if codec != W.Compression.NONE:
                try:
                    raw = decompress(codec, raw, 2, max_decompressed_bytes, p + W.RECORDS_OFFSET)
                except KBatchError as e:
                    raise e.at(base_offset=base)
            parts.append(raw)
            starts.append(at)
            at += len(raw)
            ends.append(at)
        data = b"".join(parts)
        starts = np.array(starts, dtype=np.int64)
        ends = np.array(ends, dtype=np.int64)
        sections = (starts, ends)
    else:
        data = buf
        starts = pos + W.RECORDS_OFFSET
        ends = pos + size
    try:
        return _backend.core.decode_columns_v2(
            data, starts, ends, np.array(ch.count, dtype=np.int32), np.array(ch.base, dtype=np.int64),
            np.array(ch.first_ts, dtype=np.int64), np.array(ch.max_ts, dtype=np.int64), attrs, include_headers)
    except KBatchError as e:
        if sections is not None and e.position is not None:
            i = int(np.searchsorted(sections[1], e.position, side="right"))
            i = min(i, len(ch.pos) - 1)
            e.reason += (f" (at byte {e.position - int(sections[0][i])} of the decompressed records of the batch "
                         f"at byte {ch.pos[i]})")
            e.position = ch.pos[i]
            e.base_offset = None
            e.at(base_offset=ch.base[i])
        raise


def _decode_legacy_chunk(buf, ch: _Chunk, include_headers: bool, max_decompressed_bytes: int, verify_crc) -> dict:
    from .legacy import LegacyRecordBatch

    per_batch = []
    for p, s, m, base, crc, a, ts in zip(ch.pos, ch.size, ch.magic, ch.base, ch.crc, ch.attrs, ch.first_ts):
        lb = LegacyRecordBatch(buf, p, s, m, base, crc, a & 0xFF, ts, max_decompressed_bytes, verify_crc)
        per_batch.append((lb.timestamp_type, lb.records()))
    return _columns_from_records(per_batch, include_headers)


def iter_record_batches(data, topic: str | None = None, partition: int | None = None, *,
                        include_headers: bool = True, batch_fields: bool = False, include_control: bool = False,
                        tombstone: bool = True, verify_crc: bool = True, strict: bool = True,
                        start_offset: int | None = None, end_offset: int | None = None,
                        chunk_rows: int = DEFAULT_CHUNK_ROWS,
                        max_decompressed_bytes: int = W.DEFAULT_MAX_DECOMPRESSED_BYTES):
    """Yield pyarrow.RecordBatch objects of about `chunk_rows` rows (a batch is never split).

    start_offset/end_offset select rows with start_offset <= offset < end_offset; batches wholly
    outside are skipped unread. The generator's return value (StopIteration.value) is the
    position where complete batches end.
    """
    buf = _as_view(data)
    lo = W.INT64_MIN if start_offset is None else start_offset
    hi = W.INT64_MAX if end_offset is None else end_offset
    gen = scan_headers(buf)
    chunk = None
    done = False
    valid = 0

    def decode(ch):
        if ch.legacy:
            cols = _decode_legacy_chunk(buf, ch, include_headers, max_decompressed_bytes, verify_crc)
            n_b = len(ch.pos)
            bf = (np.full(n_b, -1, np.int64), np.full(n_b, -1, np.int16), np.full(n_b, -1, np.int32),
                  np.zeros(n_b, np.int16)) if batch_fields else None
        else:
            cols = _decode_v2_chunk(buf, ch, include_headers, max_decompressed_bytes)
            bf = (np.array(ch.pid, np.int64), np.array(ch.epoch, np.int16), np.array(ch.seq, np.int32),
                  np.array(ch.attrs, np.int16)) if batch_fields else None
        if cols["offset"].size == 0:
            return None
        rb = _assemble(cols, topic, partition, include_headers, bf, tombstone)
        if start_offset is not None or end_offset is not None:
            off = cols["offset"]
            if off.min() < lo or off.max() >= hi:
                rb = rb.filter(pa.array((off >= lo) & (off < hi)))
        return rb

    def flush(ch):
        """Yield the chunk's rows; on a bad batch, first yield the rows of the good batches
        before it (one batch at a time), then raise the bad batch's error."""
        try:
            rb = decode(ch)
        except KBatchError:
            if len(ch.pos) == 1:
                raise
            for k in range(len(ch.pos)):
                one = _Chunk(ch.legacy)
                one.add(ch.row(k))
                rb = decode(one)  # raises at the bad batch
                if rb is not None and rb.num_rows:
                    yield rb
            raise
        if rb is not None and rb.num_rows:
            yield rb

    while not done:
        try:
            s = next(gen)
        except StopIteration as stop:
            valid = stop.value
            break
        except KBatchError:
            if chunk is not None:
                yield from flush(chunk)
            raise
        cols = [s[name].tolist() for name in ("position", "size", "magic", "base_offset", "last_offset", "crc",
                                               "attributes", "first_timestamp", "max_timestamp", "producer_id",
                                               "producer_epoch", "base_sequence", "record_count")]
        crc_ok = s["crc_valid"]
        for i, row in enumerate(zip(*cols)):
            pos, size, magic, base, last = row[:5]
            attrs = row[6]
            if base >= hi and magic == 2:
                done = True
                valid = pos
                break
            if last < lo:
                continue
            if magic == 2 and (attrs & W.CONTROL_FLAG_MASK) and not include_control:
                continue
            if verify_crc:
                try:
                    _check_crc(buf, pos, size, magic, base, row[5], crc_ok, i)
                except KBatchError:
                    if chunk is not None:
                        yield from flush(chunk)
                    raise
            legacy = magic != 2
            if chunk is not None and (chunk.legacy != legacy or chunk.rows >= chunk_rows
                                      or chunk.nbytes + size > _MAX_CHUNK_BYTES):
                yield from flush(chunk)
                chunk = None
            if chunk is None:
                chunk = _Chunk(legacy)
            chunk.add(row)
    if chunk is not None:
        yield from flush(chunk)
    if strict and not done and valid < len(buf):
        raise truncation_error(buf, valid)
    return valid


def _check_crc(buf, pos, size, magic, base, stored, crc_ok, i):
    # scan ran without CRC checks (so skipped batches cost nothing); check the ones we decode
    if magic == 2:
        computed = _backend.core.crc32c(buf[pos + W.ATTRIBUTES_OFFSET:pos + size])
    else:
        import zlib
        computed = zlib.crc32(buf[pos + W.LOG_OVERHEAD + W.LEGACY_MAGIC_OFFSET:pos + size])
    if computed != stored:
        raise CrcMismatchError(stored=stored, computed=computed, position=pos, base_offset=base)


def decode_columns(data, topic: str | None = None, partition: int | None = None, *, include_headers: bool = True,
                   batch_fields: bool = False, include_control: bool = False, verify_crc: bool = True,
                   strict: bool = True, start_offset: int | None = None, end_offset: int | None = None,
                   chunk_rows: int = DEFAULT_CHUNK_ROWS,
                   max_decompressed_bytes: int = W.DEFAULT_MAX_DECOMPRESSED_BYTES) -> pa.Table:
    """Decode every record of `data` into a pyarrow.Table with Spark's Kafka-source columns.

    data: any buffer (bytes, mmap, memoryview, numpy uint8) of batches, magic 0/1/2 mixed.
    topic/partition fill the `topic` and `partition` columns (null when None).
    include_headers: add the `headers` column (null for a record without headers).
    batch_fields: add producerId, producerEpoch, baseSequence, isTransactional, isControl.
    include_control: also return the records of control batches (transaction markers).
    strict: raise TruncatedDataError for a partial last batch (False: ignore it, as Kafka does).
    start_offset/end_offset: keep rows with start_offset <= offset < end_offset.
    The table has one chunk per `chunk_rows` rows (a batch is never split across chunks).
    """
    batches = list(iter_record_batches(
        data, topic, partition, include_headers=include_headers, batch_fields=batch_fields,
        include_control=include_control, verify_crc=verify_crc, strict=strict, start_offset=start_offset,
        end_offset=end_offset, chunk_rows=chunk_rows, max_decompressed_bytes=max_decompressed_bytes))
    return pa.Table.from_batches(batches, schema=schema(include_headers, batch_fields))


def timestamps_ms(column) -> np.ndarray:
    """The `timestamp` column back in int64 milliseconds, with nulls as Long.MIN_VALUE."""
    arr = column.combine_chunks() if isinstance(column, pa.ChunkedArray) else column
    us = pc.fill_null(arr.cast(pa.int64()), W.INT64_MIN).to_numpy(zero_copy_only=False)
    return np.where(us == W.INT64_MIN, W.INT64_MIN, us // 1000)


__all__ = ["decode_columns", "iter_record_batches", "KAFKA_SCHEMA", "HEADER_TYPE", "schema", "spark_ddl",
           "timestamps_ms"]
