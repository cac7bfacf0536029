"""kbatch: fast, byte-exact Apache Kafka record batches and log segments.

Public names only; see ../shared/docs/DESIGN.md for the contract. Storage, validation, Arrow
and compaction names load on first use so `import kbatch` stays light.
"""
from typing import TYPE_CHECKING, Any

from . import _backend
from . import _wire
from ._wire import (NO_TIMESTAMP, NO_TIMESTAMP_EXTENDED, Compression, ControlRecordType, OffsetSpec,
                    TimestampType)
from .record.batch import MemoryRecords, RecordBatch
from .record.file_records import iter_batches
from .record.builder import BatchBuilder, build_batch, build_end_txn_marker
from .errors import (CorruptIndexError, CorruptRecordError, CrcMismatchError, DecompressionLimitError,
                     InvalidConfigurationError, InvalidOffsetError, InvalidRecordError, InvalidRequestError,
                     InvalidTimestampError, KBatchError, RecordTooLargeError, TruncatedDataError,
                     UnknownTopicOrPartitionError, UnsupportedCodecError, UnsupportedForMessageFormatError,
                     MissingDependencyError, NoCompiledCoreWarning)
from .errors import (FileChangedError, LogDirectoryLockedError, LogWriteError, SegmentTooLargeError,
                     StorageError, UncleanablePartitionError, UnsupportedLayoutError)
from .record.legacy import LegacyRecordBatch
from .record.control import ControlRecord, parse_control_record

__version__ = "0.1.0"

BACKEND: str = _backend.BACKEND
if TYPE_CHECKING:  # what type checkers see: the contract both backends share (_core.pyi)
    from ._core import ByteView, Record, crc32c
    from .columns.decode import KAFKA_SCHEMA, decode_columns
    from .columns.encode import encode_columns, iter_encode_columns
    from .log.cleaner import compact
    from .log.index import OffsetIndex, TimeIndex, TransactionIndex
    from .log.index_tools import rebuild_indexes, verify_indexes
    from .log.log_config import LogConfig
    from .log.log_segments import OffsetAndTimestamp
    from .log.unified_log import Log, offsets_for_times
    from .log.segment import LogSegment
    from .record.file_records import FileRecords
    from .log.validator import AppendInfo, LogValidator, ValidationResult, check_timestamps
    from .tables import export_table
    from .tables.read import read_topic
    from .scan import scan
else:
    Record = _backend.core.Record
    ByteView = _backend.core.ByteView   # type of keys, values, header values (memoryview on the pure backend)
    # CRC-32C (Castagnoli) of any buffer, continuing from `value` (like zlib.crc32): the live kernel
    # itself, bound at import so a call costs no extra Python frame.
    crc32c = _backend.core.crc32c
EARLIEST = OffsetSpec.EARLIEST
LATEST = OffsetSpec.LATEST
MAX_TIMESTAMP = OffsetSpec.MAX_TIMESTAMP


# name -> submodule, imported on first attribute access
_LAZY = {
    "decode_columns": "columns.decode", "KAFKA_SCHEMA": "columns.decode", "export_table": "tables", "read_topic": "tables.read",
    "encode_columns": "columns.encode", "iter_encode_columns": "columns.encode",
    "LogValidator": "log.validator", "ValidationResult": "log.validator", "AppendInfo": "log.validator",
    "check_timestamps": "log.validator",
    "OffsetIndex": "log.index", "TimeIndex": "log.index", "TransactionIndex": "log.index",
    "FileRecords": "record.file_records", "LogSegment": "log.segment",
    "Log": "log.unified_log", "LogConfig": "log.log_config", "OffsetAndTimestamp": "log.log_segments",
    "offsets_for_times": "log.unified_log", "rebuild_indexes": "log.index_tools", "verify_indexes": "log.index_tools",
    "compact": "log.cleaner",
}


def __getattr__(name: str) -> Any:
    import importlib

    if name == "scan":  # the package kbatch.scan is callable: kbatch.scan(path) plans a scan
        value: Any = importlib.import_module("kbatch.scan")
        globals()[name] = value
        return value
    mod = _LAZY.get(name)
    if mod is None:
        raise AttributeError(f"module 'kbatch' has no attribute {name!r}")
    value = getattr(importlib.import_module(f"kbatch.{mod}"), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(list(globals()) + list(_LAZY) + ["scan"])


__all__ = [
    "BACKEND", "Record", "ByteView", "crc32c", "iter_batches", "MemoryRecords", "RecordBatch", "LegacyRecordBatch",
    "BatchBuilder", "build_batch", "build_end_txn_marker", "ControlRecord", "parse_control_record",
    "TimestampType", "Compression", "ControlRecordType", "OffsetSpec", "NO_TIMESTAMP", "NO_TIMESTAMP_EXTENDED",
    "EARLIEST", "LATEST", "MAX_TIMESTAMP",
    "KBatchError", "CorruptRecordError", "CrcMismatchError", "TruncatedDataError", "InvalidRecordError",
    "UnsupportedCodecError", "RecordTooLargeError", "DecompressionLimitError", "InvalidTimestampError",
    "UnsupportedForMessageFormatError", "InvalidRequestError", "CorruptIndexError", "InvalidOffsetError",
    "InvalidConfigurationError", "UnknownTopicOrPartitionError", "StorageError", "LogWriteError",
    "LogDirectoryLockedError", "FileChangedError", "SegmentTooLargeError", "UncleanablePartitionError",
    "MissingDependencyError", "NoCompiledCoreWarning", "UnsupportedLayoutError", "__version__",
    # the lazily imported names (_LAZY), spelled out so type checkers see them exported
    "decode_columns", "KAFKA_SCHEMA", "export_table", "read_topic", "encode_columns", "iter_encode_columns", "LogValidator", "ValidationResult", "AppendInfo", "check_timestamps",
    "OffsetIndex", "TimeIndex", "TransactionIndex", "FileRecords", "LogSegment", "Log", "LogConfig",
    "OffsetAndTimestamp", "offsets_for_times", "rebuild_indexes", "verify_indexes", "compact", "scan",
]
