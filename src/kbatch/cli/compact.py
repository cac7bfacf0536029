"""`kbatch compact`: the log cleaner over partition directories.

A partition is compacted only if it can be read in full and nobody else writes it: a corrupt,
truncated or foreign segment makes compaction refuse that partition (exit 1, nothing changed),
and a directory another writer or a running broker holds is refused (exit 2). `--dry-run`
writes nothing; `--output DIR` writes the compacted copy to DIR/<partition> instead.
"""

import os
import sys
from typing import IO, TYPE_CHECKING

from .. import _wire as W
from ..errors import InvalidConfigurationError, KBatchError, StorageError
from ._common import (EXIT_OK, EXIT_PROBLEMS, EXIT_USAGE, UsageProblem, emit, flags, log_bytes, now_ms,
                      partition_dirs, progress_bar, refuse_remote, run, time_value)

if TYPE_CHECKING:
    import typer

    from .._typing import PathLike


def cmd_compact(path: "PathLike", *, now: int | None = None, delete_retention_ms: int = 86_400_000,
                dry_run: bool = False, output: "PathLike | None" = None, as_json: bool = False, quiet: bool = False,
                dedupe_buffer_size: int | None = None, segment_bytes: int | None = None,
                segment_index_bytes: int | None = None, out: IO[str] | None = None,
                err: IO[str] | None = None) -> int:
    from ..log.cleaner import DEFAULT_SEGMENT_BYTES, compact

    out = out or sys.stdout
    err = err or sys.stderr
    now_value = now_ms() if now is None else now
    if dry_run and output is not None:
        raise UsageProblem("--dry-run writes nothing; leave out --output")
    code = EXIT_OK
    refuse_remote(path, "compact")
    dirs = partition_dirs(path)
    with progress_bar(log_bytes(dirs), "compact", quiet) as advance:
        for d in dirs:
            name = os.path.basename(os.path.abspath(d))
            target = None if output is None else os.path.join(output, name)
            size = log_bytes([d])
            try:
                stats = compact(d, now_ms=now_value, delete_retention_ms=delete_retention_ms, dry_run=dry_run,
                                output_dir=target, dedupe_buffer_size=W.DEFAULT_DEDUPE_BUFFER_SIZE
                                if dedupe_buffer_size is None else dedupe_buffer_size,
                                segment_bytes=DEFAULT_SEGMENT_BYTES if segment_bytes is None else segment_bytes,
                                segment_index_bytes=W.DEFAULT_SEGMENT_INDEX_BYTES
                                if segment_index_bytes is None else segment_index_bytes)
            except (StorageError, InvalidConfigurationError) as e:
                # locked, unwritable, changed under us, or a key map too small: the partition was not compacted
                err.write(f"kbatch: {name}: {e}\n")
                code = max(code, EXIT_USAGE)
                continue
            except KBatchError as e:   # cannot be read in full: refused, nothing changed
                err.write(f"kbatch: {name}: {e}\n")
                code = max(code, EXIT_PROBLEMS)
                continue
            advance(size)
            rep = stats.as_dict()
            if as_json:
                emit(out, dict(partition=name, path=d, now=now_value, delete_retention_ms=delete_retention_ms,
                               records_removed=stats.records_removed, bytes_saved=stats.bytes_saved, **rep))
            elif not quiet:
                verb = "would clean" if dry_run else "cleaned"
                line = (f"{name}: {verb} {stats.segments_cleaned} segment(s): {stats.records_read} records read, "
                        f"{stats.records_written} kept ({stats.records_removed} removed), {stats.bytes_read} -> "
                        f"{stats.bytes_written} bytes ({stats.bytes_saved} saved), {stats.tombstones_removed} tombstones "
                        f"removed")
                if dry_run:
                    line += "; dry run, nothing written"
                elif target is not None:
                    line += f"; written to {stats.output_dir}"
                out.write(line + "\n")
    return code


def register(app: "typer.Typer") -> None:
    from typing import Annotated, Optional

    import typer

    quiet_flag, json_flag = flags()

    @app.command(help="Compact partition(s) as the broker's log cleaner does (KIP-87 tombstones, KIP-534 delete "
                      "horizons). A partition that cannot be read in full is refused (exit 1, nothing changed); a "
                      "directory another writer or a running broker holds is refused (exit 2).")
    def compact(path: Annotated[str, typer.Argument(help="Partition directory or log directory.")],
                now: Annotated[Optional[str], typer.Option("--now", help="The cleaner's clock (epoch ms or ISO-8601); default: now.")] = None,
                delete_retention_ms: Annotated[int, typer.Option("--delete-retention-ms", min=0, help="delete.retention.ms")] = 86_400_000,
                dry_run: Annotated[bool, typer.Option("--dry-run", help="Write nothing; say what would be removed and how many bytes saved.")] = False,
                output: Annotated[Optional[str], typer.Option("--output", help="Write the compacted partitions to DIR/<partition> and leave the input as it is.")] = None,
                dedupe_buffer_size: Annotated[Optional[int], typer.Option("--dedupe-buffer-size", min=1, help="Bytes of the key map (log.cleaner.dedupe.buffer.size; default 134217728); more distinct keys than it holds take more passes.")] = None,
                segment_bytes: Annotated[Optional[int], typer.Option("--segment-bytes", min=1, max=2**31 - 1, help="The topic's segment.bytes (default 1073741824): consecutive segments are cleaned into one while their sizes fit, as the broker's cleaner groups them.")] = None,
                segment_index_bytes: Annotated[Optional[int], typer.Option("--segment-index-bytes", min=1, max=2**31 - 1, help="The topic's segment.index.bytes (default 10485760): the summed index sizes of a group stay within it.")] = None,
                as_json: Annotated[bool, json_flag] = False, quiet: Annotated[bool, quiet_flag] = False) -> None:
        run(cmd_compact, path, now=time_value(now), delete_retention_ms=delete_retention_ms, dry_run=dry_run,
            output=output, as_json=as_json, quiet=quiet, dedupe_buffer_size=dedupe_buffer_size,
            segment_bytes=segment_bytes, segment_index_bytes=segment_index_bytes)
