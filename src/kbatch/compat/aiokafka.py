"""aiokafka's `aiokafka.record` classes, on kbatch's kernels.

Same names, constructors, attributes, methods, constants and exceptions
(aiokafka.errors.CorruptRecordException, ...) as aiokafka.record. Metadata objects are aiokafka's
live DefaultRecordMetadata. Decoded records are kbatch.compat._speedups.AioDefaultRecord on the
compiled backend (aiokafka's DefaultRecord API, read-only attributes, same repr; not an instance of
aiokafka's class) and aiokafka's live DefaultRecord on the pure backend or for batches its reader
takes over. What kbatch
does here: v2 record decoding (whole batch at once; see kbatch.compat for the fall-back rule),
v2 record encoding in the builder, and the batch CRC-32C. Legacy (magic 0/1) batches and control
record parsing stay aiokafka's own.
"""
# aiokafka ships no type information: its classes are `Any` to a type checker, and these
# subclass them. Arguments are typed as aiokafka's API takes them; the checks that its compiled
# builder makes of other types stay (callers need not be type-checked).
# mypy: disallow-subclassing-any=False
from __future__ import annotations

import operator
import time
from collections.abc import Callable, Iterator
from types import ModuleType
from typing import TYPE_CHECKING, Any, SupportsIndex

import aiokafka.codec as _codecs
import aiokafka.record.control_record as _c
import aiokafka.record.default_records as _d
import aiokafka.record.legacy_records as _l
import aiokafka.record.memory_records as _m
from aiokafka.errors import CorruptRecordException, UnsupportedCodecError

from .. import _backend
from . import STATS, _wrap64, append_v2, decode_v2_tuples, encode_v2_record, speedups, write_v2_header

if TYPE_CHECKING:
    from typing_extensions import Buffer, TypeAlias

    from ._speedups import AioDefaultRecord, AioRecordBatchBuilder

    #: a decoded record: aiokafka's own (pure backend, fall-back) or kbatch's compiled twin of it
    _Record: TypeAlias = "_d.DefaultRecord | AioDefaultRecord"
    _Header: TypeAlias = "tuple[str, bytes | None]"

__all__ = [
    "MemoryRecords", "DefaultRecordBatch", "DefaultRecordBatchBuilder", "DefaultRecord",
    "DefaultRecordMetadata", "LegacyRecordBatch", "LegacyRecordBatchBuilder", "LegacyRecord",
    "LegacyRecordMetadata", "ControlRecord", "ABORT_MARKER", "COMMIT_MARKER",
]

DefaultRecord = _d.DefaultRecord
DefaultRecordMetadata = _d.DefaultRecordMetadata
LegacyRecordBatch = _l.LegacyRecordBatch
LegacyRecordBatchBuilder = _l.LegacyRecordBatchBuilder
LegacyRecord = _l.LegacyRecord
LegacyRecordMetadata = _l.LegacyRecordMetadata
ControlRecord = _c.ControlRecord
ABORT_MARKER = _c.ABORT_MARKER
COMMIT_MARKER = _c.COMMIT_MARKER

_ORIG = {
    "MemoryRecords": _m.MemoryRecords, "DefaultRecordBatch": _d.DefaultRecordBatch,
    "DefaultRecordBatchBuilder": _d.DefaultRecordBatchBuilder,
}
# aiokafka's compiled builder and its pure one differ (argument types, full-batch rule, first
# timestamp, compression): the drop-in follows the live one.
_LIVE_BUILDER_COMPILED = _d.DefaultRecordBatchBuilder is not _d._DefaultRecordBatchBuilderPy


_LIVE_BATCH = _d.DefaultRecordBatch
_LIVE_MR_COMPILED = _m.MemoryRecords is not _m._MemoryRecordsPy
_V2_HEADER: int = _d._DefaultRecordBatchPy.HEADER_STRUCT.size
_I64_MIN, _I64_MAX = -(1 << 63), (1 << 63) - 1



