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
summary of an unchanged segment reads no byte of it. `trust_headers=True` skips the CRCs as
Parquet trusts footers: lengths, magic, offsets order and torn tails are still checked, but a
flipped bit inside a record (its key, value, timestamp delta) goes unseen.
"""
from __future__ import annotations

import hashlib
import io
import json
import os
import tempfile
from collections.abc import Callable, Generator, Iterator
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any, NamedTuple

import numpy as np

from .. import _backend
from .. import _wire as W
from ..errors import KBatchError
from .fetch import AbortedFilter, FetchedWindow, IsolationLevel, UnreadableRange, read_log

if TYPE_CHECKING:
    from ..record.file_records import Window
    from .partition_log import PartitionLog as Log
    from .segment import LogSegment

SUMMARY_CACHE_ENV = "KBATCH_SUMMARY_CACHE"
_CACHE_VERSION = 1
_HEADER_FIELDS = ("position", "size", "magic", "base_offset", "last_offset", "partition_leader_epoch", "crc",
                  "crc_valid", "attributes", "first_timestamp", "max_timestamp", "producer_id", "producer_epoch",
                  "base_sequence", "record_count")
#: in-memory header rows kept for the second isolation level's walk (above this, it scans again)
_MEMO_ROWS = 4_000_000


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
    cached_segments: int = 0           # sealed segments answered from the cache (verified before)
    scanned_segments: int = 0          # segments whose headers were read from the .log
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


# ------------------------------------------------------------------------------------ the cache
def default_cache_dir() -> str | None:
    """$KBATCH_SUMMARY_CACHE ("" or "off": no cache), else $XDG_CACHE_HOME/kbatch/summaries, else
    ~/.cache/kbatch/summaries."""
    env = os.environ.get(SUMMARY_CACHE_ENV)
    if env is not None:
        return None if env.strip() in ("", "off", "0") else env
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "kbatch", "summaries")


class SummaryCache:
    """Verified batch headers of sealed segments, one file per segment in `directory` (never the
    log directory): what a CRC-checked scan of the whole .log found, so that a later summary of the
    same unchanged file reads none of it. An entry is used only when the file's path, size,
    mtime_ns, device and inode are those it was made from and the bytes of its last batch header
    are still the same; an entry that does not read (damaged, another version) is ignored."""

    def __init__(self, directory: str) -> None:
        self.directory = directory

    @staticmethod
    def _identity(path: str) -> tuple[str, int, int, int, int] | None:
        try:
            st = os.stat(path)
        except OSError:
            return None
        return os.path.realpath(path), st.st_size, st.st_mtime_ns, st.st_dev, st.st_ino

    def _file(self, ident: tuple[str, int, int, int, int]) -> str:
        h = hashlib.sha256(json.dumps(ident).encode()).hexdigest()[:40]
        return os.path.join(self.directory, f"{h}.npz")

    def load(self, seg: LogSegment) -> tuple[dict[str, np.ndarray], int] | None:
        """(header columns of the whole segment, where its batches end), or None."""
        path = seg.path(".log")
        ident = self._identity(path)
        if ident is None or ident[1] != seg.size:
            return None
        try:
            with np.load(self._file(ident), allow_pickle=False) as z:
                meta = json.loads(bytes(z["meta"]).decode())
                if meta.get("version") != _CACHE_VERSION or tuple(meta["identity"]) != ident:
                    return None
                cols = {k: np.asarray(z[k]) for k in _HEADER_FIELDS}
            n = len(cols["position"])
            if any(len(v) != n for v in cols.values()) or int(meta["end"]) != seg.size:
                return None
            if n:  # the content check: the last batch's header bytes are still those
                at, size = int(cols["position"][-1]), int(min(cols["size"][-1], W.RECORD_BATCH_OVERHEAD))
                if bytes(seg.log.read(at, size)).hex() != meta["last_header"]:
                    return None
            return cols, int(meta["end"])
        except (OSError, ValueError, KeyError, TypeError, EOFError, KBatchError):
            return None  # a damaged or foreign entry is not trusted
        except Exception:  # numpy's zip reader raises others (BadZipFile...) on a damaged file
            return None

    def store(self, seg: LogSegment, cols: dict[str, np.ndarray], end: int) -> None:
        path = seg.path(".log")
        ident = self._identity(path)
        if ident is None or ident[1] != seg.size or end != seg.size:
            return
        n = len(cols["position"])
        last = ""
        if n:
            at, size = int(cols["position"][-1]), int(min(cols["size"][-1], W.RECORD_BATCH_OVERHEAD))
            last = bytes(seg.log.read(at, size)).hex()
        meta = json.dumps(dict(version=_CACHE_VERSION, identity=list(ident), end=end, last_header=last)).encode()
        try:
            os.makedirs(self.directory, exist_ok=True)
            buf = io.BytesIO()
            arrays: dict[str, Any] = {"meta": np.frombuffer(meta, np.uint8), **cols}
            savez: Any = np.savez
            savez(buf, **arrays)
            fd, tmp = tempfile.mkstemp(prefix=".tmp-", dir=self.directory)
            try:
                with os.fdopen(fd, "wb") as f:
                    f.write(buf.getvalue())
                os.replace(tmp, self._file(ident))  # atomic: a reader sees the old entry or the new one
            except BaseException:
                try:
                    os.unlink(tmp)
                except OSError:
                    pass
                raise
        except OSError:
            pass  # a cache that cannot be written costs speed, never an answer


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
    verified before), from what this summary already read (its other isolation level), or from
    the .log (then remembered); the read path's rules apply to them all the same."""

    def __init__(self, log: Log, cache: SummaryCache | None) -> None:
        self.log = log
        self.cache = cache
        self.memo: dict[tuple[int, int], _Remembered] = {}
        self.memo_rows = 0
        self.cached: set[int] = set()
        self.scanned: set[int] = set()

    def __call__(self, seg: LogSegment, position: int, verify_crc: bool) -> Generator[Window, None, int]:
        hit = self._remembered(seg, position, verify_crc)
        if hit is not None:
            return self._replay(seg, hit, position, verify_crc)
        return self._scan(seg, position, verify_crc)

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
            w: dict[str, Any] = {k: v[a:] for k, v in r.cols.items()}
            if not verify_crc:
                w["crc_valid"] = np.ones(len(pos) - a, bool)
            w["valid_bytes"] = r.end
            w["buf"], w["origin"], w["read"] = None, 0, seg.log.read
            yield w
        if r.error is not None:
            raise r.error
        return r.end

    def _scan(self, seg: LogSegment, position: int, verify_crc: bool) -> Generator[Window, None, int]:
        self.scanned.add(seg.base_offset)
        gen = seg.log.scan(position, verify_crc)
        rows: list[dict[str, np.ndarray]] = []
        keep = True
        error: KBatchError | None = None
        end = position
        finished = False   # the scan reached its end (or its error), not left by its reader
        try:
            while True:
                try:
                    s = next(gen)
                except StopIteration as stop:
                    end = int(stop.value)
                    finished = True
                    break
                except KBatchError as e:
                    error, finished = e, True
                    raise
                if keep:
                    rows.append(_columns(s))
                    self.memo_rows += len(s["position"])
                    keep = self.memo_rows <= _MEMO_ROWS
                yield s
        finally:
            gen.close()
            if finished and keep:
                self._remember(seg, position, rows, end, error, verify_crc)
        return end

    def _remember(self, seg: LogSegment, position: int, rows: list[dict[str, np.ndarray]], end: int,
                  error: KBatchError | None, verified: bool) -> None:
        if rows:
            cols = {k: np.concatenate([c[k] for c in rows]) for k in _HEADER_FIELDS}
        else:
            cols = {k: np.zeros(0, dt) for k, dt in _backend.core.SCAN_FIELDS if k in _HEADER_FIELDS}
        self.memo[(seg.base_offset, position)] = _Remembered(cols, end, error, verified)
        # a sealed segment read whole, every CRC checked and good: remembered for later summaries
        if (self.cache is not None and error is None and verified and position == 0 and end == seg.size
                and seg is not self.log.segments[-1] and bool(np.all(cols["crc_valid"]))):
            self.cache.store(seg, cols, end)


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


