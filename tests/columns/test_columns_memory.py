"""Memory bounds of decode_columns / iter_record_batches (issue 15 item 10), on both backends:
a lying recordCount does not size allocations, and chunks are bounded by decompressed bytes."""
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import kbatch
from kbatch import _backend
from kbatch.columns import decode as A
from kbatch import BatchBuilder, Compression

SRC = str(__import__("support.paths").paths.SRC)


def run_child(code: str, backend: str) -> str:
    env = dict(os.environ, KBATCH_BACKEND=backend, PYTHONPATH=SRC + os.pathsep + os.environ.get("PYTHONPATH", ""))
    out = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], env=env, capture_output=True, text=True,
                         timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    return out.stdout


@pytest.mark.parametrize("backend_name", ["python", "cython"])
def test_huge_record_count_does_not_preallocate(backend_name):
    """A batch claiming recordCount = 2**31 - 1 in a few bytes: decode_columns (and the offsets-by-time
    walk) size their arrays by what the bytes can hold (>= 7 bytes a record), so under an address-space
    limit 3 GiB above the process they report the lie instead of running out of memory allocating
    16 GiB up front."""
    out = run_child('''
        import resource, struct
        import numpy as np
        import kbatch
        from kbatch import _backend
        b = kbatch.BatchBuilder(timestamp_extended=False)
        b.append(1, b"k", b"v")
        data = bytearray(b.build())
        struct.pack_into(">i", data, 57, 2**31 - 1)                       # recordsCount
        struct.pack_into(">I", data, 17, kbatch.crc32c(bytes(data[21:])))  # a valid CRC: only the count lies
        kbatch.decode_columns(b.build())                                   # warm up the pools
        vm = int([l for l in open("/proc/self/status") if l.startswith("VmSize")][0].split()[1]) * 1024
        resource.setrlimit(resource.RLIMIT_AS, (vm + (3 << 30), resource.RLIM_INFINITY))
        try:
            kbatch.decode_columns(bytes(data))
        except kbatch.InvalidRecordError as e:
            print("decode", type(e).__name__, e.position == len(data), "premature EOF" in str(e))
        core = _backend.core
        args = (bytes(data), [61], [len(data)], [2**31 - 1], [0], [1], [1], [0])
        for name in ("decode_columns_v2", "find_timestamps_v2"):
            try:
                if name == "decode_columns_v2":
                    core.decode_columns_v2(*args)
                else:
                    core.find_timestamps_v2(*args, [0], [0], 0)
            except kbatch.InvalidRecordError as e:
                print(name, type(e).__name__, e.position == len(data))
        print(_backend.BACKEND)
    ''', backend_name).split("\n")
    assert out[0] == "decode InvalidRecordError True True"  # at the end of the records: premature EOF
    assert out[1:4] == ["decode_columns_v2 InvalidRecordError True", "find_timestamps_v2 InvalidRecordError True",
                        backend_name]


def _big_value_batches(n_batches: int, value_bytes: int, codec) -> bytes:
    out = b""
    for i in range(n_batches):
        b = BatchBuilder(base_offset=i, compression=codec)
        b.append(1_700_000_000_000 + i, b"k%d" % i, bytes(value_bytes))
        out += b.build()
    return out


def test_compressed_chunks_are_bounded_by_decompressed_bytes(backend, monkeypatch):
    """Six 4 MiB values, lz4-compressed to a few KiB each: with chunk_bytes of 1 MiB each kernel call
    gets one batch's decompressed records, not all six (they were joined in one buffer before)."""
    data = _big_value_batches(6, 4 << 20, Compression.LZ4)
    assert len(data) < 200_000
    seen = []
    real = backend.decode_columns_v2

    def spy(buf, starts, ends, *rest, **kw):
        seen.append(int(np.sum(np.asarray(ends) - np.asarray(starts))))
        return real(buf, starts, ends, *rest, **kw)

    monkeypatch.setattr(_backend.core, "decode_columns_v2", spy)
    t = kbatch.decode_columns(data, chunk_bytes=1 << 20)
    assert t.num_rows == 6 and [len(v) for v in t.column("value").to_pylist()] == [4 << 20] * 6
    assert len(seen) == 6 and max(seen) < (4 << 20) + 100
    seen.clear()
    list(A.iter_record_batches(data))  # the default chunk_bytes (16 MiB): four values, then two
    assert len(seen) == 2 and max(seen) < (16 << 20) + 200


def test_plain_chunks_are_bounded_by_bytes(backend):
    data = _big_value_batches(8, 100_000, Compression.NONE)
    sizes = [rb.num_rows for rb in A.iter_record_batches(data, chunk_bytes=250_000)]
    assert sizes == [2, 2, 2, 2]  # a third batch would pass 250,000 bytes
    assert [rb.num_rows for rb in A.iter_record_batches(data, chunk_bytes=1)] == [1] * 8  # never split a batch


@pytest.mark.parametrize("backend_name", ["python", "cython"])
def test_big_values_peak_memory(backend_name):
    """Six 24 MiB values (lz4): decode_columns' peak memory stays under what it returns plus six
    batches' worth (measured: output + 2 to 4 batches; before, all six were decompressed, joined and
    over-allocated at once: output + 12 to 15 batches, 3.6 GB for six 200 MiB values)."""
    out = run_child('''
        import resource
        import pyarrow as pa
        import kbatch
        data = b""
        for i in range(6):
            b = kbatch.BatchBuilder(base_offset=i, compression=kbatch.Compression.LZ4)
            b.append(1_700_000_000_000, b"k", bytes(24 << 20))
            data += b.build()
        kbatch.decode_columns(b"")
        base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
        t = kbatch.decode_columns(data)
        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
        print(peak - base, t.column("value").nbytes)
    ''', backend_name)
    grew, output = map(int, out.split())
    assert output >= 6 * (24 << 20)
    assert grew < output + 6 * (24 << 20), (grew, output)
