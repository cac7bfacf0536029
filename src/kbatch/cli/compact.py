"""`kbatch compact`: the log cleaner over partition directories."""

import os
import sys

from ._common import (EXIT_OK, api, emit, now_ms, options, partition_dirs, run, time_value)


def _report_dict(report) -> dict:
    """The KIP-937 report as a plain dict, whatever shape validate.py returns it in."""
    if isinstance(report, dict):
        return dict(report)
    for attr in ("as_dict", "_asdict", "to_dict"):
        f = getattr(report, attr, None)
        if f is not None:
            return dict(f())
    import dataclasses
    if dataclasses.is_dataclass(report):
        return dataclasses.asdict(report)
    return {k: v for k, v in vars(report).items() if not k.startswith("_")}


def cmd_compact(path, *, now=None, delete_retention_ms=86_400_000, as_json=False, quiet=False,
                out=None, err=None) -> int:
    out = out or sys.stdout
    now_value = now_ms() if now is None else now
    for d in partition_dirs(path):
        name = os.path.basename(os.path.abspath(d))
        stats = api("compact")(d, now_ms=now_value, delete_retention_ms=delete_retention_ms)
        rep = _report_dict(stats)
        if as_json:
            emit(out, dict(partition=name, path=d, now=now_value, delete_retention_ms=delete_retention_ms, **rep))
        elif not quiet:
            out.write(f"{name}: {rep.get('segments_cleaned', 0)} segment(s) cleaned, "
                      f"{rep.get('records_read', 0)} records read, {rep.get('records_written', 0)} kept, "
                      f"{rep.get('bytes_read', 0)} -> {rep.get('bytes_written', 0)} bytes, "
                      f"{rep.get('tombstones_removed', 0)} tombstones removed\n")
    return EXIT_OK


def register(app) -> None:
    from typing import Annotated, List, Optional  # noqa: F401

    import typer

    Quiet, Json = options()

    @app.command(help="Compact partition(s) as the broker's log cleaner does (KIP-87 tombstones, KIP-534 delete "
                      "horizons).")
    def compact(path: Annotated[str, typer.Argument(help="Partition directory or log directory.")],
                now: Annotated[Optional[str], typer.Option("--now", help="The cleaner's clock (epoch ms or ISO-8601); default: now.")] = None,
                delete_retention_ms: Annotated[int, typer.Option("--delete-retention-ms", help="delete.retention.ms")] = 86_400_000,
                as_json: Json = False, quiet: Quiet = False):
        run(cmd_compact, path, now=time_value(now), delete_retention_ms=delete_retention_ms, as_json=as_json,
            quiet=quiet)
