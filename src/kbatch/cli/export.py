"""`kbatch export`: segments to Parquet, JSON lines or CSV, with decode_columns' columns.

    kbatch export /data/kafka-logs --to out/                  # out/topic=T/partition=P/<base offset>.parquet
    kbatch export orders-3/ --to orders.parquet               # one file
    kbatch export orders-3/ --to out/ --format jsonl
    kbatch export /data/kafka-logs --topic 'orders-*' --exclude-topic orders-dlq --to orders.csv
    kbatch export /data/kafka-logs --format delta --to orders_delta/       # a Delta table (docs/tables.md)
    kbatch export /data/kafka-logs --format iceberg --to kafka.orders --warehouse wh/

A directory target gets one file per segment, in pyarrow.dataset's hive layout (the topic and
partition are in the path, not in the files: `pyarrow.dataset.dataset(out, partitioning="hive")`
gives them back), each written to a temporary name and renamed when whole. `out/.kbatch-export.json`
records which segment (and how many of its bytes) each file holds, so an interrupted export run
again skips the segments already done and redoes only the rest, or a segment that has grown.
Records are read as a read_uncommitted consumer reads them, through the read path
(kbatch.log.fetch, as cat and serve do): control records are left out; a segment with bytes that
cannot be read (bad CRC, a torn middle segment, a bad length field, corrupt) gets no file: it is
named on stderr with the bytes and the offsets behind them and the command exits 1. A partial batch
at the end of the last segment is ignored, as Kafka does (the whole batches before it are
exported). A lone .log file outside a partition directory is read whole: any partial tail fails it.
A log directory's internal topics (__consumer_offsets, __transaction_state, __cluster_metadata,
_schemas, any `__` name: kbatch.log.topics) are left out unless --topic names them or
--include-internal is given. A .parquet/.jsonl/.csv --to is one file of that format: another
--format is refused.
"""

import json
import os
import sys
from collections.abc import Iterator
from typing import IO, TYPE_CHECKING, Any

from ..log import files as _files
from .. import _fs
from ..errors import KBatchError
from ..log.layout import describe
from ._common import (EXIT_OK, EXIT_PROBLEMS, UsageProblem, emit, flags, progress_bar, resolve_segments, run,
                      total_size)

if TYPE_CHECKING:
    import pyarrow as pa
    import typer

    from .._typing import PathLike
    from ..log.segment import SegmentFiles
    from ..log.unified_log import Log
    from ..tables import WriterChoices

FORMATS = ("parquet", "jsonl", "csv", "delta", "iceberg")
#: a --to file name's suffix -> the one format it can hold (any other --format is refused)
FILE_FORMATS = {".parquet": "parquet", ".jsonl": "jsonl", ".json": "jsonl", ".csv": "csv"}
STATE = ".kbatch-export.json"


def _suffix(to: str) -> str | None:
    return next((sfx for sfx in FILE_FORMATS if to.lower().endswith(sfx)), None)


def _format(to: str, fmt: str | None) -> str:
    """--format, or the one --to's suffix names; a file suffix with another format is refused
    (`--to events.csv --format parquet` would otherwise be a folder named events.csv)."""
    sfx = _suffix(to)
    if fmt is None:
        return FILE_FORMATS[sfx] if sfx else "parquet"
    if fmt not in FORMATS:
        raise UsageProblem(f"--format must be one of {', '.join(FORMATS)}, not {fmt!r}")
    if sfx is not None and fmt != "iceberg" and FILE_FORMATS[sfx] != fmt:  # iceberg's --to is namespace.table
        raise UsageProblem(f"--to {to} names a {FILE_FORMATS[sfx]} file ({sfx}) but --format is {fmt}: give "
                           f"--format {FILE_FORMATS[sfx]}, or a --to without {sfx}"
                           f"{' (a directory)' if fmt != 'delta' else ' (the Delta table directory)'}")
    return fmt


