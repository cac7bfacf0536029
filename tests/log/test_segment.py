"""FileRecords and LogSegment: torn tails, byte-exact index rebuilds against bytes built from the
broker's rules (storage_oracle), decision 5, verify_indexes, broker-style preallocated files."""
import os
import struct

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import kbatch
from kbatch.errors import CrcMismatchError
from kbatch.log.segment import FileRecords, LogSegment

from support import storage_oracle as oracle

HYP = settings(suppress_health_check=[HealthCheck.function_scoped_fixture], deadline=None, max_examples=20)
CT = kbatch.TimestampType.CREATE_TIME
LAT = kbatch.TimestampType.LOG_APPEND_TIME


def make_batch(base, timestamps, *, extended=False, lat=None, value_size=40):
    kw = {}
    if lat is not None:
        kw = dict(timestamp_type=LAT, log_append_time=lat)
    b = kbatch.BatchBuilder(base_offset=base, timestamp_extended=extended, **kw)
    for ts in timestamps:
        b.append(ts, b"k", b"v" * value_size)
    return b.build()


batch_spec = st.tuples(
    st.lists(st.one_of(st.none(), st.integers(-10**6, 10**6)), min_size=1, max_size=6),  # timestamps
    st.booleans(),                                   # extended
    st.one_of(st.none(), st.integers(-10**6, 10**6)),  # LogAppendTime stamp
    st.integers(0, 300),                             # value size
)


def write_segment(path, base, specs):
    data = b""
    off = base
    for tss, ext, lat, vs in specs:
        if lat is not None and not ext and lat < 0:
            lat = abs(lat)
        data += make_batch(off, [t if not (t is None and not ext) else None for t in tss], extended=ext,
                           lat=lat, value_size=vs)
        off += len(tss)
    path.write_bytes(data)
    return data


@HYP
@given(specs=st.lists(batch_spec, min_size=0, max_size=25), interval=st.sampled_from([0, 50, 300, 1000, 4096]))
def test_rebuild_indexes_is_byte_identical_to_the_rules(backend, tmp_path_factory, specs, interval):
    d = tmp_path_factory.mktemp("seg")
    log_path = d / "00000000000000000100.log"
    write_segment(log_path, 100, specs)
    kbatch.rebuild_indexes(log_path, index_interval_bytes=interval)
    want_idx, want_time = oracle.expected_index_bytes(oracle.read_segment(log_path), 100, interval)
    assert (d / "00000000000000000100.index").read_bytes() == want_idx
    assert (d / "00000000000000000100.timeindex").read_bytes() == want_time
    assert kbatch.verify_indexes(log_path, index_interval_bytes=interval).ok


def test_four_kilobyte_rule_by_hand(backend, tmp_path):
    # batches of exactly 1000 bytes: positions 0, 1000, ... ; an entry when pos - last indexed > 4096
    batches = []
    off = 0
    for i in range(12):
        vs = 1000 - len(make_batch(off, [1000 + i], value_size=1))
        while len(make_batch(off, [1000 + i], value_size=vs)) > 1000:  # varint lengths grow
            vs -= 1
        raw = make_batch(off, [1000 + i], value_size=vs)
        assert len(raw) == 1000
        batches.append(raw)
        off += 1
    p = tmp_path / "00000000000000000000.log"
    p.write_bytes(b"".join(batches))
    kbatch.rebuild_indexes(p)
    idx = (tmp_path / "00000000000000000000.index").read_bytes()
    # 5000 - 0 > 4096 -> entry at batch 5 (offset 5); then 10000 - 5000 > 4096 -> batch 10
    assert idx == struct.pack(">ii", 5, 5000) + struct.pack(">ii", 10, 10000)
    t = (tmp_path / "00000000000000000000.timeindex").read_bytes()
    assert t == struct.pack(">qi", 1005, 5) + struct.pack(">qi", 1010, 10) + struct.pack(">qi", 1011, 11)


