"""kbatch.decode_columns: Spark Kafka-source columns, equal to the object API, on both backends."""
import importlib
import struct

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import kbatch
from kbatch import _backend
from kbatch.columns import decode as A
from kbatch import BatchBuilder, Compression, build_end_txn_marker

NOW = 1_700_000_000_000


def _backends():
    out = ["python"]
    try:
        importlib.import_module("kbatch._core")
        out.append("cython")
    except ImportError:
        pass
    return out


@pytest.fixture(params=_backends())
def kbackend(request, monkeypatch):
    """Run a test on each available kernel backend (patches kbatch._backend.core)."""
    mod = importlib.import_module("kbatch._core_py" if request.param == "python" else "kbatch._core")
    monkeypatch.setattr(_backend, "core", mod)
    return request.param


def mixed_log() -> bytes:
    """Every codec, legacy magic 0/1, LAT, extended and non-extended timestamps, headers,
    tombstones with and without payloads, a transaction with its marker."""
    data = b""
    off = 0
    for codec in Compression:
        b = BatchBuilder(compression=codec, base_offset=off)
        b.append(NOW, b"k", b"v", headers=[("h", b"x"), ("h2", None), ("", b"")])
        b.append(None, None, b"v2")                     # no timestamp (extended batch)
        b.append(-1, b"k3", b"minus one is real")       # KIP-228: a real instant when extended
        b.append(-(2**40), b"k4", None)                 # historical, null-value tombstone
        b.append(NOW + 5, b"k5", b"payload", tombstone=True)
        data += b.build()
        off += 5
    b = BatchBuilder(base_offset=off, timestamp_extended=False, compression=Compression.LZ4)
    b.append(-1, b"ne", b"-1 means none here")
    b.append(-5, b"neg", b"negative but real")
    data += b.build()
    off += 2
    b = BatchBuilder(base_offset=off, timestamp_type=kbatch.TimestampType.LOG_APPEND_TIME, log_append_time=NOW + 9)
    b.append(5, b"a", b"b")
    b.append(None, b"c", b"d", headers=[("x", b"y")])
    data += b.build()
    off += 2
    b = BatchBuilder(base_offset=off, producer_id=77, producer_epoch=3, base_sequence=0, is_transactional=True,
                     compression=Compression.ZSTD)
    b.append(NOW, b"t1", b"in txn")
    b.append(NOW, b"t2", b"in txn")
    data += b.build()
    off += 2
    data += build_end_txn_marker(producer_id=77, producer_epoch=3, commit=True, coordinator_epoch=1, base_offset=off,
                                 timestamp=NOW)
    off += 1
    for magic in (0, 1):
        for codec in (Compression.NONE, Compression.GZIP, Compression.SNAPPY, Compression.LZ4):
            b = BatchBuilder(magic=magic, compression=codec, base_offset=off)
            b.append(NOW - 7, b"lk", b"lv")
            b.append(NOW - 8, None, None)
            data += b.build()
            off += 2
    return data


def reference_rows(data, topic, partition, include_control=False):
    """Rows from the object API, in decode_columns' to_pylist() form."""
    from datetime import datetime, timedelta, timezone

    epoch = datetime(1970, 1, 1, tzinfo=timezone.utc)
    rows = []
    for batch in kbatch.iter_batches(data):
        if batch.is_control and not include_control:
            continue
        for r in batch:
            ts = None if r.timestamp is None else epoch + timedelta(milliseconds=r.timestamp)
            rows.append({
                "key": None if r.key is None else bytes(r.key),
                "value": None if r.value is None else bytes(r.value),
                "topic": topic, "partition": partition, "offset": r.offset, "timestamp": ts,
                "timestampType": int(r.timestamp_type),
                "headers": [{"key": k, "value": None if v is None else bytes(v)} for k, v in r.headers] or None,
                "isTombstone": bool(r.is_tombstone),
                "producerId": batch.producer_id, "producerEpoch": batch.producer_epoch,
                "baseSequence": batch.base_sequence, "isTransactional": batch.is_transactional,
                "isControl": batch.is_control,
            })
    return rows


def _norm(rows):
    # compare datetimes as instants (tz objects differ between pyarrow and datetime.timezone)
    for r in rows:
        if r["timestamp"] is not None:
            r["timestamp"] = r["timestamp"].timestamp()
    return rows


