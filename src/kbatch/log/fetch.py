"""What a Kafka consumer sees from a partition: the one read path every reader takes.

Kafka splits this between the broker (UnifiedLog.read / LogSegment.read: batches from a fetch
offset up to the high watermark or, for read_committed, the last stable offset, plus the aborted
transactions overlapping them, LogSegment.collectAbortedTxns) and the consumer (its fetch handling:
control batches are never records; under read_committed the data batches of aborted transactions
are dropped). Here both halves are in one place, over a `Log`:

    from kbatch.log.fetch import IsolationLevel, read_log

    result = read_log(log, start_offset, end_offset=None, isolation=IsolationLevel.READ_COMMITTED)
    for fb in result.batches():          # FetchedBatch(batch, aborted) in offset order, control batches too
        ...
    for batch, record in result.records():   # what a consumer application gets
        ...
    result.aborted, result.last_stable_offset, result.high_watermark, result.unreadable

Rules:

- **Aborted transactions** come from the segments' `.txnindex` files when every segment has one
  (as a broker reads them), plus any ABORT marker the files miss (a stale or cut file; from the
  header pass every reader makes for the last stable offset anyway: merge_aborted, and the JVM
  reader's AbortedTransactions.fromIndexAndMarkers); otherwise from the log's own control batches
  (a header pass over every segment; only transactional control batches are decoded): per producer, its first transactional
  data batch after its previous marker up to an ABORT marker (kbatch.log.producer_state.OngoingTxns,
  the rule `Log.append`, recovery and `rebuild_indexes` write `.txnindex` entries by). A broker (and
  kbatch since it writes them) creates a `.txnindex` only for a segment holding an ABORT marker, so
  a missing file says nothing about the others; hence "every segment".
- **Last stable offset** (read_committed stops before it): the first offset of the earliest
  transaction with no marker yet, or the log end offset; from the same header pass.
- **Unreadable bytes** (a torn or corrupt middle segment, a bad length field, a header the
  scanner rejects) are never skipped silently: `batches()` yields what comes before them, records
  an `UnreadableRange` (file, byte position, size, the offsets around it) in `unreadable`, and
  raises `UnreadableDataError` (`skip_unreadable=True` goes on with the next segment instead).
  The one exception is Kafka's: a partial batch at the very end of the active (last) segment is a
  write in progress or a torn last write, and is ignored.

`aborted_transactions(sources)` is the aborted-transaction rule over any segments (local,
remote, a Spark plan's files): kbatch.log.segment_plan calls it.
"""
from __future__ import annotations

import weakref
from collections.abc import Callable, Generator, Iterable, Iterator
from enum import IntEnum
from typing import TYPE_CHECKING, Any, NamedTuple

import numpy as np

from .. import _wire as W
from ..errors import CorruptRecordError, KBatchError, StorageError
from ..record.batch import incomplete_batch
from .index import AbortedTxn, TransactionIndex
from .producer_state import OngoingTxns, follow_windows, ongoing_at

if TYPE_CHECKING:
    import pyarrow as pa

    from .._core import Record
    from .._wire import OffsetSpec
    from ..record.batch import Batch
    from ..record.file_records import Window
    from .segment import LogSegment, UnreadRange
    from .log_segments import OffsetAndTimestamp
    from .partition_log import PartitionLog as Log


class IsolationLevel(IntEnum):
    """Kafka's IsolationLevel (the Fetch and ListOffsets `isolation_level` field)."""

    READ_UNCOMMITTED = 0
    READ_COMMITTED = 1

    @classmethod
    def parse(cls, text: str) -> IsolationLevel:
        """"read_committed" / "read_uncommitted" (Kafka's config values) -> the member."""
        try:
            return cls[text.strip().upper()]
        except KeyError:
            raise ValueError(f"isolation level {text!r}: expected read_uncommitted or read_committed") from None


#: scan(segment, byte position, verify_crc) -> the segment's scan windows from there (Scan)
SegmentScan = Callable[["LogSegment", int, bool], "Generator[Window, None, int]"]


def _scan_segment(seg: LogSegment, position: int, verify_crc: bool) -> Generator[Window, None, int]:
    return seg.log.scan(position, verify_crc)


class UnreadableRange(NamedTuple):
    """Bytes of a segment that could not be read as batches, and the offsets they hide."""

    path: str
    position: int               # the first byte not read
    size: int                   # how many bytes from there to the end of the file
    after_offset: int | None    # the last offset read before them (None: none in this segment)
    next_offset: int | None     # the first offset readable after them (the next segment's base; None: the end)
    reason: str

    def offsets(self) -> str:
        lo = "?" if self.after_offset is None else str(self.after_offset + 1)
        hi = "the end of the log" if self.next_offset is None else str(self.next_offset - 1)
        return f"offsets {lo}..{hi}"

    def __str__(self) -> str:
        return (f"{self.path}: {self.size} bytes from byte {self.position} could not be read ({self.reason}); "
                f"{self.offsets()} are in or behind them and were not read")


class UnreadableDataError(CorruptRecordError):
    """A read reached bytes it could not read (`range`: the UnreadableRange)."""

    range: UnreadableRange


def _unreadable_error(r: UnreadableRange) -> UnreadableDataError:
    e = UnreadableDataError(str(r), position=r.position)
    e.range = r
    return e