def _batches(files: "SegmentFiles", log: "Log | None", topic: str | None, partition: int | None,
             batch_fields: bool) -> "Iterator[pa.RecordBatch]":
    """decode_columns' record batches of one segment as a read_uncommitted consumer reads it,
    through the read path (kbatch.log.fetch, as cat and serve): bytes it cannot read raise
    UnreadableDataError naming file, bytes and offsets; a partial batch at the end of the last
    segment is ignored, as Kafka does. `log`: the partition the segment belongs to; None for a
    lone .log outside a partition directory, read whole and strictly (a partial tail is an error)."""
    from ..columns.decode import iter_record_batches
    from ..log.fetch import IsolationLevel, read_log

    if log is None:
        records = files.open_log()
        try:
            data = records.read(0, records.size_in_bytes)
        finally:
            records.close()
        yield from iter_record_batches(data, topic, partition, batch_fields=batch_fields, strict=True)
        return
    bases = [seg.base_offset for seg in log.segments]
    assert files.base_offset is not None  # _partition_log gives a log only for named segments
    k = bases.index(files.base_offset)
    res = read_log(log, bases[k], bases[k + 1] if k + 1 < len(bases) else None,
                   isolation=IsolationLevel.READ_UNCOMMITTED)
    yield from res.record_batches(topic, partition, batch_fields=batch_fields)


def _partition_log(d: str, segs: "list[SegmentFiles]") -> "Log | None":
    """The partition the segments belong to, open read-only; None when `d` is not a partition
    directory holding them (a lone .log file elsewhere)."""
    from ..log.unified_log import Log

    if any(f.base_offset is None for f in segs):
        return None
    try:
        log = Log.open(d)
    except (KBatchError, OSError):
        return None
    if not {f.base_offset for f in segs} <= {seg.base_offset for seg in log.segments}:
        log.close()
        return None
    return log


def _union_field(schema: "pa.Schema") -> str | None:
    """The path of the first union-typed field of a schema (in structs, lists and maps), or None."""
    import pyarrow.types as T

    def walk(t: Any, path: str) -> str | None:
        if T.is_union(t):
            return f"{path} ({t})"
        if T.is_struct(t):
            return next((w for f in t for w in [walk(f.type, f"{path}.{f.name}")] if w), None)
        if T.is_map(t):
            return walk(t.key_type, f"{path}.key") or walk(t.item_type, f"{path}.value")
        if T.is_list(t) or T.is_large_list(t) or T.is_fixed_size_list(t):
            return walk(t.value_type, f"{path}[]")
        return None

    return next((w for f in schema for w in [walk(f.type, f.name)] if w), None)


class _Sink:
    """One output file written under a temporary name and renamed into place by done()."""

    def __init__(self, path: str, fmt: str, schema: "pa.Schema", binary: str,
                 choices: "WriterChoices | None" = None) -> None:
        from ..tables import WriterChoices

        self.path, self.fmt, self.binary = path, fmt, binary
        self.choices = choices if choices is not None else WriterChoices()
        d = os.path.dirname(path) or "."
        self.made: list[str] = []  # folders made for this file (a discard removes them when empty)
        up = d
        while not os.path.isdir(up):
            self.made.append(up)
            up = os.path.dirname(up) or "."
        os.makedirs(d, exist_ok=True)
        self.tmp = os.path.join(d, "." + os.path.basename(path) + ".tmp")
        self.schema = schema
        self.csv: Any = None
        if fmt == "parquet":
            self.w: Any = None  # a ParquetWriter from the first batch (or a text file: jsonl, csv)
        elif fmt == "csv":
            from ._csv import CsvWriter

            self.w = open(self.tmp, "w", encoding="utf-8", newline="")
            self.csv = CsvWriter(self.w, binary)
        else:
            self.w = open(self.tmp, "w", encoding="utf-8")
        self.rows = 0

    def _parquet(self, first: "pa.RecordBatch") -> None:
        """The writer of the file's schema (the batch's), with the options the tables' files take
        (kbatch.tables.writer_options: decided on the topic's first batch)."""
        import pyarrow.parquet as pq

        union = _union_field(first.schema)
        if union is not None:
            raise UsageProblem(f"--format parquet: the typed column {union} is a union of several non-null types, "
                               f"which Parquet has no type for: export it with a reader schema without that union "
                               f"(-s value=avro:SUBJECT@VERSION), as --format jsonl, or without -s")
        self.schema = first.schema
        self.w = pq.ParquetWriter(self.tmp, first.schema, **self.choices.options(first))

    def write(self, rb: "pa.RecordBatch") -> None:
        if self.fmt == "parquet":
            if self.w is None:
                self._parquet(rb)
            elif rb.schema != self.schema:
                self._widen(rb)  # typed key/value columns (-s value=avro ...) gained fields
            self.w.write_batch(rb)
        elif self.csv is not None:
            self.csv.write(rb)
        else:
            from ._jsonl import write_lines

            write_lines(self.w, rb, self.binary)
        self.rows += rb.num_rows

    def _widen(self, rb: "pa.RecordBatch") -> None:
        """A file's one schema: the first batch's, or a typed column widened by a later batch (the
        rows written so far are rewritten with the wider type: null in the fields they lack)."""
        import pyarrow.parquet as pq

        self.w.close()
        if self.rows == 0:
            self._parquet(rb)
            return
        old = pq.read_table(self.tmp)
        self._parquet(rb)
        self.w.write_table(old.cast(rb.schema))

    def done(self) -> None:
        if self.csv is not None and self.csv.header is None:  # no records: the header row still says the columns
            self.csv.w.writerow(self.schema.names)
        if self.w is None:  # a Parquet file without records: the columns still say their types
            import pyarrow.parquet as pq

            self.w = pq.ParquetWriter(self.tmp, self.schema)
        self.w.close()
        with open(self.tmp, "rb+") as f:
            os.fsync(f.fileno())
        os.replace(self.tmp, self.path)
        _files.fsync_dir(os.path.dirname(self.path) or ".")

    def discard(self) -> None:
        try:
            if self.w is not None:
                self.w.close()
        finally:
            try:
                os.unlink(self.tmp)
            except OSError:
                pass
            for d in self.made:  # deepest first
                try:
                    os.rmdir(d)
                except OSError:
                    break


