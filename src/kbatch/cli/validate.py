"""`kbatch validate`: the KIP-937 timestamp report.

Every byte is read (CRCs checked); anything that cannot be read is named with its file, byte
position and size, and makes the exit code 1, as timestamps outside the window do.
"""

import os
import sys
from collections.abc import Callable, Iterable
from typing import IO, TYPE_CHECKING, TypedDict

from .. import _wire as W
from ..errors import KBatchError
from ._common import (EXIT_OK, EXIT_PROBLEMS, UsageProblem, emit, flags, format_time, now_ms, progress_bar,
                      partition_name, resolve_segments, run, time_value, total_size)

if TYPE_CHECKING:
    import typer
    from typing_extensions import NotRequired

    from ..log.findings import Finding

    from .._typing import PathLike
    from ..log.segment import SegmentFiles


class Unreadable(TypedDict):
    """Bytes timestamp_report could not read: the file, where (None: the file could not be opened),
    how many bytes (when known) and why."""

    file: str
    position: int | None
    bytes: "NotRequired[int]"
    message: str


class TimestampReport(TypedDict):
    """timestamp_report's answer (the --json line's fields, with the partition's)."""

    records: int
    no_timestamp: int
    too_old: int
    too_new: int
    first_too_old_offset: int | None
    first_too_old_timestamp: int | None
    first_too_new_offset: int | None
    first_too_new_timestamp: int | None
    lower_bound: int | None
    upper_bound: int | None
    unreadable: list[Unreadable]
    unread_bytes: int
    message: str | None


def _segment_records(seg: "SegmentFiles | PathLike", rep: TimestampReport,
                     advance: Callable[[int], object]) -> tuple[list[int], list[int]]:
    """(offsets, timestamps) of every record of one segment file that can be read; everything that
    cannot (a file that is not a regular file, a bad CRC, a batch that does not decode, a header
    that does not parse, bytes at the end that are not a complete batch) goes to rep["unreadable"]
    with its byte count in rep["unread_bytes"]."""
    from ..record.file_records import batch_at

    offsets: list[int] = []
    stamps: list[int] = []
    if isinstance(seg, (str, os.PathLike)):  # a .log path (timestamp_report's callers may give paths)
        from ..log.layout import segment_files_for

        files = segment_files_for(seg if isinstance(seg, str) else os.fspath(seg))
    else:
        files = seg
    log_path = files.path(".log")
    try:
        f = files.open_log()
    except (OSError, KBatchError) as e:
        rep["unreadable"].append(Unreadable(file=log_path, position=None, message=str(e)))
        return offsets, stamps
    try:
        size = f.size_in_bytes
        done = 0
        scan = f.headers(0, verify_crc=True)
        try:
            for s in scan:
                ok = s["crc_valid"].tolist()
                for i in range(len(ok)):
                    batch = batch_at(s, i)
                    if not ok[i]:
                        rep["unreadable"].append(Unreadable(file=log_path, position=batch.position,
                                                            bytes=batch.size_in_bytes,
                                                            message=f"CRC mismatch: stored {batch.crc}, computed "
                                                                    f"{batch.compute_crc()}"))
                        rep["unread_bytes"] += batch.size_in_bytes
                        continue
                    if batch.is_control:  # never a consumer's record: counted as stats and verify count
                        advance(batch.size_in_bytes)
                        continue
                    try:
                        records = batch.records()
                    except KBatchError as e:
                        rep["unreadable"].append(Unreadable(file=log_path, position=batch.position,
                                                            bytes=batch.size_in_bytes, message=str(e)))
                        rep["unread_bytes"] += batch.size_in_bytes
                        continue
                    for r in records:
                        if r.timestamp is None:
                            rep["no_timestamp"] += 1
                        else:
                            offsets.append(r.offset)
                            stamps.append(r.timestamp)
                    rep["records"] += len(records)
                    advance(batch.size_in_bytes)
                    del records, batch  # not kept alive while the next window is read
                if len(s["position"]):
                    done = int(s["position"][-1] + s["size"][-1])
        except KBatchError as e:  # a header that cannot be parsed: the rest of the file is unread
            rep["unreadable"].append(Unreadable(file=log_path, position=done, bytes=size - done,
                                                message=f"cannot read from here on: {e}"))
            rep["unread_bytes"] += size - done
        else:
            if scan.end < size:  # a partial batch at the end
                rep["unreadable"].append(Unreadable(file=log_path, position=scan.end, bytes=size - scan.end,
                                                    message=f.incomplete(scan.end, "the segment")))
                rep["unread_bytes"] += size - scan.end
    finally:
        f.close()
    return offsets, stamps