def offset_disorder(s: Window, a: int, prev_last: int | None, next_base: int | None) -> tuple[int, str] | None:
    """The first batch of scan window `s` from row `a` on whose offsets break the log's order (a
    base offset not above the previous batch's last offset, or, in a segment that is not the last,
    a last offset at or past the next segment's base), with what is wrong; None when all are in
    order. Kafka's CRC does not cover the base offset, so only this order shows one forged or
    damaged; a read that met it would stop silently or give an offset twice."""
    base, last, pos = s["base_offset"], s["last_offset"], s["position"]
    n = len(base)
    if a >= n:
        return None
    prevs = np.empty(n - a, np.int64)
    prevs[0] = prev_last if prev_last is not None and a == 0 else (last[a - 1] if a > 0 else np.iinfo(np.int64).min)
    if n - a > 1:
        prevs[1:] = last[a:n - 1]
    back = base[a:] <= prevs
    past = (last[a:] >= next_base) if next_base is not None else np.zeros(n - a, bool)
    hit = np.flatnonzero(back | past)
    if not len(hit):
        return None
    j = a + int(hit[0])
    if back[j - a]:
        return j, (f"offsets go backwards: batch at byte {int(pos[j])} has base offset {int(base[j])} but follows "
                   f"offset {int(prevs[j - a])}")
    return j, (f"batch at byte {int(pos[j])} has offsets {int(base[j])}..{int(last[j])}, at or past the next "
               f"segment's base offset {next_base}")


class OffsetOrder:
    """Where a segment's batches stop following each other in offset order (offset_disorder), for
    kbatch serve, which sends file slices without decoding them. It remembers the byte range it has
    checked, so a consumer reading on pays one header scan per byte sent; a fetch elsewhere starts a
    new range at the index entry before its offset (the batches from there show the order)."""

    def __init__(self) -> None:
        self.lo = self.hi = 0                 # the batches in bytes [lo, hi) are checked
        self.prev_last: int | None = None     # the last offset of the batch that ends at hi
        self.bad: tuple[int, str] | None = None   # (byte position, what) of the first batch out of order

    def first_bad(self, seg: LogSegment, offset: int, upto: int, next_base: int | None) -> tuple[int, str] | None:
        """The first batch out of order between the one a fetch at `offset` starts with and byte
        `upto` of `seg`, as (its byte position, what is wrong), or None."""
        start = seg._entry_position(offset)
        if self.bad is None and not self.lo <= start <= self.hi:
            self.lo = self.hi = start
            self.prev_last = seg.base_offset - 1 if start == 0 else None  # none lies below the base offset
        if self.bad is None and self.hi < upto:
            self._scan(seg, upto, next_base)
        if self.bad is not None and start <= self.bad[0] < upto:
            return self.bad
        return None

    def _scan(self, seg: LogSegment, upto: int, next_base: int | None) -> None:
        gen = seg.log.scan(self.hi)
        try:
            for s in gen:
                n = len(s["position"])
                if not n:
                    continue
                hit = offset_disorder(s, 0, self.prev_last, next_base)
                if hit is not None:
                    self.bad = (int(s["position"][hit[0]]), hit[1])
                    return
                self.prev_last = int(s["last_offset"][n - 1])
                self.hi = int(s["position"][n - 1] + s["size"][n - 1])
                if self.hi >= upto:
                    return
        except StorageError:
            raise
        except KBatchError:
            pass  # bytes that do not read: the read path's other rules (hole_at, unreadable_at) name them
        finally:
            gen.close()


def _unknown_range(u: UnknownTxn) -> UnreadableRange:
    d = u.damage
    return d._replace(reason=f"{d.reason}; the transaction of producer {u.producer_id} from offset {u.first_offset} "
                             f"has no COMMIT or ABORT marker before these bytes: whether it committed is in or "
                             f"behind them, so a read_committed read cannot pass offset {u.first_offset}")


def partial_tail_ignored(next_segment_base: int | None) -> bool:
    """Whether bytes after a segment's last complete batch, up to its end, are the one thing a
    reader ignores (Kafka's rule: a write in progress or a torn last write): only in the last,
    active segment (no next segment). Anywhere else they are unreadable bytes. Every reader asks
    this (read_log below, both Spark readers: the JVM one implements the same test)."""
    return next_segment_base is None


def hole_at(seg: LogSegment, offset: int, found_offset: int) -> UnreadRange | None:
    """The bytes of `seg` that could not be read and hide `offset`, when a lookup of `offset`
    answered with a batch at `found_offset` beyond it (LogSegment.translate_offset reads around
    damage): a reader starting there must say so, never start silently at the next readable
    batch. None when the gap is not damage (a compacted log's missing offsets). kbatch serve's
    Fetch asks this too."""
    if found_offset <= offset:
        return None
    for u in seg.unread:
        lo = u.after_offset if u.after_offset is not None else seg.base_offset - 1
        if lo < offset and (u.before_offset is None or offset < u.before_offset <= found_offset):
            return u
    return None


def unreadable_at(seg: LogSegment, offset: int) -> tuple[int, int | None, str] | None:
    """When `seg` holds no batch reaching `offset` (translate_offset gave None): whether bytes that
    could not be read are why, as (their first byte, the last offset read before them, what they
    are); None when the offsets are simply not there (the end of a compacted segment). Read from
    the index entry at or below `offset`, not only past the last entry: damage before an entry
    that reaches intact batches behind it is still damage. kbatch serve's Fetch asks this too."""
    for u in seg.unread:
        if (u.after_offset if u.after_offset is not None else seg.base_offset - 1) < offset:
            return u.position, u.after_offset, u.why
    try:
        pos = seg._entry_position(offset)
    except KBatchError:
        pos = 0
    last: int | None = None
    gen = seg.log.scan(pos)
    try:
        while True:
            s = next(gen)
            if len(s["last_offset"]):
                last = int(s["last_offset"][-1])
    except StopIteration as stop:
        end = int(stop.value)
        return (end, last, seg.log.incomplete(end, "the segment")) if end < seg.size else None
    except StorageError:
        raise
    except KBatchError as e:
        return (e.position if e.position is not None else pos), last, str(e)
    finally:
        gen.close()