def cmd_export(path: "PathLike", *, to: str, fmt: str | None = None, batch_fields: bool = False, binary: str = "base64",
               overwrite: bool = False, quiet: bool = False, as_json: bool = False, out: IO[str] | None = None,
               err: IO[str] | None = None, serdes: "list[str] | None" = None, schemas: str | None = None,
               registry: str | None = None, topics: "list[str] | None" = None, partitions: "list[int] | None" = None,
               exclude_topics: "list[str] | None" = None, include_internal: bool = False, on_decode_error: str = "fail",
               **table_options: Any) -> int:
    from ..columns.decode import schema as arrow_schema
    from ._schemas import export_typing  # -s key=/value= avro|json|protobuf with --schemas: typed columns

    typing_for = export_typing(serdes or [], schemas, registry, on_decode_error)

    out = out or sys.stdout
    err = err or sys.stderr
    fmt_name = _format(to, fmt)
    if fmt_name in ("delta", "iceberg"):
        from ._export_table import cmd_export_table
        from ._schemas import needs_source, source_for, split_serdes

        _rest, kinds = split_serdes(serdes or [])  # export_typing refused the rest
        source = source_for(schemas, registry) if kinds and (needs_source(kinds) or schemas or registry) else None
        return cmd_export_table(str(path), to=to, fmt=fmt_name, quiet=quiet, as_json=as_json, out=out, err=err,
                                key_schema=kinds.get("key"), value_schema=kinds.get("value"), schemas=source,
                                topics=topics, partitions=partitions, exclude_topics=exclude_topics,
                                include_internal=include_internal, on_decode_error=on_decode_error, **table_options)
    from ._export_table import TABLE_DEFAULTS

    if any(v != TABLE_DEFAULTS.get(k) and v != [] for k, v in table_options.items()):
        raise UsageProblem("--catalog, --catalog-name, --warehouse, --from-*/--until-*, --isolation-level, "
                           "--target-file-size, --compression, --fail-on-data-loss and --compacted are for "
                           "--format delta|iceberg")
    one_file = _suffix(to) is not None
    if _fs.is_remote(to):
        raise UsageProblem(f"--to {to}: export writes local files (the segments it reads may be remote)")
    left_out: list[str] = []
    parts = _selected(path, resolve_segments(path, left_out), topics, partitions, exclude_topics, include_internal)
    total = total_size(parts)
    full = arrow_schema(True, batch_fields)
    per_file = full.remove(full.get_field_index("partition")).remove(full.get_field_index("topic"))
    problems = len(left_out)
    for p in left_out:
        err.write(f"kbatch: {p} (not exported)\n")
    state_path = os.path.join(to, STATE)
    state: dict[str, dict[str, Any]] = {}
    if not one_file:
        os.makedirs(to, exist_ok=True)
        if os.path.exists(state_path) and not overwrite:
            with open(state_path, encoding="utf-8") as f:
                state = json.load(f)
    from ..tables import WriterChoices

    choices: dict[str, WriterChoices] = {}  # a topic's files share their writer options
    sink = _Sink(to, fmt_name, full, binary) if one_file else None
    dead = 0  # dead letters written
    opened: "list[Log | None]" = []
    try:
        with progress_bar(total, "export", quiet) as advance:
            for d, segs in parts:
                described = describe(d, [])
                topic, partition = described.topic, described.partition
                log = _partition_log(d, segs)
                opened.append(log)
                for files in segs:
                    seg = files.path(".log")
                    size = _fs.getsize(seg)
                    base = _fs.basename(seg)[:-len(".log")]
                    target: _Sink
                    key: str | None
                    if sink is not None:  # one_file
                        target, key, rows = sink, None, sink.rows
                    else:
                        rel = os.path.join(f"topic={topic}", f"partition={partition}", f"{base}.{fmt_name}")
                        done = state.get(rel)
                        if done and done.get("bytes") == size and os.path.exists(os.path.join(to, rel)):
                            advance(size)
                            _report(out, as_json, quiet, "skipped", seg, rel, done.get("rows"))
                            continue
                        target, key, rows = _Sink(os.path.join(to, rel), fmt_name, per_file, binary,
                                                  choices.setdefault(str(topic), WriterChoices())), rel, 0
                    try:
                        for rb in _batches(files, log, topic, partition, batch_fields):
                            rb = typing_for(topic, rb)
                            target.write(rb if one_file else rb.drop_columns(["topic", "partition"]))
                    except UsageProblem:  # every file would fail alike: nothing half-written stays
                        if not one_file:
                            target.discard()
                        raise
                    except KBatchError as e:
                        if _source_down(e):  # a schema source that cannot answer: every segment would fail alike
                            raise
                        problems += 1
                        if not one_file:
                            typing_for.take_letters()  # the segment is redone whole by a rerun
                        err.write(f"kbatch: {seg}: {e} (not exported)\n")
                        if not one_file:
                            target.discard()
                        advance(size)
                        _report_failed(out, as_json, seg, key or to, e)
                        continue
                    if key is not None:  # not one_file
                        dead += _dead_letters(os.path.join(to, "_dead_letter", rel), typing_for.take_letters())
                        target.done()
                        state[key] = dict(source=seg if _fs.is_remote(seg) else os.path.abspath(seg), bytes=size,
                                          rows=target.rows)
                        _files.atomic_write(state_path, json.dumps(state, indent=1).encode())
                    advance(size)
                    _report(out, as_json, quiet, "exported", seg, key or to, target.rows - rows)
        if sink is not None:  # one_file
            if problems:
                sink.discard()
                err.write(f"kbatch: {to} not written: {problems} segment(s) could not be read in full\n")
            else:
                dead += _dead_letters(to, typing_for.take_letters())
                sink.done()
        sink = None
    finally:
        if sink is not None:
            sink.discard()
        for log in opened:
            if log is not None:
                log.close()
    if dead:
        where = f"{to}.dead-letter.jsonl" if one_file else os.path.join(to, "_dead_letter")
        err.write(f"kbatch: {dead} record(s) did not decode: in {where}\n")
    if typing_for.nulled:
        err.write(f"kbatch: {typing_for.nulled} record(s) did not decode: exported with a null key/value\n")
    return EXIT_PROBLEMS if problems else EXIT_OK


