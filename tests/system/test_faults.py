"""Fault injection for the storage layer (issue 15): kills, full disks, concurrent writers and readers.

Two tiers. The quick tier runs by default in bounded time; `KBATCH_FAULTS=long` runs the long
tier (hundreds of kills, every crash point, hundreds of short-write trials) and prints what each
loop did. Crashes are real: a forked child (tests/support/faults/helper.py) is SIGKILLed, at a random
moment or at the k-th durable step (kbatch's crash-point hook: every rename, truncation, file
creation and deletion, and every compaction and truncation step). After each, everything acknowledged must be on
disk byte for byte, offsets contiguous, indexes verified, and the log must take appends; a killed
Log.truncate_to or Log.append_table recovers to the log end before the call or the one after it.
"""
from __future__ import annotations

import os
import random
import resource
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

import kbatch
from kbatch.log import files as _files
from kbatch.errors import FileChangedError, LogDirectoryLockedError, LogWriteError

from support.faults import helper

LONG = os.environ.get("KBATCH_FAULTS", "") == "long"
NOW = 10_000
HERE = Path(__file__).resolve().parents[1] / "support"
pytestmark = pytest.mark.skipif(not hasattr(os, "fork"), reason="fault injection forks a child process (POSIX)")


def tier(quick, long):
    return long if LONG else quick


def report(name, **counts):
    """One line per loop, printed (run with -s to see them): what the loop did and found."""
    print(f"\n[faults] {name}: " + ", ".join(f"{k}={v}" for k, v in counts.items()))


def killed(status) -> bool:
    return os.WIFSIGNALED(status) and os.WTERMSIG(status) == signal.SIGKILL


def records(directory):
    """(offset, key, value) of every record, read-only."""
    log = kbatch.Log.open(directory)
    try:
        return [(r.offset, bytes(r.key) if r.key is not None else None, bytes(r.value) if r.value is not None else None)
                for b in log.batches() for r in b]
    finally:
        log.close()


def keyed_log(directory, n_appends=70):
    """A log for compaction: keys repeat, so a cleaner has work; no retention."""
    log = kbatch.Log.create(directory, helper.config(retention_ms=-1))
    try:
        for i in range(n_appends):
            log.append(b"".join(helper.make_batches(i, log.end_offset())), now_ms=i, from_client=False)
    finally:
        log.close()


# ------------------------------------------------------------------------------------ SIGKILL at random moments
def test_sigkill_writer_at_random_moments(tmp_path):
    """A writer with frequent rolls, retention, flushes and reopens, SIGKILLed at random moments
    (every other round its writes are split in two with a pause between, so kills land inside
    batches and leave torn tails for recovery to cut)."""
    d, acks = str(tmp_path / "t-0"), str(tmp_path / "acks")
    rng = random.Random(15)
    rounds = tier(8, 300)
    stats = dict(kills=0, exited=0, acks=0, truncated_bytes=0, torn_tails=0, cleaned_up=0, recovered_segments=0)
    for k in range(rounds):
        r, w = os.pipe()
        pid = os.fork()
        if pid == 0:
            os.close(r)
            try:
                if k % 2:
                    helper.split_writes(0.003)  # every other round, kills can land inside a batch
                os.write(w, b"x")
                helper.writer(d, acks, seed=k)
            finally:
                os._exit(3)
        os.close(w)
        os.read(r, 1)  # the child has started
        os.close(r)
        time.sleep(rng.uniform(0.0, 0.25))
        os.kill(pid, signal.SIGKILL)
        _, status = os.waitpid(pid, 0)
        assert killed(status), status
        stats["kills"] += 1
        got = helper.check(d, acks)
        stats["truncated_bytes"] += got["truncated_bytes"]
        stats["torn_tails"] += got["truncated_bytes"] > 0
        stats["cleaned_up"] += len(got["cleaned_up"])
        stats["recovered_segments"] += got["recovered_segments"]
        stats["acks"] = got["acks"]
    helper.append_one(d, acks)
    helper.check(d, acks)
    assert stats["acks"] > rounds  # the writer made progress between kills
    report("sigkill writer", **stats)


# ------------------------------------------------------------------------------------ SIGKILL at every crash point
def _sample(names, per_kind):
    """Crash points to kill at: all of them, or the first `per_kind` of each kind."""
    if per_kind is None:
        return list(range(1, len(names) + 1))
    seen, out = {}, []
    for k, name in enumerate(names, 1):
        kind = name.split(":")[0] + ":" + "".join(c for c in name.split(":", 1)[-1] if not c.isdigit())
        if seen.get(kind, 0) < per_kind:
            seen[kind] = seen.get(kind, 0) + 1
            out.append(k)
    return out