class _InHole(Exception):
    def __init__(self, r: UnreadRange) -> None:
        self.range = r


class FetchedWindow(NamedTuple):
    """Rows [start, stop) of one scan window of `segment`: batches a read reached."""

    segment: LogSegment
    window: Window
    start: int
    stop: int

    def span(self) -> tuple[int, int]:
        """The byte range of the segment these batches fill."""
        pos, size = self.window["position"], self.window["size"]
        return int(pos[self.start]), int(pos[self.stop - 1] + size[self.stop - 1])


class FetchedBatch(NamedTuple):
    batch: Batch
    aborted: bool   # a data batch of an aborted transaction (records a read_committed consumer never sees)


# ------------------------------------------------------------------------------------ transactions
class TxnSource(NamedTuple):
    """One segment as the aborted-transaction rule sees it: its `.txnindex` bytes (None when the
    file is missing) and its batch-header scan windows, in offset order."""

    path: str
    txn_index: Callable[[], bytes | None]
    windows: Callable[[], Iterable[Window]]
    size: int | None = None   # the .log's size: bytes after its last whole batch are damage, but in the last segment
    base_offset: int | None = None   # the segment's base offset (damage before the next one names it)
    read: Callable[[int, int], Any] | None = None   # (position, size) -> bytes: says what such bytes are


class UnknownTxn(NamedTuple):
    """A transaction still open where the header pass met bytes it could not read (not the partial
    tail of the last segment): its COMMIT or ABORT marker may be in them, so whether its records
    were committed is not known. It is damage, never a last stable offset: a read_committed read
    that reaches it raises (or, skipping unreadable bytes, leaves its records out)."""

    producer_id: int
    first_offset: int           # its first data batch's offset
    last_offset: int            # the last offset read before the damage
    damage: UnreadableRange


class TxnState(NamedTuple):
    aborted: list[AbortedTxn]             # every aborted transaction of the log, by marker offset
    first_unstable_offset: int | None     # the first offset of the earliest open or unknown transaction
    from_txn_index: bool                  # True: the aborted list came from .txnindex files
    unknown: tuple[UnknownTxn, ...] = ()  # transactions whose marker may be in unreadable bytes
    first_open_offset: int | None = None  # the earliest open transaction's first offset (unknown ones aside)


def _says_incomplete(src: TxnSource) -> Callable[[int], str] | None:
    """What the bytes of `src` from a position to its end are (incomplete_batch), when it can read them."""
    read, size = src.read, src.size
    if read is None or size is None:
        return None
    return lambda end: incomplete_batch(read, size, end, "the segment")


def aborted_transactions(sources: Iterable[TxnSource], *, need_open: bool = False) -> TxnState:
    """The aborted transactions of a partition's segments (see the module docstring: the
    `.txnindex` files when every segment has one, plus any ABORT marker they miss; else the
    control batches). One header pass over the segments in any case (`need_open` is kept for
    callers: the open transactions are always followed)."""
    sources = list(sources)
    files = [src.txn_index() for src in sources]
    use_files = bool(sources) and all(f is not None for f in files)
    ongoing = OngoingTxns()
    derived: list[AbortedTxn] = []
    follower = _Follower(ongoing, derived)
    for k, src in enumerate(sources):
        nxt = None if k == len(sources) - 1 else (sources[k + 1].base_offset if sources[k + 1].base_offset is not None
                                                  else -1)
        follower.segment(src.path, src.windows(), src.size, nxt, 0, _says_incomplete(src))
    parsed = [TransactionIndex.parse(f or b"", src.path) for src, f in zip(sources, files)]
    aborted = merge_aborted(parsed if use_files else None, derived)
    return follower.state(aborted, use_files, parsed)


def merge_aborted(indexed: list[list[AbortedTxn]] | None, derived: list[AbortedTxn]) -> list[AbortedTxn]:
    """The aborted transactions: the `.txnindex` entries (per segment; None: not every segment has
    a file, so the control batches' `derived` alone), plus each ABORT marker the files do not list
    (same producer and marker offset), so that no aborted record leaks past a stale or cut index.
    The JVM reader's AbortedTransactions.fromIndexAndMarkers is the same rule."""
    if indexed is None:
        return list(derived)
    aborted = [t for entries in indexed for t in entries]
    listed = {(t.producer_id, t.last_offset) for t in aborted}
    return aborted + [t for t in derived if (t.producer_id, t.last_offset) not in listed]


def _segment_source(seg: LogSegment) -> TxnSource:
    def txn_index() -> bytes | None:
        return seg.files.read_index(".txnindex") if seg.files.has(".txnindex") else None

    def windows() -> Iterable[Window]:
        return seg.log.scan(0)

    return TxnSource(seg.path(".log"), txn_index, windows)


class _Followed(NamedTuple):
    """What transaction_state read of a Log: the segments and sizes, the open transactions and the
    ABORT markers' entries at the end of that, and whether every byte was read (so a later call
    can go on from there when the log only grew)."""

    key: tuple[tuple[int, int], ...]
    resume: tuple[int, int]   # (base offset of the last segment, where its complete batches ended)
    ongoing: OngoingTxns
    derived: list[AbortedTxn]
    complete: bool
    state: TxnState
    last_read: int | None = None


_STATES: weakref.WeakKeyDictionary[Log, _Followed] = weakref.WeakKeyDictionary()