def _selected(path: "PathLike", parts: "list[tuple[str, list[SegmentFiles]]]", topics: "list[str] | None",
              partitions: "list[int] | None", exclude: "list[str] | None", include_internal: bool
              ) -> "list[tuple[str, list[SegmentFiles]]]":
    """The partitions the topic selection takes (kbatch.log.topics; a lone segment file or a path
    that is itself a partition is always read) and --partition keeps."""
    from ..log.topics import TopicSelection, select_partitions

    if _fs.isfile(os.fspath(path) if not isinstance(path, str) else path):
        return parts
    selection = TopicSelection.of(topics, exclude=exclude, include_internal=include_internal)
    described = {d: describe(d, []) for d, _segs in parts}
    keep = {p.path for p in select_partitions(described.values(), os.fspath(path), selection)}
    want_p = set(partitions) if partitions else None
    return [(d, segs) for d, segs in parts
            if d in keep and (want_p is None or described[d].partition in want_p)]


def _report_failed(out: IO[str], as_json: bool, seg: str, dest: str, e: KBatchError) -> None:
    """A segment that was not exported, on stdout too (even with --quiet): never a silent gap."""
    from ..tables import error_offset

    at = error_offset(e, None)
    if as_json:
        emit(out, dict(type="failed", segment=seg, to=dest, rows=0, error=str(e), error_offset=at))
    else:
        out.write(f"{seg}: FAILED{'' if at is None else f' at offset {at}'}: {e} (not exported)\n")