def test_schema_matches_spark_kafka_source():
    s = A.schema(include_headers=True)
    assert s.names[:8] == ["key", "value", "topic", "partition", "offset", "timestamp", "timestampType", "headers"]
    assert s.field("key").type == pa.binary() and s.field("value").type == pa.binary()  # never large_binary
    assert s.field("partition").type == pa.int32() and s.field("offset").type == pa.int64()
    assert s.field("timestamp").type == pa.timestamp("us", tz="UTC")
    assert s.field("timestampType").type == pa.int32()
    assert s.field("headers").type.value_type == pa.struct([("key", pa.string()), ("value", pa.binary())])
    assert s.field("isTombstone").type == pa.bool_()
    assert kbatch.KAFKA_SCHEMA.names == s.names[:7]


def test_equals_object_api(kbackend):
    data = mixed_log()
    t = kbatch.decode_columns(data, "orders", 3, batch_fields=True)
    assert t.schema == A.schema(True, True)
    assert _norm(t.to_pylist()) == _norm(reference_rows(data, "orders", 3))


def test_backends_give_identical_tables(monkeypatch):
    if "cython" not in _backends():
        pytest.skip("the Cython core is not built")
    data = mixed_log()
    tables = []
    for name in ("kbatch._core_py", "kbatch._core"):
        monkeypatch.setattr(_backend, "core", importlib.import_module(name))
        tables.append(kbatch.decode_columns(data, "t", 0, batch_fields=True, include_control=True))
    assert tables[0].equals(tables[1])


def test_kernel_matches_reference(kbackend):
    """decode_columns_v2 of the live backend gives the pure twin's arrays (the contract)."""
    from kbatch import _core_py

    b = BatchBuilder(base_offset=10, compression=Compression.NONE)
    for i in range(50):
        b.append(NOW + i if i % 7 else None, None if i % 5 == 0 else b"k%d" % i,
                 None if i % 11 == 0 else b"v" * i, headers=[("a", b"1"), ("b", None)] if i % 3 == 0 else ())
    data = b.build() + b.build()
    n = len(data) // 2
    args = (data, np.array([61, n + 61], np.int64), np.array([n, 2 * n], np.int64), np.array([50, 50], np.int32),
            np.array([10, 10], np.int64), np.array([NOW + 1, NOW + 1], np.int64), np.array([NOW, NOW], np.int64),
            np.array([0x80, 0x80], np.int16))
    for include_headers, keys, values in ((True, True, True), (False, True, True), (True, True, False),
                                          (False, False, True)):
        ref = _core_py.decode_columns_v2(*args, include_headers, None, keys, values)
        got = _backend.core.decode_columns_v2(*args, include_headers, None, keys, values)
        assert set(got) == set(ref)
        for k in ref:
            assert np.asarray(got[k]).dtype == ref[k].dtype, k
            np.testing.assert_array_equal(np.asarray(got[k]), ref[k], err_msg=k)
        # a projection steps over what it leaves out: nothing copied, the nulls still counted
        assert (len(ref["value_data"]) > 0) == values and (len(ref["key_data"]) > 0) == keys
        assert ref["value_valid"].sum() == 100 - 2 * 5 and int(ref["stats"][4]) == 2 * 5
    assert ref["offset"].tolist() == list(range(10, 60)) * 2


def test_headers_null_when_none_and_option_off(kbackend):
    data = mixed_log()
    t = kbatch.decode_columns(data, "t", 0)
    hs = t["headers"].to_pylist()
    assert hs[0] == [{"key": "h", "value": b"x"}, {"key": "h2", "value": None}, {"key": "", "value": b""}]
    assert hs[1] is None
    t2 = kbatch.decode_columns(data, "t", 0, include_headers=False)
    assert "headers" not in t2.column_names
    assert t2.num_rows == t.num_rows


@pytest.mark.parametrize("keys", [["trace", "a"], ["ключ", "trace"], [b"\xff\xfe", "ok"], ["ok", b"bad \xc3"]],
                         ids=["ascii", "utf8", "invalid-first", "invalid-last"])
