"""The `kbatch` command line: dump, verify, reindex, offsets, validate, compact.

Each command is a plain function here (`cmd_dump`, `cmd_verify`, ...) that takes parsed values,
writes to the given streams and returns the exit code; typer only parses the command line
(`make_app`), and rich only draws progress bars. Exit codes (docs/cli.md):

    0  everything read and nothing wrong
    1  the command ran and found problems (corrupt batches, bad indexes, invalid timestamps)
    2  usage error, or a file/directory that cannot be read or written

typer and rich come with the `cli` extra; without them `main()` says so and exits 2.
"""

import contextlib
import datetime as _dt
import json
import os
import re
import sys
import time

from . import _wire as W
from .errors import KBatchError

EXIT_OK = 0
EXIT_PROBLEMS = 1
EXIT_USAGE = 2

# progress bars appear for work over this many bytes, on stderr, when stderr is a terminal
PROGRESS_MIN_BYTES = 4 * 1024 * 1024

_SEGMENT_NAME = re.compile(r"^\d{20}\.log$")
_INSTALL_HINT = "pip install 'kafka-kbatch[cli]'"


class UsageProblem(Exception):
    """A bad argument or an unreadable path: reported on stderr, exit code 2."""


# ------------------------------------------------------------------------------------ shared helpers
def stderr_is_terminal() -> bool:
    try:
        return sys.stderr.isatty()
    except (AttributeError, ValueError):
        return False


@contextlib.contextmanager
def progress_bar(total_bytes: int, label: str, quiet: bool = False):
    """Yield `advance(n_bytes)`; draws a rich progress bar on stderr only when the work is over
    PROGRESS_MIN_BYTES, stderr is a terminal and not --quiet. Otherwise advance does nothing."""
    if quiet or total_bytes < PROGRESS_MIN_BYTES or not stderr_is_terminal():
        yield lambda n: None
        return
    from rich.console import Console
    from rich.progress import (BarColumn, DownloadColumn, Progress, TextColumn, TimeRemainingColumn,
                               TransferSpeedColumn)

    with Progress(TextColumn("{task.description}"), BarColumn(), DownloadColumn(), TransferSpeedColumn(),
                  TimeRemainingColumn(), console=Console(stderr=True), transient=True) as bar:
        task = bar.add_task(label, total=total_bytes)
        yield lambda n: bar.advance(task, n)


def parse_time(text: str) -> int:
    """A timestamp in ms: an integer (epoch ms, negative allowed) or an ISO-8601 date/time
    ("2024-05-01T09:00:00Z", "2024-05-01T11:00:00+02:00", "2024-05-01"; no zone means UTC)."""
    s = text.strip()
    if re.fullmatch(r"[+-]?\d+", s):
        v = int(s)
        if not W.INT64_MIN <= v <= W.INT64_MAX:
            raise UsageProblem(f"timestamp {text!r} does not fit in 64 bits")
        return v
    iso = s[:-1] + "+00:00" if s.endswith(("Z", "z")) else s
    try:
        t = _dt.datetime.fromisoformat(iso)
    except ValueError:
        raise UsageProblem(f"cannot read {text!r} as a time: give epoch milliseconds (e.g. 1714554000000) "
                           f"or ISO-8601 (e.g. 2024-05-01T09:00:00Z)") from None
    if t.tzinfo is None:
        t = t.replace(tzinfo=_dt.timezone.utc)
    delta = t - _dt.datetime(1970, 1, 1, tzinfo=_dt.timezone.utc)
    return (delta.days * 86_400 + delta.seconds) * 1000 + delta.microseconds // 1000


def format_time(ms: int | None) -> str:
    """ISO-8601 UTC with milliseconds, or "-" for None; values outside datetime's range print raw."""
    if ms is None:
        return "-"
    try:
        t = _dt.datetime(1970, 1, 1, tzinfo=_dt.timezone.utc) + _dt.timedelta(milliseconds=ms)
    except OverflowError:
        return str(ms)
    return t.strftime("%Y-%m-%dT%H:%M:%S.") + f"{t.microsecond // 1000:03d}Z"


def now_ms() -> int:
    return time.time_ns() // 1_000_000


