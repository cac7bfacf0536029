"""Hypothesis: random batches round-trip through the builder and the reader, and the two backends
(kbatch._core and kbatch._core_py) agree on random, truncated and bit-flipped whole buffers: the
same batches and records, or the same error class at the same byte position.

Example counts come from the hypothesis profile (a fast default; HYPOTHESIS_PROFILE=ci for more).
"""
import contextlib
import importlib
import os
import struct

import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

import kbatch
from kbatch import _backend
from kbatch import _wire as W
from kbatch.errors import KBatchError

INT64 = st.integers(-(2**63), 2**63 - 1)
TIMESTAMPS = st.one_of(st.none(), st.sampled_from([-1, 0, -(2**63) + 1, 2**63 - 1, -86_400_000]),
                       st.integers(-(2**50), 2**50), INT64)
BLOBS = st.one_of(st.none(), st.binary(max_size=40))
HEADERS = st.lists(st.tuples(st.text(max_size=8), BLOBS), max_size=3)


@st.composite
def batch_specs(draw):
    magic = draw(st.sampled_from([0, 1, 2]))
    codec = draw(st.sampled_from([0, 1, 2, 3, 4] if magic == 2 else [0, 1, 2, 3]))
    extended = draw(st.booleans())
    lat = magic > 0 and draw(st.integers(0, 4)) == 0
    kw = dict(magic=magic, compression=codec, timestamp_extended=extended,
              base_offset=draw(st.integers(0, 2**40)))
    if lat:
        kw.update(timestamp_type=kbatch.TimestampType.LOG_APPEND_TIME,
                  log_append_time=draw(st.one_of(st.integers(-(2**62), 2**62), st.just(-1))))
    if magic == 2 and draw(st.booleans()):
        kw.update(producer_id=draw(st.integers(0, 2**63 - 1)), producer_epoch=draw(st.integers(0, 32767)),
                  base_sequence=draw(st.integers(0, 2**31 - 1)), is_transactional=draw(st.booleans()),
                  partition_leader_epoch=draw(st.integers(-1, 2**31 - 1)))
    n = draw(st.integers(1, 8))
    records, offset = [], kw["base_offset"]
    for _ in range(n):
        ts = draw(TIMESTAMPS)
        if extended and magic == 2 and ts == -(2**63):
            ts = None
        value = draw(BLOBS)
        tomb = draw(st.sampled_from([None, None, True])) if magic == 2 else None
        offset += draw(st.sampled_from([1, 1, 1, 2, 7]))  # gaps: readers must trust the deltas
        records.append((ts, draw(BLOBS), value, draw(HEADERS) if magic == 2 else [], tomb, offset - 1))
    return kw, records


def expected_timestamp(kw, ts):
    magic, extended = kw["magic"], kw["timestamp_extended"] and kw["magic"] == 2
    if magic == 0:
        return None
    if kw.get("timestamp_type") == kbatch.TimestampType.LOG_APPEND_TIME:
        ts = kw["log_append_time"]
    if ts is None:
        return None
    if not extended and ts == -1:
        return None
    return ts