class _Follower:
    """The header pass behind the transaction rule: follows segments' batches in offset order with
    `ongoing` (ABORT markers' entries into `derived`). Where it meets bytes it cannot read (a scan
    error anywhere, or bytes after the last whole batch of a segment that is not the last one: the
    partial tail of the last segment is a live log's end), every transaction open at that point
    becomes an UnknownTxn (its marker may be in those bytes) and the pass goes on after them with
    those producers' transactions closed, so a later marker is never taken for theirs."""

    def __init__(self, ongoing: OngoingTxns, derived: list[AbortedTxn], last_read: int | None = None) -> None:
        self.ongoing = ongoing
        self.derived = derived
        self.unknown: list[UnknownTxn] = []
        self.complete = True
        self.last_read = last_read   # the last offset of the last batch followed
        self.end = 0                 # where the last segment's whole batches end

    def segment(self, path: str, windows: Iterable[Window], size: int | None, next_base: int | None,
                position: int = 0, incomplete: Callable[[int], str] | None = None) -> None:
        """Follow one segment's scan (`windows`, from byte `position`); `next_base`: the next segment's
        base offset (None: this is the last segment; -1: a later one exists, base unknown)."""
        it = iter(windows)
        end = position
        while True:
            try:
                s = next(it)
            except StopIteration as stop:
                end = stop.value if isinstance(stop.value, int) else end
                if size is not None and end < size and next_base is not None:
                    why = incomplete(end) if incomplete is not None else (
                        f"{size - end} bytes after the last whole batch of a segment that is not the last one")
                    self._damage(path, end, size, next_base, why)
                break
            except StorageError:
                raise
            except KBatchError as e:
                at = e.position if e.position is not None else end
                self._damage(path, at, size, next_base, str(e))
                break
            try:
                follow_windows([s], self.ongoing, self.derived)
            except StorageError:
                raise
            except KBatchError as e:  # a marker whose control record does not decode
                at = e.position if e.position is not None else end
                self._damage(path, at, size, next_base, str(e))
                break
            if len(s["position"]):
                end = int(s["position"][-1] + s["size"][-1])
                self.last_read = int(s["last_offset"][-1])
        self.end = end

    def _damage(self, path: str, position: int, size: int | None, next_base: int | None, why: str) -> None:
        self.complete = False
        left = (size - position) if size is not None else 0
        r = UnreadableRange(path, position, max(left, 0), self.last_read,
                            None if next_base is None or next_base < 0 else next_base, why)
        last = self.last_read if self.last_read is not None else -1
        for pid, first in sorted(self.ongoing.first_offsets.items(), key=lambda kv: kv[1]):
            self.unknown.append(UnknownTxn(pid, first, last, r))
        self.ongoing.first_offsets.clear()

    def state(self, aborted: list[AbortedTxn], use_files: bool, files: Iterable[list[AbortedTxn]] = ()) -> TxnState:
        # a transaction a .txnindex file lists as aborted is known (even where not every segment has
        # one, a present entry is the broker's record of that ABORT), whatever the damage hid
        known = {(t.producer_id, t.first_offset) for t in aborted}
        listed = {(t.producer_id, t.first_offset): t for entries in files for t in entries}
        hidden = [listed[k] for k in dict.fromkeys((u.producer_id, u.first_offset) for u in self.unknown)
                  if k in listed and k not in known]
        if hidden:  # ABORT markers in the damage that a .txnindex recorded: aborted, as the file says
            aborted = sorted(aborted + hidden, key=lambda t: t.last_offset)
            known |= {(t.producer_id, t.first_offset) for t in hidden}
        unknown = tuple(u for u in self.unknown if (u.producer_id, u.first_offset) not in known)
        open_first = self.ongoing.first_unstable_offset()
        firsts = [u.first_offset for u in unknown] + ([] if open_first is None else [open_first])
        return TxnState(aborted, min(firsts) if firsts else None, use_files, unknown, open_first)


def _follow_from(segs: list[LogSegment], start: tuple[int, int] | None, follower: _Follower,
                 scan: SegmentScan) -> tuple[int, int]:
    """Follow the segments' batches from (segment base, byte position) on; returns where the last
    segment's complete batches end, as (its base offset, byte position)."""
    for k, seg in enumerate(segs):
        pos = 0
        if start is not None:
            if seg.base_offset < start[0]:
                continue
            if seg.base_offset == start[0]:
                pos = start[1]
        nxt = segs[k + 1].base_offset if k + 1 < len(segs) else None
        follower.segment(seg.path(".log"), scan(seg, pos, False), seg.size, nxt, pos,
                         lambda end, seg=seg: seg.log.incomplete(end, "the segment"))  # type: ignore[misc]
    return (segs[-1].base_offset, follower.end) if segs else (0, 0)


def _ongoing_at_start(log: Log) -> OngoingTxns:
    """The transactions open at the first segment: none at offset 0, else from a local directory's
    producer snapshot at that offset (kbatch.log.producer_state.ongoing_at); unknown: none."""
    from .. import _fs

    if not log.segments or _fs.is_remote(log.directory):
        return OngoingTxns()
    return ongoing_at(log.directory, log.segments[0].base_offset) or OngoingTxns()


def cached_transaction_state(log: Log) -> TxnState | None:
    """transaction_state(log) when it is known for the log as it is now, else None (no reading)."""
    hit = _STATES.get(log)
    if hit is not None and hit.key == tuple((seg.base_offset, seg.size) for seg in log.segments):
        return hit.state
    return None


