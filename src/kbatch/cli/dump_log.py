"""`kbatch dump`: print segment and index files as Kafka's DumpLogSegments (kafka-dump-log) does.

The text output follows kafka-format.md §6.2 field for field, so scripts written against
`kafka-dump-log.sh --files ...` keep working; `json=True` prints one JSON object per line instead
(file headers, batches, records, index entries, problems), with keys and values as UTF-8 text
where they decode and base64 otherwise (`key_encoding` / `value_encoding` say which).

Where kbatch differs from the Java tool:
- a file that cannot be read, or a batch that cannot be decoded, is reported on stderr (file and
  byte position) and the dump goes on with the next batch or file instead of stopping with a stack
  trace;
- KRaft control records (SNAPSHOT_HEADER, SNAPSHOT_FOOTER, KRAFT_VERSION, KRAFT_VOTERS) print as
  `controlType: NAME(id)`, not as their decoded JSON messages;
- `.snapshot` files (producer state) are not decoded ("Ignoring unknown file").

Nothing here needs typer or rich; `progress` is any callable taking a byte count (the CLI passes
a rich progress bar's advance).
"""
from __future__ import annotations

import base64
import json as _json
import os
import struct
import sys
import zlib
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import IO, TYPE_CHECKING, Any

from .. import _fs
from .. import _wire as W

from ..record.compression import decompress
from ..errors import CorruptRecordError, FileNameError, KBatchError, StorageError
from ..log.files import offset_from_file_name
from ..log.index import OffsetIndex, TimeIndex, TransactionIndex
from ..log import checkpoints as C
from ..log import producer_state
from ..schema import raft_snapshot
from ..schema.coordinator_records import format_offsets_record, format_transaction_record, group_record_json
from ..log.index_rules import SegmentBatches, check_offset_index, check_time_index
from ..schema.metadata_records import format_metadata_record, metadata_record_json
from ..record.legacy import LegacyRecordBatch, parse_message
from ..record.control import parse_control_record
from ..log.segment import time_floor
from ..record.file_records import batch_at, open_records, scan_windows

if TYPE_CHECKING:
    from .._core import Record
    from .._typing import Buffer, BytesLike, PathLike
    from ..log.index_rules import IndexFinding
    from ..record.file_records import FileRecords

    from ..record.batch import Batch
    #: an index rule of kbatch.log.index_rules: (file, entries, the segment's batches) -> findings
    IndexCheck = Callable[[str, Iterable[tuple[int, int]], SegmentBatches], list[IndexFinding]]

INT32_MAX = W.INT32_MAX
DECODERS = ("offsets", "transaction-log", "cluster-metadata")
DEFAULT_MAX_MESSAGE_SIZE = 5 * 1024 * 1024  # DumpLogSegments' --max-message-size default
RECORD_INDENT = "|"
W_LOG = ".log"

_TS_NAMES = {W.TimestampType.NO_TIMESTAMP_TYPE: "NoTimestampType", W.TimestampType.CREATE_TIME: "CreateTime",
             W.TimestampType.LOG_APPEND_TIME: "LogAppendTime"}


# ------------------------------------------------------------------------------------------ helpers
def timestamp_type_name(tt: int) -> str:
    """Kafka's TimestampType.toString: CreateTime, LogAppendTime, NoTimestampType."""
    return _TS_NAMES[W.TimestampType(tt)]


def last_sequence(batch: Batch) -> int:
    if batch.base_sequence == W.NO_SEQUENCE:
        return W.NO_SEQUENCE
    return W.increment_sequence(batch.base_sequence, batch.last_offset - batch.base_offset)


def record_sequence(batch: Batch, record: Record) -> int:
    if batch.base_sequence < 0:
        return W.NO_SEQUENCE
    return W.increment_sequence(batch.base_sequence, record.offset - batch.base_offset)


def base_offset_from_name(path: PathLike) -> int:
    """The offset a segment or index file is named after (the part before the first dot)."""
    return offset_from_file_name(path)


def sibling(path: PathLike, suffix: str) -> str:
    """The file with the same base name and another suffix (`.index` -> `.log`)."""
    if _fs.is_remote(path):
        return _fs.join(_fs.dirname(path), _fs.basename(path).split(".")[0] + suffix)
    path = os.path.abspath(os.fspath(path))
    return os.path.join(os.path.dirname(path), os.path.basename(path).split(".")[0] + suffix)


def _abs(path: str) -> str:
    """How messages name a file: DumpLogSegments prints absolute paths; URIs stay as given."""
    return path if _fs.is_remote(path) else os.path.abspath(path)


def encode_blob(data: Buffer | None) -> tuple[str | None, str | None]:
    """(text, encoding): UTF-8 text where the bytes decode, base64 otherwise; (None, None) for null."""
    if data is None:
        return None, None
    raw = bytes(data)
    try:
        return raw.decode("utf-8"), "utf8"
    except UnicodeDecodeError:
        return base64.b64encode(raw).decode("ascii"), "base64"


