"""A partition's log directory (Kafka's UnifiedLog / LocalLog): reading, lookups by time, writing.

- `Log.open(dir)` reads a `<topic>-<partition>` directory of 20-digit segments (other broker
  files are ignored) and changes nothing on disk: missing, corrupt or contradicted indexes are
  rebuilt in memory, bytes that are not complete batches are reported in `Log.problems`. It
  opens every segment's .log at once and reads those files through pread, so a concurrent
  writer's retention or compaction leaves it with a consistent old view, and a truncation gives
  a kbatch error, never SIGBUS.
- `Log.open(dir, config, writable=True)` / `Log.create(dir, config)` open for writing: the
  directory's `.lock` is taken (a second writer, in this process or another, or a running
  broker holding the log directory is refused), leftovers of interrupted writes are removed
  (log_loader), and the log is recovered like a broker recovers it (checkpoints.RecoveryCheckpoint
  says how much: after an unclean shutdown every segment from the recovery point on).
- lookups follow ListOffsets (kafka-format.md §5.4, KIP-79), with DESIGN.md decision 3 (special
  targets are OffsetSpec members) and decision 5 (extended batches index negative timestamps).
- writing follows UnifiedLog.append / maybeRoll / deleteOldSegments (§6.3); an append is all or
  nothing (a failed write is cut back off and the Log stays usable).
"""
from __future__ import annotations

import errno
import itertools
import logging
import os
import random
import re
import time
from dataclasses import dataclass, field, fields
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any, NamedTuple, TypeVar, overload

import numpy as np

from . import files as _files
from .. import _fs
from .. import _wire as W
from . import loader as log_loader
from .._wire import OffsetSpec
from .checkpoints import RecoveryCheckpoint
from ..errors import (CorruptRecordError, FileChangedError, InvalidConfigurationError, InvalidRequestError, KBatchError,
                     RecordTooLargeError, StorageError, UnknownTopicOrPartitionError,
                     UnsupportedForMessageFormatError)
from .index import AbortedTxn, OffsetIndex, TimeIndex
from . import producer_state as _txns

if TYPE_CHECKING:
    from ..record.batch import Batch
    from types import TracebackType

    import numpy.typing as npt

    from .._typing import Buffer, PathLike, TableLike
    from .leader_epoch import LeaderEpochFileCache
    from ..record.file_records import Window
    from .fetch import FetchResult
    from .segment import SegmentMark, SegmentSettings
    from .validator import AppendInfo, LogValidator

    #: an offsets_for_times target: an int64 timestamp or EARLIEST / LATEST / MAX_TIMESTAMP
    Target = int | np.integer[Any] | OffsetSpec
from ..record.batch import scan_headers
from ..record.file_records import FileRecords, _batch_at, _crc_error
from ..record.file_records import _FIRST_WINDOW as segment_first_window
from .segment import LogSegment, MaxTimestampTracker, UnreadRange, build_indexes

logger = logging.getLogger("kbatch.log")
_T = TypeVar("_T")


class OffsetAndTimestamp(NamedTuple):
    """A lookup answer (Kafka's OffsetAndTimestamp). timestamp is None for EARLIEST / LATEST
    answers; leader_epoch is None when unknown. KIP-228: the timestamp may be negative."""

    offset: int
    timestamp: int | None
    leader_epoch: int | None = None


# ------------------------------------------------------------------------------------ config
_TIMESTAMP_TYPES = {"createtime": W.TimestampType.CREATE_TIME, "logappendtime": W.TimestampType.LOG_APPEND_TIME}
_CODECS = {"producer": None, "uncompressed": W.Compression.NONE, "none": W.Compression.NONE,
           "gzip": W.Compression.GZIP, "snappy": W.Compression.SNAPPY, "lz4": W.Compression.LZ4,
           "zstd": W.Compression.ZSTD}


#: every topic-level config name Kafka accepts (TopicConfig, kafka-configs --entity-type topics);
#: those LogConfig has no field for are kept in LogConfig.extra
KAFKA_TOPIC_CONFIGS = frozenset({
    "cleanup.policy", "compression.type", "compression.gzip.level", "compression.lz4.level", "compression.zstd.level",
    "delete.retention.ms", "file.delete.delay.ms", "flush.messages", "flush.ms",
    "follower.replication.throttled.replicas", "index.interval.bytes", "leader.replication.throttled.replicas",
    "local.retention.bytes", "local.retention.ms", "max.compaction.lag.ms", "max.message.bytes",
    "message.downconversion.enable", "message.format.version", "message.timestamp.after.max.ms",
    "message.timestamp.before.max.ms", "message.timestamp.difference.max.ms", "message.timestamp.type",
    "min.cleanable.dirty.ratio", "min.compaction.lag.ms", "min.insync.replicas", "preallocate",
    "remote.storage.enable", "remote.log.copy.disable", "remote.log.delete.on.disable", "retention.bytes",
    "retention.ms", "segment.bytes", "segment.index.bytes", "segment.jitter.ms", "segment.ms",
    "unclean.leader.election.enable",
})


def _unknown_config(key: str, known: Mapping[str, Any]) -> InvalidConfigurationError:
    import difflib

    names = sorted(KAFKA_TOPIC_CONFIGS | {n.replace("_", ".") for n in known} | {"message.timestamp.extended"})
    close = difflib.get_close_matches(key.replace("_", "."), names, n=1, cutoff=0.6)
    hint = f" (did you mean {close[0]}?)" if close else ""
    return InvalidConfigurationError(f"Unknown topic config {key}{hint}", expected="a Kafka topic config name",
                                     found=key)


@dataclass
class LogConfig:
    """A topic's log configuration: Kafka's topic-config names in snake_case, Kafka's defaults.

    message_timestamp_*_max_ms default to Long.MAX_VALUE as in Kafka 3.6-3.9 (Kafka 4.0 sets
    after.max.ms to one hour). timestamp_extended is the KIP-228 "new broker" switch (batches
    written with bit 7, DESIGN.md decision 1); off by default so bytes are Kafka's.
    """

    segment_bytes: int = 1073741824
    segment_ms: int = 604800000
    segment_jitter_ms: int = 0
    segment_index_bytes: int = W.DEFAULT_SEGMENT_INDEX_BYTES
    index_interval_bytes: int = W.DEFAULT_INDEX_INTERVAL_BYTES
    retention_ms: int = 604800000
    retention_bytes: int = -1
    message_timestamp_type: W.TimestampType = W.TimestampType.CREATE_TIME
    message_timestamp_before_max_ms: int = W.INT64_MAX
    message_timestamp_after_max_ms: int = W.INT64_MAX
    cleanup_policy: str = "delete"
    compression_type: str = "producer"
    compression_gzip_level: int = W.GZIP_LEVELS[2]
    compression_lz4_level: int = W.LZ4_LEVELS[2]
    compression_zstd_level: int = W.ZSTD_LEVELS[2]
    max_message_bytes: int = W.DEFAULT_MAX_MESSAGE_BYTES
    timestamp_extended: bool = False
    extra: dict[str, Any] = field(default_factory=dict, repr=False)  # unknown names, with their values as given

    def __post_init__(self) -> None:
        t = self.message_timestamp_type
        if isinstance(t, str):
            key = t.replace("_", "").replace(" ", "").lower()
            if key not in _TIMESTAMP_TYPES:
                raise InvalidConfigurationError("Invalid message.timestamp.type",
                                                expected="CreateTime or LogAppendTime", found=t)
            self.message_timestamp_type = _TIMESTAMP_TYPES[key]
        else:
            self.message_timestamp_type = W.TimestampType(t)
        if str(self.compression_type).lower() not in _CODECS:
            raise InvalidConfigurationError("Invalid compression.type", expected=", ".join(_CODECS),
                                            found=self.compression_type)
        from ..record.compression import check_level
        for codec in (W.Compression.GZIP, W.Compression.LZ4, W.Compression.ZSTD):
            name = f"compression_{codec.name.lower()}_level"
            try:
                check_level(codec, getattr(self, name))
            except InvalidConfigurationError as e:
                raise InvalidConfigurationError(f"Invalid value for {name.replace('_', '.')}", expected=e.expected,
                                                found=e.found) from None
        policies = self.cleanup_policies
        if not policies or not policies <= {"delete", "compact"}:
            raise InvalidConfigurationError("Invalid cleanup.policy", expected="delete and/or compact",
                                            found=self.cleanup_policy)
        # Kafka's int configs: segment.bytes above 2147483647 would need positions .index cannot hold
        for name, low, high in (("segment_bytes", 14, W.INT32_MAX), ("segment_ms", 1, W.INT64_MAX),
                                ("segment_jitter_ms", 0, W.INT64_MAX),
                                ("segment_index_bytes", W.TIME_INDEX_ENTRY_SIZE * 2, W.INT32_MAX),
                                ("index_interval_bytes", 0, W.INT32_MAX), ("max_message_bytes", 0, W.INT32_MAX)):
            v = getattr(self, name)
            if not isinstance(v, int) or not low <= v <= high:
                raise InvalidConfigurationError(f"Invalid value for {name.replace('_', '.')}",
                                                expected=f"an integer in [{low}, {high}]", found=v)

    @property
    def cleanup_policies(self) -> set[str]:
        p = self.cleanup_policy
        items = p if isinstance(p, (list, tuple, set)) else str(p).split(",")
        return {s.strip().lower() for s in items if s.strip()}

    @property
    def compression(self) -> W.Compression | None:
        """The topic codec (a Compression), or None for compression.type=producer."""
        return _CODECS[str(self.compression_type).lower()]

    @property
    def compression_level(self) -> int | None:
        """The topic codec's level (compression.<codec>.level), None for producer, none and snappy.
        Batches rebuilt for a "producer" topic keep their codec at its default level, as Kafka's
        BrokerCompressionType.targetCompression does."""
        codec = self.compression
        if codec in (W.Compression.GZIP, W.Compression.LZ4, W.Compression.ZSTD):
            level: int = getattr(self, f"compression_{codec.name.lower()}_level")
            return level
        return None

    @classmethod
    def from_properties(cls, props: Mapping[str, Any]) -> "LogConfig":
        """From Kafka's dotted names ("segment.bytes": "1024", ...) or snake_case names; values
        may be strings as in a .properties file. Kafka's topic configs that kbatch has no use for
        (min.insync.replicas, ...) are kept in `extra`; a name Kafka does not know either is refused
        with InvalidConfigurationError naming the closest valid one, as kafka-configs refuses it."""
        known = {f.name: f for f in fields(cls) if f.name != "extra"}
        kw: dict[str, Any] = {}
        extra: dict[str, Any] = {}
        for key, value in props.items():
            name = key.replace(".", "_").replace("-", "_")
            if name == "message_timestamp_extended":
                name = "timestamp_extended"
            if name not in known:
                if key not in KAFKA_TOPIC_CONFIGS and name.replace("_", ".") not in KAFKA_TOPIC_CONFIGS:
                    raise _unknown_config(key, known)
                extra[key] = value
                continue
            default = known[name].default
            if isinstance(default, bool):
                if isinstance(value, str):
                    if value.lower() not in ("true", "false"):
                        raise InvalidConfigurationError(f"Invalid value for {key}", expected="true or false",
                                                        found=value)
                    value = value.lower() == "true"
                kw[name] = bool(value)
            elif isinstance(default, int) and name != "message_timestamp_type":
                try:
                    kw[name] = int(value)
                except (TypeError, ValueError):
                    raise InvalidConfigurationError(f"Invalid value for {key}", expected="an integer",
                                                    found=value) from None
            else:
                kw[name] = value
        return cls(**kw, extra=extra)

    def validator(self, topic_partition: str | None = None) -> LogValidator:
        from .validator import LogValidator
        return LogValidator(self.message_timestamp_type, self.message_timestamp_before_max_ms,
                            self.message_timestamp_after_max_ms, compacted="compact" in self.cleanup_policies,
                            max_message_bytes=self.max_message_bytes, compression=self.compression,
                            compression_level=self.compression_level, timestamp_extended=self.timestamp_extended, topic_partition=topic_partition)


