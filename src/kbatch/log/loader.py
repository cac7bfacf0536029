"""What a writer does to a partition directory before it writes (Kafka's LogLoader, the file part):
finish or undo an interrupted compaction, finish an interrupted truncation, and remove what
interrupted writes left behind.

Only a writer holding the directory's `.lock` calls this (Log opened for writing, compact,
rebuild_indexes), so nothing removed here is still being written. Segment recovery itself (CRC
checks, truncation, index rebuilds) is in `Log._recover`; which segments it covers is decided by
`checkpoints.RecoveryCheckpoint`.
"""
from __future__ import annotations

import logging
import os
import shutil
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, NamedTuple

from . import files as _files
from .. import _wire as W
from ..errors import CorruptCheckpointError

if TYPE_CHECKING:
    from .._typing import PathLike
    from .leader_epoch import LeaderEpochFileCache
    from ..record.file_records import FileRecords

logger = logging.getLogger("kbatch.log")

SCRATCH_PREFIX = ".kbatch-cleaner-"   # compaction's scratch directories
# written (atomically) once every `.cleaned` file of a compaction is complete: from then on the
# compaction is committed, and a crash is finished rather than undone
COMMIT_MARKER = ".kbatch-compaction-commit"
_COMMIT_VERSION = 1
CLEANED = ".cleaned"
SWAP = ".swap"
DELETED = ".deleted"
# compaction replaces these with the .log (.txnindex: when the input segment had one)
SWAPPED_SUFFIXES = (_files.INDEX_SUFFIX, _files.TIME_INDEX_SUFFIX, _files.TXN_INDEX_SUFFIX)


def _unlink(path: str) -> None:
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass


def write_commit_marker(log_dir: PathLike, groups: dict[int, list[int]]) -> None:
    """The commit point of a compaction: COMMIT_MARKER, written atomically, naming each output
    segment and the input segments it replaces (the first is its own base offset: Kafka's cleaner
    names a group's segment after the group's first segment)."""
    lines = [f"kbatch-compaction {_COMMIT_VERSION}"]
    for base, members in sorted(groups.items()):
        assert members and members[0] == base, (base, members)
        lines.append(" ".join(["group", *map(str, members)]))
    _files.atomic_write(os.path.join(os.fspath(log_dir), COMMIT_MARKER), ("\n".join(lines) + "\n").encode("ascii"))


def read_commit_marker(log_dir: PathLike) -> dict[int, list[int]] | None:
    """The groups COMMIT_MARKER names (output base -> the input bases it replaces, its own first),
    {} for an empty marker (one to one, as kbatch wrote it before segments were grouped), None when
    there is no marker. A marker that cannot be parsed is an error: guessing could delete a segment
    the swap does not replace."""
    path = os.path.join(os.fspath(log_dir), COMMIT_MARKER)
    try:
        data = _files.read_whole(path)
    except FileNotFoundError:
        return None
    lines = data.decode("ascii", "replace").splitlines()
    if not lines:
        return {}
    groups: dict[int, list[int]] = {}
    try:
        if lines[0] != f"kbatch-compaction {_COMMIT_VERSION}":
            raise ValueError
        for line in lines[1:]:
            word, *bases = line.split()
            members = [int(b) for b in bases]
            if word != "group" or not members or members != sorted(set(members)) or members[0] < 0:
                raise ValueError
            groups[members[0]] = members
    except ValueError:
        raise CorruptCheckpointError(f"{path} names a committed compaction but cannot be read; the log stays as it "
                                     f"is until the file is repaired or removed",
                                     expected=f"kbatch-compaction {_COMMIT_VERSION} / group BASE [MEMBER...] ...",
                                     found=data[:120].decode("ascii", "replace")) from None
    return groups