def transaction_state(log: Log, scan: SegmentScan | None = None) -> TxnState:
    """The log's aborted transactions and first unstable offset. Cached per Log; when the log
    only grew since (appends), the header pass goes on from where it ended. `scan`: where the
    batch headers come from (read_log's)."""
    scan = scan if scan is not None else _scan_segment
    segs = list(log.segments)
    key = tuple((seg.base_offset, seg.size) for seg in segs)
    hit = _STATES.get(log)
    if hit is not None and hit.key == key:
        return hit.state
    files = [_segment_source(seg).txn_index() for seg in segs]
    use_files = bool(segs) and all(f is not None for f in files)
    grew = (hit is not None and hit.complete and len(key) >= len(hit.key) > 0 and key[:len(hit.key) - 1] ==
            hit.key[:-1] and key[len(hit.key) - 1][0] == hit.key[-1][0] and key[len(hit.key) - 1][1] >= hit.key[-1][1])
    if grew:
        assert hit is not None
        follower = _Follower(hit.ongoing.copy(), list(hit.derived), hit.last_read)
        resume = _follow_from(segs, hit.resume, follower, scan)
    else:
        follower = _Follower(_ongoing_at_start(log), [])
        resume = _follow_from(segs, None, follower, scan)
    # the files, as a broker reads them, and any ABORT marker they miss (from the header pass made anyway)
    parsed = [TransactionIndex.parse(f or b"", seg.path(".txnindex")) for seg, f in zip(segs, files)]
    aborted = merge_aborted(parsed if use_files else None, follower.derived)
    state = follower.state(aborted, use_files, parsed)
    _STATES[log] = _Followed(key, resume, follower.ongoing, follower.derived, follower.complete, state,
                             follower.last_read)
    return state


def undecided_at(state: TxnState, offset: int) -> UnreadableRange | None:
    """The damage a read_committed read stopping at `offset` (its last stable offset) meets when
    that offset is the first of a transaction unreadable bytes leave undecided (UnknownTxn), else
    None: kbatch serve's Fetch answers CORRUPT_MESSAGE there, as read_log raises."""
    for u in state.unknown:
        if u.first_offset == offset:
            return _unknown_range(u)
    return None


def collect_aborted_txns(aborted: Iterable[AbortedTxn], fetch_offset: int, upper_bound_offset: int
                         ) -> list[AbortedTxn]:
    """The aborted transactions overlapping [fetch_offset, upper_bound_offset), sorted by first
    offset (what a Fetch response lists: LogSegment.collectAbortedTxns over the segments read)."""
    return sorted((t for t in aborted if t.last_offset >= fetch_offset and t.first_offset < upper_bound_offset),
                  key=lambda t: (t.first_offset, t.last_offset))


def last_stable_offset(log: Log) -> int:
    """The log end offset, or the first offset of the earliest transaction with no marker yet."""
    end = log.end_offset()
    fuo = transaction_state(log).first_unstable_offset
    return end if fuo is None else min(fuo, end)


class AbortedFilter:
    """The consumer's half of read_committed: fed batches in offset order, says which data
    batches belong to aborted transactions. A producer joins the aborted set once a batch reaches
    the first offset of one of its aborted transactions (the list sorted by first offset), its
    transactional data batches are dropped while it is there, and its ABORT marker takes it out."""

    def __init__(self, aborted: Iterable[AbortedTxn], unknown: Iterable[UnknownTxn] = ()) -> None:
        self._pending = sorted(aborted, key=lambda t: t.first_offset)
        self._next = 0
        self._active: set[int] = set()
        #: transactions whose marker may be in unreadable bytes: producer -> [(first, last offset)]
        self._unknown: dict[int, list[tuple[int, int]]] = {}
        for u in unknown:
            self._unknown.setdefault(u.producer_id, []).append((u.first_offset, u.last_offset))

    def is_aborted(self, batch: Batch) -> bool:
        """Whether a read_committed consumer leaves this batch's records out: a data batch of an
        aborted transaction, or of one whose fate unreadable bytes hide (UnknownTxn)."""
        from .producer_state import marker_type

        return self._judge(batch.magic, batch.attributes, batch.producer_id, batch.base_offset, batch.last_offset,
                           lambda: marker_type(batch))

    def aborted_rows(self, s: Window, start: int, stop: int) -> np.ndarray:
        """is_aborted for rows [start, stop) of a scan window, from its header columns (only
        transactional control batches are decoded): a bool array. The rows must come in offset
        order after every batch judged before, as for is_aborted."""
        from ..record.file_records import batch_at
        from .producer_state import marker_type

        out = np.zeros(stop - start, bool)
        magic, attrs = s["magic"][start:stop], s["attributes"][start:stop]
        # only transactional v2 batches can be aborted or end a transaction: the others are not
        # judged (judging them would only move the pending list on, which the next one does too)
        rows = np.flatnonzero((magic >= 2) & ((attrs & W.TRANSACTIONAL_FLAG_MASK) != 0))
        if not len(rows):
            return out
        pid, base, last = s["producer_id"], s["base_offset"], s["last_offset"]
        for r in rows.tolist():
            j = start + r
            out[r] = self._judge(2, int(attrs[r]), int(pid[j]), int(base[j]), int(last[j]),
                                 lambda j=j: marker_type(batch_at(s, j)))  # type: ignore[misc]
        return out

    def _judge(self, magic: int, attributes: int, producer_id: int, base_offset: int, last_offset: int,
               marker: Callable[[], int | None]) -> bool:
        if magic < 2:
            return False
        transactional = bool(attributes & W.TRANSACTIONAL_FLAG_MASK)
        control = bool(attributes & W.CONTROL_FLAG_MASK)
        if self._unknown and transactional and not control:
            for lo, hi in self._unknown.get(producer_id, ()):
                if lo <= base_offset <= hi:
                    return True
        while self._next < len(self._pending) and last_offset >= self._pending[self._next].first_offset:
            self._active.add(self._pending[self._next].producer_id)
            self._next += 1
        if not transactional or producer_id not in self._active:
            return False
        if control:
            if marker() == W.ControlRecordType.ABORT:
                self._active.discard(producer_id)
            return False
        return True