def partition_dirs(path) -> list[str]:
    """The partition directories PATH names: itself when it holds segments (or is a partition
    directory name), else its subdirectories that hold segments (a broker's log directory)."""
    path = os.fspath(path)
    if not os.path.isdir(path):
        raise UsageProblem(f"{path}: not a directory")
    names = os.listdir(path)
    if any(_SEGMENT_NAME.match(n) for n in names):
        return [path]
    subs = []
    for n in sorted(names):
        p = os.path.join(path, n)
        if os.path.isdir(p) and any(_SEGMENT_NAME.match(m) for m in os.listdir(p)):
            subs.append(p)
    if not subs:
        raise UsageProblem(f"{path}: no segments (<20 digits>.log) here or in its subdirectories")
    return subs


def segment_files(directory) -> list[str]:
    return sorted(os.path.join(directory, n) for n in os.listdir(directory) if _SEGMENT_NAME.match(n))


def resolve_segments(path) -> list[tuple[str, list[str]]]:
    """[(partition dir, [segment .log paths])] for a segment file, a partition dir or a log dir."""
    path = os.fspath(path)
    if os.path.isfile(path):
        if not path.endswith(".log"):
            raise UsageProblem(f"{path}: not a segment (.log) file")
        return [(os.path.dirname(os.path.abspath(path)), [path])]
    if not os.path.exists(path):
        raise UsageProblem(f"{path}: no such file or directory")
    return [(d, segment_files(d)) for d in partition_dirs(path)]


def _api(name: str):
    """A kbatch library name the command builds on (kbatch.Log, kbatch.compact, ...)."""
    import kbatch

    try:
        return getattr(kbatch, name)
    except (ImportError, AttributeError) as e:
        raise UsageProblem(f"this command needs kbatch.{name}, which this installation lacks ({e})") from None


def _emit(out, obj) -> None:
    out.write(json.dumps(obj, separators=(", ", ": ")) + "\n")


# ------------------------------------------------------------------------------------ dump
def cmd_dump(files, *, print_data_log=False, deep_iteration=False, index_sanity_check=False,
             verify_index_only=False, skip_record_metadata=False, max_bytes=W.INT32_MAX,
             max_message_size=5 * 1024 * 1024, as_json=False, quiet=False, out=None, err=None) -> int:
    from .dump import DumpOptions, Dumper

    out = out or sys.stdout
    err = err or sys.stderr
    if not files:
        raise UsageProblem("give at least one file to dump")
    opts = DumpOptions(print_data_log=print_data_log, deep_iteration=deep_iteration,
                       index_sanity_check=index_sanity_check, verify_index_only=verify_index_only,
                       skip_record_metadata=skip_record_metadata, max_bytes=max_bytes,
                       max_message_size=max_message_size, json=as_json)
    total = 0
    for f in files:
        if f.endswith(".log"):
            with contextlib.suppress(OSError):
                total += min(os.path.getsize(f), max_bytes)
    with progress_bar(total, "dump", quiet) as advance:
        result = Dumper(opts, out, err, advance).dump(files)
    return result.exit_code


