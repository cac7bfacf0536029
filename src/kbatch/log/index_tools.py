"""Index tools over a `.log` file or a partition directory (kafka-dump-log's index checks, a
broker's recovery rebuild): `rebuild_indexes` / `rebuild_segment_indexes` write `.index`,
`.timeindex` and `.txnindex` as a broker's recovery writes them; `verify_indexes` checks the
files there against their `.log` (kbatch.log.index_rules) and changes nothing."""
from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from .. import _wire as W
from ..errors import CorruptRecordError, InvalidRequestError, KBatchError, StorageError
from ..record.file_records import FileRecords
from . import files as _files
from . import producer_state as _txns
from .index import AbortedTxn, OffsetIndex, TimeIndex
from .index_build import build_indexes
from .partition_files import segment_log_paths

if TYPE_CHECKING:
    from .._typing import PathLike


def read_or_none(path: PathLike) -> bytes | None:
    """A file's bytes, None when it is missing (or not a regular file)."""
    try:
        return _files.read_whole(path)
    except (FileNotFoundError, StorageError):
        return None


def _base_of(path: str) -> int:
    name = os.path.basename(path)
    parsed = _files.parse_segment_file_name(name)
    if parsed is None or parsed[1] != _files.LOG_SUFFIX:
        raise InvalidRequestError("Not a segment file name", expected="<20-digit base offset>.log", found=name)
    return parsed[0]


def rebuild_segment_indexes(log_path: PathLike,
                            index_interval_bytes: int = W.DEFAULT_INDEX_INTERVAL_BYTES) -> tuple[str, int, int]:
    """Write one .log's .index and .timeindex as a broker's recovery writes them, trimmed, each
    atomically (its .txnindex, which needs the segments before it, is rebuild_indexes' part). The
    caller holds the directory's lock (or owns the directory, as compaction's scratch space). A
    segment that cannot be read in full raises CorruptRecordError and nothing changes.
    Returns (log path, index entries, time entries)."""
    path = os.fspath(log_path)
    return _rebuild([path], {path}, index_interval_bytes, txn_index=False)[0]