# ------------------------------------------------------------------------------------ reports
class RecoveryReport(NamedTuple):
    """What opening a log for writing changed: bytes cut from a torn/corrupt tail (and why), the
    segments whose indexes were rewritten, the segments recovered (CRC-checked and re-indexed,
    because the last shutdown was not clean), and the leftovers removed from the directory."""

    truncated_bytes: int
    truncation_reason: str | None
    rebuilt_indexes: tuple[int, ...]          # base offsets
    recovered_segments: tuple[int, ...] = ()  # base offsets
    cleaned_up: tuple[str, ...] = ()          # file names


class DeletedSegment(NamedTuple):
    base_offset: int
    next_offset: int
    size: int
    largest_timestamp: int
    reason: str


def _now(now_ms: int | None) -> int:
    return int(time.time() * 1000) if now_ms is None else int(now_ms)


def _raise_open_files_limit() -> bool:
    """Raise this process's soft limit on open files to the hard limit (as a broker's start script
    asks for); True if that gave more room."""
    try:
        import resource
        soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
        if hard == resource.RLIM_INFINITY or hard > soft:
            resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
            return True
    except (ImportError, ValueError, OSError):
        pass
    return False


def _open_segments(path: str, seg_kw: SegmentSettings, writable_last: bool = False,
                   attempts: int = 5) -> list[LogSegment]:
    """Open every segment's .log now, so the Log keeps reading these files whatever retention or
    compaction does later. A segment deleted between listing and opening (a retention race) makes
    the listing start again; non-regular files named like segments raise StorageError."""
    for attempt in range(attempts):
        bases = _files.list_segment_bases(path)
        segs: list[LogSegment] = []
        try:
            for i, b in enumerate(bases):
                segs.append(LogSegment.open(path, b, **seg_kw, writable=writable_last and i == len(bases) - 1))
            return segs
        except FileNotFoundError as e:
            for seg in segs:
                seg.release()
            if attempt == attempts - 1:
                raise FileChangedError(f"segments kept disappearing while the log was opened ({e.filename}); "
                                       f"is retention running with a very short retention.ms?", path=path) from None
        except OSError as e:
            for seg in segs:
                seg.release()
            if e.errno != errno.EMFILE or attempt == attempts - 1 or not _raise_open_files_limit():
                if e.errno == errno.EMFILE:
                    raise StorageError(f"too many open files: a Log keeps the .log of each of its {len(bases)} segments "
                                       f"open; raise the limit (ulimit -n)", path=path, errno=e.errno) from None
                raise
        except BaseException:
            for seg in segs:
                seg.release()
            raise
    return []


def _broker_layout(path: str) -> bool:
    """Whether a local directory holds broker-named segments only (no tiered-storage copies)."""
    from .layout import BROKER, _layout_of

    try:
        return _layout_of(os.listdir(path)) == BROKER
    except OSError:
        return True  # let the broker path report it


_SEGMENT_NAME = re.compile(r"^\d+(-[A-Za-z0-9_-]+)?\.log$")


def _check_partition_dir(path: str, writable: bool) -> None:
    """Refuse a local directory that is not a partition (UnknownTopicOrPartitionError): one holding
    partition directories (a broker's log directory), or, for reading, one with no segment that is
    not named <topic>-<partition> either (an empty partition is named so; a copy of one with
    segments may be named anything)."""
    try:
        names = os.listdir(path)
    except OSError:
        return  # the segment listing reports it
    parts = sorted(n for n in names if _files.parse_partition_dir(n) and os.path.isdir(os.path.join(path, n)))
    has_segments = any(_SEGMENT_NAME.match(n) for n in names)  # broker or tiered-storage names
    if parts and not has_segments:
        raise UnknownTopicOrPartitionError(
            "A log directory, not a partition: open one of its partitions", expected="a <topic>-<partition> directory",
            found=f"{path} holding {', '.join(parts[:3])}{', ...' if len(parts) > 3 else ''}")
    if not writable and not has_segments and _files.parse_partition_dir(os.path.basename(path.rstrip(os.sep))) is None:
        raise UnknownTopicOrPartitionError("Not a partition directory: no segments, and not named <topic>-<partition>",
                                           expected="a partition directory", found=path)


