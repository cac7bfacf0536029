"""Every kbatch exception, and the one mapping from kernel status codes to exceptions.

Kernels (Cython and pure) never build messages: they return or report a status code, the byte
position where the problem is, and the expected/found values; `raise_status` turns that into the
exception. Both backends go through it, so they raise the same class with the same position.
Each exception is also the fitting builtin (ValueError, EOFError) and carries the Kafka error
code where Kafka has one.
"""
from __future__ import annotations

from collections.abc import Iterable
from typing import Any, NoReturn


class KBatchError(Exception):
    """Base of every kbatch exception.

    Attributes: ``position`` (byte position in the input, or None), ``base_offset`` (of the batch
    being read, or None), ``row`` (the row of a table being written, or None), ``expected`` /
    ``found`` (what the reader wanted and what it saw), and ``error_code`` (Kafka's protocol error
    code, or None).
    """

    error_code: int | None = None
    #: where the batch that failed starts, set by the readers that go on past it (dump, verify)
    batch_position: int

    def __init__(self, message: str, *, position: int | None = None, base_offset: int | None = None,
                 expected: object = None, found: object = None, row: int | None = None) -> None:
        self.reason = message
        self.position = position
        self.base_offset = base_offset
        self.expected = expected
        self.found = found
        self.row = row
        super().__init__(self._render())

    def _render(self) -> str:
        parts = [self.reason]
        if self.expected is not None or self.found is not None:
            parts.append(f"expected {self.expected}, found {self.found}")
        where = []
        if getattr(self, "row", None) is not None:
            where.append(f"at row {self.row}")
        if self.position is not None:
            where.append(f"at byte {self.position}")
        if self.base_offset is not None:
            where.append(f"in batch with base offset {self.base_offset}")
        msg = ": ".join(parts)
        return f"{msg} ({', '.join(where)})" if where else msg

    def at(self, *, position: int | None = None, base_offset: int | None = None) -> "KBatchError":
        """Fill in location details that were not known where the error was raised."""
        if self.position is None and position is not None:
            self.position = position
        if self.base_offset is None and base_offset is not None:
            self.base_offset = base_offset
        self.args = (self._render(),)
        return self

    def update(self, *, shift: int = 0, **fields: Any) -> "KBatchError":
        """Change what the error says and render its message again: the readers that wrap an error
        name the file (`reason=`), or move its position from a window's to the file's (`shift=`,
        added to a known position). `fields` are the constructor's (reason, position, base_offset,
        expected, found, row)."""
        for name, value in fields.items():
            if name not in ("reason", "position", "base_offset", "expected", "found", "row"):
                raise TypeError(f"KBatchError.update() got an unexpected field {name!r}")
            setattr(self, name, value)
        if shift and self.position is not None:
            self.position += shift
        self.args = (self._render(),)
        return self


class FileNameError(KBatchError, ValueError):
    """A segment, index or snapshot file whose name does not carry its offset (20 digits)."""


class CorruptRecordError(KBatchError, ValueError):
    """Bytes that are not a valid batch/record (Kafka's CorruptRecordException, error 2)."""

    error_code = 2


class CrcMismatchError(CorruptRecordError):
    """Stored and computed checksums differ (CRC-32C for magic 2, CRC-32 for magic 0/1)."""

    def __init__(self, message: str = "Record is corrupt", *, stored: int, computed: int, **kw: Any) -> None:
        self.stored = stored
        self.computed = computed
        kw.setdefault("expected", f"crc {computed}")
        kw.setdefault("found", f"stored crc {stored}")
        super().__init__(f"{message} (stored crc = {stored}, computed crc = {computed})", **kw)


class TruncatedDataError(KBatchError, EOFError):
    """The input ends inside a batch, a record or a field."""

    error_code = 2


class InvalidRecordError(KBatchError, ValueError):
    """A record that parses but breaks a rule (Kafka's InvalidRecordException, error 87).

    When LogValidator rejects records, ``record_errors`` lists them (kbatch.log.validator.RecordError).
    """

    error_code = 87
    record_errors: list[Any]


class UnsupportedCodecError(KBatchError, ValueError):
    """Compression id 5-7, or a codec the format does not allow (zstd below magic 2)."""

    error_code = 76


class RecordTooLargeError(KBatchError, ValueError):
    """A batch or record larger than the configured limit (error 10 MESSAGE_TOO_LARGE)."""

    error_code = 10


class DecompressionLimitError(RecordTooLargeError):
    """Decompressing a batch would exceed the decompressed-size limit (a compression bomb)."""


