"""`kbatch verify`: every batch, record and index entry of a segment, partition or log directory checked.

Segments are read with pread (never mmap): a file truncated while it is read, or a FIFO,
directory or dangling symlink named like a segment, is a problem (exit 1), not a crash or a hang.
"""

import os
import sys
from collections.abc import Callable, Iterable
from typing import IO, TYPE_CHECKING, Any

from ..errors import KBatchError
from ..log.findings import Finding, Severity
from ._common import (EXIT_OK, EXIT_PROBLEMS, UsageProblem, emit, flags, progress_bar, resolve_segments, run,
                      total_size)

if TYPE_CHECKING:
    from ..record.batch import Batch
    import typer

    from .._typing import PathLike
    from ..log.index import AbortedTxn, OffsetIndex, TimeIndex
    from ..log.index_rules import SegmentBatches
    from ..log.segment import SegmentFiles


class _Verifier:
    """Reads every batch and record of a set of segments and collects problems with the file and
    byte position of each."""

    def __init__(self, advance: Callable[[int], object], deep: bool = True) -> None:
        self.advance = advance
        self.deep = deep
        # what was found, in the one finding model of verify, validate and audit (kbatch.log.findings):
        # problems are errors ("verify.<kind>"), index entries in forms older brokers write (valid)
        # are info notes ("verify.index-form")
        self.findings: list[Finding] = []
        self.segments = 0
        self.batches = 0
        self.records = 0
        self.bytes = 0

    def problem(self, file: "PathLike", position: int | None, message: str, **extra: str) -> None:
        kind = extra.get("kind")
        self.findings.append(Finding(f"verify.{kind}" if kind else "verify", Severity.ERROR, message,
                                     segment=os.fspath(file), position=position, details=dict(extra)))

    def note(self, file: "PathLike", position: int | None, message: str) -> None:
        self.findings.append(Finding("verify.index-form", Severity.INFO, message, segment=os.fspath(file),
                                     position=position))

    @property
    def problems(self) -> list[dict[str, Any]]:
        """The error findings as verify's --json lines have always said them: file, position,
        message and kind."""
        return [_verify_json(f) for f in self.findings if f.severity == Severity.ERROR]

    @property
    def notes(self) -> list[dict[str, Any]]:
        return [_verify_json(f) for f in self.findings if f.severity == Severity.INFO]

    def partition(self, directory: str, segments: "Iterable[SegmentFiles]") -> None:
        """segments: kbatch SegmentFiles (any layout, local or remote), by base offset."""
        from .. import _fs

        from ..log.producer_state import OngoingTxns

        prev_last: int | None = None  # last offset of the previous segment
        prev_file = ""
        # open transactions, for the .txnindex each segment should hold (None once bytes could not be
        # read); a log whose start was trimmed starts from the first segment's producer snapshot, and
        # without one only which markers are listed is checked (first offsets and LSOs are not known)
        self.ongoing: OngoingTxns | None = OngoingTxns()
        self.txn_exact = True
        self.commits: set[tuple[int, int]] = set()  # (producer id, offset) of the segment's COMMIT markers
        first = True
        for files in segments:
            seg = files.path(".log")
            base = files.base_offset
            if first and base is not None and base > 0:
                from ..log.producer_state import ongoing_at

                seeded = ongoing_at(directory, base) if os.path.isdir(directory) else None
                self.ongoing, self.txn_exact = (seeded, True) if seeded is not None else (OngoingTxns(), False)
            first = False
            if base is None:
                self.problem(seg, None, f"{seg}: the file name does not start with a segment base offset (20 digits)")
                continue
            if prev_last is not None and base <= prev_last:
                self.problem(seg, 0, f"segment base offset {base} is not above the last offset {prev_last} "
                                     f"of the previous segment {_fs.basename(prev_file)} (segments overlap)")
            last = self.segment(files, base, prev_last)
            if last is not None:
                prev_last, prev_file = last, seg

    def segment(self, files: "SegmentFiles", base: int, prev_last: int | None) -> int | None:
        """Check one .log file and its indexes; returns its last offset (None when empty)."""
        from .dump_log import file_batches_until_error
        from ..errors import StorageError
        from ..log.index_rules import SegmentBatches

        self.segments += 1
        self.commits = set()
        last_offset: int | None = None
        path = files.path(".log")
        try:
            f = files.open_log()
        except StorageError as e:  # a FIFO, directory or dangling symlink named like a segment
            self.problem(path, None, f"cannot read: {e.reason}", kind="file")
            return None
        except OSError as e:
            raise UsageProblem(f"{path}: {e.strerror or e}") from None
        try:
            size = f.size_in_bytes
            errors: list[KBatchError] = []
            valid = 0
            batch: "Batch | None"
            aborted: list[AbortedTxn] = []
            try:
                for batch in file_batches_until_error(f.read, size, errors):
                    self.batches += 1
                    pos = batch.position
                    where = f"batch at byte {pos} (base offset {batch.base_offset})"
                    crc_ok = batch.is_valid()
                    if not crc_ok:
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
                        self._records(path, batch, where, crc_ok)
                    self._follow(batch, aborted)
                    last_offset = batch.last_offset if last_offset is None else max(last_offset, batch.last_offset)
                    valid = pos + batch.size_in_bytes
                    self.bytes += batch.size_in_bytes
                    self.advance(batch.size_in_bytes)
                batch = None
            except StorageError as e:  # the file changed under us
                self.problem(path, None, f"cannot read: {e.reason}", kind="file")
                return last_offset
            bad = errors[0] if errors else None
            if bad is not None:
                self.problem(path, bad.batch_position, f"corrupt batch: {bad}; the {size - bad.batch_position} bytes "
                                                       f"from byte {bad.batch_position} could not be read",
                             kind="framing")
            elif valid < size:
                self.problem(path, valid, f"{size - valid} bytes at the end of the file are not a complete batch "
                                          f"({f.incomplete(valid, 'the segment')})", kind="truncated")
                self.advance(size - valid)
            if bad is not None or valid < size:
                self.ongoing = None  # the transactions of what follows are not known
            elif self.ongoing is not None:
                self._txn_index(files, aborted)
            self._indexes(files, base, SegmentBatches(f))
        finally:
            f.close()
        return last_offset

    def _follow(self, batch: "Batch", aborted: "list[AbortedTxn]") -> None:
        from .. import _wire as W
        from ..log.producer_state import marker_type

        if self.ongoing is None or batch.magic < 2 or not batch.is_transactional:
            return
        try:
            kind = marker_type(batch)
        except KBatchError:
            self.ongoing = None  # reported by _records
            return
        if kind == W.ControlRecordType.COMMIT:
            self.commits.add((batch.producer_id, batch.base_offset))
        entry = self.ongoing.on_batch(batch.producer_id, batch.base_offset, True, batch.is_control, kind)
        if entry is not None:
            aborted.append(entry)

    def _txn_index(self, files: "SegmentFiles", want: "list[AbortedTxn]") -> None:
        """The segment's .txnindex against its markers (kbatch.log.index_rules.check_txn_index)."""
        from ..errors import StorageError
        from ..log.index import TransactionIndex
        from ..log.index_rules import check_txn_index

        ipath = files.path(".txnindex")
        commits, self.commits = self.commits, set()
        try:
            have = TransactionIndex.parse(files.read_index(".txnindex"), ipath)
        except FileNotFoundError:
            have = None
        except StorageError as e:
            self.problem(ipath, None, f"cannot read: {e.reason}", kind="index")
            return
        except KBatchError as e:
            self.problem(ipath, e.position, f"cannot read: {e}", kind="index")
            return
        for x in check_txn_index(have, want, commits, self.txn_exact):
            self.problem(ipath, x.position, x.message, kind="index")

    def _records(self, path: str, batch: "Batch", where: str, crc_ok: bool) -> None:
        try:
            records = batch.records()
        except KBatchError as e:
            self.problem(path, batch.position, f"cannot decode the records of {where}: {e}", kind="records")
            return
        n = len(records)
        if crc_ok and not batch.is_control:
            # the records a consumer gets, counted as stats and validate count them (CRC holding,
            # control records left out); every batch's records are checked all the same
            self.records += n
        if batch.magic >= 2:
            span = batch.last_offset - batch.base_offset + 1
            if n > span:
                self.problem(path, batch.position, f"{where} holds {n} records but its offsets span only {span}",
                             kind="count")
        prev: int | None = None
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
            from ..record.control import parse_control_record
            try:
                for r in records:
                    parse_control_record(r)
            except KBatchError as e:
                self.problem(path, batch.position, f"bad control record in {where}: {e}", kind="records")

    def _indexes(self, files: "SegmentFiles", base: int, sb: "SegmentBatches") -> None:
        """Index entries against the log by the rules of kbatch.log.index_rules: every form a broker of
        any version writes is accepted (notes name the older ones), damage is a problem. A
        preallocated zero-filled tail and a missing file (a broker rebuilds it) are not errors."""
        from ..log.index import OffsetIndex, TimeIndex
        from ..log.index_rules import check_offset_index, check_time_index

        rules: tuple[tuple[str, type[OffsetIndex] | type[TimeIndex], Callable[..., list[Any]]], ...] = (
            (".index", OffsetIndex, check_offset_index), (".timeindex", TimeIndex, check_time_index))
        for suffix, cls, check in rules:
            ipath = files.path(suffix)
            index = self._open_index(files, cls, suffix, base)
            if index is None:
                continue
            try:
                if self._sanity(ipath, index):
                    for f in check(ipath, list(index), sb):
                        if f.problem:
                            self.problem(ipath, f.position, f.message, kind="index")
                        else:
                            self.note(ipath, f.position, f.message)
            finally:
                index.close()

    def _open_index(self, files: "SegmentFiles", cls: "type[OffsetIndex] | type[TimeIndex]", suffix: str,
                    base: int) -> "OffsetIndex | TimeIndex | None":
        """The index file, or None when it is missing (a broker rebuilds it); one that cannot be
        read (not a regular file, a dangling symlink) is a problem."""
        from ..errors import StorageError

        path = files.path(suffix)
        try:
            return cls(base, files.read_index(suffix), path=path)
        except StorageError as e:
            self.problem(path, None, f"cannot read: {e.reason}", kind="index")
        except FileNotFoundError:
            pass
        return None

    def _sanity(self, path: str, index: "OffsetIndex | TimeIndex") -> bool:
        try:
            index.sanity_check()
        except KBatchError as e:
            self.problem(path, e.position, f"sanity check failed: {e}", kind="index")
            return False
        return True


