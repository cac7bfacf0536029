"""LeaderEpochFileCache: a partition's (leader epoch -> start offset) map and its checkpoint file.

The rules are Kafka's (storage/.../epoch/LeaderEpochFileCache.java):
- `assign(epoch, start_offset)` adds an entry unless the latest one has the same epoch and a start
  offset no larger; entries with an epoch >= the new one or a start offset >= the new one are
  removed first, so epochs and start offsets both increase. A leader assigns its new epoch at the
  log end offset when it becomes leader, before any batch carries it; every appended v2 batch
  assigns (its partition leader epoch, its base offset).
- `truncate_from_end(end_offset)` removes entries starting at or after end_offset (log truncation);
  `truncate_from_start(start_offset)` removes entries that start at or before it and re-adds the
  last removed one at start_offset (the log start offset moved: retention, DeleteRecords).
- `latest_epoch` answers ListOffsets LATEST; `end_offset_for` answers OffsetForLeaderEpoch.
The cache writes `leader-epoch-checkpoint` (kbatch.log.checkpoints) after every change when it has a
path; kbatch writes synchronously where Kafka flushes truncations in the background.
"""
from __future__ import annotations

import bisect
import os
from collections.abc import Iterable
from typing import TYPE_CHECKING

from . import checkpoints as C
from .checkpoints import EpochEntry
from ..errors import InvalidOffsetError

if TYPE_CHECKING:
    from .._typing import PathLike
    from .log_segments import LogSegments

UNDEFINED_EPOCH = -1
UNDEFINED_EPOCH_OFFSET = -1


class LeaderEpochFileCache:
    """Epoch entries sorted by epoch (and so by start offset); see the module docstring."""

    def __init__(self, entries: Iterable[tuple[int, int]] = (), path: PathLike | None = None) -> None:
        self.path = None if path is None else os.fspath(path)
        self._entries: list[EpochEntry] = []
        for e in entries:
            self._assign(EpochEntry(int(e[0]), int(e[1])))

    @classmethod
    def load(cls, directory: PathLike) -> "LeaderEpochFileCache":
        """The cache of a partition directory, from its leader-epoch-checkpoint (empty when missing)."""
        from .. import _fs

        path = _fs.join(directory if isinstance(directory, str) else os.fspath(directory), C.LEADER_EPOCH_CHECKPOINT)
        entries = C.read_leader_epoch_checkpoint(path) if _fs.exists(path) else []
        return cls(entries, path)

    # ---- facts
    def entries(self) -> list[EpochEntry]:
        return list(self._entries)

    def __len__(self) -> int:
        return len(self._entries)

    def __bool__(self) -> bool:
        return bool(self._entries)

    def latest_entry(self) -> EpochEntry | None:
        return self._entries[-1] if self._entries else None

    def latest_epoch(self) -> int | None:
        return self._entries[-1].epoch if self._entries else None

    def earliest_entry(self) -> EpochEntry | None:
        return self._entries[0] if self._entries else None

    def epoch_for_offset(self, offset: int) -> int | None:
        """The epoch whose range holds `offset` (the last entry starting at or before it)."""
        prev = None
        for e in self._entries:
            if e.start_offset == offset:
                return e.epoch
            if e.start_offset > offset:
                return prev
            prev = e.epoch
        return prev

    def end_offset_for(self, requested_epoch: int, log_end_offset: int) -> tuple[int, int]:
        """(epoch, end offset) for OffsetForLeaderEpoch: the largest epoch <= requested and the start
        offset of the next epoch (the log end offset for the latest epoch); (-1, -1) when undefined."""
        if requested_epoch == UNDEFINED_EPOCH:
            return UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET
        if self._entries and self._entries[-1].epoch == requested_epoch:
            return requested_epoch, log_end_offset
        epochs = [e.epoch for e in self._entries]
        hi = bisect.bisect_right(epochs, requested_epoch)
        if hi >= len(self._entries):
            return UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET
        higher = self._entries[hi]
        if hi == 0:  # older than anything cached: the first larger epoch's start
            return requested_epoch, higher.start_offset
        return self._entries[hi - 1].epoch, higher.start_offset

    # ---- changes
    def _update_needed(self, e: EpochEntry) -> bool:
        last = self.latest_entry()
        return last is None or e.epoch != last.epoch or e.start_offset < last.start_offset

    def _assign(self, e: EpochEntry) -> bool:
        if e.epoch < 0 or e.start_offset < 0:
            raise InvalidOffsetError("Received invalid partition leader epoch entry",
                                     expected="epoch >= 0 and start offset >= 0", found=f"{e.epoch} {e.start_offset}")
        if not self._update_needed(e):
            return False
        while self._entries and (self._entries[-1].epoch >= e.epoch or self._entries[-1].start_offset >= e.start_offset):
            self._entries.pop()
        self._entries.append(e)
        return True

    def assign(self, epoch: int, start_offset: int) -> bool:
        """Add (epoch, start offset) by Kafka's rules; returns whether the cache changed."""
        changed = self._assign(EpochEntry(int(epoch), int(start_offset)))
        if changed:
            self.flush()
        return changed

    def truncate_from_end(self, end_offset: int) -> None:
        """Remove entries whose start offset >= end_offset."""
        if end_offset >= 0 and self._entries and self._entries[-1].start_offset >= end_offset:
            while self._entries and self._entries[-1].start_offset >= end_offset:
                self._entries.pop()
            self.flush()

    def truncate_from_start(self, start_offset: int) -> None:
        """Remove entries starting at or before start_offset; the last of them stays, moved to start_offset."""
        removed = None
        while self._entries and self._entries[0].start_offset <= start_offset:
            removed = self._entries.pop(0)
        if removed is not None:
            self._entries.insert(0, EpochEntry(removed.epoch, start_offset))
            self.flush()

    def clear(self) -> None:
        self._entries = []
        self.flush()

    def flush(self) -> None:
        if self.path is not None and os.path.isdir(os.path.dirname(self.path) or "."):
            C.write_leader_epoch_checkpoint(self.path, self._entries)

    def __repr__(self) -> str:
        return f"LeaderEpochFileCache({[tuple(e) for e in self._entries]})"


