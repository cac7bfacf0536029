"""kafka-python's `kafka.record` classes, on kbatch's kernels.

Same names, constructors, attributes, methods, constants and exceptions (kafka.errors.*) as
kafka.record; metadata objects are kafka-python's own classes and decoded records a subclass of its
DefaultRecord (named DefaultRecord) whose plain slot-returning properties are slot members, so
isinstance checks, methods and reprs are unchanged and a consumer's attribute reads are slot loads. What kbatch does here: v2 record decoding (whole batch at once, see
kbatch.compat for the fall-back rule), v2 record encoding in the builder, and the batch CRC-32C.
Legacy (magic 0/1) batches keep kafka-python's own implementation.
"""
# kafka-python ships no type information: its classes are `Any` to a type checker, and these
# subclass them (the records and metadata are kafka-python's own objects, typed as its classes).
# mypy: disallow-subclassing-any=False
from __future__ import annotations

from collections.abc import Callable, Iterator
from types import ModuleType
from typing import Any

import kafka.record.default_records as _d
import kafka.record.legacy_records as _l
import kafka.record.memory_records as _m
from kafka.errors import CorruptRecordError, IllegalStateError, UnsupportedVersionError  # noqa: F401

from .. import _backend
from . import STATS, append_v2, decode_v2_tuples, speedups, write_v2_header

__all__ = [
    "MemoryRecords", "MemoryRecordsBuilder", "DefaultRecordBatch", "DefaultRecordBatchBuilder",
    "DefaultRecord", "ControlRecord", "DefaultRecordMetadata", "LegacyRecordBatch",
    "LegacyRecordBatchBuilder", "LegacyRecord", "LegacyRecordMetadata",
]

# record / metadata objects: kafka-python's own classes
DefaultRecord = _d.DefaultRecord
ControlRecord = _d.ControlRecord
DefaultRecordMetadata = _d.DefaultRecordMetadata
LegacyRecordBatch = _l.LegacyRecordBatch
LegacyRecordBatchBuilder = _l.LegacyRecordBatchBuilder
LegacyRecord = _l.LegacyRecord
LegacyRecordMetadata = _l.LegacyRecordMetadata

_ORIG = {
    "MemoryRecords": _m.MemoryRecords, "MemoryRecordsBuilder": _m.MemoryRecordsBuilder,
    "DefaultRecordBatch": _d.DefaultRecordBatch, "DefaultRecordBatchBuilder": _d.DefaultRecordBatchBuilder,
}


_FACTORIES: list[tuple[Any, Any]] = []  # (record SlotFactory, metadata SlotFactory), made once
# `__slots__ = _NO_SLOTS` (a name, not a literal): the subclasses add no slot, and mypy, which
# cannot see the untyped base classes' slots, would take a literal () for all the slots there are
_NO_SLOTS: tuple[str, ...] = ()
_RECORD_PROPERTIES = {"size_in_bytes": "_size_in_bytes", "offset": "_offset", "timestamp": "_timestamp",
                      "timestamp_type": "_timestamp_type", "key": "_key", "value": "_value", "headers": "_headers"}


class _SlotReadDefaultRecord(_d.DefaultRecord):
    """kafka-python's DefaultRecord (a subclass: isinstance, methods and repr unchanged) whose
    read-only properties, each of which returns one slot, are read-only slot members
    (_speedups.slot_read_properties): reading `record.offset` in a consumer loop is then a slot
    load for CPython's specialising interpreter, not a Python-level property call."""
    __slots__ = ()


_SlotReadDefaultRecord.__name__ = _SlotReadDefaultRecord.__qualname__ = "DefaultRecord"


def _factories(sp: ModuleType) -> tuple[Any, Any]:
    """(record factory, metadata factory) that build kafka-python's objects without __init__."""
    if not _FACTORIES:
        # only properties that are exactly `return self.<slot>` in the installed kafka-python
        props = {p: s for p, s in _RECORD_PROPERTIES.items() if _returns_slot(getattr(DefaultRecord, p), s)}
        sp.slot_read_properties(_SlotReadDefaultRecord, props)
        _FACTORIES.append((
            sp.SlotFactory(_SlotReadDefaultRecord, ("_size_in_bytes", "_offset", "_timestamp", "_timestamp_type",
                                                    "_key", "_value", "_headers")),
            sp.SlotFactory(DefaultRecordMetadata, ("_offset", "_size", "_timestamp"))))
    return _FACTORIES[0]


def _returns_slot(prop: object, slot: str) -> bool:
    """True when `prop` is a property whose getter is `def f(self): return self.<slot>`."""
    if type(prop) is not property or prop.fset is not None or prop.fdel is not None:
        return False
    code = getattr(prop.fget, "__code__", None)
    return (code is not None and code.co_code == _RETURNS_ATTRIBUTE.co_code and code.co_names == (slot,)
            and code.co_argcount == 1 and not code.co_freevars)


def _returns_attribute(self: Any) -> Any:
    return self.slot


_RETURNS_ATTRIBUTE = _returns_attribute.__code__