def test_sigkill_writer_at_every_crash_point(tmp_path):
    """The writer (appends, rolls, retention, flush, close/reopen) killed at its durable steps."""
    names = []
    probe = tmp_path / "probe"

    def run(directory, acks):
        helper.writer(directory, acks, stop_after=90, seed=3)

    with helper.recording_crash_points(names):
        run(str(probe / "t-0"), str(probe / "acks"))
    assert {n.split(":")[0] for n in names} >= {"create", "delete", "replace"}, set(names)
    ks = _sample(names, tier(2, None))
    for k in ks:
        d, acks = tmp_path / f"k{k}" / "t-0", tmp_path / f"k{k}" / "acks"

        def child(k=k, d=d, acks=acks):
            helper.kill_at(k)
            run(str(d), str(acks))
        status, out = helper.in_child(child)
        assert killed(status), (k, names[k - 1], out)
        helper.check(str(d), str(acks))
        helper.append_one(str(d), str(acks))
        helper.check(str(d), str(acks))
    report("writer crash points", points=len(names), kills=len(ks), kinds=len({n.split(":")[0] for n in names}))


@pytest.mark.parametrize("segment_bytes", [None, 3000], ids=["one-group", "pairs"])
def test_sigkill_compaction_at_every_crash_point(tmp_path, segment_bytes):
    """compact() killed at every step and rename, the steps of a many-to-one swap included (the
    group's other segments renamed to .deleted, the .swap renamed in, the .deleted removed), with
    every inactive segment in one group (segment.bytes 1 GiB) and in groups of about two: the log
    reads as it is (a subset of the original's records), a writer's open finishes the swap or
    undoes it, indexes verify, and compacting again gives the result."""
    kw = {} if segment_bytes is None else {"segment_bytes": segment_bytes}
    pristine = tmp_path / "pristine" / "t-0"
    keyed_log(pristine, tier(40, 70))
    original = records(pristine)
    probe = tmp_path / "probe" / "t-0"
    shutil.copytree(pristine, probe)
    names = []
    with helper.recording_crash_points(names):
        kbatch.compact(probe, NOW, index_interval_bytes=100, **kw)
    compacted = records(probe)
    assert len(compacted) < len(original)
    n_logs = lambda d: sum(n.endswith(".log") for n in os.listdir(d))  # noqa: E731
    assert 1 < n_logs(probe) < n_logs(pristine) - 1  # grouped: fewer segments than were cleaned
    for step in ("compact:swap-in", "compact:swap-rename", "compact:delete-replaced", "compact:delete-deleted"):
        assert any(n.startswith(step) for n in names), step
    ks = _sample(names, tier(2, None))
    outcomes = {"original": 0, "compacted": 0}
    for k in ks:
        d = tmp_path / f"k{k}" / "t-0"
        shutil.copytree(pristine, d)

        def child(k=k, d=d):
            helper.kill_at(k)
            kbatch.compact(d, NOW, index_interval_bytes=100, **kw)
        status, out = helper.in_child(child)
        assert killed(status), (k, names[k - 1], out)
        view = records(d)  # readable as it is, before any recovery: whole segments, nothing invented
        assert set(view) <= set(original), names[k - 1]
        log = kbatch.Log.open(d, helper.config(retention_ms=-1), writable=True)  # finishes or undoes the swap
        log.close()
        got = records(d)
        assert got in (original, compacted), names[k - 1]
        outcomes["original" if got == original else "compacted"] += 1
        assert not [n for n in os.listdir(d) if n.endswith((".cleaned", ".swap", ".deleted", ".tmp"))
                    or n.startswith((".kbatch-cleaner", ".kbatch-compaction"))], names[k - 1]
        assert helper.indexes_exact(d), names[k - 1]
        kbatch.compact(d, NOW, index_interval_bytes=100, **kw)
        assert records(d) == compacted, names[k - 1]
        helper.append_one(str(d), str(d.parent / "acks"))
    assert outcomes["original"] and outcomes["compacted"]
    report(f"compaction crash points ({'one group' if segment_bytes is None else 'pairs'})", points=len(names),
           kills=len(ks), **outcomes)