def batches_until_error(data: Buffer, errors: list[KBatchError]) -> Iterator[Batch]:
    """Every complete batch of a buffer, in order, up to the first one that cannot be framed; the
    error for that one (if any) is appended to `errors`, with .batch_position where it starts."""
    mv = memoryview(data).cast("B") if not isinstance(data, (bytes, memoryview)) else memoryview(data)
    yield from file_batches_until_error(lambda p, n: mv[p:p + n], len(mv), errors)


def file_batches_until_error(read: Callable[[int, int], BytesLike], size: int,
                             errors: list[KBatchError]) -> Iterator[Batch]:
    """batches_until_error over bytes [0, size) read in windows with read(position, n) (a
    FileRecords' read: pread, never mmap, so a file truncated under the dump is a FileChangedError,
    not SIGBUS). Batches carry file positions. A StorageError (the file changed or cannot be read)
    is raised, not collected."""
    done = 0
    try:
        for s in scan_windows(read, size, 0, limit=None):
            for i in range(len(s["position"])):
                b = batch_at(s, i)
                done = b.position + b.size_in_bytes
                yield b
    except KBatchError as e:
        if isinstance(e, StorageError):
            raise
        e.batch_position = done  # where the batch that failed starts
        errors.append(e)


def first_batch_at(records: FileRecords, position: int, max_size: int) -> Batch | None:
    """The first complete batch starting at `position` of a FileRecords (within max_size bytes),
    or None when there is none there (past the end, or bytes that are not a batch). Reads its
    header, then only that batch."""
    size = records.size_in_bytes
    if position < 0 or position >= size:
        return None
    head = records.read(position, W.HEADER_SIZE_UP_TO_MAGIC)
    if len(head) < W.HEADER_SIZE_UP_TO_MAGIC:
        return None
    (length,) = struct.unpack_from(">i", head, W.SIZE_OFFSET)
    need = min(max(length, 0) + W.LOG_OVERHEAD, max_size, size - position)
    for b in batches_until_error(records.read(position, need), []):
        return b
    return None


def batch_containing(records: FileRecords, position: int, offset: int) -> tuple[Batch | None, int | None]:
    """(batch, its file position): the first batch of a FileRecords from `position` on whose last
    offset is >= offset, or (None, None)."""
    if position < 0 or position >= records.size_in_bytes:
        return None, None
    try:
        found = records.search_for_offset_with_size(offset, position)
    except KBatchError as e:
        if isinstance(e, StorageError):
            raise
        return None, None
    if found is None:
        return None, None
    b = first_batch_at(records, found.position, found.size)
    return b, found.position


def max_record_timestamp(batch: Batch) -> int:
    """Max of the records' timestamps, starting at NO_TIMESTAMP as DumpLogSegments does, or at
    Long.MIN_VALUE for kbatch's extended batches, whose negative timestamps are indexed
    (DESIGN.md decision 5)."""
    m = time_floor(batch.magic, batch.attributes)
    for r in batch.records():
        ts = batch.no_timestamp if r.timestamp is None else r.timestamp
        m = max(m, ts)
    return m


def legacy_record_crcs(batch: LegacyRecordBatch) -> list[tuple[int, bool]]:
    """(crc, is_valid) of each message a legacy entry holds, as Kafka's deep iterator sees them:
    the entry itself when uncompressed, each inner message of a compressed wrapper otherwise."""
    if batch.attributes & W.LEGACY_COMPRESSION_CODEC_MASK == 0:
        return [(batch.crc, batch.is_valid())]
    raw = batch.raw
    _crc, magic, _a, _ts, _key, value = parse_message(raw, W.LOG_OVERHEAD, len(raw), batch.offset)
    if value is None:  # a compressed wrapper holds its messages in its value
        raise CorruptRecordError("A compressed message has a null value", position=batch.position,
                                 expected="the compressed inner messages", found="null")
    inner = memoryview(decompress(batch.compression, value, magic, batch.max_decompressed_bytes, batch.position))
    out: list[tuple[int, bool]] = []
    p, n = 0, len(inner)
    while n - p >= W.LOG_OVERHEAD:
        _off, size = struct.unpack_from(">qi", inner, p)
        if size < W.RECORD_OVERHEAD_V0 or size > n - p - W.LOG_OVERHEAD:
            break
        ms, me = p + W.LOG_OVERHEAD, p + W.LOG_OVERHEAD + size
        (stored,) = struct.unpack_from(">I", inner, ms)
        out.append((stored, zlib.crc32(inner[ms + W.LEGACY_MAGIC_OFFSET:me]) == stored))
        p = me
    return out