# ------------------------------------------------------------------------------------ verify
class _Verifier:
    """Reads every batch and record of a set of segments and collects problems with the file and
    byte position of each."""

    def __init__(self, advance, deep: bool = True):
        self.advance = advance
        self.deep = deep
        self.problems: list[dict] = []
        self.segments = 0
        self.batches = 0
        self.records = 0
        self.bytes = 0

    def problem(self, file, position, message, **extra):
        self.problems.append(dict(file=os.fspath(file), position=position, message=message, **extra))

    def partition(self, directory, segments) -> None:
        from .dump import base_offset_from_name

        prev_last = None  # last offset of the previous segment
        prev_file = None
        for seg in segments:
            try:
                base = base_offset_from_name(seg)
            except ValueError as e:
                self.problem(seg, None, str(e))
                continue
            if prev_last is not None and base <= prev_last:
                self.problem(seg, 0, f"segment base offset {base} is not above the last offset {prev_last} "
                                     f"of the previous segment {os.path.basename(prev_file)} (segments overlap)")
            last = self.segment(seg, base, prev_last)
            if last is not None:
                prev_last, prev_file = last, seg

    def segment(self, path, base: int, prev_last):
        """Check one .log file and its indexes; returns its last offset (None when empty)."""
        from .dump import MappedFile, batches_until_error
        from .segment import MaxTimestampTracker

        self.segments += 1
        last_offset = None
        batch_ends = {}     # batch start position -> (base offset, last offset)
        max_ts_so_far = {}  # batch last offset -> max timestamp of the segment up to it (time index rule)
        tracker = MaxTimestampTracker()
        try:
            mf = MappedFile(path)
        except OSError as e:
            raise UsageProblem(f"{path}: {e.strerror or e}") from None
        with mf:
            data = mf.data
            size = len(data)
            valid = 0
            errors = []
            for batch in batches_until_error(data, errors):
                self.batches += 1
                pos = batch.position
                where = f"batch at byte {pos} (base offset {batch.base_offset})"
                if not batch.is_valid():
                    self.problem(path, pos, f"CRC mismatch in {where}: stored {batch.crc}, "
                                            f"computed {batch.compute_crc()}", kind="crc")
                if batch.base_offset < base:
                    self.problem(path, pos, f"{where} is below the segment's base offset {base}", kind="offsets")
                floor = last_offset if last_offset is not None else prev_last
                if floor is not None and batch.base_offset <= floor:
                    self.problem(path, pos, f"offsets go backwards or overlap: {where} follows offset {floor}",
                                 kind="offsets")
                if batch.last_offset < batch.base_offset:
                    self.problem(path, pos, f"{where} has last offset {batch.last_offset} below its base offset",
                                 kind="offsets")
                if self.deep:
                    self._records(path, batch, where)
                last_offset = batch.last_offset if last_offset is None else max(last_offset, batch.last_offset)
                batch_ends[pos] = (batch.base_offset, batch.last_offset)
                tracker.update(batch.max_timestamp, batch.last_offset, batch.magic, batch.attributes)
                max_ts_so_far[batch.last_offset] = tracker.timestamp
                valid = pos + batch.size_in_bytes
                self.bytes += batch.size_in_bytes
                self.advance(batch.size_in_bytes)
            batch = None
            for e in errors:
                self.problem(path, e.batch_position, f"corrupt batch: {e}", kind="framing")
                valid = None
            if valid is not None and valid < size:
                self.problem(path, valid, f"{size - valid} bytes at the end of the file are not a complete batch "
                                          f"(truncated or partially written tail)", kind="truncated")
                self.advance(size - valid)
        self._indexes(path, base, batch_ends, max_ts_so_far, last_offset)
        return last_offset

    def _records(self, path, batch, where) -> None:
        try:
            records = batch.records()
        except KBatchError as e:
            self.problem(path, batch.position, f"cannot decode the records of {where}: {e}", kind="records")
            return
        n = len(records)
        self.records += n
        if batch.magic >= 2:
            span = batch.last_offset - batch.base_offset + 1
            if n > span:
                self.problem(path, batch.position, f"{where} holds {n} records but its offsets span only {span}",
                             kind="count")
        prev = None
        for r in records:
            if r.offset < batch.base_offset or r.offset > batch.last_offset:
                self.problem(path, batch.position, f"record offset {r.offset} lies outside {where} "
                                                   f"({batch.base_offset}..{batch.last_offset})", kind="offsets")
                break
            if prev is not None and r.offset <= prev:
                self.problem(path, batch.position, f"record offsets go backwards in {where}: {r.offset} after {prev}",
                             kind="offsets")
                break
            prev = r.offset
        if batch.is_control:
            from .records import parse_control_record
            try:
                for r in records:
                    parse_control_record(r)
            except KBatchError as e:
                self.problem(path, batch.position, f"bad control record in {where}: {e}", kind="records")

    def _indexes(self, log_path, base, batch_ends, max_ts_so_far, last_offset) -> None:
        """Index entries must be sorted and name what the log holds: an .index entry (O, P) points to
        a batch start P holding offsets up to O or below; a .timeindex entry (T, O) names a batch's
        last offset O and the segment's max timestamp T up to it. This holds whatever
        index.interval.bytes the broker used; a preallocated zero-filled tail is not an error."""
        from .dump import sibling
        from .index import OffsetIndex, TimeIndex

        idx_path = sibling(log_path, ".index")
        if os.path.exists(idx_path):
            index = OffsetIndex.open(idx_path, base)
            try:
                self._sanity(idx_path, index)
                prev = None
                for i, (off, pos) in enumerate(index):
                    at = i * W.OFFSET_INDEX_ENTRY_SIZE
                    if prev is not None and pos <= prev[1]:
                        self.problem(idx_path, at, f"entry {i} (offset {off}, position {pos}) does not increase "
                                                   f"on entry {i - 1} (offset {prev[0]}, position {prev[1]})",
                                     kind="index")
                    be = batch_ends.get(pos)
                    if be is None:
                        self.problem(idx_path, at, f"entry {i} (offset {off}) points to position {pos}, where no "
                                                   f"batch starts", kind="index")
                    elif not be[0] <= off or (last_offset is not None and off > last_offset):
                        self.problem(idx_path, at, f"entry {i} says offset {off} is at position {pos}, but the "
                                                   f"batch there holds offsets {be[0]}..{be[1]}", kind="index")
                    prev = (off, pos)
            finally:
                index.close()
        tidx_path = sibling(log_path, ".timeindex")
        if os.path.exists(tidx_path):
            tindex = TimeIndex.open(tidx_path, base)
            try:
                self._sanity(tidx_path, tindex)
                prev = None
                for i, (ts, off) in enumerate(tindex):
                    at = i * W.TIME_INDEX_ENTRY_SIZE
                    if prev is not None and off < prev[1]:
                        self.problem(tidx_path, at, f"entry {i} (timestamp {ts}, offset {off}) goes back from "
                                                    f"entry {i - 1} (offset {prev[1]})", kind="index")
                    expect = max_ts_so_far.get(off)
                    if expect is None:
                        self.problem(tidx_path, at, f"entry {i} names offset {off}, which is not the last offset "
                                                    f"of any batch in the segment", kind="index")
                    elif expect != ts:
                        self.problem(tidx_path, at, f"entry {i} says the max timestamp up to offset {off} is "
                                                    f"{ts}, the log says {expect}", kind="index")
                    prev = (ts, off)
            finally:
                tindex.close()

    def _sanity(self, path, index) -> None:
        try:
            index.sanity_check()
        except KBatchError as e:
            self.problem(path, e.position, f"sanity check failed: {e}", kind="index")


