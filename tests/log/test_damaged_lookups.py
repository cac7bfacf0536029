"""Issue 28 items 5 and 6: time lookups on damaged logs and on old brokers' in-batch time indexes.

The rule: a time's answer is the one Kafka would give over the batches that can be read and whose
CRC holds (the first offset whose timestamp >= T), the same for a target whatever else is in the
call; every range that could not be read is reported (file and byte, `Log.problems`,
`LogSegment.unread`), and `Log.unread_for` names those that could have held a lookup's answer.
The damaged directories come from tests/support/damaged_logs.py."""
from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import kbatch
from kbatch.log.index_rules import NOTE_TIME_RECORD_OFFSET

from support import damaged_logs as D

ts = D.ts_of


def lookups(path, targets):
    log = kbatch.Log.open(path)
    try:
        got = log.offsets_for_times(list(targets))
        return [None if h is None else h.offset for h in got], list(log.problems), log
    finally:
        log.close()


def alone(path, target):
    log = kbatch.Log.open(path)
    try:
        hit = log.offsets_for_times([target])[0]
        return None if hit is None else hit.offset
    finally:
        log.close()


def want(part, targets):
    return [None if (a := part.readable_answer(t)) is None else a[0] for t in targets]


# ------------------------------------------------------------------------------------ item 5
@pytest.mark.parametrize("past_end,delta", [(True, None), (False, None), (False, 1500)],
                         ids=["length past the end", "length short", "length long"])
def test_bad_length_in_the_middle_answers_from_the_batches_after_it(backend, tmp_path, past_end, delta):
    """Before: `ts(505)` (answered by the batch after the damage) gave None with a length past the
    end, and a length landing mid-batch raised InvalidRecordError, cancelling every answer. A
    length too long by less than a batch must not hide the batch it runs into (51)."""
    part = D.build_partition(tmp_path)
    bad = D.bad_length(part, 50, past_end=past_end, delta=delta)
    targets = [ts(200), ts(505), ts(700), ts(900)]
    got, problems, _ = lookups(part.path, targets)
    assert got == want(part, targets) == [200, 510, 700, 900]
    assert [alone(part.path, t) for t in targets] == got
    # the range it could not read is named: file and byte
    log_file = str(part.log_file(0))
    assert len(problems) == 1 and log_file in problems[0] and f"from byte {bad.position} " in problems[0], problems


@pytest.mark.parametrize("past_end", [True, False], ids=["length past the end", "length lands mid-batch"])
def test_an_answer_does_not_depend_on_the_other_targets(backend, tmp_path, past_end):
    """Before: with enough targets for the one-pass bulk lookup, every target after the damage (and
    with a structural error, every target) came back None or raised, while each alone found its
    record."""
    part = D.build_partition(tmp_path)
    D.bad_length(part, 50, past_end=past_end)
    targets = [ts(o) for o in range(0, 1000, 37)] + [ts(505), ts(900)]
    together, _, _ = lookups(part.path, targets)
    assert together == [alone(part.path, t) for t in targets] == want(part, targets)
    assert together[-1] == 900


def test_never_answers_from_a_batch_whose_crc_fails(backend, tmp_path):
    """Before: the batch whose (corrupt) timestamps said 950 answered `ts(502)` with offset 500,
    `Log.problems == []`."""
    part = D.build_partition(tmp_path)
    bad = D.crc_flip(part, 50, ts(950))
    targets = [ts(200), ts(502), ts(700), ts(949)]
    got, problems, _ = lookups(part.path, targets)
    assert got == want(part, targets) == [200, 510, 700, 949]
    assert [alone(part.path, t) for t in targets] == got
    assert any(f"from byte {bad.position} " in p and "fails its CRC check" in p for p in problems), problems


def test_unread_for_names_the_ranges_an_answer_could_have_been_in(backend, tmp_path):
    part = D.build_partition(tmp_path)
    bad = D.bad_length(part, 50)
    log = kbatch.Log.open(part.path)
    try:
        hits = {t: log.offset_for(t) for t in (ts(200), ts(505), ts(700), ts(10**6))}
        assert [None if h is None else h.offset for h in hits.values()] == [200, 510, 700, None]
        # before the damage: the answer cannot be in it
        assert log.unread_for(ts(200), hits[ts(200)]) == []
        # the damaged batch held 500..509: ts(505)'s answer could have been there
        (u,) = log.unread_for(ts(505), hits[ts(505)])
        assert (u.position, u.file) == (bad.position, str(part.log_file(0)))
        # the time index entry after the damage says every record up to it is older than ts(700)
        assert log.unread_for(ts(700), hits[ts(700)]) == []
        # no answer: anything unread could have held one, unless the index bounds it
        assert log.unread_for(ts(10**6), None) == []
        assert log.unread_for(kbatch.EARLIEST, log.offset_for(kbatch.EARLIEST)) == []
        assert log.unread_for(kbatch.LATEST, log.offset_for(kbatch.LATEST)) == [u]
    finally:
        log.close()