def _swap_next_offset(path: str) -> int | None:
    """The offset after the last complete batch of a `.swap` log (LogSegment.readNextOffset), None
    when it holds none or cannot be read."""
    from ..errors import KBatchError
    from ..record.file_records import FileRecords

    try:
        records = FileRecords(path)
    except (OSError, KBatchError):
        return None
    last = None
    try:
        gen = records.scan(0, reuse=True)
        while True:
            try:
                s = next(gen)
            except StopIteration:
                break
            if len(s["last_offset"]):
                last = int(s["last_offset"][-1])
    except KBatchError:
        return None
    finally:
        records.close()
    return None if last is None else last + 1


def _replaced_by(log_dir: str, base: int, groups: dict[int, list[int]] | None) -> list[int]:
    """The segments the `.swap` log at `base` replaces: the group the commit marker names; without
    one (an empty marker, as kbatch wrote before grouping, or a `.swap` a broker left), as Kafka's
    LogLoader decides: every segment whose base offset is in [base, the swap's next offset)."""
    if groups and base in groups:
        return groups[base]
    end = _swap_next_offset(_files.segment_path(log_dir, base, _files.LOG_SUFFIX + SWAP))
    return [base] + [b for b in _files.list_segment_bases(log_dir) if end is not None and base < b < end]


def _delete_replaced(log_dir: str, members: list[int], checkpoint: Callable[[str], None]) -> list[str]:
    """The segments a grouped output replaces (all but its own base), latest first and each .log
    before its indexes, renamed to `.deleted` (Kafka's order: the old segments go before the new
    one lands, so the directory never holds two segments for one offset). Returns the names."""
    renamed = []
    for base in reversed(members[1:]):
        for suffix in (_files.LOG_SUFFIX, *SWAPPED_SUFFIXES):
            path = _files.segment_path(log_dir, base, suffix)
            if not os.path.exists(path):
                continue
            checkpoint(f"delete-replaced:{os.path.basename(path)}")
            os.replace(path, path + DELETED)
            renamed.append(os.path.basename(path) + DELETED)
    if renamed:
        _files.fsync_dir(log_dir)
    return renamed


def complete_swaps(log_dir: str, checkpoint: Callable[[str], None] | None = None,
                   groups: dict[int, list[int]] | None = None) -> list[str]:
    """Rename every `<base>.<suffix>.swap` over its original, earliest segment first. Where the
    swapped-in log replaces a group of segments (`groups`: output base -> the input bases, as
    COMMIT_MARKER names them), the others of the group are renamed to `.deleted` first, and
    removed once the new log is in place (without a group, the segments within the swap's
    offsets go, as Kafka's LogLoader does for a broker's `.swap`). For each segment the old index
    files go before the new log lands, so no stale index ever describes a new log (a missing index
    is rebuilt by any reader, as a broker does). Returns the files swapped in."""
    swaps: dict[int, list[str]] = {}
    for name in os.listdir(log_dir):
        if name.endswith(SWAP) and len(name) > 20 and name[:20].isdigit():
            swaps.setdefault(int(name[:20]), []).append(name[: -len(SWAP)])
    done = []
    step = checkpoint or _files.crash_point
    for base in sorted(swaps):
        step(f"swap-in:{base}")
        targets = swaps[base]
        log_name = _files.filename_prefix(base) + _files.LOG_SUFFIX
        deleted: list[str] = []
        if log_name in targets:
            deleted = _delete_replaced(log_dir, _replaced_by(log_dir, base, groups), step)
            for suffix in SWAPPED_SUFFIXES:  # old indexes must not outlive the old log
                _files.crash_point(f"unlink-old:{_files.filename_prefix(base)}{suffix}")
                _unlink(_files.segment_path(log_dir, base, suffix))
        for t in sorted(targets, key=lambda t: t != log_name):  # the log first, then its indexes
            _files.crash_point(f"rename:{t}")
            os.replace(os.path.join(log_dir, t + SWAP), os.path.join(log_dir, t))
            done.append(t)
        for name in deleted:
            step(f"delete-deleted:{name}")
            _unlink(os.path.join(log_dir, name))
    if done:
        _files.fsync_dir(log_dir)
    return done