def _records_of(s: Window, j: int) -> list[tuple[int, int | None]]:
    """(offset, timestamp or None) of the records of row j of a window, decoded (control records
    are not asked for here)."""
    from ..record.file_records import batch_at

    return [(r.offset, r.timestamp) for r in batch_at(s, j)]


class _Walk:
    """One read (one isolation level) of the range, header window by window."""

    def __init__(self, summary: PartitionSummary, rs: ReadSummary, lo: int, hi: int, filt: AbortedFilter | None,
                 timestamps: bool, partition_facts: bool, bucket_ms: int | None) -> None:
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

    def _times(self, ts: list[int | None]) -> None:
        rs = self.rs
        have = [t for t in ts if t is not None]
        if rs.records_without_timestamp is not None:
            rs.records_without_timestamp += len(ts) - len(have)
        if have:
            lo, hi = min(have), max(have)
            rs.min_timestamp = lo if rs.min_timestamp is None else min(rs.min_timestamp, lo)
            rs.max_timestamp = hi if rs.max_timestamp is None else max(rs.max_timestamp, hi)
            if self.bucket_ms is not None:
                b = self.bucket_ms
                for t in have:
                    k = t - t % b
                    self.histogram[k] = self.histogram.get(k, 0) + 1

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
        decoded: dict[int, list[tuple[int, int | None]]] = {}
        for r in np.flatnonzero(dec).tolist():
            recs = [(o, t) for o, t in _records_of(s, a + r) if self.lo <= o < self.hi]
            decoded[r] = recs
            eff[r] = len(recs)
        self.fell_back("records", "batch at an edge of the range", int(np.count_nonzero(dec & edge)))
        self.fell_back("records", "magic 0/1 entry", int(np.count_nonzero(dec & ~edge)))
        rs = self.rs
        rs.records += int(eff.sum())
        rs.data_batches += int(np.count_nonzero(eff > 0))
        rs.aborted_batches += int(np.count_nonzero(ab))
        rs.aborted_records += int(cnt[ab].sum())
        self._timestamps(s, a, head, dec, attrs, cnt, mx, decoded)
        self._offsets(s, a, head, dec, base, last, cnt, eff, decoded)
        self._producers(s, a, b, data & v2, eff)
        if self.partition_facts:
            self._partition(s, a, b, v2, ctl, attrs, cnt)

    def _timestamps(self, s: Window, a: int, head: np.ndarray, dec: np.ndarray, attrs: np.ndarray,
                    cnt: np.ndarray, mx: np.ndarray, decoded: dict[int, list[tuple[int, int | None]]]) -> None:
        rs = self.rs
        for recs in decoded.values():
            self._times([t for _o, t in recs])
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
                b = self.bucket_ms
                keys = mx[rows] - mx[rows] % b
                ks, inv = np.unique(keys, return_inverse=True)
                sums = np.bincount(inv, weights=cnt[rows])
                for k, c in zip(ks.tolist(), sums.tolist()):
                    self.histogram[k] = self.histogram.get(k, 0) + int(c)
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
                                        "(timestamps walk)", k)
        for r in np.flatnonzero(walk).tolist():
            self._times([t for _o, t in _records_of(s, a + r)])

    def _offsets(self, s: Window, a: int, head: np.ndarray, dec: np.ndarray, base: np.ndarray, last: np.ndarray,
                 cnt: np.ndarray, eff: np.ndarray, decoded: dict[int, list[tuple[int, int | None]]]) -> None:
        rows = np.flatnonzero(eff > 0)
        if not len(rows):
            return
        dense = cnt == (last - base + 1)   # no gap: the offsets are base..last
        rs = self.rs

        def end(r: int, first: bool) -> int:
            if r in decoded:
                return decoded[r][0 if first else -1][0]
            if dense[r]:
                return int(base[r] if first else last[r])
            self.fell_back("first_offset" if first else "last_offset", "batch with offset gaps (compacted)")
            recs = _records_of(s, a + r)
            return recs[0 if first else -1][0]

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
        walk = _Walk(summary, rs, lo, res.upper_offset, filt, timestamps, k == 0, bucket_ms if k == 0 else None)
        for w in res.windows():
            walk.window(w)
        walk.finish()
        rs.unreadable = list(res.unreadable)
        if k == 0:
            summary.problems = res.problems()
            hist = walk.histogram
        setattr(summary, iso.name.lower(), rs)
    summary.cached_segments = len(source.cached)
    summary.scanned_segments = len(source.scanned)
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


__all__ = ["BatchFacts", "HeaderSource", "PartitionSummary", "ProducerSummary", "ReadSummary", "SummaryCache",
           "SUMMARY_CACHE_ENV", "batch_facts", "default_cache_dir", "histogram", "summarize"]
