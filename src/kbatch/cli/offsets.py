"""`kbatch offsets`: ListOffsets per partition (KIP-79)."""

import os
import sys

from ._common import (EXIT_OK, UsageProblem, api, emit, format_time, options, parse_time,
                      partition_dirs, run, time_value)


def cmd_offsets(path, *, times=(), earliest=False, latest=False, max_timestamp=False, as_json=False,
                quiet=False, out=None, err=None) -> int:
    out = out or sys.stdout
    targets = [("earliest", None)] if earliest else []
    targets += [("latest", None)] if latest else []
    targets += [("max-timestamp", None)] if max_timestamp else []
    targets += [(t, parse_time(t)) for t in times]
    if not targets:
        raise UsageProblem("say what to look up: --time T (repeatable), --earliest, --latest or --max-timestamp")
    for d in partition_dirs(path):
        name = os.path.basename(os.path.abspath(d))
        log = api("Log").open(d)
        try:
            for label, ts in targets:
                if label in ("earliest", "latest"):  # epochs from the leader epoch cache, as a broker answers
                    hit = log.offset_for(api("EARLIEST" if label == "earliest" else "LATEST"))
                elif label == "max-timestamp":
                    hit = log.offset_for(api("MAX_TIMESTAMP"))
                else:
                    hit = log.offsets_for_times([ts])[0]
                offset, found_ts, epoch = (None, None, None) if hit is None else hit
                if as_json:
                    emit(out, dict(partition=name, path=d, target=label if ts is None else ts, offset=offset,
                                    timestamp=found_ts, leader_epoch=epoch))
                else:
                    shown = label if ts is None else f"{label} ({ts})" if str(ts) != label else label
                    if offset is None:
                        out.write(f"{name}\t{shown}\tnone\n")
                    elif found_ts is None:
                        out.write(f"{name}\t{shown}\toffset {offset}\n")
                    else:
                        out.write(f"{name}\t{shown}\toffset {offset}\ttimestamp {found_ts} "
                                  f"({format_time(found_ts)})\n")
        finally:
            close = getattr(log, "close", None)
            if close is not None:
                close()
    return EXIT_OK


def register(app) -> None:
    from typing import Annotated, List, Optional  # noqa: F401

    import typer

    Quiet, Json = options()

    @app.command(help="Look up offsets per partition: by time (first record with timestamp >= T), earliest, "
                      "latest (log end offset) or the record with the largest timestamp.")
    def offsets(path: Annotated[str, typer.Argument(help="Partition directory or log directory.")],
                time_: Annotated[Optional[List[str]], typer.Option("--time", "-t", help="Epoch ms (negative allowed) or ISO-8601, e.g. 2024-05-01T09:00:00Z. Repeatable.")] = None,
                earliest: Annotated[bool, typer.Option("--earliest", help="The log start offset.")] = False,
                latest: Annotated[bool, typer.Option("--latest", help="The log end offset.")] = False,
                max_timestamp: Annotated[bool, typer.Option("--max-timestamp", help="The record with the largest timestamp.")] = False,
                as_json: Json = False, quiet: Quiet = False):
        for t in time_ or []:
            time_value(t)
        run(cmd_offsets, path, times=list(time_ or []), earliest=earliest, latest=latest,
            max_timestamp=max_timestamp, as_json=as_json, quiet=quiet)