# ------------------------------------------------------------------------------------ reading
class FetchResult:
    """One read of a Log from `start_offset` (see read_log)."""

    def __init__(self, log: Log, start_offset: int, end_offset: int | None, isolation: IsolationLevel,
                 verify_crc: bool, skip_unreadable: bool, scan: SegmentScan | None = None) -> None:
        self.log = log
        #: how a segment's batch headers are read from a byte position (default: its .log scanned)
        self.scan: SegmentScan = scan if scan is not None else _scan_segment
        self.start_offset = start_offset
        self.isolation = isolation
        self.verify_crc = verify_crc
        self.skip_unreadable = skip_unreadable
        self.high_watermark = log.end_offset()
        committed = isolation == IsolationLevel.READ_COMMITTED
        state = transaction_state(log, scan) if committed else None
        # a transaction whose marker may be in unreadable bytes (UnknownTxn) is damage, not an LSO: a
        # strict read stops at its first offset and raises there (_check_unknown); a skipping one
        # leaves its records out and goes on to the LSO of the transactions really open
        first_unstable = None if state is None else (
            state.first_open_offset if skip_unreadable else state.first_unstable_offset)
        self.last_stable_offset = (self.high_watermark if first_unstable is None
                                   else min(first_unstable, self.high_watermark))
        upper = self.last_stable_offset if committed else self.high_watermark
        #: reading stops before this offset (the end asked for, the LSO for read_committed, the log end)
        self.upper_offset = upper if end_offset is None else min(upper, end_offset)
        #: the transactions read_committed cannot judge, overlapping the offsets read
        asked = end_offset if end_offset is not None else self.high_watermark
        self.unknown: list[UnknownTxn] = [] if state is None else [
            u for u in state.unknown
            if u.first_offset <= self.upper_offset and u.first_offset < asked and u.last_offset >= start_offset]
        #: the aborted transactions overlapping the offsets read (read_committed), sorted by first offset
        self.aborted: list[AbortedTxn] = ([] if state is None else
                                          collect_aborted_txns(state.aborted, start_offset, self.upper_offset))
        #: every range of bytes met that could not be read
        self.unreadable: list[UnreadableRange] = []
        #: what windows() handed out so far: batches, and the bytes they span in the segments (a
        #: reader's pushdown shows here: bytes an index lookup skipped are never counted)
        self.batches_read = 0
        self.bytes_read = 0
        #: a strict read_committed read whose upper bound is the first offset of a transaction that
        #: unreadable bytes leave undecided: the range it raises at once it gets there (else None)
        stops = [u for u in self.unknown if u.first_offset == self.upper_offset] if not skip_unreadable else []
        self.undecided: UnreadableRange | None = _unknown_range(stops[0]) if stops else None
        if skip_unreadable:
            for u in self.unknown:
                self._note(_unknown_range(u))

    # ---- holes
    def _hole(self, i: int, position: int, after: int | None, reason: str) -> UnreadableRange:
        """Record the bytes of segment i from `position` on as unreadable."""
        segs = self.log.segments
        seg = segs[i]
        nxt = segs[i + 1].base_offset if i + 1 < len(segs) else None
        return self._note(UnreadableRange(seg.path(".log"), position, seg.size - position, after, nxt, reason))

    def _fail(self, r: UnreadableRange) -> None:
        if not self.skip_unreadable:
            raise _unreadable_error(r)

    def _note(self, r: UnreadableRange) -> UnreadableRange:
        """Record `r` in `unreadable`, once per (file, byte position)."""
        for seen in self.unreadable:
            if (seen.path, seen.position) == (r.path, r.position):
                return seen
        self.unreadable.append(r)
        return r

    def _check_unknown(self) -> None:
        """A strict read_committed read that stopped at a transaction unreadable bytes leave
        undecided says so (UnknownTxn), as it says every other damage."""
        if self.undecided is not None:
            self._fail(self._note(self.undecided))

    def _start_position(self, i: int, offset: int) -> int | None:
        """Where segment i's batches reaching `offset` start (its index, checked against the log).
        An offset inside bytes the lookup read around is one of them: _InHole."""
        seg = self.log.segments[i]
        if offset <= seg.base_offset:
            return 0
        found = seg.translate_offset(offset)
        if found is not None:
            u = hole_at(seg, offset, found.offset)
            if u is not None:
                raise _InHole(u)
            # from the index entry the lookup started at: the batches before the one found show
            # whether its offsets follow theirs (offset_disorder; the rows before are not read)
            return min(found.position, seg._entry_position(offset))
        return None

    def windows(self) -> Iterator[FetchedWindow]:
        """The batches read (those with offsets reaching [start_offset, upper_offset), in offset
        order, control batches included), as slices of the segments' scan windows: for readers that
        work on header columns and byte ranges (stats, export) rather than batch by batch. The same
        rules and errors as batches(), which is built on it; no aborted marks here (AbortedFilter)."""
        for w in self._windows():
            a, b = w.span()
            self.batches_read += w.stop - w.start
            self.bytes_read += b - a
            yield w
        self._check_unknown()

    def _windows(self) -> Iterator[FetchedWindow]:
        from ..record.file_records import crc_error_at

        segs = self.log.segments
        offset, upper = self.start_offset, self.upper_offset
        if offset >= upper or not segs:
            return
        i = 0
        while i + 1 < len(segs) and segs[i + 1].base_offset <= offset:
            i += 1
        prev_last: int | None = None   # the last offset of the batches before (for offset_disorder)
        for k in range(i, len(segs)):
            seg = segs[k]
            active = k == len(segs) - 1
            if k + 1 < len(segs) and segs[k + 1].base_offset <= offset:
                continue
            try:
                pos = self._start_position(k, offset)
            except _InHole as h:
                u = h.range
                r = UnreadableRange(u.file, u.position, u.size, u.after_offset, u.before_offset,
                                    f"{u.why}; offset {offset} is in them, the next readable batch starts at "
                                    f"offset {u.before_offset}")
                self.unreadable.append(r)
                self._fail(r)
                continue
            except StorageError:
                raise
            except KBatchError as e:
                self._fail(self._hole(k, e.position or 0, None, str(e)))
                continue
            nxt_base = None if active else segs[k + 1].base_offset
            if pos is None:
                hit = unreadable_at(seg, offset)
                if hit is not None and not partial_tail_ignored(nxt_base):
                    self._fail(self._hole(k, hit[0], hit[1], hit[2]))
                continue
            last: int | None = None
            gen = self.scan(seg, pos, self.verify_crc)
            while True:
                try:
                    s = next(gen)
                except StopIteration as stop:
                    end = stop.value
                    if end < seg.size and not partial_tail_ignored(nxt_base):
                        self._fail(self._hole(k, end, last, seg.log.incomplete(end, "the segment")))
                    break
                except StorageError:
                    raise
                except KBatchError as e:
                    self._fail(self._hole(k, e.position if e.position is not None else pos, last, str(e)))
                    break
                n = len(s["position"])
                reach = np.flatnonzero(s["last_offset"] >= offset)
                a = int(reach[0]) if len(reach) else n
                beyond = np.flatnonzero(s["base_offset"][a:] >= upper)
                b = a + int(beyond[0]) if len(beyond) else n
                disorder = offset_disorder(s, a, prev_last, nxt_base)
                if disorder is not None and b < n and disorder[0] > b:
                    # past the read's end: only a batch claiming offsets beyond the log's end (followed
                    # by batches below them) is the reason it ended; else the read ends before it
                    if int(s["base_offset"][b]) >= self.high_watermark:
                        disorder = (b, f"batch at byte {int(s['position'][b])} has offsets "
                                       f"{int(s['base_offset'][b])}..{int(s['last_offset'][b])}, past the log end "
                                       f"offset {self.high_watermark}, and batches with lower offsets follow it")
                    else:
                        disorder = None
                upto = b if disorder is None else min(b, disorder[0])
                bad = np.flatnonzero(~s["crc_valid"][a:upto].astype(bool)) if self.verify_crc else beyond[:0]
                c = a + int(bad[0]) if len(bad) else upto
                if c > a:
                    last = int(s["last_offset"][c - 1])
                    prev_last = last
                    yield FetchedWindow(seg, s, a, c)
                if len(bad):
                    crc = crc_error_at(s, c)
                    self._fail(self._hole(k, crc.position or 0, last, str(crc)))
                    break  # with skip_unreadable: on to the next segment
                if disorder is not None and disorder[0] <= b:
                    # a base offset no CRC covers, forged or damaged: never a silent end or an offset twice
                    self._fail(self._hole(k, int(s["position"][c]), last, disorder[1]))
                    break
                if len(beyond):
                    return
                if n:
                    prev_last = max(prev_last if prev_last is not None else -1, int(s["last_offset"][n - 1]))
            offset = max(offset, (last + 1) if last is not None else offset)

    def batches(self) -> Iterator[FetchedBatch]:
        """Batches with offsets reaching [start_offset, upper_offset), in offset order, control
        batches included; under read_committed, `aborted` marks the data batches of aborted
        transactions. Raises UnreadableDataError at bytes it cannot read (after the batches before
        them), unless skip_unreadable."""
        from ..record.file_records import batch_at

        filt = self._filter()
        for w in self.windows():
            for j in range(w.start, w.stop):
                b = batch_at(w.window, j)
                yield FetchedBatch(b, filt.is_aborted(b) if filt is not None else False)

    def record_batches(self, topic: str | None, partition: int | None, *, check_first: bool = False,
                       **decode: Any) -> Iterator[pa.RecordBatch]:
        """The records records() gives, as Arrow record batches in Spark's Kafka-source columns
        (kbatch.columns.decode.iter_record_batches; `decode`: its options, e.g. include_headers,
        tombstone, batch_fields), a scan window at a time. check_first: walk the batches' headers
        first, so that unreadable bytes raise before any row is yielded (a table's rows come
        from a read that either reads everything asked for or nothing)."""
        import pyarrow as pa

        from ..columns.decode import iter_record_batches
        from ..record.file_records import batch_at

        if check_first:
            for _ in self.windows():
                pass
            self.unreadable.clear()  # the read below meets (and records) the same ranges again
        filt = self._filter()
        for w in self.windows():
            a, b = w.span()
            origin = w.window["origin"]
            lo: list[int] = []
            hi: list[int] = []
            if filt is not None and (self.aborted or self.unknown):
                for j in range(w.start, w.stop):
                    batch = batch_at(w.window, j)
                    if filt.is_aborted(batch):
                        lo.append(batch.base_offset)
                        hi.append(batch.last_offset)
            a_lo, a_hi = np.array(lo, np.int64), np.array(hi, np.int64)
            for rb in iter_record_batches(memoryview(w.window["buf"])[a - origin:b - origin], topic, partition,
                                          start_offset=self.start_offset, end_offset=self.upper_offset,
                                          verify_crc=self.verify_crc, **decode):
                if len(a_lo):
                    off = rb.column(rb.schema.get_field_index("offset")).to_numpy()
                    i = np.searchsorted(a_lo, off, side="right") - 1
                    dropped = (i >= 0) & (off <= a_hi[np.maximum(i, 0)])
                    if dropped.any():
                        rb = rb.filter(pa.array(~dropped))
                if rb.num_rows:
                    yield rb

    def _filter(self) -> AbortedFilter | None:
        if self.isolation != IsolationLevel.READ_COMMITTED:
            return None
        return AbortedFilter(self.aborted, self.unknown)

    def problems(self, lookups: Iterable[Lookup] = ()) -> list[str]:
        """What makes this read's answer doubtful beyond the ranges in `unreadable` (which a
        reader reports with its offsets): see damage_verdict; `lookups`: the time lookups that
        chose the offsets read (cat's s@T / e@T)."""
        return self.verdict(lookups)[0]

    def verdict(self, lookups: Iterable[Lookup] = ()) -> tuple[list[str], list[str]]:
        """damage_verdict(log, lookups) without what `unreadable` already names."""
        named = tuple(f"{r.path}: {r.size} bytes from byte {r.position} could not be read" for r in self.unreadable)
        problems, notes = damage_verdict(self.log, lookups)
        return [p for p in problems if not p.startswith(named)], [p for p in notes if not p.startswith(named)]

    def data_rows(self) -> Iterator[tuple[FetchedWindow, np.ndarray]]:
        """Per window read (windows()), the rows of the batches whose records a consumer application
        gets, in offset order: data batches, and under read_committed not those of aborted
        transactions (AbortedFilter.aborted_rows: from the header columns). records() reads
        these rows; a reader working on a window's columns (kbatch grep) takes them as they are."""
        filt = self._filter()
        for w in self.windows():
            s, a, b = w.window, w.start, w.stop
            keep = ~((s["magic"][a:b] >= 2) & ((s["attributes"][a:b] & W.CONTROL_FLAG_MASK) != 0))
            if filt is not None:
                keep &= ~filt.aborted_rows(s, a, b)
            yield w, a + np.flatnonzero(keep)

    def records(self, select: Select | None = None) -> Iterator[tuple[Batch, Record]]:
        """(batch, record) as a consumer application gets them: offsets in [start_offset,
        upper_offset), control records never, records of aborted transactions not under
        read_committed. `select(window, rows)`: which records of those rows' batches are wanted,
        as (batch, records) in offset order (kbatch grep's search, kbatch.record.search); every
        record of every row when None."""
        from ..record.file_records import batch_at

        lo, hi = self.start_offset, self.upper_offset
        for w, rows in self.data_rows():
            picked: Iterable[tuple[Batch, Iterable[Record]]]
            if select is None:
                picked = ((b, b) for b in (batch_at(w.window, j) for j in rows.tolist()))
            else:
                picked = select(w.window, rows)
            for b, recs in picked:
                for r in recs:
                    if r.offset < lo:
                        continue
                    if r.offset >= hi:
                        return
                    yield b, r