def clean_directory(log_dir: PathLike, checkpoint: Callable[[str], None] | None = None) -> list[str]:
    """Finish an interrupted compaction and remove leftovers, as a broker's LogLoader does:
    compaction scratch directories, kbatch's temp files and `.deleted` segments go; `.cleaned`
    files go too unless the compaction was committed (COMMIT_MARKER), in which case they become
    `.swap` files; `.swap` files are renamed over their originals (the other segments of a
    group the marker names go first, complete_swaps); index files whose `.log` is
    gone (a deletion or creation cut short) go. So an interrupted compaction leaves the original
    log or the compacted one, never a mix. Returns the names removed or swapped in (each also
    logged)."""
    log_dir = os.fspath(log_dir)
    groups = read_commit_marker(log_dir)
    committed = groups is not None
    touched = []
    for name in sorted(os.listdir(log_dir)):
        path = os.path.join(log_dir, name)
        if name.startswith(SCRATCH_PREFIX):
            shutil.rmtree(path, ignore_errors=True)
        elif name.endswith(CLEANED) and committed:
            os.replace(path, path[:-len(CLEANED)] + SWAP)
        elif name.endswith((CLEANED, DELETED)) or _files.TEMP_RE.match(name):
            _unlink(path)
        else:
            continue
        touched.append(name)
    touched += complete_swaps(log_dir, checkpoint, groups)
    if committed:
        _unlink(os.path.join(log_dir, COMMIT_MARKER))
        touched.append(COMMIT_MARKER)
    touched += complete_truncation(log_dir)
    names = set(os.listdir(log_dir))
    for name in sorted(names):
        parsed = _files.parse_segment_file_name(name)
        if (parsed is not None and parsed[1] in _files.INDEX_SUFFIXES
                and _files.segment_path("", parsed[0], _files.LOG_SUFFIX) not in names):
            _unlink(os.path.join(log_dir, name))
            touched.append(name)
    if touched:
        _files.fsync_dir(log_dir)
        logger.warning("Cleaned up %s: %s", log_dir, ", ".join(sorted(touched)))
    return touched


# ------------------------------------------------------------------------------------ truncation
# Log.truncate_to (and append_table's undo) first writes, atomically, what it is about to do:
#
#     <partition dir>/.kbatch-truncation
#         kbatch-truncation 0
#         truncate-to 1234
#         keep-segment-at-target true
#         fully false
#
# From then on the truncation is committed: a writer's open that finds the file finishes it
# (complete_truncation, from clean_directory) before it recovers the log, then removes it. So a
# kill at any step leaves a log that recovers to the old end (before the file) or to the new one.
TRUNCATION_MARKER = ".kbatch-truncation"
_TRUNCATION_VERSION = 0


class Truncation(NamedTuple):
    """A truncation to `target`: segments with a base offset above it go (at or above it, unless
    keep_segment_at_target), the last segment left is cut at the first batch ending at or after
    it; with no segment left, an empty one starts at `target`."""

    target: int
    keep_segment_at_target: bool = True
    fully: bool = False   # no segment is kept: the log starts again, empty, at the target

    def write(self, log_dir: PathLike) -> None:
        _files.atomic_write(os.path.join(os.fspath(log_dir), TRUNCATION_MARKER),
                            (f"kbatch-truncation {_TRUNCATION_VERSION}\ntruncate-to {self.target}\n"
                             f"keep-segment-at-target {'true' if self.keep_segment_at_target else 'false'}\n"
                             f"fully {'true' if self.fully else 'false'}\n")
                            .encode("ascii"))

    @classmethod
    def read(cls, log_dir: PathLike) -> Truncation | None:
        """The pending truncation, or None. A file that cannot be parsed is an error: guessing
        would cut the wrong data or leave half a truncation."""
        path = os.path.join(os.fspath(log_dir), TRUNCATION_MARKER)
        try:
            data = _files.read_whole(path)
        except FileNotFoundError:
            return None
        fields = dict(line.split(" ", 1) for line in data.decode("ascii", "replace").splitlines() if " " in line)
        try:
            if int(fields["kbatch-truncation"]) != _TRUNCATION_VERSION:
                raise ValueError
            flag = {"true": True, "false": False}
            out = cls(int(fields["truncate-to"]), flag[fields["keep-segment-at-target"]], flag[fields["fully"]])
            if out.target < 0:
                raise ValueError
        except (KeyError, ValueError):
            raise CorruptCheckpointError(f"{path} names an interrupted truncation but cannot be read; the log stays "
                                         f"as it is until the file is repaired or removed",
                                         expected=f"kbatch-truncation {_TRUNCATION_VERSION} / truncate-to N / "
                                                  f"keep-segment-at-target true|false / fully true|false",
                                         found=data[:120].decode("ascii", "replace")) from None
        return out

    @staticmethod
    def remove(log_dir: PathLike) -> None:
        _files.crash_point(f"delete:{TRUNCATION_MARKER}")
        _unlink(os.path.join(os.fspath(log_dir), TRUNCATION_MARKER))
        _files.fsync_dir(log_dir)

    def kept_bases(self, bases: Iterable[int]) -> list[int]:
        t = self.target
        return [b for b in bases if b < t or (self.keep_segment_at_target and b == t)]


