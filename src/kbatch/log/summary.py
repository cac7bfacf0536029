"""What a partition holds, at metadata speed: counts, bounds and producers from batch headers,
the answers a full read gives (issue 40).

    from kbatch.log.summary import summarize

    s = summarize(log)                       # the whole log, both isolation levels
    s.read_committed.records, s.read_uncommitted.max_timestamp, s.codecs, s.fallbacks
    for f in batch_facts(log): ...           # one BatchFacts per batch read (the audit's rows)

A v2 batch header (61 bytes) holds its record count, offset range, max timestamp, producer,
attributes. The summary walks those headers through the read path itself
(kbatch.log.fetch.read_log: the same batches, the same damage rules: hole_at, unreadable_at,
undecided_at, offset order, CRC; the same transactions: aborted ones left out under
read_committed, control batches never records, reading stops at the last stable offset), and
decodes a batch only where its header cannot give the answer (docs/summary.md has the table):

- the batches at the edges of an offset range, which hold records on both sides of it;
- magic 0/1 entries (a compressed wrapper's count is inside it);
- a v2 batch whose offsets have gaps (compaction), for the first/last record offset;
- the smallest timestamp and the records without one, from CreateTime batches of several records
  (a producer may send them out of order, and baseTimestamp is the delete horizon once the
  cleaner set bit 6, KIP-534): a timestamps-only walk (`timestamps=False` leaves these figures
  out, named in `omitted`, never guessed);
- an empty batch a compaction left (its maxTimestamp is stale) gives no timestamp at all.

`fallbacks` says which figure was decoded from how many batches, and why.

CRCs: every batch's CRC-32C is checked by default (a bit flip inside a record is damage, as the
full read says). The verified headers of a sealed (not the last) segment are remembered in a
cache outside the log directory (SummaryCache: $KBATCH_SUMMARY_CACHE, else
$XDG_CACHE_HOME/kbatch/summaries, else ~/.cache/kbatch/summaries), keyed by the file's identity
(path, size, mtime_ns, inode) and checked against its last batch header's bytes, so the next
summary of an unchanged segment reads no byte of it. The active segment only grows: its verified
prefix [0, N) is remembered (path, device, inode, N, its first and last batch headers' bytes) and a
later summary reads and checks only the bytes appended since (docs/summary.md says what that
trusts). Raw header rows are cached, never answers: the read path derives the LSO, the aborted
transactions and the damage from them again each time. `trust_headers=True` skips the CRCs as
Parquet trusts footers: lengths, magic, offsets order and torn tails are still checked, but a
flipped bit inside a record (its key, value, timestamp delta) goes unseen.
"""
from __future__ import annotations

import bisect
import os
from collections.abc import Callable, Generator, Iterator
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any, NamedTuple

import numpy as np

from .. import _backend
from .. import _wire as W
from ..errors import KBatchError
from .fetch import AbortedFilter, FetchedWindow, IsolationLevel, UnreadableRange, read_log
from .summary_cache import _HEADER_FIELDS, SUMMARY_CACHE_ENV, SummaryCache, _header_size, default_cache_dir

if TYPE_CHECKING:
    from ..record.file_records import Window
    from .partition_log import PartitionLog as Log
    from .segment import LogSegment

#: in-memory header rows kept for the second isolation level's walk (above this, it scans again)
_MEMO_ROWS = 1_000_000
#: the active segment's cached prefix is moved on when at least this many verified bytes follow it
_PREFIX_STEP = 4 << 20


# ------------------------------------------------------------------------------------ results
class BatchFacts(NamedTuple):
    """One batch's header as read (kafka-format.md 3.1), where it is, and what the read made of it."""

    segment: str                 # the segment's .log path
    position: int                # byte position in it
    size: int                    # bytes, the length field's 12 included
    magic: int
    attributes: int
    base_offset: int
    last_offset: int
    partition_leader_epoch: int
    first_timestamp: int         # baseTimestamp (the delete horizon when attribute bit 6 is set)
    max_timestamp: int
    producer_id: int
    producer_epoch: int
    base_sequence: int
    record_count: int            # -1: a magic 0/1 compressed wrapper (inside it)
    crc_ok: bool | None          # None: not checked (trust_headers)
    aborted: bool                # a data batch of an aborted transaction (read_committed facts only)

    @property
    def codec(self) -> str:
        mask = W.COMPRESSION_CODEC_MASK if self.magic >= 2 else W.LEGACY_COMPRESSION_CODEC_MASK
        return _codec_name(self.attributes & mask)

    @property
    def is_control(self) -> bool:
        return self.magic >= 2 and bool(self.attributes & W.CONTROL_FLAG_MASK)

    @property
    def is_transactional(self) -> bool:
        return self.magic >= 2 and bool(self.attributes & W.TRANSACTIONAL_FLAG_MASK)

    @property
    def log_append_time(self) -> bool:
        mask = W.TIMESTAMP_TYPE_MASK if self.magic >= 2 else W.LEGACY_TIMESTAMP_TYPE_MASK
        return self.magic >= 1 and bool(self.attributes & mask)

    @property
    def last_sequence(self) -> int:
        """Kafka's lastSequence (-1 without one)."""
        if self.base_sequence < 0:
            return W.NO_SEQUENCE
        return W.increment_sequence(self.base_sequence, self.last_offset - self.base_offset)


@dataclass
class ProducerSummary:
    """One producer's (id, epoch) data batches a consumer reads."""

    producer_id: int
    producer_epoch: int
    batches: int = 0
    records: int = 0
    first_offset: int | None = None   # its first batch's base offset read
    last_offset: int | None = None    # its last batch's last offset read
    last_sequence: int = W.NO_SEQUENCE


@dataclass
class ReadSummary:
    """What a consumer with one isolation level reads from the range."""

    isolation: str
    upper_offset: int                 # reading stopped before it (the end asked, the LSO, the log end)
    records: int = 0
    first_offset: int | None = None   # of the first record read
    last_offset: int | None = None    # of the last record read
    min_timestamp: int | None = None  # ms; None: no record has one (or omitted: see PartitionSummary.omitted)
    max_timestamp: int | None = None
    records_without_timestamp: int | None = 0
    data_batches: int = 0             # data batches with records read
    aborted_batches: int = 0          # data batches left out as aborted (read_committed)
    aborted_records: int = 0
    producers: list[ProducerSummary] = field(default_factory=list)
    unreadable: list[UnreadableRange] = field(default_factory=list)