def timestamp_report(segments: "Iterable[SegmentFiles | PathLike]", now: int, before_max_ms: int, after_max_ms: int,
                     advance: Callable[[int], object] = lambda n: None) -> TimestampReport:
    """KIP-937 over the records of a partition's segments: how many timestamps fall outside
    [now - before_max_ms, now + after_max_ms] (saturated, DESIGN.md decision 4), and the first
    offending offsets. Records without a timestamp are skipped, as Kafka skips -1. Bytes that could
    not be read are listed in "unreadable" ("unread_bytes" in all)."""
    import numpy as np

    from ..log.validator import check_timestamps as check

    rep = TimestampReport(records=0, no_timestamp=0, too_old=0, too_new=0, first_too_old_offset=None,
               first_too_old_timestamp=None, first_too_new_offset=None, first_too_new_timestamp=None,
               lower_bound=None, upper_bound=None, unreadable=[], unread_bytes=0, message=None)
    for seg in segments:
        offsets, stamps = _segment_records(seg, rep, advance)
        ts = np.array(stamps, dtype=np.int64)
        res = check(ts, now_ms=now, before_max_ms=before_max_ms, after_max_ms=after_max_ms, no_timestamp=None)
        rep["lower_bound"], rep["upper_bound"] = res.lower_bound, res.upper_bound
        rep["too_old"] += res.too_old
        rep["too_new"] += res.too_new
        if res.too_old and rep["first_too_old_offset"] is None:
            i = int(np.flatnonzero(ts < res.lower_bound)[0])
            rep["first_too_old_offset"], rep["first_too_old_timestamp"] = offsets[i], int(ts[i])
        if res.too_new and rep["first_too_new_offset"] is None:
            i = int(np.flatnonzero(ts > res.upper_bound)[0])
            rep["first_too_new_offset"], rep["first_too_new_timestamp"] = offsets[i], int(ts[i])
        if not res.ok and rep["message"] is None:
            i = res.first_bad_index
            rep["message"] = (f"Timestamp {int(ts[i])} of message with offset {offsets[i]} is out of range. "
                              f"The timestamp should be within [{res.lower_bound}, {res.upper_bound}]")
    if rep["lower_bound"] is None:
        rep["lower_bound"], rep["upper_bound"] = _sat(now - before_max_ms), _sat(now + after_max_ms)
    return rep


