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
from __future__ import annotations

import struct
import time

import aiokafka.codec as _codecs
import aiokafka.record.control_record as _c
import aiokafka.record.default_records as _d
import aiokafka.record.legacy_records as _l
import aiokafka.record.memory_records as _m
from aiokafka.errors import CorruptRecordException, UnsupportedCodecError

from .. import _backend
from . import STATS, decode_v2_tuples, encode_v2_record, speedups

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
_CRC_STRUCT = struct.Struct(">I")
# aiokafka's Cython builder refuses a record that would make the batch exactly batch_size bytes;
# its pure builder accepts it. Follow the live one.
_FULL_AT = 1 if _d.DefaultRecordBatchBuilder is not _d._DefaultRecordBatchBuilderPy else 0
_BYTES_LIKE = (bytes, bytearray, memoryview)


_LIVE_BATCH = _d.DefaultRecordBatch
_LIVE_MR_COMPILED = _m.MemoryRecords is not _m._MemoryRecordsPy
_V2_HEADER = _d._DefaultRecordBatchPy.HEADER_STRUCT.size
_I64_MIN, _I64_MAX = -(1 << 63), (1 << 63) - 1



class DefaultRecordBatch(_d._DefaultRecordBatchPy):
    """aiokafka's DefaultRecordBatch; records that kbatch does not take (see kbatch.compat) are read
    by aiokafka's live reader (its Cython one when built), so they and its errors are aiokafka's own.
    (aiokafka's pure reader calls its Cython varint decoder without bounds checks and can crash on
    corrupt bytes, so it is never the fall-back.)"""
    CODEC_MASK = _d.DefaultRecordBase.CODEC_MASK

    def __init__(self, buffer, header=None):
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

    def _client_reader(self, k):
        """The client's own reader over this batch, past its first k records (which kbatch has
        returned, read the same way): the rest of the records and any exception are its own."""
        STATS["fallback_batches"] += 1
        it = iter(_LIVE_BATCH(self._raw))
        for _ in range(k):
            next(it)
        return it

    def __iter__(self):
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
                return sp.V2Records(self._buffer, pos, self._num_records, hd[0], hd[7], hd[8], hd[5] & 0x08, 2,
                                    None, self.timestamp_type, self._client_reader, STATS)
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

    def _read_msg(self, *args):
        r = super()._read_msg(*args)
        if DefaultRecord is _d._DefaultRecordPy:
            return r
        return DefaultRecord(r.offset, r.timestamp, r.timestamp_type, r.key, r.value, r.headers)

    def validate_crc(self) -> bool:
        assert self._decompressed is False, "Validate should be called before iteration"
        return self.crc == _backend.core.crc32c(memoryview(self._buffer)[self.ATTRIBUTES_OFFSET:])


def _c_int(v):
    """How aiokafka's Cython builder takes an int64 argument: ints and floats (truncated)."""
    if isinstance(v, (int, float)):
        return int(v)
    raise TypeError("an integer is required")


_CODECS = {1: ("has_gzip", "gzip", "gzip_encode"), 2: ("has_snappy", "snappy", "snappy_encode"),
           3: ("has_lz4", "lz4", "lz4_encode"), 4: ("has_zstd", "zstd", "zstd_encode")}


def _compress(compression_type, data):
    """aiokafka's compiled builder's codec step: its checks, its messages, its encoders."""
    entry = _CODECS.get(compression_type)
    if entry is None:
        raise UnsupportedCodecError(f"Unknown compression codec {compression_type:#04x}")
    has, name, encode = entry
    if not getattr(_codecs, has)():
        raise UnsupportedCodecError(f"Libraries for {name} compression codec not found")
    return getattr(_codecs, encode)(data)


def _now_ms():
    return int(time.time() * 1000)


_FAST_BUILDER = []


def _fast_builder(sp):
    if not _FAST_BUILDER:
        sp.setup_aiokafka(DefaultRecordMetadata, _compress, _now_ms, STATS)
        _FAST_BUILDER.append(sp.AioRecordBatchBuilder)
    return _FAST_BUILDER[0]