@dataclass
class PartitionSummary:
    """A partition (or an offset range of it) from its batch headers: see the module docstring."""

    path: str
    start_offset: int                  # the range asked (the log start by default)
    end_offset: int | None             # exclusive; None: to the end
    log_start_offset: int
    high_watermark: int                # the log end offset
    last_stable_offset: int | None     # (None: read_committed not made)
    segments: int
    log_bytes: int                     # the segments' .log bytes
    bytes: int = 0                     # bytes of the batches read
    batches: int = 0                   # batches read, control and empty ones included
    control_batches: int = 0
    empty_batches: int = 0             # v2 data batches with no record (left by compaction)
    commits: int = 0
    aborts: int = 0
    idempotent_batches: int = 0        # v2 batches with a producer id
    transactional_batches: int = 0     # transactional data batches
    transactional_records: int = 0
    first_batch_offset: int | None = None   # the first batch's base offset
    last_batch_offset: int | None = None    # the last batch's last offset (a marker's, too)
    batch_bytes_min: int | None = None
    batch_bytes_max: int | None = None
    codecs: dict[str, int] = field(default_factory=dict)   # codec -> batches
    magic: dict[int, int] = field(default_factory=dict)    # magic -> batches
    read_uncommitted: ReadSummary | None = None
    read_committed: ReadSummary | None = None
    crc: str = "verified"              # "verified" (checked now or remembered verified) or "trusted"
    cached_segments: int = 0           # segments answered (whole, or a prefix of the active one) from the cache
    scanned_segments: int = 0          # segments whose headers were read (some bytes of) from the .log
    cached_bytes: int = 0              # .log bytes whose headers came from the cache (verified before)
    scanned_bytes: int = 0             # .log bytes walked (CRC-checked unless trusted), a re-read counted again
    decoded_batches: int = 0           # batches decoded for a figure headers cannot give
    #: figure -> {why: batches decoded for it}
    fallbacks: dict[str, dict[str, int]] = field(default_factory=dict)
    #: figures left out (timestamps=False): never guessed
    omitted: list[str] = field(default_factory=list)
    #: what else makes the answer doubtful (damage_verdict: an index the log contradicts, ...)
    problems: list[str] = field(default_factory=list)

    def level(self, isolation: IsolationLevel | int | str) -> ReadSummary:
        iso = IsolationLevel.parse(isolation) if isinstance(isolation, str) else IsolationLevel(isolation)
        got = self.read_committed if iso == IsolationLevel.READ_COMMITTED else self.read_uncommitted
        if got is None:
            raise ValueError(f"this summary was made without {iso.name.lower()}")
        return got

    @property
    def unreadable(self) -> list[UnreadableRange]:
        """Every range of bytes either read met, once."""
        seen: dict[tuple[str, int], UnreadableRange] = {}
        for lvl in (self.read_uncommitted, self.read_committed):
            for r in (lvl.unreadable if lvl is not None else ()):
                seen.setdefault((r.path, r.position), r)
        return list(seen.values())

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        for name in ("read_uncommitted", "read_committed"):
            lvl = getattr(self, name)
            if lvl is not None:
                d[name]["unreadable"] = [str(r) for r in lvl.unreadable]
        d["magic"] = {str(k): v for k, v in self.magic.items()}
        return d


def _codec_name(code: int) -> str:
    try:
        return W.Compression(int(code)).name.lower()
    except ValueError:
        return f"codec-{int(code)}"


# ------------------------------------------------------------------------------------ header source
def _columns(s: Window, a: int = 0, b: int | None = None) -> dict[str, np.ndarray]:
    return {k: np.array(s[k][a:b]) for k in _HEADER_FIELDS}


class _Remembered(NamedTuple):
    cols: dict[str, np.ndarray]     # header rows of the scan
    end: int                        # where its complete batches ended
    error: KBatchError | None       # what it raised there (after its rows)
    verified: bool                  # CRCs checked (crc_valid is the check)