def cmd_verify(path, *, quiet=False, as_json=False, out=None, err=None) -> int:
    out = out or sys.stdout
    parts = resolve_segments(path)
    total = 0
    for _d, segs in parts:
        for s in segs:
            with contextlib.suppress(OSError):
                total += os.path.getsize(s)
    with progress_bar(total, "verify", quiet) as advance:
        v = _Verifier(advance)
        for d, segs in parts:
            v.partition(d, segs)
    summary = dict(partitions=len(parts), segments=v.segments, batches=v.batches, records=v.records,
                   bytes=v.bytes, problems=len(v.problems))
    if as_json:
        for p in v.problems:
            _emit(out, dict(type="problem", **p))
        _emit(out, dict(type="summary", ok=not v.problems, **summary))
    else:
        for p in v.problems:
            where = f" at byte {p['position']}" if p["position"] is not None else ""
            out.write(f"{p['file']}{where}: {p['message']}\n")
        if not quiet or v.problems:
            verdict = "OK" if not v.problems else f"{len(v.problems)} problem{'s' * (len(v.problems) != 1)} found"
            out.write(f"{verdict}: {summary['partitions']} partition(s), {v.segments} segment(s), {v.batches} "
                      f"batches, {v.records} records, {v.bytes} bytes checked\n")
    return EXIT_PROBLEMS if v.problems else EXIT_OK


# ------------------------------------------------------------------------------------ reindex
def cmd_reindex(path, *, index_interval_bytes=W.DEFAULT_INDEX_INTERVAL_BYTES, quiet=False, as_json=False,
                out=None, err=None) -> int:
    out = out or sys.stdout
    parts = resolve_segments(path)
    for d, segs in parts:
        if not segs:
            continue
        _api("rebuild_indexes")(d, index_interval_bytes=index_interval_bytes)
        if as_json:
            _emit(out, dict(type="reindexed", partition=d, segments=len(segs)))
        elif not quiet:
            out.write(f"{d}: rebuilt .index and .timeindex of {len(segs)} segment(s)\n")
    return EXIT_OK


