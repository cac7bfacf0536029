"""Keys, values and header values of decoded records: zero-copy read-only views.

The compiled backend returns its ByteView, the pure one a memoryview; every test here runs on both
and asks the same of each, so code written against one runs on the other. Also: what a Record
holds and frees (it keeps its fields in C until they are asked for), and pickling records.
"""
import gc
import hashlib
import pickle
import struct
import sys
import zlib

import numpy as np
import pytest

import kbatch


def batch_bytes(records, **kw):
    b = kbatch.BatchBuilder(**kw)
    for r in records:
        b.append(*r)
    return b.build()


def one_record(data):
    (b,) = kbatch.iter_batches(data)
    (r,) = b
    return r


@pytest.fixture
def data():
    return bytearray(batch_bytes([(1, b"key", b"\x00\x01value\xff", [("h", b"hv"), ("n", None)])]))


def test_views_have_memoryviews_reading_api(backend, data):
    r = one_record(data)
    k, v, hv = r.key, r.value, r.headers[0][1]
    assert type(k) is type(v) is type(hv) is backend.ByteView
    assert r.headers[1] == ("n", None)
    raw = b"\x00\x01value\xff"
    assert len(v) == v.nbytes == len(raw) and v.readonly and v.format == "B" and v.itemsize == 1
    assert (v.ndim, v.shape, v.strides, v.c_contiguous) == (1, (len(raw),), (1,), True)
    assert v.obj is data
    assert (v[0], v[1], v[-1]) == (0, 1, 255)
    with pytest.raises(IndexError):
        v[len(raw)]
    assert v[2:7] == b"value" and bytes(v[2:7]) == b"value" and v[::-1] == raw[::-1]
    assert list(v) == list(raw) and v.tolist() == list(raw)
    assert bytes(v) == v.tobytes() == raw and v.hex() == raw.hex() and v.hex(":") == raw.hex(":")
    assert bytearray(v) == raw and b"<" + k + b">" == b"<key>"


def test_views_compare_and_hash_like_bytes(backend, data):
    r = one_record(data)
    k = r.key
    assert k == b"key" and b"key" == k and k == bytearray(b"key") and k == memoryview(b"key")
    assert memoryview(b"key") == k and k == r.key and k == one_record(bytes(data)).key
    assert k != b"kez" and k != b"ke" and not (k == b"keys") and k != "key" and k != 3
    assert (k == np.frombuffer(b"key", np.uint8)) is True or (k == np.frombuffer(b"key", np.uint8)).all()
    with pytest.raises(TypeError):
        hash(k)  # memoryview's rule: the input is a bytearray, which may change
    k = one_record(bytes(data)).key
    assert hash(k) == hash(b"key") and {b"key": 1}[k] == 1 and {k: 1}[b"key"] == 1
    with pytest.raises(TypeError):
        k < b"z"


def test_views_feed_every_buffer_api(backend, data):
    v = one_record(data).value
    raw = b"\x00\x01value\xff"
    assert hashlib.sha256(v).digest() == hashlib.sha256(raw).digest()
    assert zlib.crc32(v) == zlib.crc32(raw) and kbatch.crc32c(v) == kbatch.crc32c(raw)
    assert struct.unpack_from(">H", v, 0) == (1,)
    arr = np.frombuffer(v, dtype=np.uint8)
    assert arr.tolist() == list(raw) and not arr.flags.writeable
    assert bytes(memoryview(v)[2:7]) == b"value"


def test_views_are_read_only(backend, data):
    v = one_record(data).value
    with pytest.raises(TypeError):
        v[0] = 1
    with pytest.raises((TypeError, BufferError)):
        (np.ctypeslib.ctypes.c_char * len(v)).from_buffer(v)  # asks for a writable buffer
    assert memoryview(v).readonly


def test_views_have_no_api_memoryview_lacks(backend, data):
    v = one_record(data).value
    for name in ("decode", "startswith", "find"):
        with pytest.raises(AttributeError):
            getattr(v, name)
    with pytest.raises(TypeError):
        pickle.dumps(v)  # a view cannot leave its buffer: pickle the record, or bytes(v)


def test_views_see_the_input_and_keep_it_alive(backend, data):
    r = one_record(data)
    k, v = r.key, r.value
    data[bytes(data).index(b"value")] = ord("V")
    assert bytes(v) == b"\x00\x01Value\xff"
    with pytest.raises(BufferError):
        data.extend(b"x")  # exported while views exist
    del data
    gc.collect()
    assert (k, v[2:7]) == (b"key", b"Value")


