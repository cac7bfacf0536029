"""The audit of a log (`kbatch audit`, `kbatch report`): one header walk per partition, then checks
over the per-batch facts it collected, each result a Finding (kbatch.log.findings).

The walk is the log layer's one header walk: kbatch.log.summary's HeaderSource under the read path
(kbatch.log.fetch.read_log), so the audit reads the batches `stats`, `cat` and the summary read,
by the same damage rules, every CRC checked, with the summary's cache of verified sealed segments.
It decodes only what a check needs: the one control record of a transaction marker, the batches an
index entry points into, and (record_timestamps) CreateTime batches for their lowest timestamp.
Everything it cannot read is an error finding, the partial tail readers ignore included.

The checks judge the log by its own clock: `now` when given, else the newest timestamp of the
last batch of each partition (the log's "last record", DESIGN.md), so a copy of a log audited
years later says what the broker would have said then. Kafka's documented defaults apply where
no configuration is given (AuditConfig). Header facts are exact for what a header holds (offsets,
producer id/epoch/sequence, attributes, max timestamp, size); timestamp checks that need a record's
own timestamp use the batch's first and max timestamps (a record between them is not seen).
"""
from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt

from .. import _wire as W
from ..errors import InvalidConfigurationError, KBatchError, StorageError
from .findings import Finding, Severity

if TYPE_CHECKING:
    from .segment_files import SegmentFiles

I64 = npt.NDArray[np.int64]

#: Kafka's defaults (4.x): transaction.max.timeout.ms, message.timestamp.before/after.max.ms (KIP-937;
#: 4.0 lowered after.max.ms from Long.MAX_VALUE to one hour, KIP-1030), max.message.bytes, retention.ms
DEFAULT_TRANSACTION_MAX_TIMEOUT_MS = 900_000
DEFAULT_BEFORE_MAX_MS = W.INT64_MAX
DEFAULT_AFTER_MAX_MS = 3_600_000
DEFAULT_RETENTION_MS = 604_800_000
#: a CreateTime this far below the newest timestamp before it is "going backwards" (a day: clocks
#: of several producers differ by far less; a replayed or mis-set source differs by far more)
DEFAULT_BACKWARDS_MAX_MS = 86_400_000
#: millisecond values from here on are years after 5000: microseconds (1e14 us = 1973) or, from
#: NANOS_FROM on, nanoseconds (KAFKA-14991: producers that send the wrong unit)
MICROS_FROM = 10**14
NANOS_FROM = 10**17
#: findings of one check in one partition beyond this many are counted in one last finding
DEFAULT_MAX_FINDINGS = 100

#: the header columns a walk keeps per batch (the record layer's scan fields)
FACT_COLUMNS = ("position", "size", "magic", "base_offset", "last_offset", "partition_leader_epoch", "crc_valid",
                "attributes", "first_timestamp", "max_timestamp", "producer_id", "producer_epoch",
                "base_sequence", "record_count")

#: broker-level names (server.properties) of the topic configs the audit reads
_BROKER_NAMES = {"log.message.timestamp.before.max.ms": "message.timestamp.before.max.ms",
                 "log.message.timestamp.after.max.ms": "message.timestamp.after.max.ms",
                 "message.max.bytes": "max.message.bytes", "log.retention.ms": "retention.ms"}


@dataclass
class AuditConfig:
    """What the checks compare against (Kafka's names in the docstrings of from_properties)."""

    before_max_ms: int = DEFAULT_BEFORE_MAX_MS
    after_max_ms: int = DEFAULT_AFTER_MAX_MS
    transaction_max_timeout_ms: int = DEFAULT_TRANSACTION_MAX_TIMEOUT_MS
    max_message_bytes: int = W.DEFAULT_MAX_MESSAGE_BYTES
    retention_ms: int = DEFAULT_RETENTION_MS
    backwards_max_ms: int | None = DEFAULT_BACKWARDS_MAX_MS   # None: the check is off
    now: int | None = None                                     # None: the log's own clock
    verify_crc: bool = True                                    # False: trust headers (says what it misses)
    check_indexes: bool = True
    cache: bool = True                                         # kbatch.log.summary's CRC-verified header cache
    record_timestamps: bool = False                            # decode CreateTime batches for their min timestamp
    max_findings: int = DEFAULT_MAX_FINDINGS

    @classmethod
    def from_properties(cls, props: Mapping[str, str], **kw: Any) -> AuditConfig:
        """From a broker's server.properties or a topic's configs: message.timestamp.before.max.ms /
        log.message.timestamp.before.max.ms, ...after.max.ms, transaction.max.timeout.ms,
        max.message.bytes / message.max.bytes, retention.ms / log.retention.ms (log.retention.hours
        and .minutes as Kafka reads them). Other names are ignored (a broker's file has many);
        a value that is not an integer is refused."""
        names = {"message.timestamp.before.max.ms": "before_max_ms", "message.timestamp.after.max.ms": "after_max_ms",
                 "transaction.max.timeout.ms": "transaction_max_timeout_ms", "max.message.bytes": "max_message_bytes",
                 "retention.ms": "retention_ms"}
        values: dict[str, Any] = {}
        # topic names win over broker names; log.retention.ms over .minutes over .hours, as in Kafka
        order = sorted(props, key=lambda k: (k in names, k == "log.retention.ms"))
        for key in order:
            text = str(props[key]).strip()
            if key in ("log.retention.hours", "log.retention.minutes"):
                unit = 3_600_000 if key.endswith("hours") else 60_000
                values["retention_ms"] = _int(key, text) * unit
                continue
            name = names.get(_BROKER_NAMES.get(key, key))
            if name is not None:
                values[name] = _int(key, text)
        values.update(kw)
        return cls(**values)