def test_sigkill_rebuild_indexes_at_every_crash_point(tmp_path):
    pristine = tmp_path / "pristine" / "t-0"
    keyed_log(pristine, 40)
    segs = sorted(p for p in os.listdir(pristine) if p.endswith(".log"))
    good = {n: (pristine / n).read_bytes() for n in os.listdir(pristine) if n.endswith((".index", ".timeindex"))}
    (pristine / segs[0].replace(".log", ".index")).unlink()
    damaged = pristine / segs[1].replace(".log", ".timeindex")
    damaged.write_bytes(damaged.read_bytes()[:-5])
    names = []
    probe = tmp_path / "probe" / "t-0"
    shutil.copytree(pristine, probe)
    with helper.recording_crash_points(names):
        kbatch.rebuild_indexes(probe, index_interval_bytes=100)
    assert names and all(n.startswith("replace:") for n in names)
    ks = _sample(names, tier(3, None))
    for k in ks:
        d = tmp_path / f"k{k}" / "t-0"
        shutil.copytree(pristine, d)

        def child(k=k, d=d):
            helper.kill_at(k)
            kbatch.rebuild_indexes(d, index_interval_bytes=100)
        status, out = helper.in_child(child)
        assert killed(status), (k, out)
        for n, data in good.items():  # every index file is the old one or the new one, never half
            p = d / n
            assert not p.exists() or p.read_bytes() in (data, (pristine / n).read_bytes() if (pristine / n).exists()
                                                        else None), (names[k - 1], n)
        log = kbatch.Log.open(d, helper.config(retention_ms=-1), writable=True)  # removes the temp file left
        log.close()
        assert not [n for n in os.listdir(d) if n.endswith(".tmp")]
        kbatch.rebuild_indexes(d, index_interval_bytes=100)
        assert helper.indexes_exact(d)
    report("rebuild_indexes crash points", points=len(names), kills=len(ks))