def test_views_and_records_release_the_input(backend, data):
    r = one_record(data)
    k, hv = r.key, r.headers[0][1]
    del r
    with pytest.raises(BufferError):
        data.extend(b"x")
    del k, hv
    gc.collect()
    data.extend(b"x")  # every export released: nothing leaked a reference


@pytest.mark.parametrize("touch", ["nothing", "key", "value", "headers", "all"])
def test_records_free_what_they_hold(backend, touch):
    data = bytes(batch_bytes([(i, b"k%d" % i, b"v" * 50, [("h", b"x")]) for i in range(200)]))
    before = sys.getrefcount(data)
    recs = [r for b in kbatch.iter_batches(data) for r in b]
    for r in recs:
        if touch in ("key", "all"):
            r.key
        if touch in ("value", "all"):
            r.value
        if touch in ("headers", "all"):
            r.headers
    del recs, r
    gc.collect()
    assert sys.getrefcount(data) == before


def test_records_built_from_python_free_their_fields(backend):
    key, value, headers, ts = bytearray(b"k"), bytearray(b"v"), (("h", b"x"),), 10**20
    counts = [sys.getrefcount(o) for o in (key, value, headers, ts)]
    r = backend.Record(1, ts, kbatch.TimestampType.CREATE_TIME, key, value, headers, False, 0)
    assert (r.offset, r.timestamp, r.key, r.value, r.headers, r.is_tombstone, r.attributes) == (
        1, ts, key, value, headers, False, 0)
    assert r.key is key and r.headers is headers
    del r
    gc.collect()
    assert [sys.getrefcount(o) for o in (key, value, headers, ts)] == counts


def test_decoded_record_fields(backend):
    data = batch_bytes([(5, b"k", None, [("a", b"1")]), (None, None, b"v")], base_offset=7,
                       timestamp_extended=False)
    r0, r1 = list(next(kbatch.iter_batches(data)))
    assert (r0.offset, r0.timestamp, r0.timestamp_type, r0.key, r0.value, r0.is_tombstone) == (
        7, 5, kbatch.TimestampType.CREATE_TIME, b"k", None, True)
    assert type(r0.timestamp_type) is kbatch.TimestampType and r0.attributes == 0x20
    assert (r1.offset, r1.timestamp, r1.key, r1.value, r1.headers, r1.is_tombstone) == (
        8, None, None, b"v", (), False)
    assert type(r1.is_tombstone) is bool and type(r1.offset) is int
    assert r0.offset == r0.offset and r0.key is r0.key  # a view is made once, then kept


def test_log_append_time_records_take_the_batch_max_timestamp(backend):
    data = batch_bytes([(1, b"k", b"v"), (2, b"k", b"v")],
                       timestamp_type=kbatch.TimestampType.LOG_APPEND_TIME, log_append_time=99)
    recs = list(next(kbatch.iter_batches(data)))
    assert [(r.timestamp, r.timestamp_type) for r in recs] == [
        (99, kbatch.TimestampType.LOG_APPEND_TIME)] * 2


def test_records_pickle_with_bytes_keys_and_values(backend, data):
    r = one_record(data)
    back = pickle.loads(pickle.dumps(r))
    assert back == r and type(back) is type(r)
    assert type(back.key) is bytes and type(back.headers[0][1]) is bytes
    assert (back.offset, back.timestamp, back.timestamp_type) == (r.offset, r.timestamp, r.timestamp_type)


def test_legacy_keys_and_values_are_the_same_views(backend):
    data = batch_bytes([(1, b"key", b"value")], magic=1)
    r = one_record(data)
    assert type(r.key) is type(r.value) is backend.ByteView and (r.key, r.value) == (b"key", b"value")


def test_byte_view_kernel(backend):
    data = b"0123456789"
    v = backend.byte_view(data, 2, 5)
    assert type(v) is backend.ByteView and v == b"234" and v.obj is data
    assert backend.byte_view(bytearray(data), 0, 0) == b""
    for bad in ((-1, 3), (3, 2), (0, 11), (1.0, 2), (None, 2)):
        with pytest.raises(ValueError):
            backend.byte_view(data, *bad)


@pytest.mark.skipif(kbatch.BACKEND != "cython", reason="the compiled ByteView")
def test_byte_view_is_made_by_the_decoder_only():
    with pytest.raises(TypeError):
        kbatch.ByteView(b"x")
    r = one_record(batch_bytes([(1, b"key", b"v")]))
    assert repr(r.key) == "<kbatch.ByteView b'key'>"
