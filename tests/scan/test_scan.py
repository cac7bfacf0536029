"""kbatch.scan (issue 41): the streaming reader gives the read path's rows (kbatch.log.fetch.read_log,
over tests/support/read_path_cases.py's matrix of transactional and damaged partitions, both
isolation levels, strict and skipping, in one range a partition or cut into many), bounds by
offset and time (KIP-79 through the index), projection that never builds what is not asked for
(nor gives a value to its format), a row limit, typed values, s3:// and tiered layouts, and a
memory bound on a topic larger than the budget (in a subprocess, by its peak RSS)."""
from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest

import kbatch
from kbatch.log.fetch import UnreadableDataError
from support import partitions as P
from support import read_path_cases as C

pa = pytest.importorskip("pyarrow")

CASES = sorted(C.CASES)
LEVELS = sorted(C.ISOLATION)


@pytest.fixture(scope="module")
def parts(tmp_path_factory):
    """The read-path matrix's partitions (a conftest here would shadow tests/conftest.py's helpers,
    which other folders import as `conftest`)."""
    return C.build_all(str(tmp_path_factory.mktemp("scan-read-path")))


def _named(r) -> str:
    return f"{r.path}: {r.size} bytes from byte {r.position} could not be read"


def rows_of(batches) -> list:
    out = []
    for rb in batches:
        d = rb.to_pydict()
        ts = rb.column(rb.schema.get_field_index("timestamp")).cast(pa.int64()).to_pylist()
        out += [(o, k, v, None if t is None else t // 1000) for o, k, v, t in zip(d["offset"], d["key"], d["value"], ts)]
    return out


@pytest.mark.parametrize("skip, range_bytes", [(False, 1 << 30), (False, 300), (True, 300)],
                         ids=["strict-one-range", "strict-many-ranges", "skip"])
@pytest.mark.parametrize("isolation", LEVELS)
def test_scan_rows_are_the_read_paths(parts, isolation, skip, range_bytes):
    for case in CASES:
        want, stopped, _met = C.expected(parts[case], C.ISOLATION[isolation], skip)
        got: list = []
        with kbatch.scan(parts[case], isolation=isolation, skip_unreadable=skip, range_bytes=range_bytes) as s:
            if range_bytes == 300 and case == "txn-open":
                # a skipping read is one range a partition: where it goes on after damage depends on its start
                assert len(s.ranges) == 1 if skip else len(s.ranges) > 1, "the planner cut the partition"
            if stopped is None:
                got = rows_of(s.to_reader())
                assert got == want, case
                continue
            with pytest.raises(UnreadableDataError) as ei:
                for rb in s:
                    got += rows_of([rb])
            assert got == want[:len(got)], case  # the rows before the damage, as the read path gives them
            assert _named(stopped) in str(ei.value), case
            if range_bytes > 1 << 20:
                assert got == want and ei.value.range == stopped, case


def test_offset_time_and_per_partition_bounds(tmp_path):
    b = P.plain(str(tmp_path / "t-0"))
    c = P.plain(str(tmp_path / "t-1"))
    offs = b.uncommitted
    lo, hi = offs[len(offs) // 4], offs[3 * len(offs) // 4]
    with kbatch.scan(tmp_path, from_offset=lo, until_offset=hi) as s:
        t = s.to_table()
        assert [(p.partition, p.start_offset, p.end_offset) for p in s.partitions] == [(0, lo, hi), (1, lo, hi)]
    assert t.column("offset").to_pylist() == [o for o in offs if lo <= o < hi] + [o for o in c.uncommitted
                                                                                 if lo <= o < hi]
    log = kbatch.Log.open(b.path)
    try:
        ts = {r.offset: r.timestamp for _b, r in log.read().records()}
        t_from, t_until = ts[lo], ts[hi]
        want_from, want_until = log.offsets_for_times(t_from).offset, log.offsets_for_times(t_until).offset
    finally:
        log.close()
    import datetime as dt

    for a, z in ((t_from, t_until), (dt.datetime.fromtimestamp(t_from / 1000, dt.timezone.utc),
                                     dt.datetime.fromtimestamp(t_until / 1000, dt.timezone.utc).replace(tzinfo=None)
                                     .replace(tzinfo=dt.timezone.utc))):
        with kbatch.scan(tmp_path, partitions=[0], from_time=a, until_time=z) as s:
            assert s.to_table().column("offset").to_pylist() == [o for o in offs if want_from <= o < want_until]
            full = kbatch.scan(tmp_path, partitions=[0])
            full.to_table()
            assert 0 < s.stats.bytes_read < full.stats.bytes_read  # the index skipped the rest
            full.close()
    with kbatch.scan(tmp_path, from_offset={"t": {1: hi}}, until_offset={"t": {0: lo}}) as s:
        t = s.to_table()
    assert t.column("partition").to_pylist() == [0] * lo + [1] * (len(c.uncommitted) - hi)


def test_projection_builds_only_what_is_asked_and_never_decodes_values(tmp_path):
    P.transactional(str(tmp_path / "t-0"))

    class NoValues:
        """A value format that fails if a value is ever given to it."""

        def decode_column(self, *a, **k):
            raise AssertionError("a key-only scan decoded a value")

    with kbatch.scan(tmp_path, columns=["key"], value_schema=NoValues(), isolation="read_committed") as s:
        t = s.to_table()
        assert t.schema.names == ["key"] and t.num_rows > 0
        assert set(s.stats.columns_built) == {"key", "offset"}  # offsets: the read path drops aborted rows by them
        assert s.stats.columns_built["key"] == s.stats.record_batches
    with kbatch.scan(tmp_path, isolation="read_committed") as s:
        full = s.to_table()
        assert set(s.stats.columns_built) == set(full.schema.names)
    assert t.column("key").to_pylist() == full.column("key").to_pylist()
    with kbatch.scan(tmp_path, columns=["value", "offset"]) as s:
        assert s.schema.names == ["value", "offset"] and s.to_table().schema.names == ["value", "offset"]
    with pytest.raises(ValueError, match="columns"):
        kbatch.scan(tmp_path, columns=["nope"])
    with pytest.raises(ValueError, match="columns"):
        kbatch.scan(tmp_path, columns=["headers"], include_headers=False)
    with pytest.raises(ValueError, match="isolation"):
        kbatch.scan(tmp_path, isolation="read_comitted")
    with pytest.raises(ValueError, match="max_bytes_in_flight"):
        kbatch.scan(tmp_path, max_bytes_in_flight=1 << 20)


def test_limit_and_fresh_readers(tmp_path):
    b = P.plain(str(tmp_path / "t-0"))
    with kbatch.scan(tmp_path, limit=7, range_bytes=200) as s:
        assert s.to_table().column("offset").to_pylist() == b.uncommitted[:7]
        assert s.to_table().num_rows == 7  # each read is a fresh one
        assert s.stats.ranges_read <= 2 * 2  # it stopped after the ranges holding the first rows
    with kbatch.scan(tmp_path, limit=0) as s:
        assert s.to_table().num_rows == 0


def test_typed_values_equal_decode_columns(tmp_path):
    pytest.importorskip("fastavro")
    from kbatch.values import Avro, open_schemas
    from support.schemas import ORDER_V1, SchemasTopic, avro_value

    st = SchemasTopic(str(tmp_path / "sr" / "_schemas-0"))
    st.register("orders-value", 1, 1, ORDER_V1)
    st.close()
    for p in (0, 1):
        log = kbatch.Log.create(str(tmp_path / "logs" / f"orders-{p}"))
        for i in range(3):
            bb = kbatch.BatchBuilder()
            for j in range(4):
                bb.append(1_700_000_000_000 + i * 10 + j, b"k", avro_value(1, ORDER_V1, {"id": i * 4 + j, "item": "x"}))
            log.append(bb.build(), now_ms=1_700_000_000_000)
        log.close()
    fmt = Avro(open_schemas(str(tmp_path / "sr" / "_schemas-0")))
    with kbatch.scan(tmp_path / "logs", value_schema=fmt, columns=["partition", "offset", "value"]) as s:
        assert pa.types.is_struct(s.schema.field("value").type)
        t = s.to_table()
    segs = b"".join(open(os.path.join(tmp_path / "logs" / "orders-0", n), "rb").read()
                    for n in sorted(os.listdir(tmp_path / "logs" / "orders-0")) if n.endswith(".log"))
    want = kbatch.decode_columns(segs, "orders", 0, value_schema=fmt)
    assert t.column("value").to_pylist()[:12] == want.column("value").to_pylist()
    assert [v["id"] for v in t.column("value").to_pylist()] == list(range(12)) * 2


def test_s3_and_tiered_layouts_read_as_the_local_directory(tmp_path, s3):
    from support import s3server
    from support.tiered import make_aiven, make_local_tiered

    b = P.transactional(str(tmp_path / "local" / "t-0"), open_txn=False)
    want = kbatch.scan(tmp_path / "local", isolation="read_committed").to_table()
    assert want.column("offset").to_pylist() == b.committed
    tiered = make_local_tiered(b.path, str(tmp_path / "lts"), "t", 0)
    aiven = make_aiven(b.path, str(tmp_path / "aiven"), "t", 0)
    for root in (tiered, aiven):
        with kbatch.scan(root, isolation="read_committed", range_bytes=300) as s:
            assert len(s.ranges) > 1
            got = s.to_table()
            assert got.column("offset").to_pylist() == b.committed and got.column("value").equals(want.column("value"))
    s3.bucket("scan")
    uri = s3.upload_tree(str(tmp_path / "local"), "scan", "logs")
    with s3server.environment(s3.env()):
        with kbatch.scan(uri, isolation="read_committed", columns=["offset", "value"], range_bytes=300) as s:
            got = s.to_table()
    assert got.column("offset").to_pylist() == b.committed and got.column("value").equals(want.column("value"))


_MEMORY = textwrap.dedent("""
    import os, sys
    import kbatch
    root, budget = sys.argv[1], int(sys.argv[2])
    def status(field):
        with open("/proc/self/status") as f:
            return next(int(line.split()[1]) << 10 for line in f if line.startswith(field + ":"))
    # warm up: the decode threads and their first buffers exist before the baseline
    with kbatch.scan(root, limit=10, max_bytes_in_flight=budget) as s:
        s.to_table()
    base = status("VmRSS")
    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")  # the peak RSS (VmHWM) starts again from here
    rows = 0
    with kbatch.scan(root, max_bytes_in_flight=budget) as s:
        for rb in s.to_reader():
            rows += rb.num_rows
        seen = s.stats.bytes_read
    print(rows, seen, max(0, status("VmHWM") - base))
""")


def test_memory_stays_bounded_on_a_topic_larger_than_the_budget(tmp_path):
    budget = 40 << 20  # the least budget: the tightest bound
    value = os.urandom(64 << 10)
    n = 0
    for p in range(2):
        log = kbatch.Log.create(str(tmp_path / f"big-{p}"), kbatch.LogConfig(segment_bytes=64 << 20))
        for i in range(64):  # 64 batches of 15 records of 64 KiB (under a broker's 1 MiB): 60 MiB a partition
            bb = kbatch.BatchBuilder()
            for j in range(15):
                bb.append(1_700_000_000_000 + i, str(j).encode(), value)
            log.append(bb.build(), now_ms=1_700_000_000_000)
            n += 15
        log.close()
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
    out = subprocess.run([sys.executable, "-c", _MEMORY, str(tmp_path), str(budget)], env=env, capture_output=True,
                         text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    rows, seen, grew = map(int, out.stdout.split())
    assert rows == n and seen > 2 * budget  # the topic is larger than the budget
    print(f"scan of {seen >> 20} MiB: peak RSS grew by {grew >> 20} MiB")
    assert grew < 2 * budget, f"peak RSS grew by {grew >> 20} MiB over a {budget >> 20} MiB budget"