class HeaderSource:
    """The read path's `scan` for a summary: a segment's headers from the cache (sealed segments
    verified before, or the verified prefix of the active segment, then only the bytes appended
    since are read), from what this summary already read (its other isolation level), or from
    the .log (then remembered); the read path's rules apply to them all the same."""

    def __init__(self, log: Log, cache: SummaryCache | None) -> None:
        self.log = log
        self.cache = cache
        self.memo: dict[tuple[int, int], _Remembered] = {}
        self.memo_rows = 0
        self.cached: set[int] = set()
        self.scanned: set[int] = set()
        self.cached_sizes: dict[int, int] = {}   # segment base -> bytes whose headers came from the cache
        self.scanned_bytes = 0            # bytes of .log walked by scans
        self.verified: set[int] = set()   # sealed segments whose every CRC is known good (cached or checked now)
        #: segment base -> verified prefix entry of a segment that grows (None: none that holds)
        self.prefixes: dict[int, tuple[dict[str, np.ndarray], int] | None] = {}
        self.prefix_moved: set[int] = set()   # segments whose prefix entry this summary wrote
        #: segment base -> {batch position: (timestamps, which have one)} known (cache) and walked now
        self.known_times: dict[int, dict[int, tuple[np.ndarray, np.ndarray]]] = {}
        self.new_times: dict[int, dict[int, tuple[np.ndarray, np.ndarray]]] = {}

    def __call__(self, seg: LogSegment, position: int, verify_crc: bool) -> Generator[Window, None, int]:
        hit = self._remembered(seg, position, verify_crc)
        if hit is not None:
            return self._replay(seg, hit, position, verify_crc)
        if self.cache is not None:   # the active segment, or one rolled since its prefix was remembered
            pre = self._prefix(seg)
            if pre is not None and (position == 0 or position in set(pre[0]["position"].tolist())
                                    or position == pre[1]):
                return self._extend(seg, pre, position, verify_crc)
        return self._scan(seg, position, verify_crc, hop=not verify_crc and _can_hop(seg))

    def _prefix(self, seg: LogSegment) -> tuple[dict[str, np.ndarray], int] | None:
        if seg.base_offset not in self.prefixes:
            assert self.cache is not None
            self.prefixes[seg.base_offset] = self.cache.load_prefix(seg)
        return self.prefixes[seg.base_offset]

    def _remembered(self, seg: LogSegment, position: int, verify_crc: bool) -> _Remembered | None:
        for key in ((seg.base_offset, position), (seg.base_offset, 0)):
            r = self.memo.get(key)
            if r is not None and (r.verified or not verify_crc):
                return r
        sealed = seg is not self.log.segments[-1]
        if self.cache is not None and sealed:
            got = self.cache.load(seg)
            if got is not None:
                self.cached.add(seg.base_offset)
                self.cached_sizes[seg.base_offset] = got[1]
                self.verified.add(seg.base_offset)
                r = _Remembered(got[0], got[1], None, True)
                self.memo[(seg.base_offset, 0)] = r
                return r
        return None

    def _replay(self, seg: LogSegment, r: _Remembered, position: int, verify_crc: bool
                ) -> Generator[Window, None, int]:
        pos = r.cols["position"]
        a = int(np.searchsorted(pos, position))
        if position and (a >= len(pos) or int(pos[a]) != position):
            if position != r.end:
                return (yield from self._scan(seg, position, verify_crc))  # not a batch start it knows
        if a < len(pos):
            yield _replayed(seg, r.cols, a, r.end, verify_crc)
        if r.error is not None:
            raise r.error
        return r.end

    def _extend(self, seg: LogSegment, pre: tuple[dict[str, np.ndarray], int], position: int, verify_crc: bool
                ) -> Generator[Window, None, int]:
        """The active segment's verified prefix [0, N) from the cache (its rows from `position`
        on), then a scan of the bytes appended since, [N, size): its CRCs checked as any scan."""
        cols, n_end = pre
        self.cached.add(seg.base_offset)
        self.cached_sizes[seg.base_offset] = n_end
        a = int(np.searchsorted(cols["position"], position))
        if a < len(cols["position"]):
            yield _replayed(seg, cols, a, n_end, verify_crc)
        return (yield from self._walk(seg, n_end, verify_crc, not verify_crc and _can_hop(seg), True))

    def _scan(self, seg: LogSegment, position: int, verify_crc: bool, hop: bool = False
              ) -> Generator[Window, None, int]:
        return (yield from self._walk(seg, position, verify_crc, hop, False))

    def _walk(self, seg: LogSegment, position: int, verify_crc: bool, hop: bool, after_prefix: bool
              ) -> Generator[Window, None, int]:
        """A scan of the .log from `position` (after_prefix: the rows of the segment's cached
        verified prefix come before it)."""
        if position < seg.size:
            self.scanned.add(seg.base_offset)
        # buffers reused from window to window (with read-ahead): the summary keeps no view of a
        # window once it asks for the next one (header columns are copied)
        gen = _hop_scan(seg, position) if hop else seg.log.scan(position, verify_crc, reuse=True)
        rows: list[dict[str, np.ndarray]] = []
        active = seg is self.log.segments[-1]
        # the rows are kept for the cache (a segment read whole or after its cached prefix, CRCs
        # checked) and for the other level's read (while this summary holds fewer than _MEMO_ROWS)
        for_cache = self.cache is not None and verify_crc and not hop and (position == 0 or after_prefix)
        keep = True
        error: KBatchError | None = None
        end = position
        walked = position
        finished = False   # the scan reached its end (or its error), not left by its reader
        try:
            while True:
                try:
                    s = next(gen)
                except StopIteration as stop:
                    end = walked = int(stop.value)
                    finished = True
                    break
                except KBatchError as e:
                    error, finished = e, True
                    raise
                if len(s["position"]):
                    walked = int(s["position"][-1] + s["size"][-1])
                if keep or for_cache:
                    rows.append(_columns(s))
                    self.memo_rows += len(s["position"])
                    keep = keep and (self.memo_rows <= _MEMO_ROWS or active)
                yield s
        finally:
            gen.close()
            self.scanned_bytes += max(0, walked - position)
            if finished and (keep or for_cache):
                if after_prefix:   # the cached prefix comes first: the segment's rows from byte 0
                    pre = self.prefixes[seg.base_offset]
                    assert pre is not None
                    rows.insert(0, pre[0])
                    position = 0
                self._remember(seg, position, rows, end, error, verify_crc, keep)
        return end

    def _remember(self, seg: LogSegment, position: int, rows: list[dict[str, np.ndarray]], end: int,
                  error: KBatchError | None, verified: bool, memo: bool) -> None:
        if rows:
            cols = {k: np.concatenate([c[k] for c in rows]) for k in _HEADER_FIELDS}
        else:
            cols = {k: np.zeros(0, dt) for k, dt in _backend.core.SCAN_FIELDS if k in _HEADER_FIELDS}
        if memo:
            self.memo[(seg.base_offset, position)] = _Remembered(cols, end, error, verified)
        else:
            self.memo_rows -= len(cols["position"])
        if self.cache is None or not verified or position != 0:
            return
        if seg is self.log.segments[-1]:
            # the active segment grows: its batches read whole with good CRCs are its verified
            # prefix (a torn tail batch is never a row; a damaged one ends the prefix before it)
            if len(cols["position"]):
                pre = self.prefixes.get(seg.base_offset)
                grown = int(cols["position"][-1] + cols["size"][-1]) - (0 if pre is None else int(pre[1]))
                # moved on once the tail read again each time passes _PREFIX_STEP (rewriting the
                # entry costs more than reading a few MiB and checking their CRCs)
                if pre is None or grown >= max(1, _PREFIX_STEP):
                    self.cache.store_prefix(seg, cols)
                    self.prefix_moved.add(seg.base_offset)
            return
        # a sealed segment read whole, every CRC checked and good: remembered for later summaries
        if error is None and end == seg.size and bool(np.all(cols["crc_valid"])):
            self.cache.store(seg, cols, end)
            self.verified.add(seg.base_offset)

    # ---- the records' timestamps (the timestamps walk), remembered for verified segments and prefixes
    def times(self, seg: LogSegment, s: Window, j: int) -> tuple[np.ndarray, np.ndarray]:
        """(timestamps, which have one) of the records of row j of a window of `seg`."""
        active = seg is self.log.segments[-1]
        base = seg.base_offset
        pos = int(s["position"][j])
        if self.cache is not None:
            known = self.known_times.get(base)
            if known is None:
                # a segment rolled since: its sealed entry once made, else what its prefix walked
                known = self.known_times[base] = ((None if active else self.cache.load_times(seg))
                                                  or self.cache.load_times(seg, prefix=True) or {})
            hit = known.get(pos)
            if hit is not None:
                return hit
        _offs, ts, has = _fields_of(s, j)
        self.new_times.setdefault(base, {})[pos] = (ts, has)
        return ts, has

    def store_times(self) -> None:
        """Remember the timestamps walked of each verified sealed segment whose every batch that
        needs the walk was walked (now or before), and those walked inside the active segment's
        verified prefix."""
        if self.cache is None:
            return
        segs = self.log.segments
        for seg in segs:
            new = self.new_times.get(seg.base_offset)
            r = self.memo.get((seg.base_offset, 0))
            if not new or r is None or not len(r.cols["position"]):
                continue
            c = r.cols
            times = {**self.known_times.get(seg.base_offset, {}), **new}
            if seg is segs[-1]:
                if not r.verified:
                    continue
                bad = np.flatnonzero(~c["crc_valid"].astype(bool))
                n = int(bad[0]) if len(bad) else len(c["position"])
                if not n:
                    continue
                end = int(c["position"][n - 1] + c["size"][n - 1])
                if not any(p < end for p in new):
                    continue   # nothing walked now that the entry lacks
                if self.known_times.get(seg.base_offset) and seg.base_offset not in self.prefix_moved:
                    continue   # moved on with the prefix entry (_PREFIX_STEP)
                keep = {p: t for p, t in times.items() if p < end}
                self.cache.store_times(seg, keep, int(c["position"][n - 1]), _header_size(c, n - 1), prefix_end=end)
                continue
            if seg.base_offset not in self.verified or r.error is not None:
                continue
            need = c["position"][_needs_walk(c)]
            if all(int(p) in times for p in need.tolist()):
                keep = {int(p): times[int(p)] for p in need.tolist()}
                self.cache.store_times(seg, keep, int(c["position"][-1]), _header_size(c, -1))


