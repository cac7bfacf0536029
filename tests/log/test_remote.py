"""Kafka data in object storage: the same answers from s3:// as from the local directory, with a real
S3 API (moto's server mode, the `s3` fixture in conftest.py) on loopback; ranged reads that stay near
the index sizes; the CLI on s3:// paths; tiered-storage layouts. The Spark source over s3:// runs in
tests/system/test_docs_remote.py (the docs' example, in a fresh process).
"""
from __future__ import annotations

import io
import json
import os
import shutil
import sys

import numpy as np
import pytest

import kbatch
from kbatch import _fs
from kbatch.errors import StorageError, UnsupportedLayoutError

pytest.importorskip("moto.server", reason="moto[server] (the S3 test server) is not installed: pip install 'moto[server]'")
pytest.importorskip("boto3", reason="boto3 (moto's client) is not installed")


NOW = 1_750_000_000_000


@pytest.fixture(scope="module")
def demo_root(tmp_path_factory):
    """The demo's sample topics (every codec, tombstones, headers, negative and future timestamps,
    a committed and an aborted transaction, magic 0/1), with the .txnindex a broker writes for the
    aborted one."""
    from kbatch.demo import generate
    from kbatch.log.index import AbortedTxn, TransactionIndex

    root = str(tmp_path_factory.mktemp("remote") / "logs")
    generate(root, records=3000, now_ms=NOW, segment_bytes=64 * 1024)
    pay = os.path.join(root, "payments-0")
    seg = kbatch.Log.open(pay).segments[0]
    TransactionIndex(seg.base_offset, path=os.path.join(pay, f"{seg.base_offset:020d}.txnindex")).append(
        AbortedTxn(4242, 31, 61, 62))
    for name in os.listdir(root):  # what a copy to object storage holds: no lock files, no demo marker
        p = os.path.join(root, name)
        if os.path.isdir(p):
            for junk in (".lock", ".kbatch-recovery-checkpoint"):
                if os.path.exists(os.path.join(p, junk)):
                    os.unlink(os.path.join(p, junk))
        elif name.startswith("."):
            os.unlink(p)
    return root


@pytest.fixture(scope="module")
def s3_root(s3, demo_root):
    s3.bucket("kafka")
    return s3.upload_tree(demo_root, "kafka", "logs")


