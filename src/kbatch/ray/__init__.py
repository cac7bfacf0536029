"""Kafka's own files as a Ray Dataset: `kbatch.ray.read_kafka_segments(paths, topics, ...)`, a
ray.data Datasource over kbatch.scan with the argument names of `ray.data.read_kafka` (topics,
start_offset / end_offset as an offset, a datetime, "earliest" / "latest" or {topic: {partition:
offset}}), reading the files instead of a broker.

    import ray
    from kbatch.ray import read_kafka_segments
    ds = read_kafka_segments("s3://bucket/kafka-logs", topics="orders",
                             start_offset=datetime(2026, 1, 1), end_offset="latest")

The scan is planned on the driver (bounds resolved through the indexes, offsets cut into ranges by
kbatch.log.segment_plan, the Spark readers' planner); each planned range is one read task, which
reads it through the read path on a worker.
"""
from __future__ import annotations

import datetime as _dt
from collections.abc import Iterable, Iterator, Mapping
from typing import TYPE_CHECKING, Any, Union

from ..errors import MissingDependencyError
from ..scan import DEFAULT_RANGE_BYTES, ReadOptions, ScanRange, read_range, scan

if TYPE_CHECKING:
    import pyarrow as pa

    from ..scan.plan import Paths

#: a ray.data.read_kafka start or end
Position = Union[int, _dt.datetime, str, Mapping[str, Mapping[int, Union[int, str]]]]


def _ray() -> Any:
    try:
        import ray.data
    except ImportError:
        raise MissingDependencyError("kbatch.ray.read_kafka_segments", "ray", "ray", requirement="[data]") from None
    return ray


def _bounds(pos: Position, open_word: str) -> tuple[Any, Any]:
    """(offset bound, time bound) of a read_kafka position; `open_word` is its unbounded spelling."""
    if isinstance(pos, str):
        if pos != open_word:
            raise ValueError(f"a position is an offset, a datetime, {open_word!r} or {{topic: {{partition: offset}}}}, "
                             f"not {pos!r}")
        return None, None
    if isinstance(pos, _dt.datetime):
        return None, pos
    if isinstance(pos, Mapping):
        per: dict[str, dict[int, int]] = {}
        for topic, parts in pos.items():
            for p, v in parts.items():
                if isinstance(v, str):
                    if v != open_word:
                        raise ValueError(f"{topic}-{p}: {v!r} is not {open_word!r} or an offset")
                    continue
                per.setdefault(topic, {})[int(p)] = int(v)
        return per, None
    if isinstance(pos, bool) or not isinstance(pos, int):
        raise TypeError(f"a position is an offset, a datetime, a word or a mapping, not {pos!r}")
    return int(pos), None


def _read_task(r: ScanRange, opts: ReadOptions, schema: pa.Schema) -> Iterator[pa.Table]:
    """One read task: the range's rows through the read path (on a worker)."""
    import pyarrow as pa

    from ..log.unified_log import Log

    log = Log.open(r.path)
    try:
        for rb in read_range(log, r, opts):
            rb = rb.select(list(opts.columns))
            yield pa.Table.from_batches([rb if rb.schema == schema else rb.cast(schema)])
    finally:
        log.close()


def _datasource_class() -> Any:
    ray = _ray()
    from ray.data import Datasource, ReadTask
    from ray.data.block import BlockMetadata

    class KafkaSegmentsDatasource(Datasource):
        """A planned kbatch.scan as Ray read tasks, one per planned range."""

        def __init__(self, paths: Paths, **scan_args: Any) -> None:
            with scan(paths, **scan_args) as s:
                self.ranges = list(s.ranges)
                self.partitions = list(s.partitions)
                self.options = s.options
                self.schema = s.schema
                self.limit = s.limit
            self.paths = paths

        def get_name(self) -> str:
            return "KafkaSegments"

        def estimate_inmemory_data_size(self) -> int | None:
            return None

        def get_read_tasks(self, parallelism: int, per_task_row_limit: int | None = None,
                           data_context: Any = None) -> list[Any]:
            tasks = []
            for r in self.ranges:
                meta = BlockMetadata(num_rows=None, size_bytes=None, exec_stats=None, input_files=(r.path,))

                def read_fn(r: ScanRange = r) -> Iterable[pa.Table]:
                    return _read_task(r, self.options, self.schema)

                tasks.append(ReadTask(read_fn, meta, schema=self.schema, per_task_row_limit=per_task_row_limit))
            return tasks

    del ray
    return KafkaSegmentsDatasource


def read_kafka_segments(paths: Paths, topics: str | Iterable[str] | None = None, *,
                        start_offset: Position = "earliest", end_offset: Position = "latest",
                        isolation: str = "read_uncommitted", columns: Iterable[str] | None = None,
                        include_headers: bool = True, key_schema: Any = None, value_schema: Any = None,
                        skip_unreadable: bool = False, range_bytes: int = DEFAULT_RANGE_BYTES,
                        limit: int | None = None, num_cpus: float | None = None, memory: float | None = None,
                        concurrency: int | None = None, override_num_blocks: int | None = None,
                        ray_remote_args: dict[str, Any] | None = None) -> Any:
    """A ray.data.Dataset of the partitions under `paths` (kbatch.scan's paths: local or remote,
    any layout), with ray.data.read_kafka's names: `topics` (one or several; None: every topic),
    `start_offset` ("earliest", an offset, a datetime: the first offset whose timestamp is at or
    after it, KIP-79; or {topic: {partition: offset}}), `end_offset` ("latest", an offset, a
    datetime, or a mapping; exclusive). The rest are kbatch.scan's. One read task per planned
    range (about range_bytes of segments each)."""
    ray = _ray()
    from_offset, from_time = _bounds(start_offset, "earliest")
    until_offset, until_time = _bounds(end_offset, "latest")
    topic_list = None if topics is None else [topics] if isinstance(topics, str) else list(topics)
    ds_class = _datasource_class()
    source = ds_class(paths, topics=topic_list, from_offset=from_offset, until_offset=until_offset,
                      from_time=from_time, until_time=until_time, isolation=isolation,
                      columns=None if columns is None else list(columns), include_headers=include_headers,
                      key_schema=key_schema, value_schema=value_schema, skip_unreadable=skip_unreadable,
                      range_bytes=range_bytes)
    args: dict[str, Any] = {}
    for k, v in (("num_cpus", num_cpus), ("memory", memory), ("concurrency", concurrency),
                 ("override_num_blocks", override_num_blocks), ("ray_remote_args", ray_remote_args)):
        if v is not None:
            args[k] = v
    ds = ray.data.read_datasource(source, **args)
    return ds if limit is None else ds.limit(limit)


__all__ = ["read_kafka_segments"]