def _dead_letters(path: str, letters: list[dict[str, Any]]) -> int:
    """`<path>.dead-letter.jsonl`: the records --on-decode-error dead-letter kept out of an output
    file, raw, with the error (a directory export: under `<to>/_dead_letter/`, mirroring the file's
    path, which dataset readers pass over; one file: beside it). Written (or removed: none this
    time) before the file is renamed into place and the state file says the segment is done, so a
    rerun that redoes the segment writes it again whole: each letter once."""
    dest = path + ".dead-letter.jsonl"
    if not letters:
        if os.path.exists(dest):
            os.unlink(dest)
        return 0
    os.makedirs(os.path.dirname(dest) or ".", exist_ok=True)
    _files.atomic_write(dest, "".join(json.dumps(x, ensure_ascii=False) + "\n" for x in letters).encode("utf-8"))
    return len(letters)


def _source_down(e: Exception) -> bool:
    from ..values.sources import SchemaSourceUnavailable

    return isinstance(e, SchemaSourceUnavailable)


def _report(out: IO[str], as_json: bool, quiet: bool, what: str, seg: str, dest: str, rows: int | None) -> None:
    if as_json:
        emit(out, dict(type=what, segment=seg, to=dest, rows=rows))
    elif not quiet:
        out.write(f"{seg}: {what} {rows} rows -> {dest}\n")


