"""The log cleaner's key map (OffsetMap: kbatch._core_py is the contract, kbatch._core its C twin):
the digest (short keys as themselves, long keys by MD5 as Kafka's cleaner keys them), the
memory bound (SkimpyOffsetMap's slots and load factor), and the two record loops compaction
runs on it, fed the same random, truncated and bit-flipped sections on both backends; the
rewritten kept records equal what BatchBuilder writes for them."""
import hashlib
import random

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import kbatch
from conftest import load_backend
from kbatch import _core_py
from kbatch import _wire as W
from kbatch.log.cleaner import rebuild_batch
from record.test_kernels import MUTATIONS, RECORDS, SMALL_OR_WIDE64, mutate, outcome

DIFF = settings(suppress_health_check=[HealthCheck.too_slow], deadline=None)


def both():
    return _core_py, load_backend("cython")


def test_md5_is_md5(backend):
    rng = random.Random(5)
    for n in list(range(0, 200)) + [1000, 4096, 65537, 1 << 20]:
        data = rng.randbytes(n)
        assert backend.md5(data) == hashlib.md5(data).digest(), n
    assert backend.md5(memoryview(b"xabc")[1:]) == hashlib.md5(b"abc").digest()


def test_digest_keeps_short_keys_and_hashes_long_ones(backend):
    assert backend.key_digest(b"") == b"\x01" + bytes(15)
    assert backend.key_digest(b"abc") == b"\x04abc" + bytes(12)
    assert backend.key_digest(b"x" * 15) == b"\x10" + b"x" * 15
    long = b"y" * 16
    d = bytearray(hashlib.md5(long).digest())
    d[0] |= 0x80
    assert backend.key_digest(long) == bytes(d) and backend.key_digest(memoryview(long)) == bytes(d)
    # a short key and a short key padded with zeros are different keys
    assert backend.key_digest(b"a") != backend.key_digest(b"a\x00")


