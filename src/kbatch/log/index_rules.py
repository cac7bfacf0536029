"""What a valid `.index` / `.timeindex` entry is, for indexes written by a Kafka broker of any version.

A rebuild (kbatch.rebuild_indexes, a broker's recovery) writes one canonical form; brokers that
appended the same `.log` wrote others, all of which the broker loads and serves. The rules below
accept every form a broker writes and flag only entries that would make a lookup wrong or that no
broker writes (docs/broker-data.md has the table with the Kafka sources):

`.index` entry (O, P), next entry at P2 (or the end of the file):
- a batch starts at byte P;
- O is the last offset of a batch starting in [P, P2): Kafka 2.0+ (KAFKA-6264), the append's
  largest offset, one batch on a leader, a fetched chunk of batches on a follower; or
- O is the first offset of the batch at P: Kafka 0.8 - 1.1 indexed the append's first offset.
Anything else is damage: a lookup of an offset below O could start after its batch.

`.timeindex` entry (T, O):
- O lies in a batch B of the segment, T is the segment's running max timestamp at B (batch max
  timestamps, DESIGN.md decision 5 floors) and T is first reached at B (the broker only moves
  its max on a strictly larger timestamp);
- O is B's last offset (recovery in every version; appends from Kafka 3.7 on, followers, compressed
  and converted batches); or
- O is the first record of B with timestamp T: leaders of Kafka 0.11 - 3.6 passed LogValidator's
  offsetOfMaxTimestamp (the record's offset) to LogSegment.append for uncompressed v2 batches.
Timestamps increase and offsets do not go back, as TimeIndex.maybeAppend requires.

`.txnindex` entries against the segment's transaction markers (check_txn_index): what a broker
writes and what its cleaner leaves.

Each finding is a damage problem (`problem=True`) or a note naming the older broker form.
"""
from __future__ import annotations

from collections.abc import Callable, Collection, Iterable, Sequence
from typing import TYPE_CHECKING, Any, NamedTuple

import numpy as np
import numpy.typing as npt

from .. import _wire as W
from ..record.batch import scan_headers
from ..record.file_records import iter_batches
from ..errors import FileChangedError, KBatchError

if TYPE_CHECKING:
    from .index import AbortedTxn
    from ..record.batch import Batch
    from ..record.file_records import FileRecords

def time_floor(magic: int, attributes: int) -> int:
    """Below which a batch's max timestamp is ignored by the time index (DESIGN.md decision 5):
    -1 as in Kafka, Long.MIN_VALUE for extended (bit 7) batches so historical data is indexed."""
    if magic == 2 and attributes & W.TIMESTAMP_EXTENDED_FLAG_MASK:
        return W.INT64_MIN
    return W.NO_TIMESTAMP


#: time_entry_form's answers: the entry names its batch's last offset, or (0.11-3.6 leaders) the
#: first record of the batch holding its timestamp
TIME_ENTRY_LAST = "last offset"
TIME_ENTRY_RECORD = "record offset"


def time_entry_form(timestamp: int, offset: int, batch_base: int, batch_last: int, batch_max: int,
                    first_offset_with: Callable[[int], int | None]) -> str | None:
    """How a .timeindex entry (T, O) names the batch B that holds O (batch_base <= O <= batch_last),
    where T is the running max at B: TIME_ENTRY_LAST when O is B's last offset, TIME_ENTRY_RECORD
    when O is the first record of B whose timestamp is T (B's max; Kafka 0.11-3.6 leaders), None
    when it names B in no form a broker writes. first_offset_with(T) decodes B: the offset of its
    first record with timestamp T, or None (called only for the record form)."""
    if not batch_base <= offset <= batch_last:
        return None
    if offset == batch_last:
        return TIME_ENTRY_LAST
    if batch_max != timestamp:
        return None
    return TIME_ENTRY_RECORD if first_offset_with(timestamp) == offset else None


NOTE_INDEX_FIRST_OFFSET = ("names the first offset of the batch at its position, as Kafka 0.8-1.1 brokers "
                           "wrote .index entries (2.0+ name the append's last offset)")
NOTE_INDEX_CHUNK = ("names the last offset of a later batch before the next entry: one entry for a follower's "
                    "append of a fetched chunk of batches")
NOTE_TIME_RECORD_OFFSET = ("names the record holding the batch's max timestamp, as Kafka 0.11-3.6 leaders "
                           "wrote .timeindex entries for uncompressed batches (3.7+ and every recovery name "
                           "the batch's last offset)")