# ------------------------------------------------------------------------------------ SIGKILL inside a truncation
def _epoch_log(d):
    """A log with several segments, leader epochs, and retention past its first segments."""
    log = kbatch.Log.create(d, helper.config(retention_ms=-1, retention_bytes=4000))
    try:
        for i in range(60):
            if i % 15 == 0:
                log.assign_epoch_start_offset(i // 15 + 1)
            log.append(b"".join(helper.make_batches(i, log.end_offset())), now_ms=i, from_client=False)
        log.delete_old_segments(now_ms=60)
    finally:
        log.close()


def _batches_and_epochs(d):
    """(batch bytes by base offset, log end, epoch entries) as a writer's open recovers them."""
    log = kbatch.Log.open(d, helper.config(retention_ms=-1), writable=True)
    try:
        assert not log.problems, log.problems
        out = ([(b.base_offset, bytes(b.raw)) for b in log.batches()], log.end_offset(),
               [tuple(e) for e in log.leader_epoch_cache.entries()])
        assert kbatch.log.checkpoints.RecoveryCheckpoint.read(d).recovery_point <= log.end_offset()
    finally:
        log.close()
    return out


def _leftovers(d):
    return [n for n in os.listdir(d) if n.endswith(".tmp") or n.startswith(".kbatch-truncation")]


def test_sigkill_truncate_to_at_every_crash_point(tmp_path):
    """Log.truncate_to killed at every durable step (the note, each segment file deleted, the cut,
    the index trims, the epoch cache, the recovery point, the note removed), to an offset inside a
    middle segment, to a segment's base, and below the first segment: the writer's open recovers
    to the old end or the new one, never between, byte for byte, with exact indexes and the
    matching epoch cache, and the log takes appends."""
    pristine = tmp_path / "pristine" / "t-0"
    _epoch_log(pristine)
    old = _batches_and_epochs(pristine)
    bases = _files.list_segment_bases(pristine)
    mid = [b for b, _raw in old[0] if bases[1] < b < bases[2]][1]
    targets = {"mid-segment": mid, "segment-base": bases[-2], "below-first": bases[0] - 3}
    stats = dict(points=0, kills=0, old_end=0, new_end=0)
    for label, target in tier({"mid-segment": mid}, targets).items():
        probe = tmp_path / f"probe-{label}" / "t-0"
        shutil.copytree(pristine, probe)
        log = kbatch.Log.open(probe, helper.config(retention_ms=-1), writable=True)
        names = []
        with helper.recording_crash_points(names):
            assert log.truncate_to(target)
        log.close()
        new = _batches_and_epochs(probe)
        assert new[1] == target and new[0] == [(b, raw) for b, raw in old[0] if b < target]
        cut = "truncate" if label != "below-first" else "create"  # below the first: an empty segment instead
        assert {n.split(":")[0] for n in names} >= {"replace", "delete", cut}
        ks = _sample(names, tier(2, None))
        for k in ks:
            d = tmp_path / f"{label}-k{k}" / "t-0"
            shutil.copytree(pristine, d)

            def child(k=k, d=d, target=target):
                log = kbatch.Log.open(d, helper.config(retention_ms=-1), writable=True)
                helper.kill_at(k)
                log.truncate_to(target)
            status, out = helper.in_child(child)
            assert killed(status), (label, k, names[k - 1], out)
            got = _batches_and_epochs(d)
            assert got in (old, new), (label, names[k - 1], got[1], got[2])
            stats["old_end" if got == old else "new_end"] += 1
            assert not _leftovers(d) and helper.indexes_exact(d), (label, names[k - 1])
            helper.append_one(str(d), str(d.parent / "acks"))
        stats["points"] += len(names)
        stats["kills"] += len(ks)
    report("truncate_to crash points", **stats)


def test_sigkill_append_table_at_every_crash_point(tmp_path, monkeypatch):
    """Log.append_table of many pieces (small ones here, rolling segments), killed at every durable
    step: a call that succeeds recovers to the old end or the new one, a call whose last piece is
    refused (KIP-937) always to the old end; never part of a call."""
    import numpy as np
    import pyarrow as pa

    import kbatch.columns.encode

    monkeypatch.setattr(kbatch.columns.encode, "APPEND_PIECE_BYTES", 1200)
    pristine = tmp_path / "pristine" / "t-0"
    helper.writer(str(pristine), str(pristine.parent / "acks"), stop_after=12)
    old = _batches_and_epochs(pristine)
    rows = 120
    good = pa.table({"key": [b"k%d" % i for i in range(rows)], "value": [b"v" * 60] * rows,
                     "timestamp": pa.array(np.arange(rows) + 10_000, pa.timestamp("ms"))})
    bad = pa.concat_tables([good, good.set_column(2, "timestamp", pa.array(np.zeros(rows, np.int64),
                                                                           pa.timestamp("ms")))])
    cfg = dict(retention_ms=-1, message_timestamp_before_max_ms=5_000)
    stats = dict(points=0, kills=0, old_end=0, new_end=0)
    for label, table in (("succeeds", good), ("refused", bad)):
        probe = tmp_path / f"probe-{label}" / "t-0"
        shutil.copytree(pristine, probe)
        log = kbatch.Log.open(probe, helper.config(**cfg), writable=True)
        names = []
        with helper.recording_crash_points(names):
            try:
                log.append_table(table, 10_000 + rows, records_per_batch=10)
            except kbatch.InvalidTimestampError:
                assert label == "refused"
        log.close()
        new = _batches_and_epochs(probe)
        assert (new == old) == (label == "refused") and any(n.startswith("create:") for n in names)
        ks = _sample(names, tier(2, None))
        for k in ks:
            d = tmp_path / f"{label}-k{k}" / "t-0"
            shutil.copytree(pristine, d)

            def child(k=k, d=d, table=table):
                log = kbatch.Log.open(d, helper.config(**cfg), writable=True)
                helper.kill_at(k)
                log.append_table(table, 10_000 + rows, records_per_batch=10)
            status, out = helper.in_child(child)
            assert killed(status), (label, k, names[k - 1], out)
            got = _batches_and_epochs(d)
            assert got in (old, new), (label, names[k - 1], got[1])
            stats["old_end" if got == old else "new_end"] += 1
            assert not _leftovers(d) and helper.indexes_exact(d), (label, names[k - 1])
        stats["points"] += len(names)
        stats["kills"] += len(ks)
    report("append_table crash points", **stats)


def test_sigkill_import_at_every_crash_point(tmp_path):
    """`kbatch import` into an existing partition and a new one, several append_table calls each
    (segments rolling), killed at every durable step. Each partition comes back, at the next
    writer's open, to where it was before the import or to all of it; an import whose last row
    is refused always to where it was (a partition it created: gone, or empty). The notes go one
    partition at a time at the end, so a kill there may keep one partition's rows and not the
    other's (docs/cli.md says so)."""
    import io
    import json as _json

    pytest.importorskip("pyarrow")
    from kbatch.cli.import_ import cmd_import

    pristine = tmp_path / "pristine"
    helper.writer(str(pristine / "t-0"), str(tmp_path / "acks"), stop_after=6)
    old = records(pristine / "t-0")
    rows = [_json.dumps({"partition": i % 2, "key": "aw==", "value": "dmFs" * 40, "timestamp": NOW + i})
            for i in range(60)]
    sources = {"succeeds": rows, "refused": rows + [_json.dumps({"partition": 1, "value": None, "isTombstone": False})]}
    stats = dict(points=0, kills=0, old_end=0, new_end=0)
    for label, lines in sources.items():
        src = tmp_path / f"{label}.jsonl"
        # one line a batch: each row is an append_table call of its own
        src.write_text("\n".join(lines) + "\n")

        def run(root, src=src):
            from kbatch.cli import _jsonl

            orig = _jsonl.batches_of
            _jsonl.batches_of = lambda f, binary: orig(f, binary, chunk_rows=1)
            try:
                return cmd_import(str(src), to=str(root), topic="t", config=["segment.bytes=1500", "index.interval.bytes=100"],
                                  out=io.StringIO(), err=io.StringIO())
            finally:
                _jsonl.batches_of = orig

        probe = tmp_path / f"probe-{label}"
        shutil.copytree(pristine, probe)
        names = []
        with helper.recording_crash_points(names):
            assert run(probe) == (0 if label == "succeeds" else 1)
        new = {p: records(probe / f"t-{p}") if (probe / f"t-{p}").exists() else None for p in (0, 1)}
        assert (new[0] == old) == (label == "refused") and any(n.startswith("create:") for n in names)
        ks = _sample(names, tier(2, None))
        for k in ks:
            root = tmp_path / f"{label}-k{k}"
            shutil.copytree(pristine, root)

            def child(k=k, root=root):
                helper.kill_at(k)
                run(root)
            status, out = helper.in_child(child)
            assert killed(status), (label, k, names[k - 1], out)
            for p in (0, 1):
                d = root / f"t-{p}"
                if not d.exists():
                    assert p == 1, (label, names[k - 1])
                    stats["old_end"] += 1
                    continue
                kbatch.Log.open(d, helper.config(), writable=True).close()  # the writer's open finishes an undo
                got = records(d)
                before = old if p == 0 else []
                assert got == before or (label == "succeeds" and got == new[p]), (label, p, names[k - 1])
                stats["old_end" if got == before else "new_end"] += 1
                assert not _leftovers(d) and helper.indexes_exact(d), (label, p, names[k - 1])
        stats["points"] += len(names)
        stats["kills"] += len(ks)
    report("import crash points", **stats)


# ------------------------------------------------------------------------------------ short writes, full disks
def _fill_until_failure(d, acks, limit_setter=None, **cfg):
    """Append until a write fails; the failing call must leave every file as it was, and the Log
    must take appends again once space returns (limit_setter(False) gives it back). Acks are
    written once the limit is lifted (the ack file must not hit it)."""
    log = helper.open_log(d, **cfg)
    done = []
    i = len(helper.read_acks(acks))
    try:
        if limit_setter:
            limit_setter(True)
        for _ in range(20000):
            before = helper.snapshot(d)
            data = b"".join(helper.make_batches(i, log.end_offset()))
            try:
                info = log.append(data, now_ms=i, from_client=False)
            except LogWriteError as e:
                after = helper.snapshot(d)
                assert after == before, sorted(set(after.items()) ^ set(before.items()))[:4]
                failed = dict(errno=e.errno, at=i, log_size=log.active_segment.size,
                              file=os.path.splitext(e.path or "")[1] or os.path.basename(e.path or "?"))
                break
            done.append((i, info.first_offset, info.last_offset, helper.sha(data)))
            i += 1
        else:
            raise AssertionError("no write failed")
        if limit_setter:
            limit_setter(False)
        data = b"".join(helper.make_batches(i, log.end_offset()))  # space is back: the Log goes on
        info = log.append(data, now_ms=i, from_client=False)
        done.append((i, info.first_offset, info.last_offset, helper.sha(data)))
        return failed
    finally:
        log.close()
        fd = os.open(acks, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        for ack in done:
            helper.record_ack(fd, *ack)
        os.close(fd)


def test_short_writes_via_rlimit_fsize(tmp_path):
    """RLIMIT_FSIZE gives a short write, then EFBIG, exactly as a full disk does to one file (no
    root needed). The limit lands at many places inside batches and segments."""
    limits = [300 + 97 * j for j in range(tier(6, 200))]
    errnos = {}
    for n, limit in enumerate(limits):
        d, acks = str(tmp_path / f"l{n}" / "t-0"), str(tmp_path / f"l{n}" / "acks")
        soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)

        def setter(on, limit=limit, hard=hard):
            resource.setrlimit(resource.RLIMIT_FSIZE, (limit if on else hard, hard))

        # segment.bytes above the limit, so the .log reaches it before a roll
        def child(d=d, acks=acks, setter=setter):
            return _fill_until_failure(d, acks, setter, segment_bytes=1 << 20)
        status, out = helper.in_child(child)
        assert status == 0 and "result" in out, out
        errnos[out["result"]["errno"]] = errnos.get(out["result"]["errno"], 0) + 1
        helper.check(d, acks)
    report("RLIMIT_FSIZE short writes", trials=len(limits), errnos=errnos)


@pytest.fixture
def small_tmpfs(tmp_path):
    if os.geteuid() != 0:
        pytest.skip("mounting a small tmpfs needs root (CI may run unprivileged); RLIMIT_FSIZE covers short writes")
    mnt = tmp_path / "tmpfs"
    mnt.mkdir()
    r = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=256k", "tmpfs", str(mnt)], capture_output=True, text=True)
    if r.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here ({r.stderr.strip() or r.returncode})")
    try:
        yield mnt
    finally:
        subprocess.run(["umount", str(mnt)], capture_output=True)


def test_enospc_on_a_small_tmpfs(small_tmpfs):
    """A real full disk: ENOSPC can hit the .log, an index, a new segment's files or a checkpoint."""
    trials = tier(4, 60)
    errnos, sizes, where = {}, [], {}
    for n in range(trials):
        for p in small_tmpfs.iterdir():
            shutil.rmtree(p) if p.is_dir() else p.unlink()
        d, acks = str(small_tmpfs / "t-0"), str(small_tmpfs.parent / f"acks{n}")
        os.makedirs(d)
        free = os.statvfs(small_tmpfs).f_bavail * os.statvfs(small_tmpfs).f_frsize
        filler = small_tmpfs / "filler"
        with open(filler, "wb") as f:  # leave a different amount of room each trial
            f.write(b"\0" * max(0, free - 4096 * (4 + n % 12) - 37 * n))
        try:
            failed = _fill_until_failure(d, acks, lambda on, filler=filler: None if on else filler.unlink())
        finally:
            if filler.exists():
                filler.unlink()
        errnos[failed["errno"]] = errnos.get(failed["errno"], 0) + 1
        where[failed["file"]] = where.get(failed["file"], 0) + 1
        sizes.append(failed["log_size"])
        helper.check(d, acks)
    report("tmpfs ENOSPC", trials=trials, errnos=errnos, failed_in=where, distinct_log_sizes_at_failure=len(set(sizes)))


def _append_tables_until_failure(d, limit_setter=None):
    """Log.append_table of many-piece tables until one fails: the failing call must leave every
    file as it was (its earlier pieces truncated away on a full disk), and the Log must take
    tables again once space returns."""
    import numpy as np
    import pyarrow as pa

    import kbatch.columns.encode

    kbatch.columns.encode.APPEND_PIECE_BYTES = 2000  # a forked child: pieces of a few batches
    log = helper.open_log(d, retention_ms=-1, segment_bytes=1 << 20)
    rows = 60
    try:
        if limit_setter:
            limit_setter(True)
        for i in range(5000):
            table = pa.table({"key": [b"k%d" % j for j in range(rows)], "value": [b"v%d" % i * 9] * rows,
                              "timestamp": pa.array(np.arange(rows) + i, pa.timestamp("ms"))})
            before = helper.snapshot(d)
            end = log.end_offset()
            try:
                log.append_table(table, i, records_per_batch=7)
            except LogWriteError as e:
                after = helper.snapshot(d)
                assert after == before, sorted(set(after.items()) ^ set(before.items()))[:4]
                assert log.end_offset() == end
                failed = dict(errno=e.errno, at=i, pieces_undone="taken out again" in str(e))
                break
        else:
            raise AssertionError("no write failed")
        if limit_setter:
            limit_setter(False)
        log.append_table(table, i, records_per_batch=7)
        return failed
    finally:
        log.close()


def test_append_table_short_writes_via_rlimit_fsize(tmp_path):
    """A file-size limit lands inside a many-piece append_table: nothing of the call stays."""
    limits = [2500 + 331 * j for j in range(60)][::tier(6, 1)]
    errnos, undone = {}, 0
    for n, limit in enumerate(limits):
        d = str(tmp_path / f"l{n}" / "t-0")
        _soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)

        def setter(on, limit=limit, hard=hard):
            resource.setrlimit(resource.RLIMIT_FSIZE, (limit if on else hard, hard))
        status, out = helper.in_child(_append_tables_until_failure, d, setter)
        assert status == 0 and "result" in out, out
        errnos[out["result"]["errno"]] = errnos.get(out["result"]["errno"], 0) + 1
        undone += out["result"]["pieces_undone"]
        assert helper.indexes_exact(d)
    assert undone  # some limits land in a later piece of a call
    report("append_table RLIMIT_FSIZE", trials=len(limits), errnos=errnos, calls_with_pieces_taken_out=undone)


