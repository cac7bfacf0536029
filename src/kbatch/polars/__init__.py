"""Kafka's own files as a Polars LazyFrame: `kbatch.polars.scan_kafka(path, ...)`, an IO plugin
(polars.io.plugins.register_io_source) over kbatch.scan.

    import polars as pl
    from kbatch.polars import scan_kafka
    lf = scan_kafka("/var/kafka-logs", topics=["orders"], isolation="read_committed")
    lf.filter(pl.col("timestamp") >= t0).group_by("partition").len().collect()

Every collect plans a fresh scan, unless the files are as the LazyFrame's last plan found them:
a collect with the same projection, pushed predicate and n_rows over local partition directories
whose listing (names, sizes, mtime_ns, inodes, and the roots' own) has not changed reads the last
plan's ranges again through its still open logs (the summary cache's trust in a file's identity;
anything else plans again). What Polars pushes into the scan:
- projection: only the columns the query uses are built (a key-only query never builds values);
- n_rows: the scan stops after that many rows (after the predicate, when there is one);
- the predicate: its conjuncts on `offset`, `partition` and `timestamp` that bound them by a
  literal (==, <, <=, >, >=, is_between) narrow the scan: offsets and partitions exactly, and a
  lower time bound through the time index (KIP-79: no record before the first offset whose
  timestamp >= T has a timestamp >= T). An upper time bound is not pushed (timestamps need not
  rise with offsets: a later record may be older); the whole predicate is applied to every batch
  all the same, so what is pushed only ever skips rows the predicate drops.
"""
from __future__ import annotations

import json
import math
import os
import threading
import time
import weakref
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ..errors import MissingDependencyError
from ..scan import COLUMNS, Scan, ScanStats, binary_schema, scan

if TYPE_CHECKING:
    import polars as pl

    from ..scan.plan import OffsetBound, Paths, TimeBound


def _polars() -> Any:
    try:
        import polars
        from polars.io.plugins import register_io_source  # noqa: F401  (the plugin API this needs)
    except ImportError:
        raise MissingDependencyError("kbatch.polars.scan_kafka", "polars", "polars") from None
    return polars


# ------------------------------------------------------------------------------------ predicates
_FLIP = {"Lt": "Gt", "LtEq": "GtEq", "Gt": "Lt", "GtEq": "LtEq", "Eq": "Eq"}
_UNIT_US = {"Nanoseconds": 1 / 1000, "Microseconds": 1, "Milliseconds": 1000}


@dataclass
class Pushdown:
    """What a predicate lets a scan skip: offsets [lo, hi), the comparisons a partition must pass,
    and the least timestamp in ms (a row below it fails the predicate). `pushed`: the conjuncts used."""

    offset_lo: int | None = None
    offset_hi: int | None = None
    partition_rules: list[tuple[str, int]] = field(default_factory=list)
    time_lo_ms: int | None = None
    pushed: list[str] = field(default_factory=list)

    def partition_ok(self, p: int) -> bool:
        return all(_holds(p, op, v) for op, v in self.partition_rules)


def _holds(x: int, op: str, v: int) -> bool:
    return {"Eq": x == v, "Lt": x < v, "LtEq": x <= v, "Gt": x > v, "GtEq": x >= v}[op]


def _conjuncts(node: Any) -> Iterator[Any]:
    if isinstance(node, dict) and "BinaryExpr" in node and node["BinaryExpr"].get("op") in ("And", "LogicalAnd"):
        yield from _conjuncts(node["BinaryExpr"]["left"])
        yield from _conjuncts(node["BinaryExpr"]["right"])
    else:
        yield node


def _literal(node: Any, column: str) -> int | None:
    """An integer literal (for timestamp: a datetime literal, in µs), else None (not provable here)."""
    if not isinstance(node, dict) or "Literal" not in node:
        return None
    lit = node["Literal"]
    if "Dyn" in lit and isinstance(lit["Dyn"], dict) and isinstance(lit["Dyn"].get("Int"), int):
        return None if column == "timestamp" else int(lit["Dyn"]["Int"])
    scalar = lit.get("Scalar") if isinstance(lit, dict) else None
    if not isinstance(scalar, dict) or len(scalar) != 1:
        return None
    (kind, value), = scalar.items()
    if column == "timestamp":
        if kind == "Datetime" and isinstance(value, list) and len(value) >= 2 and value[1] in _UNIT_US \
                and isinstance(value[0], int):
            tz = value[2] if len(value) > 2 else None
            if tz is not None and (tz.get("inner") if isinstance(tz, dict) else tz) not in ("UTC", "+00:00"):
                return None  # a wall-clock zone: left to Polars
            return _us(value[0], value[1])
        return None
    if kind in ("Int8", "Int16", "Int32", "Int64", "UInt8", "UInt16", "UInt32", "UInt64") and isinstance(value, int):
        return int(value)
    return None