class IndexFinding(NamedTuple):
    """One entry the rules flag: damage (`problem`) or a valid older-broker form (a note)."""

    file: str
    slot: int           # entry number
    position: int       # byte position of the entry in the index file
    entry: tuple[int, int]  # (offset, position) for .index, (timestamp, offset) for .timeindex
    problem: bool
    message: str


class SegmentBatches:
    """Batch header columns of a .log (a buffer, or a segment.FileRecords read in windows) up to
    the first batch that cannot be framed, and the segment's running max timestamp, as the index
    rules need them."""

    # header columns, one row per batch (set from the scan by name)
    position: npt.NDArray[np.int64]
    size: npt.NDArray[np.int64]
    base_offset: npt.NDArray[np.int64]
    last_offset: npt.NDArray[np.int64]
    max_timestamp: npt.NDArray[np.int64]
    magic: npt.NDArray[np.int64]
    attributes: npt.NDArray[np.int64]

    def __init__(self, buf: FileRecords | bytes | bytearray | memoryview,
                 columns: dict[str, Any] | None = None) -> None:
        """`columns`: the segment's header columns when a walk already has them (from the start of
        the file up to where it could be read), so the file is not scanned again."""
        self.buf = buf
        names = ("position", "size", "base_offset", "last_offset", "max_timestamp", "magic", "attributes")
        if columns is not None:
            for k in names:
                setattr(self, k, np.asarray(columns[k], dtype=np.int64))
        else:
            cols: dict[str, list[npt.NDArray[np.int64]]] = {k: [] for k in names}
            try:
                scans: Iterable[dict[str, Any]] = (buf.scan(reuse=True) if not isinstance(buf, (bytes, bytearray, memoryview))
                                                   else scan_headers(memoryview(buf)))
                for s in scans:
                    for k in cols:
                        cols[k].append(np.asarray(s[k], dtype=np.int64))
            except FileChangedError:
                raise  # the file changed under us: nothing here can be judged against it
            except KBatchError:
                pass  # the rules judge entries against the batches that can be read
            for k, parts in cols.items():
                setattr(self, k, np.concatenate(parts) if parts else np.zeros(0, dtype=np.int64))
        n = len(self.position)
        self.count = n
        # effective max timestamp per batch (INT64_MIN when it does not count: time_floor, decision 5)
        floor = np.where((self.magic == 2) & ((self.attributes & W.TIMESTAMP_EXTENDED_FLAG_MASK) != 0),
                         np.int64(W.INT64_MIN), np.int64(W.NO_TIMESTAMP))
        has = self.max_timestamp > floor
        eff = np.where(has, self.max_timestamp, np.int64(W.INT64_MIN))
        self.running = np.maximum.accumulate(eff) if n else eff
        self.running_known = np.logical_or.accumulate(has) if n else has
        self._first_inner: dict[int, int] = {}

    @property
    def last_offset_of_segment(self) -> int | None:
        return int(self.last_offset[-1]) if self.count else None

    def batch_at(self, position: int) -> int | None:
        """Row of the batch starting at `position`, or None."""
        i = int(np.searchsorted(self.position, position))
        return i if i < self.count and int(self.position[i]) == position else None

    def batch_holding(self, offset: int) -> int | None:
        """Row of the batch whose offsets [base, last] hold `offset`, or None."""
        i = int(np.searchsorted(self.last_offset, offset, side="left"))
        if i < self.count and self.first_offset(i) <= offset:
            return i
        return None

    def first_offset(self, i: int) -> int:
        """The first offset batch i holds: its base offset; for a compressed legacy wrapper (whose
        header names only its last offset) the first inner message's offset."""
        base = int(self.base_offset[i])
        if self.magic[i] < 2 and self.attributes[i] & W.LEGACY_COMPRESSION_CODEC_MASK:
            if i not in self._first_inner:
                try:
                    self._first_inner[i] = self.batch(i).base_offset
                except KBatchError:
                    self._first_inner[i] = base
            return self._first_inner[i]
        return base

    def batch(self, i: int) -> Batch:
        """The batch object of row i (records decoded on demand)."""
        pos, size = int(self.position[i]), int(self.size[i])
        data = (self.buf.read(pos, size) if not isinstance(self.buf, (bytes, bytearray, memoryview))
                else memoryview(self.buf)[pos:pos + size])
        return next(iter_batches(data, verify_crc=False))

    def running_max(self, i: int) -> int | None:
        """The segment's max timestamp over batches 0..i (None when none counts yet)."""
        return int(self.running[i]) if self.running_known[i] else None