def test_append_table_enospc_on_a_small_tmpfs(small_tmpfs):
    trials = tier(2, 30)
    errnos, undone = {}, 0
    for n in range(trials):
        for p in small_tmpfs.iterdir():
            shutil.rmtree(p) if p.is_dir() else p.unlink()
        d = str(small_tmpfs / "t-0")
        os.makedirs(d)
        free = os.statvfs(small_tmpfs).f_bavail * os.statvfs(small_tmpfs).f_frsize
        filler = small_tmpfs / "filler"
        with open(filler, "wb") as f:
            f.write(b"\0" * max(0, free - 4096 * (6 + n % 10) - 53 * n))
        try:
            status, out = helper.in_child(_append_tables_until_failure, d,
                                          lambda on, filler=filler: None if on else filler.unlink())
        finally:
            if filler.exists():
                filler.unlink()
        assert status == 0 and "result" in out, out
        errnos[out["result"]["errno"]] = errnos.get(out["result"]["errno"], 0) + 1
        undone += out["result"]["pieces_undone"]
        assert helper.indexes_exact(d)
    report("append_table tmpfs ENOSPC", trials=trials, errnos=errnos, calls_with_pieces_taken_out=undone)


# ------------------------------------------------------------------------------------ two writers
def test_two_writers_in_one_process(tmp_path):
    d = tmp_path / "t-0"
    a = kbatch.Log.create(d, helper.config())
    try:
        with pytest.raises(LogDirectoryLockedError):
            kbatch.Log.open(d, helper.config(), writable=True)
        with pytest.raises(LogDirectoryLockedError):
            kbatch.compact(d, NOW, index_interval_bytes=100)
        with pytest.raises(LogDirectoryLockedError):
            kbatch.rebuild_indexes(d)
        kbatch.Log.open(d).close()  # readers are welcome
    finally:
        a.close()
    kbatch.Log.open(d, helper.config(), writable=True).close()  # released on close


