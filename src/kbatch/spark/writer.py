"""The `kafka-segments` writer: a DataFrame into `<topic>-<partition>/` directories of segments.

    kbatch.spark.register(spark)
    (df.write.format("kafka-segments").mode("append")
       .option("topic", "orders").option("numPartitions", 6).save("/data/out"))

Rows have kbatch's Kafka-source columns (`value` required; `key`, `timestamp`, `headers`,
`isTombstone` when present: kbatch.encode_columns says how each is read). A row goes to:

  topic      the `topic` option, else the row's `topic` column
  partition  the row's `partition` column when the DataFrame has one, else Kafka's default key
             partitioner: toPositive(murmur2(key)) % numPartitions (Utils.murmur2, the Java
             producer's BuiltInPartitioner); rows with a null key (or a null partition) take the
             partitions in turn, as Kafka's RoundRobinPartitioner does, per task

Each Spark task writes one `Log` per (topic, partition) it meets, with the encode_columns kernel
(Log.append_table), into its own attempt directory `<path>/_kbatch_staging/<job>/<task>-<attempt>/`
that readers never look at. Only the driver's commit, with the messages of the attempts Spark
chose, makes anything visible. Commit and abort first rename the job's directory out of the way
(`<job>` -> `<job>.closed`): from then on a task still running (a speculative copy, a task of a
failed job Spark has not stopped yet) can create nothing, because every file and directory a task
makes is named under `<job>/` and nothing a task calls creates missing parents; such a late task
finds its job gone, removes its attempt directory and fails. The commit then takes the `.lock`
of every partition directory it will change (holding a Log open for writing on the ones it
appends to) before it changes any, so a partition another writer or a running broker holds
refuses the commit with nothing changed; builds the new partitions in the closed job directory,
each locked: the tasks' segments joined in task order, later tasks' offsets shifted past the
earlier ones (baseOffset sits outside the CRC and the indexes hold offsets relative to their
segment, so a shift rewrites 8 bytes a batch and renames files), opened and closed as a Log; then
appends, and renames each new partition into place with its lock held (the lock file moves with
the directory): a partition appears whole, and locked, or not at all. A step that fails undoes
the ones before it (appends truncated back, renames reversed). A failed job, or a failed or
speculative attempt, leaves nothing visible; the job's directory is removed at commit or abort.

Modes: "append" adds to partitions that already exist through Log.append (offsets continue from
their end, the directory lock held); "overwrite" replaces every partition directory of the
topics written. Options with a dot are the topic's configuration (Kafka's names:
segment.bytes, compression.type, max.message.bytes, message.timestamp.type, ...); `compression`
and `compressionLevel` pick the batches' codec for a "producer" topic; `recordsPerBatch` caps
records a batch (batches are otherwise up to max.message.bytes).
"""
from __future__ import annotations

import logging
import os
import shutil
import uuid
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, overload

from pyspark.sql.datasource import DataSourceArrowWriter, WriterCommitMessage

from ..log.files import DirLock, fsync_dir, parse_partition_dir
from ..errors import InvalidRequestError, KBatchError
from ..columns.partitioner import Router, check_topic, partitions_for

if TYPE_CHECKING:
    import pyarrow as pa
    from pyspark.sql.types import StructType

    from .. import _wire as W
    from ..log.unified_log import Log, LogConfig

STAGING = "_kbatch_staging"
CLOSED = ".closed"  # a job directory commit or abort has taken over


@overload
def _opt(options: Mapping[str, str], name: str) -> str | None: ...
@overload
def _opt(options: Mapping[str, str], name: str, default: str) -> str: ...


def _opt(options: Mapping[str, str], name: str, default: str | None = None) -> str | None:
    for k, v in options.items():
        if k.lower() == name.lower() and v not in (None, ""):
            return v
    return default


@dataclass
class Piece:
    """What one task wrote for one partition: its staging directory and how many offsets."""

    topic: str
    partition: int
    path: str
    records: int


@dataclass
class TaskCommit(WriterCommitMessage):
    task: int
    attempt: str
    pieces: list[Piece] = field(default_factory=list)


