"""The record layer's doors for other packages: HeaderScan (a header scan that ends cleanly and says
where it stopped), iter_headers, FileRecords.headers, batch_at and crc_error_at. Every test runs on
both backends."""
import pytest

import kbatch
from kbatch import _wire as W
from kbatch.errors import CrcMismatchError, KBatchError, StorageError
from kbatch.record import file_records
from kbatch.record.batch import HeaderScan, scan_headers
from kbatch.record.file_records import FileRecords, batch_at, crc_error_at, iter_headers, scan_buffer


def _batches(n: int, base: int = 0) -> bytes:
    out = b""
    for i in range(n):
        b = kbatch.BatchBuilder(base_offset=base + i)
        b.append(1_000 + i, b"k%d" % i, b"v" * 50)
        out += b.build()
    return out


def _bad_magic(data: bytes) -> bytes:
    """`data` with a header whose magic is 7 after it (the kernel rejects the header)."""
    bad = bytearray(_batches(1, 99))
    bad[W.MAGIC_OFFSET] = 7
    return data + bytes(bad)


def _positions(scan: HeaderScan) -> list[int]:
    return [p for s in scan for p in s["position"].tolist()]


def test_a_clean_buffer_ends_complete_at_its_end(backend):
    data = _batches(5)
    scan = iter_headers(data)
    assert len(_positions(scan)) == 5
    assert (scan.end, scan.error, scan.complete) == (len(data), None, True)


def test_a_partial_last_batch_is_where_the_scan_ends(backend):
    data = _batches(3)
    scan = iter_headers(data + _batches(1, 3)[:30])
    assert len(_positions(scan)) == 3
    assert (scan.end, scan.complete) == (len(data), True)


def test_a_bad_header_raises_after_the_batches_before_it(backend):
    data = _batches(2)
    scan = iter_headers(_bad_magic(data))
    seen = []
    with pytest.raises(KBatchError) as e:
        for s in scan:
            seen += s["position"].tolist()
    assert len(seen) == 2 and scan.end == len(data) and e.value.position == len(data) + W.MAGIC_OFFSET


def test_stop_on_error_ends_the_loop_and_keeps_the_error(backend):
    data = _batches(2)
    scan = iter_headers(_bad_magic(data), stop_on_error=True)
    assert len(_positions(scan)) == 2
    assert isinstance(scan.error, KBatchError) and not scan.complete
    assert scan.end == len(data) and scan.error.position == len(data) + W.MAGIC_OFFSET
    assert list(scan) == []  # ended: a second loop sees nothing


def test_drain_is_one_call(backend):
    data = _batches(4)
    assert iter_headers(data + b"\0\0").drain() == len(data)
    assert HeaderScan(scan_headers(memoryview(data)), stop_on_error=True).drain() == len(data)
    assert HeaderScan(scan_buffer(data, 0, first_window=100)).drain() == len(data)


def test_its_stop_iteration_carries_the_end_as_the_scan_generators_do(backend):
    """A caller that still drains it by hand (or `yield from`s it) gets what the generator returned."""
    data = _batches(3)

    def follow(scan):
        end = yield from scan
        return end

    gen = follow(iter_headers(data + _batches(1, 3)[:30]))
    with pytest.raises(StopIteration) as stop:
        while True:
            next(gen)
    assert stop.value.value == len(data)


def test_the_start_is_the_end_when_nothing_is_read(backend):
    data = _batches(2)
    scan = HeaderScan(scan_buffer(_bad_magic(data), len(data)), len(data), stop_on_error=True)
    assert _positions(scan) == [] and scan.end == len(data) and scan.error is not None


def test_file_records_headers_say_where_they_stopped(backend, tmp_path):
    data = _batches(6)
    path = tmp_path / "00000000000000000000.log"
    path.write_bytes(_bad_magic(data))
    records = FileRecords(path)
    try:
        for reuse in (False, True):
            scan = records.headers(0, first_window=200, reuse=reuse, stop_on_error=True)
            assert len(_positions(scan)) == 6
            assert scan.end == len(data) and scan.error is not None and scan.error.position == len(data) + W.MAGIC_OFFSET
        end, error = records.scan_to_end()
        assert end == len(data) and isinstance(error, KBatchError) and error.position == len(data) + W.MAGIC_OFFSET
        with pytest.raises(KBatchError):  # without stop_on_error, the error is raised
            records.headers().drain()
    finally:
        records.close()


def test_a_storage_error_is_raised_even_with_stop_on_error(backend, tmp_path):
    path = tmp_path / "00000000000000000000.log"
    path.write_bytes(_batches(3))
    records = FileRecords(path)
    scan = records.headers(stop_on_error=True)
    records.close()  # the file is gone from under the scan
    with pytest.raises(StorageError):
        scan.drain()


def test_close_ends_a_scan_left_early_and_gives_its_buffers_back(backend, tmp_path):
    path = tmp_path / "00000000000000000000.log"
    path.write_bytes(_batches(50))
    records = FileRecords(path)
    try:
        file_records._SPARE_BUFFERS.clear()
        with records.headers(first_window=300, reuse=True) as scan:
            next(scan)
        assert scan.done and list(scan) == []
        assert file_records._SPARE_BUFFERS  # given back by the scan's reader
    finally:
        records.close()


def test_batch_at_and_crc_error_at(backend):
    data = bytearray(_batches(3))
    second = len(_batches(1))
    data[second + W.RECORD_BATCH_OVERHEAD + 3] ^= 0xFF  # inside the second batch's records: its CRC fails
    s = next(iter_headers(bytes(data), verify_crc=True))
    assert [batch_at(s, i).base_offset for i in range(3)] == [0, 1, 2]
    assert s["crc_valid"].tolist() == [True, False, True]
    e = crc_error_at(s, 1)
    assert isinstance(e, CrcMismatchError) and e.position == second and e.base_offset == 1