def test_two_writers_in_two_processes(tmp_path):
    """A real second interpreter holds the directory for writing: every writer here is refused,
    the CLI's write commands exit 2, and the directory is free again when it exits."""
    d = tmp_path / "t-0"
    helper.writer(str(d), str(tmp_path / "acks"), stop_after=5)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(HERE), *sys.path]))
    holder = subprocess.Popen([sys.executable, str(HERE / "faults" / "helper.py"), "hold", str(d)],
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=env)
    try:
        assert holder.stdout.readline() == b"holding\n"
        with pytest.raises(LogDirectoryLockedError) as e:
            kbatch.Log.open(d, helper.config(), writable=True)
        assert "another writer holds" in str(e.value)
        with pytest.raises(LogDirectoryLockedError):
            kbatch.compact(d, NOW, index_interval_bytes=100)
        with pytest.raises(LogDirectoryLockedError):
            kbatch.rebuild_indexes(d)
        pytest.importorskip("typer")
        from kbatch.cli import main
        assert main(["compact", str(d), "--now", str(NOW)]) == 2
        assert main(["reindex", str(d)]) == 2
    finally:
        holder.stdin.close()
        holder.wait(timeout=30)
    kbatch.Log.open(d, helper.config(), writable=True).close()


@pytest.fixture(scope="module")
def java():
    exe = shutil.which("java")
    if exe is None:
        pytest.skip("no java on PATH (the broker-lock test runs Kafka's FileChannel.tryLock in a JVM)")
    return exe