def _rebuild(paths: list[str], targets: set[str], index_interval_bytes: int,
             txn_index: bool = True) -> list[tuple[str, int, int]]:
    """rebuild_segment_indexes for the `targets` among `paths` (a directory's segments in order):
    every target is read in full first, and only when each one is complete and valid are files
    written. The .txnindex entries follow the open transactions from the first of `paths` on."""
    ongoing = (_txns.ongoing_at(os.path.dirname(paths[0]) or ".", _base_of(paths[0])) if paths else None) \
        or _txns.OngoingTxns()
    plans: list[tuple[str, bytes, bytes, list[AbortedTxn]]] = []
    for path in paths:
        records = FileRecords(path)
        try:
            if path in targets:
                built = build_indexes(records, _base_of(path), index_interval_bytes, stop_on_error=True)
                refusal = (f"; {path} cannot be read in full, and its indexes may be the only way to batches "
                           f"after the damage, so no index file of this partition was changed (see `kbatch verify`; "
                           f"repair the segment, or let a writer's recovery truncate a torn tail of the last one)")
                if built.error is not None:
                    raise built.error.update(reason=built.error.reason + refusal)
                if built.valid_bytes < records.size_in_bytes:
                    why = (f"{records.size_in_bytes - built.valid_bytes} bytes from byte {built.valid_bytes} are not a "
                           f"complete batch ({records.incomplete(built.valid_bytes, 'the segment')})")
                    raise CorruptRecordError(why + refusal, position=built.valid_bytes,
                                             expected="complete, valid batches to the end of the segment",
                                             found=f"{records.size_in_bytes - built.valid_bytes} bytes that are not")
            entries = _txns.follow_windows(records.scan(), ongoing) if txn_index else []
            if path in targets:
                plans.append((path, built.index, built.timeindex, entries))
        finally:
            records.close()
    out = []
    for path, index, timeindex, entries in plans:
        stem = path[:-len(_files.LOG_SUFFIX)]
        _files.atomic_write(stem + ".index", index)
        _files.atomic_write(stem + ".timeindex", timeindex)
        have = read_or_none(stem + ".txnindex") if txn_index else None
        want = _txns.txn_index_bytes(entries)
        if txn_index and have != want and (entries or have is not None):
            _files.atomic_write(stem + ".txnindex", want)
        out.append((path, len(index) // W.OFFSET_INDEX_ENTRY_SIZE, len(timeindex) // W.TIME_INDEX_ENTRY_SIZE))
    return out


def rebuild_indexes(log_path: PathLike,
                    index_interval_bytes: int = W.DEFAULT_INDEX_INTERVAL_BYTES) -> list[tuple[str, int, int]]:
    """Write .index, .timeindex and .txnindex for a .log file (or every segment of a directory) as a
    broker's recovery writes them, trimmed, atomically (each file keeps its mode). Holds the
    directory's `.lock` while it writes: a directory another writer (or a running broker) holds is
    refused with LogDirectoryLockedError. A segment that cannot be read in full (a corrupt batch, a
    bad length field, a torn tail) raises CorruptRecordError before any file changes.
    Returns [(log path, index entries, time entries)]."""
    p = os.fspath(log_path)
    directory = p if os.path.isdir(p) else (os.path.dirname(p) or ".")
    with _files.DirLock.acquire(directory, "rebuild indexes"):
        if os.path.isdir(p):
            paths = segment_log_paths(p)
            return _rebuild(paths, set(paths), index_interval_bytes)
        base = _base_of(p)
        before = [q for q in segment_log_paths(directory) if _base_of(q) < base]
        return _rebuild([*before, p], {p}, index_interval_bytes)


MISSING_INDEX = "file is missing (a broker rebuilds it from the .log when it loads the segment)"


@dataclass
class SegmentIndexReport:
    """verify_indexes findings for one segment (kafka-dump-log --index-sanity-check / --verify-index-only).

    Problems (they make `ok` false): failed sanity checks, and entries that kbatch.log.index_rules
    calls damage. Information: `notes` (entries in forms older brokers write, valid) and
    `matches_rebuild` (whether the files equal what rebuild_indexes writes; a broker's own index
    often differs, by its spacing after restarts, its close-time entry or an older form)."""

    log_path: str
    sanity_errors: list[tuple[str, str]] = field(default_factory=list)          # (file, message)
    index_mismatches: list[tuple[int, int, str]] = field(default_factory=list)  # (index offset, position, message)
    time_mismatches: list[tuple[int, int, str]] = field(default_factory=list)   # (index timestamp, offset, message)
    notes: list[tuple[str, str]] = field(default_factory=list)                  # (file, message)
    matches_rebuild: bool = True
    rebuild_difference: str | None = None
    truncated_bytes: int = 0

    @property
    def ok(self) -> bool:
        return not (self.sanity_errors or self.index_mismatches or self.time_mismatches)

    def lines(self) -> list[str]:
        out: list[str] = []
        stem = self.log_path[:-len(_files.LOG_SUFFIX)]
        for f, msg in self.sanity_errors:
            out.append(f"{f} has error: {msg}")
        skipped = {f for f, _ in self.sanity_errors} | {f for f, m in self.notes if m.startswith(MISSING_INDEX)}
        for suffix in (".index", ".timeindex"):
            if stem + suffix not in skipped:
                out.append(f"{stem + suffix} passed sanity check.")
        for _off, _pos, msg in self.index_mismatches:
            out.append(f"Mismatches in :{stem}.index\n  {msg}")
        for _ts, _off, msg in self.time_mismatches:
            out.append(f"Found timestamp mismatch in :{stem}.timeindex\n  {msg}")
        for f, msg in self.notes:
            out.append(f"note: {f}: {msg}")
        if not self.matches_rebuild:
            out.append(f"note: indexes of {self.log_path} differ from a rebuild (information, not a problem): "
                       f"{self.rebuild_difference}")
        if self.truncated_bytes:
            out.append(f"Found {self.truncated_bytes} invalid bytes at the end of {os.path.basename(self.log_path)}")
        return out


@dataclass
class IndexVerification:
    segments: list[SegmentIndexReport]

    @property
    def ok(self) -> bool:
        return all(s.ok for s in self.segments)

    @property
    def matches_rebuild(self) -> bool:
        return all(s.matches_rebuild for s in self.segments)

    def lines(self) -> list[str]:
        return [line for s in self.segments for line in s.lines()]

    def __str__(self) -> str:
        return "\n".join(self.lines())


def verify_indexes(log_path: PathLike, index_interval_bytes: int = W.DEFAULT_INDEX_INTERVAL_BYTES) -> IndexVerification:
    """Check existing .index/.timeindex files against their .log: Kafka's sanity checks and every
    entry by the rules a broker of any version writes by (kbatch.log.index_rules); whether they equal
    what rebuild_indexes would write with `index_interval_bytes` is reported as information.
    Returns an IndexVerification; nothing is modified."""
    from .index_rules import SegmentBatches, check_offset_index, check_time_index

    reports: list[SegmentIndexReport] = []
    for path in segment_log_paths(log_path):
        base = _base_of(path)
        stem = path[:-len(_files.LOG_SUFFIX)]
        rep = SegmentIndexReport(path)
        records = FileRecords(path)
        try:
            built = build_indexes(records, base, index_interval_bytes, stop_on_error=True)
            rep.truncated_bytes = records.size_in_bytes - built.valid_bytes
            sb = SegmentBatches(records)
            found: dict[str, OffsetIndex | TimeIndex] = {}
            index_kinds: tuple[tuple[type[OffsetIndex] | type[TimeIndex], str], ...] = (
                (OffsetIndex, ".index"), (TimeIndex, ".timeindex"))
            for cls, suffix in index_kinds:
                try:
                    idx = cls.open(stem + suffix, base)
                except FileNotFoundError:  # a broker rebuilds a missing index when it loads the segment
                    rep.notes.append((stem + suffix, MISSING_INDEX))
                    continue
                except StorageError as e:  # not a regular file
                    rep.sanity_errors.append((stem + suffix, str(e)))
                    continue
                try:
                    idx.sanity_check()
                except KBatchError as e:
                    rep.sanity_errors.append((stem + suffix, str(e)))
                found[suffix] = idx
            checks = ((".index", check_offset_index, rep.index_mismatches),
                      (".timeindex", check_time_index, rep.time_mismatches))
            for suffix, check, sink in checks:
                if suffix in found:
                    for f in check(stem + suffix, list(found[suffix]), sb):
                        if f.problem:
                            sink.append((*f.entry, f.message))
                        else:
                            rep.notes.append((f.file, f.message))
            for suffix, want in ((".index", built.index), (".timeindex", built.timeindex)):
                found_idx = found.get(suffix)
                have = None if found_idx is None else found_idx.raw()
                if have != want:
                    rep.matches_rebuild = False
                    rep.rebuild_difference = _describe_difference(suffix, have, want)
                    break
            for idx in found.values():
                idx.close()
            del sb
        finally:
            records.close()
        reports.append(rep)
    return IndexVerification(reports)


def _describe_difference(suffix: str, have: bytes | None, want: bytes) -> str:
    es = W.OFFSET_INDEX_ENTRY_SIZE if suffix == ".index" else W.TIME_INDEX_ENTRY_SIZE
    if have is None:
        return f"{suffix} is missing, a rebuild has {len(want) // es} entries"
    n = min(len(have), len(want)) // es
    for i in range(n):
        if have[i * es:(i + 1) * es] != want[i * es:(i + 1) * es]:
            return f"{suffix} entry {i} differs (byte {i * es})"
    return f"{suffix} has {len(have) // es} entries, a rebuild has {len(want) // es}"


__all__ = ["rebuild_indexes", "rebuild_segment_indexes", "verify_indexes", "IndexVerification", "SegmentIndexReport",
           "MISSING_INDEX", "read_or_none"]