def test_header_keys_ascii_utf8_and_invalid(kbackend, keys):
    """Header keys are strings: ASCII and UTF-8 kept as they are, invalid UTF-8 replaced (U+FFFD) as
    the record objects do, whatever the mix of the chunk."""
    b = BatchBuilder()
    for k in keys:
        b.append(NOW, b"k", b"v", headers=[(k, b"x")])
    raw = b.build()
    want = [k if isinstance(k, str) else k.decode("utf-8", "replace") for k in keys]
    t = kbatch.decode_columns(raw, "t", 0)
    assert t["headers"].to_pylist() == [[{"key": k, "value": b"x"}] for k in want]
    assert [r.headers[0][0] for r in next(kbatch.iter_batches(raw))] == want


def test_timestamps_extended_lat_and_none(kbackend):
    t = kbatch.decode_columns(mixed_log(), "t", 0)
    ts = A.timestamps_ms(t["timestamp"])
    off = t["offset"].to_numpy()
    by = dict(zip(off.tolist(), ts.tolist()))
    assert by[0] == NOW
    assert by[1] == kbatch.NO_TIMESTAMP_EXTENDED  # null
    assert by[2] == -1                             # real instant in an extended batch
    assert by[3] == -(2**40)
    assert by[25] == kbatch.NO_TIMESTAMP_EXTENDED  # -1 in a non-extended batch: no timestamp
    assert by[26] == -5
    assert by[27] == by[28] == NOW + 9             # LogAppendTime overrides
    assert t["timestampType"].to_pylist()[t["offset"].to_pylist().index(27)] == 1


def test_control_batches_are_not_rows(kbackend):
    data = mixed_log()
    t = kbatch.decode_columns(data, "t", 0, batch_fields=True)
    assert 31 not in t["offset"].to_pylist()  # the COMMIT marker
    assert not any(t["isControl"].to_pylist())
    tc = kbatch.decode_columns(data, "t", 0, batch_fields=True, include_control=True)
    assert tc.num_rows == t.num_rows + 1
    row = tc.filter(pa.compute.equal(tc["offset"], 31)).to_pylist()[0]
    assert row["isControl"] and row["isTransactional"] and row["producerId"] == 77


def test_offset_range(kbackend):
    data = mixed_log()
    full = kbatch.decode_columns(data, "t", 0)
    part = kbatch.decode_columns(data, "t", 0, start_offset=3, end_offset=29)
    expect = [o for o in full["offset"].to_pylist() if 3 <= o < 29]
    assert part["offset"].to_pylist() == expect


def test_chunks_never_split_a_batch(kbackend):
    b = BatchBuilder()
    for i in range(100):
        b.append(NOW, b"k", b"v")
    one = b.build()
    data = b"".join(_rebase(one, 100 * i) for i in range(5))
    t = kbatch.decode_columns(data, "t", 0, chunk_rows=150)
    assert t.num_rows == 500
    assert [len(c) for c in t["offset"].chunks] == [200, 200, 100]


def _rebase(batch: bytes, base: int) -> bytes:
    return struct.pack(">q", base) + batch[8:]  # base offset is outside the CRC


def test_timestamp_beyond_microseconds_is_null(kbackend):
    b = BatchBuilder()
    b.append(2**63 - 1, b"k", b"far future")
    b.append(NOW, b"k", b"ok")
    t = kbatch.decode_columns(b.build(), "t", 0)
    assert t["timestamp"].null_count == 1
    assert t["timestamp"].to_pylist()[0] is None


def test_bad_crc_names_position(kbackend):
    data = bytearray(mixed_log())
    first = next(iter(kbatch.iter_batches(bytes(data))))
    second_pos = first.size_in_bytes
    data[second_pos + 70] ^= 0xFF
    with pytest.raises(kbatch.CrcMismatchError) as ei:
        kbatch.decode_columns(bytes(data), "t", 0)
    assert ei.value.position == second_pos
    t = kbatch.decode_columns(bytes(data[:second_pos]), "t", 0)
    assert t.num_rows == 5


def test_corrupt_compressed_records_point_at_the_batch(kbackend):
    b = BatchBuilder(compression=Compression.GZIP, base_offset=0)
    b.append(NOW, b"k", b"v")
    good = b.build()
    inner = bytearray(b"\x7f" + bytes(30))  # a record whose length runs past the section
    import gzip
    body = gzip.compress(bytes(inner))
    hdr = bytearray(good[:61])
    struct.pack_into(">i", hdr, 8, 61 - 12 + len(body))
    crc = kbatch.crc32c(bytes(hdr[21:]) + body)
    struct.pack_into(">I", hdr, 17, crc)
    bad = bytes(hdr) + body
    with pytest.raises(kbatch.KBatchError) as ei:
        kbatch.decode_columns(good + bad, "t", 0)
    assert ei.value.position == len(good)
    assert "decompressed records" in str(ei.value)


