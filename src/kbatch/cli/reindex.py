"""`kbatch reindex`: .index and .timeindex rebuilt from the .log."""

import sys

from .. import _wire as W
from ._common import (EXIT_OK, api, emit, options, resolve_segments, run)


def cmd_reindex(path, *, index_interval_bytes=W.DEFAULT_INDEX_INTERVAL_BYTES, quiet=False, as_json=False,
                out=None, err=None) -> int:
    out = out or sys.stdout
    parts = resolve_segments(path)
    for d, segs in parts:
        if not segs:
            continue
        api("rebuild_indexes")(d, index_interval_bytes=index_interval_bytes)
        if as_json:
            emit(out, dict(type="reindexed", partition=d, segments=len(segs)))
        elif not quiet:
            out.write(f"{d}: rebuilt .index and .timeindex of {len(segs)} segment(s)\n")
    return EXIT_OK


def register(app) -> None:
    from typing import Annotated, List, Optional  # noqa: F401

    import typer

    Quiet, Json = options()

    @app.command(help="Rebuild the .index and .timeindex files of a segment's partition, a partition or a log "
                      "directory (each file replaced atomically).")
    def reindex(path: Annotated[str, typer.Argument(help="Segment .log file, partition directory or log directory.")],
                index_interval_bytes: Annotated[int, typer.Option("--index-interval-bytes", help="Bytes between index entries (index.interval.bytes).")] = W.DEFAULT_INDEX_INTERVAL_BYTES,
                as_json: Json = False, quiet: Quiet = False):
        run(cmd_reindex, path, index_interval_bytes=index_interval_bytes, quiet=quiet, as_json=as_json)