# ------------------------------------------------------------------------------------ the log
class Log:
    """A partition directory of segments (see the module docstring)."""

    def __init__(self, directory: PathLike, segments: list[LogSegment], config: LogConfig | None, writable: bool,
                 lock: _files.DirLock | None = None) -> None:
        self.directory = os.fspath(directory)
        parsed = _files.parse_partition_dir(self.directory)
        self.topic: str | None
        self.partition: int | None
        self.topic, self.partition = parsed if parsed else (None, None)
        self.config = config or LogConfig()
        self.writable = writable
        self.segments = segments
        self.log_start_offset = segments[0].base_offset if segments else 0
        self.recovery = RecoveryReport(0, None, ())
        self._rng = random.Random()
        self._validator: LogValidator | None = None
        self._next_offset: int | None = None
        self._lock = lock
        self._failed: str | None = None            # why writing stopped (a write that could not be undone)
        self._recovery_point: int | None = None    # what the checkpoint file says (writers)
        self.partition_leader_epoch: int | None = None  # written into appended batches when set
        self._epoch_cache: LeaderEpochFileCache | None = None  # loaded on first use
        self.layout = "broker"              # or a tiered-storage layout (kbatch.log.layout)
        self._listing_problems: list[str] = []  # tiered copies left out when the directory was listed
        self._group: AppendGroup | None = None  # the all-or-nothing group open on this Log, if any
        self._ongoing: _txns.OngoingTxns | None = None  # open transactions at the log end (writers; on first use)

    # ---- opening
    @classmethod
    def open(cls, path: PathLike, config: LogConfig | None = None, *, writable: bool = False,
             now_ms: int | None = None) -> "Log":
        """Open a partition directory: read-only (nothing on disk changes) unless writable=True.

        Writing takes the directory's `.lock` (LogDirectoryLockedError when another writer or a
        running broker holds it), cleans up what interrupted writes left, and recovers as a broker
        does after the last shutdown (see checkpoints.RecoveryCheckpoint)."""
        path = path if _fs.is_remote(path) else _fs.local_path(path)
        if not _fs.isdir(path):
            raise UnknownTopicOrPartitionError("No such log directory", expected="a partition directory",
                                               found=path)
        cfg = config or LogConfig()
        seg_kw: SegmentSettings = dict(index_interval_bytes=cfg.index_interval_bytes,
                                      max_index_size=cfg.segment_index_bytes, created_ms=_now(now_ms))
        remote = _fs.is_remote(path)
        if not remote:
            _check_partition_dir(path, writable)
        if remote or not _broker_layout(path):
            if writable:
                raise StorageError("object storage and tiered-storage copies are read-only for kbatch: Log.open(path) "
                                   "reads them; write to a local partition directory", path=path)
            return cls._open_listed(path, cfg, seg_kw)
        if not writable:
            log = cls(path, _open_segments(path, seg_kw), cfg, False)
            log._load_log_start_offset()
            return log
        lock = _files.DirLock.acquire(path, "open the log for writing")
        segments: list[LogSegment] = []
        try:
            cleaned = tuple(log_loader.clean_directory(path))
            checkpoint = RecoveryCheckpoint.read(path)
            segments = _open_segments(path, seg_kw, writable_last=True)
            if not segments:
                segments = [LogSegment.create(path, 0, **seg_kw)]
                _files.fsync_dir(path)
            log = cls(path, segments, cfg, True, lock)
            log._load_log_start_offset()
            log._recover(checkpoint, cleaned)
            # LogLoader: the epoch cache follows the recovered log's start and end
            cache = log.leader_epoch_cache
            cache.truncate_from_end(log.end_offset())
            cache.truncate_from_start(log.log_start_offset)
        except BaseException:
            for seg in segments:
                seg.release()  # nothing is written on the way out of a failed open
            lock.release()
            raise
        return log

    @classmethod
    def _open_listed(cls, path: str, cfg: LogConfig, seg_kw: SegmentSettings) -> "Log":
        """A read-only Log over a remote directory or a tiered-storage layout (kbatch.log.layout): one
        listing names every segment and its files' sizes; objects are read by ranges when used."""
        from . import layout

        listing = layout.list_segments(path)
        segments: list[LogSegment] = []
        try:
            for f in listing.segments:
                if f.base_offset is None:  # list_segments names segments by their base offsets
                    raise StorageError("a segment without a base offset", path=f.path(".log"))
                segments.append(LogSegment(path, f.base_offset, files=f, **seg_kw))
        except BaseException:
            for seg in segments:
                seg.release()
            raise
        log = cls(path, segments, cfg, False)
        part = layout.describe(path, [])
        log.topic, log.partition = part.topic, part.partition
        log.layout = listing.layout
        log._listing_problems = list(listing.problems)
        for p in listing.problems:
            logger.warning("%s", p)
        if listing.layout == layout.BROKER:
            log._load_log_start_offset()
        return log

    def _load_log_start_offset(self) -> None:
        """A broker's log start offset is max(its log-start-offset-checkpoint entry, the first segment's
        base offset) (LogLoader): DeleteRecords moves it inside a segment."""
        from .checkpoints import LOG_START_OFFSET_CHECKPOINT, read_offset_checkpoint

        if self.topic is None or self.partition is None or not self.segments:
            return
        path = _fs.join(_fs.dirname(self.directory), LOG_START_OFFSET_CHECKPOINT)
        if _fs.exists(path):
            checkpointed = read_offset_checkpoint(path).get((self.topic, self.partition))
            if checkpointed is not None:
                self.log_start_offset = max(checkpointed, self.segments[0].base_offset)

    @classmethod
    def create(cls, path: PathLike, config: LogConfig | None = None, *, now_ms: int | None = None) -> "Log":
        """Create an empty partition directory (or fail if it already holds segments), open for writing."""
        path = os.fspath(path)
        os.makedirs(path, exist_ok=True)
        if _files.list_segment_bases(path):
            raise InvalidRequestError("Log directory already holds segments", expected="an empty directory",
                                      found=path)
        return cls.open(path, config or LogConfig(), writable=True, now_ms=now_ms)

    def _recover(self, checkpoint: RecoveryCheckpoint, cleaned: tuple[str, ...] = ()) -> None:
        """Broker-style recovery. Segments the checkpoint names (all, after an unclean shutdown,
        from the recovery point on) are read in full, CRCs checked, and re-indexed when their
        indexes differ; other inactive segments get their indexes rebuilt when missing or failing
        the sanity check. The active segment is always re-read: its indexes resume from a scan and
        a torn or corrupt tail is cut off at the end of the last valid batch (LogSegment.recover)."""
        interval = self.config.index_interval_bytes
        rebuilt: list[int] = []
        recovered: list[int] = []
        to_recover = set(checkpoint.segments_to_recover([s.base_offset for s in self.segments]))
        for seg in self.segments[:-1]:
            if seg.base_offset in to_recover:
                built = build_indexes(seg.log, seg.base_offset, interval, stop_on_error=True)
                recovered.append(seg.base_offset)
                if built.error is not None or built.valid_bytes < seg.size:
                    why = built.error or seg.log.incomplete(built.valid_bytes, "the segment")
                    raise CorruptRecordError(
                        f"Segment {seg.path('.log')} holds invalid bytes from byte {built.valid_bytes} ({why}), and "
                        f"later segments follow it. Kafka's recovery would truncate it there and delete every later "
                        f"segment; kbatch changes nothing: check it with `kbatch verify`, then repair or move the "
                        f"segments after it", position=built.valid_bytes,
                        expected="complete, valid batches up to the next segment", found=str(why))
                if [_read_or_none(seg.path(x)) for x in (".index", ".timeindex")] != [built.index, built.timeindex]:
                    _files.atomic_write(seg.path(".index"), built.index)
                    _files.atomic_write(seg.path(".timeindex"), built.timeindex)
                    logger.warning("Rewrote the indexes of recovered segment %s", seg.path(".log"))
                    rebuilt.append(seg.base_offset)
                seg.use_indexes(OffsetIndex(seg.base_offset, built.index, max_index_size=seg.max_index_size),
                                TimeIndex(seg.base_offset, built.timeindex, max_index_size=seg.max_index_size),
                                MaxTimestampTracker(built.max_timestamp, built.offset_of_max_timestamp))
                continue
            seg.offset_index  # reads the index files, or builds them in memory and says why
            if seg.index_problem is not None:
                built = build_indexes(seg.log, seg.base_offset, interval)
                _files.atomic_write(seg.path(".index"), built.index)
                _files.atomic_write(seg.path(".timeindex"), built.timeindex)
                logger.warning("Rebuilt indexes of segment %s: %s", seg.path(".log"), seg.index_problem)
                rebuilt.append(seg.base_offset)
                seg.index_problem = None
        seg = self.segments[-1]
        built = build_indexes(seg.log, seg.base_offset, interval, stop_on_error=True)
        recovered.append(seg.base_offset)
        cut = 0
        reason: str | None = None
        if built.valid_bytes < seg.size:
            reason = (str(built.error) if built.error is not None
                      else seg.log.incomplete(built.valid_bytes, "the segment"))
            cut = seg.log.truncate_to(built.valid_bytes)
            logger.warning("Truncated %d bytes at byte %d of %s during recovery: %s", cut, built.valid_bytes,
                           seg.path(".log"), reason)
        if [_read_or_none(seg.path(s)) for s in (".index", ".timeindex")] != [built.index, built.timeindex]:
            rebuilt.append(seg.base_offset)
        # the active segment continues as if never closed: no close-time entry until it is rolled/closed
        tidx = built.timeindex[:-W.TIME_INDEX_ENTRY_SIZE] if built.final_time_entry else built.timeindex
        oi = OffsetIndex.writable(seg.path(".index"), seg.base_offset, max_index_size=self.config.segment_index_bytes,
                                  entries=built.index)
        ti = TimeIndex.writable(seg.path(".timeindex"), seg.base_offset,
                                max_index_size=self.config.segment_index_bytes, entries=tidx)
        seg.use_indexes(oi, ti, MaxTimestampTracker(built.max_timestamp, built.offset_of_max_timestamp))
        seg.bytes_since_last_index_entry = built.valid_bytes - built.last_indexed_position
        seg.roll_jitter_ms = self._jitter()
        next_offset = seg.base_offset if built.last_offset is None else built.last_offset + 1
        self._next_offset = next_offset
        self._recover_txn_indexes(set(recovered))
        seg.flush()
        self.recovery = RecoveryReport(cut, reason, tuple(rebuilt), tuple(recovered), tuple(cleaned))
        # everything below the log end offset is now checked and on disk: the next unclean open
        # starts from here; a crash from now on is an unclean shutdown
        RecoveryCheckpoint(next_offset, clean_shutdown=False).write(self.directory)
        self._recovery_point = next_offset

    def _recover_txn_indexes(self, recovered: set[int]) -> list[int]:
        """LogSegment.recover's `.txnindex` half: a recovered segment's file is rewritten from the
        ABORT markers it holds (the transactions' first offsets and the last stable offsets need
        the transactions still open before it, so then every earlier segment's headers are read
        too). A recovered segment with no ABORT marker keeps no entries. Returns the bases rewritten."""
        segs = [seg for seg in self.segments if seg.base_offset in recovered]
        probe = _txns.follow_segments(seg.windows() for seg in segs)[0]
        if not any(probe) and not any(seg.files.has(".txnindex") for seg in segs):
            return []
        per_segment, ongoing = _txns.follow_segments((seg.windows() for seg in self.segments), self._ongoing_at_start())
        self._ongoing = ongoing
        changed: list[int] = []
        for seg, want in zip(self.segments, per_segment):
            if seg.base_offset not in recovered:
                continue
            path = seg.path(".txnindex")
            have = _read_or_none(path)
            data = _txns.txn_index_bytes(want)
            if have == data or (have is None and not want):
                continue
            _files.atomic_write(path, data)
            seg._txn_index = None  # read again
            logger.warning("Rewrote the transaction index of recovered segment %s (%d aborted transactions)",
                           seg.path(".log"), len(want))
            changed.append(seg.base_offset)
        return changed

    def _jitter(self) -> int:
        j = self.config.segment_jitter_ms
        return 0 if j == 0 else self._rng.randrange(min(j, self.config.segment_ms))

    # ---- facts
    @property
    def active_segment(self) -> LogSegment:
        return self.segments[-1]

    @property
    def problems(self) -> list[str]:
        """What this Log could not read or had to work around: index entries the log contradicts
        (answers then came from a scan) and bytes that are not complete batches. Empty when every
        answer so far came from data read in full."""
        return self._listing_problems + [p for s in self.segments for p in s.problems]

    def beginning_offset(self) -> int:
        """The log start offset (EARLIEST)."""
        return self.log_start_offset

    def end_offset(self) -> int:
        """The log end offset: the next offset to be written (LATEST)."""
        if self._next_offset is None:
            self._next_offset = self.segments[-1].read_next_offset() if self.segments else 0
        return self._next_offset

    @property
    def size(self) -> int:
        return sum(s.size for s in self.segments)

    def batches(self, verify_crc: bool = True) -> Iterator[Batch]:
        """Every complete batch, segment by segment. Bytes at the end of a segment that are not a
        complete batch end that segment's batches and are reported in `problems`."""
        for seg in self.segments:
            for s in seg.windows(verify_crc=verify_crc):
                ok = s["crc_valid"].tolist()
                for i in range(len(ok)):
                    if verify_crc and not ok[i]:
                        raise _crc_error(s, i)
                    yield _batch_at(s, i)

    def read(self, start_offset: int | None = None, end_offset: int | None = None, *,
             isolation: int = 0, verify_crc: bool = True, skip_unreadable: bool = False) -> FetchResult:
        """What a Kafka consumer with `isolation` (0 read_uncommitted, 1 read_committed) sees from
        `start_offset` (the log start when None) up to `end_offset` (exclusive): kbatch.log.fetch's
        read_log, the read path every reader takes. `.records()` gives (batch, record) pairs;
        `.batches()` FetchedBatch items with control batches; `.aborted`, `.last_stable_offset`,
        `.unreadable`. Bytes it cannot read raise UnreadableDataError (but a partial batch at the
        end of the last segment, which Kafka ignores)."""
        from .fetch import read_log

        start = self.beginning_offset() if start_offset is None else start_offset
        return read_log(self, start, end_offset, isolation=isolation, verify_crc=verify_crc,
                        skip_unreadable=skip_unreadable)

    @overload
    def _last_headers(self, seg: LogSegment, column: str) -> int | None: ...
    @overload
    def _last_headers(self, seg: LogSegment, column: tuple[str, ...]) -> tuple[int, ...] | None: ...

    def _last_headers(self, seg: LogSegment, column: str | tuple[str, ...]) -> int | tuple[int, ...] | None:
        """The given header column's value (a tuple of columns: a tuple of values) for the
        segment's last batch that can be read, None when it has none; read from the last index
        entry on (past bytes that cannot be read, as the lookups read: LogSegment.lookup_windows)."""
        def run() -> int | tuple[int, ...] | None:
            last: int | tuple[int, ...] | None = None
            for s in seg.lookup_windows(seg.last_entry_position(), segment_first_window):
                if len(s["position"]):
                    last = (int(s[column][-1]) if isinstance(column, str)
                            else tuple(int(s[c][-1]) for c in column))
            return last
        return seg._guarded(run)

    def magic(self) -> int | None:
        """The message format of the newest batch (None for an empty log)."""
        for seg in reversed(self.segments):
            last = self._last_headers(seg, "magic")
            if last is not None:
                return last
        return None

    # ---- lookups (KIP-79)
    def _stable(self, fn: Callable[..., _T], *args: Any) -> _T:
        """Run a lookup again when a segment stopped trusting its indexes during it (its facts,
        such as its largest timestamp, may have changed which segment answers)."""
        for _ in range(len(self.segments) + 1):
            before = sum(s.indexes_from_scan for s in self.segments)
            out = fn(*args)
            if sum(s.indexes_from_scan for s in self.segments) == before:
                return out
        return out

    def offset_for(self, target: int | np.integer[Any] | OffsetSpec) -> OffsetAndTimestamp | None:
        """One ListOffsets answer: an int64 timestamp (first record with ts >= target) or
        EARLIEST / LATEST / MAX_TIMESTAMP."""
        if isinstance(target, OffsetSpec):
            if target is OffsetSpec.EARLIEST:
                return OffsetAndTimestamp(self.log_start_offset, None, self._epoch_at_start())
            if target is OffsetSpec.LATEST:
                return OffsetAndTimestamp(self.end_offset(), None, self._epoch_at_end())
            return self._stable(self._max_timestamp)
        if isinstance(target, (bool, np.bool_)) or not isinstance(target, (int, np.integer)):
            raise TypeError(f"a lookup target is an int64 timestamp or an OffsetSpec, not {target!r}")
        t = int(target)
        if not W.INT64_MIN <= t <= W.INT64_MAX:
            raise InvalidRequestError("Target timestamp out of the int64 range", expected="an int64", found=t)
        return self._stable(self._offset_for_time, t)

    def _offset_for_time(self, t: int) -> OffsetAndTimestamp | None:
        seg = self._segment_for_timestamp(t)
        if seg is None:
            return None
        hit = seg.find_offset_by_timestamp(t, self.log_start_offset)
        return None if hit is None else OffsetAndTimestamp(hit.offset, hit.timestamp, hit.leader_epoch)

    def unread_for(self, target: int | np.integer[Any] | OffsetSpec,
                   answer: OffsetAndTimestamp | None) -> list[UnreadRange]:
        """The byte ranges this Log found it could not read (so far) that could have held the
        answer to a lookup of `target` that gave `answer`: for a timestamp, a range before the
        answer (anywhere, when there is none) whose records a checked .timeindex entry after it
        does not bound below the target, and not below the log start offset; for LATEST and
        MAX_TIMESTAMP, every range; for EARLIEST, none. Empty when the answer is the one Kafka
        would give over a log that could be read in full."""
        last = self.segments[-1] if self.segments else None
        ranges = [(seg, u) for seg in self.segments for u in seg.unread
                  if not (seg is last and u.partial and u.before_offset is None)]  # Kafka ignores a partial tail
        if target is OffsetSpec.EARLIEST:
            return []
        if isinstance(target, OffsetSpec):
            return [u for _seg, u in ranges]
        t = int(target)
        out: list[UnreadRange] = []
        for seg, u in ranges:
            if u.before_offset is not None and u.before_offset <= self.log_start_offset:
                continue  # wholly below the log start: no answer can come from there
            if answer is not None and (u.after_offset if u.after_offset is not None else seg.base_offset) >= answer.offset:
                continue  # after the answer
            if u.bound is not None and u.bound <= t:
                continue  # the index says its records are all older than the target
            out.append(u)
        return out

    @overload
    def offsets_for_times(self, targets: npt.NDArray[np.integer[Any]]
                          ) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]: ...
    @overload
    def offsets_for_times(self, targets: int | OffsetSpec) -> OffsetAndTimestamp | None: ...
    @overload
    def offsets_for_times(self, targets: Iterable[int | OffsetSpec]) -> list[OffsetAndTimestamp | None]: ...

    def offsets_for_times(self, targets: Any) -> Any:
        """Answers for many targets.

        A list/tuple (any iterable) gives a list of OffsetAndTimestamp | None in the same order
        (targets may be ints or OffsetSpec members); its timestamps go through the same bulk
        lookup as a numpy array's. A numpy array of int64 timestamps gives two int64 arrays
        (offsets, timestamps); offsets is -1 where no record has a timestamp >= the target, and the
        timestamp there is meaningless (any int64 is a valid timestamp, so mask with offsets >= 0).
        """
        if isinstance(targets, np.ndarray):
            return self._stable(self._offsets_for_times_array, targets)[:2]
        if isinstance(targets, (int, np.integer, OffsetSpec)):
            return self.offset_for(targets)
        targets = targets if type(targets) is list else list(targets)
        if all(type(t) is int for t in targets):  # plain timestamps: converted by numpy in one step
            try:
                as_array = np.array(targets, dtype=np.int64)
            except OverflowError:
                pass  # one is out of range: the loop below names it
            else:
                return _answers(*self._stable(self._offsets_for_times_array, as_array))
        out: list[OffsetAndTimestamp | None] = [None] * len(targets)
        times: list[int] = []
        where: list[int] = []
        for i, t in enumerate(targets):
            if isinstance(t, OffsetSpec):
                out[i] = self.offset_for(t)
                continue
            if isinstance(t, (bool, np.bool_)) or not isinstance(t, (int, np.integer)):
                raise TypeError(f"a lookup target is an int64 timestamp or an OffsetSpec, not {t!r}")
            t = int(t)
            if not W.INT64_MIN <= t <= W.INT64_MAX:
                raise InvalidRequestError("Target timestamp out of the int64 range", expected="an int64", found=t)
            times.append(t)
            where.append(i)
        if times:  # every timestamp target in one bulk lookup, as for a numpy array
            for i, hit in zip(where, _answers(*self._stable(self._offsets_for_times_array,
                                                             np.array(times, dtype=np.int64)))):
                out[i] = hit
        return out

    def _largest_timestamps(self) -> npt.NDArray[np.int64]:
        return np.array([s.largest_timestamp for s in self.segments], dtype=np.int64)

    def _segment_for_timestamp(self, t: int) -> LogSegment | None:
        """The first segment (offset order) whose largestTimestamp >= t (UnifiedLog)."""
        for seg in self.segments:
            if seg.largest_timestamp >= t:
                return seg
        return None

    def _offsets_for_times_array(self, targets: npt.ArrayLike
                                 ) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64], npt.NDArray[np.int64]]:
        given = np.asarray(targets)
        if given.dtype.kind not in "iu":
            raise TypeError(f"numpy targets must be integer timestamps, not {given.dtype}")
        targets = given.astype(np.int64).ravel()
        offsets = np.full(len(targets), -1, dtype=np.int64)
        stamps = np.full(len(targets), W.NO_TIMESTAMP, dtype=np.int64)
        epochs = np.full(len(targets), -1, dtype=np.int64)
        if not self.segments or not len(targets):
            return offsets, stamps, epochs
        largest = np.maximum.accumulate(self._largest_timestamps())
        which = np.searchsorted(largest, targets, side="left")  # first segment with largest >= t
        for si in np.flatnonzero(np.bincount(which, minlength=len(self.segments) + 1)[:len(self.segments)]).tolist():
            sel = np.flatnonzero(which == si)
            seg = self.segments[si]
            if len(sel) * 8 >= seg.offset_index.entries:  # dense: one header pass over the segment
                offsets[sel], stamps[sel], epochs[sel] = seg.find_offsets_by_timestamps(targets[sel],
                                                                                        self.log_start_offset)
            else:  # sparse: index lookups, O(log n) each
                for i in sel.tolist():
                    hit = seg.find_offset_by_timestamp(int(targets[i]), self.log_start_offset)
                    if hit is not None:
                        offsets[i], stamps[i] = hit.offset, hit.timestamp
                        epochs[i] = -1 if hit.leader_epoch is None else hit.leader_epoch
        return offsets, stamps, epochs

    def _max_timestamp(self) -> OffsetAndTimestamp | None:
        """MAX_TIMESTAMP (KIP-734): the segment with the largest max timestamp (first on ties),
        then the first record in the batch holding it whose timestamp equals it."""
        best: LogSegment | None = None
        best_ts = 0
        for seg in self.segments:
            ts = seg.max_timestamp_so_far
            if ts is not None and (best is None or ts > best_ts):
                best, best_ts = seg, ts
        if best is None:
            return None
        hit = best.max_timestamp_and_offset()
        return None if hit is None else OffsetAndTimestamp(hit.offset, hit.timestamp, hit.leader_epoch)

    # ---- leader epochs (LeaderEpochFileCache)
    @property
    def leader_epoch_cache(self) -> LeaderEpochFileCache:
        """The partition's LeaderEpochFileCache: its leader-epoch-checkpoint when the file exists;
        otherwise what a broker's recovery of these batches assigns (kept in memory for a
        read-only log, written to the file for a writable one)."""
        from .leader_epoch import LeaderEpochFileCache
        from .checkpoints import LEADER_EPOCH_CHECKPOINT

        if self._epoch_cache is None:
            path = _fs.join(self.directory, LEADER_EPOCH_CHECKPOINT)
            if self.layout == "broker" and _fs.exists(path):
                cache = LeaderEpochFileCache.load(self.directory)
                cache.path = path if self.writable else None
            else:
                cache = LeaderEpochFileCache()
                for seg in self.segments:  # LogSegment.recover: assign epochs as batches carry them
                    for s in seg.log.headers():
                        for ple, base, magic in zip(s["partition_leader_epoch"].tolist(), s["base_offset"].tolist(),
                                                    s["magic"].tolist()):
                            latest = cache.latest_epoch()
                            if magic >= 2 and ple >= 0 and (latest is None or ple > latest):
                                cache.assign(ple, base)
                if self.writable:
                    cache.path = path
                    cache.flush()
            self._epoch_cache = cache
        return self._epoch_cache

    def _epochs_from_batches(self) -> bool:
        """A read-only log without a leader-epoch-checkpoint: its epoch cache is built from the batches."""
        from .checkpoints import LEADER_EPOCH_CHECKPOINT

        return not self.writable and not os.path.exists(os.path.join(self.directory, LEADER_EPOCH_CHECKPOINT))

    def _epoch_at_start(self) -> int | None:
        """EARLIEST's epoch: the first cached epoch when it starts at or before the log start offset.
        Without a checkpoint file that entry is the first batch carrying an epoch: the batches up to
        the log start offset are read, no further."""
        if not self._epochs_from_batches():
            first = self.leader_epoch_cache.earliest_entry()
            return first.epoch if first is not None and first.start_offset <= self.log_start_offset else None
        for seg in self.segments:
            if seg.base_offset > self.log_start_offset:
                break
            for s in seg.log.scan(0, first_window=segment_first_window, reuse=True):
                ok = np.flatnonzero((s["magic"] >= 2) & (s["partition_leader_epoch"] >= 0))
                if len(ok):
                    i = int(ok[0])
                    return int(s["partition_leader_epoch"][i]) if s["base_offset"][i] <= self.log_start_offset else None
                if len(s["base_offset"]) and s["base_offset"][-1] > self.log_start_offset:
                    return None
        return None

    def _epoch_at_end(self) -> int | None:
        """LATEST's epoch: the cache's latest epoch (a new leader's epoch before any batch carries it).
        Without a checkpoint file: the last batch's, read from the last index entry on (the latest
        epoch a broker's recovery assigns whenever epochs never go down along the log, as in every
        log a leader wrote; the whole cache, for end_offset_for_epoch, still reads every header)."""
        if not self._epochs_from_batches():
            return self.leader_epoch_cache.latest_epoch()
        for seg in reversed(self.segments):
            last = self._last_headers(seg, ("magic", "partition_leader_epoch"))
            if last is not None:
                magic, ple = last
                return ple if magic >= 2 and ple >= 0 else None
        return None

    def assign_epoch_start_offset(self, epoch: int, start_offset: int | None = None) -> None:
        """Record that `epoch` starts at `start_offset` (default: the log end offset), as a broker does
        when it becomes leader (UnifiedLog.maybeAssignEpochStartOffset); later appends carry it."""
        self._check_writable()
        self.partition_leader_epoch = int(epoch)
        self.leader_epoch_cache.assign(int(epoch), self.end_offset() if start_offset is None else int(start_offset))

    def end_offset_for_epoch(self, epoch: int) -> tuple[int, int] | None:
        """OffsetForLeaderEpoch: (epoch, end offset) for the largest cached epoch <= `epoch`, or None."""
        found_epoch, offset = self.leader_epoch_cache.end_offset_for(int(epoch), self.end_offset())
        return None if offset < 0 else (found_epoch, offset)

    # ---- writing
    def _check_writable(self) -> None:
        if not self.writable:
            raise KBatchError(f"log {self.directory} is open read-only",
                              expected="Log.open(path, config, writable=True) or Log.create(path, config)",
                              found="read-only")
        if self._failed is not None:
            raise StorageError(f"the log stopped accepting writes: {self._failed}; reopen it (Log.open(..., "
                               f"writable=True)) to recover", path=self.directory)

    def append(self, data: Buffer, now_ms: int | None = None, *, from_client: bool | None = None) -> AppendInfo:
        """Validate `data` (LogValidator: offsets from the log end, timestamps checked or stamped per
        config, whole-batch rejection), roll when Kafka's rules say so, append, index.
        Returns the validator's AppendInfo. Any number of batches per call.

        All or nothing: when writing fails (disk full, the file size limit, a short write) the
        call raises LogWriteError and the files and the Log are as they were before it (a roll it
        started is undone too), so the Log takes appends again once there is space.

        from_client: True applies a produce request's rules (Kafka's AppendOrigin.CLIENT: one
        batch, base offset 0, no control batches); False accepts log data as a coordinator or
        replica appends it (transaction markers, many batches). None: True for a single batch."""
        self._check_writable()
        now = _now(now_ms)
        if self._validator is None:
            tp = f"{self.topic}-{self.partition}" if self.topic is not None else None
            self._validator = self.config.validator(tp)
        if from_client is None:
            from_client = sum(len(s["position"]) for s in scan_headers(memoryview(data))) <= 1
        out, info = self._validator._assign(data, self.end_offset(), now, self.partition_leader_epoch, from_client)
        if not out:
            return info
        rows = [s for s in scan_headers(memoryview(out))]
        for s in rows:
            for size in s["size"].tolist():
                if size > self.config.segment_bytes:
                    raise RecordTooLargeError("Batch is larger than the segment size",
                                              expected=f"<= {self.config.segment_bytes} bytes (segment.bytes)",
                                              found=f"{size} bytes")
        active = self.active_segment
        before = active.mark()
        epochs_before = self.leader_epoch_cache.entries()
        if self._ongoing is None and any(
                (a & W.TRANSACTIONAL_FLAG_MASK) and m >= 2 and p >= 0 for s in rows
                for a, m, p in zip(s["attributes"].tolist(), s["magic"].tolist(), s["producer_id"].tolist())):
            self._ongoing = self._load_ongoing()
        ongoing_before = None if self._ongoing is None else self._ongoing.copy()
        txn_before = len(active.txn_index) if self._ongoing is not None else None
        new_seg = None
        try:
            seg = active
            if active.should_roll(now_ms=now, max_timestamp_in_messages=info.max_timestamp,
                                  max_offset_in_messages=info.last_offset, messages_size=len(out),
                                  max_segment_bytes=self.config.segment_bytes,
                                  max_segment_ms=self.config.segment_ms):
                new_seg = self._start_segment(info.first_offset, now)
                seg = new_seg or active
            mv = memoryview(out)
            for s in rows:
                for pos, size, last, max_ts, magic, attrs in zip(*(s[k].tolist() for k in (
                        "position", "size", "last_offset", "max_timestamp", "magic", "attributes"))):
                    seg.append_batch(mv[pos:pos + size], last, max_ts, magic, attrs)
            aborted = self._follow_transactions(out, rows)
            for txn in aborted:  # UnifiedLog.append: the segment appended to indexes each aborted transaction
                seg.txn_index.append(txn)
            self._assign_epochs(rows)  # may write leader-epoch-checkpoint: part of the all-or-nothing
        except BaseException as e:
            self._ongoing = ongoing_before
            if txn_before is not None and len(active.txn_index) > txn_before:
                active.txn_index.truncate_entries(txn_before)
            self._undo(active, before, new_seg, e)
            self.leader_epoch_cache._entries = list(epochs_before)  # its file was replaced atomically or not at all
            if isinstance(e, OSError) and not isinstance(e, StorageError):
                raise _files.write_error(e, self.directory, "appending") from e
            raise
        if new_seg is not None:
            self._finish_roll(active, new_seg)
        self._next_offset = info.last_offset + 1
        return info

    def append_table(self, table: TableLike, now_ms: int | None = None, *, compression: W.Compression | None = None,
                     compression_level: int | None = None, records_per_batch: int | None = None) -> AppendInfo:
        """Append the rows of a pyarrow Table / RecordBatch / RecordBatchReader (decode_columns'
        columns; or an iterable of record batches) as magic 2 batches written by the encode_columns
        kernel (kbatch.columns.encode.encode_for_append) and handed, whole batches at a time, to append.
        Returns the AppendInfo of all of it."""
        import time

        from ..columns.encode import encode_for_append
        from .validator import AppendInfo

        cfg = self.config
        codec = compression if compression is not None else (cfg.compression or W.Compression.NONE)
        if compression_level is None and compression is None:
            compression_level = cfg.compression_level  # the topic's codec at the topic's level
        pieces = encode_for_append(table, compression=codec, compression_level=compression_level,
                                   max_batch_bytes=cfg.max_message_bytes, segment_bytes=cfg.segment_bytes,
                                   timestamp_extended=cfg.timestamp_extended, records_per_batch=records_per_batch)
        now = time.time_ns() // 1_000_000 if now_ms is None else now_ms
        infos: list[AppendInfo] = []
        try:
            with self.append_group() as group:
                for piece, more in pieces:
                    infos.append(group.append(piece, now, more=more))
        except KBatchError as e:
            if infos and self._failed is None and self._group is None:  # (inside an outer group, that one undoes)
                done = AppendInfo.merge(infos)
                e.update(reason=e.reason + f" (append_table appended nothing: the {done.record_count} records the "
                         f"calls before took, offsets {done.first_offset}..{done.last_offset}, were taken out again; "
                         f"the log ends at {done.first_offset} as before)")
            raise
        if not infos:  # no rows: nothing appended (Log.append refuses empty input, as Kafka does)
            end = self.end_offset()
            return AppendInfo(end, end - 1, W.NO_TIMESTAMP, -1, None, False, 0, 0, 0, 0)
        return AppendInfo.merge(infos)

    def _load_ongoing(self) -> _txns.OngoingTxns:
        """The open transactions at the log end, from a header scan of every segment (Kafka keeps
        them in its producer state; kbatch reads them once, when a transactional batch comes)."""
        return _txns.follow_segments((seg.windows(reuse=False) for seg in self.segments), self._ongoing_at_start())[1]

    def _ongoing_at_start(self) -> _txns.OngoingTxns:
        """The transactions open at the first segment's base offset: none at 0, else those of its
        producer snapshot (a broker writes one at each roll); unknown (none) without one."""
        if not self.segments:
            return _txns.OngoingTxns()
        return _txns.ongoing_at(self.directory, self.segments[0].base_offset) or _txns.OngoingTxns()

    def _follow_transactions(self, out: Buffer, rows: list[Window]) -> list[AbortedTxn]:
        """Track open transactions through appended batches (already written, in `out`); the
        `.txnindex` entries of the ABORT markers among them."""
        if self._ongoing is None:
            return []
        from ..record.file_records import _place

        mv = memoryview(out)
        return _txns.follow_windows((_place(dict(s), mv, 0) for s in rows), self._ongoing)

    def _assign_epochs(self, rows: Iterable[Window]) -> None:
        """UnifiedLog.append: each v2 batch assigns (its leader epoch, its base offset). (Kafka clears
        the cache after an append in an older format; Log always writes magic 2.)"""
        cache = self.leader_epoch_cache
        for s in rows:
            for ple, base in zip(s["partition_leader_epoch"].tolist(), s["base_offset"].tolist()):
                if ple >= 0:
                    cache.assign(ple, base)

    def _start_segment(self, expected_next_offset: int | None, now: int) -> LogSegment | None:
        """The first half of a roll: the old segment's final time entry and the new segment's
        files. None when the active segment is empty and already at that offset."""
        new_offset = max(expected_next_offset or 0, self.end_offset())
        old = self.active_segment
        if old.base_offset == new_offset and old.size == 0:
            old.created_ms = now
            return None
        old.on_become_inactive()
        seg = LogSegment.create(self.directory, new_offset, index_interval_bytes=self.config.index_interval_bytes,
                                max_index_size=self.config.segment_index_bytes, created_ms=now,
                                roll_jitter_ms=self._jitter())
        return seg

    def _finish_roll(self, old: LogSegment, new: LogSegment) -> None:
        self.segments.append(new)
        old.become_read_only()
        _files.fsync_dir(self.directory)

    def _undo(self, active: LogSegment, before: SegmentMark, new_seg: LogSegment | None, cause: BaseException) -> None:
        """Put the files back as they were before a failed write; if that fails too, stop writing."""
        try:
            if new_seg is not None:
                new_seg.delete_files()
                _files.fsync_dir(self.directory)
            active.rollback(before)
        except BaseException as e2:
            self._failed = f"undoing a failed write ({cause}) failed too ({e2})"
            logger.error("%s: %s", self.directory, self._failed)

    def roll(self, expected_next_offset: int | None = None, *, now_ms: int | None = None) -> LogSegment:
        """Start a new active segment at max(expected_next_offset, log end offset); the old one
        gets its final time-index entry. An empty active segment at that offset is kept."""
        self._check_writable()
        now = _now(now_ms)
        active = self.active_segment
        before = active.mark()
        try:
            seg = self._start_segment(expected_next_offset, now)
        except BaseException as e:
            self._undo(active, before, None, e)
            if isinstance(e, OSError) and not isinstance(e, StorageError):
                raise _files.write_error(e, self.directory, "rolling a new segment") from e
            raise
        if seg is None:
            return active
        self._finish_roll(active, seg)
        return seg

    def flush(self) -> None:
        """fsync the active segment and move the recovery point to the log end offset (the
        checkpoint file is rewritten only when the point moved)."""
        if self.writable and self._failed is None:
            self.active_segment.flush()
            if self._recovery_point != self.end_offset():
                RecoveryCheckpoint(self.end_offset(), clean_shutdown=False).write(self.directory)
                self._recovery_point = self.end_offset()

    def close(self) -> None:
        """Final time-index entry on the active segment, flush, record a clean shutdown, release
        the files and the directory lock."""
        try:
            clean = self.writable and self._failed is None
            for seg in self.segments:
                seg.close()
            if clean:
                RecoveryCheckpoint(self.end_offset(), clean_shutdown=True).write(self.directory)
        finally:
            self.writable = False
            if self._lock is not None:
                self._lock.release()
                self._lock = None

    def __enter__(self) -> Log:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()

    # ---- retention (§6.3)
    def delete_old_segments(self, now_ms: int | None = None) -> list[DeletedSegment]:
        """Time- then size-based retention, oldest first, stopping at the first survivor; returns
        the DeletedSegment list. Only with cleanup.policy containing "delete"."""
        self._check_writable()
        if "delete" not in self.config.cleanup_policies:
            return []
        now = _now(now_ms)
        deleted: list[DeletedSegment] = []
        if self.config.retention_ms >= 0:
            deleted += self._delete_where(lambda seg: now - seg.largest_timestamp > self.config.retention_ms,
                                          "retention.ms", now)
        if self.config.retention_bytes >= 0 and self.size >= self.config.retention_bytes:
            diff = [self.size - self.config.retention_bytes]

            def breached(seg: LogSegment) -> bool:
                if diff[0] - seg.size >= 0:
                    diff[0] -= seg.size
                    return True
                return False

            deleted += self._delete_where(breached, "retention.bytes", now)
        return deleted

    def _delete_where(self, predicate: Callable[[LogSegment], bool], reason: str, now: int) -> list[DeletedSegment]:
        deletable: list[LogSegment] = []
        high_watermark = self.end_offset()
        for i, seg in enumerate(self.segments):
            nxt = self.segments[i + 1] if i + 1 < len(self.segments) else None
            if nxt is None and seg.size == 0:
                break
            upper = nxt.base_offset if nxt is not None else high_watermark
            if not (high_watermark >= upper and predicate(seg)):
                break
            deletable.append(seg)
        if not deletable:
            return []
        if len(deletable) == len(self.segments):
            self.roll(now_ms=now)
        out: list[DeletedSegment] = []
        for seg in deletable:
            next_base = self.segments[self.segments.index(seg) + 1].base_offset
            info = DeletedSegment(seg.base_offset, next_base, seg.size, seg.largest_timestamp, reason)
            try:
                seg.delete_files()   # the .log goes first: from then on the segment is gone
            except OSError as e:
                raise StorageError(f"deleting segment {seg.path('.log')} failed ({e})", path=self.directory,
                                   errno=e.errno) from e
            finally:
                if not os.path.exists(seg.path(".log")):
                    self.segments.remove(seg)
                    self.log_start_offset = max(self.log_start_offset, self.segments[0].base_offset)
            out.append(info)
        self.leader_epoch_cache.truncate_from_start(self.log_start_offset)
        _files.fsync_dir(self.directory)
        return out

    # ---- truncation (UnifiedLog.truncateTo)
    def truncate_to(self, offset: int) -> bool:
        """Remove every record at and after `offset`, as UnifiedLog.truncateTo does: segments with
        a base offset above it are deleted, the segment holding it is cut where the batch starting
        at `offset` starts (its indexes trimmed), the leader-epoch cache drops entries starting at
        or after it (truncate_from_end), the recovery point and the log end offset come down to it.
        An offset below the first segment's base empties the log, which starts again there
        (truncateFullyAndStartAt: the epoch cache is cleared). An offset at or past the log end
        changes nothing but the epoch cache's entries past the end, and returns False, as Kafka does.

        kbatch differs from Kafka in one place: `offset` must be where the log can end (the start of
        a batch that follows the one before it without a gap, one past a batch's last offset, or a
        segment's base offset). Kafka cuts the whole batch holding a mid-batch offset yet reports the
        offset as the log end, which a restart then contradicts; kbatch raises InvalidOffsetError
        naming where the log could end, and changes nothing.

        Crash-safe: what is to be done is written down first (log_loader.Truncation); a kill at any
        later step leaves a log that the next writer's open truncates the rest of the way, so it
        recovers to the old end or to `offset`, never between. Returns True."""
        self._check_writable()
        return self._truncate(offset, keep_segment_at_target=True)

    def _truncate(self, target: int, keep_segment_at_target: bool, written: bool = False) -> bool:
        """truncate_to; keep_segment_at_target=False also deletes a segment that starts at the
        target (an undo of appends that rolled); written: the Truncation file is already there."""
        from ..errors import InvalidOffsetError

        if isinstance(target, (bool, np.bool_)) or not isinstance(target, (int, np.integer)):
            raise TypeError(f"a truncation target is an int offset, not {target!r}")
        target = int(target)
        self._ongoing = None  # read again from what is left, when a transactional batch comes
        if target < 0:
            raise InvalidOffsetError("Cannot truncate to a negative offset", expected="an offset >= 0", found=target)
        end = self.end_offset()
        if target >= end:
            self.leader_epoch_cache.truncate_from_end(end)  # an epoch entry past the end (Kafka does this too)
            if written:
                self._forget_truncation(target)
            return False
        plan, cut = self._plan_truncation(target, keep_segment_at_target)
        if not written:
            plan.write(self.directory)  # from here on, a kill is finished by the next writer's open
        kept = len(plan.kept_bases([s.base_offset for s in self.segments]))
        try:
            for seg in self.segments[max(kept - 1, 0):]:
                seg.release()  # nothing written on the way out: the holding segment is reopened below
            self.segments = self.segments[:max(kept - 1, 0)]
            log_loader.truncate_segments(self.directory, plan, cut)
            log_loader.truncate_epochs(self.leader_epoch_cache, plan)
            if self._recovery_point is None or self._recovery_point > target:
                RecoveryCheckpoint(target, clean_shutdown=False).write(self.directory)
                self._recovery_point = target
            self.segments.append(self._reactivate(_files.list_segment_bases(self.directory)[-1]))
            self.log_start_offset = target if plan.fully else min(self.log_start_offset, target)
            self._next_offset = target
            log_loader.Truncation.remove(self.directory)
        except BaseException as e:  # the note stays: the next writer's open finishes the truncation
            self._failed = (f"truncating to offset {target} was interrupted ({e}); reopening the log for writing "
                            f"finishes the truncation")
            logger.error("%s: %s", self.directory, self._failed)
            if isinstance(e, OSError) and not isinstance(e, StorageError):
                raise _files.write_error(e, self.directory, f"truncating to offset {target}") from e
            raise
        return True

    def _plan_truncation(self, target: int, keep_segment_at_target: bool) -> tuple[log_loader.Truncation, int | None]:
        """(log_loader.Truncation, where to cut the last segment kept or None) for truncating to
        `target`; checks that the log can end there and that the bytes kept in that segment are
        valid batches (it becomes the active segment again). Changes nothing."""
        from ..errors import InvalidOffsetError

        plan = log_loader.Truncation(target, keep_segment_at_target)
        kept = plan.kept_bases([s.base_offset for s in self.segments])
        if not kept:
            return plan._replace(fully=True), None
        seg = self.segments[len(kept) - 1]
        prev_last: int | None = None
        cut: int | None = None
        gen = seg.log.scan(0, verify_crc=True, reuse=True)
        try:
            while cut is None:
                try:
                    s = next(gen)
                except StopIteration as stop:
                    cut = stop.value  # no batch reaches the target: cut any partial tail
                    break
                cols = zip(*(s[k].tolist() for k in ("position", "base_offset", "last_offset", "crc_valid")))
                for i, (pos, base, last, ok) in enumerate(cols):
                    if last >= target:
                        if base < target:
                            raise InvalidOffsetError(
                                f"Cannot truncate to offset {target}: it is inside the batch holding offsets "
                                f"{base}..{last} in {seg.path('.log')}", position=pos, base_offset=base,
                                expected=f"a batch boundary ({base} or {last + 1})", found=target)
                        cut = pos
                        break
                    if not ok:
                        raise _crc_error(s, i)
                    prev_last = last
        finally:
            gen.close()
        end = seg.base_offset if prev_last is None else prev_last + 1
        if end != target:
            raise InvalidOffsetError(f"Cannot truncate to offset {target}: the log would end at {end} (no batch starts "
                                     f"there right after the one before)", expected=f"an offset where the log can end, "
                                     f"such as {end}", found=target)
        return plan, cut

    def _reactivate(self, base: int) -> LogSegment:
        """Open segment `base` as the active one after a truncation, its append state resumed from
        its bytes as a writer's open resumes the active segment (no close-time time entry)."""
        cfg = self.config
        seg = LogSegment.open(self.directory, base, writable=True, index_interval_bytes=cfg.index_interval_bytes,
                              max_index_size=cfg.segment_index_bytes, created_ms=_now(None))
        try:
            built = build_indexes(seg.log, base, cfg.index_interval_bytes, verify_crc=False)
            tidx = built.timeindex[:-W.TIME_INDEX_ENTRY_SIZE] if built.final_time_entry else built.timeindex
            oi = OffsetIndex.writable(seg.path(".index"), base, max_index_size=cfg.segment_index_bytes,
                                      entries=built.index)
            ti = TimeIndex.writable(seg.path(".timeindex"), base, max_index_size=cfg.segment_index_bytes, entries=tidx)
            seg.use_indexes(oi, ti, MaxTimestampTracker(built.max_timestamp, built.offset_of_max_timestamp))
            seg.bytes_since_last_index_entry = built.valid_bytes - built.last_indexed_position
            seg.roll_jitter_ms = self._jitter()
        except BaseException:
            seg.release()
            raise
        return seg

    def _forget_truncation(self, target: int) -> None:
        """Remove the truncation note nothing needs any more. If that fails the Log stops writing:
        a note left behind would take later appends away at the next open."""
        try:
            log_loader.Truncation.remove(self.directory)
        except OSError as e:
            self._failed = f"the truncation note to offset {target} could not be removed ({e})"
            logger.error("%s: %s", self.directory, self._failed)
            if isinstance(e, StorageError):
                raise
            raise _files.write_error(e, self.directory, "removing the truncation note") from e

    def undo_appends(self, start: int, *, keep_segment_at_start: bool) -> None:
        """Take back every record appended from offset `start` on (a group of appends spanning several
        calls, undone after a later step failed, as the Spark writer's commit and `kbatch import`
        do): truncate_to, except that a segment starting at `start` goes too unless it was there
        before the appends (keep_segment_at_start)."""
        self._check_writable()
        self._truncate(start, keep_segment_at_target=keep_segment_at_start)

    def abandon(self) -> None:
        """Let go of the segment files and the directory's lock without writing anything (after a
        close that failed, e.g. a late task whose directory is gone)."""
        for seg in self.segments:
            seg.release()
        if self._lock is not None:
            self._lock.release()
            self._lock = None

    def append_group(self) -> AppendGroup:
        """Several appends made one, all or nothing even across a kill (append_table, `kbatch
        import`, the Spark writer's commit): see AppendGroup."""
        self._check_writable()
        return AppendGroup(self)

    @property
    def failed(self) -> str | None:
        """Why this Log stopped accepting writes (a failed write it could not undo), or None; a
        reopen for writing recovers."""
        return self._failed

    def __repr__(self) -> str:
        return (f"Log({self.directory!r}, segments={len(self.segments)}, start={self.log_start_offset}, "
                f"writable={self.writable})")


