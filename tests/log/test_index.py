"""OffsetIndex / TimeIndex / TransactionIndex: reading (with a broker's zero-filled tail), sanity
checks, lookups against a brute-force search, and the append rules. Every test runs on both backends."""
import struct

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kbatch.errors import CorruptIndexError, InvalidOffsetError
from kbatch.log.index import AbortedTxn, OffsetIndex, TimeIndex, TransactionIndex

HYP = settings(suppress_health_check=[HealthCheck.function_scoped_fixture], deadline=None, max_examples=30)
BASE = 1000


def offset_index_bytes(entries):
    return b"".join(struct.pack(">ii", o - BASE, p) for o, p in entries)


def time_index_bytes(entries):
    return b"".join(struct.pack(">qi", t, o - BASE) for t, o in entries)


@st.composite
def offset_entries(draw):
    rels = sorted(set(draw(st.lists(st.integers(1, 10**6), max_size=60))))
    positions = sorted(draw(st.lists(st.integers(0, 2**31 - 1), min_size=len(rels), max_size=len(rels))))
    return [(BASE + r, p) for r, p in zip(rels, positions)]


@st.composite
def time_entries(draw):
    ts = sorted(set(draw(st.lists(st.integers(-(2**63) + 1, 2**63 - 1), max_size=60))))
    rels = sorted(draw(st.lists(st.integers(0, 10**6), min_size=len(ts), max_size=len(ts))))
    return [(t, BASE + r) for t, r in zip(ts, rels)]


@HYP
@given(entries=offset_entries(), targets=st.lists(st.integers(0, 2 * 10**6), max_size=20),
       zero_tail=st.integers(0, 5))
def test_offset_index_lookup_is_the_largest_entry_at_or_below(backend, entries, targets, zero_tail):
    idx = OffsetIndex(BASE, offset_index_bytes(entries) + bytes(8 * zero_tail))
    assert len(idx) == len(entries)  # entries never name the base offset, so any zero slot ends them
    idx.sanity_check()
    assert list(idx) == entries
    for t in targets:
        below = [e for e in entries if e[0] <= t]
        assert idx.lookup(t) == (below[-1] if below else (BASE, 0))
    want = [(max([e for e in entries if e[0] <= t], default=(BASE, 0)))[1] for t in targets]
    assert idx.lookup_positions(np.array(targets, dtype=np.int64)).tolist() == want


@HYP
@given(entries=time_entries(), targets=st.lists(st.integers(-(2**63), 2**63 - 1), max_size=20),
       zero_tail=st.integers(0, 5))
