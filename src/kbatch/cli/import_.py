"""`kbatch import`: Parquet or JSON lines into partition directories of segments, through `Log`.

    kbatch import out/ --to /data/replay                    # topic and partition from the rows
    kbatch import events.parquet --to /data/replay --topic events --partitions 6
    kbatch import events.jsonl --to /data/replay --topic events --config segment.bytes=1048576

Rows have decode_columns' columns (what `kbatch export` writes; `value` required). A row goes to
the `--topic` given (else its `topic` column) and to Kafka's key partitioner over `--partitions`
when that is given, else to its `partition` column, else to partition 0. Each partition directory `<to>/<topic>-<partition>`
is opened for writing (created when missing) and the rows appended with Log.append_table: the
log assigns offsets from its end as a broker does (an `offset` column is not read), validates
timestamps by the topic configuration (`--config name=value`, Kafka's names) and rolls segments.
A row or batch the log refuses stops the import, and nothing of it stays: every partition it
appended to is truncated back to where it ended before (Log.append_group around all of the
import's append_table calls to it, so a kill mid-import is undone by the next writer's open too),
and the partition directories and the --to directory it created are removed. The error names the
row or batch, and the command exits 1.
"""
import os
import shutil
import sys
from collections.abc import Callable, Iterator, Sequence
from typing import IO, TYPE_CHECKING

from ..errors import KBatchError
from ._common import EXIT_OK, EXIT_PROBLEMS, UsageProblem, emit, flags, progress_bar, run

if TYPE_CHECKING:
    import pyarrow as pa
    import typer

    from ..log.unified_log import AppendGroup, Log, LogConfig

FORMATS = ("parquet", "jsonl")


def _inputs(src: str, fmt: str | None) -> tuple[str, list[str]]:
    """(format, [files]) of SRC: a file, or a directory's .parquet / .jsonl files (recursively)."""
    if not os.path.exists(src):
        raise UsageProblem(f"{src}: no such file or directory")
    if fmt is not None and fmt not in FORMATS:
        raise UsageProblem(f"--format must be one of {', '.join(FORMATS)}, not {fmt!r}")
    if os.path.isfile(src):
        return fmt or ("jsonl" if src.endswith((".jsonl", ".json")) else "parquet"), [src]
    found: dict[str, list[str]] = {"parquet": [], "jsonl": []}
    for d, dirs, files in os.walk(src):
        dirs[:] = sorted(x for x in dirs if not x.startswith((".", "_")))
        for name in sorted(files):
            if name.startswith((".", "_")):
                continue
            if name.endswith(".parquet"):
                found["parquet"].append(os.path.join(d, name))
            elif name.endswith((".jsonl", ".json")):
                found["jsonl"].append(os.path.join(d, name))
    fmt = fmt or ("parquet" if found["parquet"] or not found["jsonl"] else "jsonl")
    if not found[fmt]:
        raise UsageProblem(f"{src}: no .{fmt} files")
    return fmt, found[fmt]


def _batches(fmt: str, src: str, files: list[str], binary: str,
             advance: Callable[[int], object]) -> "Iterator[pa.RecordBatch]":
    if fmt == "parquet":
        import pyarrow as pa
        import pyarrow.dataset as ds

        # a directory in the hive layout of `kbatch export` gives back its topic and partition
        try:
            dataset = ds.dataset(files, format="parquet", partitioning=None if os.path.isfile(src) else "hive",
                                 partition_base_dir=None if os.path.isfile(src) else src)  # in file-name order
        except pa.ArrowInvalid as e:  # pyarrow names the file; say what was expected
            raise UsageProblem(f"{src}: not Parquet (give --format jsonl for JSON lines): {e}") from None
        for frag in dataset.get_fragments():
            for rb in frag.to_batches(schema=dataset.schema):
                yield rb
            advance(os.path.getsize(frag.path))
    else:
        from ._jsonl import batches_of

        for path in files:
            with open(path, encoding="utf-8") as f:
                try:
                    yield from batches_of(f, binary)
                except KBatchError as e:
                    e.update(reason=f"{path}: {e.reason}")
                    raise
                except UnicodeDecodeError as e:
                    raise UsageProblem(f"{path}: not JSON lines: byte {e.start} is not UTF-8 text (a Parquet file? "
                                       f"give --format parquet)") from None
            advance(os.path.getsize(path))