def _replayed(seg: LogSegment, cols: dict[str, np.ndarray], a: int, end: int, verify_crc: bool) -> dict[str, Any]:
    """A scan window of remembered header rows from row a (their bytes are not at hand: "read" reads a batch)."""
    w: dict[str, Any] = {k: v[a:] for k, v in cols.items()}
    if not verify_crc:
        w["crc_valid"] = np.ones(len(cols["position"]) - a, bool)
    w["valid_bytes"] = end
    w["buf"], w["origin"], w["read"] = None, 0, seg.log.read
    return w


def _needs_walk(c: dict[str, np.ndarray]) -> np.ndarray:
    """The rows whose records' timestamps no header gives (the rule of _Walk._timestamps): v2 data
    batches with records, but LogAppendTime and single records with a clear maxTimestamp."""
    attrs = c["attributes"].astype(np.int64)
    cnt, mx = c["record_count"], c["max_timestamp"]
    v2 = c["magic"] >= 2
    data = v2 & ((attrs & W.CONTROL_FLAG_MASK) == 0) & (cnt > 0)
    ext = (attrs & W.TIMESTAMP_EXTENDED_FLAG_MASK) != 0
    clear = np.where(ext, mx != W.NO_TIMESTAMP_EXTENDED, mx >= 0)
    lat = (attrs & W.TIMESTAMP_TYPE_MASK) != 0
    need: np.ndarray = data & ~((lat | (cnt == 1)) & clear)
    return need


#: a trusted scan reads only the batch headers while batches average at least this many bytes
_HOP_MIN_BATCH = 16 * 1024


def _can_hop(seg: LogSegment) -> bool:
    from ..record.file_records import SourceFileRecords

    # a local file (a remote object would cost a request per batch), within int32 positions
    return not isinstance(seg.log, SourceFileRecords) and seg.size <= W.INT32_MAX


def _hop_scan(seg: LogSegment, position: int) -> Generator[Window, None, int]:
    """A scan without CRCs that reads only the batch headers (trust_headers): each batch's first 61
    bytes (found from the length field of the one before), laid end to end with their length
    fields cut to those 61 bytes, scanned by the kernel as it scans a read window (with no CRC
    asked it reads nothing past a header), then given back their real positions and sizes: the
    same columns, errors and end as a scan of every byte. Windows carry no bytes ("buf" None,
    "read" reads a batch). Small batches are read whole instead (a read per header would cost
    more than the bytes)."""
    core = _backend.core
    read, size = seg.log.read, seg.size
    pos = position
    hops = 0
    hopped_bytes = 0
    while size - pos > W.HEADER_SIZE_UP_TO_MAGIC:
        if hops >= 16 and hopped_bytes // hops < _HOP_MIN_BATCH:
            return (yield from seg.log.scan(pos, False, reuse=True))
        compact = bytearray()
        real: list[int] = []      # each header's file position
        at: list[int] = []        # and where it is in `compact`
        totals: list[int] = []
        last = False
        while size - pos > W.HEADER_SIZE_UP_TO_MAGIC and len(real) < _HOP_BATCHES:
            head = bytes(read(pos, W.RECORD_BATCH_OVERHEAD, read_ahead=False))
            total = int.from_bytes(head[W.SIZE_OFFSET:W.LOG_OVERHEAD], "big", signed=True) + W.LOG_OVERHEAD
            if total < W.LOG_OVERHEAD + W.RECORD_OVERHEAD_V0:
                cut = head           # too small: the kernel says so, from the length, at its position
                last = True
            elif pos + total > size:
                break                # a partial batch at the end: the scan stops before it
            else:
                n = min(total, W.RECORD_BATCH_OVERHEAD)
                cut = head[:W.SIZE_OFFSET] + (n - W.LOG_OVERHEAD).to_bytes(4, "big") + head[W.LOG_OVERHEAD:n]
            real.append(pos)
            at.append(len(compact))
            totals.append(total)
            compact += cut
            if last:
                break
            pos += total
            hops += 1
            hopped_bytes += total
        if not real:
            return pos
        try:
            s = core.scan_batches(compact, 0, len(compact), False)
        except KBatchError as e:
            k = bisect.bisect_right(at, e.position or 0) - 1
            if k > 0:
                s = core.scan_batches(compact, 0, at[k], False)
                yield _header_window(s, real[:k], totals[:k], real[k], seg)
            if e.position is not None:
                e.update(shift=real[k] - at[k])
            raise
        n = len(s["position"])
        end = real[n] if n < len(real) else real[-1] + totals[-1]
        if n:
            yield _header_window(s, real[:n], totals[:n], end, seg)
        if n < len(real):
            return end
        pos = end
    return pos


