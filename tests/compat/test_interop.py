"""Interop both ways with kafka-python (pure Python) and aiokafka (its Cython `_crecords`):
batches they build decode to the same values in kbatch, and batches kbatch builds decode in theirs.

The peers' own quirks, each pinned by a test below:
- kafka-python needs python-snappy for snappy (the test extra installs it) and `xxhash` for its
  magic 0 lz4; a stand-in built on kbatch.record.compression.xxh32 (checked against published values in
  test_compression) takes xxhash's place.
- kafka-python sends a batch uncompressed when compression does not make it smaller; the records
  used here compress.
- kafka-python writes partitionLeaderEpoch 0; its legacy wrappers carry offset 0 and timestamp 0.
- aiokafka maps a legacy timestamp of -1 to None (and magic 0's type to None); kafka-python keeps -1
  everywhere, v2 included. kbatch says None for "no timestamp" (DESIGN.md decision 1).
- Neither knows the isTimestampExtended bit (7): they read the raw int64, so an extended batch's
  Long.MIN_VALUE reaches them as a number, and kafka-python's unbounded Python arithmetic does not
  wrap baseTimestamp + delta as Java does. kbatch batches for these peers use
  timestamp_extended=False (Kafka-identical); test_extended_batches_* shows what they see otherwise.
"""
import importlib

import pytest

import kbatch
from kbatch.record import compression as C

RECORDS = [  # (timestamp, key, value, headers): nulls, empties, headers with null values, big values
    (1_600_000_000_000, b"key-0", b"value-0" * 20, [("trace", b"abc"), ("null", None)]),
    (1_600_000_000_005, None, b"no key " * 30, []),
    (1_599_000_000_000, b"tomb", None, [("why", b"gdpr")]),
    (1_600_000_000_010, b"", b"", [("", b"")]),
    (1_700_000_000_000, b"k" * 300, b"v" * 5000, [("h%d" % i, b"x" * i) for i in range(5)]),
]


def _peer(name):
    """The peer's MemoryRecords and builders, refusing to run if kbatch.compat replaced them."""
    if name == "kafka-python":
        mr = importlib.import_module("kafka.record.memory_records").MemoryRecords
        v2 = importlib.import_module("kafka.record.default_records").DefaultRecordBatchBuilder
        legacy = importlib.import_module("kafka.record.legacy_records").LegacyRecordBatchBuilder
        assert mr.__module__ == "kafka.record.memory_records", "kbatch.compat is installed"
    else:
        mr = importlib.import_module("aiokafka.record.memory_records").MemoryRecords
        v2 = importlib.import_module("aiokafka.record.default_records").DefaultRecordBatchBuilder
        legacy = importlib.import_module("aiokafka.record.legacy_records").LegacyRecordBatchBuilder
        assert mr.__module__ == "aiokafka.record._crecords.memory_records", "not aiokafka's Cython records"
    return mr, v2, legacy


def peer_build(name, magic, codec, records, producer=(-1, -1, -1), transactional=False):
    _, v2, legacy = _peer(name)
    if magic == 2:
        b = v2(2, codec, transactional, *producer, 1 << 22)
        for i, (ts, k, v, h) in enumerate(records):
            b.append(i, ts, k, v, h)
    else:
        b = legacy(magic, codec, 1 << 22)
        for i, (ts, k, v, _h) in enumerate(records):
            b.append(i, ts, k, v)
    return bytes(b.build())


def peer_read(name, data):
    """(batch facts, records) as the peer sees them, CRCs verified by the peer."""
    mr = _peer(name)[0](bytes(data))
    batches, rows = [], []
    while mr.has_next():
        b = mr.next_batch()
        assert b.validate_crc()
        batches.append((getattr(b, "producer_id", None), getattr(b, "is_transactional", False),
                        getattr(b, "is_control_batch", False)))
        rows += [(r.offset, r.timestamp, r.key, r.value, [tuple(h) for h in r.headers]) for r in b]
    return batches, rows


def kbatch_read(data):
    return [(r.offset, r.timestamp, None if r.key is None else bytes(r.key),
             None if r.value is None else bytes(r.value),
             [(k, None if v is None else bytes(v)) for k, v in r.headers])
            for b in kbatch.iter_batches(data, verify_crc=True) for r in b]


def expected(magic, records):
    return [(i, None if magic == 0 else ts, k, v, list(h) if magic == 2 else [])
            for i, (ts, k, v, h) in enumerate(records)]