def _where(slot: int, entry_size: int) -> int:
    return slot * entry_size


def check_offset_index(path: str, entries: Iterable[tuple[int, int]], sb: SegmentBatches) -> list[IndexFinding]:
    """Findings for the (offset, position) entries of a .index against the segment's batches."""
    out: list[IndexFinding] = []
    es = W.OFFSET_INDEX_ENTRY_SIZE
    entry_list = list(entries)
    end_of_log = int(sb.position[-1] + sb.size[-1]) if sb.count else 0
    prev: tuple[int, int] | None = None
    for slot, (off, pos) in enumerate(entry_list):
        def find(problem: bool, msg: str) -> None:
            out.append(IndexFinding(path, slot, _where(slot, es), (off, pos), problem,
                                    f"entry {slot} (offset {off}, position {pos}) {msg}"))
        if prev is not None and pos <= prev[1]:
            find(True, f"does not move past entry {slot - 1} (offset {prev[0]}, position {prev[1]})")
            prev = (off, pos)
            continue
        prev = (off, pos)
        i = sb.batch_at(pos)
        if i is None:
            msg = (f"entry {slot} (offset {off}) points to position {pos}, where no batch starts" if pos < end_of_log
                   else f"entry {slot} (offset {off}) points to position {pos}, past the end of the log's "
                        f"complete batches ({end_of_log} bytes)")
            out.append(IndexFinding(path, slot, _where(slot, es), (off, pos), True, msg))
            continue
        nxt = entry_list[slot + 1][1] if slot + 1 < len(entry_list) else None
        j = (int(np.searchsorted(sb.position, nxt, side="left")) - 1) if nxt is not None and nxt > pos else sb.count - 1
        j = max(j, i)
        lasts = sb.last_offset[i:j + 1]
        if off == int(lasts[0]):
            continue
        if off in set(lasts.tolist()):
            find(False, NOTE_INDEX_CHUNK)
            continue
        first = sb.first_offset(i)
        if off == first:
            find(False, NOTE_INDEX_FIRST_OFFSET)
        elif first <= off <= int(lasts[-1]):
            find(True, f"names an offset inside the batches it covers ({first}..{int(lasts[-1])}) that is "
                       f"neither the first offset of the batch at its position nor the last offset of a batch "
                       f"before the next entry")
        else:
            find(True, f"but the batches from that position up to the next entry hold offsets "
                       f"{first}..{int(lasts[-1])}")
    return out


def check_time_index(path: str, entries: Iterable[tuple[int, int]], sb: SegmentBatches) -> list[IndexFinding]:
    """Findings for the (timestamp, offset) entries of a .timeindex against the segment's batches."""
    out: list[IndexFinding] = []
    es = W.TIME_INDEX_ENTRY_SIZE
    prev: tuple[int, int] | None = None
    for slot, (ts, off) in enumerate(entries):
        def find(problem: bool, msg: str) -> None:
            out.append(IndexFinding(path, slot, _where(slot, es), (ts, off), problem,
                                    f"entry {slot} (timestamp {ts}, offset {off}) {msg}"))
        if prev is not None and (ts <= prev[0] or off < prev[1]):
            find(True, f"goes back from entry {slot - 1} (timestamp {prev[0]}, offset {prev[1]})")
            prev = (ts, off)
            continue
        prev = (ts, off)
        i = sb.batch_holding(off)
        if i is None:
            find(True, "names an offset that no batch of the segment holds")
            continue
        where = f"the batch at byte {int(sb.position[i])} ({sb.first_offset(i)}..{int(sb.last_offset[i])})"
        m = sb.running_max(i)
        if m != ts:
            out.append(IndexFinding(path, slot, _where(slot, es), (ts, off), True,
                                    f"entry {slot} says the max timestamp up to offset {off} is {ts}, the log says {m}"))
            continue
        before = sb.running_max(i - 1) if i > 0 else None
        if before is not None and before >= ts:
            k = int(np.searchsorted(sb.running, ts, side="left"))
            find(True, f"but timestamp {ts} is first reached in the batch at byte {int(sb.position[k])} "
                       f"(last offset {int(sb.last_offset[k])}), before {where}")
            continue
        if off == int(sb.last_offset[i]):
            continue
        batch_i = i

        def first_with(t: int) -> int | None:
            return next((r.offset for r in sb.batch(batch_i) if r.timestamp == t), None)
        try:
            form = time_entry_form(ts, off, sb.first_offset(i), int(sb.last_offset[i]), int(sb.max_timestamp[i]),
                                   first_with)
        except KBatchError as e:
            find(True, f"names an offset inside {where}, whose records cannot be read: {e}")
            continue
        if form == TIME_ENTRY_RECORD:
            find(False, NOTE_TIME_RECORD_OFFSET)
        else:
            find(True, f"names an offset inside {where} whose record does not hold its max timestamp "
                       f"(the first record with timestamp {ts} is at offset {first_with(ts)})")
    return out