def _us(v: int, unit: str) -> int:
    f = _UNIT_US[unit]
    return v // 1000 if f < 1 else v * int(f)  # ns floor to µs: a bound compared with µs timestamps


def _comparison(node: Any) -> tuple[str, str, int] | None:
    """(column, op, literal) of `column op literal` (or `literal op column`), else None."""
    if not isinstance(node, dict) or "BinaryExpr" not in node:
        return None
    b = node["BinaryExpr"]
    op, left, right = b.get("op"), b.get("left"), b.get("right")
    if op not in _FLIP:
        return None
    if isinstance(left, dict) and left.get("Column") in ("offset", "partition", "timestamp"):
        v = _literal(right, left["Column"])
        return None if v is None else (left["Column"], op, v)
    if isinstance(right, dict) and right.get("Column") in ("offset", "partition", "timestamp"):
        v = _literal(left, right["Column"])
        return None if v is None else (right["Column"], _FLIP[op], v)
    return None


def _between(node: Any) -> list[tuple[str, str, int]]:
    """is_between(col, lo, hi) as its two comparisons (each end by its closedness)."""
    f = node.get("Function") if isinstance(node, dict) else None
    if not isinstance(f, dict):
        return []
    fn = f.get("function")
    between = fn.get("Boolean", {}).get("IsBetween") if isinstance(fn, dict) and isinstance(fn.get("Boolean"), dict) \
        else None
    inputs = f.get("input")
    if not isinstance(between, dict) or not isinstance(inputs, list) or len(inputs) != 3:
        return []
    col = inputs[0].get("Column") if isinstance(inputs[0], dict) else None
    if col not in ("offset", "partition", "timestamp"):
        return []
    lo, hi = _literal(inputs[1], col), _literal(inputs[2], col)
    closed = between.get("closed", "Both")
    out = []
    if lo is not None:
        out.append((col, "GtEq" if closed in ("Both", "Left") else "Gt", lo))
    if hi is not None:
        out.append((col, "LtEq" if closed in ("Both", "Right") else "Lt", hi))
    return out


def pushdown(predicate: pl.Expr | None) -> Pushdown:
    """The bounds a predicate proves (see the module docstring); the predicate is still applied."""
    out = Pushdown()
    if predicate is None:
        return out
    try:
        tree = json.loads(predicate.meta.serialize(format="json"))
    except Exception:  # noqa: BLE001 - an expression this Polars cannot serialize: nothing pushed
        return out
    for node in _conjuncts(tree):
        found = _between(node) or [c for c in [_comparison(node)] if c is not None]
        for col, op, v in found:
            out.pushed.append(f"{col} {op} {v}")
            if col == "offset":
                lo = {"GtEq": v, "Gt": v + 1, "Eq": v}.get(op)
                hi = {"Lt": v, "LtEq": v + 1, "Eq": v + 1}.get(op)
                if lo is not None:
                    out.offset_lo = lo if out.offset_lo is None else max(out.offset_lo, lo)
                if hi is not None:
                    out.offset_hi = hi if out.offset_hi is None else min(out.offset_hi, hi)
            elif col == "partition":
                out.partition_rules.append((op, v))
            elif op in ("GtEq", "Gt", "Eq"):  # timestamp (µs) >= v: ms >= ceil(v / 1000)
                ms = math.ceil(v / 1000) if op != "Gt" else v // 1000 + 1
                out.time_lo_ms = ms if out.time_lo_ms is None else max(out.time_lo_ms, ms)
            else:
                out.pushed.pop()  # an upper time bound: not provable from the time index
    return out


