"""`kbatch reindex`: .index and .timeindex rebuilt from the .log.

Rebuilding writes, so it holds each partition directory's `.lock`: a directory another writer or
a running broker holds is refused (exit 2), and a segment with a corrupt batch is left as it was
(exit 1; `kbatch verify` shows where).
"""

import os
import sys
from typing import IO, TYPE_CHECKING

from .. import _wire as W
from ..errors import KBatchError, StorageError
from ._common import EXIT_OK, EXIT_PROBLEMS, EXIT_USAGE, emit, flags, refuse_remote, resolve_segments, run

if TYPE_CHECKING:
    import typer

    from .._typing import PathLike


def cmd_reindex(path: "PathLike", *, index_interval_bytes: int = W.DEFAULT_INDEX_INTERVAL_BYTES, quiet: bool = False,
                as_json: bool = False, out: IO[str] | None = None, err: IO[str] | None = None) -> int:
    from ..log.unified_log import rebuild_indexes

    out = out or sys.stdout
    err = err or sys.stderr
    code = EXIT_OK
    refuse_remote(path, "reindex")
    single = os.path.isfile(os.fspath(path))
    for d, segs in resolve_segments(path):
        if not segs:
            continue
        try:
            rebuild_indexes(segs[0].path(".log") if single else d, index_interval_bytes=index_interval_bytes)
        except StorageError as e:
            err.write(f"kbatch: {d}: {e}\n")
            code = max(code, EXIT_USAGE)
            continue
        except KBatchError as e:
            err.write(f"kbatch: {d}: {e}\n")
            code = max(code, EXIT_PROBLEMS)
            continue
        if as_json:
            emit(out, dict(type="reindexed", partition=d, segments=len(segs)))
        elif not quiet:
            out.write(f"{d}: rebuilt .index, .timeindex and .txnindex of {len(segs)} segment(s)\n")
    return code


def register(app: "typer.Typer") -> None:
    from typing import Annotated

    import typer

    quiet_flag, json_flag = flags()

    @app.command(help="Rebuild the .index and .timeindex files of a segment, a partition or a log directory (each "
                      "file replaced atomically, the directory's .lock held; a directory another writer or a running "
                      "broker holds is refused).")
    def reindex(path: Annotated[str, typer.Argument(help="Segment .log file, partition directory or log directory.")],
                index_interval_bytes: Annotated[int, typer.Option("--index-interval-bytes", min=0, max=W.INT32_MAX, help="Bytes between index entries (index.interval.bytes).")] = W.DEFAULT_INDEX_INTERVAL_BYTES,
                as_json: Annotated[bool, json_flag] = False, quiet: Annotated[bool, quiet_flag] = False) -> None:
        run(cmd_reindex, path, index_interval_bytes=index_interval_bytes, quiet=quiet, as_json=as_json)