class DefaultRecordBatch(_d._DefaultRecordBatchPy):
    """aiokafka's DefaultRecordBatch; records that kbatch does not take (see kbatch.compat) are read
    by aiokafka's live reader (its Cython one when built), so they and its errors are aiokafka's own.
    (aiokafka's pure reader calls its Cython varint decoder without bounds checks and can crash on
    corrupt bytes, so it is never the fall-back.)"""
    CODEC_MASK = _d.DefaultRecordBase.CODEC_MASK

    def __init__(self, buffer: Buffer, header: Buffer | None = None) -> None:
        if header is None:
            super().__init__(buffer)
        else:  # a v2 slice shorter than its header: aiokafka's compiled reader reads it past the slice
            self._buffer = bytearray(buffer)
            self._header_data = self.HEADER_STRUCT.unpack_from(header)
            self._pos = self.HEADER_STRUCT.size
            self._num_records = self._header_data[12]
            self._next_record_index = 0
            self._decompressed = False
        self._raw = buffer
        self._short = header is not None

    def _client_reader(self, k: int) -> Iterator[_Record]:
        """The client's own reader over this batch, past its first k records (which kbatch has
        returned, read the same way): the rest of the records and any exception are its own."""
        STATS["fallback_batches"] += 1
        it: Iterator[_Record] = iter(_LIVE_BATCH(self._raw))
        for _ in range(k):
            next(it)
        return it

    def __iter__(self) -> Iterator[_Record]:
        if self._short:
            # a slice shorter than its header: aiokafka's compiled reader, over the same bytes,
            # gives its errors (lengths that come out negative, no room for records)
            return self._client_reader(0)
        self._maybe_uncompress()
        if self._next_record_index == 0:
            hd = self._header_data
            self._next_record_index = self._num_records
            pos = self._pos
            self._pos = len(self._buffer)
            sp = speedups()
            if sp is not None:
                records: Iterator[_Record] = sp.V2Records(self._buffer, pos, self._num_records, hd[0], hd[7], hd[8],
                                                          hd[5] & 0x08, 2, None, self.timestamp_type,
                                                          self._client_reader, STATS)
                return records
            recs = decode_v2_tuples(self._buffer, pos, self._num_records, hd[0], hd[7], hd[8], bool(hd[5] & 0x08))
            if recs is not None and any(not (_I64_MIN <= off <= _I64_MAX and _I64_MIN <= ts <= _I64_MAX)
                                        for _n, off, ts, _k, _v, _h in recs):
                recs = None  # base offset + delta or first timestamp + delta past int64: as the compiled path
            if recs is not None:
                STATS["decoded_batches"] += 1
                STATS["decoded_records"] += len(recs)
                tstype = self.timestamp_type
                return iter([DefaultRecord(off, ts, tstype, k, v, h) for _n, off, ts, k, v, h in recs])
            return self._client_reader(0)
        return self

    def _read_msg(self, *args: Any) -> _Record:
        r = super()._read_msg(*args)
        if DefaultRecord is _d._DefaultRecordPy:
            return r
        return DefaultRecord(r.offset, r.timestamp, r.timestamp_type, r.key, r.value, r.headers)

    def validate_crc(self) -> bool:
        assert self._decompressed is False, "Validate should be called before iteration"
        return bool(self.crc == _backend.core.crc32c(memoryview(self._buffer)[self.ATTRIBUTES_OFFSET:]))


def _c_int(v: object, bits: int = 64) -> int:
    """How aiokafka's compiled builder converts a C integer argument of `bits` bits (as
    _speedups._as_i64): an int, or anything whose type has __int__ (floats truncate; __index__
    alone is not enough); OverflowError past the C type."""
    if type(v) is not int:
        to_int = getattr(type(v), "__int__", None)
        if to_int is None:
            raise TypeError("an integer is required")
        v = to_int(v)
        if not isinstance(v, int):
            raise TypeError(f"__int__ returned non-int (type {type(v).__name__})")
    if not -(1 << (bits - 1)) <= v < 1 << (bits - 1):
        raise OverflowError(f"value too large to convert to int{bits}_t")
    return int(v)