# ------------------------------------------------------------------------------------------ dumper
@dataclass
class DumpOptions:
    print_data_log: bool = False
    deep_iteration: bool = False
    index_sanity_check: bool = False
    verify_index_only: bool = False
    skip_record_metadata: bool = False
    max_bytes: int = INT32_MAX
    max_message_size: int = DEFAULT_MAX_MESSAGE_SIZE
    json: bool = False
    decoder: str | None = None  # "offsets", "transaction-log" or "cluster-metadata" (DECODERS)

    def __post_init__(self) -> None:
        if self.decoder is not None and self.decoder not in DECODERS:
            raise ValueError(f"unknown decoder {self.decoder!r}: one of {', '.join(DECODERS)}")

    @property
    def printing_data(self) -> bool:  # a decoder implies --print-data-log, as in Kafka
        return self.print_data_log or self.decoder is not None

    @property
    def deep(self) -> bool:  # --print-data-log implies --deep-iteration, as in Kafka
        return self.deep_iteration or self.printing_data


@dataclass
class DumpResult:
    problems: int = 0          # corrupt batches, index mismatches, failed sanity checks, trailing bytes
    io_errors: int = 0         # files that could not be opened or named
    files: int = 0

    @property
    def exit_code(self) -> int:
        return 2 if self.io_errors else (1 if self.problems else 0)


