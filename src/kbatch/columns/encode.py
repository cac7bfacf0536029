"""Arrow columns -> Kafka record batches: `encode_columns`, the inverse of `decode_columns`.

    data = kbatch.encode_columns(table, compression=kbatch.Compression.LZ4)
    for chunk in kbatch.iter_encode_columns(reader_or_table):   # whole batches per chunk
        ...

The table has decode_columns' columns (Spark's Kafka-source schema, kbatch.columns.decode); the writer
reads `value` (required), `key`, `timestamp`, `headers`, `isTombstone` and `offset` when present
and ignores every other column (`topic`, `partition`, `timestampType`, batch fields):

    key, value     binary / string (large_ and _view kinds too; null type = every row null)
    timestamp      timestamp[s|ms|us|ns] (any zone) or an integer column of epoch ms; null =
                   "no timestamp"; finer units are floored to ms as Kafka's Java clients do
    headers        list<struct<key: string|binary, value: binary|string>>; null or [] = none
    isTombstone    bool: true sets the KIP-87 tombstone flag (a tombstone may keep its value);
                   null = "the value is null"; false with a null value is refused
    offset         integers: each record's offset (they must increase; gaps are kept). Without
                   it the records take base_offset, base_offset + 1, ...

Records go into magic 2 batches of at most `records_per_batch` records and `max_batch_bytes`
bytes (61-byte header + records, uncompressed; Kafka's max.message.bytes by default), one batch
after the other, the way a producer fills batch after batch: the bytes are exactly what
`BatchBuilder` writes for the same records, batch for batch. The `timestampType` column is not
read: every batch gets `timestamp_type`, as a producer re-sending consumed records (MirrorMaker)
sends their timestamps as CreateTime.

The Cython kernel (`ColumnsEncoderV2`, kbatch._core_py holds its contract) reads the Arrow
buffers directly (no Python object per record), sizes its output exactly, writes each batch
and its CRC in one pass; compressed batches are then compressed one by one with the same
functions BatchBuilder uses (so `compression_level` means the same there and here).
"""
from __future__ import annotations

import struct
from collections.abc import Iterable, Iterator
from typing import TYPE_CHECKING, Any, TypeVar

import numpy as np
import numpy.typing as npt
import pyarrow as pa
import pyarrow.compute as pc

from .. import _backend
from .. import _wire as W
from ..record.compression import check_codec, check_level, compress
from ..errors import InvalidRequestError, KBatchError

if TYPE_CHECKING:
    from .._core import ColumnsEncoderV2
    from .._typing import BinaryColumn as _BinaryColumn
    from .._typing import HeadersColumn as _HeadersColumn
    from .._typing import TableLike
    from .._typing import ValueColumn as _ValueColumn

    #: the kernel's column arguments for one record batch (column_specs)
    ColumnSpecs = tuple[_BinaryColumn | None, _BinaryColumn | None, _ValueColumn | None, int, _ValueColumn | None,
                        _HeadersColumn | None, _ValueColumn | None]

_T = TypeVar("_T")

DEFAULT_CHUNK_BYTES = 16 * 1024 * 1024  # iter_encode_columns: input bytes per kernel call, about
_TS_DIVISORS = {"ms": 1, "us": 1000, "ns": 1000000}
_LENGTH_CRC = struct.Struct(">i")


# ------------------------------------------------------------------------------------ column specs
def _bitmap(arr: pa.Array, buf: pa.Buffer | None) -> npt.NDArray[np.uint8] | None:
    """Arrow's validity bitmap as numpy, or None when the array has no nulls."""
    if buf is None or arr.null_count == 0:
        return None
    return np.frombuffer(buf, np.uint8)


