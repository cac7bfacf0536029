"""kbatch.log.fetch, the one read path, and the .txnindex it reads (issue 28 items 1, 3, 4):
.txnindex written by Log.append, by recovery and by rebuild_indexes, byte for byte Kafka's
layout; read_committed from .txnindex or from the control batches; the last stable offset;
unreadable bytes reported, never skipped; rebuild_indexes refusing a segment it cannot read."""
from __future__ import annotations

import os

import pytest

import kbatch
from support import partitions as P

def _fetch():
    from kbatch.log import fetch as f

    return f


def txnindex_files(path):
    return {int(n[:20]): open(os.path.join(path, n), "rb").read()
            for n in sorted(os.listdir(path)) if n.endswith(".txnindex")}


def offsets(result):
    return [r.offset for _b, r in result.records()]


@pytest.mark.parametrize("open_txn", [True, False])
def test_txnindex_after_append_equals_after_recovery_equals_after_reindex_and_kafkas_layout(tmp_path, open_txn):
    built = P.transactional(str(tmp_path / "t-0"), open_txn=open_txn)
    path = built.path
    # the hand-built AbortedTxn entries (kafka-format.md 5.5), in the segment of each ABORT marker
    assert len(built.txnindex) >= 1 and all(len(v) % 34 == 0 for v in built.txnindex.values())
    after_append = txnindex_files(path)
    assert after_append == built.txnindex
    # recovery: an unclean shutdown recovers every segment, and rebuilds their .txnindex
    for base in after_append:
        os.unlink(os.path.join(path, f"{base:020d}.txnindex"))
    os.unlink(os.path.join(path, ".kbatch-recovery-checkpoint"))
    kbatch.Log.open(path, kbatch.LogConfig(segment_bytes=600), writable=True).close()
    assert txnindex_files(path) == built.txnindex
    # reindex: from the .log files alone, a stale entry replaced too
    for base in after_append:
        os.unlink(os.path.join(path, f"{base:020d}.txnindex"))
    first = min(after_append)
    with open(os.path.join(path, f"{first:020d}.txnindex"), "wb") as f:
        f.write(P.aborted_txn_entry(99, 1, 2, 3))
    kbatch.rebuild_indexes(path)
    assert txnindex_files(path) == built.txnindex


def test_append_after_reopen_follows_a_transaction_open_across_segments(tmp_path):
    """The first offset of an aborted transaction comes from before the reopen and the roll."""
    path = str(tmp_path / "t-0")
    log = kbatch.Log.create(path, kbatch.LogConfig(segment_bytes=300), now_ms=P.NOW)
    log.append(P._data(P.PID_ABORT, 0, 2, True, "x"), now_ms=P.NOW, from_client=False)          # 0-1
    for k in range(4):
        log.append(P._data(-1, 2 + k, 1, False, "plain"), now_ms=P.NOW, from_client=False)      # 2-5
    log.close()
    log = kbatch.Log.open(path, kbatch.LogConfig(segment_bytes=300), writable=True)
    log.append(P._marker(P.PID_ABORT, False), now_ms=P.NOW, from_client=False)                  # 6
    seg = log.active_segment.base_offset
    log.close()
    assert seg > 0  # the marker is in a later segment than the transaction's data
    assert txnindex_files(path) == {seg: P.aborted_txn_entry(P.PID_ABORT, 0, 6, 7)}


def test_a_failed_append_takes_its_txnindex_entry_back(tmp_path, monkeypatch):
    path = str(tmp_path / "t-0")
    log = kbatch.Log.create(path, kbatch.LogConfig(), now_ms=P.NOW)
    log.append(P._data(P.PID_ABORT, 0, 2, True, "x"), now_ms=P.NOW, from_client=False)

    def boom(*a, **k):
        raise OSError(28, "No space left on device")
    monkeypatch.setattr(log, "_assign_epochs", boom)
    with pytest.raises(kbatch.KBatchError):
        log.append(P._marker(P.PID_ABORT, False), now_ms=P.NOW, from_client=False)
    assert txnindex_files(path) in ({}, {0: b""})
    monkeypatch.undo()
    log.append(P._marker(P.PID_ABORT, False), now_ms=P.NOW, from_client=False)
    log.close()
    assert txnindex_files(path) == {0: P.aborted_txn_entry(P.PID_ABORT, 0, 2, 3)}