def _ssize(v: SupportsIndex) -> int:
    """A Py_ssize_t argument there (batch_size): an int or __index__, not a float."""
    v = operator.index(v)
    if not _I64_MIN <= v <= _I64_MAX:
        raise OverflowError("Python int too large to convert to C ssize_t")
    return v


def _c_buffer(b: Buffer) -> bytes:
    """b's bytes as PyObject_GetBuffer(b, PyBUF_SIMPLE) reads them in aiokafka's compiled builder:
    any C-contiguous buffer (a 2-D memoryview counts all its bytes); TypeError for a non-buffer,
    memoryview's BufferError for a strided one."""
    if type(b) is bytes:
        return b
    m = memoryview(b)
    if not m.c_contiguous:
        raise BufferError("memoryview: underlying buffer is not C-contiguous")
    return m.tobytes()


def _check_list(headers: list[_Header] | None) -> None:
    # a `list` argument in Cython: exactly a list, or None (whose len() then raises TypeError)
    if headers is not None and type(headers) is not list:
        raise TypeError(f"Expected list, got {type(headers).__name__}")


def _c_fields(key: Buffer | None, value: Buffer | None,
              headers: list[_Header]) -> tuple[bytes | None, bytes | None, list[_Header], int]:
    """key, value and headers through aiokafka's compiled builder's checks, in its order:
    (key, value, headers, size) with key/value as bytes or None, and size as its size_of."""
    svl = _backend.core.sizeof_varlong
    _check_list(headers)
    kb = None if key is None else _c_buffer(key)
    vb = None if value is None else _c_buffer(value)
    size = sum(1 if b is None else svl(len(b)) + len(b) for b in (kb, vb)) + svl(len(headers))
    for header in headers:
        # a header is typed there as exactly a tuple of exactly (str, bytes), None allowed
        if header is not None and type(header) is not tuple:
            raise TypeError(f"Expected tuple, got {type(header).__name__}")
        h_key, h_value = header
        for v, t in ((h_key, str), (h_value, bytes)):
            if v is not None and type(v) is not t:
                raise TypeError(f"Expected {t.__name__}, got {type(v).__name__}")
        n = len(h_key.encode("utf-8"))
        size += svl(n) + n + (1 if h_value is None else svl(len(h_value)) + len(h_value))
    return kb, vb, headers, size


_CODECS = {1: ("has_gzip", "gzip", "gzip_encode"), 2: ("has_snappy", "snappy", "snappy_encode"),
           3: ("has_lz4", "lz4", "lz4_encode"), 4: ("has_zstd", "zstd", "zstd_encode")}


def _compress(compression_type: int, data: bytes) -> bytes:
    """aiokafka's compiled builder's codec step: its checks, its messages, its encoders."""
    entry = _CODECS.get(compression_type)
    if entry is None:
        raise UnsupportedCodecError(f"Unknown compression codec {compression_type:#04x}")
    has, name, encode = entry
    if not getattr(_codecs, has)():
        raise UnsupportedCodecError(f"Libraries for {name} compression codec not found")
    compressed: bytes = getattr(_codecs, encode)(data)
    return compressed


def _now_ms() -> int:
    return int(time.time() * 1000)


_FAST_BUILDER: list[type[AioRecordBatchBuilder]] = []


def _fast_builder(sp: ModuleType) -> type[AioRecordBatchBuilder]:
    if not _FAST_BUILDER:
        sp.setup_aiokafka(DefaultRecordMetadata, _compress, _now_ms, STATS)
        _FAST_BUILDER.append(sp.AioRecordBatchBuilder)
    return _FAST_BUILDER[0]


