"""The planner's end of whole batches in the active segment (segment_plan._complete_end) reads only
batch headers; it must end where a scan of every byte ends, on every read-path case (torn, damaged,
bad magic) and from every batch boundary it may start at."""
from __future__ import annotations

import pytest

from kbatch.errors import KBatchError
from kbatch.log import segment_plan as SP
from kbatch.log import summary
from kbatch.record.file_records import open_records
from support import read_path_cases as C


def _full_end(seg: SP.Segment, lo: int, hi: int) -> int:
    """The walk before it read only headers: a scan of every byte."""
    records = open_records(seg.path, seg.size)
    try:
        gen = records.scan(lo)
        while True:
            try:
                next(gen)
            except StopIteration as stop:
                return min(int(stop.value), hi)
            except KBatchError:
                return hi
    finally:
        records.close()


@pytest.fixture(scope="module")
def parts(tmp_path_factory):
    return C.build_all(str(tmp_path_factory.mktemp("complete-end")))


@pytest.mark.parametrize("hop_min", [summary._HOP_MIN_BATCH, 0], ids=["as-shipped", "always-hop"])
def test_header_walk_ends_where_a_full_scan_ends(parts, monkeypatch, hop_min):
    monkeypatch.setattr(summary, "_HOP_MIN_BATCH", hop_min)
    checked = 0
    for case in sorted(parts):
        for tp in SP.list_partitions(parts[case]):
            seg = tp.segments[-1]
            starts = [0]
            records = open_records(seg.path, seg.size)
            try:
                for w in records.scan(0):
                    starts += [int(p) + int(s) for p, s in zip(w["position"], w["size"])]
            except KBatchError:
                pass
            finally:
                records.close()
            for lo in starts:
                for hi in (seg.size, max(lo, seg.size - 7)):
                    assert SP._complete_end(seg, lo, hi) == _full_end(seg, lo, hi), (case, lo, hi)
                    checked += 1
    assert checked > len(parts)