def test_truncated_tail(kbackend):
    data = mixed_log()
    with pytest.raises(kbatch.TruncatedDataError) as ei:
        kbatch.decode_columns(data[:-5], "t", 0)
    assert ei.value.position is not None
    t = kbatch.decode_columns(data[:-5], "t", 0, strict=False)
    expect = sum(len(b.records()) for b in kbatch.MemoryRecords(data[:-5]).batches() if not b.is_control)
    assert t.num_rows == expect == kbatch.decode_columns(data, "t", 0).num_rows - 2


def test_empty_input():
    t = kbatch.decode_columns(b"", "t", 0)
    assert t.num_rows == 0 and t.schema == A.schema()


# ------------------------------------------------------------------------------------ threads
@pytest.fixture
def two_threads(monkeypatch):
    """A two-thread decode pool whatever the CPU count (on one CPU there is none to compare)."""
    from concurrent.futures import ThreadPoolExecutor

    pool = ThreadPoolExecutor(2, thread_name_prefix="test-decode")
    monkeypatch.setattr(A, "_decode_pool", lambda: (pool, 2))
    yield pool
    pool.shutdown(wait=True)


def many_chunks_log() -> bytes:
    """Runs of plain, compressed and legacy batches, so chunks of every kind follow each other."""
    data, off = b"", 0
    for i in range(40):
        codec = Compression.LZ4 if i % 9 == 4 else Compression.NONE
        b = BatchBuilder(compression=codec, base_offset=off, magic=1 if i % 13 == 7 else 2)
        for j in range(25):
            b.append(NOW + off + j, b"k%d" % (off + j), bytes([j]) * (j * 7),
                     headers=[("n", b"%d" % j)] if j % 4 == 0 and i % 13 != 7 else ())
        data += b.build()
        off += 25
    return data


def outcome_of(data, use_threads, chunk_rows=60, **kw):
    """(rows of each chunk yielded, then the error's class, position and text, or the return value)."""
    gen = A.iter_record_batches(data, "t", 1, use_threads=use_threads, chunk_rows=chunk_rows, **kw)
    chunks = []
    try:
        while True:
            chunks.append(next(gen).to_pylist())
    except StopIteration as stop:
        return chunks, ("returned", stop.value)
    except kbatch.KBatchError as e:
        return chunks, (type(e), e.position, str(e))


