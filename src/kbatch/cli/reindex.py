"""`kbatch reindex`: .index and .timeindex rebuilt from the .log.

Rebuilding writes, so it holds each partition directory's `.lock`: a directory another writer or
a running broker holds is refused (exit 2), and a segment with a corrupt batch is left as it was
(exit 1; `kbatch verify` shows where).
"""

import os
import sys

from .. import _wire as W
from ..errors import KBatchError, StorageError
from ._common import (EXIT_OK, EXIT_PROBLEMS, EXIT_USAGE, api, emit, options, refuse_remote, resolve_segments,
                      run)


def cmd_reindex(path, *, index_interval_bytes=W.DEFAULT_INDEX_INTERVAL_BYTES, quiet=False, as_json=False,
                out=None, err=None) -> int:
    out = out or sys.stdout
    err = err or sys.stderr
    code = EXIT_OK
    refuse_remote(path, "reindex")
    single = os.path.isfile(os.fspath(path))
    for d, segs in resolve_segments(path):
        if not segs:
            continue
        try:
            api("rebuild_indexes")(segs[0].path(".log") if single else d, index_interval_bytes=index_interval_bytes)
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
            out.write(f"{d}: rebuilt .index and .timeindex of {len(segs)} segment(s)\n")
    return code


def register(app) -> None:
    from typing import Annotated, List, Optional  # noqa: F401

    import typer

    Quiet, Json = options()

    @app.command(help="Rebuild the .index and .timeindex files of a segment, a partition or a log directory (each "
                      "file replaced atomically, the directory's .lock held; a directory another writer or a running "
                      "broker holds is refused).")
    def reindex(path: Annotated[str, typer.Argument(help="Segment .log file, partition directory or log directory.")],
                index_interval_bytes: Annotated[int, typer.Option("--index-interval-bytes", help="Bytes between index entries (index.interval.bytes).")] = W.DEFAULT_INDEX_INTERVAL_BYTES,
                as_json: Json = False, quiet: Quiet = False):
        run(cmd_reindex, path, index_interval_bytes=index_interval_bytes, quiet=quiet, as_json=as_json)
