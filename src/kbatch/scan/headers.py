"""Narrow scans answered from verified headers (issue 41): a scan of only `topic`, `partition`,
`offset`, `timestamp` and `timestampType` needs no record bytes when the header summary's cache
(kbatch.log.summary.SummaryCache: the CRC-checked batch headers of a sealed segment and the
per-record timestamps a header does not give) covers every segment the range touches: a sealed
segment's whole entry, or the active segment's verified prefix (docs/summary.md), after which only
the bytes appended since are read and CRC-checked by the summary's HeaderSource and the records'
timestamps of those new batches walked.

The batches are the read path's own: kbatch.log.fetch.read_log with the summary's HeaderSource as
its scan (the same damage rules, the last stable offset, aborted transactions removed under
read_committed by the read path's AbortedFilter, control batches never rows). A batch gives its
rows from its header when its offsets are dense (base..last: a compacted batch with gaps needs its
records' offsets) and it is v2; a record's timestamp is the header's for LogAppendTime and single
records with a clear maxTimestamp (the summary's rule, kbatch.log.summary._needs_walk), else the
cached walk's. Where any of that does not hold (a segment not cached, an active one without a
prefix entry that still holds, a batch with gaps, magic 0/1, a read ending at an undecided transaction) the range is decoded instead:
`None` from cached_range, never a partial answer.
"""
from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from .. import _wire as W
from ..log.fetch import AbortedFilter, IsolationLevel, read_log
from ..log.summary import HeaderSource, SummaryCache

if TYPE_CHECKING:
    import pyarrow as pa

    from ..log.segment import LogSegment
    from ..log.unified_log import Log
    from .plan import ScanRange

#: the columns a header (and the cached timestamps) can give
NARROW = frozenset({"topic", "partition", "offset", "timestamp", "timestampType"})
_US_LIMIT = (2**63 - 1) // 1000  # largest |ms| whose microseconds fit in int64 (the decoder's null beyond)


#: segment base offset -> its cached walked timestamps (SummaryCache.load_time_arrays), or None
_Times = dict[int, "tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray] | None"]


def answerable(columns: Sequence[str]) -> bool:
    return bool(columns) and set(columns) <= NARROW


def _covered(log: Log, r: ScanRange, cache: SummaryCache, source: HeaderSource, times: _Times) -> bool:
    """Every segment the range touches is sealed and its timestamps are cached, or is the active
    one with a verified prefix entry (what was loaded is kept for the read: `source`, `times`)."""
    segs = log.segments
    if r.end_offset is None or r.end_offset <= r.start_offset:
        return False
    for k, seg in enumerate(segs):
        nxt = segs[k + 1].base_offset if k + 1 < len(segs) else None
        if nxt is not None and nxt <= r.start_offset:
            continue
        if seg.base_offset >= r.end_offset:
            break
        # the timestamps entry is written only for verified headers; the headers' own entry is
        # checked where the read path asks for them (a miss: the range is decoded). The active
        # segment needs its verified prefix entry: the bytes appended since are read and checked
        if nxt is None:
            pre = source.prefixes[seg.base_offset] = cache.load_prefix(seg)  # HeaderSource's own load, once
            if pre is None:
                return False
        else:
            got = times[seg.base_offset] = cache.load_time_arrays(seg)
            if got is None:
                return False
    return True