class DefaultRecordBatchBuilder(_d._DefaultRecordBatchBuilderPy):
    """aiokafka's DefaultRecordBatchBuilder. With aiokafka's compiled builder live, constructing it
    gives a builder with that one's API and behaviour: kbatch.compat._speedups.AioRecordBatchBuilder
    on kbatch's compiled backend, _CompiledTwin (its pure twin) on the python one. Otherwise this
    class: aiokafka's pure builder with kbatch's encoder."""

    def __new__(cls, *args: Any, **kwargs: Any) -> Any:  # this class, _CompiledTwin or AioRecordBatchBuilder
        if cls is DefaultRecordBatchBuilder and _LIVE_BUILDER_COMPILED:
            sp = speedups()
            if sp is not None:
                return _fast_builder(sp)(*args, **kwargs)
            return super().__new__(_CompiledTwin)  # a subclass: Python runs its __init__
        return super().__new__(cls)

    @classmethod
    def size_of(cls, key: Buffer | None, value: Buffer | None, headers: list[_Header]) -> int:
        if _LIVE_BUILDER_COMPILED and cls is DefaultRecordBatchBuilder:
            return _compiled_builder().size_of(key, value, headers)
        size: int = super().size_of(key, value, headers)
        return size

    @classmethod
    def estimate_size_in_bytes(cls, key: Buffer | None, value: Buffer | None, headers: list[_Header]) -> int:
        if _LIVE_BUILDER_COMPILED and cls is DefaultRecordBatchBuilder:
            return _compiled_builder().estimate_size_in_bytes(key, value, headers)
        size: int = super().estimate_size_in_bytes(key, value, headers)
        return size

    append = append_v2
    _METADATA = _compiled_metadata = DefaultRecordMetadata

    def _write_header(self, use_compression_type: bool = True) -> None:
        write_v2_header(self, self.NO_PARTITION_LEADER_EPOCH, use_compression_type)

class _CompiledTwin(DefaultRecordBatchBuilder):
    """The pure twin of kbatch.compat._speedups.AioRecordBatchBuilder (aiokafka's compiled builder,
    quirks included), for kbatch's python backend: C-typed arguments (_c_int), key/value/headers as
    _c_fields takes them, a record refused when offset != 0 and it would take the batch to
    batch_size bytes or more, a first timestamp of -1 counting as "no record yet", the timestamp
    delta wrapped to int64 and the last offset delta to int32, the batch always sent compressed
    when a codec is set."""

    def __init__(self, magic: int, compression_type: int, is_transactional: int, producer_id: int,
                 producer_epoch: int, base_sequence: int, batch_size: int) -> None:
        args = (_c_int(magic, 8), _c_int(compression_type, 8), _c_int(is_transactional, 8), _c_int(producer_id),
                _c_int(producer_epoch, 16), _c_int(base_sequence, 32), _ssize(batch_size))
        super().__init__(*args)
        self._first_timestamp = self._max_timestamp = -1

    def set_producer_state(self, producer_id: int, producer_epoch: int, base_sequence: int) -> None:
        super().set_producer_state(_c_int(producer_id), _c_int(producer_epoch, 16), _c_int(base_sequence, 32))

    def _delta(self, ts: int) -> int:
        return 0 if self._first_timestamp == -1 else _wrap64(ts - self._first_timestamp)

    # headers: exactly a list, as aiokafka's compiled builder takes them (its pure one: any sequence)
    def append(self, offset: int, timestamp: int | None, key: Buffer | None, value: Buffer | None,  # type: ignore[override]
               headers: list[_Header]) -> _d.DefaultRecordMetadata | None:
        """Write one record (magic 2); returns DefaultRecordMetadata, or None when the batch is full."""
        offset = _c_int(offset)
        _check_list(headers)  # a typed argument there: checked after offset, before timestamp
        timestamp = _now_ms() if timestamp is None else _c_int(timestamp)
        kb, vb, headers = _c_fields(key, value, headers)[:3]
        rec = encode_v2_record(offset, self._delta(timestamp), kb, vb, headers)
        buf = self._buffer
        if offset != 0 and len(buf) + len(rec) >= self._batch_size:
            return None
        if self._first_timestamp == -1:
            self._first_timestamp = self._max_timestamp = timestamp
        buf += rec
        if self._max_timestamp < timestamp:
            self._max_timestamp = timestamp
        self._num_records += 1
        self._last_offset = (offset + (1 << 31)) % (1 << 32) - (1 << 31)  # an int32 there
        STATS["built_records"] += 1
        return DefaultRecordMetadata(offset, len(rec), timestamp)

    def _maybe_compress(self) -> bool:
        if self._compression_type == self.CODEC_NONE:
            return False
        # the records section as it is now (build() twice compresses it twice, as there)
        buf = self._buffer
        buf[_V2_HEADER:] = _compress(self._compression_type, bytes(buf[_V2_HEADER:]))
        return True

    def size_in_bytes(self, offset: int, timestamp: int, key: Buffer | None, value: Buffer | None,
                      headers: list[_Header]) -> int:
        offset, timestamp = _c_int(offset), _c_int(timestamp)
        svl = _backend.core.sizeof_varlong
        body: int = 1 + svl(offset) + svl(self._delta(timestamp)) + self.size_of(key, value, headers)
        return body + svl(body)

    @classmethod
    def size_of(cls, key: Buffer | None, value: Buffer | None, headers: list[_Header]) -> int:
        return _c_fields(key, value, headers)[3]

    @classmethod
    def estimate_size_in_bytes(cls, key: Buffer | None, value: Buffer | None, headers: list[_Header]) -> int:
        overhead: int = cls.MAX_RECORD_OVERHEAD
        return _V2_HEADER + overhead + cls.size_of(key, value, headers)