def _verify_json(f: Finding) -> dict[str, Any]:
    return dict(file=f.segment, position=f.position, message=f.message, **f.details)


def cmd_verify(path: "PathLike", *, quiet: bool = False, as_json: bool = False, out: IO[str] | None = None,
               err: IO[str] | None = None) -> int:
    out = out or sys.stdout
    left_out: list[str] = []
    parts = resolve_segments(path, left_out)
    total = total_size(parts)
    with progress_bar(total, "verify", quiet) as advance:
        v = _Verifier(advance)
        for text in left_out:  # tiered copies that could not be read at all
            v.problem(text.split(": ", 1)[0], None, text.split(": ", 1)[-1], kind="file")
        for d, segs in parts:
            v.partition(d, segs)
    problems, notes = v.problems, v.notes
    summary = dict(partitions=len(parts), segments=v.segments, batches=v.batches, records=v.records,
                   bytes=v.bytes, problems=len(problems), notes=len(notes))
    if as_json:
        for p in problems:
            emit(out, dict(type="problem", **p))
        for n in notes:
            emit(out, dict(type="note", **n))
        emit(out, dict(type="summary", ok=not problems, **summary))
    else:
        for p in problems:
            where = f" at byte {p['position']}" if p["position"] is not None else ""
            out.write(f"{p['file']}{where}: {p['message']}\n")
        if notes and not quiet:
            files = sorted({n["file"] for n in notes})
            out.write(f"note: {len(notes)} index entr{'ies' if len(notes) != 1 else 'y'} in {len(files)} file(s) "
                      f"are in a form older brokers write, valid ({notes[0]['file']}: {notes[0]['message']})\n")
        if not quiet or problems:
            verdict = "OK" if not problems else f"{len(problems)} problem{'s' * (len(problems) != 1)} found"
            out.write(f"{verdict}: {summary['partitions']} partition(s), {v.segments} segment(s), {v.batches} "
                      f"batches, {v.records} records, {v.bytes} bytes checked\n")
    return EXIT_PROBLEMS if problems else EXIT_OK


def register(app: "typer.Typer") -> None:
    from typing import Annotated

    import typer

    quiet_flag, json_flag = flags()

    @app.command(help="Check CRCs, offsets, record counts and indexes of a segment, a partition directory or a "
                      "whole log directory. Exit 1 and name file and byte position for anything wrong.")
    def verify(path: Annotated[str, typer.Argument(help="Segment .log file, partition directory or log directory.")],
               as_json: Annotated[bool, json_flag] = False, quiet: Annotated[bool, quiet_flag] = False) -> None:
        run(cmd_verify, path, quiet=quiet, as_json=as_json)