def register(app: "typer.Typer") -> None:
    from typing import Annotated, List, Optional

    import typer

    quiet_flag, json_flag = flags()

    @app.command(help="Export segments to Parquet, JSON lines or CSV (decode_columns' columns): a directory gets one "
                      "file per segment in topic=/partition= folders, resumable; a .parquet/.jsonl/.csv path gets one "
                      "file. Internal topics (__consumer_offsets, _schemas, ...) only when named or --include-internal. "
                      "--format delta|iceberg: into a table, exactly once and resumable (docs/tables.md).")
    def export(path: Annotated[str, typer.Argument(help="Segment .log file, partition directory or log directory.")],
               to: Annotated[str, typer.Option("--to", help="Output directory, or a .parquet / .jsonl / .csv file.")],
               fmt: Annotated[Optional[str], typer.Option("--format", help="parquet, jsonl, csv (default: from --to's suffix, else parquet), delta or iceberg.")] = None,
               batch_fields: Annotated[bool, typer.Option("--batch-fields", help="Add producerId, producerEpoch, baseSequence, isTransactional, isControl.")] = False,
               binary: Annotated[str, typer.Option("--binary", help="JSON lines and CSV: keys and values as base64 (lossless) or text (UTF-8).")] = "base64",
               overwrite: Annotated[bool, typer.Option("--overwrite", help="Export every segment again, even those done before.")] = False,
               serdes: Annotated[Optional[List[str]], typer.Option("-s", help="key=KIND / value=KIND: avro, json or protobuf (Schema Registry framing), or json-plain[:SCHEMA.json] (unframed JSON): a typed column instead of bytes.")] = None,
               schemas: Annotated[Optional[str], typer.Option("--schemas", help="Schemas for -s: a _schemas partition directory, a registry URL or a folder of <id>.avsc/.json/.proto files.")] = None,
               registry: Annotated[Optional[str], typer.Option("-r", help="A Schema Registry URL (kcat's option; the same as --schemas URL).")] = None,
               catalog: Annotated[Optional[str], typer.Option("--catalog", help="Iceberg: catalog URI (sqlite:///file.db, default <warehouse>/catalog.db; http(s):// a REST catalog).")] = None,
               catalog_name: Annotated[str, typer.Option("--catalog-name", help="Iceberg: the catalog's name (a SQL catalog stores it in its rows: read back with pyiceberg's load_catalog(NAME, ...)).")] = "kbatch",
               warehouse: Annotated[Optional[str], typer.Option("--warehouse", help="Iceberg: warehouse directory.")] = None,
               topic: Annotated[Optional[list[str]], typer.Option("--topic", help="Only this topic, or topics matching this glob, e.g. 'orders-*' (repeatable).")] = None,
               exclude_topic: Annotated[Optional[list[str]], typer.Option("--exclude-topic", help="Leave out topics matching this glob (repeatable).")] = None,
               include_internal: Annotated[bool, typer.Option("--include-internal", help="Also __consumer_offsets, __transaction_state, __cluster_metadata, _schemas and other __ topics that no --topic names (left out by default, as Kafka's exclude.internal.topics).")] = False,
               partition: Annotated[Optional[list[int]], typer.Option("--partition", help="Only this partition (repeatable).")] = None,
               from_offset: Annotated[Optional[int], typer.Option("--from-offset", help="Tables: first offset (a resumed partition starts where the table ends).")] = None,
               until_offset: Annotated[Optional[int], typer.Option("--until-offset", help="Tables: stop before this offset.")] = None,
               from_time: Annotated[Optional[str], typer.Option("--from-time", help="Tables: from the first offset whose timestamp >= T (KIP-79; epoch ms or ISO 8601).")] = None,
               until_time: Annotated[Optional[str], typer.Option("--until-time", help="Tables: stop before the first offset whose timestamp >= T.")] = None,
               isolation_level: Annotated[str, typer.Option("--isolation-level", help="Tables: read_committed (default: no aborted or control records) or read_uncommitted.")] = "read_committed",
               headers: Annotated[bool, typer.Option("--headers/--no-headers", help="Tables: a headers column.")] = True,
               target_file_size: Annotated[Optional[str], typer.Option("--target-file-size", help="Tables: data file size (bytes, or 128M, 1G; default 128M).")] = None,
               compression: Annotated[str, typer.Option("--compression", help="Tables: Parquet codec zstd, snappy, lz4, gzip or none.")] = "zstd",
               fail_on_data_loss: Annotated[bool, typer.Option("--fail-on-data-loss", help="Tables: exit 1, writing nothing, when retention deleted offsets the table never held.")] = False,
               compacted: Annotated[bool, typer.Option("--compacted", help="Tables: the log-cleaner view (latest record per key) replaces the table's content.")] = False,
               on_decode_error: Annotated[str, typer.Option("--on-decode-error", help="With -s: a key/value that does not decode: fail (the segment or partition is not exported), null (the row keeps a null), dead-letter (the raw record goes to <to>/_dead_letter/ or the table <table>_dead_letter).")] = "fail",
               as_json: Annotated[bool, json_flag] = False, quiet: Annotated[bool, quiet_flag] = False) -> None:
        run(cmd_export, path, to=to, fmt=fmt, batch_fields=batch_fields, binary=binary, overwrite=overwrite,
            quiet=quiet, as_json=as_json, serdes=list(serdes or []), schemas=schemas, registry=registry,
            catalog=catalog, catalog_name=catalog_name, warehouse=warehouse, topics=topic, partitions=partition,
            exclude_topics=exclude_topic, include_internal=include_internal,
            from_offset=from_offset, until_offset=until_offset, from_time=from_time, until_time=until_time,
            isolation_level=isolation_level, headers=headers, target_file_size=target_file_size,
            compression=compression, fail_on_data_loss=fail_on_data_loss, compacted=compacted,
            on_decode_error=on_decode_error)