def cached_range(log: Log, r: ScanRange, columns: Sequence[str], isolation: IsolationLevel,
                 cache: SummaryCache, schema: pa.Schema) -> tuple[list[pa.RecordBatch], int, int] | None:
    """(the range's rows, batches read, their bytes) from the cache, or None: decode the range."""
    source = HeaderSource(log, cache)  # the headers from the cache, through the read path's rules
    times: _Times = {}
    if not _covered(log, r, cache, source, times):
        return None
    res = read_log(log, r.start_offset, r.end_offset, isolation=isolation, verify_crc=True, scan=source)
    if res.undecided is not None:
        return None
    lo, hi = r.start_offset, res.upper_offset
    filt = AbortedFilter(res.aborted, res.unknown) if isolation == IsolationLevel.READ_COMMITTED else None
    out: list[pa.RecordBatch] = []
    for w in res.windows():
        if w.segment.base_offset not in source.cached:
            return None  # read from the file after all (a segment changed since the check)
        s, a, b = w.window, w.start, w.stop
        attrs = s["attributes"][a:b].astype(np.int64)
        magic, cnt = s["magic"][a:b], s["record_count"][a:b].astype(np.int64)
        base, last, mx = s["base_offset"][a:b], s["last_offset"][a:b], s["max_timestamp"][a:b]
        ctl = (attrs & W.CONTROL_FLAG_MASK) != 0
        ab = filt.aborted_rows(s, a, b) if filt is not None else np.zeros(b - a, bool)
        data = ~ctl & ~ab & (cnt > 0) & (base < hi) & (last >= lo)
        if (data & ((magic < 2) | (cnt != last - base + 1))).any():
            return None  # magic 0/1, or offsets with gaps: the records' offsets are in the records
        rows = np.flatnonzero(data)
        if not len(rows):
            continue
        n_each = cnt[rows]
        starts = np.zeros(len(rows) + 1, np.int64)
        np.cumsum(n_each, out=starts[1:])
        total = int(starts[-1])
        # rows outside [lo, hi): only in the first batch (base < lo) and the last (last >= hi),
        # whose offsets are dense: a slice of the records
        front = min(max(0, lo - int(base[rows[0]])), int(n_each[0]))
        back = min(max(0, int(last[rows[-1]]) - hi + 1), int(n_each[-1]))
        cut = slice(front, total - back)
        lat = (attrs[rows] & W.TIMESTAMP_TYPE_MASK) != 0
        ext = (attrs[rows] & W.TIMESTAMP_EXTENDED_FLAG_MASK) != 0
        mxr = mx[rows]
        clear = np.where(ext, mxr != W.NO_TIMESTAMP_EXTENDED, mxr >= 0)
        walked = ~((lat | (n_each == 1)) & clear)  # the summary's rule: these are the cached walk's
        if walked.all():
            ts, valid = np.empty(total, np.int64), np.empty(total, bool)
        else:
            no_ts = np.where(ext, W.NO_TIMESTAMP_EXTENDED, W.NO_TIMESTAMP)
            ts, valid = np.repeat(mxr.astype(np.int64), n_each), np.repeat(mxr != no_ts, n_each)
        if walked.any():
            got = _walked_times(cache, w.segment, w.segment is log.segments[-1], times,
                                s["position"][a:b][rows[walked]], n_each[walked])
            if got is None:
                return None
            tstart_w, tts, thas, missing = got
            wi = np.flatnonzero(walked)   # rows' indices of the walked batches
            have = wi[~missing]
            if len(have) == len(rows):
                t0 = int(tstart_w[0])
                if int(tstart_w[-1]) - t0 == int(starts[-2]) and (np.diff(tstart_w) == n_each[:-1]).all():
                    ts, valid = tts[t0:t0 + total], thas[t0:t0 + total]  # consecutive in the entry: a view
                else:
                    src = np.repeat(tstart_w - starts[:-1], n_each) + np.arange(total, dtype=np.int64)
                    ts, valid = tts[src], thas[src]
            else:
                if walked.all():
                    ts, valid = np.empty(total, np.int64), np.empty(total, bool)
                if len(have):
                    m = np.zeros(len(rows), bool)
                    m[have] = True
                    mr = np.repeat(m, n_each)
                    src = np.repeat(tstart_w - starts[have], n_each[have]) + np.arange(total, dtype=np.int64)[mr]
                    ts[mr], valid[mr] = tts[src], thas[src]
                # batches appended after the active segment's cached walk: their records'
                # timestamps walked now, as the summary walks them (the tail only)
                for k in wi[missing].tolist():
                    t, h = source.times(w.segment, s, a + int(rows[k]))
                    i0, n = int(starts[k]), int(n_each[k])
                    if len(t) != n:
                        return None
                    ts[i0:i0 + n], valid[i0:i0 + n] = t, h
        offs = _offsets(base[rows], last[rows], n_each, starts, total)[cut] if "offset" in columns else None
        ttype = np.repeat(lat.astype(np.int32), n_each)[cut] if "timestampType" in columns else None
        out.append(_batch(offs, ts[cut], valid[cut], ttype, r.topic, r.partition, columns, schema))
    return out, res.batches_read, res.bytes_read