@pytest.fixture
def xxhash_stand_in(monkeypatch):
    """kafka-python's magic 0 lz4 needs the xxhash package; give it kbatch's xxh32."""
    class _Digest:
        def __init__(self, data):
            self._h = C.xxh32(bytes(data))

        def digest(self):
            return self._h.to_bytes(4, "big")

    class _XXHash:
        xxh32 = _Digest

    monkeypatch.setattr(importlib.import_module("kafka.codec"), "xxhash", _XXHash)


MATRIX = [(m, c) for m in (0, 1, 2) for c in range(5) if not (m < 2 and c == 4)]


def _skip_unsupported(peer, magic, codec):
    if peer == "kafka-python" and codec == 2 and not importlib.import_module("kafka.codec").has_snappy():
        pytest.skip("kafka-python needs python-snappy, which is not installed")
    if peer == "aiokafka" and magic == 0 and codec == 3:
        pytest.skip("aiokafka refuses lz4 for magic 0 (KAFKA-3160)")


# ------------------------------------------------------------------------------------ peers -> kbatch
@pytest.mark.parametrize("peer", ["kafka-python", "aiokafka"])
@pytest.mark.parametrize("magic, codec", MATRIX)
def test_peer_batches_decode_in_kbatch(backend, xxhash_stand_in, peer, magic, codec):
    _skip_unsupported(peer, magic, codec)
    data = peer_build(peer, magic, codec, RECORDS)
    batches = list(kbatch.iter_batches(data))
    assert {b.compression for b in batches} == {codec} and {b.magic for b in batches} == {magic}
    assert kbatch_read(data) == expected(magic, RECORDS)
    assert [r.is_tombstone for b in batches for r in b] == [False, False, True, False, False]
    if magic == 2:
        (b,) = batches
        ple = 0 if peer == "kafka-python" else -1  # kafka-python's quirk: epoch 0
        assert (b.partition_leader_epoch, b.max_timestamp, b.first_timestamp) == (ple, 1_700_000_000_000,
                                                                                   1_600_000_000_000)


@pytest.mark.parametrize("peer", ["kafka-python", "aiokafka"])
def test_peer_transactional_batches_decode_in_kbatch(backend, peer):
    data = peer_build(peer, 2, 1, RECORDS, producer=(98765, 4, 100), transactional=True)
    (b,) = kbatch.iter_batches(data)
    assert (b.producer_id, b.producer_epoch, b.base_sequence, b.is_transactional) == (98765, 4, 100, True)
    assert (b.last_sequence, b.last_offset) == (104, 4)
    assert kbatch_read(data) == expected(2, RECORDS)


def test_peer_timestamps_minus_one_and_negative(backend):
    recs = [(-1, b"a", b"1", []), (-5, b"b", b"2", []), (0, b"c", b"3", [])]
    for peer in ("kafka-python", "aiokafka"):
        for magic in (1, 2):
            data = peer_build(peer, magic, 0, recs)
            if peer == "aiokafka" and magic == 2:
                # aiokafka's Cython builder uses -1 as "no first timestamp yet": a first record at
                # -1 gets the second record's timestamp as baseTimestamp and delta 0. The bytes say
                # -5, and aiokafka reads them back the same way.
                assert [r[1] for r in kbatch_read(data)] == [-5, -5, 0] == [r[1] for r in peer_read(peer, data)[1]]
                continue
            assert [r[1] for r in kbatch_read(data)] == [None, -5, 0], (peer, magic)


# ------------------------------------------------------------------------------------ kbatch -> peers
def normalized(peer, magic, rows):
    """The peer's rows in kbatch's terms: -1 (or aiokafka's None) is "no timestamp"."""
    return [(o, None if ts in (None, -1) else ts, k, v, h) for o, ts, k, v, h in rows]


@pytest.mark.parametrize("peer", ["kafka-python", "aiokafka"])
@pytest.mark.parametrize("magic, codec", MATRIX)
def test_kbatch_batches_decode_in_peers(backend, xxhash_stand_in, peer, magic, codec):
    _skip_unsupported(peer, magic, codec)
    b = kbatch.BatchBuilder(magic=magic, compression=codec, timestamp_extended=False)
    for ts, k, v, h in RECORDS + [(None, b"no-ts", b"x", [])]:
        b.append(ts, k, v, h if magic == 2 else ())
    data = b.build()
    _, rows = peer_read(peer, data)
    assert normalized(peer, magic, rows) == kbatch_read(data) == expected(magic, RECORDS + [(None, b"no-ts", b"x", [])])