def test_sized_like_kafkas_skimpy_offset_map(backend):
    m = backend.OffsetMap()
    assert (m.memory, m.slots, m.capacity) == (128 * 1024 * 1024, 128 * 1024 * 1024 // 24,
                                               int(128 * 1024 * 1024 // 24 * 0.9))
    m = backend.OffsetMap(24 * 10, 0.5)
    assert (m.slots, m.capacity, len(m), m.full) == (10, 5, 0, False)
    for i in range(5):
        m.put(b"k%d" % i, i)
    assert m.full and m.utilization == 0.5
    for i in range(5, 10):  # put itself refuses only past the slots (SkimpyOffsetMap.put's require)
        m.put(b"k%d" % i, i)
    with pytest.raises(OverflowError, match="full offset map"):
        m.put(b"one more", 1)
    m.put(b"k3", 33)  # an existing key still takes a new offset
    assert m.get(b"k3") == 33 and m.get(b"absent") == -1  # every slot taken: a miss still ends
    with pytest.raises(kbatch.InvalidConfigurationError, match="too small"):
        backend.OffsetMap(23)
    with pytest.raises(ValueError):
        backend.OffsetMap(1024, 0.0)
    m.update_latest_offset(7)
    m.update_latest_offset(3)
    assert m.latest_offset == 7
    m.clear()
    assert (len(m), m.latest_offset, m.get(b"k3")) == (0, -1, -1)


@DIFF
@given(ops=st.lists(st.tuples(st.sampled_from(["put", "get", "latest", "clear"]),
                              st.binary(max_size=20) | st.sampled_from([b"k", b"key-1", b"x" * 16]),
                              st.integers(-5, 2**63 - 1)), max_size=60),
       memory=st.integers(24, 24 * 64), load=st.sampled_from([0.5, 0.9, 1.0]))
def test_diff_map_operations(ops, memory, load):
    maps = []
    for mod in both():
        try:
            maps.append(mod.OffsetMap(memory, load))
        except ValueError:
            maps.append(None)
    if maps[0] is None:
        assert maps[1] is None
        return
    for op, key, off in ops:
        res = []
        for m in maps:
            try:
                res.append(("ok", m.put(key, off) if op == "put" else m.get(key) if op == "get"
                            else m.update_latest_offset(off) if op == "latest" else m.clear()))
            except Exception as e:  # noqa: BLE001
                res.append(("raise", type(e)))
            res[-1] += (len(m), m.full, m.latest_offset)
        assert res[0] == res[1], (op, key, off)


def test_growth_keeps_every_key(backend):
    m = backend.OffsetMap(24 * 200_000)
    keys = [b"key-%d" % i for i in range(50_000)] + [b"a long key number %d......" % i for i in range(50_000)]
    for i, k in enumerate(keys):
        m.put(k, i)
    assert len(m) == len(keys)
    assert all(m.get(k) == i for i, k in enumerate(keys))
    if hasattr(m, "table_bytes"):  # the C table grew with the keys, not to the whole budget at once
        assert m.table_bytes <= 24 * 200_000


def _section(recs):
    return b"".join(recs)


@DIFF
@given(recs=RECORDS, ops=MUTATIONS, base=st.integers(-5, 300), start=st.integers(-5, 300),
       count_delta=st.sampled_from([0, 0, 0, -1, 1]), memory=st.sampled_from([24, 24 * 3, 24 * 1000]),
       pre=st.lists(st.binary(max_size=6), max_size=3))
def test_diff_map_records(recs, ops, base, start, count_delta, memory, pre):
    """map_records_v2 on both backends: the same (records read, full) or the same error at the same
    position, and the same map afterwards."""
    sec = mutate(_section(recs), ops)
    outs, maps = [], []
    for mod in both():
        m = mod.OffsetMap(memory, 1.0)
        for i, k in enumerate(pre):
            if not m.full:
                m.put(k, i)
        outs.append(outcome(m.map_records_v2, sec, 0, len(sec), len(recs) + count_delta, base, start))
        maps.append(m)
    assert outs[0] == outs[1]
    probe = pre + [b"", b"\x00"] + [bytes([i]) for i in range(8)]
    assert [[(m.get(k), len(m), m.full) for k in probe] for m in maps] == \
        [[(maps[0].get(k), len(maps[0]), maps[0].full) for k in probe]] * 2


@DIFF
@given(recs=RECORDS, ops=MUTATIONS, base=st.integers(-5, 300), bt=SMALL_OR_WIDE64, mt=SMALL_OR_WIDE64,
       attrs=st.sampled_from([0, 0x08, 0x80, 0x88, 0x40]), latest=st.integers(-1, 400),
       horizon=st.none() | SMALL_OR_WIDE64, keep=st.booleans(), fresh=SMALL_OR_WIDE64,
       mapped=st.lists(st.tuples(st.binary(max_size=6), st.integers(-1, 400)), max_size=6))
def test_diff_filter_records(recs, ops, base, bt, mt, attrs, latest, horizon, keep, fresh, mapped):
    """filter_records_v2 on both backends: the same counts, the same rewritten section (or None),
    timestamps and horizon, or the same error at the same position."""
    sec = mutate(_section(recs), ops)
    outs = []
    for mod in both():
        m = mod.OffsetMap(24 * 100)
        for k, o in mapped:
            m.put(k, o)
        m.update_latest_offset(latest)
        outs.append(outcome(m.filter_records_v2, sec, 0, len(sec), len(recs), base, bt, mt, attrs, horizon, keep,
                            fresh))
    assert outs[0] == outs[1]


KEYS = st.sampled_from([b"a", b"b", b"c", b"a key longer than sixteen bytes", None])


@settings(deadline=None, max_examples=60)
@given(rows=st.lists(st.tuples(st.integers(-3, 3), KEYS, st.none() | st.binary(max_size=5), st.booleans(),
                               st.lists(st.tuples(st.text(max_size=3), st.none() | st.binary(max_size=3)),
                                        max_size=2)), min_size=1, max_size=12),
       kind=st.sampled_from(["kafka", "extended", "lat"]), codec=st.sampled_from([0, 3]),
       horizon=st.none() | st.integers(0, 10**13), keep=st.booleans(), latest_cut=st.integers(0, 14))
def test_rewritten_records_are_batch_builders(rows, kind, codec, horizon, keep, latest_cut):
    """A batch rebuilt from filter_records_v2's section holds exactly BatchBuilder's bytes for the
    records the cleaner keeps (compaction.rebuild_batch, the reference)."""
    from kbatch.log.cleaner import _header_of, _rebuilt_v2

    lat = kind == "lat"
    b = kbatch.BatchBuilder(base_offset=100, compression=codec, timestamp_extended=kind == "extended",
                            timestamp_type=W.TimestampType.LOG_APPEND_TIME if lat else W.TimestampType.CREATE_TIME,
                            log_append_time=5000 if lat else None, delete_horizon_ms=horizon, producer_id=7,
                            producer_epoch=2, base_sequence=11, partition_leader_epoch=4)
    for i, (dts, key, value, flag, headers) in enumerate(rows):
        ts = None if dts == -3 else 1_000 + 10 * dts
        b.append(ts, key, value, headers, True if (flag or value is None) else None, offset=100 + 2 * i)
    batch = next(kbatch.iter_batches(b.build()))
    section = batch.records_bytes()
    latest = 100 + latest_cut
    mapped = {}
    for r in batch:
        if r.key is not None:
            mapped[bytes(r.key)] = r.offset if r.offset % 3 else r.offset + 1  # some superseded
    fresh = 123_456_789
    for mod in both():
        m = mod.OffsetMap(24 * 100)
        for k, o in mapped.items():
            m.put(k, o)
        m.update_latest_offset(latest)
        out = m.filter_records_v2(section, 0, len(section), batch.record_count, batch.base_offset,
                                  batch.first_timestamp, batch.max_timestamp, batch.attributes,
                                  batch.delete_horizon_ms, keep, fresh)
        # the reference: the old per-record filter over Record objects, then rebuild_batch
        kept, tombs = [], 0
        for r in batch:
            if r.offset <= latest:
                if r.key is None or r.offset < mapped.get(bytes(r.key), -1) or (r.is_tombstone and not keep):
                    continue
            kept.append(r)
            tombs += r.is_tombstone
        assert out[1:6] == (len(kept), out[2], out[3], out[4], tombs)
        want_horizon = batch.delete_horizon_ms if batch.delete_horizon_ms is not None or not tombs else fresh
        if not kept or (len(kept) == batch.record_count and want_horizon == batch.delete_horizon_ms):
            assert out[0] is None
            continue
        assert out[8] == want_horizon
        assert _rebuilt_v2(_header_of(batch), out) == rebuild_batch(batch, kept, want_horizon)