# ------------------------------------------------------------------------------------ the plugin
class _LastPlan:
    """A LazyFrame's last planned Scan, reused by the next collect asking the same of unchanged
    local files (the listing of its roots and partition directories: names, sizes, mtime_ns,
    inodes); closed when replaced or when the LazyFrame's plugin is dropped."""

    def __init__(self, roots: list[str] | None) -> None:
        self.roots = roots   # None: a path that is not a local directory, never reused
        self.state: dict[str, Any] = {}   # key, fingerprint, scan (shared with the finalizer)
        self.lock = threading.Lock()
        weakref.finalize(self, _LastPlan._close, self.state)

    @staticmethod
    def _close(state: dict[str, Any]) -> None:
        s = state.pop("scan", None)
        if s is not None:
            s.close()

    def fingerprint(self, s: Scan, changed_since: int | None = None) -> tuple[Any, ...] | None:
        """The listing the plan depends on, or None: not to be reused (not local, or changed in
        the second before `changed_since`, when planning began, or after: the plan may predate it)."""
        if self.roots is None:
            return None
        dirs = sorted({p.path for p in s.partitions} | {r.path for r in s.ranges})
        if not all(os.path.dirname(os.path.abspath(d)) in self.roots or os.path.abspath(d) in self.roots
                   for d in dirs):
            return None   # a partition deeper than a root's children: its listing is not watched
        out: list[Any] = []
        try:
            for d in self.roots + dirs:
                st = os.stat(d)
                out.append((d, st.st_mtime_ns, st.st_ino))
                with os.scandir(d) as it:
                    for e in sorted(it, key=lambda e: e.name):
                        est = e.stat(follow_symlinks=False)
                        out.append((e.name, est.st_size, est.st_mtime_ns, est.st_ino))
        except OSError:
            return None
        if changed_since is not None and any(x[-2] >= changed_since - 10**9 for x in out):
            return None   # (each entry ends with its mtime_ns, inode)
        return tuple(out)

    def take(self, key: Any) -> Scan | None:
        """The last plan when it was made for `key` and its files are unchanged (handed out: the
        next collect plans afresh until it is given back)."""
        with self.lock:
            s: Scan | None = self.state.get("scan")
            if s is None or self.state.get("key") != key:
                return None
            del self.state["scan"]
        fp = self.fingerprint(s)
        if fp is None or fp != self.state.get("fp"):
            s.close()
            return None
        s.stats = ScanStats()   # this collect's own
        return s

    def give(self, key: Any, s: Scan, fp: Any) -> bool:
        """Keep `s` for the next collect (False: not kept, the caller closes it)."""
        if fp is None:
            return False
        with self.lock:
            old = self.state.get("scan")
            self.state.update(key=key, fp=fp, scan=s)
        if old is not None and old is not s:
            old.close()
        return True


def _local_roots(logs: Paths) -> list[str] | None:
    paths = [logs] if isinstance(logs, (str, os.PathLike)) else list(logs)
    out = []
    for p in paths:
        p = os.fspath(p)
        if "://" in str(p) or not os.path.isdir(p):
            return None
        out.append(os.path.abspath(p))
    return out