class _Partition:
    """One partition directory the import writes to: its Log, opened (or created) for writing, and
    the all-or-nothing group that spans every append_table call of the import to it. The group's
    note is written before the first append, so from then on a kill is undone by the next
    writer's open. After a failure, `undo` takes the import's records out again and `close`
    removes a directory the import created; `outcome` says what became of it."""

    def __init__(self, path: str, cfg: "LogConfig") -> None:
        from ..log.unified_log import Log

        self.path = path
        self.created = not os.path.isdir(path)
        self.records = 0
        self.outcome: str | None = None
        try:
            self.log: Log = Log.create(path, cfg) if self.created else Log.open(path, cfg, writable=True)
        except BaseException:
            if self.created:
                shutil.rmtree(path, ignore_errors=True)
            raise
        self.first = self.log.end_offset()
        self.group: AppendGroup | None = None
        self.keep = True  # an empty active segment at the start stays (the group's plan says)
        try:
            self.group = self.log.append_group().__enter__()
            self.keep = self.group.keep_segment_at_target
            self.group.before_append(True)
        except BaseException as e:
            self.undo(e)
            self.close(failed=True)
            raise

    def commit(self) -> None:
        """The import succeeded: the group's note goes, the records stay."""
        group, self.group = self.group, None
        if group is not None:
            group.commit()

    def undo(self, exc: BaseException) -> None:
        """Take the import's records out again."""
        group, self.group = self.group, None
        try:
            if group is not None:
                group.rollback(exc)
            elif self.log.end_offset() != self.first:  # committed before another partition failed
                self.log.undo_appends(self.first, keep_segment_at_start=self.keep)
        except Exception as e2:
            self.outcome = (f"taking its {self.records} records out failed ({e2}); reopening it for writing "
                            f"finishes that")
            return
        if self.log.failed is not None:  # the log stopped writing: the note stays for the next open
            self.outcome = (f"its writes stopped ({self.log.failed}); reopening it for writing takes this import's "
                            f"records out")
        else:
            self.outcome = f"left as it was: the log ends at {self.first} as before"

    def close(self, failed: bool = False) -> None:
        try:
            self.log.close()
        finally:
            # a directory the import made goes whatever its log's state, once the lock (a file in it)
            # is released
            if failed and self.created:
                try:
                    shutil.rmtree(self.path)
                    self.outcome = "removed (this import created it)"
                except OSError as e:
                    self.outcome = f"could not be removed ({e}); {self.outcome}"


def _make_dirs(path: str) -> list[str]:
    """os.makedirs(path); returns the directories it created, deepest first."""
    made, p = [], os.path.abspath(path)
    while not os.path.isdir(p):
        made.append(p)
        p = os.path.dirname(p)
    os.makedirs(path, exist_ok=True)
    return made


def cmd_import(src: str, *, to: str, topic: str | None = None, partitions: int | None = None, fmt: str | None = None,
               config: Sequence[str] = (), compression: str | None = None, compression_level: int | None = None,
               binary: str = "base64",
               quiet: bool = False, as_json: bool = False, out: IO[str] | None = None,
               err: IO[str] | None = None) -> int:
    from ..record.compression import check_level, codec_from_name
    from ..log.unified_log import LogConfig
    from ..columns.partitioner import Router

    out = out or sys.stdout
    err = err or sys.stderr
    fmt, files = _inputs(src, fmt)
    props = {}
    for item in config:
        name, sep, value = item.partition("=")
        if not sep:
            raise UsageProblem(f"--config takes name=value, not {item!r}")
        props[name.strip()] = value.strip()
    cfg = LogConfig.from_properties(props)
    codec = None if compression is None else codec_from_name(compression)
    if compression_level is not None:  # Kafka's scale of the codec the batches get
        check_level(codec if codec is not None else (cfg.compression or 0), compression_level)
    if partitions is not None and partitions < 1:
        raise UsageProblem("--partitions must be >= 1")
    route = Router(topic, partitions or 1)
    made = _make_dirs(to)
    parts: dict[tuple[str, int], _Partition] = {}
    total = sum(os.path.getsize(f) for f in files)
    try:
        with progress_bar(total, "import", quiet) as advance:
            for rb in _batches(fmt, src, files, binary, advance):
                if partitions is not None and "partition" in rb.schema.names:  # --partitions re-partitions
                    rb = rb.drop_columns(["partition"])
                for key, sub in route.groups(rb):
                    part = parts.get(key)
                    if part is None:
                        part = parts[key] = _Partition(os.path.join(to, f"{key[0]}-{key[1]}"), cfg)
                    part.records += part.log.append_table(sub, compression=codec,
                                                           compression_level=compression_level).record_count
        for part in parts.values():
            part.commit()
    except BaseException as e:
        # all or nothing: every partition back to where it was, newest first, then what was made
        for part in reversed(parts.values()):
            part.undo(e)
        for part in reversed(parts.values()):
            part.close(failed=True)
        for d in made:
            try:
                os.rmdir(d)
            except OSError:
                break  # not empty (a partition that could not be removed) or gone
        if not isinstance(e, KBatchError):
            raise
        err.write(f"kbatch: {e}\n")
        _summary(out, err, to, parts, as_json, quiet, stopped=True)
        return EXIT_PROBLEMS
    for part in parts.values():
        part.close()
    _summary(out, err, to, parts, as_json, quiet, stopped=False)
    return EXIT_OK


