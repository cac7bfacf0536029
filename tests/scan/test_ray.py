"""kbatch.ray.read_kafka_segments (issue 41) on a local Ray cluster (one CPU, a small object store):
one read task per planned range (kbatch.log.segment_plan's cuts), rows equal to the read path's
under both isolation levels, read_kafka's bounds (an offset, {topic: {partition: offset}}, a
datetime), projection, and the read path's error from a damaged partition. One test: a Ray
start costs several seconds."""
from __future__ import annotations

import datetime as dt

import pytest

import kbatch
from support import partitions as P

pa = pytest.importorskip("pyarrow")
ray = pytest.importorskip("ray")
pytest.importorskip("ray.data")

from kbatch.ray import read_kafka_segments  # noqa: E402


def _table(ds) -> pa.Table:
    """The dataset's rows in (partition, offset) order (one execution)."""
    t = pa.concat_tables(ray.get(ds.to_arrow_refs()))
    return t.sort_by([("partition", "ascending"), ("offset", "ascending")])


def test_read_kafka_segments_on_a_local_cluster(tmp_path):
    a = P.transactional(str(tmp_path / "t-0"))
    b = P.plain(str(tmp_path / "t-1"))
    bad = P.plain(str(tmp_path / "bad-0"))
    P.tear_middle_segment(bad.path)
    ray.init(num_cpus=1, include_dashboard=False, object_store_memory=80 << 20, log_to_driver=False,
             configure_logging=False)
    try:
        ray.data.DataContext.get_current().enable_progress_bars = False
        for isolation, a_rows in (("read_uncommitted", a.uncommitted), ("read_committed", a.committed)):
            ds = read_kafka_segments(tmp_path, "t", isolation=isolation, range_bytes=400)
            with kbatch.scan(tmp_path, topics=["t"], isolation=isolation, range_bytes=400) as src:
                assert len(src.ranges) > 2  # as many read tasks
                want = src.to_table()
            got = _table(ds)
            assert got.schema == want.schema
            assert got.column("offset").to_pylist() == a_rows + b.uncommitted
            assert got.equals(want)
        log = kbatch.Log.open(b.path)
        end = dt.datetime.fromtimestamp(next(r.timestamp for _b, r in log.read(180).records()) / 1000, dt.timezone.utc)
        log.close()
        ds = read_kafka_segments(tmp_path, ["t"], start_offset={"t": {1: 150, 0: "earliest"}}, end_offset=end,
                                 columns=["partition", "offset"])
        with kbatch.scan(tmp_path, topics=["t"], from_offset={"t": {1: 150}}, until_time=end,
                         columns=["partition", "offset"]) as src:
            want = src.to_table()
        assert want.filter(pa.compute.equal(want["partition"], 1))["offset"].to_pylist() == list(range(150, 180))
        assert _table(ds).equals(want)
        with pytest.raises(Exception, match="could not be read"):
            read_kafka_segments(tmp_path, "bad").take_all()
    finally:
        ray.shutdown()