def _hold_with_jvm(java, path):
    p = subprocess.Popen([java, str(HERE / "faults" / "LockHolder.java"), str(path)], stdin=subprocess.PIPE,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    line = p.stdout.readline().decode().strip()
    return p, line


def test_a_log_dir_held_by_a_jvm_like_a_broker_is_refused(tmp_path, java):
    """A running broker holds <log.dir>/.lock with FileChannel.tryLock (a POSIX record lock on
    Linux). kbatch writers refuse its partition directories; readers still read them."""
    logdir = tmp_path / "kafka-logs"
    d = logdir / "orders-0"
    helper.writer(str(d), str(tmp_path / "acks"), stop_after=5)
    jvm, line = _hold_with_jvm(java, logdir / ".lock")
    try:
        assert line == "locked", jvm.stderr.read().decode()
        with pytest.raises(LogDirectoryLockedError) as e:
            kbatch.Log.open(d, helper.config(), writable=True)
        assert "Kafka broker" in str(e.value) and str(jvm.pid) in str(e.value)
        with pytest.raises(LogDirectoryLockedError):
            kbatch.compact(d, NOW, index_interval_bytes=100)
        with pytest.raises(LogDirectoryLockedError):
            kbatch.rebuild_indexes(d)
        assert kbatch.Log.open(d).end_offset() > 0
        pytest.importorskip("typer")
        from kbatch.cli import main
        assert main(["compact", str(logdir), "--now", str(NOW)]) == 2
    finally:
        jvm.stdin.close()
        jvm.wait(timeout=60)
    kbatch.Log.open(d, helper.config(), writable=True).close()


def test_a_jvm_cannot_lock_what_a_kbatch_writer_holds(tmp_path, java):
    """The other way round: kbatch's open-file-description lock is seen by Java's tryLock."""
    d = tmp_path / "t-0"
    log = kbatch.Log.create(d, helper.config())
    try:
        jvm, line = _hold_with_jvm(java, d / ".lock")
        jvm.stdin.close()
        jvm.wait(timeout=60)
        assert line == "refused"
    finally:
        log.close()


# ------------------------------------------------------------------------------------ readers under writers
def test_reader_while_a_writer_rolls_and_deletes(tmp_path, backend):
    """Readers open, read and look up while another process appends, rolls and deletes segments:
    every view is consistent (contiguous offsets, valid CRCs, acknowledged appends byte for
    byte); a torn tail at the very end is the writer's append in flight, reported not raised."""
    d, acks = str(tmp_path / "t-0"), str(tmp_path / "acks")
    helper.writer(d, acks, stop_after=5)
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(r)
        try:
            os.write(w, b"x")
            helper.writer(d, acks, seed=1)
        finally:
            os._exit(3)
    os.close(w)
    os.read(r, 1)
    os.close(r)
    reads = checked = 0
    deadline = time.monotonic() + tier(1.5, 30)
    try:
        while time.monotonic() < deadline:
            log = kbatch.Log.open(d)
            try:
                seen = [(b.base_offset, b.last_offset, bytes(b.raw)) for b in log.batches()]
                start = log.log_start_offset
                hit = log.offset_for(0)
                assert hit is None or hit.offset >= start
                assert all("could not be read" in p for p in log.problems), log.problems
            finally:
                log.close()
            expect = start
            for base, last, _raw in seen:
                assert base == expect
                expect = last + 1
            by_base = {base: raw for base, _last, raw in seen}
            for i, first, last, digest in helper.read_acks(acks):
                if first in by_base and last < expect:
                    got, off = b"", first
                    while off <= last:
                        raw = by_base[off]
                        got += raw
                        off = next(la for b, la, _ in seen if b == off) + 1
                    assert helper.sha(got) == digest
                    checked += 1
            reads += 1
    finally:
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
    assert reads >= 2
    report("reader under a writer", reads=reads, acks_checked=checked)


def test_reader_held_across_a_compaction_swap(tmp_path, backend):
    """A reader opened before compact() swapped the segments answers from the old generation
    throughout: no CorruptRecordError, the same lookups as before."""
    d = tmp_path / "t-0"
    keyed_log(d)
    reader = kbatch.Log.open(d)
    try:
        targets = list(range(-1, 75, 3))
        before = [reader.offset_for(t) for t in targets]
        fresh = kbatch.Log.open(d)
        old_records = [(r.offset, bytes(r.value)) for b in fresh.batches() for r in b]
        fresh.close()
        reader2 = kbatch.Log.open(d)  # opened before, indexes not yet read
        stats = kbatch.compact(d, NOW)
        assert stats.segments_cleaned > 0
        assert [reader2.offset_for(t) for t in targets] == before
        assert [reader2.offset_for(kbatch.MAX_TIMESTAMP), reader2.end_offset()] == \
            [reader.offset_for(kbatch.MAX_TIMESTAMP), reader.end_offset()]
        assert [(r.offset, bytes(r.value)) for b in reader2.batches() for r in b] == old_records
        assert not reader2.problems
        reader2.close()
        assert len(records(d)) < len(old_records)  # a new reader sees the compacted log
    finally:
        reader.close()


def test_file_truncated_under_a_reader(tmp_path):
    """Another process truncates segment files under an open reader: the reader gets a kbatch
    error (or the bytes it already read), never SIGBUS."""
    d = tmp_path / "t-0"
    keyed_log(d)

    def child():
        log = kbatch.Log.open(d)
        outcomes = []
        for p in sorted(d.iterdir()):
            if p.suffix in (".log", ".index", ".timeindex"):
                os.truncate(p, p.stat().st_size // 3)
        for what in ("batches", "lookup", "latest", "max"):
            try:
                if what == "batches":
                    sum(len(b.records()) for b in log.batches())
                elif what == "lookup":
                    [log.offset_for(t) for t in range(0, 70, 7)]
                elif what == "latest":
                    log.end_offset()
                else:
                    log.offset_for(kbatch.MAX_TIMESTAMP)
                outcomes.append("ok")
            except FileChangedError:
                outcomes.append("FileChangedError")
        log.close()
        return outcomes

    status, out = helper.in_child(child)
    assert os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0, (status, out)
    assert "FileChangedError" in out["result"], out