def _targets(log) -> list:
    stamps = sorted({r.timestamp for b in log.batches() for r in b if r.timestamp is not None})
    picks = stamps[:: max(1, len(stamps) // 25)] + [stamps[0] - 1, stamps[-1], stamps[-1] + 1, -(2 ** 63), 2 ** 63 - 1]
    return picks


def _same_log(local, remote):
    assert [s.base_offset for s in remote.segments] == [s.base_offset for s in local.segments]
    assert [s.size for s in remote.segments] == [s.size for s in local.segments]
    assert (remote.beginning_offset(), remote.end_offset()) == (local.beginning_offset(), local.end_offset())
    targets = _targets(local)
    assert remote.offsets_for_times(targets) == local.offsets_for_times(targets)
    arr = np.array(targets, dtype=np.int64)
    for a, b in zip(remote.offsets_for_times(arr), local.offsets_for_times(arr)):
        assert np.array_equal(a, b)
    for spec in (kbatch.EARLIEST, kbatch.LATEST, kbatch.MAX_TIMESTAMP):
        assert remote.offset_for(spec) == local.offset_for(spec)
    assert [bytes(b.raw) for b in remote.batches()] == [bytes(b.raw) for b in local.batches()]
    assert remote.problems == local.problems == []


def test_log_open_on_s3_answers_as_the_local_directory(s3_root, demo_root):
    for name in sorted(os.listdir(demo_root)):
        local = kbatch.Log.open(os.path.join(demo_root, name))
        remote = kbatch.Log.open(f"{s3_root}/{name}")
        try:
            assert (remote.topic, remote.partition) == (local.topic, local.partition)
            _same_log(local, remote)
        finally:
            local.close()
            remote.close()


def test_remote_logs_are_read_only_and_credentials_stay_out_of_uris(s3_root):
    with pytest.raises(StorageError, match="read-only"):
        kbatch.Log.open(f"{s3_root}/orders-0", kbatch.LogConfig(), writable=True)
    with pytest.raises(UnsupportedLayoutError, match="credentials in a URI are refused"):
        kbatch.Log.open("s3://AKIAEXAMPLE:secret@kafka/logs/orders-0")
    with pytest.raises(kbatch.UnknownTopicOrPartitionError):
        kbatch.Log.open(f"{s3_root}/no-such-0")


def test_offsets_for_times_over_a_remote_log_dir(s3_root, demo_root):
    targets = {("orders-0", 0): NOW - 3_600_000, ("orders-1", 0): kbatch.EARLIEST, ("payments-0", 0): NOW,
               ("nope", 3): NOW}
    got = kbatch.offsets_for_times({("orders", 0): NOW - 3_600_000, ("payments", 0): kbatch.LATEST,
                                    ("nope", 3): NOW}, s3_root)
    want = kbatch.offsets_for_times({("orders", 0): NOW - 3_600_000, ("payments", 0): kbatch.LATEST,
                                     ("nope", 3): NOW}, demo_root)
    assert got[("orders", 0)] == want[("orders", 0)] and got[("payments", 0)] == want[("payments", 0)]
    assert isinstance(got[("nope", 3)], kbatch.UnknownTopicOrPartitionError)
    assert targets  # (the dict form with topic-partition tuples is what offsets_for_times takes)


def test_iter_batches_over_a_remote_path_and_a_file_object(s3_root, demo_root):
    seg = "00000000000000000000.log"
    local = [bytes(b.raw) for b in kbatch.iter_batches(os.path.join(demo_root, "orders-0", seg))]
    assert local and [bytes(b.raw) for b in kbatch.iter_batches(f"{s3_root}/orders-0/{seg}")] == local
    with open(os.path.join(demo_root, "orders-0", seg), "rb") as f:
        assert [bytes(b.raw) for b in kbatch.iter_batches(f)] == local


# ------------------------------------------------------------------------------------ bytes per lookup
@pytest.fixture(scope="module")
def big_segment(tmp_path_factory, s3):
    """One 24 MiB segment (4 KiB batches, broker index interval 4096) on disk and on S3."""
    d = tmp_path_factory.mktemp("big") / "clicks-0"
    d.mkdir()
    parts, off, ts = [], 0, NOW
    value = b"v" * 390
    while sum(len(p) for p in parts) < 24 << 20:
        b = kbatch.BatchBuilder(base_offset=off)
        for i in range(10):
            b.append(ts, b"user-%d" % ((off + i) % 5000), value)
            ts += 7
        parts.append(b.build())
        off += 10
    (d / "00000000000000000000.log").write_bytes(b"".join(parts))
    kbatch.rebuild_indexes(str(d))
    os.unlink(d / ".lock")
    s3.bucket("big")
    return str(d), s3.upload_tree(str(d), "big", "logs/clicks-0"), NOW, ts


def test_a_time_lookup_on_a_large_remote_segment_reads_near_the_index_sizes(s3, big_segment):
    local_dir, uri, t0, t1 = big_segment
    seg_size = os.path.getsize(os.path.join(local_dir, "00000000000000000000.log"))
    index_bytes = sum(os.path.getsize(os.path.join(local_dir, "00000000000000000000" + s))
                      for s in (".index", ".timeindex"))
    local = kbatch.Log.open(local_dir)
    rng = np.random.default_rng(3)
    for target in [t0 + 1, t1 - 10, *rng.integers(t0, t1, 3).tolist()]:
        before = _fs.io_stats()
        with s3.counting() as served:
            remote = kbatch.Log.open(uri)
            hit = remote.offset_for(int(target))
            remote.close()
        after = _fs.io_stats()
        asked = after["bytes"] - before["bytes"]
        got = sum(n for method, path, rng_, n in served if method == "GET" and "list-type" not in path)
        assert hit == local.offset_for(int(target))
        assert asked == got  # kbatch's count is what the server sent
        # the two index files, the batch at the index entry and the tail after the last entry
        assert asked <= index_bytes + 3 * _fs.MIN_REQUEST, (asked, index_bytes, seg_size)
        assert asked < seg_size / 50
        assert after["requests"] - before["requests"] <= 5
    local.close()


def test_the_spark_source_plans_slices_that_read_ranges_not_objects(s3, big_segment):
    pytest.importorskip("pyspark.sql.datasource", reason="kbatch.spark needs the spark extra (pyspark >= 4.1)")
    from kbatch.log import segment_plan as _plan

    _local_dir, uri, t0, t1 = big_segment
    tps = _plan.list_partitions(uri.rsplit("/", 1)[0])
    assert [(tp.topic, tp.partition) for tp in tps] == [("clicks", 0)]
    seg = tps[0].segments[0]
    start = _plan.offset_for_time(tps[0], (t0 + t1) // 2)[0]
    slices = _plan.plan_partition(tps[0], start, start + 100, 64 << 20)
    assert len(slices) == 1 and slices[0].end - slices[0].start < 64 * 1024
    before = _fs.io_stats()
    data = _plan.read_range(slices[0].path, slices[0].start, slices[0].end, seg.size)
    assert _fs.io_stats()["bytes"] - before["bytes"] == len(data) == slices[0].end - slices[0].start


# ------------------------------------------------------------------------------------ the CLI on s3://
def _cli(args):
    from kbatch.cli import main

    out, err = io.StringIO(), io.StringIO()
    old = sys.stdout, sys.stderr
    sys.stdout, sys.stderr = out, err
    try:
        code = main(args)
    finally:
        sys.stdout, sys.stderr = old
    return code, out.getvalue(), err.getvalue()


def _cat(args):
    from kbatch.cli.cat import cmd_cat

    out, err = io.BytesIO(), io.StringIO()
    code = cmd_cat(*args[:1], out=out, err=err, **args[1])
    return code, out.getvalue(), err.getvalue()


@pytest.mark.parametrize("command", [
    ["verify", "--json"], ["offsets", "--json", "--earliest", "--latest", "--max-timestamp", "--time", str(NOW - 3_600_000)],
    ["validate", "--json", "--now", str(NOW), "--after-max-ms", "3600000", "--before-max-ms", str(30 * 86_400_000)],
    ["stats", "--json"],
])
def test_cli_commands_on_s3_print_what_they_print_for_the_local_directory(command, s3_root, demo_root):
    lc, lout, lerr = _cli([command[0], demo_root, *command[1:]])
    rc, rout, rerr = _cli([command[0], s3_root, *command[1:]])
    assert rc == lc
    local = lout.replace(demo_root, "ROOT").replace('"layout": "broker", ', "")
    remote = rout.replace(s3_root, "ROOT").replace('"layout": "broker", ', "")
    assert remote == local and local.strip()


def test_cat_on_s3_prints_what_it_prints_locally(s3_root, demo_root):
    for kw in (dict(as_json=True), dict(fmt="%t %p %o %T %K %S %k %h\\n", offsets=["s@" + str(NOW - 3_600_000)]),
               dict(offsets=["-5"], key_delim=":"), dict(topic="payments", as_json=True)):
        lc, lout, _ = _cat([demo_root, kw])
        rc, rout, _ = _cat([s3_root, kw])
        assert (rc, rout) == (lc, lout) and lout


def test_dump_and_export_read_s3(s3_root, demo_root, tmp_path):
    seg = "orders-1/00000000000000000000"
    for suffix in (".log", ".index", ".timeindex"):
        lc, lout, _ = _cli(["dump", "--deep-iteration", os.path.join(demo_root, seg + suffix)])
        rc, rout, _ = _cli(["dump", "--deep-iteration", f"{s3_root}/{seg}{suffix}"])
        assert rc == lc == 0
        assert rout.replace(s3_root, "ROOT") == lout.replace(demo_root, "ROOT")
    import pyarrow.parquet as pq

    assert _cli(["export", f"{s3_root}/orders-2", "--to", str(tmp_path / "r.parquet"), "-q"])[0] == 0
    assert _cli(["export", os.path.join(demo_root, "orders-2"), "--to", str(tmp_path / "l.parquet"), "-q"])[0] == 0
    assert pq.read_table(tmp_path / "r.parquet").equals(pq.read_table(tmp_path / "l.parquet"))
    code, _out, err = _cli(["reindex", f"{s3_root}/orders-2"])
    assert code == 2 and "read-only" in err


# ------------------------------------------------------------------------------------ tiered layouts
from support.tiered import _uuid, make_aiven, make_local_tiered  # noqa: E402

@pytest.mark.parametrize("maker", [make_local_tiered, make_aiven])
def test_tiered_storage_layouts_answer_as_the_broker_directory(maker, demo_root, tmp_path, s3):
    root = str(tmp_path / "tiered")
    for name, topic in (("orders-1", "orders"), ("payments-0", "payments")):
        part = int(name.rsplit("-", 1)[1])
        d = maker(os.path.join(demo_root, name), root, topic, part)
        local, tiered = kbatch.Log.open(os.path.join(demo_root, name)), kbatch.Log.open(d)
        assert (tiered.topic, tiered.partition) == (topic, part)
        assert tiered.layout != "broker"
        _same_log(local, tiered)
        assert [t for s in tiered.segments for t in s.txn_index] == [t for s in local.segments for t in s.txn_index]
        with pytest.raises(StorageError, match="read-only"):
            kbatch.Log.open(d, kbatch.LogConfig(), writable=True)
    # the same copy in object storage, found from its root by the CLI
    bucket = s3.bucket(f"tiered-{maker.__name__.replace('_', '-')}")
    uri = s3.upload_tree(root, bucket, "rsm")
    assert _cat([uri, dict(as_json=True)])[1] == _cat([root, dict(as_json=True)])[1]
    code, out, _ = _cli(["verify", uri])
    assert code == 0 and "2 partition(s)" in out


def test_transformed_and_incomplete_tiered_copies_are_refused_or_named(demo_root, tmp_path):
    src = os.path.join(demo_root, "payments-0")
    for extra, why in (({"compression": True}, "compressed chunks"),
                       ({"encryption": {"dataKey": "k:AAAA", "aad": "AAAA"}}, "encrypted")):
        d = make_aiven(src, str(tmp_path / why.split()[0]), "payments", 0, **extra)
        with pytest.raises(UnsupportedLayoutError, match=why):
            kbatch.Log.open(d)
        code, _out, err = _cli(["cat", d])
        assert code == 2 and why in err
    d = make_local_tiered(os.path.join(demo_root, "orders-0"), str(tmp_path / "cut"), "orders", 0)
    last = max((n for n in os.listdir(d) if n.endswith(".log")), key=lambda n: int(n.split("-")[0]))
    os.unlink(os.path.join(d, last[:-4] + ".timeindex"))   # an upload cut short
    log = kbatch.Log.open(d)
    assert any("incomplete tiered copy" in p and "left out" in p for p in log.problems)
    code, _out, err = _cli(["cat", d, "-q"])
    assert code == 1 and "incomplete tiered copy" in err
    for cmd in (["verify"], ["validate"], ["stats"], ["offsets", "--latest"], ["export", "--to",
                                                                              str(tmp_path / "x.parquet")]):
        code, out, err = _cli([cmd[0], d, *cmd[1:]])
        assert code == 1 and "incomplete tiered copy" in out + err, cmd  # nothing left out is called fine
    d = make_local_tiered(os.path.join(demo_root, "orders-0"), str(tmp_path / "dup"), "orders", 0)
    first = min((n for n in os.listdir(d) if n.endswith(".log")), key=lambda n: int(n.split("-")[0]))
    stem = first[:-4]
    for suffix in (".log", ".index", ".timeindex"):  # a second complete copy of the same start offset
        shutil.copy(os.path.join(d, stem + suffix), os.path.join(d, stem.split("-")[0] + "-" + _uuid(99) + suffix))
    with pytest.raises(UnsupportedLayoutError, match="two copies of the segment"):
        kbatch.Log.open(d)


def test_fsspec_filesystems_work_where_pyarrow_has_none(demo_root):
    fsspec = pytest.importorskip("fsspec", reason="fsspec is not installed")
    mem = fsspec.filesystem("memory")
    for n in os.listdir(os.path.join(demo_root, "orders-2")):
        mem.pipe(f"/kb/logs/orders-2/{n}", open(os.path.join(demo_root, "orders-2", n), "rb").read())
    local, remote = kbatch.Log.open(os.path.join(demo_root, "orders-2")), kbatch.Log.open("memory://kb/logs/orders-2")
    _same_log(local, remote)


def test_a_header_read_and_the_first_window_cost_one_request():
    fsspec = pytest.importorskip("fsspec", reason="fsspec is not installed")
    fsspec.filesystem("memory").pipe("/kb/blocks.bin", bytes(range(256)) * 1000)
    f = _fs.RemoteFile("memory://kb/blocks.bin")
    assert f.pread(61, 1000) == (bytes(range(256)) * 5)[1000:1061]
    assert f.pread(16 * 1024, 1000) == (bytes(range(256)) * 1000)[1000:1000 + 16 * 1024]
    assert (f.requests, f.bytes_requested) == (1, _fs.MIN_REQUEST)
    assert len(f.pread(100_000, 100)) == 100_000 and f.requests == 2
    with pytest.raises(kbatch.FileChangedError):
        _fs.FileObjectSource(io.BytesIO(b"x" * 100)).pread(10, 95)


# ------------------------------------------------------------------------------------ PartitionFiles
def _files_of(pf):
    """(base offset, the .log's name, whether it has a .txnindex) per segment of a PartitionFiles."""
    return [(f.base_offset, _fs.basename(f.path(".log")), f.has(".txnindex")) for f in pf.segments]


@pytest.mark.parametrize("maker", [None, make_local_tiered, make_aiven])
def test_partition_files_name_the_segments_log_open_reads(maker, demo_root, s3_root, tmp_path, s3):
    """One answer to "which files make up a partition" (kbatch.log.partition_files), for a broker
    directory, Kafka's and Aiven's tiered layouts, on local disk and in object storage: the
    segments Log.open reads, with their topic, partition and layout; find_partition_files finds
    the same partitions as the layout's own walk."""
    from kbatch.log.layout import BROKER, find_partitions
    from kbatch.log.partition_files import PartitionFiles, find_partition_files

    broker = os.path.join(demo_root, "payments-0")
    if maker is None:
        local, remote = broker, f"{s3_root}/payments-0"
    else:
        root = str(tmp_path / "tiered")
        local = maker(broker, root, "payments", 0)
        bucket = s3.bucket(f"pf-{maker.__name__.replace('_', '-')}")
        remote = s3.upload_tree(root, bucket, "rsm") + "/" + os.path.relpath(local, root)
    want = [(seg.base_offset, seg.size) for seg in kbatch.Log.open(broker).segments]
    for where in (local, remote):
        pf = PartitionFiles.of(where)
        assert (pf.topic, pf.partition) == ("payments", 0)
        assert (pf.layout == BROKER) == (maker is None)
        assert pf.is_local_broker == (maker is None and where == local)
        assert pf.base_offsets == [b for b, _ in want]
        assert pf.problems == []
        log = kbatch.Log.open(where)
        try:
            assert [(s.base_offset, s.size) for s in log.segments] == want
            assert [s.files.path(".log") for s in log.segments] == pf.log_paths()
        finally:
            log.close()
        # the aborted transaction's .txnindex (Aiven keeps it in the segment's .indexes object)
        assert _files_of(pf)[0][2] and not any(has for _b, _n, has in _files_of(pf)[1:])
    found = find_partition_files(demo_root)
    assert [(p.topic, p.partition, p.path) for p in found] == \
        [(p.topic, p.partition, p.path) for p in find_partitions(demo_root)]
    assert all(p.segments for p in found)


def test_partition_files_of_a_local_broker_directory_lists_broker_names_only(tmp_path):
    """A local broker directory's segments are its `<20 digits>.log` names (kbatch.log.files'
    rule): checkpoints, snapshots and leftovers of interrupted writes are not segments; the
    listing is taken again on relist (a retention race while opening)."""
    from kbatch.log.partition_files import PartitionFiles

    log = kbatch.Log.create(tmp_path / "t-3", kbatch.LogConfig(segment_bytes=200))
    for i in range(6):
        log.append(kbatch.build_batch([(NOW + i, b"k", b"v" * 50)]), now_ms=NOW)
    bases = [s.base_offset for s in log.segments]
    log.close()
    d = str(tmp_path / "t-3")
    for junk in (f"{bases[-1]:020d}.log.deleted", f"{bases[0]:020d}.snapshot", "leader-epoch-checkpoint"):
        open(os.path.join(d, junk), "wb").close()
    pf = PartitionFiles.of(tmp_path / "t-3")
    assert (pf.topic, pf.partition, pf.is_local_broker) == ("t", 3, True)
    assert pf.base_offsets == bases and len(bases) > 2
    assert pf.snapshot(bases[0]) == os.path.join(d, f"{bases[0]:020d}.snapshot")
    os.unlink(os.path.join(d, f"{bases[0]:020d}.log"))
    assert pf.base_offsets == bases and pf.relist().base_offsets == bases[1:]