def truncate_segments(log_dir: PathLike, truncation: Truncation, cut: int | None = None) -> None:
    """The file half of a truncation (LocalLog.truncateTo): delete the segments past the target,
    newest first and each .log first (so the directory always holds a prefix of the log), cut the
    last segment left at the first batch whose last offset reaches the target (`cut`, when the
    caller knows it), trim its index files to entries below the target (TimeIndex/OffsetIndex/
    TransactionIndex.truncateTo, in place: no new disk space needed), or, with no segment left,
    create an empty one at the target (truncateFullyAndStartAt). Idempotent: a crash at any step
    and a run again end in the same files."""
    from .index import OffsetIndex, TimeIndex, TransactionIndex
    from ..record.file_records import FileRecords

    log_dir = os.fspath(log_dir)
    t = truncation.target
    bases = _files.list_segment_bases(log_dir)
    kept = truncation.kept_bases(bases)  # after a crash, what is left of the same plan
    for base in reversed([b for b in bases if b not in kept]):
        for suffix in (_files.LOG_SUFFIX, *_files.INDEX_SUFFIXES):
            _files.crash_point(f"delete:{_files.filename_prefix(base)}{suffix}")
            _unlink(_files.segment_path(log_dir, base, suffix))
    if not kept:
        for suffix in (_files.LOG_SUFFIX, _files.INDEX_SUFFIX, _files.TIME_INDEX_SUFFIX):
            path = _files.segment_path(log_dir, t, suffix)
            _files.crash_point(f"create:{os.path.basename(path)}")
            os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | _files.O_CLOEXEC, 0o666))
        _files.fsync_dir(log_dir)
        return
    base = kept[-1]
    records = FileRecords(_files.segment_path(log_dir, base, _files.LOG_SUFFIX), writable=True)
    try:
        if cut is None:
            cut = _cut_position(records, t)
        if cut < records.size_in_bytes:
            records.truncate_to(cut)
    finally:
        records.close()
    for cls in (OffsetIndex, TimeIndex):
        path = _files.segment_path(log_dir, base, cls.suffix)
        try:
            idx = cls.open(path, base)
        except FileNotFoundError:
            continue
        n = 0
        while n < idx.entries and idx.entry(n).offset < t and (isinstance(idx, TimeIndex)
                                                               or idx.entry(n).position < cut):
            n += 1
        _trim(path, n * idx.entry_size)
    path = _files.segment_path(log_dir, base, _files.TXN_INDEX_SUFFIX)
    if os.path.exists(path):
        txns = TransactionIndex.open(path, base).entries
        n = 0
        while n < len(txns) and txns[n].last_offset < t:
            n += 1
        _trim(path, n * W.TXN_INDEX_ENTRY_SIZE)
    _files.fsync_dir(log_dir)