# ------------------------------------------------------------------------------------ offsets
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
        log = _api("Log").open(d)
        try:
            for label, ts in targets:
                if label == "earliest":
                    offset, found_ts = log.beginning_offset(), None
                elif label == "latest":
                    offset, found_ts = log.end_offset(), None
                else:
                    hit = log.offset_for(_api("MAX_TIMESTAMP")) if label == "max-timestamp" else \
                        log.offsets_for_times([ts])[0]
                    offset, found_ts = (None, None) if hit is None else (hit.offset, hit.timestamp)
                if as_json:
                    _emit(out, dict(partition=name, path=d, target=label if ts is None else ts, offset=offset,
                                    timestamp=found_ts))
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


# ------------------------------------------------------------------------------------ validate
def timestamp_report(segments, now: int, before_max_ms: int, after_max_ms: int, advance=lambda n: None) -> dict:
    """KIP-937 over the records of a partition's segments: how many timestamps fall outside
    [now - before_max_ms, now + after_max_ms] (saturated, DESIGN.md decision 4), and the first
    offending offsets. Records without a timestamp are skipped, as Kafka skips -1."""
    import numpy as np

    from .dump import MappedFile, batches_until_error

    check = _api("check_timestamps")
    rep = dict(records=0, no_timestamp=0, too_old=0, too_new=0, first_too_old_offset=None,
               first_too_old_timestamp=None, first_too_new_offset=None, first_too_new_timestamp=None,
               lower_bound=None, upper_bound=None, unreadable=[], message=None)
    for seg in segments:
        offsets, stamps = [], []
        with MappedFile(seg) as f:
            errors = []
            for batch in batches_until_error(f.data, errors):
                try:
                    records = batch.records()
                except KBatchError as e:
                    rep["unreadable"].append(dict(file=seg, position=batch.position, message=str(e)))
                    continue
                for r in records:
                    if r.timestamp is None:
                        rep["no_timestamp"] += 1
                    else:
                        offsets.append(r.offset)
                        stamps.append(r.timestamp)
                rep["records"] += len(records)
                advance(batch.size_in_bytes)
                records = batch = None
            for e in errors:
                rep["unreadable"].append(dict(file=seg, position=e.batch_position, message=str(e)))
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


def cmd_validate(path, *, before_max_ms=W.INT64_MAX, after_max_ms=W.INT64_MAX, now=None, as_json=False,
                 quiet=False, out=None, err=None) -> int:
    out = out or sys.stdout
    now_value = now_ms() if now is None else now
    if before_max_ms < 0 or after_max_ms < 0:
        raise UsageProblem("--before-max-ms and --after-max-ms must be >= 0")
    parts = resolve_segments(path)
    total = sum(os.path.getsize(s) for _d, segs in parts for s in segs)
    bad = 0
    with progress_bar(total, "validate", quiet) as advance:
        for d, segs in parts:
            name = os.path.basename(os.path.abspath(d))
            rep = timestamp_report(segs, now_value, before_max_ms, after_max_ms, advance)
            bad += rep["too_old"] + rep["too_new"] + len(rep["unreadable"])
            if as_json:
                _emit(out, dict(partition=name, path=d, now=now_value, before_max_ms=before_max_ms,
                                after_max_ms=after_max_ms, **rep))
                continue
            line = f"{name}: {rep['records']} records, {rep['too_old']} too old, {rep['too_new']} too new"
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
                out.write(f"  {u['file']} at byte {u['position']}: cannot read: {u['message']}\n")
    if not as_json and not quiet:
        lo, hi = _sat(now_value - before_max_ms), _sat(now_value + after_max_ms)
        out.write(f"allowed: [{lo}, {hi}] = [{format_time(lo)}, {format_time(hi)}], now {now_value} "
                  f"({format_time(now_value)})\n")
    return EXIT_PROBLEMS if bad else EXIT_OK


