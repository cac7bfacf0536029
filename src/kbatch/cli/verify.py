"""`kbatch verify`: every batch, record and index entry of a segment, partition or log directory checked."""

import contextlib
import os
import sys

from .. import _wire as W
from ..errors import KBatchError
from ._common import (EXIT_OK, EXIT_PROBLEMS, UsageProblem, emit, options, progress_bar, resolve_segments, run)


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
        from ..dump import base_offset_from_name

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
        from ..dump import MappedFile, batches_until_error
        from ..segment import MaxTimestampTracker

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
            from ..records import parse_control_record
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
        from ..dump import sibling
        from ..index import OffsetIndex, TimeIndex

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
            emit(out, dict(type="problem", **p))
        emit(out, dict(type="summary", ok=not v.problems, **summary))
    else:
        for p in v.problems:
            where = f" at byte {p['position']}" if p["position"] is not None else ""
            out.write(f"{p['file']}{where}: {p['message']}\n")
        if not quiet or v.problems:
            verdict = "OK" if not v.problems else f"{len(v.problems)} problem{'s' * (len(v.problems) != 1)} found"
            out.write(f"{verdict}: {summary['partitions']} partition(s), {v.segments} segment(s), {v.batches} "
                      f"batches, {v.records} records, {v.bytes} bytes checked\n")
    return EXIT_PROBLEMS if v.problems else EXIT_OK


def register(app) -> None:
    from typing import Annotated, List, Optional  # noqa: F401

    import typer

    Quiet, Json = options()

    @app.command(help="Check CRCs, offsets, record counts and indexes of a segment, a partition directory or a "
                      "whole log directory. Exit 1 and name file and byte position for anything wrong.")
    def verify(path: Annotated[str, typer.Argument(help="Segment .log file, partition directory or log directory.")],
               as_json: Json = False, quiet: Quiet = False):
        run(cmd_verify, path, quiet=quiet, as_json=as_json)