class TxnIndexFinding(NamedTuple):
    """One way a segment's `.txnindex` disagrees with its markers (always damage)."""

    position: int | None   # byte position of the entry in the file (None: the file or an entry is missing)
    entry: int | None      # the entry's number
    message: str


def txn_text(t: AbortedTxn | None) -> str:
    if t is None:
        return "nothing (no such entry)"
    return (f"(producer {t.producer_id}, first offset {t.first_offset}, last offset {t.last_offset}, last stable "
            f"offset {t.last_stable_offset})")


def check_txn_index(have: Sequence[AbortedTxn] | None, want: Sequence[AbortedTxn],
                    commits: Collection[tuple[int, int]], exact: bool = True) -> list[TxnIndexFinding]:
    """A segment's `.txnindex` entries (`have`; None: no file) against the entries its ABORT markers
    give (`want`, from producer_state.OngoingTxns followed from the log's start) and its COMMIT
    markers (`commits`: (producer id, offset)). Every ABORT marker whose transaction still has
    data batches is listed (producer id and marker offset), with a first offset at or before its
    first batch left (compaction removes batches, the entry keeps the original first offset) and,
    when that is the same and the open transactions at the log's start are known (`exact`), the
    last stable offset a broker computes; no entry names a COMMIT marker. An entry whose marker is
    gone (compacted away) and a missing entry for a transaction with no data left (a cleaner drops
    it) are accepted; so is a missing file for a segment with no such marker."""
    out: list[TxnIndexFinding] = []
    needed = [t for t in want if t.first_offset < t.last_offset]  # transactions with data batches
    if have is None:
        if needed:
            out.append(TxnIndexFinding(None, None, (
                f"file is missing: the segment holds {len(needed)} ABORT marker(s) of transactions with data "
                f"(offsets {', '.join(str(t.last_offset) for t in needed[:5])}{', ...' if len(needed) > 5 else ''}), "
                f"each an aborted transaction a broker lists here (a broker serving this segment to read_committed "
                f"consumers would hand out the aborted records); `kbatch reindex` writes it")))
        return out
    listed = {(t.producer_id, t.last_offset): i for i, t in enumerate(have)}
    for w in want:
        i = listed.get((w.producer_id, w.last_offset))
        if i is None:
            if w.first_offset < w.last_offset:
                out.append(TxnIndexFinding(None, None, f"no entry for the aborted transaction {txn_text(w)} (its ABORT "
                                                       f"marker is at offset {w.last_offset}); `kbatch reindex` "
                                                       f"rewrites the file"))
            continue
        h = have[i]
        if h.first_offset > w.first_offset or (
                exact and h.first_offset == w.first_offset and h.last_stable_offset != w.last_stable_offset):
            out.append(TxnIndexFinding(i * W.TXN_INDEX_ENTRY_SIZE, i, f"entry {i} is {txn_text(h)}, the log's markers say "
                                                              f"{txn_text(w)}; `kbatch reindex` rewrites it"))
    for i, h in enumerate(have):
        if (h.producer_id, h.last_offset) in commits:
            out.append(TxnIndexFinding(i * W.TXN_INDEX_ENTRY_SIZE, i, f"entry {i} is {txn_text(h)}, but offset {h.last_offset} "
                                                              f"holds a COMMIT marker of that producer: the transaction "
                                                              f"was committed; `kbatch reindex` rewrites the file"))
    return out


__all__ = ["time_floor", "time_entry_form", "TIME_ENTRY_LAST", "TIME_ENTRY_RECORD", "IndexFinding", "SegmentBatches", "check_offset_index", "check_time_index",
           "TxnIndexFinding", "check_txn_index", "txn_text",
           "NOTE_INDEX_FIRST_OFFSET", "NOTE_INDEX_CHUNK", "NOTE_TIME_RECORD_OFFSET"]