#: records()'s `select`: (a scan window, rows of it) -> (batch, the records wanted) in offset order
Select = Callable[["Window", np.ndarray], Iterable[tuple["Batch", Iterable["Record"]]]]


#: a lookup a reader made: (what it is called on stderr, its target, the answer)
Lookup = tuple[str, "int | OffsetSpec", "OffsetAndTimestamp | None"]


def damage_verdict(log: Log, lookups: Iterable[Lookup] = ()) -> tuple[list[str], list[str]]:
    """(problems, notes) of what `log` met so far, the one rule every command's exit status takes:

    - problems (exit 1): everything the Log had to work around that is not bytes it could not
      read (an index entry the log contradicts, segments left out), and each unread range that
      could have held a lookup's answer (Log.unread_for), said once, then per lookup;
    - notes (said, exit unchanged): the other unread ranges met (by index rebuilds and lookups),
      which no answer came from; never the partial batch at the end of the last segment, which
      Kafka ignores.
    Ranges a read went through are a reader's own: FetchResult.unreadable."""
    segs = log.segments
    unread = {u.message: u for seg in segs for u in seg.unread}
    tail = {u.message for u in segs[-1].unread if u.partial and u.before_offset is None} if segs else set()
    problems = [p for p in log.problems if p not in unread]
    doubted: list[str] = []
    lines: list[str] = []
    for label, target, answer in lookups:
        for u in log.unread_for(target, answer):
            if u.message not in doubted:
                doubted.append(u.message)
            lines.append(f"{label}: the answer could have been in the {u.size} bytes from byte {u.position} of "
                         f"{u.file}, which could not be read")
    notes = [p for p in log.problems if p in unread and p not in doubted and p not in tail]
    return problems + doubted + lines, notes