@settings(deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(batch_specs())
def test_random_batches_round_trip(spec):
    kw, records = spec
    b = kbatch.BatchBuilder(**kw)
    for ts, key, value, headers, tomb, offset in records:
        b.append(ts, key, value, headers, tombstone=tomb, offset=offset)
    data = b.build()
    got = [(r.offset, r.timestamp, r.key and bytes(r.key), None if r.value is None else bytes(r.value),
            [(k, None if v is None else bytes(v)) for k, v in r.headers], r.is_tombstone)
           for batch in kbatch.iter_batches(data) for r in batch]
    want = []
    for ts, key, value, headers, tomb, offset in records:
        is_tomb = value is None or bool(tomb)
        if kw["magic"] < 2 and is_tomb:
            value = None  # legacy tombstones are null values
        want.append((offset, expected_timestamp(kw, ts), key and bytes(key), value,
                     [(k, v) for k, v in headers], is_tomb))
    if kw["magic"] < 2 and kw["compression"] == 0:
        assert len(list(kbatch.iter_batches(data))) == len(records)
    assert got == want
    mr = kbatch.MemoryRecords(data)
    assert mr.valid_bytes == len(data) and mr.truncated_bytes == 0


# ------------------------------------------------------------------------------------ differential
def _cores():
    py = importlib.import_module("kbatch._core_py")
    try:
        cy = importlib.import_module("kbatch._core")
    except ImportError as e:  # as tests/conftest.py's backend fixture: a missing core fails
        if os.environ.get("KBATCH_ALLOW_NO_CYTHON", "") != "1":
            pytest.fail(f"kbatch._core is not built ({e}): nothing to compare the pure twin with", pytrace=False)
        pytest.skip("kbatch._core is not built; KBATCH_ALLOW_NO_CYTHON=1")
    return py, cy


@contextlib.contextmanager
def _using(core):
    saved = _backend.core
    _backend.core = core
    try:
        yield
    finally:
        _backend.core = saved


def outcome(core, data, verify_crc, strict):
    """Everything a reader can observe, or the error it ends with (class, position, base offset)."""
    seen = []
    with _using(core):
        try:
            seen.append(("valid", kbatch.MemoryRecords(data).valid_bytes))
            for b in kbatch.iter_batches(data, verify_crc=verify_crc, strict=strict,
                                         max_decompressed_bytes=1 << 20):
                seen.append((b.magic, b.position, b.size_in_bytes, b.attributes, b.crc, b.last_offset))
                for r in b:
                    seen.append((r.offset, r.timestamp, r.key and bytes(r.key),
                                 None if r.value is None else bytes(r.value),
                                 tuple((k, None if v is None else bytes(v)) for k, v in r.headers),
                                 r.is_tombstone, r.attributes))
        except KBatchError as e:
            seen.append(("error", type(e).__name__, e.position, e.base_offset))
    return seen


def _buffer(specs):
    out = b""
    for kw, records in specs:
        b = kbatch.BatchBuilder(**kw)
        for ts, key, value, headers, tomb, offset in records:
            b.append(ts, key, value, headers, tombstone=tomb, offset=offset)
        out += b.build()
    return out


MUTATIONS = st.lists(st.tuples(st.sampled_from(["flip", "set", "cut"]), st.integers(0, 2**31), st.integers(0, 255)),
                     max_size=4)


@settings(deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(batch_specs(), min_size=1, max_size=3), MUTATIONS, st.booleans(), st.booleans())
def test_backends_agree_on_random_truncated_and_corrupted_buffers(specs, mutations, verify_crc, strict):
    py, cy = _cores()
    data = bytearray(_buffer(specs))
    for kind, where, byte in mutations:
        if not data:
            break
        i = where % len(data)
        if kind == "flip":
            data[i] ^= 1 << (byte % 8)
        elif kind == "set":
            data[i] = byte
        else:
            del data[i:]
    data = bytes(data)
    a, b = outcome(py, data, verify_crc, strict), outcome(cy, data, verify_crc, strict)
    assert a == b


@settings(deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.binary(min_size=W.HEADER_SIZE_UP_TO_MAGIC + 1, max_size=300), st.booleans())
def test_backends_agree_on_arbitrary_bytes(data, strict):
    py, cy = _cores()
    assert outcome(py, data, False, strict) == outcome(cy, data, False, strict)


@settings(deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.binary(min_size=1, max_size=120), st.integers(0, 3), st.integers(-5, 5), st.booleans())
def test_backends_agree_on_random_records_sections(section, count_shift, extra, extended):
    # a valid header around a random records section (count near the number of bytes / 7)
    py, cy = _cores()
    count = max(0, len(section) // 7 - count_shift) + extra
    head = kbatch.build_batch([(1, b"k", b"v")], base_offset=77, timestamp_extended=extended)[:W.RECORDS_OFFSET]
    head = bytearray(head)
    struct.pack_into(">i", head, W.LENGTH_OFFSET, W.RECORD_BATCH_OVERHEAD - W.LOG_OVERHEAD + len(section))
    struct.pack_into(">i", head, W.RECORDS_COUNT_OFFSET, count)
    data = bytes(head) + section
    assert outcome(py, data, False, True) == outcome(cy, data, False, True)


# ------------------------------------------------------------------------------------ encoding kernel
ANY_INT = st.one_of(st.integers(-(2**63), 2**63 - 1), st.integers(-(2**70), 2**70), st.sampled_from([0, -1, 2**31]))
ENC_BLOBS = st.one_of(st.none(), st.binary(max_size=20), st.binary(max_size=20), st.binary(max_size=5).map(bytearray),
                      st.binary(max_size=5).map(memoryview), st.sampled_from(["text", 7]))  # 1 in 6 refused
ENC_HEADERS = st.one_of(
    st.just(()), st.none(),
    st.lists(st.tuples(st.one_of(st.text(max_size=5), st.binary(max_size=5), st.none()), ENC_BLOBS), max_size=3),
    st.lists(st.tuples(st.text(max_size=3), st.binary(max_size=3)), max_size=2).map(tuple))
ENC_RECORDS = st.lists(st.tuples(
    st.one_of(st.none(), ANY_INT, st.just(1.5)), ENC_BLOBS, ENC_BLOBS, ENC_HEADERS,
    st.sampled_from([None, None, True, False, 0, 1]),
    st.one_of(st.none(), st.none(), ANY_INT)).flatmap(
    lambda r: st.integers(2, 7).map(lambda n: r[:n] if n <= 6 else r + (None,))), max_size=6)


def _sanitized(records):
    """The same records with every refused shape or type replaced (so the C path runs)."""
    def blob(v):
        return b"x" if isinstance(v, (str, int)) else v

    out = []
    for r in records:
        ts, key, value, headers, tomb, offset = (tuple(r) + (None,) * 6)[:6]
        headers = [(k if k is not None else "k", blob(v)) for k, v in headers or ()]
        out.append((ts, blob(key), blob(value), headers, tomb, offset)[:min(max(len(r), 3), 6)])
    return out


def _encode_outcome(core, *args):
    try:
        return ("ok", core.encode_records_v2(*args))
    except Exception as e:  # noqa: BLE001 - the class and message are what is compared
        return ("error", type(e).__name__, str(e))


@settings(deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(ENC_RECORDS, st.one_of(st.integers(0, 2**40), ANY_INT), st.one_of(st.none(), ANY_INT),
       st.one_of(st.none(), ANY_INT), st.booleans(), st.booleans(), st.booleans())
def test_backends_agree_on_encode_records_v2(records, base_offset, last_offset, base_ts, extended, as_tuple, clean):
    py, cy = _cores()
    if clean:
        records = _sanitized(records)
    args = (tuple(records) if as_tuple else records, base_offset, last_offset, base_ts, extended)
    a, b = _encode_outcome(py, *args), _encode_outcome(cy, *args)
    event(a[0] if a[0] == "ok" else a[1])
    assert a == b
    if a[0] == "ok" and a[1][1]:  # what was encoded decodes to what was given
        section, count, bts, _max, _last = a[1]
        got = py.decode_records_v2(section, 0, len(section), count, base_offset, bts, None, 0, extended)
        assert len(got) == count


def _encoder_run(core, ops, base_offset, base_ts, extended):
    """Apply append/extend operations; after each, what it returned or raised, and the state."""
    try:
        enc = core.RecordsEncoderV2(base_offset, None, base_ts, extended)
    except Exception as e:  # noqa: BLE001
        return [("error", type(e).__name__, str(e))]
    seen = []
    for kind, recs in ops:
        try:
            got = enc.append(*recs[0]) if kind == "append" and recs and 3 <= len(recs[0]) <= 6 else enc.extend(recs)
            seen.append(("ok", got))
        except Exception as e:  # noqa: BLE001
            seen.append(("error", type(e).__name__, str(e)))
        seen.append((enc.count, enc.last_offset, enc.base_timestamp, enc.max_timestamp, enc.section()))
    return seen


@settings(deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.tuples(st.sampled_from(["append", "extend"]), ENC_RECORDS, st.booleans()), max_size=5),
       st.one_of(st.integers(0, 2**40), ANY_INT), st.one_of(st.none(), ANY_INT), st.booleans())
def test_backends_agree_on_records_encoder(ops, base_offset, base_ts, extended):
    py, cy = _cores()
    ops = [(kind, _sanitized(recs) if clean else recs) for kind, recs, clean in ops]
    assert _encoder_run(py, ops, base_offset, base_ts, extended) == _encoder_run(cy, ops, base_offset, base_ts,
                                                                                 extended)
