"""kbatch.log.fetch_data.read_slice, the slice read serve's Fetch answers from (issue 37).

Over the read-path matrix (tests/support/read_path_cases.py: transactions, damage in middle and
active segments, damaged indexes), at every fetch offset, both isolation levels, several byte
limits: `kbatch serve`'s Partition.read gives the same answer as the segment walk it had before
the slice read (kept below as the reference, `_walk`, with main's rules as they were moved:
undecided_at, OffsetOrder), byte for byte: error code, file position,
size, aborted transactions. And the slice's bytes are the batches kbatch.log.fetch.read_log reads
from the same offset.
"""
from __future__ import annotations

import bisect

import pytest

import kbatch
from kbatch.log.fetch import (IsolationLevel, OffsetOrder, collect_aborted_txns, hole_at, read_log, transaction_state,
                              undecided_at, unreadable_at)
from kbatch.log.fetch_data import read_slice

from support import read_path_cases as C

CASES = sorted(C.CASES)


@pytest.fixture(scope="module")
def parts(tmp_path_factory):
    return C.build_all(str(tmp_path_factory.mktemp("fetch-data")))


def _walk(log, fetch_offset, max_bytes, min_one, committed, hw, hw_segment, hw_position, orders):
    """serve's Partition.read before the slice read (its own segment walk), as (error code,
    (segment base, position, size) or None, aborted or None): the reference."""
    if fetch_offset < log.log_start_offset or fetch_offset > hw:
        return 1, None, None
    fuo = transaction_state(log).first_unstable_offset
    lso = hw if fuo is None else min(fuo, hw)
    upper = lso if committed else hw
    empty = (0, None, [] if committed else None)
    if fetch_offset >= upper:
        if committed and undecided_at(transaction_state(log), upper) is not None:
            return 2, None, None  # damage that may hide a marker is no last stable offset
        return empty
    segments = log.segments
    bases = [s.base_offset for s in segments]
    i = max(0, bisect.bisect_right(bases, fetch_offset) - 1)
    while i < len(segments):
        seg = segments[i]
        start = seg.translate_offset(fetch_offset)
        if start is not None and hole_at(seg, fetch_offset, start.offset) is not None:
            return 2, None, None
        if start is None or start.offset < fetch_offset:
            if i + 1 < len(segments) and fetch_offset < bases[i + 1] and unreadable_at(seg, fetch_offset) is not None:
                return 2, None, None
            i += 1
            continue
        if seg.base_offset == hw_segment and upper == hw:
            max_position = hw_position
        elif upper < (bases[i + 1] if i + 1 < len(bases) else hw + 1):
            end = seg.translate_offset(upper)
            max_position = end.position if end is not None else hw_position if seg.base_offset == hw_segment \
                else seg.size
        else:
            max_position = seg.size
        if start.position >= max_position:
            return empty
        size = min(max_position - start.position, max(max_bytes, start.size) if min_one else max_bytes)
        if size <= 0:
            return empty
        order = orders.get(seg.base_offset)
        if order is None or order.hi > seg.size:
            order = orders[seg.base_offset] = OffsetOrder()
        bad = order.first_bad(seg, fetch_offset, start.position + size, bases[i + 1] if i + 1 < len(bases) else None)
        if bad is not None:
            if bad[0] <= start.position:
                return 2, None, None
            size = bad[0] - start.position
        aborted = collect_aborted_txns(transaction_state(log).aborted, fetch_offset, hw) if committed else None
        return 0, (seg.base_offset, start.position, size), aborted
    return empty


def _answer(info):
    err = 1 if info.out_of_range else 2 if info.unreadable is not None else 0
    rec = info.records
    return err, None if rec is None else (rec.segment.base_offset, rec.position, rec.size), info.aborted_transactions