def test_threads_give_the_same_chunks_rows_and_errors(kbackend, two_threads):
    """Decoded ahead on other threads or not: the same chunks, rows, return value, and on a bad
    batch the same rows before it and the same error; on a truncated tail as well."""
    data = many_chunks_log()
    plain = outcome_of(data, False)
    assert len(plain[0]) > 20 and plain[1] == ("returned", len(data))
    assert outcome_of(data, True) == plain
    assert kbatch.decode_columns(data, "t", 1, use_threads=True).equals(kbatch.decode_columns(data, "t", 1, use_threads=False))
    batches = list(kbatch.iter_batches(data))
    for k in (3, 17, 33):  # a CRC flipped in a plain batch in the middle of a chunk
        pos = sum(b.size_in_bytes for b in batches[:k])
        bad = bytearray(data)
        bad[pos + 70] ^= 0x40
        want = outcome_of(bytes(bad), False)
        assert want[1][0] is kbatch.CrcMismatchError and want[0]
        assert outcome_of(bytes(bad), True) == want
    for cut in (len(data) - 3, len(data) // 2):
        want = outcome_of(data[:cut], False)
        assert want[1][0] is kbatch.TruncatedDataError
        assert outcome_of(data[:cut], True) == want
        assert outcome_of(data[:cut], True, strict=False) == outcome_of(data[:cut], False, strict=False)


def test_an_abandoned_threaded_iteration_leaves_nothing_running(kbackend, two_threads):
    """Stopping after the first chunk cancels or waits for the chunks decoded ahead: when close()
    returns, no thread still reads the caller's buffer (which may be a map about to close)."""
    import mmap
    import tempfile

    data = many_chunks_log() * 1  # noqa: PLR6104
    with tempfile.TemporaryFile() as f:
        f.write(data)
        f.flush()
        m = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
        gen = A.iter_record_batches(m, "t", 1, chunk_rows=60, use_threads=True)
        first = next(gen)
        assert first.num_rows
        gen.close()
        del gen, first
        m.close()  # no export of the map is left behind: a running decode would hold one (BufferError)
    assert two_threads.submit(lambda: 7).result(timeout=30) == 7


def test_threads_after_fork():
    """A child forked after the parent decoded on its threads makes its own (the parent's do not
    exist in it): its decode finishes, and gives the parent's table."""
    import multiprocessing

    if "fork" not in multiprocessing.get_all_start_methods():
        pytest.skip("no fork on this platform")
    data = many_chunks_log()
    parent = kbatch.decode_columns(data, "t", 1, chunk_rows=60)  # makes the parent's pool (2+ CPUs)
    ctx = multiprocessing.get_context("fork")
    q = ctx.Queue()
    p = ctx.Process(target=_decode_in_child, args=(data, q))
    p.start()
    p.join(60)
    if p.is_alive():
        p.kill()
        pytest.fail("the forked child's decode hung")
    assert p.exitcode == 0
    assert q.get(timeout=10) == parent.num_rows


def _decode_in_child(data, q):
    q.put(kbatch.decode_columns(data, "t", 1, chunk_rows=60).num_rows)


def test_decode_threads_follow_the_cpus_this_process_may_use(monkeypatch):
    """One thread a CPU this process may run on (a container's or taskset's share, not the
    machine's), at most 8; none on one CPU (the caller decodes, as with use_threads=False)."""
    if not hasattr(A.os, "sched_getaffinity"):
        pytest.skip("no CPU affinity on this platform")
    monkeypatch.setattr(A, "_POOL", None)
    monkeypatch.setattr(A.os, "sched_getaffinity", lambda pid: {0})
    assert A._decode_pool() is None
    monkeypatch.setattr(A.os, "sched_getaffinity", lambda pid: set(range(3)))
    pool = A._decode_pool()
    assert pool is not None and pool[1] == 3
    monkeypatch.setattr(A.os, "sched_getaffinity", lambda pid: set(range(64)))
    monkeypatch.setattr(A, "_POOL", None)
    big = A._decode_pool()
    assert big is not None and big[1] == 8
    pool[0].shutdown()
    big[0].shutdown()


_THREADS = None


def _module_threads():
    global _THREADS
    if _THREADS is None:
        from concurrent.futures import ThreadPoolExecutor

        _THREADS = ThreadPoolExecutor(2, thread_name_prefix="test-decode-h")
    return _THREADS, 2


@settings(max_examples=60, deadline=None)
@given(sizes=st.lists(st.integers(1, 40), min_size=1, max_size=12),
       kinds=st.lists(st.sampled_from(["plain", "plain", "plain", "lz4", "legacy"]), min_size=12, max_size=12),
       flips=st.lists(st.integers(0, 10**6), max_size=2), cut=st.none() | st.integers(1, 10**6),
       chunk_rows=st.sampled_from([1, 7, 30, 1000]), strict=st.booleans())
def test_threads_equal_one_thread_on_random_logs(sizes, kinds, flips, cut, chunk_rows, strict):
    """Random runs of plain, compressed and legacy batches, bytes flipped, the tail cut: decoded
    ahead on two threads or on the caller's, the same chunks, rows, return value or error."""
    data, off = b"", 0
    for i, n in enumerate(sizes):
        kind = kinds[i]
        b = BatchBuilder(base_offset=off, magic=1 if kind == "legacy" else 2,
                         compression=Compression.LZ4 if kind == "lz4" else Compression.NONE)
        for j in range(n):
            b.append(NOW + off + j, b"k%d" % j, b"v" * (j * 13 % 90),
                     headers=[("h", b"%d" % j)] if j % 3 == 0 and kind != "legacy" else ())
        data += b.build()
        off += n
    bad = bytearray(data)
    for f in flips:
        bad[f % len(bad)] ^= 0x10
    if cut is not None:
        bad = bad[:cut % len(bad)]
    data = bytes(bad)
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(A, "_decode_pool", _module_threads)
        assert outcome_of(data, True, chunk_rows, strict=strict) == outcome_of(data, False, chunk_rows, strict=strict)