class AppendGroup:
    """Appends made all or nothing (Log.append_table), even across a kill:

        with log.append_group() as group:
            for piece, more in pieces:
                group.append(piece, now_ms, more=more)

    Before the first append that others will follow, the log end to come back to is written down
    (a log_loader.Truncation, so a kill from then on recovers to it); when the block fails, what
    the earlier appends wrote is truncated away (Log._truncate), or, when the Log stopped writing
    (a write it could not undo), the note stays for the next writer's open to do that; when the
    block succeeds the note goes.

    A group opened inside another on the same Log (an append_table call inside `kbatch import`'s
    group, which spans all its calls to one partition) is part of the outer one and does nothing
    itself: the outer group's start is where a failure comes back to."""

    def __init__(self, log: Log) -> None:
        self.log = log
        self.outer = log._group
        self.start = log.end_offset()
        # an empty active segment at the start stays; a segment a roll started goes with the undo
        self.plan = log_loader.Truncation(self.start, any(s.base_offset == self.start for s in log.segments))
        self.written = False

    @property
    def keep_segment_at_target(self) -> bool:
        """Whether an undo keeps a segment starting at `start` (one that was there, empty, before)."""
        return self.plan.keep_segment_at_target

    def before_append(self, more: bool) -> None:
        """Called before each append; `more`: another append of the group follows this one."""
        if more and not self.written and self.outer is None:
            self.plan.write(self.log.directory)
            self.written = True

    def append(self, data: Buffer, now_ms: int | None = None, *, more: bool) -> AppendInfo:
        """before_append(more), then Log.append of whole batches (validated and assigned as a broker does)."""
        self.before_append(more)
        return self.log.append(data, now_ms, from_client=False)

    def commit(self) -> None:
        """The group succeeded: the note goes, the records stay (what a `with` block's end does)."""
        self.__exit__(None, None, None)

    def rollback(self, exc: BaseException) -> None:
        """The group failed with `exc`: what its appends wrote is taken out again (or, when the Log
        stopped writing, left for the next writer's open to take out)."""
        self.__exit__(type(exc), exc, exc.__traceback__)

    def __enter__(self) -> AppendGroup:
        if self.outer is None:
            self.log._group = self
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        log = self.log
        if self.outer is not None:
            return
        log._group = None
        if exc is None:
            if self.written:
                log._forget_truncation(self.start)
            return
        if log._failed is not None:  # the state in memory is not to be trusted: a reopen undoes it all
            return
        if log.end_offset() != self.start or self.written:
            try:
                log._truncate(self.start, self.plan.keep_segment_at_target, written=self.written)
            except BaseException as e2:
                from ..errors import LogWriteError

                raise LogWriteError(f"{exc} (and taking out what the earlier appends of the call wrote failed too: "
                                    f"{e2}; reopening the log for writing finishes that)", path=log.directory) from exc