def _summary(out: IO[str], err: IO[str], to: str, parts: "dict[tuple[str, int], _Partition]", as_json: bool,
             quiet: bool, stopped: bool) -> None:
    for (t, p), part in sorted(parts.items()):
        path = os.path.join(to, f"{t}-{p}")
        first, n = part.first, part.records
        if stopped:
            if as_json:
                emit(out, dict(type="rolled_back", partition=path, records=n, next_offset=first,
                               removed=not os.path.exists(path), outcome=part.outcome))
            else:
                err.write(f"{path}: not imported, {part.outcome}\n")
        elif as_json:
            emit(out, dict(type="imported", partition=path, records=n, first_offset=first, next_offset=first + n))
        elif not quiet:
            out.write(f"{path}: {n} records appended, offsets {first}..{first + n - 1}\n")


def register(app: "typer.Typer") -> None:
    from typing import Annotated, List, Optional

    import typer

    quiet_flag, json_flag = flags()

    @app.command(name="import", help="Import Parquet or JSON lines (decode_columns' columns) into partition "
                                     "directories of segments, through Log (offsets from the log end, validation, "
                                     "rolling).")
    def import_(src: Annotated[str, typer.Argument(help="A .parquet / .jsonl file, or a directory of them (the "
                                                        "topic=/partition= layout of kbatch export).")],
                to: Annotated[str, typer.Option("--to", help="Log directory: rows go to <to>/<topic>-<partition>.")],
                topic: Annotated[Optional[str], typer.Option("--topic", help="Topic of every row (default: the rows' topic column).")] = None,
                partitions: Annotated[Optional[int], typer.Option("--partitions", min=1, help="Spread rows over this many partitions with Kafka's key partitioner (a partition column is then not read; without either: partition 0).")] = None,
                fmt: Annotated[Optional[str], typer.Option("--format", help="parquet or jsonl (default: from the file names).")] = None,
                config: Annotated[Optional[List[str]], typer.Option("--config", help="Topic configuration name=value (Kafka's names, e.g. segment.bytes=67108864); repeatable.")] = None,
                compression: Annotated[Optional[str], typer.Option("--compression", help="Codec of the batches when compression.type is producer: none, gzip, snappy, lz4, zstd.")] = None,
                compression_level: Annotated[Optional[int], typer.Option("--compression-level", help="Level of that codec on Kafka's scale (gzip 1-9, lz4 1-17, zstd -131072-22; default: Kafka's, gzip 6, lz4 9, zstd 3, or the topic's compression.<codec>.level).")] = None,
                binary: Annotated[str, typer.Option("--binary", help="JSON lines: keys and values as base64 or text (UTF-8).")] = "base64",
                as_json: Annotated[bool, json_flag] = False, quiet: Annotated[bool, quiet_flag] = False) -> None:
        run(cmd_import, src, to=to, topic=topic, partitions=partitions, fmt=fmt, config=config or (),
            compression=compression, compression_level=compression_level, binary=binary, quiet=quiet,
            as_json=as_json)