def _np(buf: pa.Buffer | None, dtype: type[np.integer[Any]]) -> npt.NDArray[Any]:
    if buf is None:
        return np.zeros(0, dtype)
    return np.frombuffer(buf, dtype, count=buf.size // np.dtype(dtype).itemsize)


def _is_view(t: pa.DataType) -> bool:
    """binary_view / string_view (pyarrow >= 16; older ones have neither)."""
    return any(getattr(pa.types, f, lambda _t: False)(t) for f in ("is_binary_view", "is_string_view"))


def _binary_spec(arr: pa.Array, name: str) -> _BinaryColumn | None:
    """(offsets, data, validity, origin, length) of a binary-like array; None: every row null."""
    t = arr.type
    if pa.types.is_null(t):
        return None
    if pa.types.is_dictionary(t):
        arr = arr.dictionary_decode()
        t = arr.type
    if _is_view(t) or pa.types.is_fixed_size_binary(t):
        arr = arr.cast(pa.binary())
        t = arr.type
    dtype: type[np.integer[Any]]
    if pa.types.is_binary(t) or pa.types.is_string(t):
        dtype = np.int32
    elif pa.types.is_large_binary(t) or pa.types.is_large_string(t):
        dtype = np.int64
    else:
        raise InvalidRequestError(f"Column {name!r} has an unsupported type", expected="binary or string",
                                  found=str(t))
    validity, offsets, data = arr.buffers()[:3]
    return _np(offsets, dtype), _np(data, np.uint8), _bitmap(arr, validity), arr.offset, len(arr)


def _timestamp_spec(arr: pa.Array) -> tuple[_ValueColumn | None, int]:
    """((values, validity, origin), divisor) of the timestamp column; (None, 1): every row null."""
    t = arr.type
    if pa.types.is_null(t):
        return None, 1
    div = 1
    if pa.types.is_timestamp(t):
        if t.unit == "s":
            arr = pc.multiply_checked(arr.cast(pa.int64()), 1000)
        else:
            div = _TS_DIVISORS[t.unit]
            arr = arr.cast(pa.int64())
    elif pa.types.is_date64(t):
        arr = arr.cast(pa.int64())
    elif pa.types.is_date32(t):
        arr = pc.multiply_checked(arr.cast(pa.int64()), 86_400_000)
    elif pa.types.is_integer(t):
        arr = arr.cast(pa.int64())  # checked: an unsigned value past Long.MAX_VALUE raises
    else:
        raise InvalidRequestError("Column 'timestamp' has an unsupported type",
                                  expected="timestamp, date or integer epoch ms", found=str(t))
    validity, values = arr.buffers()[:2]
    return (_np(values, np.int64), _bitmap(arr, validity), arr.offset), div


def _bool_spec(arr: pa.Array, name: str) -> _ValueColumn | None:
    t = arr.type
    if pa.types.is_null(t):
        return None
    if not pa.types.is_boolean(t):
        raise InvalidRequestError(f"Column {name!r} has an unsupported type", expected="bool", found=str(t))
    validity, values = arr.buffers()[:2]
    return _np(values, np.uint8), _bitmap(arr, validity), arr.offset


def _offset_spec(arr: pa.Array) -> _ValueColumn:
    t = arr.type
    if pa.types.is_null(t):
        raise InvalidRequestError("Column 'offset' is all null", expected="integer offsets", found="null type")
    if not pa.types.is_integer(t):
        raise InvalidRequestError("Column 'offset' has an unsupported type", expected="integers", found=str(t))
    arr = arr.cast(pa.int64())
    validity, values = arr.buffers()[:2]
    return _np(values, np.int64), _bitmap(arr, validity), arr.offset


def _headers_spec(arr: pa.Array) -> _HeadersColumn | None:
    """(list offsets, validity, origin, struct validity, struct origin, struct length, key spec,
    value spec); None: no row has headers."""
    t = arr.type
    if pa.types.is_null(t):
        return None
    dtype: type[np.integer[Any]] | None = None
    if pa.types.is_list(t):
        dtype = np.int32
    elif pa.types.is_large_list(t):
        dtype = np.int64
    st = t.value_type if dtype is not None else None
    if (dtype is None or st is None or not pa.types.is_struct(st) or st.get_field_index("key") < 0
            or st.get_field_index("value") < 0):
        raise InvalidRequestError("Column 'headers' has an unsupported type",
                                  expected="list<struct<key: string, value: binary>>", found=str(t))
    validity, offsets = arr.buffers()[:2]
    values = arr.values  # the struct array the list offsets index (its own offset applies)
    keys, vals = values.field("key"), values.field("value")  # children, the struct's offset applied
    if pa.types.is_null(keys.type):
        keys = keys.cast(pa.binary())
    if pa.types.is_null(vals.type):
        vals = vals.cast(pa.binary())
    return (_np(offsets, dtype), _bitmap(arr, validity), arr.offset, _bitmap(values, values.buffers()[0]),
            values.offset, len(values), _binary_spec(keys, "headers.key"), _binary_spec(vals, "headers.value"))


def _column(rb: pa.RecordBatch, name: str) -> pa.Array | None:
    i = rb.schema.get_field_index(name)
    if i < 0:
        if name in rb.schema.names:
            raise InvalidRequestError(f"Column {name!r} appears more than once", expected="one", found="several")
        return None
    return rb.column(i)


def column_specs(rb: pa.RecordBatch) -> ColumnSpecs:
    """The kernel's column arguments for one record batch: (key, value, timestamp, divisor,
    isTombstone, headers, offset)."""
    value = _column(rb, "value")
    if value is None:
        raise InvalidRequestError("No 'value' column", expected="a 'value' column (binary or string)",
                                  found=", ".join(rb.schema.names) or "no columns")
    key, ts, tomb, hdrs, off = (_column(rb, n) for n in ("key", "timestamp", "isTombstone", "headers", "offset"))
    ts_spec, div = (None, 1) if ts is None else _timestamp_spec(ts)
    return (None if key is None else _binary_spec(key, "key"), _binary_spec(value, "value"), ts_spec, div,
            None if tomb is None else _bool_spec(tomb, "isTombstone"),
            None if hdrs is None else _headers_spec(hdrs), None if off is None else _offset_spec(off))


def _record_batches(data: TableLike, chunk_bytes: int | None) -> Iterator[pa.RecordBatch]:
    """pa.RecordBatch pieces of `data` (a Table, RecordBatch, RecordBatchReader or an iterable of
    record batches / tables), sliced to about chunk_bytes of input each (None: as they come)."""
    pieces: Iterable[pa.RecordBatch | pa.Table]
    if isinstance(data, pa.RecordBatch):
        pieces = (data,)
    elif isinstance(data, pa.Table):
        pieces = data.to_batches()  # aligned column chunks, zero-copy
    elif isinstance(data, pa.RecordBatchReader):
        pieces = data
    else:
        try:
            pieces = iter(data)
        except TypeError:
            raise InvalidRequestError("Cannot encode this object", expected="a pyarrow Table, RecordBatch or "
                                      "RecordBatchReader", found=type(data).__name__) from None
    for rb in pieces:
        if isinstance(rb, pa.Table):
            yield from _record_batches(rb, chunk_bytes)
            continue
        if not isinstance(rb, pa.RecordBatch):
            raise InvalidRequestError("Cannot encode this object", expected="pyarrow RecordBatch objects",
                                      found=type(rb).__name__)
        n = rb.num_rows
        if chunk_bytes is None or n < 2:
            yield rb
            continue
        size = rb.nbytes
        step = max(1, int(n * chunk_bytes // max(size, 1)))
        for start in range(0, n, step):
            yield rb.slice(start, step) if step < n else rb


# ------------------------------------------------------------------------------------ encoding
def _attributes(codec: W.Compression, timestamp_type: W.TimestampType, is_transactional: bool,
                timestamp_extended: bool) -> int:
    a = int(codec)
    if timestamp_type == W.TimestampType.LOG_APPEND_TIME:
        a |= W.TIMESTAMP_TYPE_MASK
    elif timestamp_type != W.TimestampType.CREATE_TIME:
        raise ValueError("magic 2 batches need CREATE_TIME or LOG_APPEND_TIME")
    if is_transactional:
        a |= W.TRANSACTIONAL_FLAG_MASK
    if timestamp_extended:
        a |= W.TIMESTAMP_EXTENDED_FLAG_MASK
    return a


def _encoder(compression: W.Compression, records_per_batch: int | None, max_batch_bytes: int, base_offset: int,
             timestamp_type: W.TimestampType, log_append_time: int | None, timestamp_extended: bool, producer_id: int,
             producer_epoch: int, base_sequence: int, is_transactional: bool,
             partition_leader_epoch: int) -> tuple[ColumnsEncoderV2, W.Compression]:
    """The backend's ColumnsEncoderV2 for encode_columns' options, and the codec."""
    codec = check_codec(int(compression), 2)
    lat = timestamp_type == W.TimestampType.LOG_APPEND_TIME
    if lat and log_append_time is None:
        raise ValueError("a LOG_APPEND_TIME batch needs log_append_time")
    enc = _backend.core.ColumnsEncoderV2(
        base_offset, _attributes(codec, timestamp_type, is_transactional, timestamp_extended),
        W.INT32_MAX if records_per_batch is None else records_per_batch, max_batch_bytes, producer_id,
        producer_epoch, base_sequence, partition_leader_epoch, log_append_time if lat else None)
    return enc, codec


def _compressed(data: bytes, ends: npt.NDArray[np.int64], codec: W.Compression,
                level: int | None) -> tuple[bytes, npt.NDArray[np.int64]]:
    """Compress each batch's records section and set its batchLength and CRC (the kernel left the
    section plain with every other header field filled in) -> (bytes, the batches' new ends)."""
    crc32c = _backend.core.crc32c
    parts: list[bytes | bytearray] = []
    new_ends = []
    start = at = 0
    mv = memoryview(data)
    for end in ends.tolist():
        header = bytearray(mv[start:start + W.RECORDS_OFFSET])
        body = compress(codec, mv[start + W.RECORDS_OFFSET:end], 2, level)
        _LENGTH_CRC.pack_into(header, W.LENGTH_OFFSET, W.RECORD_BATCH_OVERHEAD - W.LOG_OVERHEAD + len(body))
        struct.pack_into(">I", header, W.CRC_OFFSET, crc32c(body, crc32c(header[W.ATTRIBUTES_OFFSET:])))
        parts.append(header)
        parts.append(body)
        at += len(header) + len(body)
        new_ends.append(at)
        start = end
    return b"".join(parts), np.array(new_ends, dtype=np.int64)


def _encoded(enc: ColumnsEncoderV2, codec: W.Compression, level: int | None, pieces: Iterable[pa.RecordBatch],
             final_last: bool = False) -> Iterator[tuple[bytes, npt.NDArray[np.int64]]]:
    """(bytes, batch ends) of the batches the record batches `pieces` close, then of the last."""
    it = iter(pieces)
    rb = next(it, None)
    while rb is not None:
        nxt = next(it, None) if final_last else None
        key, value, ts, div, tomb, hdrs, off = column_specs(rb)
        out, ends = enc.encode(rb.num_rows, key, value, ts, div, tomb, hdrs, off, final_last and nxt is None)
        if len(ends):
            yield (out, ends) if codec == W.Compression.NONE else _compressed(out, ends, codec, level)
        rb = nxt if final_last else next(it, None)
    out, ends = enc.flush()  # nothing is left open after a final call
    if len(ends):
        yield (out, ends) if codec == W.Compression.NONE else _compressed(out, ends, codec, level)


def iter_encode_columns(data: TableLike, *, compression: W.Compression = W.Compression.NONE,
                        compression_level: int | None = None, records_per_batch: int | None = None,
                        max_batch_bytes: int = W.DEFAULT_MAX_MESSAGE_BYTES, base_offset: int = 0,
                        timestamp_type: W.TimestampType = W.TimestampType.CREATE_TIME,
                        log_append_time: int | None = None, timestamp_extended: bool = True,
                        producer_id: int = W.NO_PRODUCER_ID, producer_epoch: int = W.NO_PRODUCER_EPOCH,
                        base_sequence: int = W.NO_SEQUENCE, is_transactional: bool = False,
                        partition_leader_epoch: int = W.NO_PARTITION_LEADER_EPOCH,
                        chunk_bytes: int | None = DEFAULT_CHUNK_BYTES) -> Iterator[bytes]:
    """Yield bytes objects of whole magic 2 batches holding every row of `data`, in order.

    data: a pyarrow Table, RecordBatch, RecordBatchReader, or an iterable of record batches or
    tables (read once, piece by piece: memory stays bounded by chunk_bytes). The options are
    encode_columns'. chunk_bytes: input bytes per kernel call, about (None: each record batch
    whole); batches do not stop at chunk or record-batch boundaries.
    """
    enc, codec = _encoder(compression, records_per_batch, max_batch_bytes, base_offset, timestamp_type,
                          log_append_time, timestamp_extended, producer_id, producer_epoch, base_sequence,
                          is_transactional, partition_leader_epoch)
    level = check_level(codec, compression_level)
    for out, _ends in _encoded(enc, codec, level, _record_batches(data, chunk_bytes)):
        yield out


def encode_columns(data: TableLike, *, compression: W.Compression = W.Compression.NONE,
                   compression_level: int | None = None, records_per_batch: int | None = None,
                   max_batch_bytes: int = W.DEFAULT_MAX_MESSAGE_BYTES, base_offset: int = 0,
                   timestamp_type: W.TimestampType = W.TimestampType.CREATE_TIME,
                   log_append_time: int | None = None, timestamp_extended: bool = True,
                   producer_id: int = W.NO_PRODUCER_ID, producer_epoch: int = W.NO_PRODUCER_EPOCH,
                   base_sequence: int = W.NO_SEQUENCE, is_transactional: bool = False,
                   partition_leader_epoch: int = W.NO_PARTITION_LEADER_EPOCH) -> bytes:
    """Encode every row of a pyarrow Table / RecordBatch (decode_columns' columns) into magic 2
    record batches; the inverse of decode_columns.

    compression / compression_level: the batches' codec, and its level as BatchBuilder takes it
      (Kafka's scale for the codec; None: Kafka's default, as the producer's compression.*.level).
    records_per_batch (None: no limit) / max_batch_bytes: a batch closes before the record that
      would make it hold more records, or more bytes (header + uncompressed records), than
      these; a record that cannot fit alone raises RecordTooLargeError.
    base_offset: the first record's offset when there is no `offset` column.
    timestamp_type / log_append_time / timestamp_extended / producer_id / producer_epoch /
      is_transactional / partition_leader_epoch: as BatchBuilder's, for every batch.
    base_sequence: the first batch's; each next batch continues from the records before it
      (wrapping past Int32.MAX to 0), as Kafka's idempotent producer numbers them.
    Returns the batches' bytes (b"" for no rows). Bad rows raise a kbatch error naming the row.
    """
    enc, codec = _encoder(compression, records_per_batch, max_batch_bytes, base_offset, timestamp_type,
                          log_append_time, timestamp_extended, producer_id, producer_epoch, base_sequence,
                          is_transactional, partition_leader_epoch)
    level = check_level(codec, compression_level)
    # the last record batch closes the last batch in the same call: one table in, one bytes out
    parts = [out for out, _ends in _encoded(enc, codec, level, _record_batches(data, None), True)]
    return parts[0] if len(parts) == 1 else b"".join(parts)


# ------------------------------------------------------------------------------------ for Log.append_table
APPEND_PIECE_BYTES = 1024 * 1024  # batch bytes per Log.append call, at most (and <= segment.bytes), one batch at least


def _without_offsets(pieces: Iterable[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    for rb in pieces:
        i = rb.schema.get_field_index("offset")
        yield rb if i < 0 else rb.remove_column(i)


def encode_for_append(data: TableLike, *, compression: W.Compression, compression_level: int | None,
                      max_batch_bytes: int, timestamp_extended: bool, segment_bytes: int,
                      records_per_batch: int | None = None) -> Iterator[tuple[memoryview, bool]]:
    """The encoding half of Log.append_table: `data` (a Table, RecordBatch, RecordBatchReader or an
    iterable of record batches) as magic 2 batches for a log with these settings, in runs of whole
    batches of at most min(segment_bytes, 1 MiB) (a produce request's size, one batch at least),
    each with whether another run follows. An `offset` column is not read (the log assigns
    offsets); the codec and level are checked before anything is encoded."""
    enc, codec = _encoder(compression, records_per_batch, min(max_batch_bytes, segment_bytes), 0,
                          W.TimestampType.CREATE_TIME, None, timestamp_extended, W.NO_PRODUCER_ID,
                          W.NO_PRODUCER_EPOCH, W.NO_SEQUENCE, False, W.NO_PARTITION_LEADER_EPOCH)
    level = check_level(codec, compression_level)
    limit = max(1, min(segment_bytes, APPEND_PIECE_BYTES))
    encoded = _encoded(enc, codec, level, _without_offsets(_record_batches(data, DEFAULT_CHUNK_BYTES)))
    return with_more(_pieces(encoded, limit))


def _pieces(encoded: Iterable[tuple[bytes, npt.NDArray[np.int64]]], limit: int) -> Iterator[memoryview]:
    """Runs of whole batches of at most `limit` bytes (one batch at least) from (bytes, ends) chunks."""
    for out, ends in encoded:
        mv, start, k = memoryview(out), 0, 0
        while k < len(ends):
            j = max(k + 1, int(np.searchsorted(ends, start + limit, side="right")))
            end = int(ends[j - 1])
            yield mv[start:end]
            start, k = end, j


def with_more(items: Iterable[_T]) -> Iterator[tuple[_T, bool]]:
    """(item, whether another follows), reading one item ahead."""
    it = iter(items)
    prev = next(it, None)
    while prev is not None:
        nxt = next(it, None)
        yield prev, nxt is not None
        prev = nxt


__all__ = ["encode_columns", "iter_encode_columns", "encode_for_append", "with_more", "column_specs",
           "DEFAULT_CHUNK_BYTES", "APPEND_PIECE_BYTES"]