def _sat(v: int) -> int:
    return max(W.INT64_MIN, min(W.INT64_MAX, v))


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


# ------------------------------------------------------------------------------------ compact
def cmd_compact(path, *, now=None, delete_retention_ms=86_400_000, as_json=False, quiet=False,
                out=None, err=None) -> int:
    out = out or sys.stdout
    now_value = now_ms() if now is None else now
    for d in partition_dirs(path):
        name = os.path.basename(os.path.abspath(d))
        stats = _api("compact")(d, now_ms=now_value, delete_retention_ms=delete_retention_ms)
        rep = _report_dict(stats)
        if as_json:
            _emit(out, dict(partition=name, path=d, now=now_value, delete_retention_ms=delete_retention_ms, **rep))
        elif not quiet:
            out.write(f"{name}: {rep.get('segments_cleaned', 0)} segment(s) cleaned, "
                      f"{rep.get('records_read', 0)} records read, {rep.get('records_written', 0)} kept, "
                      f"{rep.get('bytes_read', 0)} -> {rep.get('bytes_written', 0)} bytes, "
                      f"{rep.get('tombstones_removed', 0)} tombstones removed\n")
    return EXIT_OK


# ------------------------------------------------------------------------------------ typer app
def make_app():
    """The typer application (imports typer; see main() for what happens without it)."""
    from typing import Annotated, List, Optional

    import rich  # noqa: F401  (progress bars; part of the cli extra)
    import typer

    app = typer.Typer(name="kbatch", add_completion=False, no_args_is_help=True, pretty_exceptions_enable=False,
                      help="Inspect, check and repair Apache Kafka log segments. "
                           "Exit codes: 0 ok, 1 problems found, 2 usage or I/O error.",
                      context_settings={"help_option_names": ["-h", "--help"]})

    def run(fn, *args, **kwargs):
        try:
            code = fn(*args, **kwargs)
        except BrokenPipeError:  # `kbatch dump ... | head`: stop quietly
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, sys.stdout.fileno())
            raise typer.Exit(EXIT_PROBLEMS)
        except UsageProblem as e:
            typer.echo(f"kbatch: {e}", err=True)
            raise typer.Exit(EXIT_USAGE)
        except OSError as e:
            typer.echo(f"kbatch: {e.filename + ': ' if e.filename else ''}{e.strerror or e}", err=True)
            raise typer.Exit(EXIT_USAGE)
        except KBatchError as e:
            typer.echo(f"kbatch: {e}", err=True)
            raise typer.Exit(EXIT_PROBLEMS)
        raise typer.Exit(code)

    def time_value(text: Optional[str]) -> Optional[int]:
        if text is None:
            return None
        try:
            return parse_time(text)
        except UsageProblem as e:
            raise typer.BadParameter(str(e)) from None

    Quiet = Annotated[bool, typer.Option("--quiet", "-q", help="No progress bars and no summary when all is well.")]
    Json = Annotated[bool, typer.Option("--json", help="One JSON object per line.")]

    @app.command(help="Print .log, .index, .timeindex and .txnindex files as kafka-dump-log --files does.")
    def dump(
        files: Annotated[Optional[List[str]], typer.Argument(help="Files to dump.", show_default=False)] = None,
        files_csv: Annotated[Optional[str], typer.Option("--files", help="Comma-separated files (kafka-dump-log style).")] = None,
        print_data_log: Annotated[bool, typer.Option("--print-data-log", help="Print keys and values (implies --deep-iteration).")] = False,
        deep_iteration: Annotated[bool, typer.Option("--deep-iteration", help="Print every record, not only batches.")] = False,
        index_sanity_check: Annotated[bool, typer.Option("--index-sanity-check", help="Only run the broker's startup sanity check on index files.")] = False,
        verify_index_only: Annotated[bool, typer.Option("--verify-index-only", help="Check index entries against the log without printing them.")] = False,
        skip_record_metadata: Annotated[bool, typer.Option("--skip-record-metadata", help="Leave out record metadata in deep iteration.")] = False,
        max_bytes: Annotated[int, typer.Option("--max-bytes", help="Read at most this many bytes of each .log file.")] = W.INT32_MAX,
        max_message_size: Annotated[int, typer.Option("--max-message-size", help="Largest batch read when checking .index entries.")] = 5 * 1024 * 1024,
        as_json: Json = False,
        quiet: Quiet = False,
    ):
        names = list(files or [])
        if files_csv:
            names += [f.strip() for f in files_csv.split(",") if f.strip()]
        run(cmd_dump, names, print_data_log=print_data_log, deep_iteration=deep_iteration,
            index_sanity_check=index_sanity_check, verify_index_only=verify_index_only,
            skip_record_metadata=skip_record_metadata, max_bytes=max_bytes, max_message_size=max_message_size,
            as_json=as_json, quiet=quiet)

    @app.command(help="Check CRCs, offsets, record counts and indexes of a segment, a partition directory or a "
                      "whole log directory. Exit 1 and name file and byte position for anything wrong.")
    def verify(path: Annotated[str, typer.Argument(help="Segment .log file, partition directory or log directory.")],
               as_json: Json = False, quiet: Quiet = False):
        run(cmd_verify, path, quiet=quiet, as_json=as_json)

    @app.command(help="Rebuild the .index and .timeindex files of a segment's partition, a partition or a log "
                      "directory (each file replaced atomically).")
    def reindex(path: Annotated[str, typer.Argument(help="Segment .log file, partition directory or log directory.")],
                index_interval_bytes: Annotated[int, typer.Option("--index-interval-bytes", help="Bytes between index entries (index.interval.bytes).")] = W.DEFAULT_INDEX_INTERVAL_BYTES,
                as_json: Json = False, quiet: Quiet = False):
        run(cmd_reindex, path, index_interval_bytes=index_interval_bytes, quiet=quiet, as_json=as_json)

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

    @app.command(help="KIP-937 timestamp report: per partition, records older than now - before-max-ms or newer "
                      "than now + after-max-ms, and the first offending offsets. Exit 1 if any.")
    def validate(path: Annotated[str, typer.Argument(help="Segment .log file, partition directory or log directory.")],
                 before_max_ms: Annotated[int, typer.Option("--before-max-ms", help="message.timestamp.before.max.ms")] = W.INT64_MAX,
                 after_max_ms: Annotated[int, typer.Option("--after-max-ms", help="message.timestamp.after.max.ms")] = W.INT64_MAX,
                 now: Annotated[Optional[str], typer.Option("--now", help="The validator's clock (epoch ms or ISO-8601); default: now.")] = None,
                 as_json: Json = False, quiet: Quiet = False):
        run(cmd_validate, path, before_max_ms=before_max_ms, after_max_ms=after_max_ms, now=time_value(now),
            as_json=as_json, quiet=quiet)

    @app.command(help="Compact partition(s) as the broker's log cleaner does (KIP-87 tombstones, KIP-534 delete "
                      "horizons).")
    def compact(path: Annotated[str, typer.Argument(help="Partition directory or log directory.")],
                now: Annotated[Optional[str], typer.Option("--now", help="The cleaner's clock (epoch ms or ISO-8601); default: now.")] = None,
                delete_retention_ms: Annotated[int, typer.Option("--delete-retention-ms", help="delete.retention.ms")] = 86_400_000,
                as_json: Json = False, quiet: Quiet = False):
        run(cmd_compact, path, now=time_value(now), delete_retention_ms=delete_retention_ms, as_json=as_json,
            quiet=quiet)

    return app


def main(argv=None) -> int:
    """Console-script entry point (`kbatch = "kbatch.cli:main"`)."""
    try:
        app = make_app()
    except ImportError as e:
        missing = getattr(e, "name", None) or str(e)
        sys.stderr.write(f"kbatch: the command line needs typer and rich ({missing} is missing): {_INSTALL_HINT}\n")
        return EXIT_USAGE
    args = sys.argv[1:] if argv is None else list(argv)
    try:
        app(args=args, prog_name="kbatch")
    except SystemExit as e:
        code = e.code
        if code is None:
            return EXIT_OK
        if isinstance(code, int):
            return code
        sys.stderr.write(f"{code}\n")
        return EXIT_USAGE
    return EXIT_OK


if __name__ == "__main__":
    sys.exit(main())