@pytest.mark.parametrize("txn_index", [True, False])
def test_read_committed_with_and_without_txnindex(tmp_path, txn_index):
    built = P.transactional(str(tmp_path / "t-0"), txn_index=txn_index)
    F = _fetch()
    read_log, IsolationLevel = F.read_log, F.IsolationLevel
    log = kbatch.Log.open(built.path)
    try:
        assert offsets(read_log(log, 0)) == built.uncommitted
        rc = read_log(log, 0, isolation=IsolationLevel.READ_COMMITTED)
        assert offsets(rc) == built.committed
        assert rc.last_stable_offset == F.last_stable_offset(log) == 14  # the open transaction's first offset
        assert [(t.producer_id, t.first_offset) for t in rc.aborted] == [(P.PID_ABORT, 5)]
        # a start inside the aborted transaction still leaves it out
        assert offsets(read_log(log, 6, isolation=IsolationLevel.READ_COMMITTED)) == [7, 8, 12, 13]
        # control batches are in batches(), never in records()
        kinds = [(fb.batch.base_offset, fb.batch.is_control, fb.aborted) for fb in rc.batches()]
        assert (10, True, False) in kinds and (11, True, False) in kinds and (5, False, True) in kinds
    finally:
        log.close()


def test_read_path_names_a_torn_middle_segment(tmp_path):
    built = P.plain(str(tmp_path / "t-0"))
    target, lost, nxt = P.tear_middle_segment(built.path)
    F = _fetch()
    read_log, UnreadableDataError = F.read_log, F.UnreadableDataError
    log = kbatch.Log.open(built.path)
    try:
        # a start offset in the hole: not silently the next segment's first offset
        with pytest.raises(UnreadableDataError) as e:
            list(read_log(log, lost + 1).records())
        r = e.value.range
        assert (r.path, r.next_offset) == (target, nxt) and r.size > 0
        assert target in str(e.value) and f"..{nxt - 1}" in str(e.value)
        # from the start: every record before the hole, then the error
        got = []
        with pytest.raises(UnreadableDataError):
            for _b, rec in read_log(log, 0).records():
                got.append(rec.offset)
        assert got == list(range(lost))
        # skip_unreadable goes on after it, and says what it skipped
        res = read_log(log, 0, skip_unreadable=True)
        got = offsets(res)
        assert got == list(range(lost)) + list(range(nxt, built.uncommitted[-1] + 1))
        assert [u.path for u in res.unreadable] == [target]
    finally:
        log.close()


def test_a_partial_batch_at_the_end_of_the_active_segment_is_ignored(tmp_path):
    built = P.plain(str(tmp_path / "t-0"))
    last = P.segment_logs(built.path)[-1]
    rows = P.batch_positions(last)
    with open(last, "r+b") as f:
        f.truncate(rows[-1][0] + 30)  # the last batch torn: a write in progress, as Kafka sees it
    log = kbatch.Log.open(built.path)
    try:
        res = _fetch().read_log(log, 0)
        assert offsets(res) == list(range(rows[-1][1]))
        assert res.unreadable == [] and res.problems() == []
    finally:
        log.close()


def test_rebuild_indexes_refuses_a_bad_length_field_and_changes_nothing(tmp_path):
    built = P.plain(str(tmp_path / "t-0"))
    target, pos, _base = P.bad_length_field(built.path)
    before = P.snapshot(built.path)
    with pytest.raises(kbatch.KBatchError) as e:
        kbatch.rebuild_indexes(built.path)
    assert target in str(e.value) and e.value.position == pos
    assert P.snapshot(built.path) == before


