"""Damage the read path must name, never hide (issue 38):

- a transaction whose COMMIT/ABORT marker may lie in unreadable bytes (a torn or damaged sealed
  segment, or damage inside the active one) is damage, not a last stable offset: read_committed
  used to stop at its first offset silently, and the intact segments after it never arrived;
- a base offset no CRC covers, forged too high or too low in a middle batch: readers used to stop
  silently (too high) or give offsets twice (too low).

A torn tail of the active segment is still a live log's end (an open transaction there is an LSO).
"""
from __future__ import annotations

import collections
import os
import struct
import subprocess
import sys

import pytest

import kbatch
from kbatch.log.fetch import IsolationLevel, UnreadableDataError, read_log, transaction_state
from support import partitions as P

RC, RU = IsolationLevel.READ_COMMITTED, IsolationLevel.READ_UNCOMMITTED


def _read(path, isolation, skip=False, start=0, end=None):
    log = kbatch.Log.open(path)
    try:
        res = read_log(log, start, end, isolation=isolation, skip_unreadable=skip)
        rows, err = [], None
        try:
            for _b, r in res.records():
                rows.append(r.offset)
        except UnreadableDataError as e:
            err = e
        return rows, err, list(res.unreadable)
    finally:
        log.close()


def _tear_at_offset(path: str, offset: int) -> str:
    """Cut the (sealed) segment holding the batch at `offset` 20 bytes into that batch."""
    for seg in P.segment_logs(path)[:-1]:
        for pos, base, _last in P.batch_positions(seg):
            if base == offset:
                with open(seg, "r+b") as f:
                    f.truncate(pos + 20)
                return seg
    raise AssertionError(f"no batch at offset {offset} in a sealed segment")


@pytest.fixture(params=[True, False], ids=["txnindex", "no-txnindex"])
def markers_torn(request, tmp_path):
    """Offsets 10 (COMMIT of the transaction from 2) and 11 (ABORT of the one from 5) are in the
    torn part of segment 7; segment 12 behind them is intact."""
    path = str(tmp_path / "t-0")
    P.transactional(path, open_txn=False, txn_index=request.param, segment_bytes=400)
    assert [os.path.basename(s)[:20] for s in P.segment_logs(path)] == [f"{b:020d}" for b in (0, 7, 12)]
    seg = _tear_at_offset(path, 10)
    return path, seg, request.param


def test_read_committed_names_a_transaction_whose_marker_is_in_damage(markers_torn):
    path, seg, txn_index = markers_torn
    rows, err, _ = _read(path, RC)
    # before: [0, 1] and no error (the transaction from 2 taken as open: an LSO of 2)
    assert rows == [0, 1]
    assert err is not None, "read_committed stopped silently at a transaction whose marker is in damage"
    msg = str(err)
    assert seg in msg and "from byte 183" in msg
    assert "the transaction of producer 1000 from offset 2 has no COMMIT or ABORT marker" in msg
    # read_uncommitted meets the damage itself, as before
    rows_ru, err_ru, _ = _read(path, RU)
    assert rows_ru == list(range(10)) and err_ru is not None and seg in str(err_ru)


def test_the_txnindex_still_decides_what_it_lists(markers_torn):
    path, _seg, txn_index = markers_torn
    log = kbatch.Log.open(path)
    try:
        state = transaction_state(log)
    finally:
        log.close()
    unknown = {(u.producer_id, u.first_offset) for u in state.unknown}
    # the ABORT of producer 1001 is in segment 7's .txnindex: known aborted, whatever the damage hid
    assert unknown == ({(1000, 2)} if txn_index else {(1000, 2), (1001, 5)})
    assert state.first_unstable_offset == 2 and state.first_open_offset is None


def test_skipping_unreadable_bytes_leaves_undecided_transactions_out_and_goes_on(markers_torn):
    path, seg, _txn_index = markers_torn
    rows, err, unreadable = _read(path, RC, skip=True)
    assert err is None
    # 2-4 (fate unknown) and 5-6, 9 (aborted, or unknown) left out; the segment after the damage read
    assert rows == [0, 1, 7, 8, 12, 13, 17]
    assert len(unreadable) == 1 and unreadable[0].path == seg and unreadable[0].position == 183
    assert "no COMMIT or ABORT marker" in unreadable[0].reason


