"""`kbatch export --format delta|iceberg`: partitions into a Delta or Iceberg table, exactly once and
resumable (kbatch.tables.export_table; docs/tables.md)."""
from __future__ import annotations

import datetime as dt
import sys
from typing import IO, Any

from ._common import EXIT_OK, EXIT_PROBLEMS, UsageProblem, emit

TABLE_FORMATS = ("delta", "iceberg")
#: the table options' defaults (the Parquet and JSON lines formats take none of them)
TABLE_DEFAULTS: dict[str, Any] = dict(catalog=None, catalog_name="kbatch", warehouse=None, from_offset=None,
                                      until_offset=None, from_time=None, until_time=None,
                                      isolation_level="read_committed", headers=True, target_file_size=None,
                                      compression="zstd", fail_on_data_loss=False, compacted=False)


def parse_time(text: str | None, option: str) -> int | None:
    """Epoch milliseconds, or an ISO 8601 date/time (UTC unless it names an offset)."""
    if text is None:
        return None
    s = text.strip()
    if s.lstrip("-").isdigit():
        return int(s)
    try:
        t = dt.datetime.fromisoformat(s.replace("Z", "+00:00"))
    except ValueError:
        raise UsageProblem(f"{option} {text!r}: expected epoch milliseconds or an ISO 8601 time") from None
    if t.tzinfo is None:
        t = t.replace(tzinfo=dt.timezone.utc)
    return int(t.timestamp() * 1000)


def parse_size(text: str | None, option: str) -> int | None:
    """A byte count with an optional K/M/G suffix (powers of 1024)."""
    if text is None:
        return None
    s = text.strip().upper().removesuffix("B").removesuffix("I")
    mult = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}.get(s[-1:], 1)
    try:
        n = int(float(s[:-1] if mult != 1 else s) * mult)
    except ValueError:
        raise UsageProblem(f"{option} {text!r}: expected a size such as 134217728, 128M or 1G") from None
    if n <= 0:
        raise UsageProblem(f"{option} must be > 0")
    return n


def cmd_export_table(path: str, *, to: str, fmt: str, catalog: str | None = None, warehouse: str | None = None,
                     topics: list[str] | None = None, partitions: list[int] | None = None,
                     from_offset: int | None = None, until_offset: int | None = None, from_time: str | None = None,
                     until_time: str | None = None, isolation_level: str = "read_committed",
                     headers: bool = True, target_file_size: str | None = None, compression: str = "zstd",
                     fail_on_data_loss: bool = False, compacted: bool = False, quiet: bool = False,
                     as_json: bool = False, out: IO[str] | None = None, err: IO[str] | None = None,
                     key_schema: str | None = None, value_schema: str | None = None, schemas: Any = None,
                     exclude_topics: list[str] | None = None, include_internal: bool = False,
                     catalog_name: str = "kbatch", on_decode_error: str = "fail") -> int:
    from ..log.fetch import IsolationLevel
    from ..tables import COMPRESSIONS, DEFAULT_TARGET_FILE_SIZE, DataLossError, export_table

    out = out or sys.stdout
    err = err or sys.stderr
    try:
        level = IsolationLevel.parse(isolation_level)
    except ValueError as e:
        raise UsageProblem(f"--isolation-level: {e}") from None
    if compression not in COMPRESSIONS:
        raise UsageProblem(f"--compression must be one of {', '.join(COMPRESSIONS)}, not {compression!r}")
    if fmt == "iceberg" and catalog is None and warehouse is None:
        raise UsageProblem("--format iceberg needs --warehouse DIR (and optionally --catalog URI)")
    if fmt != "iceberg" and catalog_name != "kbatch":
        raise UsageProblem("--catalog-name names an Iceberg catalog: it is for --format iceberg")
    if compacted and (from_offset is not None or from_time is not None):
        raise UsageProblem("--compacted takes each partition from its start: no --from-offset/--from-time")
    if compacted and on_decode_error == "dead-letter":
        raise UsageProblem("--on-decode-error dead-letter is for append exports: --compacted takes fail or null")
    kwargs: dict[str, Any] = dict(
        format=fmt, catalog=catalog, warehouse=warehouse, topics=topics or None, partitions=partitions or None,
        from_offset=from_offset, until_offset=until_offset, from_time=parse_time(from_time, "--from-time"),
        until_time=parse_time(until_time, "--until-time"), isolation=level, include_headers=headers,
        target_file_size=parse_size(target_file_size, "--target-file-size") or DEFAULT_TARGET_FILE_SIZE,
        compression=compression, fail_on_data_loss=fail_on_data_loss, compacted=compacted,
        key_schema=key_schema, value_schema=value_schema, schemas=schemas, exclude_topics=exclude_topics or None,
        include_internal=include_internal, catalog_name=catalog_name, on_decode_error=on_decode_error)
    try:
        result = export_table(path, to, **kwargs)
    except DataLossError as e:
        err.write(f"kbatch: {to}: data loss: {e} (nothing written)\n")
        return EXIT_PROBLEMS
    code = EXIT_OK
    if result.dead_letters:
        err.write(f"kbatch: {result.dead_letters} record(s) did not decode: in the table {result.dead_letter_table}\n")
    if result.nulled:
        err.write(f"kbatch: {result.nulled} record(s) did not decode: written with a null key/value\n")
    for problem in result.problems:
        err.write(f"kbatch: {problem}\n")
        code = EXIT_PROBLEMS
    for p in result.partitions:
        if p.lost is not None:
            err.write(f"kbatch: {p.topic}-{p.partition}: offsets {p.lost[0]}..{p.lost[1] - 1} were deleted from the "
                      f"log (retention) before the table held them\n")
        if as_json:
            emit(out, dict(type="partition", topic=p.topic, partition=p.partition, start=p.start, end=p.end,
                           rows=p.rows, lost=list(p.lost) if p.lost else None, error=p.error,
                           error_offset=p.error_offset))
        elif p.error is not None:  # said even with --quiet: a failure never looks like "up to date"
            out.write(f"{p.topic}-{p.partition}: FAILED at offset {p.error_offset}: {p.error} (the partition was "
                      f"not advanced)\n")
        elif not quiet:
            what = "up to date" if p.end == p.start else f"offsets {p.start}..{p.end - 1}: {p.rows} rows"
            out.write(f"{p.topic}-{p.partition}: {what}\n")
    failed = sum(1 for p in result.partitions if p.error is not None)
    if as_json:
        emit(out, dict(type="table", table=to, format=fmt, version=result.version, commits=result.commits,
                       rows=result.rows, failed=failed))
    elif not quiet or failed:
        where = ("no table written" if result.version is None
                 else f"{'version' if fmt == 'delta' else 'snapshot'} {result.version}")
        out.write(f"{to}: {result.rows} rows in {result.commits} commit(s), {where}"
                  f"{f'; {failed} partition(s) FAILED' if failed else ''}\n")
    return code