def _answers(offsets: npt.NDArray[np.int64], stamps: npt.NDArray[np.int64],
             epochs: npt.NDArray[np.int64]) -> list[OffsetAndTimestamp | None]:
    """Bulk lookup arrays -> [OffsetAndTimestamp | None] (leader epoch None when unknown)."""
    eps: list[int | None] = (epochs.tolist() if (epochs >= 0).all()
                             else np.where(epochs >= 0, epochs, np.array(None)).tolist())
    out: list[OffsetAndTimestamp | None] = list(map(tuple.__new__, itertools.repeat(OffsetAndTimestamp),
                                                    zip(offsets.tolist(), stamps.tolist(), eps)))
    for i in np.flatnonzero(offsets < 0).tolist():
        out[i] = None
    return out


def _read_or_none(path: PathLike) -> bytes | None:
    try:
        return _files.read_whole(path)
    except (FileNotFoundError, StorageError):
        return None


# ------------------------------------------------------------------------------------ KIP-79 over a log dir
def offsets_for_times(targets: Mapping[tuple[str, int], Target] | Iterable[tuple[tuple[str, int], Target]],
                      log_dir: PathLike) -> dict[tuple[str, int], OffsetAndTimestamp | KBatchError | None]:
    """ListOffsets over a directory of `<topic>-<partition>` folders.

    targets: {(topic, partition): target} or a list of ((topic, partition), target) pairs (so one
    partition can be named twice). A target is an int64 timestamp or EARLIEST / LATEST /
    MAX_TIMESTAMP. Returns {(topic, partition): OffsetAndTimestamp | None | KBatchError}:
    InvalidRequestError (42) for a partition named twice with different targets,
    UnsupportedForMessageFormatError (43) for a timestamp target on magic 0 data,
    UnknownTopicOrPartitionError (3) for a partition without a directory.
    """
    pairs = list(targets.items()) if isinstance(targets, Mapping) else list(targets)
    wanted: dict[tuple[str, int], Target] = {}
    dupes: set[tuple[str, int]] = set()
    for named, target in pairs:
        tp = (str(named[0]), int(named[1]))
        if tp in wanted and not _same_target(wanted[tp], target):
            dupes.add(tp)
        wanted.setdefault(tp, target)
    out: dict[tuple[str, int], OffsetAndTimestamp | KBatchError | None] = {}
    for tp, target in wanted.items():
        if tp in dupes:
            out[tp] = InvalidRequestError("Partition is named more than once with different targets",
                                          expected="one target per partition", found=f"{tp[0]}-{tp[1]}")
            continue
        path = _fs.join(log_dir if _fs.is_remote(log_dir) else os.fspath(log_dir), f"{tp[0]}-{tp[1]}")
        try:
            log = Log.open(path)
            try:
                if not isinstance(target, OffsetSpec) and log.magic() == W.MAGIC_VALUE_V0:
                    raise UnsupportedForMessageFormatError(
                        f"Cannot search offsets based on timestamp because message format version for "
                        f"partition {tp[0]}-{tp[1]} is 0 which is smaller than 1",
                        expected="magic >= 1", found="magic 0")
                out[tp] = log.offset_for(target)
            finally:
                log.close()
        except KBatchError as e:
            out[tp] = e
    return out