def test_a_read_that_ends_before_the_undecided_transaction_is_whole(markers_torn):
    path, _seg, _ = markers_torn
    assert _read(path, RC, end=2)[:2] == ([0, 1], None)


def test_an_open_transaction_before_the_torn_tail_of_the_active_segment_is_an_lso(tmp_path):
    path = str(tmp_path / "t-0")
    built = P.transactional(path, open_txn=True)
    last = P.segment_logs(path)[-1]
    rows = P.batch_positions(last)
    with open(last, "r+b") as f:  # a torn last write: the live log's end, as Kafka reads it
        f.truncate(rows[-1][0] + 30)
    got, err, unreadable = _read(path, RC)
    assert err is None and unreadable == []
    assert got == built.committed


def test_cat_exits_1_when_damage_hides_a_marker(markers_torn):
    path, seg, _ = markers_torn
    p = subprocess.run([sys.executable, "-m", "kbatch.cli", "cat", path, "-f", "%o\n"], capture_output=True,
                       text=True, timeout=120)
    assert p.returncode == 1, p.stdout + p.stderr
    assert p.stdout.split() == ["0", "1"]
    assert "no COMMIT or ABORT marker" in p.stderr and "Traceback" not in p.stderr


# ------------------------------------------------------------------------------ forged base offsets
def _forge(path: str, segment: int, delta: int) -> tuple[str, int, int]:
    """Add `delta` to the base offset of the middle batch of segment number `segment` (the CRC does
    not cover it, so the batch still checks). Returns (the .log, the batch's byte position, its
    true base offset)."""
    seg = P.segment_logs(path)[segment]
    rows = P.batch_positions(seg)
    pos, base, _last = rows[len(rows) // 2]
    with open(seg, "r+b") as f:
        f.seek(pos)
        f.write(struct.pack(">q", base + delta))
    return seg, pos, base


@pytest.mark.parametrize("segment, delta, words", [
    (1, 1000, "at or past the next segment's base offset"),
    (1, -3, "offsets go backwards"),
    (-1, 1000, "past the log end offset"),
    (-1, -3, "offsets go backwards"),
], ids=["middle-too-high", "middle-too-low", "active-too-high", "active-too-low"])
def test_a_forged_base_offset_is_named_never_a_silent_end_or_an_offset_twice(tmp_path, segment, delta, words):
    path = str(tmp_path / "t-0")
    P.plain(path)  # offsets 0..199, 5 segments
    seg, pos, base = _forge(path, segment, delta)
    for isolation in (RU, RC):
        rows, err, _ = _read(path, isolation)
        assert err is not None, f"the read stopped silently at {len(rows)} records"
        assert rows == list(range(base)), "every record before the forged batch, each once"
        assert f"{seg}: " in str(err) and f"from byte {pos}" in str(err) and words in str(err)
    # skipping: no offset twice, offsets ascending, everything outside the damaged segment read
    rows, err, unreadable = _read(path, RU, skip=True)
    assert err is None and unreadable and unreadable[0].path == seg
    assert [o for o, c in collections.Counter(rows).items() if c > 1] == []
    assert rows == sorted(rows)
    # the CLI exits 1 and names it (it exited 0 before)
    p = subprocess.run([sys.executable, "-m", "kbatch.cli", "cat", path, "-f", "%o\n"], capture_output=True,
                       text=True, timeout=120)
    assert p.returncode == 1 and words in p.stderr and "Traceback" not in p.stderr
    assert [int(x) for x in p.stdout.split()] == list(range(base))


def test_a_read_starting_after_a_forged_batch_is_not_blamed_for_it(tmp_path):
    path = str(tmp_path / "t-0")
    P.plain(path)
    _seg, _pos, base = _forge(path, 1, -3)
    rows, err, _ = _read(path, RU, start=base + 10)
    assert err is None and rows == list(range(base + 10, 200))