def _offsets(base: np.ndarray, last: np.ndarray, n_each: np.ndarray, starts: np.ndarray, total: int) -> np.ndarray:
    """The records' offsets of dense batches (each base..last): one arange when each batch
    follows the one before, else each batch's own."""
    if len(base) == 1 or (base[1:] == last[:-1] + 1).all():
        return np.arange(int(base[0]), int(base[0]) + total, dtype=np.int64)
    return np.repeat(base - starts[:-1], n_each) + np.arange(total, dtype=np.int64)


def _walked_times(cache: SummaryCache, seg: LogSegment, active: bool,
                  memo: _Times,
                  bpos: np.ndarray, counts: np.ndarray
                  ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray] | None:
    """(where each batch's timestamps start in the next two, the cached timestamps, which have one,
    which batches the cache does not hold) for batches at `bpos` whose timestamps a header does not
    give, or None: decode. A sealed segment's entry must hold every one; the active segment's
    prefix entry holds those walked inside its verified prefix, the rest are `missing`."""
    if seg.base_offset not in memo:
        memo[seg.base_offset] = cache.load_time_arrays(seg, prefix=active)
    arrays = memo[seg.base_offset]
    if arrays is None:
        if not active:
            return None
        return (np.zeros(len(bpos), np.int64), np.zeros(0, np.int64), np.zeros(0, bool),
                np.ones(len(bpos), bool))
    tpos, tstart, tts, thas = arrays
    idx = np.minimum(np.searchsorted(tpos, bpos), max(len(tpos) - 1, 0))
    found = (tpos[idx] == bpos) if len(tpos) else np.zeros(len(bpos), bool)
    if found.any() and ((tstart[idx + 1] - tstart[idx])[found] != counts[found]).any():
        return None   # another count than the walk remembered: decode
    if not active and not found.all():
        return None   # a batch the walk did not remember: decode
    return tstart[idx[found]], tts, thas, ~found


def _batch(offs: np.ndarray | None, ts: np.ndarray, valid: np.ndarray, ttype: np.ndarray | None, topic: str,
           partition: int,
           columns: Sequence[str], schema: pa.Schema) -> pa.RecordBatch:
    import pyarrow as pa

    n = len(ts)

    def timestamp() -> pa.Array:
        ok = valid if not n or (ts.min() >= -_US_LIMIT and ts.max() <= _US_LIMIT) else \
            valid & (ts >= -_US_LIMIT) & (ts <= _US_LIMIT)
        nulls = n - int(np.count_nonzero(ok))
        us = np.multiply(np.where(ok, ts, 0) if nulls else ts, 1000)
        vbuf = pa.py_buffer(np.packbits(ok, bitorder="little")) if nulls else None
        return pa.Array.from_buffers(pa.timestamp("us", tz="UTC"), n, [vbuf, pa.py_buffer(us)], null_count=nulls)

    build: dict[str, Any] = {
        "topic": lambda: pa.repeat(pa.scalar(topic, pa.string()), n),
        "partition": lambda: pa.array(np.full(n, partition, np.int32)),
        "offset": lambda: pa.array(offs),
        "timestamp": timestamp,
        "timestampType": lambda: pa.array(ttype),
    }
    return pa.RecordBatch.from_arrays([build[c]() for c in columns], schema=pa.schema([schema.field(c) for c in columns]))


__all__ = ["NARROW", "answerable", "cached_range"]