def _same_target(a: Target, b: Target) -> bool:
    if isinstance(a, OffsetSpec) or isinstance(b, OffsetSpec):
        return a is b
    return int(a) == int(b)


# ------------------------------------------------------------------------------------ index tools
def _segment_logs(log_path: PathLike) -> list[str]:
    p = os.fspath(log_path)
    if os.path.isdir(p):
        return [_files.segment_path(p, b, ".log") for b in _files.list_segment_bases(p)]
    return [p]


def _base_of(path: str) -> int:
    name = os.path.basename(path)
    parsed = _files.parse_segment_file_name(name)
    if parsed is None or parsed[1] != _files.LOG_SUFFIX:
        raise InvalidRequestError("Not a segment file name", expected="<20-digit base offset>.log", found=name)
    return parsed[0]


def rebuild_segment_indexes(log_path: PathLike,
                            index_interval_bytes: int = W.DEFAULT_INDEX_INTERVAL_BYTES) -> tuple[str, int, int]:
    """Write one .log's .index and .timeindex as a broker's recovery writes them, trimmed, each
    atomically (its .txnindex, which needs the segments before it, is rebuild_indexes' part). The
    caller holds the directory's lock (or owns the directory, as compaction's scratch space). A
    segment that cannot be read in full raises CorruptRecordError and nothing changes.
    Returns (log path, index entries, time entries)."""
    path = os.fspath(log_path)
    return _rebuild([path], {path}, index_interval_bytes, txn_index=False)[0]