class Dumper:
    """Prints files as DumpLogSegments does. `out`/`err` are text streams; `progress(n)` is called
    with the number of bytes of .log data read since the last call."""

    def __init__(self, options: DumpOptions, out: IO[str] | None = None, err: IO[str] | None = None,
                 progress: Callable[[int], object] | None = None) -> None:
        self.o = options
        self.out = out if out is not None else sys.stdout
        self.err = err if err is not None else sys.stderr
        self.progress = progress or (lambda n: None)
        self.result = DumpResult()
        # reports printed after all files, in DumpLogSegments' order
        self._index_mismatches: dict[str, list[tuple[int, int]]] = {}
        self._ts_mismatch: dict[str, list[tuple[int, int]]] = {}
        self._ts_out_of_order: dict[str, list[tuple[int, int]]] = {}
        self._ts_not_found: dict[str, list[tuple[int, int]]] = {}
        self._non_consecutive: dict[str, list[tuple[int, int]]] = {}
        self._notes: dict[str, list[str]] = {}  # index entries in forms older brokers write (valid)

    # -- output
    def _line(self, text: str = "") -> None:
        self.out.write(text + "\n")

    def _obj(self, **fields: Any) -> None:
        self.out.write(_json.dumps(fields, separators=(", ", ": ")) + "\n")

    def _problem(self, path: str, kind: str, message: str, **fields: Any) -> None:
        self.result.problems += 1
        if self.o.json:
            self._obj(type="problem", file=os.fspath(path), kind=kind, message=message, **fields)
        else:
            self.err.write(message + "\n")

    def _io_error(self, path: str, message: str) -> None:
        self.result.io_errors += 1
        if self.o.json:
            self._obj(type="error", file=os.fspath(path), message=message)
        self.err.write(f"kbatch dump: {message}\n")

    # -- entry point
    def dump(self, paths: Iterable[PathLike]) -> DumpResult:
        for p in paths:
            self.dump_file(p)
        self.finish()
        return self.result

    def dump_file(self, path: PathLike) -> None:
        path = os.fspath(path)
        name = os.path.basename(path)
        suffix = name[name.rfind("."):] if "." in name else ""
        if not self.o.json:
            self._line(f"Dumping {path}")
        self.result.files += 1
        handlers: dict[str, Callable[[str], None]] = {".log": self.dump_log, ".index": self.dump_index, ".timeindex": self.dump_time_index,
                    ".txnindex": self.dump_txn_index, ".snapshot": self.dump_producer_snapshot,
                    ".checkpoint": self.dump_log}
        handler = handlers.get(suffix)
        if name == C.LEADER_EPOCH_CHECKPOINT:
            handler = self.dump_leader_epoch_checkpoint
        elif name in C.LOG_DIR_CHECKPOINTS:
            handler = self.dump_offset_checkpoint
        elif name == C.PARTITION_METADATA:
            handler = self.dump_partition_metadata
        if handler is None:
            if self.o.json:
                self._obj(type="file", file=path, kind="unknown")
            self.err.write(f"Ignoring unknown file {path}\n")
            return
        try:
            handler(path)
        except StorageError as e:  # not a regular file (a FIFO...), changed or gone while read, unreachable
            self._io_error(path, str(e))
        except FileNameError as e:  # (a KBatchError too)
            self._io_error(path, str(e))
        except KBatchError as e:
            self._problem(path, "corrupt", f"Cannot read {_abs(path)}: {e}", position=e.position)
        except BrokenPipeError:
            raise
        except OSError as e:
            self._io_error(path, f"{e.filename or path}: {e.strerror or e}")

    # -- .log
    def dump_log(self, path: str) -> None:
        """A .log segment, or a KRaft snapshot (.checkpoint: the same batches after a header line)."""
        o = self.o
        snapshot = raft_snapshot.snapshot_id(path) if os.fspath(path).endswith(raft_snapshot.SUFFIX) else None
        base = None if snapshot is not None else base_offset_from_name(path)
        records = open_records(path)
        try:
            size = records.size_in_bytes
            limit = min(size, o.max_bytes)
            if o.json:
                if snapshot is None:
                    self._obj(type="file", file=path, kind="log", base_offset=base, size=size)
                else:
                    self._obj(type="file", file=path, kind="snapshot", bootstrap=snapshot.bootstrap,
                              end_offset=snapshot.end_offset, epoch=snapshot.epoch, size=size)
            elif snapshot is None:
                self._line(f"Log starting offset: {base}")
            elif snapshot.bootstrap:
                self._line("KRaft bootstrap snapshot")
            else:
                self._line(f"Snapshot end offset: {snapshot.end_offset}, epoch: {snapshot.epoch}")
            valid: int | None = 0
            last_offset = -1
            errors: list[KBatchError] = []
            batch: Batch | None
            for batch in file_batches_until_error(records.read, limit, errors):
                self._print_batch(path, batch)
                if o.deep:
                    last_offset = self._print_records(path, batch, last_offset)
                valid = batch.position + batch.size_in_bytes
                self.progress(batch.size_in_bytes)
            batch = None
            for e in errors:
                self._problem(path, "corrupt_batch", f"Corrupt batch at byte {e.batch_position} of "
                              f"{_abs(path)}: {e}", position=e.batch_position)
                valid = None
            if valid is not None:
                trailing = size - valid
                if trailing > 0 and o.max_bytes == INT32_MAX:
                    msg = f"Found {trailing} invalid bytes at the end of {_fs.basename(path)}"
                    self.result.problems += 1
                    if o.json:
                        self._obj(type="problem", file=path, kind="trailing_bytes", message=msg, position=valid,
                                  bytes=trailing)
                    else:
                        self._line(msg)
        finally:
            records.close()

    def _print_batch(self, path: str, batch: Batch) -> None:
        valid = batch.is_valid()
        if not valid:
            self.result.problems += 1
        tname = timestamp_type_name(batch.timestamp_type)
        codec = batch.compression.name.lower()
        if self.o.json:
            fields = dict(type="batch", file=path, position=batch.position, magic=batch.magic,
                          base_offset=batch.base_offset, last_offset=batch.last_offset)
            if batch.magic >= 2:
                fields.update(count=batch.record_count, base_sequence=batch.base_sequence,
                              last_sequence=last_sequence(batch), producer_id=batch.producer_id,
                              producer_epoch=batch.producer_epoch,
                              partition_leader_epoch=batch.partition_leader_epoch,
                              is_transactional=batch.is_transactional, is_control=batch.is_control,
                              delete_horizon_ms=batch.delete_horizon_ms,
                              timestamp_extended=batch.timestamp_extended)
            fields.update(timestamp_type=tname, max_timestamp=batch.max_timestamp, size=batch.size_in_bytes,
                          compression=codec, crc=batch.crc, is_valid=valid)
            self._obj(**fields)
            return
        if batch.magic >= 2:
            dh = batch.delete_horizon_ms
            head = (f"baseOffset: {batch.base_offset} lastOffset: {batch.last_offset} count: {batch.record_count} "
                    f"baseSequence: {batch.base_sequence} lastSequence: {last_sequence(batch)} "
                    f"producerId: {batch.producer_id} producerEpoch: {batch.producer_epoch} "
                    f"partitionLeaderEpoch: {batch.partition_leader_epoch} "
                    f"isTransactional: {_b(batch.is_transactional)} isControl: {_b(batch.is_control)} "
                    f"deleteHorizonMs: {'OptionalLong.empty' if dh is None else f'OptionalLong[{dh}]'}")
        else:
            head = f"offset: {batch.last_offset}"
        self._line(f"{head} position: {batch.position} {tname}: {batch.max_timestamp} size: {batch.size_in_bytes} "
                   f"magic: {batch.magic} compresscodec: {codec} crc: {batch.crc} isvalid: {_b(valid)}")

    def _print_records(self, path: str, batch: Batch, last_offset: int) -> int:
        o = self.o
        try:
            records = batch.records()
            legacy_crcs = legacy_record_crcs(batch) if isinstance(batch, LegacyRecordBatch) else None
            controls = [parse_control_record(r) for r in records] if batch.is_control else None
        except KBatchError as e:
            pos = e.position if e.position is not None else batch.position
            self._problem(path, "corrupt_records",
                          f"Cannot decode the records of the batch at byte {batch.position} of "
                          f"{_abs(path)}: {e}", position=pos, batch_position=batch.position)
            return last_offset
        tname = timestamp_type_name(batch.timestamp_type)
        for i, r in enumerate(records):
            # kafka-dump-log 4.x: the file's offsets start from -1, so a first record other than 0 is
            # reported as "-1 is followed by N" (3.x started at the first record)
            if r.offset != last_offset + 1:
                self._non_consecutive.setdefault(path, []).append((last_offset, r.offset))
            last_offset = r.offset
            ts = batch.no_timestamp if r.timestamp is None else r.timestamp
            key_size = -1 if r.key is None else len(r.key)
            value_size = -1 if r.value is None else len(r.value)
            if o.json:
                fields: dict[str, Any] = dict(type="record", file=path, batch_position=batch.position, offset=r.offset,
                              timestamp_type=tname, timestamp=r.timestamp, key_size=key_size,
                              value_size=value_size, is_tombstone=bool(r.is_tombstone))
                if batch.magic >= 2:
                    fields["sequence"] = record_sequence(batch, r)
                    hdrs = []
                    for hk, hv in r.headers:
                        text, enc = encode_blob(hv) if o.printing_data else (None, None)
                        h: dict[str, str | None] = {"key": hk}
                        if o.printing_data:
                            h.update(value=text, value_encoding=enc)
                        hdrs.append(h)
                    fields["headers"] = hdrs
                if legacy_crcs is not None and i < len(legacy_crcs):
                    fields.update(crc=legacy_crcs[i][0], is_valid=legacy_crcs[i][1])
                if controls is not None:
                    c = controls[i]
                    fields["control"] = {"type": c.type.name, "type_id": _control_type_id(r),
                                         "coordinator_epoch": c.coordinator_epoch}
                    body = raft_snapshot.control_record_json(c.type, r.value)
                    if body is not None:
                        fields["control"]["data"] = body
                if o.printing_data and controls is None:
                    if o.decoder is not None:
                        fields["decoded"] = self._decode_json(r)
                    else:
                        k, ke = encode_blob(r.key)
                        v, ve = encode_blob(r.value)
                        fields.update(key=k, key_encoding=ke, value=v, value_encoding=ve)
                self._obj(**fields)
                continue
            parts = []
            prefix = f"{RECORD_INDENT} "
            if not o.skip_record_metadata:
                parts.append(f"{prefix}offset: {r.offset} {tname}: {ts} keySize: {key_size} valueSize: {value_size}")
                prefix = " "
                if batch.magic >= 2:
                    parts.append(f" sequence: {record_sequence(batch, r)} headerKeys: "
                                 f"[{','.join(k for k, _ in r.headers)}]")
                if legacy_crcs is not None and i < len(legacy_crcs):
                    # Kafka's format string ends in "}}", so its line carries a stray "}"
                    parts.append(f" isValid: {_b(legacy_crcs[i][1])} crc: {legacy_crcs[i][0]}}}")
                if controls is not None:
                    c = controls[i]
                    text = raft_snapshot.control_record_text(c.type, r.value)
                    if c.type in (W.ControlRecordType.ABORT, W.ControlRecordType.COMMIT):
                        parts.append(f" endTxnMarker: {c.type.name} coordinatorEpoch: {c.coordinator_epoch}")
                    elif text is not None:
                        parts.append(f" {text}")
                    else:
                        parts.append(f" controlType: {c.type.name}({_control_type_id(r)})")
            if o.printing_data and controls is None:
                key, payload = self._decode_text(r)
                if key is not None:
                    parts.append(f"{prefix}key: {key}")
                    prefix = " "
                if payload is not None:
                    parts.append(f"{prefix}payload: {payload}")  # 4.x: "| payload" with no metadata or key
            self._line("".join(parts))
        return last_offset

    # -- .index
    # Index files are read by kbatch.log.index, which stops at a preallocated file's zero-filled tail
    # as DumpLogSegments does; --index-sanity-check runs its sanity_check (Kafka's, plus sorted keys).
    def dump_index(self, path: str) -> None:
        o = self.o
        index = OffsetIndex.open(path)
        base = index.base_offset
        if o.json:
            self._obj(type="file", file=path, kind="offset_index", base_offset=base, size=index.file_length,
                      entries=len(index))
        # DumpLogSegments opens the index read-only, so its entry count is the file's length / 8: a
        # file shorter than one entry is "empty" (said before a sanity check), and a preallocated,
        # zero-filled one (a killed broker's active segment) has its first slot, (base, 0), printed
        entries: list[tuple[int, int]] = list(index)
        if index.file_length < W.OFFSET_INDEX_ENTRY_SIZE:
            if not o.json:
                self._line(f"{path} is empty.")
            index.close()
            return
        if o.index_sanity_check:
            self._sanity(path, index)
            return
        if not entries:
            entries = [(base, 0)]
        log = open_records(sibling(path, W_LOG))
        try:
            verdicts = self._rule_findings(path, check_offset_index, entries, log)
            for slot, (offset, position) in enumerate(entries):
                batch = first_batch_at(log, position, o.max_message_size)
                log_offset = -1 if batch is None else batch.last_offset
                batch = None
                finding = verdicts.get(slot)
                if log_offset != offset and (finding is None or finding.problem):
                    self.result.problems += 1
                    self._index_mismatches.setdefault(path, []).append((offset, log_offset))
                elif finding is not None and finding.problem:
                    self._problem(path, "index_entry", finding.message, position=finding.position)
                elif finding is not None:
                    self._note(finding)
                if not o.verify_index_only:
                    if o.json:
                        self._obj(type="index_entry", file=path, offset=offset, position=position)
                    else:
                        self._line(f"offset: {offset} position: {position}")
        finally:
            log.close()
        index.close()

    # -- .timeindex
    def dump_time_index(self, path: str) -> None:
        o = self.o
        tindex = TimeIndex.open(path)
        base = tindex.base_offset
        if o.json:
            self._obj(type="file", file=path, kind="time_index", base_offset=base, size=tindex.file_length,
                      entries=len(tindex))
        if o.index_sanity_check:
            if tindex.file_length < W.TIME_INDEX_ENTRY_SIZE:  # empty before any sanity check, as DumpLogSegments
                if not o.json:
                    self._line(f"{path} is empty.")
                tindex.close()
                return
            self._sanity(path, tindex)
            return
        index_path = sibling(path, ".index")
        index = OffsetIndex.open(index_path, base) if _fs.exists(index_path) else OffsetIndex(base)
        apath = path
        prev_ts = None  # NO_TIMESTAMP in Kafka; the batch's time floor here (extended batches)
        log = open_records(sibling(path, W_LOG))
        try:
            entries: list[tuple[int, int]] = list(tindex)
            if not entries and tindex.file_length >= W.TIME_INDEX_ENTRY_SIZE:
                entries = [(0, base)]  # a preallocated, zero-filled file: DumpLogSegments prints its first slot
            verdicts = self._rule_findings(path, check_time_index, entries, log)
            for slot, (ts, offset) in enumerate(entries):
                position = index.lookup(offset).position
                batch, at = batch_containing(log, position, offset)
                finding = verdicts.get(slot)
                flagged = self.result.problems
                if finding is not None and not finding.problem:
                    self._note(finding)  # a form an older broker writes; kafka-dump-log would flag it
                elif batch is None:
                    self.result.problems += 1
                    self._ts_not_found.setdefault(apath, []).append((offset, -1))
                elif batch.last_offset != offset:
                    self.result.problems += 1
                    self._ts_not_found.setdefault(apath, []).append((offset, batch.last_offset))
                else:
                    try:
                        log_ts = max_record_timestamp(batch)
                    except KBatchError as e:
                        self._problem(path, "corrupt_records", f"Cannot decode the batch at byte {at} "
                                      f"of {sibling(path, W_LOG)}: {e}", position=at)
                        log_ts = ts
                    if log_ts != ts:
                        self.result.problems += 1
                        self._ts_mismatch.setdefault(apath, []).append((ts, log_ts))
                    prev = time_floor(batch.magic, batch.attributes) if prev_ts is None else prev_ts
                    if prev >= ts:
                        self.result.problems += 1
                        self._ts_out_of_order.setdefault(apath, []).append((ts, prev))
                if finding is not None and finding.problem and self.result.problems == flagged:
                    # damage kafka-dump-log's checks do not see (the segment's running max)
                    self._problem(path, "time_index_entry", finding.message, position=finding.position)
                batch = None
                if not o.verify_index_only:
                    if o.json:
                        self._obj(type="time_index_entry", file=path, timestamp=ts, offset=offset)
                    else:
                        self._line(f"timestamp: {ts} offset: {offset}")
                prev_ts = ts
        finally:
            log.close()
        index.close()
        tindex.close()

    # -- .txnindex
    def dump_txn_index(self, path: str) -> None:
        txns = TransactionIndex.open(path)
        if self.o.json:
            self._obj(type="file", file=path, kind="txn_index", entries=len(txns))
        for t in txns:
            if self.o.json:
                self._obj(type="aborted_txn", file=path, version=t.version, producer_id=t.producer_id,
                          first_offset=t.first_offset, last_offset=t.last_offset,
                          last_stable_offset=t.last_stable_offset)
            else:
                self._line(f"version: {t.version} producerId: {t.producer_id} firstOffset: {t.first_offset} "
                           f"lastOffset: {t.last_offset} lastStableOffset: {t.last_stable_offset}")

    # -- record decoders (--offsets-decoder, --transaction-log-decoder, --cluster-metadata-decoder)
    def _decode_text(self, r: Record) -> tuple[str | None, str | None]:
        """(key text or None, payload text or None) as kafka-dump-log's message parsers print them."""
        d = self.o.decoder
        if d is None:  # StringDecoder
            return (None if r.key is None else java_utf8(bytes(r.key)),
                    None if r.value is None else java_utf8(bytes(r.value)))
        if d == "cluster-metadata":
            return None, format_metadata_record(r.value, r.offset)
        if d == "offsets":
            return format_offsets_record(r.key, r.value, r.offset)
        try:
            return format_transaction_record(r.key, r.value)
        except KBatchError as e:
            return f"Error at offset {r.offset}, skipping. {e}", None

    def _decode_json(self, r: Record) -> dict[str, Any]:
        """The decoded key and value as JSON values (objects where the decoder prints JSON)."""
        d = self.o.decoder
        try:
            if d == "cluster-metadata":
                return {"key": None, "value": metadata_record_json(r.value)}
            if d == "offsets":
                k, v = group_record_json(r.key, r.value)
                return {"key": k, "value": v}
            kt, vt = format_transaction_record(r.key, r.value)
            return {"key": kt, "value": vt}
        except KBatchError as e:
            return {"error": str(e), "position": e.position}

    # -- broker files beside the segments
    def dump_producer_snapshot(self, path: str) -> None:
        data = _fs.read_bytes(path)  # open_regular: a FIFO named like a snapshot is an error, not a hang
        try:
            entries = producer_state.read_snapshot(data)
        except KBatchError as e:
            self._problem(path, "corrupt_snapshot", str(e), position=e.position)
            return
        if self.o.json:
            self._obj(type="file", file=path, kind="producer_snapshot", offset=base_offset_from_name(path),
                      entries=len(entries))
        for entry in entries:
            if self.o.json:
                self._obj(type="producer_state", file=path, **entry._asdict())
            else:
                self._line(producer_state.format_entry(entry))

    def dump_leader_epoch_checkpoint(self, path: str) -> None:
        entries = C.read_leader_epoch_checkpoint(path)
        if self.o.json:
            self._obj(type="file", file=path, kind="leader_epoch_checkpoint", entries=len(entries))
        for e in entries:
            if self.o.json:
                self._obj(type="leader_epoch", file=path, epoch=e.epoch, start_offset=e.start_offset)
            else:
                self._line(f"epoch: {e.epoch} startOffset: {e.start_offset}")

    def dump_offset_checkpoint(self, path: str) -> None:
        offsets = C.read_offset_checkpoint(path)
        if self.o.json:
            self._obj(type="file", file=path, kind="offset_checkpoint", entries=len(offsets))
        for (topic, partition), offset in offsets.items():
            if self.o.json:
                self._obj(type="checkpoint_offset", file=path, topic=topic, partition=partition, offset=offset)
            else:
                self._line(f"topic: {topic} partition: {partition} offset: {offset}")

    def dump_partition_metadata(self, path: str) -> None:
        m = C.read_partition_metadata(path)
        if self.o.json:
            self._obj(type="partition_metadata", file=path, version=m.version, topic_id=m.topic_id)
        else:
            self._line(f"version: {m.version} topicId: {m.topic_id}")

    def _rule_findings(self, path: str, check: IndexCheck, entries: list[tuple[int, int]],
                       records: FileRecords) -> dict[int, IndexFinding]:
        """{slot: IndexFinding} from kbatch.log.index_rules: which entries are damage and which are
        forms an older broker writes."""
        sb = SegmentBatches(records)
        try:
            return {f.slot: f for f in check(os.fspath(path), entries, sb)}
        finally:
            del sb

    def _note(self, finding: IndexFinding) -> None:
        if self.o.json:
            self._obj(type="note", file=finding.file, kind="older_broker_index_entry", slot=finding.slot,
                      position=finding.position, message=finding.message)
        else:
            self._notes.setdefault(finding.file, []).append(finding.message)

    def _sanity(self, path: str, index: OffsetIndex | TimeIndex) -> None:
        try:
            index.sanity_check()
            failure = None
        except KBatchError as e:
            failure = str(e)
        finally:
            index.close()
        if failure is None:
            if self.o.json:
                self._obj(type="sanity_check", file=path, passed=True)
            else:
                self._line(f"{path} passed sanity check.")
        else:
            self._problem(path, "sanity_check", failure)

    # -- reports after all files (stderr, like DumpLogSegments)
    def finish(self) -> None:
        if self.o.json:
            for p, items in self._index_mismatches.items():
                for idx, log in items:
                    self._obj(type="problem", file=p, kind="index_mismatch", index_offset=idx, log_offset=log)
            for p, items in self._ts_mismatch.items():
                for idx, log in items:
                    self._obj(type="problem", file=p, kind="time_index_mismatch", index_timestamp=idx,
                              log_timestamp=log)
            for p, items in self._ts_out_of_order.items():
                for idx, prev in items:
                    self._obj(type="problem", file=p, kind="time_index_out_of_order", index_timestamp=idx,
                              previous_timestamp=prev)
            for p, items in self._ts_not_found.items():
                for idx, log in items:
                    self._obj(type="problem", file=p, kind="time_index_offset_not_found", index_offset=idx,
                              log_offset=log)
            for p, items in self._non_consecutive.items():
                for before, after in items:
                    self._obj(type="non_consecutive", file=p, previous_offset=before, offset=after)
            return
        w = self.err.write
        a: Callable[[str], str] = _abs  # DumpLogSegments names these files by their absolute paths
        for p, items in self._index_mismatches.items():
            w(f"Mismatches in :{a(p)}\n")
            for idx, log in reversed(items):  # Kafka prepends to a list
                w(f"  Index offset: {idx}, log offset: {log}\n")
        for p, items in self._ts_mismatch.items():
            w(f"Found timestamp mismatch in :{a(p)}\n")
            for idx, log in items:
                w(f"  Index timestamp: {idx}, log timestamp: {log}\n")
        for p, items in self._ts_out_of_order.items():
            w(f"Found out of order timestamp in :{a(p)}\n")
            for idx, prev in items:
                w(f"  Index timestamp: {idx}, Previously indexed timestamp: {prev}\n")
        for items in self._ts_not_found.values():
            w("The following indexed offsets are not found in the log.\n")
            for idx, log in items:
                w(f"Indexed offset: {idx}, found log offset: {log}\n")
        for p, items in self._non_consecutive.items():
            w(f"Non-consecutive offsets in {a(p)}\n")
            for x, y in sorted(items):  # 4.x: ascending (3.x: newest first)
                w(f"  {x} is followed by {y}\n")
        for p, notes in self._notes.items():
            w(f"Valid index entries kafka-dump-log would flag (older brokers, followers; not problems) in :{a(p)}\n")
            for msg in notes:
                w(f"  {msg}\n")