class InvalidTimestampError(KBatchError, ValueError):
    """KIP-937/KIP-32 timestamp rejection (error 32 INVALID_TIMESTAMP).

    ``record_errors`` lists (batch_index, record_index, offset, message) for every bad record.
    """

    error_code = 32

    def __init__(self, message: str, record_errors: Iterable[tuple[int, int, int, str]] = (), **kw: Any) -> None:
        self.record_errors = list(record_errors)
        super().__init__(message, **kw)


class UnsupportedForMessageFormatError(KBatchError, ValueError):
    """An operation the batch's magic cannot support (error 43)."""

    error_code = 43


class InvalidRequestError(KBatchError, ValueError):
    """A malformed request, e.g. one partition named twice with different targets (error 42)."""

    error_code = 42


class CorruptIndexError(KBatchError, ValueError):
    """An .index/.timeindex/.txnindex file that fails Kafka's sanity checks."""


class InvalidConfigurationError(KBatchError, ValueError):
    """A topic configuration value that is unknown or out of range (error 40 INVALID_CONFIG)."""

    error_code = 40


class UnknownTopicOrPartitionError(KBatchError, LookupError):
    """A partition with no directory under the log directory (error 3 UNKNOWN_TOPIC_OR_PARTITION)."""

    error_code = 3


class InvalidOffsetError(KBatchError, ValueError):
    """Offsets that go backwards or do not fit (error 1 OFFSET_OUT_OF_RANGE family)."""


class CorruptSnapshotError(KBatchError, ValueError):
    """A producer-state `.snapshot` file that fails its version or CRC check (Kafka's CorruptSnapshotException)."""


class CorruptCheckpointError(KBatchError, ValueError):
    """A checkpoint text file (leader-epoch-checkpoint, recovery-point-offset-checkpoint,
    partition.metadata, ...) that Kafka's reader would reject; `position` is the byte where the bad line starts."""


class MissingDependencyError(KBatchError, ImportError):
    """An optional dependency is not installed: pyarrow for columns (the `arrow` extra), typer and
    rich for the CLI (`cli`), pyspark for Spark (`spark`). The message names the pip command."""

    def __init__(self, feature: str, package: str, extra: str, *, requirement: str = "",
                 installed: str | None = None) -> None:
        # requirement: a version bound (">=4.1"); installed: the version found, too old for it
        spec = f"'{package}{requirement}'" if requirement else package
        have = "which is not installed" if installed is None else f"but {package} {installed} is installed"
        super().__init__(f"{feature} needs {package}{requirement}, {have}: pip install {spec} "
                         f"(kafka-kbatch's '{extra}' extra)")
        self.name = package  # ImportError's attribute: the module that is missing


class NoCompiledCoreWarning(RuntimeWarning):
    """Warned once at import when kbatch runs on its pure-Python backend because the compiled core
    (kbatch._core) could not be imported and KBATCH_BACKEND=python was not asked for."""


# ---------------------------------------------------------------------------------------------
# Storage: files and directories of a log (log.py, segment.py, index.py, compaction.py)
class StorageError(KBatchError, OSError):
    """A log's file or directory cannot be read or written as needed: not a regular file, a
    dangling symlink, gone while being opened, a failed write. ``path`` names it; ``errno`` is
    the operating system's code when there is one (ENOSPC, EFBIG, ...)."""

    def __init__(self, message: str, *, path: object = None, errno: int | None = None, **kw: Any) -> None:
        self.path = None if path is None else str(path)
        super().__init__(message if path is None else f"{path}: {message}", **kw)
        self.errno = errno
        self.filename = self.path

    def __str__(self) -> str:  # the kbatch message, not OSError's "[Errno n] strerror: filename"
        return str(self.args[0]) if self.args else ""


class LogWriteError(StorageError):
    """A write to a log failed (disk full, file size limit, short write); the files were cut back
    to what they held before the call, so nothing half-written stays."""


class LogDirectoryLockedError(StorageError):
    """Another writer holds the directory's `.lock` (kbatch, or a running Kafka broker holding its
    log directory's `.lock`)."""


class FileChangedError(StorageError):
    """A file shrank or vanished while it was being read (truncated or replaced by another process)."""


class UnsupportedLayoutError(StorageError):
    """Files kbatch does not read as Kafka segments: a tiered-storage layout whose objects are
    transformed (chunk-compressed or encrypted by the plugin), an object-store URI with credentials
    in it, or a filesystem scheme nothing installed can open."""