def _cut_position(records: FileRecords, target: int) -> int:
    """Where the first batch whose last offset is >= target starts (the end of the complete
    batches when there is none)."""
    gen = records.scan(0, reuse=True)
    while True:
        try:
            s = next(gen)
        except StopIteration as stop:
            end: int = stop.value
            return end
        hit: list[int] = [p for p, last in zip(s["position"].tolist(), s["last_offset"].tolist()) if last >= target]
        if hit:
            return hit[0]


def _trim(path: str, size: int) -> None:
    """Cut an index file to its first `size` bytes in place (nothing to do when it is that size)."""
    fd = _files.open_regular(path, writable=True)
    try:
        if os.fstat(fd).st_size != size:
            _files.truncate_back(fd, size, path)
    finally:
        os.close(fd)


def complete_truncation(log_dir: PathLike) -> list[str]:
    """Finish a truncation a kill interrupted: the segment files, the leader epoch cache, the
    recovery point, then the marker goes. Returns [TRUNCATION_MARKER] when there was one."""
    from .checkpoints import LEADER_EPOCH_CHECKPOINT
    from .leader_epoch import LeaderEpochFileCache

    log_dir = os.fspath(log_dir)
    pending = Truncation.read(log_dir)
    if pending is None:
        return []
    logger.warning("Finishing an interrupted truncation of %s to offset %d", log_dir, pending.target)
    truncate_segments(log_dir, pending)
    if os.path.exists(os.path.join(log_dir, LEADER_EPOCH_CHECKPOINT)):
        truncate_epochs(LeaderEpochFileCache.load(log_dir), pending)
    lower_recovery_point(log_dir, pending.target)
    Truncation.remove(log_dir)
    return [TRUNCATION_MARKER]


def truncate_epochs(cache: LeaderEpochFileCache, truncation: Truncation) -> None:
    """The leader epoch cache after a truncation: cleared when no segment was kept (UnifiedLog.
    truncateFullyAndStartAt), else entries starting at or past the target go (truncateFromEnd)."""
    if truncation.fully:
        if len(cache):
            cache.clear()
    else:
        cache.truncate_from_end(truncation.target)


def lower_recovery_point(log_dir: PathLike, offset: int) -> None:
    """The recovery point never stays above the log end (LocalLog.updateLogEndOffset)."""
    from .checkpoints import RecoveryCheckpoint

    cp = RecoveryCheckpoint.read(log_dir)
    if cp.recovery_point > offset or cp.clean_shutdown:
        RecoveryCheckpoint(min(cp.recovery_point, offset), clean_shutdown=False).write(log_dir)


def log_start_offset(directory: str, topic: str | None, partition: int | None, first_base: int) -> int:
    """A broker's log start offset (LogLoader): max(the parent's log-start-offset-checkpoint entry
    for this partition, the first segment's base offset); DeleteRecords moves it inside a segment."""
    from .. import _fs
    from .checkpoints import LOG_START_OFFSET_CHECKPOINT, read_offset_checkpoint

    if topic is None or partition is None:
        return first_base
    path = _fs.join(_fs.dirname(directory), LOG_START_OFFSET_CHECKPOINT)
    if _fs.exists(path):
        checkpointed = read_offset_checkpoint(path).get((topic, partition))
        if checkpointed is not None:
            return max(checkpointed, first_base)
    return first_base


class RecoveryReport(NamedTuple):
    """What opening a log for writing changed: bytes cut from a torn/corrupt tail (and why), the
    segments whose indexes were rewritten, the segments recovered (CRC-checked and re-indexed,
    because the last shutdown was not clean), and the leftovers removed from the directory."""

    truncated_bytes: int
    truncation_reason: str | None
    rebuilt_indexes: tuple[int, ...]          # base offsets
    recovered_segments: tuple[int, ...] = ()  # base offsets
    cleaned_up: tuple[str, ...] = ()          # file names


__all__ = ["RecoveryReport", "log_start_offset", "clean_directory", "complete_swaps", "write_commit_marker", "read_commit_marker", "complete_truncation",
           "truncate_segments", "Truncation",
           "COMMIT_MARKER", "TRUNCATION_MARKER"]
