"""kbatch.read_topic: a topic directory (several partitions) into one Arrow table, the rows a Kafka
consumer reads (the read path), with offset and time bounds across segments."""
import pyarrow as pa
import pytest

import kbatch
from kbatch.columns.decode import timestamps_ms
from support import partitions as P


def _rows(t: pa.Table) -> list[tuple[int, int]]:
    return list(zip(t.column("partition").to_pylist(), t.column("offset").to_pylist()))


def test_several_partitions_into_one_table_as_the_read_path_reads_them(tmp_path):
    a = P.transactional(str(tmp_path / "t-0"), txn_index=False)
    b = P.plain(str(tmp_path / "t-1"))
    t = kbatch.read_topic(tmp_path)
    assert t.schema.names == ["key", "value", "topic", "partition", "offset", "timestamp", "timestampType", "headers"]
    assert _rows(t) == [(0, o) for o in a.uncommitted] + [(1, o) for o in b.uncommitted]
    t = kbatch.read_topic(tmp_path, isolation="read_committed")
    assert _rows(t) == [(0, o) for o in a.committed] + [(1, o) for o in b.uncommitted]
    for part in (0, 1):  # the same records as the read path, column by column
        log = kbatch.Log.open(tmp_path / f"t-{part}")
        want = [(r.offset, bytes(r.value) if r.value is not None else None)
                for _b, r in log.read(isolation=1).records()]
        log.close()
        got = kbatch.read_topic(tmp_path, partitions=[part], isolation="read_committed")
        assert list(zip(got.column("offset").to_pylist(), got.column("value").to_pylist())) == want


def test_offset_and_time_bounds_cross_segments(tmp_path):
    b = P.plain(str(tmp_path / "t-0"))
    offs = b.uncommitted
    lo, hi = offs[len(offs) // 4], offs[3 * len(offs) // 4]
    t = kbatch.read_topic(tmp_path, from_offset=lo, until_offset=hi)
    assert t.column("offset").to_pylist() == [o for o in offs if lo <= o < hi]
    log = kbatch.Log.open(tmp_path / "t-0")
    segs = [s.base_offset for s in log.segments]
    all_rows = kbatch.read_topic(tmp_path)
    ts = dict(zip(all_rows.column("offset").to_pylist(), timestamps_ms(all_rows.column("timestamp")).tolist()))
    t_from, t_until = ts[lo], ts[hi]
    want_from = log.offsets_for_times(t_from).offset
    want_until = log.offsets_for_times(t_until).offset
    log.close()
    assert len(segs) > 2  # the range crosses segments
    t = kbatch.read_topic(tmp_path, from_time=t_from, until_time=t_until)
    assert t.column("offset").to_pylist() == [o for o in offs if want_from <= o < want_until]


def test_a_torn_middle_segment_is_named_not_skipped(tmp_path):
    b = P.plain(str(tmp_path / "t-0"))
    target, lost, nxt = P.tear_middle_segment(b.path)
    with pytest.raises(kbatch.KBatchError, match="could not be read"):
        kbatch.read_topic(tmp_path)
    with pytest.raises(ValueError):
        kbatch.read_topic(tmp_path, isolation="read_comitted")