def test_garbage_or_missing_index_files_give_the_same_answers(backend, tmp_path):
    targets = [ts(0) - 1, ts(0), ts(333), ts(505), ts(999), ts(999) + 1]
    answers = []
    for damage in (None, D.garbage_index, D.missing_index):
        part = D.build_partition(tmp_path / str(damage and damage.__name__))
        if damage is not None:
            damage(part)
        got, _problems, _ = lookups(part.path, targets)
        assert [alone(part.path, t) for t in targets] == got
        answers.append(got)
    assert answers[0] == answers[1] == answers[2] == [0, 0, 333, 505, 999, None]


def test_bad_timestamp_with_the_crc_fixed(backend, tmp_path):
    """A valid batch whose timestamps moved ahead of what the index files say: the answers are the
    log's (the first offset with timestamp >= T), alone or together."""
    part = D.build_partition(tmp_path)
    D.bad_timestamp_crc_fixed(part, 50, ts(515))
    targets = [ts(200), ts(505), ts(512), ts(515), ts(516), ts(900)]
    got, _problems, _ = lookups(part.path, targets)
    assert got == want(part, targets) == [200, 500, 506, 509, 516, 900]
    assert [alone(part.path, t) for t in targets] == got


def test_damage_in_an_earlier_segment(backend, tmp_path):
    part = D.build_partition(tmp_path, segments=2)
    bad = D.bad_length(part, 25, past_end=False)
    targets = [ts(100), ts(255), ts(600), ts(999)]
    got, problems, _ = lookups(part.path, targets)
    assert got == want(part, targets) == [100, 260, 600, 999]
    assert [alone(part.path, t) for t in targets] == got
    assert any(f"from byte {bad.position} " in p for p in problems)
    log = kbatch.Log.open(part.path)
    try:
        hits = log.offsets_for_times(targets)
        doubted = [bool(log.unread_for(t, h)) for t, h in zip(targets, hits)]
    finally:
        log.close()
    # ts(255)'s answer could have been in 250..259; the first segment's time index says it never
    # reached ts(600), so the later answers could not have been there
    assert doubted == [False, True, False, False]


def _damaged(root, kind):
    part = D.build_partition(root / kind, segments=2 if kind.endswith("2") else 1)
    if kind.startswith("length-e") or kind.startswith("length-m"):
        D.bad_length(part, 30, past_end=kind.startswith("length-end"))
        D.bad_length(part, 70, past_end=False)
    elif kind == "length-long":
        D.bad_length(part, 40, delta=1500)
        D.crc_flip(part, 45, ts(455))
    elif kind.startswith("crc"):
        D.crc_flip(part, 30, ts(800))
        D.crc_flip(part, 71, ts(100))
    elif kind.startswith("mixed"):
        D.crc_flip(part, 20, ts(990))
        D.bad_length(part, 60)
        D.garbage_index(part)
    return part


KINDS = ["length-end", "length-mid", "length-long", "crc", "mixed", "length-end2", "crc2"]


@pytest.fixture(scope="module")
def damaged(tmp_path_factory):
    root = tmp_path_factory.mktemp("damaged")
    return {k: _damaged(root, k) for k in KINDS}


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(kind=st.sampled_from(KINDS),
       targets=st.lists(st.integers(ts(0) - 50, ts(1000) + 50) | st.sampled_from([ts(o) for o in range(0, 1000, 5)]),
                        min_size=1, max_size=40))
def test_property_an_answer_is_the_same_alone_and_the_readable_one(damaged, kind, targets):
    part = damaged[kind]
    together, _, _ = lookups(part.path, targets)
    for i, t in enumerate(targets):
        assert together[i] == alone(part.path, t), (kind, i, t)
    assert together == want(part, targets)


# ------------------------------------------------------------------------------------ item 6
def test_an_old_brokers_in_batch_time_index_is_valid_and_used(backend, tmp_path):
    """Before: every lookup that checked a .timeindex entry naming the record holding the batch's
    max timestamp (Kafka 0.11-3.6 leaders) said the indexes were wrong ("the batch there ends at
    offset 359") and answered from a scan, with a problem reported."""
    part = D.old_broker_partition(tmp_path)
    rep = kbatch.verify_indexes(part.path)
    assert rep.ok and any(NOTE_TIME_RECORD_OFFSET in m for _f, m in rep.segments[0].notes)
    targets = [ts(0) - 1, ts(99), ts(100), ts(200), ts(352) + 5, ts(359) + 1, ts(400)]
    log = kbatch.Log.open(part.path)
    try:
        got = [None if h is None else h.offset for h in log.offsets_for_times(targets)]
        mx = log.offset_for(kbatch.MAX_TIMESTAMP)
        assert log.problems == [] and log.active_segment.index_problem is None
        assert not log.active_segment.indexes_from_scan  # the broker's own files answered
    finally:
        log.close()
    assert got == want(part, targets)
    stamps = [(o, t) for b in part.batches for o, t in b.records]
    top = max(t for _o, t in stamps)
    assert (mx.offset, mx.timestamp) == (next(o for o, t in stamps if t == top), top)