# ------------------------------------------------------------------------------------ the writer
class KafkaSegmentsWriter(DataSourceArrowWriter):
    """Made on the driver by KafkaSegmentsDataSource.writer; write() runs in each task."""

    def __init__(self, options: Mapping[str, str], schema: StructType, overwrite: bool) -> None:
        self.path = os.fspath(_opt(options, "path") or "")
        if not self.path:
            raise InvalidRequestError("No path", expected="save(path)", found="none")
        if "value" not in schema.fieldNames():
            raise InvalidRequestError("No 'value' column", expected="a 'value' column (binary or string)",
                                      found=", ".join(schema.fieldNames()))
        self.topic = _opt(options, "topic")
        if self.topic is not None:
            check_topic(self.topic)
        n = _opt(options, "numPartitions")
        self.num_partitions = None if n is None else int(n)
        if self.num_partitions is not None and self.num_partitions < 1:
            raise InvalidRequestError("Invalid numPartitions", expected=">= 1", found=self.num_partitions)
        self.properties = {k: v for k, v in options.items() if "." in k}
        self.compression = _opt(options, "compression")
        level = _opt(options, "compressionLevel")
        self.compression_level = None if level is None else int(level)
        rpb = _opt(options, "recordsPerBatch")
        self.records_per_batch = None if rpb is None else int(rpb)
        self.overwrite = bool(overwrite)
        self.config()  # a bad topic configuration or codec fails here, on the driver
        self._codec()
        self.job = uuid.uuid4().hex
        self.job_dir = os.path.join(self.path, STAGING, self.job)
        os.makedirs(self.job_dir)

    def config(self) -> LogConfig:
        from ..log.unified_log import LogConfig

        return LogConfig.from_properties(self.properties)

    def _codec(self) -> W.Compression | None:
        from ..record.compression import codec_from_name

        return None if self.compression is None else codec_from_name(self.compression)

    # -------------------------------------------------------------------------------- tasks
    def write(self, iterator: Iterator[pa.RecordBatch]) -> TaskCommit:
        from pyspark import TaskContext

        from ..log.unified_log import Log

        ctx = TaskContext.get()
        task = ctx.partitionId() if ctx is not None else 0
        attempt = str(ctx.taskAttemptId()) if ctx is not None else uuid.uuid4().hex
        name = f"{task}-{attempt}"
        task_dir = os.path.join(self.job_dir, name)
        try:
            os.mkdir(task_dir)  # not makedirs: once commit or abort closed the job, this fails
        except FileNotFoundError:
            raise self._job_over(name) from None
        route = Router(self.topic, self.num_partitions)
        cfg, codec = self.config(), self._codec()
        logs: dict[tuple[str, int], Log] = {}
        try:
            for rb in iterator:
                for key, sub in route.groups(rb):
                    log = logs.get(key)
                    if log is None:
                        part_dir = os.path.join(task_dir, f"{key[0]}-{key[1]}")
                        os.mkdir(part_dir)  # not Log.create: its makedirs would bring a closed job back
                        log = logs[key] = Log.open(part_dir, cfg, writable=True)
                    log.append_table(sub, compression=codec, compression_level=self.compression_level,
                                     records_per_batch=self.records_per_batch)
            for log in logs.values():
                log.close()
        except BaseException as e:
            for log in logs.values():
                _close_quietly(log)
            if not os.path.isdir(self.job_dir):
                self._clean_up_late(name)
                raise self._job_over(name) from e
            raise
        if not os.path.isdir(self.job_dir):  # finished after the commit or abort: its output is not wanted
            self._clean_up_late(name)
            raise self._job_over(name)
        pieces = [Piece(t, p, log.directory, log.end_offset()) for (t, p), log in sorted(logs.items())]
        return TaskCommit(task, attempt, pieces)

    def _job_over(self, name: str) -> KBatchError:
        return KBatchError(f"kafka-segments write job {self.job}: task attempt {name} ran after the job was committed "
                           f"or aborted; its output was discarded", expected="a running write job",
                           found="the job's staging directory closed")

    def _clean_up_late(self, name: str) -> None:
        """A late attempt removes what it wrote, should the driver's removal have run first."""
        shutil.rmtree(os.path.join(self.job_dir + CLOSED, name), ignore_errors=True)

    # -------------------------------------------------------------------------------- driver
    def _close_job(self) -> str | None:
        """Rename the job directory to `<job>.closed` (late tasks can no longer write into it);
        None when commit or abort already did."""
        closed = self.job_dir + CLOSED
        try:
            os.rename(self.job_dir, closed)
        except FileNotFoundError:
            return None
        return closed

    def commit(self, messages: list[WriterCommitMessage | None]) -> None:
        closed = self._close_job()
        if closed is None:
            raise InvalidRequestError("The write job was already committed or aborted", expected="a running job",
                                      found=self.job)
        try:
            by_partition: dict[tuple[str, int], list[tuple[int, Piece]]] = {}
            for msg in messages:
                if msg is None:
                    continue
                assert isinstance(msg, TaskCommit)  # what write() returns
                for piece in msg.pieces:
                    path = closed + piece.path[len(self.job_dir):]  # where the closed job keeps it
                    by_partition.setdefault((piece.topic, piece.partition), []).append(
                        (msg.task, Piece(piece.topic, piece.partition, path, piece.records)))
            _Commit(self, closed, by_partition).run()
        finally:
            self._remove_staging(closed)

    def abort(self, messages: list[WriterCommitMessage | None]) -> None:
        self._remove_staging(self._close_job())

    def _remove_staging(self, closed: str | None) -> None:
        if closed is not None:
            shutil.rmtree(closed, ignore_errors=True)
        try:
            os.rmdir(os.path.join(self.path, STAGING))  # only when no other job is staging
        except OSError:
            pass


