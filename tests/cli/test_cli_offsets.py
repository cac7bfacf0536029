"""`kbatch offsets` on damaged logs and on old brokers' index files (issue 28 items 5 and 6): the
answers are `Log.offsets_for_times`'s, each range that could not be read is named (file, byte) on
stderr, and the exit code is 1 only when an answer could have been in one (or an index entry
contradicts the log)."""
from __future__ import annotations

import io
import json

import pytest

import kbatch
from kbatch.cli.offsets import cmd_offsets

from support import damaged_logs as D

ts = D.ts_of


def offsets(path, *times, **kw):
    out, err = io.StringIO(), io.StringIO()
    code = cmd_offsets(str(path), times=[str(t) for t in times], as_json=True, quiet=True, out=out, err=err, **kw)
    rows = [json.loads(line) for line in out.getvalue().splitlines()]
    return code, rows, err.getvalue()


def api(path, targets):
    log = kbatch.Log.open(path)
    try:
        return [None if h is None else h.offset for h in log.offsets_for_times(list(targets))]
    finally:
        log.close()


@pytest.mark.parametrize("past_end", [True, False], ids=["length past the end", "length lands mid-batch"])
def test_offsets_answers_every_time_on_a_log_with_a_bad_length(tmp_path, past_end):
    """Before: `--time ts(505) --time ts(700)` printed none for ts(505) (length past the end) or
    printed no answer at all, with a message naming no file (length landing mid-batch)."""
    part = D.build_partition(tmp_path)
    bad = D.bad_length(part, 50, past_end=past_end)
    times = [ts(200), ts(505), ts(700)]
    code, rows, err = offsets(part.path, *times)
    assert [r["offset"] for r in rows] == api(part.path, times) == [200, 510, 700]
    assert code == 1  # ts(505)'s answer could have been in the damaged batch
    log_file = str(part.log_file(0))
    assert f"{log_file}: " in err and f"from byte {bad.position} " in err
    assert f"{ts(505)}: the answer could have been in the" in err
    assert f"{ts(200)}: the answer" not in err and f"{ts(700)}: the answer" not in err


def test_offsets_exits_0_when_no_answer_could_have_been_in_the_damage(tmp_path):
    part = D.build_partition(tmp_path)
    D.bad_length(part, 50)
    code, rows, err = offsets(part.path, ts(200), ts(700))
    assert (code, [r["offset"] for r in rows]) == (0, [200, 700])


def test_offsets_never_answers_from_a_batch_whose_crc_fails(tmp_path):
    """Before: offset 500, from the corrupt timestamps, exit 0, nothing on stderr."""
    part = D.build_partition(tmp_path)
    bad = D.crc_flip(part, 50, ts(950))
    code, rows, err = offsets(part.path, ts(502))
    assert [(r["offset"], r["timestamp"]) for r in rows] == [(510, ts(510))]
    assert code == 1 and "fails its CRC check" in err and f"from byte {bad.position} " in err


def test_offsets_accepts_an_old_brokers_in_batch_time_index(tmp_path):
    """Before: exit 1, "the indexes say the segment's max timestamp ... is in the batch ending at
    offset 357, but the batch there ends at 359"."""
    part = D.old_broker_partition(tmp_path)
    code, rows, err = offsets(part.path, ts(100), ts(200), max_timestamp=True)
    assert (code, err) == (0, "")
    stamps = [(o, t) for b in part.batches for o, t in b.records]
    top = max(t for _o, t in stamps)
    assert [r["offset"] for r in rows] == [next(o for o, t in stamps if t == top)] + api(part.path, [ts(100), ts(200)])


def _lookups_exit_0(d):
    import support.storage_oracle as oracle

    segments = oracle.log_segments(d)
    stamps = sorted({t for _b, _p, batches in segments for b in batches for _o, t in b.records if t is not None})
    times = [stamps[0] - 1] + stamps[::max(1, len(stamps) // 20)] + [stamps[-1] + 1]
    code, rows, err = offsets(d, *times, max_timestamp=True, earliest=True, latest=True)
    assert (code, err) == (0, ""), err
    want = [None if (h := oracle.brute_offset_for_time(segments, t)) is None else h[0] for t in times]
    assert [r["offset"] for r in rows[3:]] == want


@pytest.mark.parametrize("era", ["0.11-1.1", "2.0-3.6", "3.7+"])
def test_offsets_exits_0_on_every_brokers_index_forms(tmp_path, era):
    """Before: exit 1 on the 0.11-1.1 and 2.0-3.6 forms (an index "contradiction" on stderr)."""
    from log.test_broker_data import broker_partition

    d = tmp_path / "orders-0"
    d.mkdir()
    broker_partition(d, era, 5)
    _lookups_exit_0(d)


def test_offsets_exits_0_on_real_brokers_directories(tmp_path):
    from log.test_broker_data import BROKER_DIRS, broker_copy, partitions

    for name in BROKER_DIRS:
        for d in partitions(broker_copy(name, tmp_path)):
            _lookups_exit_0(d)


def test_which_lookups_are_in_doubt_does_not_depend_on_the_others(tmp_path):
    """The lines saying an answer could have been in unread bytes, and the exit code, are the same
    whatever the order of the --times and whichever lookup found the damage."""
    import struct

    part = D.build_partition(tmp_path)
    bad = D.bad_length(part, 50)
    raw = (part.path / f"{0:020d}.timeindex").read_bytes()
    entries = [struct.unpack_from(">qi", raw, k) for k in range(0, len(raw), 12)]
    at_entry = next(t for t, rel in entries if rel > bad.last)  # first entry after the damage: its own time
    for times in ([ts(505), at_entry, ts(700)], [at_entry, ts(700), ts(505)], [ts(700), at_entry, ts(505)]):
        code, rows, err = offsets(part.path, *times)
        doubted = sorted(int(line.split(": ")[2]) for line in err.splitlines() if "the answer could have been" in line)
        assert (code, doubted) == (1, [ts(505)]), (times, err)
    for t in (at_entry, ts(700)):
        assert offsets(part.path, t)[0] == 0