def scan_kafka(logs: Paths, *, topics: Iterable[str] | None = None, partitions: Iterable[int] | None = None,
               exclude_topics: Iterable[str] | None = None, include_internal: bool = False,
               from_offset: OffsetBound = None, until_offset: OffsetBound = None, from_time: TimeBound = None,
               until_time: TimeBound = None, isolation: str = "read_uncommitted", include_headers: bool = True,
               key_schema: Any = None, value_schema: Any = None, on_decode_error: Any = "fail",
               max_bytes_in_flight: int | None = None, skip_unreadable: bool = False,
               summary_cache: Any = True, on_scan: Any = None) -> pl.LazyFrame:
    """A LazyFrame of the partitions under `logs` (kbatch.scan's arguments: topics, bounds,
    isolation, typed keys and values, the byte budget). Polars' projection, predicate and n_rows
    narrow each collect's scan (the module docstring says how). on_scan: called with each
    collect's planned Scan (its `stats` show what was read). summary_cache: as kbatch.scan's (a
    query of only partition/offset/timestamp columns over segments the header summary cached
    reads no record but those appended since)."""
    pl_mod = _polars()
    from polars.io.plugins import register_io_source

    base: dict[str, Any] = dict(topics=topics, exclude_topics=exclude_topics, include_internal=include_internal,
                                isolation=isolation, include_headers=include_headers, key_schema=key_schema,
                                value_schema=value_schema, on_decode_error=on_decode_error,
                                skip_unreadable=skip_unreadable, summary_cache=summary_cache)
    if max_bytes_in_flight is not None:
        base["max_bytes_in_flight"] = max_bytes_in_flight
    topics = None if topics is None else list(topics)
    base["topics"] = topics
    wanted_parts = None if partitions is None else set(partitions)
    names = [c for c in COLUMNS if include_headers or c != "headers"]

    def plan(columns: list[str], push: Pushdown, limit: int | None) -> Scan:
        from ..scan import select_partitions
        from ..scan.plan import offset_for

        found = [(p.topic, p.partition) for p in select_partitions(
            logs, topics, wanted_parts, exclude_topics=exclude_topics, include_internal=include_internal)
            if p.topic is not None and p.partition is not None and push.partition_ok(p.partition)]
        # every partition's bounds: the caller's, narrowed by what the predicate proves
        lo: dict[str, dict[int, int]] = {}
        hi: dict[str, dict[int, int]] = {}
        for t, p in found:
            for bounds, user, pushed, pick in ((lo, from_offset, push.offset_lo, max),
                                               (hi, until_offset, push.offset_hi, min)):
                mine = offset_for(user, t, p)
                v = pushed if mine is None else mine if pushed is None else pick(mine, pushed)
                if v is not None:
                    bounds.setdefault(t, {})[p] = int(v)
        t_lo = from_time if push.time_lo_ms is None else (
            push.time_lo_ms if from_time is None else max(_ms(from_time), push.time_lo_ms))
        return scan(logs, **dict(base, partitions=sorted({p for _t, p in found}), from_offset=lo, until_offset=hi,
                                 from_time=t_lo, until_time=until_time, columns=columns, limit=limit))

    def schema() -> Any:
        if key_schema is None and value_schema is None:  # binary: no plan needed (Polars asks every collect)
            return pl_mod.DataFrame(binary_schema(names, include_headers).empty_table()).schema
        s = plan(names, Pushdown(), 0)
        try:
            return pl_mod.DataFrame(s.schema.empty_table()).schema
        finally:
            s.close()

    def source(with_columns: list[str] | None, predicate: pl.Expr | None, n_rows: int | None,
               batch_size: int | None) -> Iterator[pl.DataFrame]:
        push = pushdown(predicate)
        need = list(names) if with_columns is None else list(with_columns)
        if predicate is not None:
            need += [c for c in predicate.meta.root_names() if c not in need]
        cols = [c for c in names if c in need] or ["offset"]
        limit = n_rows if predicate is None else None
        key = (tuple(cols), repr(push), limit)
        s = last.take(key)
        fp = last.state.get("fp") if s is not None else None
        if s is None:
            t0 = time.time_ns()
            s = plan(cols, push, limit)
            fp = last.fingerprint(s, changed_since=t0)
        if on_scan is not None:
            on_scan(s)
        left = n_rows
        try:
            for rb in s:
                df = pl_mod.from_arrow(rb)
                assert isinstance(df, pl_mod.DataFrame)
                if predicate is not None:
                    df = df.filter(predicate)
                if with_columns is not None:
                    df = df.select(with_columns)
                if left is not None:
                    df = df.head(left)
                    left -= df.height
                if df.height:
                    yield df
                if left is not None and left <= 0:
                    break
        except BaseException:
            s.close()
            raise
        # read to its end (or its n_rows): kept for the next collect asking the same
        if not last.give(key, s, fp):
            s.close()

    last = _LastPlan(_local_roots(logs))
    import inspect

    named: dict[str, Any] = {"explain_name": "kbatch.scan", "explain_detail": str(logs)}  # the plan's label
    params = inspect.signature(register_io_source).parameters  # (newer Polars only)
    lf: pl.LazyFrame = register_io_source(source, schema=schema, **{k: v for k, v in named.items() if k in params})
    return lf


def _ms(t: TimeBound) -> int:
    from ..scan.plan import time_ms

    v = time_ms(t)
    assert v is not None
    return v


__all__ = ["scan_kafka", "pushdown", "Pushdown"]
