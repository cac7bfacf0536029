"""Kafka's own files in DuckDB, over kbatch.scan's Arrow stream.

One query: DuckDB reads a pyarrow.RecordBatchReader named in the SQL (a one-shot stream: a second
query of the same reader finds it spent):

    reader = kbatch.scan("/var/kafka-logs", topics=["orders"]).to_reader()
    duckdb.sql("select partition, count(*) from reader group by all")

Every query: `register(con, "orders", path, ...)` names a topic in a connection so that each
query opens a fresh reader of it (DuckDB asks the registered object for a new Arrow stream, through
the Arrow PyCapsule interface, each time it scans it):

    con = duckdb.connect()
    kbatch.duckdb.register(con, "orders", "/var/kafka-logs", topics=["orders"], isolation="read_committed")
    con.sql("select count(*) from orders"); con.sql("select max(offset) from orders")

The scan is planned at the first query (bounds resolved, ranges cut); `refresh()` plans it again
(to see records appended since), `close()` lets its files go.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ..errors import MissingDependencyError
from ..scan import Scan, scan

if TYPE_CHECKING:
    from ..scan.plan import Paths


def _duckdb() -> Any:
    try:
        import duckdb
    except ImportError:
        raise MissingDependencyError("kbatch.duckdb", "duckdb", "duckdb") from None
    return duckdb


class KafkaTopic:
    """A registered topic: an Arrow stream source whose every stream is a fresh read of one
    planned scan (kbatch.scan's arguments)."""

    def __init__(self, logs: Paths, **scan_args: Any) -> None:
        self.logs = logs
        self.scan_args = scan_args
        self._scan: Scan | None = None
        self.streams = 0  # readers opened so far

    @property
    def scan(self) -> Scan:
        """The planned scan (planned on first use)."""
        if self._scan is None:
            self._scan = scan(self.logs, **self.scan_args)
        return self._scan

    def refresh(self) -> None:
        """Plan again at the next query (records appended since the last plan are read then)."""
        self.close()

    def close(self) -> None:
        if self._scan is not None:
            self._scan.close()
            self._scan = None

    def __arrow_c_stream__(self, requested_schema: Any = None) -> Any:
        self.streams += 1
        return self.scan.to_reader().__arrow_c_stream__(requested_schema)


def register(con: Any, name: str, logs: Paths, **scan_args: Any) -> KafkaTopic:
    """Name the partitions under `logs` as a table `name` of DuckDB connection `con` (kbatch.scan's
    arguments: topics, bounds, isolation, columns, typed values, ...); every query reads it afresh.
    Returns the registered KafkaTopic (its `scan.stats` show what the queries read)."""
    _duckdb()
    topic = KafkaTopic(logs, **scan_args)
    con.register(name, topic)
    return topic


__all__ = ["register", "KafkaTopic"]
