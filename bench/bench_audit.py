"""`kbatch audit` and `kbatch report` over 10 M records (issue 39), run with pytest-benchmark:

    PYTHONPATH=src .venv/bin/python -m pytest bench/bench_audit.py --benchmark-only

The log: KBATCH_BENCH_AUDIT_RECORDS (default 10 M) records in 4 partitions of 2 segments each,
uncompressed v2 batches of 1000 records (10-byte keys, 64-byte values), each partition written by
an idempotent producer (sequences in order), timestamps a second apart per batch, with the
.index/.timeindex a broker writes; about 0.9 GB of .log bytes, read from the page cache.

Group "audit": the whole audit (header walk through the read path with every CRC checked,
producer/transaction/timestamp/storage checks, index entries against the log; the summary cache
off) against the bounds of the same bytes: the CRC-32C of every byte (kbatch.crc32c, the
hardware instruction) and reading the files (pread into one buffer). `--trust-headers` is the
audit without CRCs. Group "report": the audit plus the HTML page (plotly). Each benchmark checks
its result before it is timed: no finding on this clean log, the page written with its 7 charts.
"""
import os
import struct

import pytest

import kbatch
from kbatch import _wire as W

RECORDS = int(os.environ.get("KBATCH_BENCH_AUDIT_RECORDS", "10000000"))
PARTITIONS = 4
PER_BATCH = 1000
NOW = 1_714_554_000_000


def _batch_template() -> bytearray:
    b = kbatch.BatchBuilder(timestamp_extended=False, producer_id=7, producer_epoch=0, base_sequence=0)
    for i in range(PER_BATCH):
        b.append(NOW + i, b"key-%06d" % i, bytes(64))
    return bytearray(b.build())


def write_log(root: str) -> tuple[int, int]:
    """The log directory; returns (records, .log bytes)."""
    tpl = _batch_template()
    batches = max(1, RECORDS // PER_BATCH // PARTITIONS)
    total = 0
    for p in range(PARTITIONS):
        d = os.path.join(root, f"bench-{p}")
        os.makedirs(d)
        half = batches // 2 or batches
        for seg_start in sorted({0, half} - {batches}):
            seg_end = half if seg_start == 0 and half < batches else batches
            with open(os.path.join(d, f"{seg_start * PER_BATCH:020d}.log"), "wb") as f:
                for i in range(seg_start, seg_end):
                    struct.pack_into(">q", tpl, 0, i * PER_BATCH)
                    t = NOW + i * 1000
                    struct.pack_into(">qq", tpl, W.BASE_TIMESTAMP_OFFSET, t, t + PER_BATCH - 1)
                    struct.pack_into(">hi", tpl, W.PRODUCER_EPOCH_OFFSET, 0, i * PER_BATCH)
                    struct.pack_into(">I", tpl, W.CRC_OFFSET, kbatch.crc32c(memoryview(tpl)[W.ATTRIBUTES_OFFSET:]))
                    f.write(tpl)
                    total += len(tpl)
        kbatch.rebuild_indexes(d)
    return batches * PARTITIONS * PER_BATCH, total


@pytest.fixture(scope="module")
def logdir(tmp_path_factory):
    root = str(tmp_path_factory.mktemp("audit-bench"))
    records, size = write_log(root)
    return root, records, size


def _audit(root, trust=False):
    from kbatch.cli.audit import run_audit
    from kbatch.log.audit import AuditConfig

    return run_audit([root], AuditConfig(verify_crc=not trust, cache=False), quiet=True)


def _log_files(root):
    return [os.path.join(root, d, n) for d in sorted(os.listdir(root)) for n in sorted(os.listdir(os.path.join(root, d)))
            if n.endswith(".log")]


def _crc_bound(root):
    """CRC-32C of every byte, read in 16 MiB windows into one reused buffer."""
    crc = 0
    buf = bytearray(16 << 20)
    mv = memoryview(buf)
    for path in _log_files(root):
        with open(path, "rb", buffering=0) as f:
            while True:
                n = f.readinto(buf)
                if not n:
                    break
                crc = kbatch.crc32c(mv[:n], crc)
    return crc


def _read_bound(root):
    """Every byte read from the page cache in 16 MiB windows into one reused buffer."""
    n = 0
    buf = bytearray(16 << 20)
    for path in _log_files(root):
        with open(path, "rb", buffering=0) as f:
            while True:
                got = f.readinto(buf)
                if not got:
                    break
                n += got
    return n


AUDIT_IMPLS = ["kbatch audit", "kbatch audit --trust-headers", "crc32c of every byte (bound)",
               "read the bytes (bound)"]


@pytest.mark.benchmark(group="audit")
@pytest.mark.parametrize("impl", AUDIT_IMPLS)
def test_audit(benchmark, logdir, impl):
    root, records, size = logdir
    if impl.startswith("kbatch"):
        trust = "trust" in impl
        res = _audit(root, trust)
        assert res.findings == [], [f.text() for f in res.findings[:5]]
        assert sum(p.summary["records"] for p in res.partitions) == records
        fn = lambda: _audit(root, trust)  # noqa: E731
    elif impl.startswith("crc32c"):
        fn = lambda: _crc_bound(root)  # noqa: E731
    else:
        assert _read_bound(root) == size
        fn = lambda: _read_bound(root)  # noqa: E731
    benchmark.extra_info.update(records=records, bytes=size)
    benchmark.pedantic(fn, rounds=3, iterations=1, warmup_rounds=1)


@pytest.mark.benchmark(group="report")
@pytest.mark.parametrize("impl", ["kbatch report"])
def test_report(benchmark, logdir, tmp_path, impl):
    pytest.importorskip("plotly")
    from kbatch.cli.report import write_report
    from kbatch.log.audit import AuditConfig

    root, records, size = logdir
    out = tmp_path / "report.html"
    res = write_report([root], out, config=AuditConfig(cache=False))
    assert res.findings == [] and out.read_text().count("Plotly.newPlot(") == 7
    benchmark.extra_info.update(records=records, bytes=size)
    benchmark.pedantic(lambda: write_report([root], out, config=AuditConfig(cache=False)), rounds=3, iterations=1)