def _rebuild(paths: list[str], targets: set[str], index_interval_bytes: int,
             txn_index: bool = True) -> list[tuple[str, int, int]]:
    """rebuild_segment_indexes for the `targets` among `paths` (a directory's segments in order):
    every target is read in full first, and only when each one is complete and valid are files
    written. The .txnindex entries follow the open transactions from the first of `paths` on."""
    ongoing = (_txns.ongoing_at(os.path.dirname(paths[0]) or ".", _base_of(paths[0])) if paths else None) \
        or _txns.OngoingTxns()
    plans: list[tuple[str, bytes, bytes, list[AbortedTxn]]] = []
    for path in paths:
        records = FileRecords(path)
        try:
            if path in targets:
                built = build_indexes(records, _base_of(path), index_interval_bytes, stop_on_error=True)
                refusal = (f"; {path} cannot be read in full, and its indexes may be the only way to batches "
                           f"after the damage, so no index file of this partition was changed (see `kbatch verify`; "
                           f"repair the segment, or let a writer's recovery truncate a torn tail of the last one)")
                if built.error is not None:
                    raise built.error.update(reason=built.error.reason + refusal)
                if built.valid_bytes < records.size_in_bytes:
                    why = (f"{records.size_in_bytes - built.valid_bytes} bytes from byte {built.valid_bytes} are not a "
                           f"complete batch ({records.incomplete(built.valid_bytes, 'the segment')})")
                    raise CorruptRecordError(why + refusal, position=built.valid_bytes,
                                             expected="complete, valid batches to the end of the segment",
                                             found=f"{records.size_in_bytes - built.valid_bytes} bytes that are not")
            entries = _txns.follow_windows(records.scan(), ongoing) if txn_index else []
            if path in targets:
                plans.append((path, built.index, built.timeindex, entries))
        finally:
            records.close()
    out = []
    for path, index, timeindex, entries in plans:
        stem = path[:-len(_files.LOG_SUFFIX)]
        _files.atomic_write(stem + ".index", index)
        _files.atomic_write(stem + ".timeindex", timeindex)
        have = _read_or_none(stem + ".txnindex") if txn_index else None
        want = _txns.txn_index_bytes(entries)
        if txn_index and have != want and (entries or have is not None):
            _files.atomic_write(stem + ".txnindex", want)
        out.append((path, len(index) // W.OFFSET_INDEX_ENTRY_SIZE, len(timeindex) // W.TIME_INDEX_ENTRY_SIZE))
    return out


def rebuild_indexes(log_path: PathLike,
                    index_interval_bytes: int = W.DEFAULT_INDEX_INTERVAL_BYTES) -> list[tuple[str, int, int]]:
    """Write .index, .timeindex and .txnindex for a .log file (or every segment of a directory) as a
    broker's recovery writes them, trimmed, atomically (each file keeps its mode). Holds the
    directory's `.lock` while it writes: a directory another writer (or a running broker) holds is
    refused with LogDirectoryLockedError. A segment that cannot be read in full (a corrupt batch, a
    bad length field, a torn tail) raises CorruptRecordError before any file changes.
    Returns [(log path, index entries, time entries)]."""
    p = os.fspath(log_path)
    directory = p if os.path.isdir(p) else (os.path.dirname(p) or ".")
    with _files.DirLock.acquire(directory, "rebuild indexes"):
        if os.path.isdir(p):
            paths = _segment_logs(p)
            return _rebuild(paths, set(paths), index_interval_bytes)
        base = _base_of(p)
        before = [q for q in _segment_logs(directory) if _base_of(q) < base]
        return _rebuild([*before, p], {p}, index_interval_bytes)


MISSING_INDEX = "file is missing (a broker rebuilds it from the .log when it loads the segment)"


@dataclass
class SegmentIndexReport:
    """verify_indexes findings for one segment (kafka-dump-log --index-sanity-check / --verify-index-only).

    Problems (they make `ok` false): failed sanity checks, and entries that kbatch.log.index_rules
    calls damage. Information: `notes` (entries in forms older brokers write, valid) and
    `matches_rebuild` (whether the files equal what rebuild_indexes writes; a broker's own index
    often differs, by its spacing after restarts, its close-time entry or an older form)."""

    log_path: str
    sanity_errors: list[tuple[str, str]] = field(default_factory=list)          # (file, message)
    index_mismatches: list[tuple[int, int, str]] = field(default_factory=list)  # (index offset, position, message)
    time_mismatches: list[tuple[int, int, str]] = field(default_factory=list)   # (index timestamp, offset, message)
    notes: list[tuple[str, str]] = field(default_factory=list)                  # (file, message)
    matches_rebuild: bool = True
    rebuild_difference: str | None = None
    truncated_bytes: int = 0

    @property
    def ok(self) -> bool:
        return not (self.sanity_errors or self.index_mismatches or self.time_mismatches)

    def lines(self) -> list[str]:
        out: list[str] = []
        stem = self.log_path[:-len(_files.LOG_SUFFIX)]
        for f, msg in self.sanity_errors:
            out.append(f"{f} has error: {msg}")
        skipped = {f for f, _ in self.sanity_errors} | {f for f, m in self.notes if m.startswith(MISSING_INDEX)}
        for suffix in (".index", ".timeindex"):
            if stem + suffix not in skipped:
                out.append(f"{stem + suffix} passed sanity check.")
        for _off, _pos, msg in self.index_mismatches:
            out.append(f"Mismatches in :{stem}.index\n  {msg}")
        for _ts, _off, msg in self.time_mismatches:
            out.append(f"Found timestamp mismatch in :{stem}.timeindex\n  {msg}")
        for f, msg in self.notes:
            out.append(f"note: {f}: {msg}")
        if not self.matches_rebuild:
            out.append(f"note: indexes of {self.log_path} differ from a rebuild (information, not a problem): "
                       f"{self.rebuild_difference}")
        if self.truncated_bytes:
            out.append(f"Found {self.truncated_bytes} invalid bytes at the end of {os.path.basename(self.log_path)}")
        return out


@dataclass
class IndexVerification:
    segments: list[SegmentIndexReport]

    @property
    def ok(self) -> bool:
        return all(s.ok for s in self.segments)

    @property
    def matches_rebuild(self) -> bool:
        return all(s.matches_rebuild for s in self.segments)

    def lines(self) -> list[str]:
        return [line for s in self.segments for line in s.lines()]

    def __str__(self) -> str:
        return "\n".join(self.lines())


def verify_indexes(log_path: PathLike, index_interval_bytes: int = W.DEFAULT_INDEX_INTERVAL_BYTES) -> IndexVerification:
    """Check existing .index/.timeindex files against their .log: Kafka's sanity checks and every
    entry by the rules a broker of any version writes by (kbatch.log.index_rules); whether they equal
    what rebuild_indexes would write with `index_interval_bytes` is reported as information.
    Returns an IndexVerification; nothing is modified."""
    from .index_rules import SegmentBatches, check_offset_index, check_time_index

    reports: list[SegmentIndexReport] = []
    for path in _segment_logs(log_path):
        base = _base_of(path)
        stem = path[:-len(_files.LOG_SUFFIX)]
        rep = SegmentIndexReport(path)
        records = FileRecords(path)
        try:
            built = build_indexes(records, base, index_interval_bytes, stop_on_error=True)
            rep.truncated_bytes = records.size_in_bytes - built.valid_bytes
            sb = SegmentBatches(records)
            found: dict[str, OffsetIndex | TimeIndex] = {}
            index_kinds: tuple[tuple[type[OffsetIndex] | type[TimeIndex], str], ...] = (
                (OffsetIndex, ".index"), (TimeIndex, ".timeindex"))
            for cls, suffix in index_kinds:
                try:
                    idx = cls.open(stem + suffix, base)
                except FileNotFoundError:  # a broker rebuilds a missing index when it loads the segment
                    rep.notes.append((stem + suffix, MISSING_INDEX))
                    continue
                except StorageError as e:  # not a regular file
                    rep.sanity_errors.append((stem + suffix, str(e)))
                    continue
                try:
                    idx.sanity_check()
                except KBatchError as e:
                    rep.sanity_errors.append((stem + suffix, str(e)))
                found[suffix] = idx
            checks = ((".index", check_offset_index, rep.index_mismatches),
                      (".timeindex", check_time_index, rep.time_mismatches))
            for suffix, check, sink in checks:
                if suffix in found:
                    for f in check(stem + suffix, list(found[suffix]), sb):
                        if f.problem:
                            sink.append((*f.entry, f.message))
                        else:
                            rep.notes.append((f.file, f.message))
            for suffix, want in ((".index", built.index), (".timeindex", built.timeindex)):
                found_idx = found.get(suffix)
                have = None if found_idx is None else found_idx.raw()
                if have != want:
                    rep.matches_rebuild = False
                    rep.rebuild_difference = _describe_difference(suffix, have, want)
                    break
            for idx in found.values():
                idx.close()
            del sb
        finally:
            records.close()
        reports.append(rep)
    return IndexVerification(reports)


def _describe_difference(suffix: str, have: bytes | None, want: bytes) -> str:
    es = W.OFFSET_INDEX_ENTRY_SIZE if suffix == ".index" else W.TIME_INDEX_ENTRY_SIZE
    if have is None:
        return f"{suffix} is missing, a rebuild has {len(want) // es} entries"
    n = min(len(have), len(want)) // es
    for i in range(n):
        if have[i * es:(i + 1) * es] != want[i * es:(i + 1) * es]:
            return f"{suffix} entry {i} differs (byte {i * es})"
    return f"{suffix} has {len(have) // es} entries, a rebuild has {len(want) // es}"


__all__ = ["Log", "LogConfig", "AppendGroup", "OffsetAndTimestamp", "offsets_for_times", "rebuild_indexes", "verify_indexes",
           "rebuild_segment_indexes",
           "IndexVerification", "SegmentIndexReport", "RecoveryReport", "DeletedSegment"]
