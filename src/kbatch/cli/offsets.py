"""`kbatch offsets`: ListOffsets per partition (KIP-79).

Answers come from the log: an index entry is used only once the log agrees with it (otherwise the
segment is scanned, stderr says so, and the exit code is 1). A time's answer is the one Kafka would
give over the batches that can be read and whose CRC holds; every range that could not be read is
named on stderr, and when a lookup's answer could have been in one, stderr says so for that
lookup and the exit code is 1.
"""

import logging
import sys
from collections.abc import Sequence
from typing import IO, TYPE_CHECKING

from ..errors import KBatchError, StorageError
from ._common import (EXIT_OK, EXIT_PROBLEMS, EXIT_USAGE, UsageProblem, emit, flags, format_time, log_bytes,
                      parse_time, partition_dirs, partition_name, progress_bar, run, time_value)

if TYPE_CHECKING:
    import typer

    from .._wire import OffsetSpec
    from ..log.unified_log import OffsetAndTimestamp

    from .._typing import PathLike


def cmd_offsets(path: "PathLike", *, times: Sequence[str] = (), earliest: bool = False, latest: bool = False,
                max_timestamp: bool = False, topic: str | None = None, partition: int | None = None,
                as_json: bool = False, quiet: bool = False, out: IO[str] | None = None,
                err: IO[str] | None = None) -> int:
    out = out or sys.stdout
    err = err or sys.stderr
    targets: list[tuple[str, int | None]] = [("earliest", None)] if earliest else []
    targets += [("latest", None)] if latest else []
    targets += [("max-timestamp", None)] if max_timestamp else []
    targets += [(t, parse_time(t)) for t in times]
    if not targets:
        raise UsageProblem("say what to look up: --time T (repeatable), --earliest, --latest or --max-timestamp")
    code = EXIT_OK
    # the storage layer logs what it works around; here each problem is printed once, below
    logging.getLogger("kbatch.log.segment").addHandler(logging.NullHandler())
    dirs = partition_dirs(path)
    if topic is not None or partition is not None:  # -t / -p as in cat and stats
        from ..log.layout import describe

        parts = [describe(d, []) for d in dirs]
        dirs = [p.path for p in parts if (topic is None or p.topic == topic)
                and (partition is None or p.partition == partition)]
        if not dirs:
            raise UsageProblem(f"{path}: no partition of topic {topic} there" if topic is not None
                               else f"{path}: no partition {partition} there")
    with progress_bar(log_bytes(dirs), "offsets", quiet) as advance:
        for d in dirs:
            code = max(code, _partition_offsets(d, targets, as_json, out, err))
            advance(log_bytes([d]))
    return code


def _partition_offsets(d: str, targets: "list[tuple[str, int | None]]", as_json: bool, out: IO[str],
                       err: IO[str]) -> int:
    """One partition's lookups, printed; its exit code."""
    from .._wire import OffsetSpec
    from ..log.fetch import Lookup, damage_verdict
    from ..log.unified_log import Log

    code = EXIT_OK
    name = partition_name(d)
    try:
        log = Log.open(d)
    except StorageError as e:
        err.write(f"kbatch: {name}: {e}\n")
        return EXIT_USAGE
    answered: list[Lookup] = []
    try:
        for label, ts in targets:
            if label in ("earliest", "latest"):  # epochs from the leader epoch cache, as a broker answers
                hit = log.offset_for(OffsetSpec.EARLIEST if label == "earliest" else OffsetSpec.LATEST)
            elif label == "max-timestamp" or ts is None:
                hit = log.offset_for(OffsetSpec.MAX_TIMESTAMP)
            else:
                hit = log.offsets_for_times([ts])[0]
            offset, found_ts, epoch = (None, None, None) if hit is None else hit
            answered.append((label, OffsetSpec.EARLIEST if label == "earliest" else OffsetSpec.LATEST
                             if label == "latest" else OffsetSpec.MAX_TIMESTAMP if ts is None else ts, hit))
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
    except StorageError as e:
        err.write(f"kbatch: {name}: {e}\n")
        code = max(code, EXIT_USAGE)
    except KBatchError as e:
        err.write(f"kbatch: {name}: {e}\n")
        code = max(code, EXIT_PROBLEMS)
    finally:
        # once every lookup ran (any of them may have found damage the others' answers could be
        # in): the read path's rule, as cat's for its s@T / e@T (kbatch.log.fetch.damage_verdict)
        problems, notes = damage_verdict(log, answered)
        for line in notes + problems:
            err.write(f"kbatch: {name}: {line}\n")
        if problems:
            code = max(code, EXIT_PROBLEMS)
        log.close()
    return code


def register(app: "typer.Typer") -> None:
    from typing import Annotated, List, Optional

    import typer

    quiet_flag, json_flag = flags()

    @app.command(help="Look up offsets per partition: by time (first record with timestamp >= T), earliest, "
                      "latest (log end offset) or the record with the largest timestamp. Exit 1 when an index "
                      "disagreed with the log or an answer could have been in bytes that could not be read "
                      "(stderr says which).")
    def offsets(path: Annotated[str, typer.Argument(help="Partition directory or log directory.")],
                time_: Annotated[Optional[List[str]], typer.Option("--time", help="Epoch ms (negative allowed) or ISO-8601, e.g. 2024-05-01T09:00:00Z. Repeatable.")] = None,
                earliest: Annotated[bool, typer.Option("--earliest", help="The log start offset.")] = False,
                latest: Annotated[bool, typer.Option("--latest", help="The log end offset.")] = False,
                max_timestamp: Annotated[bool, typer.Option("--max-timestamp", help="The record with the largest timestamp.")] = False,
                topic: Annotated[Optional[str], typer.Option("--topic", "-t", help="Only this topic.")] = None,
                partition: Annotated[Optional[int], typer.Option("--partition", "-p", min=0, help="Only this partition.")] = None,
                as_json: Annotated[bool, json_flag] = False, quiet: Annotated[bool, quiet_flag] = False) -> None:
        for t in time_ or []:
            time_value(t)
        run(cmd_offsets, path, times=list(time_ or []), earliest=earliest, latest=latest,
            max_timestamp=max_timestamp, topic=topic, partition=partition, as_json=as_json, quiet=quiet)