def _close_quietly(log: Log) -> None:
    try:
        log.close()
    except (OSError, KBatchError):  # a late task: its directory may be gone already
        log.abandon()


class _Commit:
    """One job's commit (see the module docstring): lock, build, then change, undoing on failure."""

    def __init__(self, writer: KafkaSegmentsWriter, closed: str,
                 by_partition: dict[tuple[str, int], list[tuple[int, Piece]]]) -> None:
        self.w = writer
        self.config = writer.config()
        self.closed = closed
        self.by_partition = {k: [p for _t, p in sorted(v, key=lambda it: it[0])] for k, v in by_partition.items()}
        self.held: list[Callable[[], None]] = []   # how to let go of the locks and the Logs open for writing
        self.undo: list[Callable[[], None]] = []   # what to do to put back what was changed, newest last

    def run(self) -> None:
        try:
            appends, replaced, new = self._lock_all()
            built = {name: self._build(name, pieces) for name, pieces in new.items()}
            for name, (log, pieces) in appends.items():
                self._append(log, pieces)
            trash = os.path.join(self.closed, "_replaced")
            os.mkdir(trash)
            for name in replaced:
                self._rename(os.path.join(self.w.path, name), os.path.join(trash, name))
            for name, path in built.items():
                self._rename(path, os.path.join(self.w.path, name))  # appears whole, its lock held
            fsync_dir(self.w.path)
        except BaseException:
            for step in reversed(self.undo):
                try:
                    step()
                except Exception as e:  # noqa: BLE001 - keep undoing; the first error is raised
                    logging.getLogger("kbatch.spark").error("undoing a failed commit: %s", e)
            raise
        finally:
            for let_go in reversed(self.held):
                try:
                    let_go()
                except Exception as e:  # noqa: BLE001 - let go of the others too
                    logging.getLogger("kbatch.spark").error("releasing a partition after a commit: %s", e)

    def _lock_all(self) -> tuple[dict[str, tuple[Log, list[Piece]]], list[str], dict[str, list[Piece]]]:
        """Take the lock of every partition directory the commit changes, before changing any (the
        Logs appended to last: opening one for writing recovers it)."""
        from ..log.unified_log import Log

        to_append: dict[str, list[Piece]] = {}
        replaced: list[str] = []
        new: dict[str, list[Piece]] = {}
        path = self.w.path
        for (topic, part), pieces in sorted(self.by_partition.items()):
            name = f"{topic}-{part}"
            target = os.path.join(path, name)
            if os.path.isdir(target) and not self.w.overwrite:
                to_append[name] = pieces
                continue
            if os.path.isdir(target):
                self._lock(target)
                replaced.append(name)
            else:
                DirLock.check_parent(target, "write it (Spark write)")
            new[name] = pieces
        if self.w.overwrite:  # every other partition of the topics written goes too
            topics = {t for t, _p in self.by_partition}
            for name in sorted(os.listdir(path)):
                parsed = parse_partition_dir(name)
                if parsed and parsed[0] in topics and parsed not in self.by_partition \
                        and os.path.isdir(os.path.join(path, name)):
                    self._lock(os.path.join(path, name))
                    replaced.append(name)
        appends: dict[str, tuple[Log, list[Piece]]] = {}
        for name, pieces in to_append.items():
            log = Log.open(os.path.join(path, name), self.config, writable=True)
            self.held.append(log.close)
            appends[name] = (log, pieces)
        return appends, replaced, new

    def _lock(self, directory: str) -> None:
        self.held.append(DirLock.acquire(directory, "commit a Spark write into it").release)

    def _build(self, name: str, pieces: list[Piece]) -> str:
        built = os.path.join(self.closed, "_final", name)
        os.makedirs(os.path.dirname(built), exist_ok=True)
        _join_pieces(built, pieces, self.config)
        self._lock(built)
        return built

    def _append(self, log: Log, pieces: list[Piece]) -> None:
        start = log.end_offset()
        keep = any(s.base_offset == start for s in log.segments)

        def truncate_back() -> None:
            log.undo_appends(start, keep_segment_at_start=keep)
        self.undo.append(truncate_back)
        _append_pieces(log, pieces)

    def _rename(self, src: str, dst: str) -> None:
        os.rename(src, dst)  # a partition directory made meanwhile (not empty: its .lock) refuses it
        self.undo.append(lambda: os.rename(dst, src))


