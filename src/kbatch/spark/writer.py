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
(Log.append_table), into its own staging directory `<path>/_kbatch_staging/<job>/<task>-<attempt>/`
that readers never look at. Only the driver's commit, with the messages of the attempts Spark
chose, makes anything visible: for each partition it joins the tasks' segments in task order,
shifting later tasks' offsets past the earlier ones (baseOffset sits outside the CRC and the
indexes hold offsets relative to their segment, so a shift rewrites 8 bytes a batch and renames
files), opens and closes the result as a Log, then renames the directory into place: a
partition appears whole or not at all. A failed job, or a failed or speculative attempt,
leaves nothing visible; the staging directory of the job is removed at commit or abort.

Modes: "append" adds to partitions that already exist through Log.append (offsets continue from
their end, the directory lock held); "overwrite" replaces every partition directory of the
topics written. Options with a dot are the topic's configuration (Kafka's names:
segment.bytes, compression.type, max.message.bytes, message.timestamp.type, ...); `compression`
and `compressionLevel` pick the batches' codec for a "producer" topic; `recordsPerBatch` caps
records a batch (batches are otherwise up to max.message.bytes).
"""
from __future__ import annotations

import os
import shutil
import uuid
from dataclasses import dataclass, field

from pyspark.sql.datasource import DataSourceArrowWriter, WriterCommitMessage

from .._files import parse_partition_dir
from ..errors import InvalidRequestError
from ..partitioner import Router, check_topic, partitions_for

STAGING = "_kbatch_staging"


def _opt(options, name, default=None):
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
    pieces: list = field(default_factory=list)


# ------------------------------------------------------------------------------------ the writer
class KafkaSegmentsWriter(DataSourceArrowWriter):
    """Made on the driver by KafkaSegmentsDataSource.writer; write() runs in each task."""

    def __init__(self, options, schema, overwrite: bool):
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

    def config(self):
        from ..log import LogConfig

        return LogConfig.from_properties(self.properties)

    def _codec(self):
        from ..compression import codec_from_name

        return None if self.compression is None else codec_from_name(self.compression)

    # -------------------------------------------------------------------------------- tasks
    def write(self, iterator):
        from pyspark import TaskContext

        from ..log import Log

        ctx = TaskContext.get()
        task = ctx.partitionId() if ctx is not None else 0
        attempt = str(ctx.taskAttemptId()) if ctx is not None else uuid.uuid4().hex
        # the driver made the job directory; mkdir (not makedirs) fails once commit or abort removed it
        task_dir = os.path.join(self.job_dir, f"{task}-{attempt}")
        os.mkdir(task_dir)
        route = Router(self.topic, self.num_partitions)
        cfg, codec = self.config(), self._codec()
        logs = {}
        try:
            for rb in iterator:
                for key, sub in route.groups(rb):
                    log = logs.get(key)
                    if log is None:
                        log = logs[key] = Log.create(os.path.join(task_dir, f"{key[0]}-{key[1]}"), cfg)
                    log.append_table(sub, compression=codec, compression_level=self.compression_level,
                                     records_per_batch=self.records_per_batch)
        finally:
            for log in logs.values():
                log.close()
        pieces = [Piece(t, p, log.directory, log.end_offset()) for (t, p), log in sorted(logs.items())]
        return TaskCommit(task, attempt, pieces)

    # -------------------------------------------------------------------------------- driver
    def commit(self, messages):
        try:
            by_partition = {}
            for msg in messages:
                if msg is None:
                    continue
                for piece in msg.pieces:
                    by_partition.setdefault((piece.topic, piece.partition), []).append((msg.task, piece))
            final_root = os.path.join(self.job_dir, "_final")
            trash = os.path.join(self.job_dir, "_replaced")
            os.makedirs(final_root)
            os.makedirs(trash)
            if self.overwrite:
                topics = {t for t, _p in by_partition}
                for name in sorted(os.listdir(self.path)):
                    parsed = parse_partition_dir(name)
                    if parsed and parsed[0] in topics and parsed not in by_partition:
                        os.replace(os.path.join(self.path, name), os.path.join(trash, name))
            for (topic, part), items in sorted(by_partition.items()):
                items.sort(key=lambda it: it[0])
                name = f"{topic}-{part}"
                target = os.path.join(self.path, name)
                if os.path.exists(target) and not self.overwrite:
                    _append_pieces(target, [p for _t, p in items], self.config())
                    continue
                built = os.path.join(final_root, name)
                _join_pieces(built, [p for _t, p in items], self.config())
                if os.path.exists(target):
                    os.replace(target, os.path.join(trash, name))
                os.replace(built, target)  # the partition appears whole
        finally:
            self._remove_staging()

    def abort(self, messages):
        self._remove_staging()

    def _remove_staging(self):
        shutil.rmtree(self.job_dir, ignore_errors=True)
        try:
            os.rmdir(os.path.join(self.path, STAGING))  # only when no other job is staging
        except OSError:
            pass


# ------------------------------------------------------------------------------------ joining pieces
def _segments(path):
    from .._files import list_segment_bases

    return list_segment_bases(path)


def _shift_batches(log_path: str, delta: int) -> None:
    """Add `delta` to every batch's baseOffset (outside the CRC) in place."""
    import mmap
    import struct

    from ..batch import scan_headers

    with open(log_path, "r+b") as f:
        size = os.fstat(f.fileno()).st_size
        if not size:
            return
        with mmap.mmap(f.fileno(), size, access=mmap.ACCESS_READ) as m:
            rows = [(s["position"], s["base_offset"]) for s in scan_headers(memoryview(m))]
        for positions, bases in rows:
            for pos, base in zip(positions.tolist(), bases.tolist()):
                f.seek(pos)
                f.write(struct.pack(">q", base + delta))
        f.flush()
        os.fsync(f.fileno())


def _join_pieces(target: str, pieces: list, config) -> None:
    """One partition directory from the tasks' logs, in task order: each piece's segments shifted
    past the offsets of the pieces before it, then opened and closed as a Log (its own files)."""
    from .. import _files
    from ..log import Log

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


def _append_pieces(target: str, pieces: list, config) -> None:
    """Append the tasks' batches to an existing partition through Log.append (its lock, its
    validation; offsets continue from its end)."""
    from ..log import Log

    log = Log.open(target, config, writable=True)
    try:
        for piece in pieces:
            src = Log.open(piece.path)
            for seg in src.segments:
                data = memoryview(seg.log.buffer())
                start = 0
                for s in _batch_ends(data):
                    log.append(data[start:s], from_client=False)
                    start = s
    finally:
        log.close()


def _batch_ends(data, limit: int = 16 * 1024 * 1024):
    """Ends of runs of whole batches of at most `limit` bytes (one batch at least)."""
    from ..batch import scan_headers

    out, start, prev = [], 0, None
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
