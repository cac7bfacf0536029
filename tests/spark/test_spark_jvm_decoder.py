"""The JVM reader's decoder against kbatch.decode_columns, without Spark.

java/kafka-segments has a small main (kbatch.spark.DecodeMain) that decodes files with the same
code the Spark reader runs and prints every column of every row read before the first error, and
that error's kbatch class, byte position and base offset. Fed the corner-case segment, random
segments and damaged copies (flipped bits, cuts, records damaged under a valid CRC, unknown
codecs, wrong counts and sizes), it must agree with kbatch's reader exactly: the same rows, and
the same error at the same byte. KBATCH_JVM_DIFF_FILES=N runs N random files per mode (default 120).
"""
import json
import os
import random
import shutil
import subprocess

import pyarrow as pa
import pytest

import kbatch
from kbatch.columns.decode import iter_record_batches

from support import segment_corpus

pytestmark = pytest.mark.spark

N = int(os.environ.get("KBATCH_JVM_DIFF_FILES", "120"))


def _jar():
    pytest.importorskip("pyspark")
    import kbatch.spark

    jar = kbatch.spark.jar_path()
    if jar is None:
        pytest.skip("this kbatch build has no JVM reader jar (no javac or pyspark at build time)")
    if shutil.which("java") is None:
        pytest.skip("no java on PATH")
    return jar