def test_time_index_lookup_is_the_largest_entry_at_or_below(backend, entries, targets, zero_tail):
    data = time_index_bytes(entries) + bytes(12 * zero_tail)
    idx = TimeIndex(BASE, data)
    # the tail starts at the first slot > 0 naming the base offset; two zero slots first = empty file
    slots = [struct.unpack_from(">qi", data, 12 * i) for i in range(len(data) // 12)]
    valid = next((i for i in range(1, len(slots)) if slots[i][1] == 0), len(slots))
    if len(slots) >= 2 and slots[0] == slots[1] == (0, 0):
        valid = 0
    assert len(idx) == valid
    entries = [(t, BASE + r) for t, r in slots[:valid]]
    for t in targets:
        below = [e for e in entries[:len(idx)] if e[0] <= t]
        assert idx.lookup(t) == (below[-1] if below else (-1, BASE))
    want = [max([e for e in entries[:len(idx)] if e[0] <= t], default=(0, BASE))[1] for t in targets]
    assert idx.lookup_offsets(np.array(targets, dtype=np.int64)).tolist() == want


def test_preallocated_empty_files_have_no_entries(backend):
    assert len(OffsetIndex(BASE, bytes(8 * 1000))) == 0
    assert len(TimeIndex(BASE, bytes(12 * 1000))) == 0
    assert OffsetIndex(BASE, bytes(80)).lookup(5000) == (BASE, 0)
    # a single all-zero time entry in a trimmed file is a real entry: timestamp 0 at the base offset
    assert list(TimeIndex(BASE, bytes(12))) == [(0, BASE)]


def test_zero_tail_stops_at_first_entry_naming_the_base_offset(backend, tmp_path):
    data = offset_index_bytes([(BASE + 10, 4200), (BASE + 20, 8400)]) + bytes(8 * 100)
    p = tmp_path / f"{BASE:020d}.index"
    p.write_bytes(data)
    idx = OffsetIndex.open(p)
    assert idx.base_offset == BASE and len(idx) == 2 and idx.file_length == len(data)
    assert idx.lookup(BASE + 15) == (BASE + 10, 4200)
    assert idx.raw() == data[:16]
    idx.close()


def test_sanity_check_size_not_a_multiple(backend):
    idx = OffsetIndex(BASE, offset_index_bytes([(BASE + 1, 5000)]) + b"\x00\x01\x02")
    with pytest.raises(CorruptIndexError) as e:
        idx.sanity_check()
    assert e.value.position == 8 and "11 bytes" in str(e.value)
    t = TimeIndex(BASE, time_index_bytes([(5, BASE + 1)]) + b"\x00" * 5)
    with pytest.raises(CorruptIndexError):
        t.sanity_check()


def test_sanity_check_last_offset_below_base(backend):
    idx = OffsetIndex(BASE, struct.pack(">ii", 5, 100) + struct.pack(">ii", -3, 200))
    with pytest.raises(CorruptIndexError) as e:
        idx.sanity_check()
    assert e.value.found == BASE - 3 and e.value.position == 8


def test_sanity_check_unsorted_and_time_going_back(backend):
    idx = OffsetIndex(BASE, offset_index_bytes([(BASE + 9, 100), (BASE + 5, 200), (BASE + 12, 300)]))
    with pytest.raises(CorruptIndexError) as e:
        idx.sanity_check()
    assert e.value.position == 8
    t = TimeIndex(BASE, time_index_bytes([(50, BASE + 1), (10, BASE + 2)]))
    with pytest.raises(CorruptIndexError) as e:
        t.sanity_check()
    assert "last timestamp" in str(e.value) or e.value.position == 12


def test_writable_offset_index_rules(backend, tmp_path):
    p = tmp_path / "x.index"
    idx = OffsetIndex.writable(p, BASE, max_index_size=8 * 3)
    idx.append(BASE + 5, 100)
    with pytest.raises(InvalidOffsetError):
        idx.append(BASE + 5, 200)
    with pytest.raises(InvalidOffsetError):
        idx.append(BASE + 2**31, 200)
    idx.append(BASE + 6, 200)
    idx.append(BASE + 7, 300)
    assert idx.is_full()
    with pytest.raises(InvalidOffsetError):
        idx.append(BASE + 8, 400)
    idx.close()
    assert p.read_bytes() == offset_index_bytes([(BASE + 5, 100), (BASE + 6, 200), (BASE + 7, 300)])


def test_writable_time_index_rules(backend, tmp_path):
    p = tmp_path / "x.timeindex"
    t = TimeIndex.writable(p, BASE, max_index_size=12 * 3)
    assert t.maybe_append(-5, BASE)          # an empty index takes any timestamp (decision 5)
    assert not t.maybe_append(-5, BASE + 1)  # not strictly larger: no entry
    with pytest.raises(InvalidOffsetError):
        t.maybe_append(10, BASE - 1 + 0)     # offset going backwards from BASE? BASE-1 < BASE
    assert t.maybe_append(10, BASE + 2)
    assert t.is_full()                       # the last slot is reserved for the close-time entry
    with pytest.raises(InvalidOffsetError):
        t.maybe_append(20, BASE + 3)
    assert t.maybe_append(20, BASE + 3, skip_full_check=True)
    t.close()
    assert p.read_bytes() == time_index_bytes([(-5, BASE), (10, BASE + 2), (20, BASE + 3)])


def test_transaction_index_round_trip_and_errors(backend, tmp_path):
    p = tmp_path / f"{BASE:020d}.txnindex"
    p.write_bytes(b"")
    t = TransactionIndex.open(p)
    t.append(AbortedTxn(7, BASE, BASE + 9, BASE + 3))
    t.append(AbortedTxn(8, BASE + 2, BASE + 20, BASE + 10))
    with pytest.raises(InvalidOffsetError):
        t.append(AbortedTxn(9, BASE, BASE + 20, BASE))
    raw = p.read_bytes()
    assert len(raw) == 68 and raw[:2] == b"\x00\x00"
    assert struct.unpack(">hqqqq", raw[:34]) == (0, 7, BASE, BASE + 9, BASE + 3)
    again = TransactionIndex.open(p)
    assert again.entries == t.entries
    assert [a.producer_id for a in again.collect_aborted_txns(BASE + 10, BASE + 30)] == [8]
    p.write_bytes(raw[:40])
    with pytest.raises(CorruptIndexError) as e:
        TransactionIndex.open(p)
    assert e.value.position == 34