def _compiled_builder() -> type[_CompiledTwin] | type[AioRecordBatchBuilder]:
    """The class that mirrors aiokafka's compiled builder on the live kbatch backend."""
    sp = speedups()
    return _CompiledTwin if sp is None else _fast_builder(sp)


class MemoryRecords(_m._MemoryRecordsPy):

    def __init__(self, bytes_data: bytes) -> None:
        if _LIVE_MR_COMPILED and type(bytes_data) is not bytes and bytes_data is not None:
            # aiokafka's compiled reader takes exactly bytes (None is let through there, and read
            # as an object it is not; here it raises TypeError)
            raise TypeError(
                f"Argument 'bytes_data' has incorrect type (expected bytes, got {type(bytes_data).__name__})")
        super().__init__(bytes_data)

    def next_batch(self, _min_slice: int = _m._MemoryRecordsPy.MIN_SLICE,
                   _magic_offset: int = _m._MemoryRecordsPy.MAGIC_OFFSET) -> DefaultRecordBatch | _l.LegacyRecordBatch | None:
        next_slice = self._next_slice
        if next_slice is None:
            return None
        if len(next_slice) < _min_slice:
            raise CorruptRecordException(
                f"Record size is less than the minimum record overhead ({_min_slice - self.LOG_OVERHEAD})")
        start = self._pos - len(next_slice)
        self._cache_next()
        if _LIVE_MR_COMPILED:
            # aiokafka's compiled reader takes the magic of every batch from byte 16 of the whole
            # buffer (the first batch's), not of the batch, as a signed char (so >= 128 is legacy);
            # the batch class, and a legacy batch's magic, follow that byte.
            magic = self._buffer[_magic_offset]
            if magic >= 128:
                magic -= 256
        else:
            magic = next_slice[_magic_offset]
        if magic >= 2:
            if _LIVE_MR_COMPILED and len(next_slice) < _V2_HEADER:
                # aiokafka's compiled reader takes the header from the bytes that follow the slice
                header = self._buffer[start:start + _V2_HEADER]
                if len(header) < _V2_HEADER:  # it would read past the buffer
                    raise CorruptRecordException(
                        f"Record batch of {len(next_slice)} bytes is shorter than its header ({_V2_HEADER})")
                return DefaultRecordBatch(next_slice, header)
            return DefaultRecordBatch(next_slice)
        return LegacyRecordBatch(next_slice, magic)


def import_client_modules() -> None:
    """Import the aiokafka modules that bind the record classes, so install() patches them."""
    import importlib

    for name in ("aiokafka.record", "aiokafka.record.memory_records", "aiokafka.record.default_records",
                 "aiokafka.consumer.fetcher", "aiokafka.producer.message_accumulator",
                 "aiokafka.producer.producer"):
        try:
            importlib.import_module(name)
        except ImportError:
            pass


def replacements() -> list[tuple[type, type]]:
    return [(_ORIG[name], globals()[name]) for name in _ORIG]