#: headers a trusted scan reads before it hands them out as one window
_HOP_BATCHES = 8192


def _header_window(s: dict[str, Any], positions: list[int], totals: list[int], end: int,
                   seg: LogSegment) -> dict[str, Any]:
    s["position"] = np.array(positions, np.int64)
    s["size"] = np.array(totals, np.int64)
    s["valid_bytes"] = end
    s["buf"], s["origin"], s["read"] = None, 0, seg.log.read
    return s


# ------------------------------------------------------------------------------------ the walk
def _cache_of(cache: SummaryCache | str | bool | None) -> SummaryCache | None:
    if isinstance(cache, SummaryCache):
        return cache
    if cache is True:
        d = default_cache_dir()
        return None if d is None else SummaryCache(d)
    if isinstance(cache, (str, os.PathLike)):
        return SummaryCache(os.fspath(cache))
    return None


#: (offsets, timestamps, has a timestamp) of a batch's records
Fields = tuple[np.ndarray, np.ndarray, np.ndarray]


def _fields_of(s: Window, j: int) -> Fields:
    """The offsets and timestamps of the records of row j of a window, with which have a
    timestamp: v2 through the record_fields_v2 kernel (every record checked as the decoder checks
    it, keys and values not copied: kbatch.log.validator.v2_record_fields), magic 0/1 decoded."""
    from ..record.batch import RecordBatch
    from ..record.file_records import batch_at
    from .validator import v2_record_fields

    b = batch_at(s, j)
    if isinstance(b, RecordBatch):
        offs, ts, _keys = v2_record_fields(b)
        return offs, ts, ts != b.no_timestamp
    recs = list(b)
    return (np.array([r.offset for r in recs], np.int64),
            np.array([0 if r.timestamp is None else r.timestamp for r in recs], np.int64),
            np.array([r.timestamp is not None for r in recs], bool))


