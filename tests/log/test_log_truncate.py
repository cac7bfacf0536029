"""Log.truncate_to (Kafka's UnifiedLog.truncateTo) and what it is built from: the truncation is
written down first (log_loader.Truncation), so a writer's open finishes one a kill interrupted.
The SIGKILL crash-point loops over it are in test_faults.py."""
from __future__ import annotations

from pathlib import Path

import pytest

import kbatch
from kbatch.log import loader as log_loader
from kbatch.errors import CorruptCheckpointError, InvalidOffsetError, KBatchError

NOW = 1_700_000_000_000
CFG = dict(segment_bytes=600, index_interval_bytes=100)


def batch(base, n=3, ts=NOW):
    b = kbatch.BatchBuilder(base_offset=base, timestamp_extended=False)
    for j in range(n):
        b.append(ts + base + j, b"k%d" % ((base + j) % 5), b"v" * 40)
    return b.build()


def files(d) -> dict:
    return {p.name: p.read_bytes() for p in sorted(Path(d).iterdir()) if p.is_file() and p.name != ".lock"}


def written(d, appends, epochs=(), **cfg):
    """A log of `appends` 3-record appends (segments of about 4 batches); epochs: {append index: epoch}."""
    log = kbatch.Log.create(d, kbatch.LogConfig(**{**CFG, **cfg}), now_ms=NOW)
    for i in range(appends):
        if i in dict(epochs):
            log.assign_epoch_start_offset(dict(epochs)[i])
        log.append(batch(0, ts=NOW + 10 * i), now_ms=NOW)
    return log


def records(d):
    log = kbatch.Log.open(d)
    try:
        return [(r.offset, bytes(r.value)) for b in log.batches() for r in b]
    finally:
        log.close()


def exact(d) -> bool:
    v = kbatch.verify_indexes(d, index_interval_bytes=CFG["index_interval_bytes"])
    return v.ok and v.matches_rebuild


