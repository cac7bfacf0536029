"""A user's script: must pass `mypy --strict` against kbatch's annotations and stubs."""
from __future__ import annotations

import tempfile
import time

import numpy as np

import kbatch


def build(now: int) -> bytes:
    b = kbatch.BatchBuilder(magic=2, compression=kbatch.Compression.ZSTD,
                            timestamp_type=kbatch.TimestampType.CREATE_TIME)
    b.append(now, b"key", b"value", headers=[("trace", b"1"), ("empty", None)])
    b.append(None, None, bytearray(b"no timestamp, no key"))
    b.append(now + 1, memoryview(b"gone"), None, tombstone=True)
    offset: int = b.append(-86_400_000, b"1969", b"historical")
    assert offset == 3
    return b.build() + kbatch.build_batch([(now, b"k", b"v"), (now, b"k2", b"v2", [("h", b"x")])], base_offset=4)


def read(data: bytes) -> list[tuple[int, int | None, bytes | None]]:
    out = []
    for batch in kbatch.iter_batches(data, verify_crc=True):
        codec: kbatch.Compression = batch.compression
        ts_type: kbatch.TimestampType = batch.timestamp_type
        assert codec in kbatch.Compression and ts_type in kbatch.TimestampType
        last: int = batch.last_offset
        assert last >= batch.base_offset
        for rec in batch:
            key = None if rec.key is None else bytes(rec.key)
            ts = rec.timestamp
            if ts is not None:
                ts += 1
            headers = [(k, None if v is None else v.tobytes()) for k, v in rec.headers]
            assert all(isinstance(k, str) for k, _ in headers)
            out.append((rec.offset, ts, key))
    return out


def validate(data: bytes, now: int) -> int:
    v = kbatch.LogValidator(before_max_ms=7 * 86_400_000, after_max_ms=3_600_000)
    try:
        v.validate(data, now_ms=now)
    except kbatch.InvalidTimestampError as e:
        code: int | None = e.error_code
        assert code == 32
    good = kbatch.build_batch([(now, b"k", b"v")])
    out, info = v.validate_and_assign(good, next_offset=42, now_ms=now)
    assert info.first_offset == 42
    assert isinstance(out, (bytes, bytearray, memoryview))
    return kbatch.crc32c(data) ^ kbatch.crc32c(b"more", 1)


def storage(data: bytes, now: int) -> None:
    with tempfile.TemporaryDirectory() as d:
        log = kbatch.Log.create(f"{d}/t-0", kbatch.LogConfig(segment_bytes=1 << 20, retention_ms=86_400_000))
        log.append(data, now_ms=now)
        log.close()
        log = kbatch.Log.open(f"{d}/t-0")
        hit = log.offset_for(kbatch.EARLIEST)
        if hit is not None:
            first: int = hit.offset
            assert first == 0
        hits = log.offsets_for_times([now, kbatch.LATEST])
        at_now = hits[0]
        if at_now is not None:
            found: int = at_now.offset
            assert found >= 0
        offsets, timestamps = log.offsets_for_times(np.array([now, now + 1], dtype=np.int64))
        assert offsets.dtype == np.int64 and len(timestamps) == 2
        end: int = log.end_offset()
        assert end >= log.beginning_offset()
        stats = kbatch.compact(f"{d}/t-0", now_ms=now, delete_retention_ms=86_400_000)
        print(stats)


def main() -> None:
    now = int(time.time() * 1000)
    data = build(now)
    print(read(data), validate(data, now), kbatch.BACKEND, kbatch.__version__)
    storage(data, now)
    try:
        list(kbatch.iter_batches(data[:-1]))
    except kbatch.TruncatedDataError as e:
        pos: int | None = e.position
        print("truncated at", pos)


if __name__ == "__main__":
    main()