class SegmentTooLargeError(KBatchError, ValueError):
    """A segment beyond Kafka's limit: positions in `.index` are int32, so a segment holds at most
    2147483647 bytes (segment.bytes is an int)."""


class UncleanablePartitionError(KBatchError, ValueError):
    """Compaction refused a partition it cannot read in full (Kafka's cleaner marks such a
    partition uncleanable; it never truncates). Nothing was changed."""


# ---------------------------------------------------------------------------------------------
# Kernel status codes. Kernels report (status, position, expected, found); raise_status maps.
ST_OK = 0
ST_TRUNCATED = 1            # need `expected` bytes, `found` available
ST_VARINT_TOO_LONG = 2      # 5th byte of a varint has its MSB set
ST_VARLONG_TOO_LONG = 3     # 10th byte of a varlong has its MSB set
ST_RECORD_SIZE = 4          # record body length declared != bytes read
ST_NEG_HEADER_KEY = 5       # header key length < 0
ST_NEG_HEADER_COUNT = 6     # header count < 0
ST_RECORDS_REMAINING = 7    # bytes left after reading recordsCount records
ST_PREMATURE_EOF = 8        # records section ended before recordsCount records
ST_CRC = 9                  # expected = computed, found = stored
ST_BATCH_TOO_SMALL = 10     # declared size below the format's overhead
ST_BAD_MAGIC = 11           # magic not 0, 1 or 2
ST_BAD_COUNT = 12           # negative records count
ST_RECORD_TOO_LONG = 13     # record length runs past the records section
ST_FIELD_PAST_END = 14      # key/value/header length runs past the record
ST_HEADER_COUNT_TOO_LARGE = 15  # more headers declared than bytes remain

_MESSAGES = {
    ST_TRUNCATED: (TruncatedDataError, "Truncated data"),
    ST_VARINT_TOO_LONG: (CorruptRecordError, "Varint is too long, the most significant bit in the 5th byte is set"),
    ST_VARLONG_TOO_LONG: (CorruptRecordError, "Varlong is too long, most significant bit in the 10th byte is set"),
    ST_RECORD_SIZE: (InvalidRecordError, "Invalid record size"),
    ST_NEG_HEADER_KEY: (InvalidRecordError, "Invalid negative header key size"),
    ST_NEG_HEADER_COUNT: (InvalidRecordError, "Found invalid number of record headers"),
    ST_RECORDS_REMAINING: (InvalidRecordError, "Incorrect declared batch size, records still remaining in file"),
    ST_PREMATURE_EOF: (InvalidRecordError, "Incorrect declared batch size, premature EOF reached"),
    ST_BATCH_TOO_SMALL: (CorruptRecordError, "Record batch is corrupt (the size is smaller than the minimum allowed overhead)"),
    ST_BAD_MAGIC: (CorruptRecordError, "Invalid magic found in record"),
    ST_BAD_COUNT: (InvalidRecordError, "Found invalid record count"),
    ST_RECORD_TOO_LONG: (InvalidRecordError, "Invalid record size, the record runs past the end of the batch"),
    ST_FIELD_PAST_END: (InvalidRecordError, "Found invalid record structure, a field runs past the end of the record"),
    ST_HEADER_COUNT_TOO_LARGE: (InvalidRecordError, "Found invalid number of record headers"),
}


def raise_status(status: int, position: int, expected: Any = None, found: Any = None,
                 base_offset: int | None = None) -> NoReturn:
    """Raise the exception for a kernel status code. Never returns."""
    if status == ST_CRC:
        raise CrcMismatchError(stored=found, computed=expected, position=position, base_offset=base_offset)
    cls, message = _MESSAGES.get(status, (CorruptRecordError, f"Corrupt data (status {status})"))
    raise cls(message, position=position, base_offset=base_offset, expected=expected, found=found)


__all__ = [
    "FileNameError",
    "KBatchError", "CorruptRecordError", "CrcMismatchError", "TruncatedDataError", "InvalidRecordError",
    "UnsupportedCodecError", "RecordTooLargeError", "DecompressionLimitError", "InvalidTimestampError",
    "UnsupportedForMessageFormatError", "InvalidRequestError", "CorruptIndexError", "InvalidOffsetError",
    "InvalidConfigurationError", "UnknownTopicOrPartitionError", "CorruptSnapshotError", "CorruptCheckpointError",
    "StorageError", "LogWriteError", "LogDirectoryLockedError", "FileChangedError", "SegmentTooLargeError",
    "UncleanablePartitionError", "MissingDependencyError", "NoCompiledCoreWarning",
    "UnsupportedLayoutError",
    "raise_status",
]