@pytest.mark.parametrize("case", CASES)
def test_serve_answers_as_its_own_segment_walk_did(parts, case):
    from kbatch.server.partition import Partition

    log = kbatch.Log.open(parts[case])
    part = Partition(case, 0, log)
    try:
        hw, hw_seg, hw_pos = part.high_watermark, part._hw_segment, part._hw_position
        orders, slice_orders = {}, {}  # each reader keeps its own, as serve keeps one per partition
        offsets = range(max(0, log.log_start_offset - 1), hw + 2)
        for committed in (False, True):
            for fetch_offset in offsets:
                for max_bytes, min_one in ((1, True), (1, False), (200, True), (1 << 20, False)):
                    want = _raised(_walk, log, fetch_offset, max_bytes, min_one, committed, hw, hw_seg, hw_pos,
                                   orders)
                    got = _raised(_served, part, fetch_offset, max_bytes, min_one, committed)
                    assert got == want, (committed, fetch_offset, max_bytes, min_one)
                    got = _raised(lambda: _answer(read_slice(
                        log, fetch_offset, max_bytes, min_one_message=min_one, isolation=IsolationLevel(int(committed)),
                        high_watermark=hw, high_watermark_position=(hw_seg, hw_pos), offset_orders=slice_orders)))
                    assert got == want
    finally:
        part.close()


def _raised(fn, *args):
    """fn's answer, or the error it raised (a damaged batch a lookup meets: serve answers it as the
    connection's error, the same whichever path raised it)."""
    try:
        return fn(*args)
    except kbatch.KBatchError as e:
        return type(e).__name__, str(e)


def _served(part, fetch_offset, max_bytes, min_one, committed):
    rr = part.read(fetch_offset, max_bytes, min_one, committed)
    return (rr.error_code, None if rr.records is None else
            (_base_of_fd(part, rr.records.fd), rr.records.position, rr.records.size), rr.aborted)


def _base_of_fd(part, fd):
    return next(base for base, f in part._fds.items() if f == fd)


@pytest.mark.parametrize("case", CASES)
def test_the_slice_holds_the_batches_read_log_reads(parts, case):
    """The bytes of a slice read are whole batches, the ones read_log gives from that offset (up
    to the first batch the byte limit leaves out), and the defaults bound it by the log itself."""
    log = kbatch.Log.open(parts[case])
    try:
        for isolation in (IsolationLevel.READ_UNCOMMITTED, IsolationLevel.READ_COMMITTED):
            for fetch_offset in range(log.log_start_offset, log.end_offset()):
                try:
                    info = read_slice(log, fetch_offset, 1 << 20, isolation=isolation)
                except kbatch.KBatchError:  # a lookup met damage: the read path meets it too
                    res = read_log(log, fetch_offset, isolation=isolation, skip_unreadable=True)
                    list(res.windows())
                    assert res.unreadable
                    continue
                assert not info.out_of_range
                if info.records is None:
                    continue
                got = _batch_offsets(info.records.read())
                assert got and got[0][1] >= fetch_offset
                res = read_log(log, fetch_offset, isolation=isolation, skip_unreadable=True)
                want = []
                for w in res.windows():
                    if w.segment is not info.records.segment:
                        break
                    want += [(int(w.window["base_offset"][j]), int(w.window["last_offset"][j]))
                             for j in range(w.start, w.stop)]
                assert got[:len(want)] == want[:len(got)]
    finally:
        log.close()


def _batch_offsets(data):
    """(base, last offset) of the batches of `data` up to bytes that are not one (damage is sent
    as it is, and a consumer meets it there)."""
    out = []
    gen = kbatch.iter_batches(data, verify_crc=False, strict=False)
    while True:
        try:
            b = next(gen)
        except (StopIteration, kbatch.KBatchError):
            return out
        out.append((b.base_offset, b.last_offset))


def test_out_of_range_and_nothing_new(tmp_path):
    log = kbatch.Log.create(tmp_path / "t-0")
    try:
        log.append(kbatch.build_batch([(1, b"k", b"v")] * 3), now_ms=10)
        assert read_slice(log, 4, 100).out_of_range
        info = read_slice(log, 3, 100, isolation=IsolationLevel.READ_COMMITTED)
        assert (info.out_of_range, info.records, info.aborted_transactions) == (False, None, [])
        info = read_slice(log, 0, 1, min_one_message=True)
        assert info.records is not None and info.records.position == 0
        assert info.records.size == log.active_segment.size  # one batch, whole (KIP-74)
        assert info.fetch_offset_metadata == (0, 0, 0)
    finally:
        log.close()