class DefaultRecordBatchBuilder(_d._DefaultRecordBatchBuilderPy):
    """aiokafka's DefaultRecordBatchBuilder. With kbatch's compiled backend and aiokafka's compiled
    builder live, constructing it gives kbatch.compat._speedups.AioRecordBatchBuilder, a compiled
    builder with the same API and behaviour; otherwise this class (aiokafka's pure builder with
    kbatch's encoder)."""

    def __new__(cls, *args, **kwargs):
        if cls is DefaultRecordBatchBuilder and _FULL_AT:
            sp = speedups()
            if sp is not None:
                return _fast_builder(sp)(*args, **kwargs)
        return super().__new__(cls)

    @classmethod
    def size_of(cls, key, value, headers):
        sp = speedups() if _FULL_AT else None
        if sp is not None:
            return _fast_builder(sp).size_of(key, value, headers)
        return super().size_of(key, value, headers)

    @classmethod
    def estimate_size_in_bytes(cls, key, value, headers):
        sp = speedups() if _FULL_AT else None
        if sp is not None:
            return _fast_builder(sp).estimate_size_in_bytes(key, value, headers)
        return super().estimate_size_in_bytes(key, value, headers)

    def append(self, offset, timestamp, key, value, headers):
        """Write one record (magic 2); returns DefaultRecordMetadata, or None when the batch is full."""
        if _FULL_AT:  # the live builder is aiokafka's Cython one: take its argument conversions
            if type(offset) is not int:
                offset = _c_int(offset)
            if timestamp is not None and type(timestamp) is not int:
                timestamp = _c_int(timestamp)
        if type(offset) is not int:
            raise TypeError(offset)
        if timestamp is None:
            timestamp = int(time.time() * 1000)
        elif type(timestamp) is not int:
            raise TypeError(timestamp)
        if not (key is None or type(key) in _BYTES_LIKE):
            raise TypeError(f"Not supported type for key: {type(key)}")
        if not (value is None or type(value) in _BYTES_LIKE):
            raise TypeError(f"Not supported type for value: {type(value)}")
        first = self._first_timestamp is None
        if first:
            self._first_timestamp = timestamp
            self._max_timestamp = timestamp
        sp = speedups()
        if sp is not None:
            size = sp.append_v2(self._buffer, offset, timestamp - self._first_timestamp, key, value, headers,
                                self._batch_size - _FULL_AT, first)
            if size < 0:
                return None
        else:
            rec = encode_v2_record(offset, timestamp - self._first_timestamp, key, value, headers)
            size = len(rec)
            buf = self._buffer
            if size + len(buf) > self._batch_size - _FULL_AT and not first:
                return None
            buf += rec
        if self._max_timestamp < timestamp:
            self._max_timestamp = timestamp
        self._num_records += 1
        self._last_offset = offset
        STATS["built_records"] += 1
        return DefaultRecordMetadata(offset, size, timestamp)

    def _write_header(self, use_compression_type: bool = True) -> None:
        buf = self._buffer
        self.HEADER_STRUCT.pack_into(
            buf, 0, 0, len(buf) - self.AFTER_LEN_OFFSET, self.NO_PARTITION_LEADER_EPOCH, self._magic, 0,
            self._get_attributes(use_compression_type), self._last_offset, self._first_timestamp or 0,
            self._max_timestamp or 0, self._producer_id, self._producer_epoch, self._base_sequence,
            self._num_records)
        crc = _backend.core.crc32c(memoryview(buf)[self.ATTRIBUTES_OFFSET:])
        _CRC_STRUCT.pack_into(buf, self.CRC_OFFSET, crc)
        STATS["built_batches"] += 1


class MemoryRecords(_m._MemoryRecordsPy):

    def __init__(self, bytes_data):
        if _LIVE_MR_COMPILED and type(bytes_data) is not bytes and bytes_data is not None:
            # aiokafka's compiled reader takes exactly bytes (None is let through there, and read
            # as an object it is not; here it raises TypeError)
            raise TypeError(
                f"Argument 'bytes_data' has incorrect type (expected bytes, got {type(bytes_data).__name__})")
        super().__init__(bytes_data)

    def next_batch(self, _min_slice=_m._MemoryRecordsPy.MIN_SLICE, _magic_offset=_m._MemoryRecordsPy.MAGIC_OFFSET):
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


def import_client_modules():
    """Import the aiokafka modules that bind the record classes, so install() patches them."""
    import importlib

    for name in ("aiokafka.record", "aiokafka.record.memory_records", "aiokafka.record.default_records",
                 "aiokafka.consumer.fetcher", "aiokafka.producer.message_accumulator",
                 "aiokafka.producer.producer"):
        try:
            importlib.import_module(name)
        except ImportError:
            pass


def replacements():
    return [(_ORIG[name], globals()[name]) for name in _ORIG]