@pytest.mark.parametrize("target", [33, 30, 3, 0, 57])
def test_a_truncated_log_is_the_log_that_was_never_written_past_the_offset(backend, tmp_path, target):
    """Mid-segment, at a segment's base (Kafka keeps that segment, empty), inside the first segment,
    to zero and to the last batch: the files equal, byte for byte, those of a log that only ever
    took the appends before `target` (segments, indexes, epoch cache, checkpoints)."""
    epochs = {0: 1, 4: 2, 12: 5}
    a = written(tmp_path / "a-0", 20, epochs)
    assert a.truncate_to(target) is True
    assert a.end_offset() == target and a.offset_for(kbatch.LATEST).offset == target
    if target % 6 == 0:  # a segment starts there: kept, empty, as UnifiedLog.truncateTo keeps it
        assert a.active_segment.base_offset == target and a.active_segment.size == 0
    a.close()
    b = written(tmp_path / "b-0", target // 3, epochs)
    if target == 30:  # b never rolled to the segment at 30; a roll gives it the same files
        b.roll()
    b.close()
    assert files(tmp_path / "a-0") == files(tmp_path / "b-0")
    assert exact(tmp_path / "a-0")


def test_appends_go_on_from_the_new_end(backend, tmp_path):
    d = tmp_path / "t-0"
    log = written(d, 20)
    before = records(d)
    log.truncate_to(33)
    info = log.append(batch(0, ts=NOW + 999), now_ms=NOW)
    assert (info.first_offset, info.last_offset) == (33, 35)
    log.close()
    assert records(d)[:33] == before[:33] and [o for o, _v in records(d)] == list(range(36))
    log = kbatch.Log.open(d, kbatch.LogConfig(**CFG), writable=True)  # reopens without anything to recover
    assert log.end_offset() == 36 and log.recovery.truncated_bytes == 0
    log.close()
    assert exact(d)


def test_the_epoch_cache_recovery_point_and_log_end_come_down(backend, tmp_path):
    d = tmp_path / "t-0"
    log = written(d, 20, {0: 1, 8: 3, 14: 4})
    log.flush()  # recovery point = 60
    log.truncate_to(30)
    assert [tuple(e) for e in log.leader_epoch_cache.entries()] == [(1, 0), (3, 24)]
    assert (tmp_path / "t-0" / "leader-epoch-checkpoint").read_text().split("\n")[2:4] == ["1 0", "3 24"]
    assert kbatch.log.checkpoints.RecoveryCheckpoint.read(d).recovery_point == 30
    assert log.end_offset_for_epoch(3) == (3, 30)
    log.close()


def test_below_the_first_segment_the_log_starts_again_there(backend, tmp_path):
    """UnifiedLog.truncateFullyAndStartAt: every segment goes, an empty one starts at the offset,
    the log start offset moves there and the epoch cache is cleared."""
    d = tmp_path / "t-0"
    log = written(d, 20, {0: 1}, retention_bytes=1300)
    log.delete_old_segments(now_ms=NOW)
    first = log.segments[0].base_offset
    assert first > 10
    log.truncate_to(10)
    assert [s.base_offset for s in log.segments] == [10] and log.log_start_offset == 10 == log.end_offset()
    assert len(log.leader_epoch_cache) == 0
    assert log.append(batch(0), now_ms=NOW).first_offset == 10
    log.close()
    assert [o for o, _v in records(d)] == [10, 11, 12]


def test_at_or_past_the_end_only_the_epoch_cache_changes(backend, tmp_path):
    """Kafka: "Truncating to N has no effect", but an epoch entry at or past the end (a leader
    that appended nothing) goes."""
    d = tmp_path / "t-0"
    log = written(d, 5, {0: 1})
    log.assign_epoch_start_offset(7)
    before = files(d)
    assert log.truncate_to(99) is False and log.end_offset() == 15
    assert [tuple(e) for e in log.leader_epoch_cache.entries()] == [(1, 0)]
    after = files(d)
    assert {k for k in before if before[k] != after[k]} == {"leader-epoch-checkpoint"}
    log.close()


@pytest.mark.parametrize("target,why", [(31, "inside the batch holding offsets 30..32"), (-1, "negative")])
def test_a_target_inside_a_batch_is_refused_where_kafka_would_cut_the_batch(backend, tmp_path, target, why):
    """Known difference: Kafka truncates the whole batch holding a mid-batch offset but reports the
    offset itself as the log end (which a restart contradicts); kbatch refuses, changing nothing."""
    d = tmp_path / "t-0"
    log = written(d, 20)
    before = files(d)
    with pytest.raises(InvalidOffsetError, match=why):
        log.truncate_to(target)
    assert files(d) == before and log.end_offset() == 60
    log.append(batch(0), now_ms=NOW)
    log.close()


def test_a_target_in_a_gap_names_where_the_log_could_end(backend, tmp_path):
    """Offsets 6..8 missing (as compaction leaves them): the log can end at 6 (one past the batch
    before) but not at 9, where the next batch starts after the gap."""
    d = tmp_path / "t-0"
    d.mkdir()
    (d / f"{0:020d}.log").write_bytes(b"".join(batch(base) for base in (0, 3, 9, 12)))
    log = kbatch.Log.open(d, kbatch.LogConfig(**CFG), writable=True)
    with pytest.raises(InvalidOffsetError, match="would end at 6"):
        log.truncate_to(9)
    log.truncate_to(6)
    assert log.end_offset() == 6
    log.close()


def test_a_read_only_log_cannot_truncate(tmp_path):
    written(tmp_path / "t-0", 3).close()
    with pytest.raises(KBatchError, match="read-only"):
        kbatch.Log.open(tmp_path / "t-0").truncate_to(3)


def test_a_writers_open_finishes_an_interrupted_truncation(backend, tmp_path):
    """The state a kill leaves after the truncation was written down and the last segments went:
    the next writer's open does the rest (the holding segment cut, its indexes, the epoch cache,
    the recovery point) and removes the note. A read-only open changes nothing."""
    d = tmp_path / "t-0"
    written(tmp_path / "want-0", 11, {0: 1, 12: 6}).close()
    log = written(d, 20, {0: 1, 12: 6})
    log.close()
    log_loader.Truncation(33).write(d)
    for base in (54, 48, 42, 36):  # the first steps of truncate_segments, newest first
        for suffix in (".log", ".index", ".timeindex"):
            (d / f"{base:020d}{suffix}").unlink()
    seen = files(d)
    kbatch.Log.open(d).close()
    assert files(d) == seen
    log = kbatch.Log.open(d, kbatch.LogConfig(**CFG), writable=True)
    assert log.end_offset() == 33 and log_loader.TRUNCATION_MARKER in log.recovery.cleaned_up
    assert [tuple(e) for e in log.leader_epoch_cache.entries()] == [(1, 0)]
    log.close()
    assert files(d) == files(tmp_path / "want-0")


def test_an_unreadable_truncation_note_stops_writers_not_readers(tmp_path):
    d = tmp_path / "t-0"
    written(d, 5).close()
    (d / log_loader.TRUNCATION_MARKER).write_text("kbatch-truncation 0\ntruncate-to banana\n")
    with pytest.raises(CorruptCheckpointError, match="interrupted truncation"):
        kbatch.Log.open(d, kbatch.LogConfig(**CFG), writable=True)
    assert len(records(d)) == 15