class DefaultRecordBatch(_d.DefaultRecordBatch):
    __slots__ = _NO_SLOTS
    # kafka-python's slots this class sets
    _pos: int
    _next_record_index: int

    def __iter__(self) -> Iterator[_d.DefaultRecord]:
        self._maybe_uncompress()
        if self._next_record_index == 0 and not self.is_control_batch:
            hd = self._header_data
            sp = speedups()
            if sp is not None:
                pos = self._pos

                def client_reader(k: int) -> Iterator[_d.DefaultRecord]:
                    """kafka-python's own reader, past the k records kbatch returned."""
                    STATS["fallback_batches"] += 1
                    self._pos = pos
                    self._next_record_index = 0
                    for _ in range(k):
                        _d.DefaultRecordBatch.__next__(self)
                    return self

                self._next_record_index = self._num_records
                self._pos = len(self._buffer)
                records: Iterator[_d.DefaultRecord] = sp.V2Records(self._buffer, pos, self._num_records, hd[0], hd[7], hd[8], hd[5] & 0x08, 0,
                                    _factories(sp)[0], self.timestamp_type, client_reader, STATS)
                return records
            recs = decode_v2_tuples(self._buffer, self._pos, self._num_records, hd[0], hd[7], hd[8],
                                    bool(hd[5] & 0x08))
            if recs is not None:
                STATS["decoded_batches"] += 1
                STATS["decoded_records"] += len(recs)
                self._next_record_index = self._num_records
                self._pos = len(self._buffer)
                tstype = self.timestamp_type
                return iter([DefaultRecord(n, off, ts, tstype, k, v, h) for n, off, ts, k, v, h in recs])
            STATS["fallback_batches"] += 1
        return self

    def validate_crc(self) -> bool:
        assert self._decompressed is False, "Validate should be called before iteration"
        return bool(self.crc == _backend.core.crc32c(memoryview(self._buffer)[self.ATTRIBUTES_OFFSET:]))


class DefaultRecordBatchBuilder(_d.DefaultRecordBatchBuilder):
    __slots__ = _NO_SLOTS

    append = append_v2
    _METADATA = DefaultRecordMetadata
    # kafka-python's own DefaultRecordMetadata, made without __init__
    _compiled_metadata: Callable[[int, int, int], _d.DefaultRecordMetadata] | None = None

    @classmethod
    def _bind_compiled_metadata(cls, sp: ModuleType) -> Callable[[int, int, int], _d.DefaultRecordMetadata]:
        make: Callable[[int, int, int], _d.DefaultRecordMetadata] = _factories(sp)[1].make
        cls._compiled_metadata = make
        return make

    def write_header(self, use_compression_type: bool = True) -> None:
        write_v2_header(self, 0, use_compression_type)

class MemoryRecords(_m.MemoryRecords):
    __slots__ = _NO_SLOTS

    def next_batch(self, _min_slice: int = _m.MemoryRecords.MIN_SLICE,
                   _magic_offset: int = _m.MemoryRecords.MAGIC_OFFSET) -> DefaultRecordBatch | _l.LegacyRecordBatch | None:
        next_slice = self._next_slice
        if next_slice is None:
            return None
        if len(next_slice) < _min_slice:
            raise CorruptRecordError(
                "Record size is less than the minimum record overhead ({})".format(_min_slice - self.LOG_OVERHEAD))
        self._cache_next()
        magic = next_slice[_magic_offset]
        if magic >= 128:
            magic -= 256
        if magic <= 1:
            return LegacyRecordBatch(next_slice, magic)
        return DefaultRecordBatch(next_slice)

    def __next__(self) -> DefaultRecordBatch | _l.LegacyRecordBatch | None:
        if self._next_slice is None:
            raise StopIteration
        return self.next_batch()

    next = __next__


class MemoryRecordsBuilder(_m.MemoryRecordsBuilder):
    __slots__ = _NO_SLOTS
    # kafka-python's slots this class sets (the producer state is None for magic 0 and 1)
    _producer_id: int | None
    _producer_epoch: int | None
    _base_sequence: int | None

    def __init__(self, magic: int, compression_type: int, batch_size: int, offset: int = 0,
                 transactional: bool = False, producer_id: int = -1, producer_epoch: int = -1,
                 base_sequence: int = -1) -> None:
        assert magic in [0, 1, 2], "Not supported magic"
        assert compression_type in [0, 1, 2, 3, 4], "Not valid compression type"
        if magic >= 2:
            assert not transactional or producer_id != -1, \
                "Cannot write transactional messages without a valid producer ID"
            assert producer_id == -1 or producer_epoch != -1, "Invalid negative producer epoch"
            assert producer_id == -1 or base_sequence != -1, "Invalid negative sequence number used"
            self._builder = DefaultRecordBatchBuilder(
                magic=magic, compression_type=compression_type, is_transactional=transactional,
                producer_id=producer_id, producer_epoch=producer_epoch, base_sequence=base_sequence,
                batch_size=batch_size)
            self._producer_id = producer_id
            self._producer_epoch = producer_epoch
            self._base_sequence = base_sequence
        else:
            assert not transactional and producer_id == -1, \
                "Idempotent messages are not supported for magic %s" % (magic,)
            self._builder = LegacyRecordBatchBuilder(magic=magic, compression_type=compression_type,
                                                     batch_size=batch_size)
            self._producer_id = None
            self._producer_epoch = None
            self._base_sequence = None
        self._batch_size = batch_size
        self._buffer = None
        self._next_offset = offset
        self._closed = False
        self._magic = magic
        self._bytes_written = 0

    def records(self) -> MemoryRecords:
        assert self._closed
        return MemoryRecords(self._buffer)


def import_client_modules() -> None:
    """Import the kafka-python modules that bind the record classes, so install() patches them."""
    import importlib

    for name in ("kafka.record", "kafka.record.memory_records", "kafka.record.default_records",
                 "kafka.consumer.fetcher", "kafka.producer.record_accumulator", "kafka.producer.kafka",
                 "kafka.producer.producer_batch", "kafka.producer.transaction_manager"):
        try:
            importlib.import_module(name)
        except ImportError:
            pass


def replacements() -> list[tuple[type, type]]:
    return [(_ORIG[name], globals()[name]) for name in _ORIG]