class _Walk:
    """One read (one isolation level) of the range, header window by window."""

    def __init__(self, summary: PartitionSummary, rs: ReadSummary, lo: int, hi: int, filt: AbortedFilter | None,
                 timestamps: bool, partition_facts: bool, bucket_ms: int | None, source: HeaderSource) -> None:
        self.source = source
        self.summary = summary
        self.rs = rs
        self.lo, self.hi = lo, hi
        self.filt = filt
        self.timestamps = timestamps
        self.partition_facts = partition_facts
        self.bucket_ms = bucket_ms
        self.histogram: dict[int, int] = {}
        self.producers: dict[tuple[int, int], ProducerSummary] = {}

    def fell_back(self, figure: str, why: str, n: int = 1) -> None:
        if n:
            d = self.summary.fallbacks.setdefault(figure, {})
            d[why] = d.get(why, 0) + n
            self.summary.decoded_batches += n

    def _times(self, ts: np.ndarray, has: np.ndarray) -> None:
        rs = self.rs
        have = ts if bool(has.all()) else ts[has]   # (the usual: every record has one, no copy)
        if rs.records_without_timestamp is not None:
            rs.records_without_timestamp += len(ts) - len(have)
        if len(have):
            lo, hi = int(have.min()), int(have.max())
            rs.min_timestamp = lo if rs.min_timestamp is None else min(rs.min_timestamp, lo)
            rs.max_timestamp = hi if rs.max_timestamp is None else max(rs.max_timestamp, hi)
            if self.bucket_ms is not None:
                self._count(have, None)

    def _count(self, ts: np.ndarray, weights: np.ndarray | None) -> None:
        """Into the histogram: records at `ts` (`weights`: how many at each)."""
        b = self.bucket_ms
        assert b is not None
        buckets = ts // b
        lo = int(buckets.min())
        if int(buckets.max()) - lo < 1 << 20:   # a dense range (the usual): one bincount
            sums = np.bincount(buckets - lo, weights=weights)
            nz = np.flatnonzero(sums)
            keys, sums = (nz + lo) * b, sums[nz]
        else:
            keys, inv = np.unique(buckets * b, return_inverse=True)
            sums = np.bincount(inv, weights=weights, minlength=len(keys))
        for k, c in zip(keys.tolist(), sums.tolist()):
            self.histogram[k] = self.histogram.get(k, 0) + int(c)

    def window(self, w: FetchedWindow) -> None:
        s, a, b = w.window, w.start, w.stop
        n = b - a
        magic, attrs = s["magic"][a:b], s["attributes"][a:b].astype(np.int64)
        base, last, cnt = s["base_offset"][a:b], s["last_offset"][a:b], s["record_count"][a:b].astype(np.int64)
        mx = s["max_timestamp"][a:b]
        v2 = magic >= 2
        ctl = v2 & ((attrs & W.CONTROL_FLAG_MASK) != 0)
        ab = self.filt.aborted_rows(s, a, b) if self.filt is not None else np.zeros(n, bool)
        data = ~ctl & ~ab
        edge = (base < self.lo) | (last >= self.hi)
        dec = data & (edge | ~v2)
        head = data & ~dec
        eff = np.where(head, cnt, 0)
        decoded: dict[int, Fields] = {}
        for r in np.flatnonzero(dec).tolist():
            offs, ts, has = _fields_of(s, a + r)
            keep = (offs >= self.lo) & (offs < self.hi)
            decoded[r] = (offs[keep], ts[keep], has[keep])
            eff[r] = int(np.count_nonzero(keep))
        self.fell_back("records", "batch at an edge of the range", int(np.count_nonzero(dec & edge)))
        self.fell_back("records", "magic 0/1 entry", int(np.count_nonzero(dec & ~edge)))
        rs = self.rs
        rs.records += int(eff.sum())
        rs.data_batches += int(np.count_nonzero(eff > 0))
        rs.aborted_batches += int(np.count_nonzero(ab))
        rs.aborted_records += int(cnt[ab].sum())
        self._timestamps(w.segment, s, a, head, dec, attrs, cnt, mx, decoded)
        self._offsets(s, a, head, dec, base, last, cnt, eff, decoded)
        self._producers(s, a, b, data & v2, eff)
        if self.partition_facts:
            self._partition(s, a, b, v2, ctl, attrs, cnt)

    def _timestamps(self, seg: LogSegment, s: Window, a: int, head: np.ndarray, dec: np.ndarray, attrs: np.ndarray,
                    cnt: np.ndarray, mx: np.ndarray, decoded: dict[int, Fields]) -> None:
        rs = self.rs
        if decoded:
            self._times(np.concatenate([d[1] for d in decoded.values()]),
                        np.concatenate([d[2] for d in decoded.values()]))
        some = head & (cnt > 0)   # an empty batch's maxTimestamp is stale (compaction): none of its own
        ext = (attrs & W.TIMESTAMP_EXTENDED_FLAG_MASK) != 0
        # a maxTimestamp that is a record's: any in an extended batch (KIP-228: its "none" is
        # -2^63), else >= 0 (-1 is "none", and a record's invalid negative value hides below it)
        clear = np.where(ext, mx != W.NO_TIMESTAMP_EXTENDED, mx >= 0)
        # the max: every v2 batch's maxTimestamp is its records' largest (LogValidator sets it)
        top = some & clear
        if top.any():
            m = int(mx[top].max())
            rs.max_timestamp = m if rs.max_timestamp is None else max(rs.max_timestamp, m)
        # every record's own timestamp is in the header: LogAppendTime (all are maxTimestamp), or one record
        lat = (attrs & W.TIMESTAMP_TYPE_MASK) != 0
        rows = some & (lat | (cnt == 1)) & clear
        if rows.any():
            m = int(mx[rows].min())
            rs.min_timestamp = m if rs.min_timestamp is None else min(rs.min_timestamp, m)
            if self.bucket_ms is not None:
                self._count(mx[rows], cnt[rows])
        # the others (CreateTime batches of several records, in any order inside; a header with no
        # clear timestamp): a timestamps walk
        walk = some & ~rows
        k = int(np.count_nonzero(walk))
        if not k:
            return
        if not self.timestamps:
            rs.records_without_timestamp = None
            names = ["min_timestamp", "records_without_timestamp"] + (["histogram"] if self.bucket_ms else [])
            if (walk & ~clear).any():
                names.append("max_timestamp")
                rs.max_timestamp = None
            for name in names:
                if name not in self.summary.omitted:
                    self.summary.omitted.append(name)
            return
        self.fell_back("min_timestamp", "CreateTime batch of several records, or no clear maxTimestamp "
                                        "(timestamps walk, or what it remembered)", k)
        got = [self.source.times(seg, s, a + r) for r in np.flatnonzero(walk).tolist()]
        self._times(np.concatenate([g[0] for g in got]), np.concatenate([g[1] for g in got]))

    def _offsets(self, s: Window, a: int, head: np.ndarray, dec: np.ndarray, base: np.ndarray, last: np.ndarray,
                 cnt: np.ndarray, eff: np.ndarray, decoded: dict[int, Fields]) -> None:
        rows = np.flatnonzero(eff > 0)
        if not len(rows):
            return
        dense = cnt == (last - base + 1)   # no gap: the offsets are base..last
        rs = self.rs

        def end(r: int, first: bool) -> int:
            if r in decoded:
                return int(decoded[r][0][0 if first else -1])
            if dense[r]:
                return int(base[r] if first else last[r])
            self.fell_back("first_offset" if first else "last_offset", "batch with offset gaps (compacted)")
            return int(_fields_of(s, a + r)[0][0 if first else -1])

        if rs.first_offset is None:
            rs.first_offset = end(int(rows[0]), True)
        rs.last_offset = end(int(rows[-1]), False)

    def _producers(self, s: Window, a: int, b: int, rows: np.ndarray, eff: np.ndarray) -> None:
        pid = s["producer_id"][a:b]
        rows = rows & (pid >= 0)
        if not rows.any():
            return
        epoch, seq = s["producer_epoch"][a:b], s["base_sequence"][a:b]
        base, last = s["base_offset"][a:b], s["last_offset"][a:b]
        idx = np.flatnonzero(rows)
        keys = pid[idx].astype(np.int64) * 65536 + (epoch[idx].astype(np.int64) + 32768)
        uk, first_i, inv = np.unique(keys, return_index=True, return_inverse=True)
        batches = np.bincount(inv)
        recs = np.bincount(inv, weights=eff[idx])
        last_i = len(idx) - 1 - np.unique(keys[::-1], return_index=True)[1]
        for g in range(len(uk)):
            r0, r1 = int(idx[first_i[g]]), int(idx[last_i[g]])
            key = (int(pid[r0]), int(epoch[r0]))
            p = self.producers.get(key)
            if p is None:
                p = self.producers[key] = ProducerSummary(key[0], key[1], first_offset=int(base[r0]))
            p.batches += int(batches[g])
            p.records += int(recs[g])
            p.last_offset = int(last[r1])
            sq = int(seq[r1])
            p.last_sequence = W.NO_SEQUENCE if sq < 0 else W.increment_sequence(sq, int(last[r1] - base[r1]))

    def _partition(self, s: Window, a: int, b: int, v2: np.ndarray, ctl: np.ndarray, attrs: np.ndarray,
                   cnt: np.ndarray) -> None:
        from ..record.control import parse_control_record
        from ..record.file_records import batch_at

        p = self.summary
        size, magic = s["size"][a:b], s["magic"][a:b]
        pid = s["producer_id"][a:b]
        p.batches += b - a
        p.bytes += int(size.sum())
        mn, mxs = int(size.min()), int(size.max())
        p.batch_bytes_min = mn if p.batch_bytes_min is None else min(p.batch_bytes_min, mn)
        p.batch_bytes_max = mxs if p.batch_bytes_max is None else max(p.batch_bytes_max, mxs)
        if p.first_batch_offset is None:
            p.first_batch_offset = int(s["base_offset"][a])
        p.last_batch_offset = int(s["last_offset"][b - 1])
        for m, c in zip(*np.unique(magic, return_counts=True)):
            p.magic[int(m)] = p.magic.get(int(m), 0) + int(c)
        codec = np.where(v2, attrs & W.COMPRESSION_CODEC_MASK, attrs & W.LEGACY_COMPRESSION_CODEC_MASK)
        for cc, c in zip(*np.unique(codec, return_counts=True)):
            name = _codec_name(int(cc))
            p.codecs[name] = p.codecs.get(name, 0) + int(c)
        txn = v2 & ((attrs & W.TRANSACTIONAL_FLAG_MASK) != 0)
        p.control_batches += int(np.count_nonzero(ctl))
        p.empty_batches += int(np.count_nonzero(v2 & ~ctl & (cnt == 0)))
        p.idempotent_batches += int(np.count_nonzero(v2 & (pid >= 0)))
        p.transactional_batches += int(np.count_nonzero(txn & ~ctl))
        p.transactional_records += int(cnt[txn & ~ctl].sum())
        rows = np.flatnonzero(ctl).tolist()
        self.fell_back("commits/aborts", "control batch (the marker's type is its record)", len(rows))
        for r in rows:
            for rec in batch_at(s, a + r):
                kind = parse_control_record(rec).type
                if kind == W.ControlRecordType.COMMIT:
                    p.commits += 1
                elif kind == W.ControlRecordType.ABORT:
                    p.aborts += 1

    def finish(self) -> None:
        for name in self.summary.omitted:  # a figure left out is never shown half made
            if name in ("min_timestamp", "max_timestamp", "records_without_timestamp"):
                setattr(self.rs, name, None)
        self.rs.producers = sorted(self.producers.values(), key=lambda p: (p.producer_id, p.producer_epoch))