def java_decode(paths, verify_crc=True, strict=True, window_bytes=None, cut_after=None) -> dict:
    """DecodeMain over the files, read through windows as the Spark reader reads every file
    (window_bytes: their size instead of kbatch's 16 MiB)."""
    import pyspark

    jars = os.path.join(os.path.dirname(pyspark.__file__), "jars")
    args = ["java"] + ([f"-Dkbatch.spark.scanWindow={window_bytes}"] if window_bytes else [])
    args += ["-cp", f"{jars}/*{os.pathsep}{_jar()}", "kbatch.spark.DecodeMain"]
    args += ([] if verify_crc else ["--no-crc"]) + ([] if strict else ["--lenient"])
    args += [] if cut_after is None else [f"--cut-after={cut_after}"]
    args += list(paths)
    out = subprocess.run(args, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    res = {}
    for line in out.stdout.splitlines():
        r = json.loads(line)
        e = r.get("error")
        res[r["file"]] = (r["columns"], None if e is None else (e["class"], e["position"], e["baseOffset"]))
    return res


def python_decode(path, verify_crc=True, strict=True):
    """decode_columns' rows before the first error (as iter_record_batches yields them), and the error."""
    data = open(path, "rb").read()
    batches, err = [], None
    try:
        for rb in iter_record_batches(data, include_headers=True, batch_fields=True, verify_crc=verify_crc,
                                      strict=strict):
            batches.append(rb)
    except kbatch.KBatchError as e:
        err = (type(e).__name__, e.position, e.base_offset)
    t = pa.Table.from_batches(batches, schema=kbatch.columns.decode.schema(True, True))

    def hx(v):
        return None if v is None else bytes(v).hex()

    cols = {"key": [hx(v) for v in t["key"].to_pylist()], "value": [hx(v) for v in t["value"].to_pylist()],
            "offset": t["offset"].to_pylist(), "timestamp": t["timestamp"].cast(pa.int64()).to_pylist(),
            "timestampType": t["timestampType"].to_pylist(),
            "headers": [None if h is None else [[d["key"].encode().hex(), hx(d["value"])] for d in h]
                        for h in t["headers"].to_pylist()]}
    for n in ("isTombstone", "producerId", "producerEpoch", "baseSequence", "isTransactional", "isControl"):
        cols[n] = t[n].to_pylist()
    return cols, err


def _agree(paths, verify_crc=True, strict=True, **how):
    got = java_decode(paths, verify_crc, strict, **how)
    errors = 0
    for p in paths:
        cols, err = python_decode(p, verify_crc, strict)
        jcols, jerr = got[p]
        assert jerr == err, (p, jerr, err)
        for name, values in cols.items():
            assert jcols[name] == values, (p, name)
        errors += err is not None
    return errors


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    _jar()
    d = tmp_path_factory.mktemp("jvm-decoder")
    rng = random.Random(20260417)
    files = []
    (d / "corner.log").write_bytes(segment_corpus.corner_segment())
    files.append(str(d / "corner.log"))
    for i in range(N):
        data = segment_corpus.random_segment(rng)
        for _ in range(rng.choice((0, 1, 1, 2))):
            if data:
                data = segment_corpus.damaged(data, rng)
        (d / f"r{i}.log").write_bytes(data)
        files.append(str(d / f"r{i}.log"))
    return files


def test_corner_segment_equals_decode_columns(corpus):
    """Every codec and framing (raw snappy, lz4 with checksums, gzip members, zstd frames), magic
    0/1/2, headers with invalid UTF-8 keys, tombstones, extended and out-of-range timestamps,
    LogAppendTime, empty and transactional batches: the same rows, no error."""
    assert _agree(corpus[:1]) == 0
    cols, _ = python_decode(corpus[0])
    assert len(cols["offset"]) > 90


@pytest.mark.parametrize("verify_crc,strict,window_bytes", [(True, True, None), (False, True, 4096),
                                                            (True, False, 65536), (False, False, None)])
def test_random_and_damaged_segments(corpus, verify_crc, strict, window_bytes):
    errors = _agree(corpus, verify_crc, strict, window_bytes=window_bytes)
    assert 0 < errors < len(corpus)  # the damage is found, and clean files read clean


def test_read_windows_smaller_than_a_segment(tmp_path):
    """Reading through windows far smaller than the file (as from HDFS or S3: 4 KiB here instead
    of 16 MiB) gives the same rows: batches are never split, and rows referring to one window are
    handed out before the next is read."""
    _jar()
    rng = random.Random(99)
    files = []
    for i in range(3):
        p = tmp_path / f"w{i}.log"
        p.write_bytes(b"".join(segment_corpus.random_segment(rng, batches=40) for _ in range(3)))
        files.append(str(p))
    assert _agree(files, window_bytes=4096) == 0


def test_a_file_cut_while_it_is_read_is_an_error_not_a_crash(tmp_path):
    """The reader reads every file through windows, never through a memory map: a mapped segment
    cut by another process while it was read faulted inside the JDK's CRC-32C stub, and the JVM
    died with SIGBUS (an hs_err file, the Spark driver or executor gone). Cut after the first 4 KiB
    window: that window's rows, then a FileChangedError at the byte the next read starts from."""
    _jar()
    data = b"".join(kbatch.build_batch([(1000 + i, b"k%d" % i, b"v" * 300) for i in range(5)], base_offset=5 * n)
                    for n in range(40))
    path = tmp_path / "00000000000000000000.log"
    path.write_bytes(data)
    ends = [b.position + b.size_in_bytes for b in kbatch.iter_batches(data)]
    first_window_end = max(e for e in ends if e <= 4096)
    (tmp_path / "prefix.log").write_bytes(data[:first_window_end])
    want, _ = python_decode(str(tmp_path / "prefix.log"))

    cols, err = java_decode([str(path)], window_bytes=4096, cut_after=100)[str(path)]
    assert os.path.getsize(path) == 100
    assert err == ("FileChangedError", first_window_end, None)
    assert cols == want and len(cols["offset"]) > 0


def test_real_broker_segments(tmp_path):
    """Every segment of tests/data/brokers (Kafka 2.1 to 3.7.0, compacted consumer offsets, KRaft
    metadata with its control batches), through whole-file and 64 KiB read windows: decode_columns' rows."""
    _jar()
    from log.test_broker_data import BROKER_DIRS, broker_copy

    files = [str(p) for name in BROKER_DIRS for p in sorted(broker_copy(name, tmp_path).rglob("*.log"))]
    assert len(files) >= 10
    assert _agree(files) == 0
    assert _agree(files, window_bytes=65536) == 0