@pytest.mark.parametrize("peer", ["kafka-python", "aiokafka"])
def test_kbatch_transactional_and_control_batches_in_peers(backend, peer):
    txn = kbatch.build_batch([(t, k, v, h) for t, k, v, h in RECORDS], producer_id=555, producer_epoch=2,
                             base_sequence=0, is_transactional=True, timestamp_extended=False,
                             compression=kbatch.Compression.ZSTD)
    marker = kbatch.build_end_txn_marker(producer_id=555, producer_epoch=2, commit=True, coordinator_epoch=9,
                                         base_offset=5, timestamp=1_700_000_000_001)
    batches, rows = peer_read(peer, txn + marker)
    assert batches == [(555, True, False), (555, True, True)]
    assert rows[-1][0] == 5 and rows[-1][2] == b"\x00\x00\x00\x01"  # COMMIT key: version 0, type 1
    if peer == "kafka-python":
        marker_batch = _peer(peer)[0](marker).next_batch()
        (ctl,) = list(marker_batch)
        assert ctl.commit and ctl.version == 0
    else:
        from aiokafka.record.control_record import COMMIT_MARKER, ControlRecord
        assert ControlRecord.parse(rows[-1][2]) == COMMIT_MARKER


@pytest.mark.parametrize("peer", ["kafka-python", "aiokafka"])
def test_kbatch_log_append_time_batches_in_peers(backend, peer):
    b = kbatch.BatchBuilder(timestamp_type=kbatch.TimestampType.LOG_APPEND_TIME, log_append_time=42_000,
                            timestamp_extended=False)
    b.append(10, b"k", b"v")
    b.append(20, b"k", b"v")
    _, rows = peer_read(peer, b.build())
    assert [r[1] for r in rows] == [42_000, 42_000]


def test_legacy_minus_one_timestamps_in_peers(backend):
    b = kbatch.BatchBuilder(magic=1)
    b.append(-1, b"k", b"v")
    b.append(-7, b"k", b"v")
    data = b.build()
    assert [r[1] for r in peer_read("kafka-python", data)[1]] == [-1, -7]
    assert [r[1] for r in peer_read("aiokafka", data)[1]] == [None, -7]  # aiokafka's -1 -> None
    assert [r[1] for r in kbatch_read(data)] == [None, -7]


# ------------------------------------------------------------------------------------ the extended bit
def test_extended_batches_are_still_read_by_peers(backend):
    # bit 7 is ignored by both; timestamps that are not "no timestamp" read the same
    recs = [(1_600_000_000_000, b"a", b"1", []), (-86_400_000, b"b", b"2", []), (-1, b"c", b"3", [])]
    data = kbatch.build_batch(recs)
    (b,) = kbatch.iter_batches(data)
    assert b.timestamp_extended
    assert [r[1] for r in kbatch_read(data)] == [1_600_000_000_000, -86_400_000, -1]  # -1 is real here
    for peer in ("kafka-python", "aiokafka"):
        assert [r[1] for r in peer_read(peer, data)[1]] == [1_600_000_000_000, -86_400_000, -1]


def test_extended_batches_starting_without_a_timestamp_break_non_wrapping_readers(backend):
    # baseTimestamp = Long.MIN_VALUE, so the next delta wraps in 64 bits. Java (and aiokafka's
    # Cython int64 arithmetic) get the timestamp back; kafka-python's Python ints do not wrap.
    data = kbatch.build_batch([(None, b"a", b"1"), (5, b"b", b"2")])
    assert [r[1] for r in kbatch_read(data)] == [None, 5]
    assert [r[1] for r in peer_read("aiokafka", data)[1]] == [-(2**63), 5]
    assert [r[1] for r in peer_read("kafka-python", data)[1]] == [-(2**63), 5 - 2**64]
    plain = kbatch.build_batch([(None, b"a", b"1"), (5, b"b", b"2")], timestamp_extended=False)
    assert [r[1] for r in peer_read("kafka-python", plain)[1]] == [-1, 5]


def test_peer_classes_are_the_real_ones():
    assert importlib.import_module("aiokafka.record._crecords")  # the Cython codec is importable
    _peer("kafka-python")
    _peer("aiokafka")