def _range(log: Log, start_offset: int | None, end_offset: int | None, start_time: int | None,
           end_time: int | None) -> tuple[int, int | None]:
    """The offsets [lo, hi) asked: by offset, or by time as kbatch cat's s@T / e@T (ListOffsets)."""
    lo = log.log_start_offset if start_offset is None else int(start_offset)
    hi = None if end_offset is None else int(end_offset)
    if start_time is not None:
        hit = log.offset_for(int(start_time))
        lo = max(lo, log.end_offset() if hit is None else hit.offset)
    if end_time is not None:
        hit = log.offset_for(int(end_time))
        if hit is not None:
            hi = hit.offset if hi is None else min(hi, hit.offset)
    return lo, hi


def _levels(isolation: IsolationLevel | int | str | None) -> list[IsolationLevel]:
    if isolation is None:
        return [IsolationLevel.READ_UNCOMMITTED, IsolationLevel.READ_COMMITTED]
    if isinstance(isolation, str):
        return [IsolationLevel.parse(isolation)]
    return [IsolationLevel(isolation)]


def summarize(log: Log, start_offset: int | None = None, end_offset: int | None = None, *,
              start_time: int | None = None, end_time: int | None = None,
              isolation: IsolationLevel | int | str | None = None, trust_headers: bool = False,
              timestamps: bool = True, skip_unreadable: bool = False,
              cache: SummaryCache | str | bool | None = True) -> PartitionSummary:
    """The summary of `log` from `start_offset` (the log start) to `end_offset` (exclusive; the
    end), or from the first record at or after `start_time` to the first at or after `end_time`
    (ms, ListOffsets' answers), as a consumer with each isolation level reads it (`isolation`:
    one level only). The partition-wide figures (batches, codecs, control batches, ...) are those
    of the first level's read (read_uncommitted when made).

    trust_headers: no CRC check (see the module docstring for what that misses). timestamps:
    False leaves out the figures that need a timestamps walk (min_timestamp,
    records_without_timestamp: `omitted`). skip_unreadable: as read_log (False: bytes that cannot
    be read raise UnreadableDataError, as the full read does; True: they are listed in each
    level's `unreadable` and the read goes on at the next segment). cache: a SummaryCache, a
    directory, True (default_cache_dir()) or False."""
    summary, _hist = _summarize(log, start_offset, end_offset, start_time, end_time, isolation, trust_headers,
                                timestamps, skip_unreadable, cache, None)
    return summary


def _summarize(log: Log, start_offset: int | None, end_offset: int | None, start_time: int | None,
               end_time: int | None, isolation: IsolationLevel | int | str | None, trust_headers: bool,
               timestamps: bool, skip_unreadable: bool, cache: SummaryCache | str | bool | None,
               bucket_ms: int | None) -> tuple[PartitionSummary, dict[int, int]]:
    lo, hi = _range(log, start_offset, end_offset, start_time, end_time)
    source = HeaderSource(log, _cache_of(cache))
    segs = log.segments
    summary = PartitionSummary(os.fspath(log.directory), lo, hi, log.log_start_offset, log.end_offset(), None,
                               len(segs), log.size, crc="trusted" if trust_headers else "verified")
    hist: dict[int, int] = {}
    for k, iso in enumerate(_levels(isolation)):
        res = read_log(log, lo, hi, isolation=iso, verify_crc=not trust_headers, skip_unreadable=skip_unreadable,
                       scan=source)
        committed = iso == IsolationLevel.READ_COMMITTED
        if committed:
            summary.last_stable_offset = res.last_stable_offset
        rs = ReadSummary(iso.name.lower(), res.upper_offset)
        filt = AbortedFilter(res.aborted, res.unknown) if committed else None
        walk = _Walk(summary, rs, lo, res.upper_offset, filt, timestamps, k == 0, bucket_ms if k == 0 else None,
                     source)
        for w in res.windows():
            walk.window(w)
        walk.finish()
        rs.unreadable = list(res.unreadable)
        if k == 0:
            summary.problems = res.problems()
            hist = walk.histogram
        setattr(summary, iso.name.lower(), rs)
    source.store_times()
    summary.cached_segments = len(source.cached)
    summary.scanned_segments = len(source.scanned)
    summary.cached_bytes = sum(source.cached_sizes.values())
    summary.scanned_bytes = source.scanned_bytes
    return summary, hist


