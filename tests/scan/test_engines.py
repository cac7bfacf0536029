"""Polars and DuckDB over kbatch.scan (issue 41): each engine's rows equal the read path's
(kbatch.log.fetch.read_log over tests/support/read_path_cases.py's matrix, both isolation levels,
the read path's error where it stops), typed values, and what each pushes into the scan shows in
the scan's stats: Polars' projection (columns built), predicate (partitions and bytes read; an
upper time bound is not pushed, yet rows past it with older timestamps are still found) and
n_rows; DuckDB answers every query of a registered topic from a fresh reader. A missing engine is
a MissingDependencyError naming its extra."""
from __future__ import annotations

import datetime as dt
import sys

import pytest

import kbatch
from kbatch.log.fetch import UnreadableDataError
from support import partitions as P
from support import read_path_cases as C

pa = pytest.importorskip("pyarrow")
pl = pytest.importorskip("polars")
duckdb = pytest.importorskip("duckdb")

from kbatch.duckdb import register  # noqa: E402
from kbatch.polars import pushdown, scan_kafka  # noqa: E402

CASES = sorted(C.CASES)
LEVELS = sorted(C.ISOLATION)


@pytest.fixture(scope="module")
def parts(tmp_path_factory):
    """The read-path matrix's partitions (a conftest here would shadow tests/conftest.py's helpers,
    which other folders import as `conftest`)."""
    return C.build_all(str(tmp_path_factory.mktemp("engines-read-path")))


def _named(r) -> str:
    return f"{r.path}: {r.size} bytes from byte {r.position} could not be read"


def _ms(ts) -> int | None:
    return None if ts is None else int(ts.timestamp() * 1000)


@pytest.mark.parametrize("isolation", LEVELS)
def test_polars_and_duckdb_rows_are_the_read_paths(parts, isolation):
    for case in CASES:
        want, stopped, _met = C.expected(parts[case], C.ISOLATION[isolation], False)
        lf = scan_kafka(parts[case], isolation=isolation)
        query = "select \"offset\", key, value, timestamp from reader order by \"offset\""
        if stopped is not None:
            with pytest.raises(UnreadableDataError) as ei:
                lf.collect()
            assert ei.value.range == stopped, case
            reader = kbatch.scan(parts[case], isolation=isolation).to_reader(close=True)
            with pytest.raises(duckdb.Error, match="could not be read") as di:
                duckdb.sql(query).fetchall()
            assert _named(stopped) in str(di.value), case
            continue
        df = lf.select("offset", "key", "value", "timestamp").collect()
        got = [(o, k, v, _ms(t)) for o, k, v, t in df.iter_rows()]
        assert got == want, case
        reader = kbatch.scan(parts[case], isolation=isolation).to_reader(close=True)  # noqa: F841 (named in SQL)
        rows = duckdb.sql(query).fetchall()
        assert [(o, k, v, _ms(t)) for o, k, v, t in rows] == want, case


