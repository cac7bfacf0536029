"""aiokafka's `aiokafka.record` classes, on kbatch's kernels.

Same names, constructors, attributes, methods, constants and exceptions
(aiokafka.errors.CorruptRecordException, ...) as aiokafka.record. Records and metadata are
aiokafka's live classes (its Cython ones when built), so consumers see the same types. What kbatch
does here: v2 record decoding (whole batch at once; see kbatch.compat for the fall-back rule),
v2 record encoding in the builder, and the batch CRC-32C. Legacy (magic 0/1) batches and control
record parsing stay aiokafka's own.
"""
from __future__ import annotations

import struct
import time

import aiokafka.record.control_record as _c
import aiokafka.record.default_records as _d
import aiokafka.record.legacy_records as _l
import aiokafka.record.memory_records as _m
from aiokafka.errors import CorruptRecordException

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


class DefaultRecordBatch(_d._DefaultRecordBatchPy):
    """aiokafka's DefaultRecordBatch; records that kbatch does not take (see kbatch.compat) are read
    by aiokafka's live reader (its Cython one when built), so they and its errors are aiokafka's own.
    (aiokafka's pure reader calls its Cython varint decoder without bounds checks and can crash on
    corrupt bytes, so it is never the fall-back.)"""
    CODEC_MASK = _d.DefaultRecordBase.CODEC_MASK

    def __init__(self, buffer):
        super().__init__(buffer)
        self._raw = buffer

    def _fallback(self):
        STATS["fallback_batches"] += 1
        if _LIVE_BATCH is _d._DefaultRecordBatchPy:
            return self
        self._next_record_index = self._num_records
        self._pos = len(self._buffer)
        return iter(_LIVE_BATCH(self._raw))

    def __iter__(self):
        self._maybe_uncompress()
        if self._next_record_index == 0:
            hd = self._header_data
            sp = speedups()
            if sp is not None:
                recs = sp.decode_v2(self._buffer, self._pos, self._num_records, hd[0], hd[7], hd[8],
                                    hd[5] & 0x08, 1, None, self.timestamp_type)
                if recs is not None:
                    STATS["decoded_batches"] += 1
                    STATS["decoded_records"] += len(recs)
                    self._next_record_index = self._num_records
                    self._pos = len(self._buffer)
                    return iter(recs)
                return self._fallback()
            recs = decode_v2_tuples(self._buffer, self._pos, self._num_records, hd[0], hd[7], hd[8],
                                    bool(hd[5] & 0x08))
            if recs is not None:
                STATS["decoded_batches"] += 1
                STATS["decoded_records"] += len(recs)
                self._next_record_index = self._num_records
                self._pos = len(self._buffer)
                tstype = self.timestamp_type
                return iter([DefaultRecord(off, ts, tstype, k, v, h) for _n, off, ts, k, v, h in recs])
            return self._fallback()
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


class DefaultRecordBatchBuilder(_d._DefaultRecordBatchBuilderPy):

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
            meta = sp.AioDefaultRecordMetadata
        else:
            rec = encode_v2_record(offset, timestamp - self._first_timestamp, key, value, headers)
            size = len(rec)
            buf = self._buffer
            if size + len(buf) > self._batch_size - _FULL_AT and not first:
                return None
            buf += rec
            meta = DefaultRecordMetadata
        if self._max_timestamp < timestamp:
            self._max_timestamp = timestamp
        self._num_records += 1
        self._last_offset = offset
        STATS["built_records"] += 1
        return meta(offset, size, timestamp)

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

    def next_batch(self, _min_slice=_m._MemoryRecordsPy.MIN_SLICE, _magic_offset=_m._MemoryRecordsPy.MAGIC_OFFSET):
        next_slice = self._next_slice
        if next_slice is None:
            return None
        if len(next_slice) < _min_slice:
            raise CorruptRecordException(
                f"Record size is less than the minimum record overhead ({_min_slice - self.LOG_OVERHEAD})")
        self._cache_next()
        magic = next_slice[_magic_offset]
        if magic >= 2:
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