# ------------------------------------------------------------------------------------ joining pieces
def _segments(path: str) -> list[int]:
    from ..log.files import list_segment_bases

    return list_segment_bases(path)


def _shift_batches(log_path: str, delta: int) -> None:
    """Add `delta` to every batch's baseOffset (outside the CRC) in place."""
    import struct

    from ..log.files import write_all
    from ..record.file_records import FileRecords

    records = FileRecords(log_path, writable=True)
    try:
        fd = records._fd_or_raise()
        for s in records.scan(reuse=True):
            for pos, base in zip(s["position"].tolist(), s["base_offset"].tolist()):
                write_all(fd, struct.pack(">q", base + delta), pos)
    finally:
        records.close()  # fsyncs


def _join_pieces(target: str, pieces: list[Piece], config: LogConfig) -> None:
    """One partition directory from the tasks' logs, in task order: each piece's segments shifted
    past the offsets of the pieces before it, then opened and closed as a Log (its own files)."""
    from ..log import files as _files
    from ..log.unified_log import Log

    os.makedirs(target)
    offset = 0
    for piece in pieces:
        for base in _segments(piece.path):
            src = _files.segment_path(piece.path, base, ".log")
            if offset:
                _shift_batches(src, offset)
            for suffix in (".log", ".index", ".timeindex"):
                s = _files.segment_path(piece.path, base, suffix)
                if os.path.exists(s):
                    os.replace(s, _files.segment_path(target, base + offset, suffix))
        offset += piece.records
    # a writer's open re-checks the last segment and writes what a closed log keeps
    Log.open(target, config, writable=True).close()
    _files.fsync_dir(target)


def _append_pieces(log: Log, pieces: list[Piece]) -> None:
    """Append the tasks' batches to an existing partition (a Log the commit holds open for writing)
    through Log.append, its validation and offsets from its end; all or nothing, even across a
    kill (Log.append_group, as append_table)."""
    from ..columns.encode import with_more

    with log.append_group() as group:
        for run, more in with_more(_runs(pieces)):
            group.append(run, more=more)


def _runs(pieces: list[Piece]) -> Iterator[memoryview]:
    """Runs of whole batches (at most 16 MiB, one batch at least) of the pieces' logs, in order."""
    from ..log.unified_log import Log

    for piece in pieces:
        src = Log.open(piece.path)
        try:
            for seg in src.segments:
                data = memoryview(seg.log.buffer())
                start = 0
                for end in _batch_ends(data):
                    yield data[start:end]
                    start = end
        finally:
            src.close()


def _batch_ends(data: memoryview, limit: int = 16 * 1024 * 1024) -> list[int]:
    """Ends of runs of whole batches of at most `limit` bytes (one batch at least)."""
    from ..record.batch import scan_headers

    out: list[int] = []
    start = 0
    prev: int | None = None
    for s in scan_headers(data):
        for end in (s["position"] + s["size"]).tolist():
            if prev is not None and end - start > limit:
                out.append(prev)
                start = prev
            prev = end
    if prev is not None:
        out.append(prev)
    return out


__all__ = ["KafkaSegmentsWriter", "TaskCommit", "Piece", "partitions_for", "STAGING"]