def _shuffled_times(path: str) -> list[tuple[int, int]]:
    """A partition whose timestamps do not rise with offsets: (offset, timestamp) of each record."""
    log = kbatch.Log.create(path)
    out = []
    times = [5_000, 1_000, 9_000, 2_000, 7_000, 3_000, 8_000, 4_000]  # a batch's; later batches may be older
    for i in range(24):
        t = times[i % 8] + (i // 8) * 10_000  # three rounds, each newer than the one before
        bb = kbatch.BatchBuilder()
        for j in range(4):
            bb.append(1_700_000_000_000 + t + j, f"k{j}".encode(), f"v{i}-{j}".encode())
        first = log.append(bb.build(), now_ms=1_700_000_010_000).first_offset
        out += [(first + j, 1_700_000_000_000 + t + j) for j in range(4)]
    log.close()
    return out


def test_polars_pushes_what_it_can_prove_and_the_rows_stay_polars(tmp_path):
    for p in range(3):
        _shuffled_times(str(tmp_path / f"t-{p}"))
    scans = []
    lf = scan_kafka(tmp_path, on_scan=scans.append)
    full = lf.collect()
    assert scans[-1].stats.rows == full.height == 3 * 96
    everything = scans[-1].stats.bytes_read
    t0 = dt.datetime.fromtimestamp((1_700_000_000_000 + 27_000) / 1000, dt.timezone.utc)
    t1 = dt.datetime.fromtimestamp((1_700_000_000_000 + 13_000) / 1000, dt.timezone.utc)
    queries = [
        (pl.col("offset") >= 40) & (pl.col("offset") < 60),
        pl.col("offset").is_between(10, 20),
        pl.col("partition") == 1,
        (pl.col("partition") > 0) & (pl.col("offset") <= 3),
        pl.col("timestamp") >= t0,                               # pushed: KIP-79's first offset at or after t0
        pl.col("timestamp") < t1,                                # not pushed: older records come after newer ones
        (pl.col("timestamp") >= t1) & (pl.col("timestamp") < t0) & (pl.col("key") == b"k1"),
        (pl.col("offset") > 5) | (pl.col("partition") == 2),     # an or: nothing proven, nothing pushed
    ]
    for q in queries:
        got = lf.filter(q).collect()
        assert got.equals(full.filter(q)), q
        assert scans[-1].stats.rows >= got.height
    lf.filter(pl.col("partition") == 1).collect()
    assert [p.partition for p in scans[-1].partitions] == [1] and scans[-1].stats.bytes_read * 3 == everything
    lf.filter((pl.col("offset") >= 40) & (pl.col("offset") < 60)).collect()
    assert {(p.start_offset, p.end_offset) for p in scans[-1].partitions} == {(40, 60)}
    assert scans[-1].stats.bytes_read < everything / 3
    lf.filter(pl.col("timestamp") >= t0).collect()
    assert everything / 2 > scans[-1].stats.bytes_read > 0  # the time index skipped the older part
    assert pushdown(pl.col("timestamp") < t1).time_lo_ms is None
    assert pushdown((pl.col("offset") > 5) | (pl.col("partition") == 2)).pushed == []


def test_polars_projection_and_n_rows(tmp_path):
    P.transactional(str(tmp_path / "t-0"))
    scans = []
    lf = scan_kafka(tmp_path, on_scan=scans.append, isolation="read_committed")
    keys = lf.select("key").collect()
    assert keys.columns == ["key"] and set(scans[-1].stats.columns_built) == {"key", "offset"}
    want = kbatch.read_topic(tmp_path, isolation="read_committed")
    assert keys["key"].to_list() == want.column("key").to_pylist()
    assert lf.select(pl.len()).collect().item() == want.num_rows  # no column asked for: rows still counted
    head = lf.head(3).collect()
    assert head["offset"].to_list() == want.column("offset").to_pylist()[:3]
    assert scans[-1].limit == 3
    first = lf.filter(pl.col("partition") == 0).head(2).collect()  # n_rows after the predicate
    assert first["offset"].to_list() == want.column("offset").to_pylist()[:2]


def test_duckdb_registered_topic_answers_every_query_afresh(tmp_path):
    a = P.transactional(str(tmp_path / "t-0"), open_txn=False)
    b = P.plain(str(tmp_path / "t-1"))
    con = duckdb.connect()
    topic = register(con, "t", tmp_path, isolation="read_committed")
    assert con.sql("select count(*) from t").fetchall() == [(len(a.committed) + len(b.uncommitted),)]
    assert con.sql("select partition, max(\"offset\") from t group by all order by 1").fetchall() == [
        (0, a.committed[-1]), (1, b.uncommitted[-1])]
    assert con.sql("select count(*) from t where partition = 0").fetchall() == [(len(a.committed),)]
    assert topic.streams >= 3
    narrow = register(con, "keys", tmp_path, columns=["key", "partition"], from_offset=10)
    assert con.sql("select count(*) from keys").fetchall() == con.sql("select count(*) from keys").fetchall() == [
        (len([o for o in a.uncommitted if o >= 10]) + len([o for o in b.uncommitted if o >= 10]),)]
    assert set(narrow.scan.stats.columns_built) == {"key", "partition", "offset"}
    topic.close()
    con.close()


def test_typed_values_in_polars_and_duckdb(tmp_path):
    pytest.importorskip("fastavro")
    from kbatch.values import Avro, open_schemas
    from support.schemas import ORDER_V1, SchemasTopic, avro_value

    st = SchemasTopic(str(tmp_path / "sr" / "_schemas-0"))
    st.register("orders-value", 1, 1, ORDER_V1)
    st.close()
    log = kbatch.Log.create(str(tmp_path / "logs" / "orders-0"))
    bb = kbatch.BatchBuilder()
    for i in range(10):
        bb.append(1_700_000_000_000 + i, b"k", avro_value(1, ORDER_V1, {"id": i, "item": f"i{i}"}))
    log.append(bb.build(), now_ms=1_700_000_000_000)
    log.close()
    fmt = Avro(open_schemas(str(tmp_path / "sr" / "_schemas-0")))
    df = scan_kafka(tmp_path / "logs", value_schema=fmt).filter(pl.col("offset") >= 4).select(
        pl.col("value").struct.field("id")).collect()
    assert df["id"].to_list() == list(range(4, 10))
    con = duckdb.connect()
    register(con, "orders", tmp_path / "logs", value_schema=fmt)
    assert con.sql("select sum(value.id), max(value.item) from orders").fetchall() == [(45, "i9")]


@pytest.mark.parametrize("module, call, extra", [
    ("polars", lambda: scan_kafka("."), "polars"),
    ("duckdb", lambda: register(None, "t", "."), "duckdb"),
    ("ray", lambda: __import__("kbatch.ray", fromlist=["x"]).read_kafka_segments("."), "ray"),
])
def test_a_missing_engine_names_its_extra(monkeypatch, module, call, extra):
    monkeypatch.setitem(sys.modules, module, None)
    if module == "ray":
        monkeypatch.setitem(sys.modules, "ray.data", None)
    with pytest.raises(kbatch.MissingDependencyError, match=f"'{extra}' extra"):
        call()


def _age(root) -> None:
    """Every file and directory under root last changed an hour ago."""
    import os
    import time

    old = time.time() - 3600
    for d, _dirs, files in os.walk(root):
        for f in files:
            os.utime(os.path.join(d, f), (old, old))
        os.utime(d, (old, old))


def test_polars_reuses_its_last_plan_only_over_unchanged_files(tmp_path):
    """A second collect asking the same of unchanged files reads the last plan again (its stats its
    own); an append, a new partition, or files changed while planning make it plan afresh."""
    for p in range(2):
        _shuffled_times(str(tmp_path / f"t-{p}"))
    scans = []
    lf = scan_kafka(tmp_path, on_scan=scans.append)
    q = lf.filter(pl.col("offset") >= 10).select("partition", "offset", "timestamp")
    fresh = q.collect()   # the files changed within the second before: not kept
    assert q.collect().equals(fresh) and scans[1] is not scans[0]
    _age(tmp_path)
    first = q.collect()
    assert q.collect().equals(first) and scans[-1] is scans[-2]
    assert scans[-1].stats.rows == first.height   # this collect's own
    assert lf.select("key").collect().height == 2 * 96 and scans[-1] is not scans[-2]   # another query
    assert q.collect().equals(first) and scans[-1] is not scans[-3]   # only the last plan is kept
    _age(tmp_path)
    q.collect()
    log = kbatch.Log.open(str(tmp_path / "t-1"), writable=True)
    bb = kbatch.BatchBuilder()
    bb.append(1_700_000_100_000, b"new", b"v")
    log.append(bb.build(), now_ms=1_700_000_100_000)
    log.close()
    grown = q.collect()
    assert grown.height == first.height + 1 and scans[-1] is not scans[-2]
    assert grown.equals(scan_kafka(tmp_path).filter(pl.col("offset") >= 10)
                        .select("partition", "offset", "timestamp").collect())
    _age(tmp_path)
    q.collect()
    _shuffled_times(str(tmp_path / "t-2"))   # a new partition under the root
    assert q.collect().height == grown.height + 96 - 10