def read_log(log: Log, start_offset: int, end_offset: int | None = None, *,
             isolation: IsolationLevel | int = IsolationLevel.READ_UNCOMMITTED, verify_crc: bool = True,
             skip_unreadable: bool = False, scan: SegmentScan | None = None) -> FetchResult:
    """Read `log` from `start_offset` (up to `end_offset`, exclusive, when given) as a Kafka consumer
    with `isolation` would (see the module docstring). `scan(segment, position, verify_crc)`: where
    the batch headers come from (default: the segment's .log scanned; kbatch.log.summary replays
    remembered ones), the rules applied to them are the same."""
    return FetchResult(log, int(start_offset), None if end_offset is None else int(end_offset),
                       IsolationLevel(isolation), verify_crc, skip_unreadable, scan)


__all__ = ["IsolationLevel", "read_log", "FetchResult", "FetchedBatch", "FetchedWindow", "UnreadableRange", "UnreadableDataError",
           "partial_tail_ignored", "Lookup", "damage_verdict", "hole_at", "unreadable_at",
           "AbortedFilter", "Select", "TxnSource", "TxnState", "UnknownTxn", "undecided_at", "OffsetOrder", "offset_disorder", "aborted_transactions", "merge_aborted", "transaction_state", "cached_transaction_state",
           "collect_aborted_txns", "last_stable_offset"]