def cmd_validate(path: "PathLike", *, before_max_ms: int = W.INT64_MAX, after_max_ms: int = W.INT64_MAX,
                 now: int | None = None, as_json: bool = False, quiet: bool = False, out: IO[str] | None = None,
                 err: IO[str] | None = None) -> int:
    out = out or sys.stdout
    now_value = now_ms() if now is None else now
    if before_max_ms < 0 or after_max_ms < 0:
        raise UsageProblem("--before-max-ms and --after-max-ms must be >= 0")
    from ..log.findings import Finding, Severity

    left_out: list[str] = []
    parts = resolve_segments(path, left_out)
    total = total_size(parts)
    findings: list[Finding] = []
    for p in left_out:
        sys.stderr.write(f"kbatch: {p}\n")
        findings.append(Finding("storage.unreadable", Severity.ERROR, p))
    with progress_bar(total, "validate", quiet) as advance:
        for d, segs in parts:
            name = partition_name(d)
            rep = timestamp_report(segs, now_value, before_max_ms, after_max_ms, advance)
            findings += validate_findings(d, rep)
            if as_json:
                emit(out, dict(partition=name, path=d, now=now_value, before_max_ms=before_max_ms,
                                after_max_ms=after_max_ms, **rep))
                continue
            line = f"{name}: {rep['records']} records, {rep['too_old']} too old, {rep['too_new']} too new"
            if rep["unreadable"]:
                line += f", {rep['unread_bytes']} bytes NOT READ ({len(rep['unreadable'])} place(s), below)"
            if rep["no_timestamp"]:
                line += f", {rep['no_timestamp']} without timestamp"
            if rep["first_too_old_offset"] is not None:
                line += (f"; first too old: offset {rep['first_too_old_offset']} "
                         f"({format_time(rep['first_too_old_timestamp'])})")
            if rep["first_too_new_offset"] is not None:
                line += (f"; first too new: offset {rep['first_too_new_offset']} "
                         f"({format_time(rep['first_too_new_timestamp'])})")
            out.write(line + "\n")
            if rep["message"]:
                out.write(f"  {rep['message']}\n")
            for u in rep["unreadable"]:
                where = f" at byte {u['position']}" if u["position"] is not None else ""
                out.write(f"  {u['file']}{where}: cannot read: {u['message']}\n")
    if not as_json and not quiet:
        lo, hi = _sat(now_value - before_max_ms), _sat(now_value + after_max_ms)
        out.write(f"allowed: [{lo}, {hi}] = [{format_time(lo)}, {format_time(hi)}], now {now_value} "
                  f"({format_time(now_value)})\n")
    return EXIT_PROBLEMS if findings else EXIT_OK


def validate_findings(directory: str, rep: TimestampReport) -> "list[Finding]":
    """A partition's timestamp report as findings (the one model of verify, validate and audit):
    one error per unreadable place, one for the records too old and one for those too new (at the
    first offending offset, with the count)."""
    from ..log.findings import Finding, Severity
    from ..log.layout import describe

    part = describe(directory, [])
    out = [Finding("storage.unreadable", Severity.ERROR, u["message"], part.topic, part.partition, segment=u["file"],
                   position=u["position"], details={"bytes": u.get("bytes")}) for u in rep["unreadable"]]
    for side, check, bound in (("old", "timestamp.too-old", "lower_bound"), ("new", "timestamp.future", "upper_bound")):
        n = rep["too_old"] if side == "old" else rep["too_new"]
        if n:
            first = rep["first_too_old_offset"] if side == "old" else rep["first_too_new_offset"]
            out.append(Finding(check, Severity.ERROR, f"{n} record(s) too {side} (KIP-937)", part.topic,
                               part.partition, first, first, details={"records": n, bound: rep[bound]}))  # type: ignore[literal-required]
    return out


def _sat(v: int) -> int:
    return max(W.INT64_MIN, min(W.INT64_MAX, v))


def register(app: "typer.Typer") -> None:
    from typing import Annotated, Optional

    import typer

    quiet_flag, json_flag = flags()

    @app.command(help="KIP-937 timestamp report: per partition, records older than now - before-max-ms or newer "
                      "than now + after-max-ms, and the first offending offsets. Exit 1 if any, or if any byte "
                      "could not be read (bad CRC, torn or undecodable batch; each is named).")
    def validate(path: Annotated[str, typer.Argument(help="Segment .log file, partition directory or log directory.")],
                 before_max_ms: Annotated[int, typer.Option("--before-max-ms", min=0, help="message.timestamp.before.max.ms")] = W.INT64_MAX,
                 after_max_ms: Annotated[int, typer.Option("--after-max-ms", min=0, help="message.timestamp.after.max.ms")] = W.INT64_MAX,
                 now: Annotated[Optional[str], typer.Option("--now", help="The validator's clock (epoch ms or ISO-8601); default: now.")] = None,
                 as_json: Annotated[bool, json_flag] = False, quiet: Annotated[bool, quiet_flag] = False) -> None:
        run(cmd_validate, path, before_max_ms=before_max_ms, after_max_ms=after_max_ms, now=time_value(now),
            as_json=as_json, quiet=quiet)