def test_decision_5_negative_timestamps(backend, tmp_path):
    p = tmp_path / "00000000000000000000.log"
    # Kafka batches: negative timestamps never reach the time index
    p.write_bytes(b"".join(make_batch(i, [-100 + i], value_size=3000) for i in range(4)))
    kbatch.rebuild_indexes(p, index_interval_bytes=100)
    assert (tmp_path / "00000000000000000000.timeindex").read_bytes() == b""
    seg = LogSegment.open(tmp_path, 0)
    assert seg.max_timestamp_so_far is None          # largest timestamp falls back to the mtime
    assert seg.largest_timestamp == os.stat(p).st_mtime_ns // 1_000_000
    seg.close()
    # extended batches: indexed from Long.MIN_VALUE, so historical data is searchable
    p.write_bytes(b"".join(make_batch(i, [-100 + i], extended=True, value_size=3000) for i in range(4)))
    kbatch.rebuild_indexes(p, index_interval_bytes=100)
    t = (tmp_path / "00000000000000000000.timeindex").read_bytes()
    assert [struct.unpack_from(">qi", t, i) for i in range(0, len(t), 12)] == [(-99, 1), (-98, 2), (-97, 3)]
    seg = LogSegment.open(tmp_path, 0)
    assert seg.largest_timestamp == -97
    assert seg.find_offset_by_timestamp(-98) == (-98, 2, None)
    seg.close()


def test_file_records_reports_a_torn_tail(backend, tmp_path):
    p = tmp_path / "00000000000000000000.log"
    good = make_batch(0, [1, 2, 3]) + make_batch(3, [4])
    torn = make_batch(4, [5, 6])[:-7]
    p.write_bytes(good + torn)
    fr = FileRecords(p)
    assert fr.size_in_bytes == len(good) + len(torn)
    assert fr.valid_bytes == len(good) and fr.truncated_bytes == len(torn)
    assert [b.last_offset for b in fr.batches()] == [2, 3]
    assert fr.search_for_offset_with_size(3) == (3, len(make_batch(0, [1, 2, 3])), len(make_batch(3, [4])))
    assert fr.search_for_offset_with_size(4) is None
    fr.close()
    v = kbatch.verify_indexes(p)
    assert v.segments[0].truncated_bytes == len(torn)
    assert any("invalid bytes" in line for line in v.lines())


def test_rebuild_refuses_a_corrupt_batch(backend, tmp_path):
    p = tmp_path / "00000000000000000000.log"
    data = bytearray(make_batch(0, [1, 2]) + make_batch(2, [3]))
    data[-3] ^= 0xFF
    p.write_bytes(bytes(data))
    with pytest.raises(CrcMismatchError) as e:
        kbatch.rebuild_indexes(p)
    assert e.value.position == len(make_batch(0, [1, 2]))
    assert not (tmp_path / "00000000000000000000.index").exists()


def test_verify_indexes_finds_mismatches_and_corruption(backend, tmp_path):
    p = tmp_path / "00000000000000000000.log"
    p.write_bytes(b"".join(make_batch(i * 2, [10 * i, 10 * i + 1], value_size=900) for i in range(30)))
    kbatch.rebuild_indexes(p)
    assert kbatch.verify_indexes(tmp_path).ok
    ip = tmp_path / "00000000000000000000.index"
    good = ip.read_bytes()
    bad = bytearray(good)
    bad[3] ^= 0x01  # the batch's first offset: how Kafka 0.8-1.1 wrote .index entries, valid
    ip.write_bytes(bytes(bad))
    rep = kbatch.verify_indexes(p).segments[0]
    assert rep.ok and rep.notes and not rep.matches_rebuild
    bad[3] ^= 0x01 ^ 0x40  # an offset far past the batches the entry covers: damage
    ip.write_bytes(bytes(bad))
    rep = kbatch.verify_indexes(p).segments[0]
    assert not rep.ok and rep.index_mismatches and not rep.matches_rebuild
    assert any("Mismatches in" in line for line in rep.lines())
    ip.write_bytes(good[:-3])  # truncated index file
    rep = kbatch.verify_indexes(p).segments[0]
    assert rep.sanity_errors and "has error" in "\n".join(rep.lines())
    os.unlink(ip)
    rep = kbatch.verify_indexes(p).segments[0]
    assert rep.ok and rep.notes[0][1].startswith("file is missing")  # a broker rebuilds it
    # a read-only segment whose index is bad still answers lookups (rebuilt in memory, not written)
    ip.write_bytes(good[:-3])
    seg = LogSegment.open(tmp_path, 0)
    assert seg.translate_offset(31) == (31, 15 * len(make_batch(0, [0, 1], value_size=900)),
                                        len(make_batch(0, [0, 1], value_size=900)))
    assert seg.index_problem is not None
    assert ip.read_bytes() == good[:-3]
    seg.close()


