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
A row or batch the log refuses stops the import: what was appended before it stays, the error
names the row or batch, and the command exits 1.
"""

import os
import sys

from ..errors import KBatchError
from ._common import (EXIT_OK, EXIT_PROBLEMS, UsageProblem, emit, options, progress_bar, run)

FORMATS = ("parquet", "jsonl")


def _inputs(src: str, fmt):
    """(format, [files]) of SRC: a file, or a directory's .parquet / .jsonl files (recursively)."""
    if not os.path.exists(src):
        raise UsageProblem(f"{src}: no such file or directory")
    if fmt is not None and fmt not in FORMATS:
        raise UsageProblem(f"--format must be one of {', '.join(FORMATS)}, not {fmt!r}")
    if os.path.isfile(src):
        return fmt or ("jsonl" if src.endswith((".jsonl", ".json")) else "parquet"), [src]
    found = {"parquet": [], "jsonl": []}
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


def _batches(fmt: str, src: str, files: list, binary: str, advance):
    if fmt == "parquet":
        import pyarrow.dataset as ds

        # a directory in the hive layout of `kbatch export` gives back its topic and partition
        dataset = ds.dataset(files, format="parquet", partitioning=None if os.path.isfile(src) else "hive",
                             partition_base_dir=None if os.path.isfile(src) else src)  # in file-name order
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
                    e.reason = f"{path}: {e.reason}"
                    e.args = (e._render(),)
                    raise
            advance(os.path.getsize(path))


def cmd_import(src, *, to, topic=None, partitions=None, fmt=None, config=(), compression=None, compression_level=None,
               binary="base64", quiet=False, as_json=False, out=None, err=None) -> int:
    from ..compression import check_level, codec_from_name
    from ..log import Log, LogConfig
    from ..partitioner import Router

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
    os.makedirs(to, exist_ok=True)
    logs, done = {}, {}
    total = sum(os.path.getsize(f) for f in files)
    try:
        with progress_bar(total, "import", quiet) as advance:
            for rb in _batches(fmt, src, files, binary, advance):
                if partitions is not None and "partition" in rb.schema.names:  # --partitions re-partitions
                    rb = rb.drop_columns(["partition"])
                for key, sub in route.groups(rb):
                    log = logs.get(key)
                    if log is None:
                        path = os.path.join(to, f"{key[0]}-{key[1]}")
                        existed = os.path.isdir(path)
                        log = logs[key] = (Log.open(path, cfg, writable=True) if existed else Log.create(path, cfg))
                        done[key] = [log.end_offset(), 0]
                    info = log.append_table(sub, compression=codec, compression_level=compression_level)
                    done[key][1] += info.record_count
    except KBatchError as e:
        err.write(f"kbatch: {e}\n")
        _summary(out, err, to, done, as_json, quiet, stopped=True)
        return EXIT_PROBLEMS
    finally:
        for log in logs.values():
            log.close()
    _summary(out, err, to, done, as_json, quiet, stopped=False)
    return EXIT_OK


def _summary(out, err, to, done, as_json, quiet, stopped):
    for (t, p), (first, n) in sorted(done.items()):
        path = os.path.join(to, f"{t}-{p}")
        if as_json:
            emit(out, dict(type="imported", partition=path, records=n, first_offset=first, next_offset=first + n))
        elif not quiet or stopped:
            (err if stopped else out).write(f"{path}: {n} records appended, offsets {first}..{first + n - 1}\n")


def register(app) -> None:
    from typing import Annotated, List, Optional

    import typer

    Quiet, Json = options()

    @app.command(name="import", help="Import Parquet or JSON lines (decode_columns' columns) into partition "
                                     "directories of segments, through Log (offsets from the log end, validation, "
                                     "rolling).")
    def import_(src: Annotated[str, typer.Argument(help="A .parquet / .jsonl file, or a directory of them (the "
                                                        "topic=/partition= layout of kbatch export).")],
                to: Annotated[str, typer.Option("--to", help="Log directory: rows go to <to>/<topic>-<partition>.")],
                topic: Annotated[Optional[str], typer.Option("--topic", help="Topic of every row (default: the rows' topic column).")] = None,
                partitions: Annotated[Optional[int], typer.Option("--partitions", help="Spread rows over this many partitions with Kafka's key partitioner (a partition column is then not read; without either: partition 0).")] = None,
                fmt: Annotated[Optional[str], typer.Option("--format", help="parquet or jsonl (default: from the file names).")] = None,
                config: Annotated[Optional[List[str]], typer.Option("--config", help="Topic configuration name=value (Kafka's names, e.g. segment.bytes=67108864); repeatable.")] = None,
                compression: Annotated[Optional[str], typer.Option("--compression", help="Codec of the batches when compression.type is producer: none, gzip, snappy, lz4, zstd.")] = None,
                compression_level: Annotated[Optional[int], typer.Option("--compression-level", help="Level of that codec on Kafka's scale (gzip 1-9, lz4 1-17, zstd -131072-22; default: Kafka's, gzip 6, lz4 9, zstd 3, or the topic's compression.<codec>.level).")] = None,
                binary: Annotated[str, typer.Option("--binary", help="JSON lines: keys and values as base64 or text (UTF-8).")] = "base64",
                as_json: Json = False, quiet: Quiet = False):
        run(cmd_import, src, to=to, topic=topic, partitions=partitions, fmt=fmt, config=config or (),
            compression=compression, compression_level=compression_level, binary=binary, quiet=quiet,
            as_json=as_json)