def test_truncation_takes_txnindex_entries_and_the_open_transactions_back(tmp_path):
    path = str(tmp_path / "t-0")
    log = kbatch.Log.create(path, kbatch.LogConfig(), now_ms=P.NOW)
    a = lambda data: log.append(data, now_ms=P.NOW, from_client=False)  # noqa: E731
    a(P._data(P.PID_ABORT, 0, 2, True, "x"))   # 0-1
    a(P._marker(P.PID_ABORT, False))            # 2
    a(P._data(P.PID_LATE, 0, 1, True, "l"))    # 3
    a(P._marker(P.PID_LATE, False))             # 4
    assert txnindex_files(path) == {0: P.aborted_txn_entry(P.PID_ABORT, 0, 2, 3)
                                    + P.aborted_txn_entry(P.PID_LATE, 3, 4, 5)}
    log.truncate_to(4)                          # the second marker goes; PID_LATE's transaction is open again
    assert txnindex_files(path) == {0: P.aborted_txn_entry(P.PID_ABORT, 0, 2, 3)}
    a(P._data(P.PID_OPEN, 0, 1, True, "o"))    # 4
    a(P._marker(P.PID_LATE, False))             # 5: first offset 3, LSO 4 (PID_OPEN's)
    log.close()
    assert txnindex_files(path) == {0: P.aborted_txn_entry(P.PID_ABORT, 0, 2, 3)
                                    + P.aborted_txn_entry(P.PID_LATE, 3, 5, 4)}


def test_log_read_is_the_read_path(tmp_path):
    built = P.transactional(str(tmp_path / "t-0"), txn_index=False)
    log = kbatch.Log.open(built.path)
    try:
        assert [r.offset for _b, r in log.read().records()] == built.uncommitted
        assert [r.offset for _b, r in log.read(isolation=1).records()] == built.committed
        assert [r.offset for _b, r in log.read(3, 8, isolation=1).records()] == [3, 4, 7]
    finally:
        log.close()


def test_a_trimmed_log_starts_from_the_producer_snapshot_at_its_first_segment(tmp_path):
    """Retention removed the segment where two transactions began: the broker's producer snapshot
    at the new first segment names their first offsets (currentTxnFirstOffset), so a rebuild and
    verify give the broker's entries; without a snapshot verify checks only which markers are listed."""
    from kbatch.log.producer_state import ProducerStateEntry, write_snapshot

    built = P.transactional(str(tmp_path / "t-0"), open_txn=False)
    path = built.path
    bases = sorted(int(n[:20]) for n in os.listdir(path) if n.endswith(".log"))
    second = bases[1]
    assert 5 < second <= 10  # the segment of both markers; PID_ABORT began (at 5) before it
    for n in os.listdir(path):
        if n.startswith(f"{bases[0]:020d}."):
            os.unlink(os.path.join(path, n))
    entries = [ProducerStateEntry(pid, 0, 3, P.NOW, first)
               for pid, first in ((P.PID_COMMIT, 2), (P.PID_ABORT, 5))]
    with open(os.path.join(path, f"{second:020d}.snapshot"), "wb") as f:
        f.write(write_snapshot(entries))
    kbatch.rebuild_indexes(path)
    assert txnindex_files(path) == built.txnindex
    from kbatch.cli.verify import cmd_verify
    import io

    out = io.StringIO()
    assert cmd_verify(path, out=out, quiet=True) == 0, out.getvalue()
    os.unlink(os.path.join(path, f"{second:020d}.snapshot"))
    out = io.StringIO()
    assert cmd_verify(path, out=out, quiet=True) == 0, out.getvalue()


def test_an_abort_the_txnindex_files_miss_is_still_left_out(tmp_path):
    """Every segment has a .txnindex, but one lost its entry: the header pass adds the marker."""
    built = P.transactional(str(tmp_path / "t-0"), open_txn=False)
    for n in os.listdir(built.path):
        if n.endswith(".log"):
            open(os.path.join(built.path, n[:-4] + ".txnindex"), "wb").close()  # every segment: an empty file
    log = kbatch.Log.open(built.path)
    try:
        assert [r.offset for _b, r in log.read(isolation=1).records()] == built.committed
    finally:
        log.close()