def test_broker_style_preallocated_indexes(backend, tmp_path):
    """A live broker's active segment: 10 MB-style zero-filled index files, no final time entry."""
    p = tmp_path / "00000000000000000050.log"
    data = b"".join(make_batch(50 + 3 * i, [5000 + 7 * i, 5000 + 7 * i + 2, 5000 + 7 * i + 1], value_size=500)
                    for i in range(40))
    p.write_bytes(data)
    batches = oracle.read_segment(p)
    idx, tidx = oracle.expected_index_bytes(batches, 50, 4096)
    tidx = tidx[:-12]  # the close-time entry is not there yet
    (tmp_path / "00000000000000000050.index").write_bytes(idx + bytes(8 * 4000))
    (tmp_path / "00000000000000000050.timeindex").write_bytes(tidx + bytes(12 * 3000))
    seg = LogSegment.open(tmp_path, 50)
    assert len(seg.offset_index) == len(idx) // 8 and seg.index_problem is None
    assert seg.max_timestamp_so_far == max(b.max_timestamp for b in batches)  # found past the last entry
    assert seg.read_next_offset() == 50 + 3 * 40
    for target in (0, 5000, 5001, 5100, 5275, 5276, 5500):
        want = oracle.brute_offset_for_time([(50, str(p), batches)], target)
        hit = seg.find_offset_by_timestamp(target)
        assert (None if hit is None else (hit.offset, hit.timestamp, hit.leader_epoch)) == want
    seg.close()


def _many_batches(path, n=400):
    with open(path, "wb") as f:
        for i in range(n):
            b = kbatch.BatchBuilder(base_offset=10 * i)
            for j in range(10):
                b.append(1_700_000_000_000 + 10 * i + j, b"k%d" % j, b"v" * (50 + (i * 7) % 300))
            f.write(b.build())


def _columns(gen):
    out = []
    for s in gen:
        out.append((int(s["origin"]), s["position"].tolist(), s["last_offset"].tolist(), s["crc_valid"].tolist(),
                    bytes(s["buf"][:64])))
    return out


def test_scans_that_read_ahead_see_the_same_windows(backend, tmp_path, monkeypatch):
    """A reusing scan reads the next window in a thread while the caller works on the current one;
    it hands out the same windows, with the same bytes, as a plain scan."""
    from kbatch.record import file_records as segment

    monkeypatch.setattr(segment, "_PREFETCH_MIN", 1)  # every window ahead
    path = tmp_path / f"{0:020d}.log"
    _many_batches(path)
    fr = FileRecords(path)
    try:
        for first in (4096, 65536, 16 << 20):
            assert _columns(fr.scan(0, True, first, reuse=True)) == _columns(fr.scan(0, True, first))
        gen = fr.scan(0, False, 4096, reuse=True)  # a scan left early gives its buffers back
        next(gen)
        gen.close()
        tenth = _columns(fr.scan(0))[0][1][10]
        assert _columns(fr.scan(tenth, False, 4096, reuse=True)) == _columns(fr.scan(tenth, False, 4096))
    finally:
        fr.close()


def test_a_window_read_ahead_from_a_truncated_file_raises_where_it_is_read(backend, tmp_path, monkeypatch):
    from kbatch.record import file_records as segment

    monkeypatch.setattr(segment, "_PREFETCH_MIN", 1)
    path = tmp_path / f"{0:020d}.log"
    _many_batches(path)
    fr = FileRecords(path)
    try:
        gen = fr.scan(0, False, 4096, reuse=True)
        first = next(gen)  # the next window is being read meanwhile (or already was)
        assert first["origin"] == 0
        os.truncate(path, 2000)  # another process cuts the file
        with pytest.raises(kbatch.FileChangedError):
            for _s in gen:
                pass
    finally:
        fr.close()