# ------------------------------------------------------------------------------------ epochs from the batches
def load_cache(directory: str, broker_layout: bool, writable: bool, segments: LogSegments) -> LeaderEpochFileCache:
    """A Log's cache: its leader-epoch-checkpoint when the file exists (in a broker layout);
    otherwise what a broker's recovery of these batches assigns (cache_from_batches), kept in
    memory for a read-only log, written to the file for a writable one."""
    from .. import _fs

    path = _fs.join(directory, C.LEADER_EPOCH_CHECKPOINT)
    if broker_layout and _fs.exists(path):
        cache = LeaderEpochFileCache.load(directory)
        cache.path = path if writable else None
        return cache
    cache = cache_from_batches(segments)
    if writable:
        cache.path = path
        cache.flush()
    return cache


def cache_from_batches(segments: LogSegments) -> LeaderEpochFileCache:
    """The cache a broker's recovery builds from these batches (LogSegment.recover assigns each
    v2 batch's epoch as batches carry a larger one): for a log without a checkpoint file."""
    cache = LeaderEpochFileCache()
    for seg in segments:
        for s in seg.log.headers():
            for ple, base, magic in zip(s["partition_leader_epoch"].tolist(), s["base_offset"].tolist(),
                                        s["magic"].tolist()):
                latest = cache.latest_epoch()
                if magic >= 2 and ple >= 0 and (latest is None or ple > latest):
                    cache.assign(ple, base)
    return cache


def epoch_at_start(segments: LogSegments, log_start_offset: int,
                   cache: LeaderEpochFileCache | None = None) -> int | None:
    """EARLIEST's epoch: the cache's first epoch when it starts at or before the log start offset.
    Without a cache (no checkpoint file) that entry is the first batch carrying an epoch: the
    batches up to the log start offset are read, no further."""
    import numpy as np

    from ..record.file_records import FIRST_WINDOW

    if cache is not None:
        first = cache.earliest_entry()
        return first.epoch if first is not None and first.start_offset <= log_start_offset else None
    for seg in segments:
        if seg.base_offset > log_start_offset:
            break
        for s in seg.log.scan(0, first_window=FIRST_WINDOW, reuse=True):
            ok = np.flatnonzero((s["magic"] >= 2) & (s["partition_leader_epoch"] >= 0))
            if len(ok):
                i = int(ok[0])
                return int(s["partition_leader_epoch"][i]) if s["base_offset"][i] <= log_start_offset else None
            if len(s["base_offset"]) and s["base_offset"][-1] > log_start_offset:
                return None
    return None


def epoch_at_end(segments: LogSegments, cache: LeaderEpochFileCache | None = None) -> int | None:
    """LATEST's epoch: the cache's latest (a new leader's epoch before any batch carries it). Without
    a cache (no checkpoint file): the last batch's, read from the last index entry on (the latest
    epoch a broker's recovery assigns whenever epochs never go down along the log, as in every log a
    leader wrote; the whole cache, for end_offset_for_epoch, still reads every header)."""
    if cache is not None:
        return cache.latest_epoch()
    for seg in reversed(segments):
        last = segments.last_headers(seg, ("magic", "partition_leader_epoch"))
        if last is not None:
            magic, ple = last
            return ple if magic >= 2 and ple >= 0 else None
    return None


__all__ = ["LeaderEpochFileCache", "EpochEntry", "UNDEFINED_EPOCH", "UNDEFINED_EPOCH_OFFSET", "load_cache", "cache_from_batches",
           "epoch_at_start", "epoch_at_end"]
