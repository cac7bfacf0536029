"""What bounds the cold per-minute histogram of bench_summary.py's partition-day: the time to read
its bytes, to scan and CRC-check them, to walk the records' timestamps (the record_fields_v2
kernel), against decode_columns on one thread and on its threads, and the histogram itself,
side by side (R rounds, min and median). bench/notes/summary.md quotes a run.

    PYTHONPATH=src .venv/bin/python bench/summary_cold_bound.py ~/.cache/kbatch/bench-summary/day-2000000/day-0
"""
import mmap
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "src"))
import kbatch  # noqa: E402
from kbatch import _backend  # noqa: E402
from kbatch import _wire as W  # noqa: E402
from kbatch.columns.decode import decode_columns  # noqa: E402
from kbatch.log.summary import histogram  # noqa: E402

core = _backend.core
assert kbatch.BACKEND == "cython"
part = sys.argv[1]
files = sorted(os.path.join(part, f) for f in os.listdir(part) if f.endswith(".log"))

def read():
    out = []
    for p in files:
        with open(p, "rb") as f:
            out.append(f.read())
    return out
bufs = read()
total = sum(map(len, bufs))
def scan(verify):
    return [core.scan_batches(b, 0, len(b), verify) for b in bufs]
scans = scan(True)
def walk():
    n = 0
    for b, s in zip(bufs, scans):
        pos, size, cnt = s["position"], s["size"], s["record_count"]
        bo, ft, mt, at = s["base_offset"], s["first_timestamp"], s["max_timestamp"], s["attributes"]
        for j in range(len(pos)):
            p = int(pos[j])
            o, t, k = core.record_fields_v2(b, p + W.RECORDS_OFFSET, p + int(size[j]), int(cnt[j]), int(bo[j]), int(ft[j]), int(mt[j]), int(at[j]))
            n += len(t)
    return n
def dc(threads):
    return sum(decode_columns(b, use_threads=threads).num_rows for b in bufs)
def hist():
    log = kbatch.Log.open(part)
    try:
        return histogram(log, 60_000, cache=False)[0]
    finally:
        log.close()
reuse = bytearray(max(map(len, bufs)))
def read_reused():
    for p in files:
        with open(p, "rb", buffering=0) as f:
            f.readinto(memoryview(reuse)[:os.fstat(f.fileno()).st_size])
def mmap_crc():
    for p in files:
        with open(p, "rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as m:
            core.scan_batches(m, 0, len(m), True)
fns = {"read the files (new buffers)": read, "read into one reused buffer": read_reused,
       "mmap + scan + CRC (page cache, no copy)": mmap_crc, "scan + CRC (bytes in memory)": lambda: scan(True), "scan, no CRC": lambda: scan(False),
       "timestamps walk (record_fields_v2, bytes in memory)": walk,
       "decode_columns, 1 thread (bytes in memory)": lambda: dc(False), "decode_columns, threads": lambda: dc(True),
       "histogram cold (summary.histogram, cache=False)": hist}
R = int(os.environ.get("R", "5"))
times = {k: [] for k in fns}
for _ in range(R):
    for k, f in fns.items():
        t = time.perf_counter(); f(); times[k].append(time.perf_counter() - t)
print(f"{len(files)} segments, {total/2**20:.0f} MiB, {os.getloadavg()[0]:.1f} load")
for k, v in times.items():
    print(f"| {k} | {min(v)*1e3:.1f} ms (median {statistics.median(v)*1e3:.1f}) | {total/2**30/min(v):.2f} GiB/s |")