def _int(key: str, text: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise InvalidConfigurationError(f"Invalid value for {key}", expected="an integer", found=text) from None


def read_properties(path: str) -> dict[str, str]:
    """A Java .properties file's key=value (or key: value) lines; # and ! start comments."""
    out: dict[str, str] = {}
    with open(path, encoding="utf-8") as f:
        for line in f:
            s = line.strip()
            if not s or s[0] in "#!":
                continue
            sep = min((i for i in (s.find("="), s.find(":")) if i >= 0), default=-1)
            if sep < 0:
                continue
            out[s[:sep].strip()] = s[sep + 1:].strip()
    return out


@dataclass
class PartitionFacts:
    """One partition's header facts: a row per batch whose header could be read, in log order
    (columns FACT_COLUMNS, plus `segment`: the row's index into `segments`), the type of each
    transaction marker (row -> W.ControlRecordType) and the walk's own findings."""

    topic: str | None
    partition: int | None
    path: str
    segments: list[str] = field(default_factory=list)
    cols: dict[str, Any] = field(default_factory=dict)
    markers: dict[int, int] = field(default_factory=dict)
    findings: list[Finding] = field(default_factory=list)
    #: (producer id, row of the first data batch, row of the marker or None while open), in log order
    transactions: list[tuple[int, int, int | None]] = field(default_factory=list)
    bytes: int = 0
    unread_bytes: int = 0
    summary: dict[str, Any] = field(default_factory=dict)

    @property
    def rows(self) -> int:
        return len(self.cols["position"]) if self.cols else 0


@dataclass
class AuditResult:
    partitions: list[PartitionFacts]
    findings: list[Finding]
    clock: int | None
    clock_source: str
    config: AuditConfig


class _Sink:
    """Findings of one partition, at most `cap` per check (then one finding counts the rest)."""

    def __init__(self, pf: PartitionFacts, cap: int) -> None:
        self.pf = pf
        self.cap = cap
        self.out: list[Finding] = []
        self.seen: dict[str, int] = {}
        self.first_dropped: dict[str, Finding] = {}

    def add(self, check: str, severity: Severity, row: int | None, message: str, **details: Any) -> None:
        n = self.seen.get(check, 0) + 1
        self.seen[check] = n
        f = self._at(check, severity, row, message, details)
        if n <= self.cap:
            self.out.append(f)
        elif check not in self.first_dropped:
            self.first_dropped[check] = f

    def _at(self, check: str, severity: Severity, row: int | None, message: str, details: dict[str, Any]) -> Finding:
        pf = self.pf
        if row is None:
            return Finding(check, severity, message, pf.topic, pf.partition, details=details)
        c = pf.cols
        return Finding(check, severity, message, pf.topic, pf.partition, int(c["base_offset"][row]),
                       int(c["last_offset"][row]), pf.segments[int(c["segment"][row])], int(c["position"][row]),
                       details)

    def close(self) -> list[Finding]:
        for check, first in self.first_dropped.items():
            more = self.seen[check] - self.cap
            self.out.append(Finding(check, first.severity, f"{more} more finding(s) of this check in this partition "
                                    f"(the first of them: {first.where()}: {first.message})", self.pf.topic,
                                    self.pf.partition, first.first_offset, first.last_offset, first.segment,
                                    first.position, {"more": more}))
        return self.out


# ------------------------------------------------------------------------------------ the walk
def walk_partition(directory: str, segments: Iterable[SegmentFiles] | None, config: AuditConfig,
                   advance: Callable[[int], object] = lambda n: None) -> PartitionFacts:
    """The partition's batch headers through the log layer's one header walk (kbatch.log.summary's
    HeaderSource over the read path, kbatch.log.fetch.read_log: the same batches, the same damage
    rules and the same CRC cache as `stats` and the summary), collected as PartitionFacts. Every
    range the read path could not read is an error finding, and so is the partial batch at the end
    of the active segment that readers ignore. `segments`: when given (a single .log named on the
    command line), only the facts of those segments are kept."""
    from .layout import describe

    try:
        part = describe(directory, [])
        topic, partition = part.topic, part.partition
    except (KBatchError, OSError):
        topic, partition = None, None
    pf = PartitionFacts(topic, partition, directory)
    chunks: dict[str, list[Any]] = {k: [] for k in (*FACT_COLUMNS, "segment", "min_timestamp")}
    only = None if segments is None else {_norm(s.path(".log")) for s in segments}
    walk = _Walk(pf, chunks, config, advance, only)
    walk.run()
    if not pf.cols:
        walk.columns()
    return pf


_INDEX_COLUMNS = ("position", "size", "base_offset", "last_offset", "max_timestamp", "magic", "attributes")


def _norm(path: str) -> str:
    from .. import _fs

    return path if _fs.is_remote(path) else os.path.realpath(path)


def _damage_check(reason: str) -> str:
    """The check id of a range the read path could not read, by what it says."""
    low = reason.lower()
    if "crc" in low:
        return "storage.crc"
    if "offset" in low and any(w in low for w in ("backwards", "overlap", "order", "past the log end", "below")):
        return "storage.offsets"
    if "incomplete" in low or "not a complete batch" in low or "partial" in low or "ends at" in low:
        return "storage.truncated"
    return "storage.corrupt"


class _Walk:
    def __init__(self, pf: PartitionFacts, chunks: dict[str, list[Any]], config: AuditConfig,
                 advance: Callable[[int], object], only: set[str] | None) -> None:
        self.pf = pf
        self.chunks = chunks
        self.config = config
        self.advance = advance
        self.only = only
        self.rows = 0

    def columns(self) -> None:
        """The collected header rows as pf.cols (one array per column)."""
        if self.chunks["position"]:
            self.pf.cols = {k: np.concatenate(v) for k, v in self.chunks.items()}
        else:
            self.pf.cols = {k: np.zeros(0, dtype=np.int64) for k in self.chunks}
            self.pf.cols["crc_valid"] = np.zeros(0, dtype=bool)

    def _min_timestamps(self, s: Any, a: int, b: int, path: str) -> I64:
        """Per row, the smallest record timestamp of a CreateTime v2 batch of several records, decoded
        (config.record_timestamps); INT64_MAX where not decoded (the header's first and max stand)."""
        from ..record.file_records import batch_at

        out = np.full(b - a, W.INT64_MAX, dtype=np.int64)
        if not self.config.record_timestamps:
            return out
        attrs = s["attributes"][a:b]
        rows = np.flatnonzero((s["magic"][a:b] == 2) & ((attrs & (W.CONTROL_FLAG_MASK | W.TIMESTAMP_TYPE_MASK)) == 0)
                              & (s["record_count"][a:b] > 1) & s["crc_valid"][a:b].astype(bool))
        for i in rows.tolist():
            try:
                stamps = [r.timestamp for r in batch_at(s, a + i).records() if r.timestamp is not None]
            except KBatchError as e:
                self.error("storage.corrupt", path, int(s["position"][a + i]), f"records that do not decode: {e}",
                           int(s["base_offset"][a + i]))
                continue
            if stamps:
                out[i] = min(stamps)
        return out

    def error(self, check: str, path: str | None, position: int | None, message: str, first: int | None = None,
              last: int | None = None, **details: Any) -> None:
        pf = self.pf
        pf.findings.append(Finding(check, Severity.ERROR, message, pf.topic, pf.partition, first,
                                   first if last is None else last, path, position, details))

    def run(self) -> None:
        from .fetch import IsolationLevel, read_log
        from .summary import HeaderSource, SummaryCache, default_cache_dir
        from .unified_log import Log

        pf = self.pf
        try:
            log = Log.open(pf.path)
        except (KBatchError, OSError) as e:
            self.error("storage.unreadable", pf.path, None, f"cannot open the partition: {e}")
            return
        try:
            segs = log.segments
            pf.segments = [s.path(".log") for s in segs]
            if self.only is not None and self.only >= {_norm(p) for p in pf.segments}:
                self.only = None  # every segment asked for
            elif self.only is not None:
                self.only = {p for p in pf.segments if _norm(p) in self.only}
            number = {p: i for i, p in enumerate(pf.segments)}
            if not segs:
                return
            cache_dir = default_cache_dir() if self.config.cache else None
            source = HeaderSource(log, SummaryCache(cache_dir) if cache_dir else None)
            res = read_log(log, segs[0].base_offset, isolation=IsolationLevel.READ_UNCOMMITTED,
                           verify_crc=self.config.verify_crc, skip_unreadable=True, scan=source)
            ends: dict[int, int] = {}  # segment -> where the batches read end
            txns = _TxnFollower(pf.path, segs[0].base_offset)
            for w in res.windows():
                path = w.segment.path(".log")
                seg_no = number[path]
                s, a, b = w.window, w.start, w.stop
                n = b - a
                ends[seg_no] = int(s["position"][b - 1] + s["size"][b - 1])
                done = int(s["size"][a:b].sum())
                pf.bytes += done
                self.advance(done)
                kinds = _marker_kinds(s, a, b)
                txns.follow(seg_no, s, a, b, kinds)
                if self.only is not None and path not in self.only:
                    continue
                for k in FACT_COLUMNS:
                    self.chunks[k].append(np.asarray(s[k][a:b]))
                self.chunks["segment"].append(np.full(n, seg_no, dtype=np.int32))
                self.chunks["min_timestamp"].append(self._min_timestamps(s, a, b, path))
                attrs, magic = s["attributes"][a:b], s["magic"][a:b]
                ctl = np.flatnonzero((magic == 2) & ((attrs & W.CONTROL_FLAG_MASK) != 0)
                                     & ((attrs & W.TRANSACTIONAL_FLAG_MASK) != 0))
                for i in ctl.tolist():  # the one record of a marker says COMMIT or ABORT
                    kind = kinds.get(i)
                    if isinstance(kind, KBatchError):
                        self.error("storage.corrupt", path, int(s["position"][a + i]),
                                   f"a transaction marker that does not decode: {kind}", int(s["base_offset"][a + i]))
                        kind = W.ControlRecordType.UNKNOWN
                    pf.markers[self.rows + i] = int(kind if kind is not None else W.ControlRecordType.UNKNOWN)
                self.rows += n
            damaged: set[str] = set()
            for r in res.unreadable:
                damaged.add(r.path)
                if self.only is not None and r.path not in self.only:
                    continue
                first = None if r.after_offset is None else r.after_offset + 1
                last = None if r.next_offset is None else r.next_offset - 1
                if first is not None and last is not None and last < first:
                    last = first
                self.error(_damage_check(r.reason), r.path, r.position, f"{r.size} bytes from byte {r.position} could "
                           f"not be read ({r.reason}); {r.offsets()} are in or behind them and were not audited",
                           first, last, unread_bytes=r.size)
                pf.unread_bytes += r.size
                self.advance(r.size)
            # the partial batch at the end of the active segment: readers ignore it (as Kafka does),
            # the audit names it
            tail = segs[-1]
            path = tail.path(".log")
            end = ends.get(len(segs) - 1, 0)
            if path not in damaged and end < tail.size and (self.only is None or path in self.only):
                self.error("storage.truncated", path, end, f"{tail.size - end} bytes at the end of the active segment "
                           f"are not a complete batch ({tail.log.incomplete(end, 'the segment')}); readers ignore "
                           f"them, as Kafka does", unread_bytes=tail.size - end)
                pf.unread_bytes += tail.size - end
            self.columns()
            if self.config.check_indexes:
                # .txnindex: segments read whole before the first one with damage or a torn tail (the
                # transactions open after that are not known), as verify checks them
                broken = [number[p] for p in damaged] + ([len(segs) - 1] if ends.get(len(segs) - 1, 0) < tail.size else [])
                for number_k, seg in enumerate(segs[:min(broken, default=len(segs))]):
                    if self.only is None or seg.path(".log") in self.only:
                        self._txn_index(seg, *txns.of(number_k))
                seg_rows = pf.cols["segment"]
                for number_k, seg in enumerate(segs):
                    p = seg.path(".log")
                    if self.only is not None and p not in self.only:
                        continue
                    # a segment read whole from byte 0: its rows are what a scan would give (no rescan)
                    rows = np.flatnonzero(seg_rows == number_k)
                    clean = (p not in damaged and len(rows) > 0 and int(pf.cols["position"][rows[0]]) == 0
                             and ends.get(number_k) == seg.size)
                    self._indexes(seg, {c: pf.cols[c][rows] for c in _INDEX_COLUMNS} if clean else None)
        except StorageError as e:  # a file changed or failed while it was read
            self.error("storage.unreadable", getattr(e, "path", None) or pf.path, None, f"cannot read: {e}")
        finally:
            log.close()

    def _txn_index(self, seg: Any, want: list[Any], commits: set[tuple[int, int]], exact: bool | None) -> None:
        """The segment's .txnindex against its markers (kbatch.log.index_rules.check_txn_index);
        `exact` None: a marker did not decode, so the transactions are not known."""
        from .index import TransactionIndex
        from .index_rules import check_txn_index

        if exact is None:
            return
        ipath = seg.files.path(".txnindex")
        try:
            have = TransactionIndex.parse(seg.files.read_index(".txnindex"), ipath)
        except FileNotFoundError:
            have = None
        except (StorageError, OSError) as e:
            self.error("storage.index", ipath, None, f"cannot read: {getattr(e, 'reason', None) or e}")
            return
        except KBatchError as e:
            self.error("storage.index", ipath, e.position, f"cannot read: {e}")
            return
        for x in check_txn_index(have, want, commits, exact):
            self.error("storage.index", ipath, x.position, x.message, **({} if x.entry is None else {"entry": x.entry}))

    def _indexes(self, seg: Any, columns: dict[str, Any] | None) -> None:
        """Index entries against the log by kbatch.log.index_rules (every form a broker writes is
        valid; only damage is a finding). A missing index is not one (a broker rebuilds it)."""
        from .index import OffsetIndex, TimeIndex
        from .index_rules import SegmentBatches, check_offset_index, check_time_index

        files, base = seg.files, seg.base_offset
        rules: tuple[tuple[str, Any, Callable[..., list[Any]]], ...] = (
            (".index", OffsetIndex, check_offset_index), (".timeindex", TimeIndex, check_time_index))
        sb: SegmentBatches | None = None
        for suffix, cls, check in rules:
            ipath = files.path(suffix)
            try:
                index = cls(base, files.read_index(suffix), path=ipath)
            except FileNotFoundError:
                continue
            except (StorageError, OSError) as e:
                self.error("storage.index", ipath, None, f"cannot read: {getattr(e, 'reason', None) or e}")
                continue
            except KBatchError as e:
                self.error("storage.index", ipath, e.position, f"cannot read: {e}")
                continue
            try:
                try:
                    index.sanity_check()
                except KBatchError as e:
                    self.error("storage.index", ipath, e.position, f"sanity check failed: {e}")
                    continue
                entries = list(index)
                if not entries:
                    continue
                if sb is None:
                    sb = SegmentBatches(seg.log, columns)
                for x in check(ipath, entries, sb):
                    if x.problem:
                        self.error("storage.index", ipath, x.position, x.message, entry=list(x.entry))
            finally:
                index.close()


def _marker_kinds(s: Any, a: int, b: int) -> dict[int, Any]:
    """{window row - a: W.ControlRecordType (None: not a marker's) or the KBatchError decoding it}
    of the transactional control batches in rows [a, b): only a marker's one record is decoded."""
    from ..record.file_records import batch_at
    from .producer_state import marker_type

    attrs, magic = s["attributes"][a:b], s["magic"][a:b]
    out: dict[int, Any] = {}
    for i in np.flatnonzero((magic == 2) & ((attrs & W.CONTROL_FLAG_MASK) != 0)
                            & ((attrs & W.TRANSACTIONAL_FLAG_MASK) != 0)).tolist():
        try:
            out[i] = marker_type(batch_at(s, a + i))
        except KBatchError as e:
            out[i] = e
    return out


class _TxnFollower:
    """The open transactions followed through a partition's batches in log order (producer_state.
    OngoingTxns, from the first segment's producer snapshot when the log's start was trimmed):
    per segment, the .txnindex entries its ABORT markers give and its COMMIT markers."""

    def __init__(self, directory: str, base_offset: int) -> None:
        from .producer_state import OngoingTxns, ongoing_at

        seeded = ongoing_at(directory, base_offset) if os.path.isdir(directory) else None
        self.ongoing: Any = seeded if seeded is not None else OngoingTxns()
        self.exact = seeded is not None
        self.want: dict[int, list[Any]] = {}
        self.commits: dict[int, set[tuple[int, int]]] = {}
        self.lost_at: int | None = None   # the segment where a marker did not decode

    def follow(self, seg_no: int, s: Any, a: int, b: int, kinds: dict[int, Any]) -> None:
        if self.ongoing is None:
            return
        attrs, magic, pids = s["attributes"][a:b], s["magic"][a:b], s["producer_id"][a:b]
        rows = np.flatnonzero((magic == 2) & ((attrs & W.TRANSACTIONAL_FLAG_MASK) != 0) & (pids >= 0))
        want, commits = self.want.setdefault(seg_no, []), self.commits.setdefault(seg_no, set())
        for i in rows.tolist():
            control = bool(attrs[i] & W.CONTROL_FLAG_MASK)
            kind = kinds.get(i) if control else None
            if isinstance(kind, KBatchError):
                self.ongoing, self.lost_at = None, seg_no   # its own finding; what follows is not known
                return
            pid, base = int(pids[i]), int(s["base_offset"][a + i])
            if kind == W.ControlRecordType.COMMIT:
                commits.add((pid, base))
            entry = self.ongoing.on_batch(pid, base, True, control, kind)
            if entry is not None:
                want.append(entry)

    def of(self, seg_no: int) -> tuple[list[Any], set[tuple[int, int]], bool | None]:
        """(the entries a broker writes, the COMMIT markers, whether the LSOs are known) of a
        segment; None from the segment where a marker did not decode."""
        if self.lost_at is not None and seg_no >= self.lost_at:
            return [], set(), None
        return self.want.get(seg_no, []), self.commits.get(seg_no, set()), self.exact


# ------------------------------------------------------------------------------------ the checks
def log_clock(partitions: list[PartitionFacts]) -> int | None:
    """The log's own clock: the newest max timestamp of each partition's last data batch with a
    millisecond-looking timestamp, the latest of them (None for a log without timestamps)."""
    best: int | None = None
    for pf in partitions:
        if not pf.rows:
            continue
        c = pf.cols
        ts = c["max_timestamp"]
        usable = (c["crc_valid"] & (c["magic"] >= 1) & ((c["attributes"] & W.CONTROL_FLAG_MASK) == 0)
                  & (ts >= 0) & (ts < MICROS_FROM))
        rows = np.flatnonzero(usable)
        if len(rows):
            t = int(ts[rows[-1]])
            best = t if best is None else max(best, t)
    return best


def audit_partitions(parts: Iterable[tuple[str, Iterable[SegmentFiles]]], config: AuditConfig | None = None,
                     advance: Callable[[int], object] = lambda n: None) -> AuditResult:
    """Walk every partition, then run every check with the log's clock (config.now when given)."""
    config = config or AuditConfig()
    facts = [walk_partition(d, segs, config, advance) for d, segs in parts]
    clock = config.now if config.now is not None else log_clock(facts)
    source = "--now" if config.now is not None else "log"
    findings: list[Finding] = []
    for pf in facts:
        findings += check_partition(pf, config, clock)
    return AuditResult(facts, findings, clock, source, config)


def check_partition(pf: PartitionFacts, config: AuditConfig, clock: int | None) -> list[Finding]:
    sink = _Sink(pf, config.max_findings)
    out = list(pf.findings)
    pf.summary = dict(topic=pf.topic, partition=pf.partition, path=pf.path, segments=len(pf.segments),
                      batches=pf.rows, bytes=pf.bytes, unread_bytes=pf.unread_bytes, records=0,
                      first_offset=None, end_offset=None, last_stable_offset=None, open_transactions=0)
    if pf.rows:
        c = pf.cols
        good = c["crc_valid"]
        data = good & ((c["attributes"] & W.CONTROL_FLAG_MASK) == 0) | (c["magic"] < 2) & good
        pf.summary["records"] = int(np.maximum(c["record_count"][data], 0).sum())
        if good.any():
            pf.summary["first_offset"] = int(c["base_offset"][good].min())
            pf.summary["end_offset"] = int(c["last_offset"][good].max()) + 1
        _timestamps(pf, config, clock, sink)
        _producers(pf, sink)
        _transactions(pf, config, clock, sink)
        _storage(pf, config, sink)
    return out + sink.close()


def _sentinel(c: dict[str, Any]) -> I64:
    """Per row, the value that means "no timestamp" (KIP-228: Long.MIN_VALUE with bit 7, else -1)."""
    ext = (c["magic"] == 2) & ((c["attributes"] & W.TIMESTAMP_EXTENDED_FLAG_MASK) != 0)
    return np.where(ext, np.int64(W.NO_TIMESTAMP_EXTENDED), np.int64(W.NO_TIMESTAMP))


def _sat(v: int) -> int:
    return max(W.INT64_MIN, min(W.INT64_MAX, v))


def _timestamps(pf: PartitionFacts, config: AuditConfig, clock: int | None, sink: _Sink) -> None:
    """Per batch: its max timestamp in a unit that is not ms, else after clock + after_max_ms; its
    lowest known timestamp before 1970, else before clock - before_max_ms; then, over the batches
    none of those caught, CreateTime going backwards."""
    c = pf.cols
    ts, first, attrs, magic = c["max_timestamp"], c["first_timestamp"], c["attributes"], c["magic"]
    none = _sentinel(c)
    ctl = (magic == 2) & ((attrs & W.CONTROL_FLAG_MASK) != 0)
    # baseTimestamp is a record's timestamp unless the delete-horizon bit makes it the horizon; a
    # batch of negative timestamps without bit 7 has maxTimestamp -1 (Kafka starts it there), so
    # its first timestamp is what shows them
    valid = c["crc_valid"] & (magic >= 1) & ~ctl
    first_ok = valid & (magic == 2) & ((attrs & W.DELETE_HORIZON_FLAG_MASK) == 0) & (first != none)
    has = valid & ((ts != none) | first_ok)
    low = np.where(first_ok, np.where(ts != none, np.minimum(first, ts), first), ts)
    low = np.minimum(low, c["min_timestamp"])  # decoded minimums (record_timestamps), INT64_MAX elsewhere
    has |= valid & (c["min_timestamp"] != W.INT64_MAX)
    unit = has & (ts >= MICROS_FROM)
    neg = has & ~unit & (low < 0)
    caught = unit | neg
    for i in np.flatnonzero(unit).tolist():
        t = int(ts[i])
        kind = "nanoseconds" if t >= NANOS_FROM else "microseconds"
        sink.add("timestamp.unit", Severity.ERROR, i, f"max timestamp {t} is not a time in milliseconds: it looks "
                 f"like {kind} (KAFKA-14991); time retention and lookups by time go wrong", timestamp=t, unit=kind)
    for i in np.flatnonzero(neg).tolist():
        t = int(low[i])
        sink.add("timestamp.negative", Severity.WARNING, i, f"timestamp {t} is before 1970 (KIP-228: valid only "
                 f"where the producer meant it)", timestamp=t)
    if clock is not None:
        hi = _sat(clock + config.after_max_ms)
        lo = _sat(clock - config.before_max_ms)
        # the max and the lowest timestamp are different records: a batch may hold one too new
        # and one too old; a value already caught as a unit mistake or before 1970 is not again
        future = has & ~unit & (ts > hi)
        old = has & ~neg & (low < lo)
        caught |= future | old
        last_seg = len(pf.segments) - 1
        for i in np.flatnonzero(future).tolist():
            t = int(ts[i])
            msg = (f"max timestamp {t} is {_span(t - clock)} after the log's clock {clock} (KIP-937: "
                   f"message.timestamp.after.max.ms = {config.after_max_ms})")
            details: dict[str, Any] = dict(timestamp=t, clock=clock, after_max_ms=config.after_max_ms)
            if int(c["segment"][i]) != last_seg and config.retention_ms >= 0:
                until = _sat(t + config.retention_ms)
                msg += f"; time retention cannot delete this segment before {until}"
                details["retention_blocked_until"] = until
            sink.add("timestamp.future", Severity.WARNING, i, msg, **details)
        for i in np.flatnonzero(old).tolist():
            t = int(low[i])
            sink.add("timestamp.too-old", Severity.WARNING, i, f"timestamp {t} is {_span(clock - t)} before the "
                     f"log's clock {clock} (KIP-937: message.timestamp.before.max.ms = {config.before_max_ms})",
                     timestamp=t, clock=clock, before_max_ms=config.before_max_ms)
    if config.backwards_max_ms is not None:
        create = has & ~caught & ((magic == 1) & ((attrs & W.LEGACY_TIMESTAMP_TYPE_MASK) == 0)
                                  | (magic == 2) & ((attrs & W.TIMESTAMP_TYPE_MASK) == 0))
        rows = np.flatnonzero(create)
        if len(rows) > 1:
            hi_ts = np.maximum.accumulate(ts[rows])
            before = np.concatenate(([W.INT64_MIN], hi_ts[:-1]))
            lows = low[rows]
            # both are ms values (units, negatives and the unchecked first row left out): no overflow
            back = np.zeros(len(rows), dtype=bool)
            back[1:] = (before[1:] - lows[1:]) > config.backwards_max_ms
            for j in np.flatnonzero(back).tolist():
                i = int(rows[j])
                sink.add("timestamp.backwards", Severity.WARNING, i, f"CreateTime {int(lows[j])} is "
                         f"{_span(int(before[j]) - int(lows[j]))} before the newest timestamp before it "
                         f"({int(before[j])}; bound {config.backwards_max_ms} ms)", timestamp=int(lows[j]),
                         newest_before=int(before[j]), bound_ms=config.backwards_max_ms)


def _span(ms: int) -> str:
    for unit, size in (("days", 86_400_000), ("hours", 3_600_000), ("minutes", 60_000), ("seconds", 1000)):
        if abs(ms) >= size:
            return f"{ms / size:.1f} {unit}"
    return f"{ms} ms"


_SEQ = 1 << 31  # sequences wrap from Integer.MAX_VALUE to 0 (DefaultRecordBatch.incrementSequence)


def _producers(pf: PartitionFacts, sink: _Sink) -> None:
    """Per producer id, in log order (Kafka's ProducerStateManager rules): a data batch of an epoch
    below the newest one seen is fenced (an epoch seen before) or an epoch going back (one never
    seen); within an epoch each batch starts at the sequence after the last (a higher one is a gap
    unless compaction removed offsets between them, a lower one a duplicate); a new epoch starts
    at 0. Producers whose batches are all in order are passed over without a Python loop."""
    c = pf.cols
    magic, attrs = c["magic"], c["attributes"]
    pid = c["producer_id"]
    rows = np.flatnonzero(c["crc_valid"] & (magic == 2) & (pid >= 0))
    if not len(rows):
        return
    base, last = c["base_offset"], c["last_offset"]
    holes = np.zeros(len(base), dtype=np.int64)  # offsets missing before each batch (compaction, retention)
    holes[1:] = np.cumsum(base[1:] > last[:-1] + 1)
    order = rows[np.argsort(pid[rows], kind="stable")]
    p, e = pid[order], c["producer_epoch"][order].astype(np.int64)
    seq = c["base_sequence"][order].astype(np.int64)
    ctl = (attrs[order] & W.CONTROL_FLAG_MASK) != 0
    span = (last[order] - base[order] + 1)
    nxt = (seq + span) % _SEQ
    same = np.zeros(len(order), dtype=bool)
    same[1:] = p[1:] == p[:-1]
    regular = ~same.copy()
    regular[1:] |= same[1:] & (e[1:] == e[:-1]) & ~ctl[1:] & ~ctl[:-1] & (seq[1:] == nxt[:-1]) & (seq[1:] >= 0)
    starts = np.flatnonzero(~same)
    ends = np.concatenate((starts[1:], [len(order)]))
    bad_groups = np.flatnonzero(np.add.reduceat(~regular, starts) > 0) if len(starts) else np.zeros(0, np.intp)
    for g in bad_groups.tolist():
        _producer(pf, sink, order[starts[g]:ends[g]], holes)


def _producer(pf: PartitionFacts, sink: _Sink, rows: npt.NDArray[np.intp], holes: I64) -> None:
    c = pf.cols
    newest: int | None = None
    seen: set[int] = set()
    last: tuple[int, int, int] | None = None  # (epoch, next sequence, row) of the last data batch
    for r in rows.tolist():
        pid, e, s = int(c["producer_id"][r]), int(c["producer_epoch"][r]), int(c["base_sequence"][r])
        control = bool(c["attributes"][r] & W.CONTROL_FLAG_MASK)
        if newest is not None and e < newest:
            if e in seen:
                sink.add("producer.fenced-epoch", Severity.ERROR, r, f"producer {pid} wrote with epoch {e} after epoch "
                         f"{newest} fenced it (a zombie producer's batch)", producer_id=pid, epoch=e,
                         newest_epoch=newest)
            else:
                sink.add("producer.epoch-back", Severity.ERROR, r, f"producer {pid}'s epoch goes back from {newest} "
                         f"to {e}, an epoch not seen before", producer_id=pid, epoch=e, newest_epoch=newest)
            continue
        new_epoch = newest is not None and e > newest
        newest = e if newest is None else max(newest, e)
        seen.add(e)
        if control or s < 0:
            if new_epoch:
                last = None
            continue
        span = int(c["last_offset"][r]) - int(c["base_offset"][r]) + 1
        if new_epoch and s != 0 and (last is None or holes[r] == holes[last[2]]):
            sink.add("producer.sequence-gap", Severity.ERROR, r, f"producer {pid}'s new epoch {e} starts at sequence "
                     f"{s}, not 0", producer_id=pid, epoch=e, sequence=s, expected=0)
        elif last is not None and last[0] == e and s != last[1]:
            behind = (last[1] - s) % _SEQ
            if behind < _SEQ // 2:
                sink.add("producer.duplicate-sequence", Severity.ERROR, r, f"producer {pid} epoch {e}: sequence {s} "
                         f"was written before (the next one due is {last[1]}): duplicated records",
                         producer_id=pid, epoch=e, sequence=s, expected=last[1])
                continue
            if holes[r] == holes[last[2]]:
                sink.add("producer.sequence-gap", Severity.ERROR, r, f"producer {pid} epoch {e}: sequence {s} "
                         f"follows {(last[1] - 1) % _SEQ} ({(s - last[1]) % _SEQ} missing) with no offsets removed "
                         f"between them", producer_id=pid, epoch=e, sequence=s, expected=last[1])
        last = (e, (s + span) % _SEQ, r)


def _transactions(pf: PartitionFacts, config: AuditConfig, clock: int | None, sink: _Sink) -> None:
    """Transactions in log order: a producer's first transactional data batch opens one, its marker
    closes it. A marker with no open transaction is "without data" (info: an empty transaction,
    data compacted away, or data before the log start); what is still open at the end is open
    (info), or hanging when its first batch is older than clock - transaction.max.timeout.ms (KIP-664's
    rule, offline). The last stable offset is the first offset of the oldest open transaction."""
    c = pf.cols
    attrs = c["attributes"]
    rows = np.flatnonzero(c["crc_valid"] & (c["magic"] == 2) & ((attrs & W.TRANSACTIONAL_FLAG_MASK) != 0))
    open_: dict[int, int] = {}
    closed = 0
    for r in rows.tolist():
        pid = int(c["producer_id"][r])
        if attrs[r] & W.CONTROL_FLAG_MASK:
            first = open_.pop(pid, None)
            if first is None:
                kind = pf.markers.get(r)
                name = W.ControlRecordType(kind).name if kind is not None and kind in (0, 1) else "UNKNOWN"
                sink.add("transaction.marker-without-data", Severity.INFO, r, f"{name} marker of producer {pid} "
                         f"closes no transaction here (empty transaction, data compacted away, or written before "
                         f"the log start)", producer_id=pid, marker=name)
            else:
                closed += 1
                pf.transactions.append((pid, first, r))
        elif pid not in open_:
            open_[pid] = r
    end = pf.summary.get("end_offset")
    lso = min((int(c["base_offset"][r]) for r in open_.values()), default=end)
    pf.summary.update(last_stable_offset=lso, open_transactions=len(open_), transactions_closed=closed)
    for pid, r in sorted(open_.items(), key=lambda kv: kv[1]):
        pf.transactions.append((pid, r, None))
        started = int(c["max_timestamp"][r])
        first = int(c["base_offset"][r])
        details = dict(producer_id=pid, epoch=int(c["producer_epoch"][r]), first_offset=first, started=started,
                       clock=clock, transaction_max_timeout_ms=config.transaction_max_timeout_ms,
                       last_stable_offset=lso)
        if clock is not None and started < clock - config.transaction_max_timeout_ms:
            sink.add("transaction.hanging", Severity.ERROR, r, f"transaction of producer {pid} open since offset "
                     f"{first} ({_span(clock - started)} before the log's clock, over transaction.max.timeout.ms = "
                     f"{config.transaction_max_timeout_ms}): hanging; read_committed consumers stop at offset "
                     f"{lso}", **details)
        else:
            sink.add("transaction.open", Severity.INFO, r, f"transaction of producer {pid} open since offset {first} "
                     f"(no marker yet); the last stable offset is {lso}", **details)


def _storage(pf: PartitionFacts, config: AuditConfig, sink: _Sink) -> None:
    """Empty batches (kept by compaction to hold a producer's last sequence), partition leader
    epochs going back from one batch to the next, batches over max.message.bytes."""
    c = pf.cols
    good = c["crc_valid"]
    v2 = good & (c["magic"] == 2)
    for i in np.flatnonzero(v2 & (c["record_count"] == 0)).tolist():
        sink.add("storage.empty-batch", Severity.INFO, i, f"an empty batch (no records; offsets "
                 f"{int(c['base_offset'][i])}..{int(c['last_offset'][i])}), as compaction keeps one to hold producer "
                 f"{int(c['producer_id'][i])}'s last sequence", producer_id=int(c["producer_id"][i]))
    rows = np.flatnonzero(v2 & (c["partition_leader_epoch"] >= 0))
    if len(rows) > 1:
        ple = c["partition_leader_epoch"][rows].astype(np.int64)
        for j in (np.flatnonzero(ple[1:] < ple[:-1]) + 1).tolist():
            i = int(rows[j])
            sink.add("storage.leader-epoch-back", Severity.ERROR, i, f"partition leader epoch goes back from "
                     f"{int(ple[j - 1])} to {int(ple[j])} (a batch of an older leader after a newer one's)",
                     epoch=int(ple[j]), previous_epoch=int(ple[j - 1]))
    for i in np.flatnonzero(good & (c["size"] > config.max_message_bytes)).tolist():
        sz = int(c["size"][i])
        sink.add("storage.oversized", Severity.WARNING, i, f"batch of {sz} bytes is over max.message.bytes = "
                 f"{config.max_message_bytes}: a broker with this config refuses it, and consumers need "
                 f"fetch sizes above it", size=sz, max_message_bytes=config.max_message_bytes)


#: every check id, its severity and what it means (docs/cli.md lists the same)
CHECKS: dict[str, tuple[Severity, str]] = {
    "producer.sequence-gap": (Severity.ERROR, "sequences of one producer epoch skip numbers (records lost), or a new epoch does not start at 0"),
    "producer.duplicate-sequence": (Severity.ERROR, "a sequence of one producer epoch written twice (duplicated records)"),
    "producer.fenced-epoch": (Severity.ERROR, "a batch of an epoch a newer epoch had fenced (a zombie's write)"),
    "producer.epoch-back": (Severity.ERROR, "a producer's epoch goes back to one never seen"),
    "transaction.open": (Severity.INFO, "a transaction without its marker yet, with the last stable offset"),
    "transaction.hanging": (Severity.ERROR, "an open transaction older than transaction.max.timeout.ms by the log's clock (KIP-664)"),
    "transaction.marker-without-data": (Severity.INFO, "a COMMIT/ABORT marker that closes no transaction in this partition"),
    "timestamp.unit": (Severity.ERROR, "a timestamp in microseconds or nanoseconds (KAFKA-14991)"),
    "timestamp.negative": (Severity.WARNING, "a timestamp before 1970 (KIP-228)"),
    "timestamp.future": (Severity.WARNING, "a timestamp after clock + message.timestamp.after.max.ms (KIP-937); holds back time retention"),
    "timestamp.too-old": (Severity.WARNING, "a timestamp before clock - message.timestamp.before.max.ms (KIP-937)"),
    "timestamp.backwards": (Severity.WARNING, "CreateTime going backwards by more than --backwards-max-ms"),
    "storage.crc": (Severity.ERROR, "a batch whose CRC does not match"),
    "storage.corrupt": (Severity.ERROR, "bytes that do not frame as a batch (the rest of the segment is unread)"),
    "storage.truncated": (Severity.ERROR, "a partial batch at the end of a segment"),
    "storage.unreadable": (Severity.ERROR, "a segment file that cannot be read"),
    "storage.offsets": (Severity.ERROR, "offsets going backwards or overlapping"),
    "storage.segment-overlap": (Severity.ERROR, "a segment whose base offset is not above the previous segment's last"),
    "storage.index": (Severity.ERROR, "an .index/.timeindex entry the log contradicts, or an unreadable index"),
    "storage.empty-batch": (Severity.INFO, "an empty batch kept by compaction"),
    "storage.leader-epoch-back": (Severity.ERROR, "a partition leader epoch lower than the batch before"),
    "storage.oversized": (Severity.WARNING, "a batch larger than max.message.bytes"),
}


__all__ = ["AuditConfig", "AuditResult", "PartitionFacts", "audit_partitions", "walk_partition", "check_partition",
           "log_clock", "read_properties", "CHECKS", "FACT_COLUMNS", "DEFAULT_TRANSACTION_MAX_TIMEOUT_MS",
           "DEFAULT_AFTER_MAX_MS", "DEFAULT_BEFORE_MAX_MS", "DEFAULT_BACKWARDS_MAX_MS", "DEFAULT_RETENTION_MS"]