_REPL = "\ufffd"


def _cont(b: int) -> bool:
    return b & 0xC0 == 0x80


def java_utf8(data: bytes) -> str:
    """`data` decoded as the JVM's `new String(bytes, UTF_8)` decodes it (kafka-dump-log's
    StringDecoder): valid UTF-8 as Python decodes it; a malformed sequence becomes one U+FFFD for
    as many bytes as the JDK's decoder counts malformed, which is not always Unicode's "maximal
    subpart" that Python's errors="replace" follows (bytes ED B5 56: Java "\ufffdV", Python
    "\ufffd\ufffdV"; ED A0 80, a surrogate: one U+FFFD, Python three)."""
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        pass
    out: list[str] = []
    n, i = len(data), 0
    while i < n:
        b1 = data[i]
        if b1 < 0x80:
            out.append(chr(b1))
            i += 1
        elif 0xC2 <= b1 <= 0xDF:  # two bytes
            if i + 1 < n and _cont(data[i + 1]):
                out.append(chr((b1 & 0x1F) << 6 | data[i + 1] & 0x3F))
                i += 2
            else:
                out.append(_REPL)
                i += 1
        elif 0xE0 <= b1 <= 0xEF:  # three bytes
            if i + 2 < n:
                b2, b3 = data[i + 1], data[i + 2]
                bad2 = (b1 == 0xE0 and b2 & 0xE0 == 0x80) or not _cont(b2)
                if bad2 or not _cont(b3):
                    out.append(_REPL)
                    i += 1 if bad2 else 2
                else:
                    c = (b1 & 0x0F) << 12 | (b2 & 0x3F) << 6 | b3 & 0x3F
                    out.append(_REPL if 0xD800 <= c <= 0xDFFF else chr(c))  # a surrogate: 3 bytes, one U+FFFD
                    i += 3
            else:  # the input ends inside the sequence
                out.append(_REPL)
                if i + 1 < n and ((b1 == 0xE0 and data[i + 1] & 0xE0 == 0x80) or not _cont(data[i + 1])):
                    i += 1
                else:
                    break
        elif 0xF0 <= b1 <= 0xF7:  # four bytes
            if i + 3 < n:
                b2, b3, b4 = data[i + 1], data[i + 2], data[i + 3]
                c = (b1 & 0x07) << 18 | (b2 & 0x3F) << 12 | (b3 & 0x3F) << 6 | b4 & 0x3F
                if _cont(b2) and _cont(b3) and _cont(b4) and 0x10000 <= c <= 0x10FFFF:
                    out.append(chr(c))
                    i += 4
                    continue
                out.append(_REPL)
                if (b1 > 0xF4 or (b1 == 0xF0 and not 0x90 <= b2 <= 0xBF) or (b1 == 0xF4 and b2 & 0xF0 != 0x80)
                        or not _cont(b2)):
                    i += 1
                else:
                    i += 2 if not _cont(b3) else 3
            else:  # the input ends inside the sequence
                out.append(_REPL)
                if b1 > 0xF4 or (i + 1 < n and ((b1 == 0xF0 and not 0x90 <= data[i + 1] <= 0xBF)
                                                 or (b1 == 0xF4 and data[i + 1] & 0xF0 != 0x80)
                                                 or not _cont(data[i + 1]))):
                    i += 1
                    continue
                i += 2
                if i < n and not _cont(data[i]):
                    continue
                break
        else:  # a continuation byte, C0, C1 or F8-FF where a sequence should start
            out.append(_REPL)
            i += 1
    return "".join(out)


def _b(v: bool) -> str:
    return "true" if v else "false"


def _control_type_id(record: Record) -> int:
    key = record.key
    if key is None or len(key) < 4:
        return -1
    type_id: int = struct.unpack_from(">h", key, 2)[0]
    return type_id


def dump(paths: Iterable[PathLike], options: DumpOptions | None = None, out: IO[str] | None = None,
         err: IO[str] | None = None, progress: Callable[[int], object] | None = None) -> DumpResult:
    """Dump files (.log, .index, .timeindex, .txnindex) as DumpLogSegments prints them."""
    return Dumper(options or DumpOptions(), out, err, progress).dump(paths)