def histogram(log: Log, bucket_ms: int, start_offset: int | None = None, end_offset: int | None = None, *,
              start_time: int | None = None, end_time: int | None = None,
              isolation: IsolationLevel | int | str = IsolationLevel.READ_UNCOMMITTED, trust_headers: bool = False,
              skip_unreadable: bool = False, cache: SummaryCache | str | bool | None = True
              ) -> tuple[dict[int, int], PartitionSummary]:
    """Records over time: {bucket start (ms, a multiple of bucket_ms): records whose own timestamp
    falls in it} for what a consumer with `isolation` reads, from a timestamps-only walk (a header
    answers for LogAppendTime batches and single records; no key or value is read), with the
    summary of that read (records without a timestamp: its records_without_timestamp)."""
    if bucket_ms <= 0:
        raise ValueError(f"bucket of {bucket_ms} ms: expected a positive length")
    summary, hist = _summarize(log, start_offset, end_offset, start_time, end_time, isolation, trust_headers,
                               True, skip_unreadable, cache, int(bucket_ms))
    return dict(sorted(hist.items())), summary


def batch_facts(log: Log, start_offset: int | None = None, end_offset: int | None = None, *,
                isolation: IsolationLevel | int | str = IsolationLevel.READ_UNCOMMITTED, trust_headers: bool = False,
                skip_unreadable: bool = False, cache: SummaryCache | str | bool | None = True,
                unreadable: list[UnreadableRange] | None = None) -> Iterator[BatchFacts]:
    """One BatchFacts per batch the read path reads from the range (control batches included, in
    offset order; `aborted` under read_committed), from headers only. Damage as read_log: raises
    UnreadableDataError, or with skip_unreadable goes on and appends each range to `unreadable`."""
    iso = _levels(isolation)[0]
    lo, hi = _range(log, start_offset, end_offset, None, None)
    source = HeaderSource(log, _cache_of(cache))
    res = read_log(log, lo, hi, isolation=iso, verify_crc=not trust_headers, skip_unreadable=skip_unreadable,
                   scan=source)
    filt = AbortedFilter(res.aborted, res.unknown) if iso == IsolationLevel.READ_COMMITTED else None
    try:
        for w in res.windows():
            s, a, b = w.window, w.start, w.stop
            ab = filt.aborted_rows(s, a, b) if filt is not None else np.zeros(b - a, bool)
            path = w.segment.path(".log")
            cols = [s[k][a:b].tolist() for k in ("position", "size", "magic", "attributes", "base_offset",
                                                 "last_offset", "partition_leader_epoch", "first_timestamp",
                                                 "max_timestamp", "producer_id", "producer_epoch", "base_sequence",
                                                 "record_count", "crc_valid")]
            for j, (pos, size, magic, attrs, base, last, ple, first_ts, max_ts, pid, epoch, seq, count,
                    crc_ok) in enumerate(zip(*cols)):
                yield BatchFacts(path, pos, size, magic, attrs, base, last, ple, first_ts, max_ts, pid, epoch, seq,
                                 count, None if trust_headers else bool(crc_ok), bool(ab[j]))
    finally:
        if unreadable is not None:
            unreadable.extend(res.unreadable)


def segment_facts(log: Log, *, trust_headers: bool = False, cache: SummaryCache | str | bool | None = True,
                  damage: list[UnreadableRange] | None = None) -> Iterator[BatchFacts]:
    """Every batch header of every segment, in file order, whatever the read path would make of
    it (an audit's raw rows: a batch whose CRC fails is yielded with crc_ok False and the walk goes
    on; offsets out of order are yielded as they are). Where a segment's bytes stop being batches
    (a bad length or magic, bytes after its last whole batch in a segment that is not the last),
    the range goes into `damage` and the walk goes on with the next segment; `aborted` is False."""
    source = HeaderSource(log, _cache_of(cache))
    segs = list(log.segments)
    for k, seg in enumerate(segs):
        path = seg.path(".log")
        nxt = segs[k + 1].base_offset if k + 1 < len(segs) else None
        gen = source(seg, 0, not trust_headers)
        last: int | None = None
        while True:
            try:
                s = next(gen)
            except StopIteration as stop:
                end = int(stop.value)
                if end < seg.size and nxt is not None and damage is not None:
                    damage.append(UnreadableRange(path, end, seg.size - end, last, nxt,
                                                  seg.log.incomplete(end, "the segment")))
                break
            except KBatchError as e:
                if damage is not None:
                    at = e.position if e.position is not None else 0
                    damage.append(UnreadableRange(path, at, seg.size - at, last, nxt, str(e)))
                break
            cols = [s[c].tolist() for c in ("position", "size", "magic", "attributes", "base_offset", "last_offset",
                                            "partition_leader_epoch", "first_timestamp", "max_timestamp",
                                            "producer_id", "producer_epoch", "base_sequence", "record_count",
                                            "crc_valid")]
            for (pos, size, magic, attrs, base, lst, ple, first_ts, max_ts, pid, epoch, seq, count,
                 crc_ok) in zip(*cols):
                yield BatchFacts(path, pos, size, magic, attrs, base, lst, ple, first_ts, max_ts, pid, epoch, seq,
                                 count, None if trust_headers else bool(crc_ok), False)
                last = lst


__all__ = ["BatchFacts", "HeaderSource", "PartitionSummary", "ProducerSummary", "ReadSummary", "SummaryCache",
           "SUMMARY_CACHE_ENV", "batch_facts", "segment_facts", "default_cache_dir", "histogram", "summarize"]
