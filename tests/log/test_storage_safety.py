"""Issue 15, "storage you can trust": one named regression test per finding (item1_... item10_),
each failing before the fix. Kafka's storage layer (LogSegment.recover, LogLoader, LogCleaner,
the `.lock` file) is the reference; where kbatch differs on purpose, the test says so.
Kernel-backed paths (batch scanning, index search, record decoding) run on both backends.
The fault-injection loops (kills, full disks, concurrent writers and readers) are in test_faults.py.
"""
from __future__ import annotations

import errno
import mmap
import os
import stat
import struct
import subprocess
import sys
import threading
from pathlib import Path

import pytest

import kbatch
from kbatch.log import files as _files
from kbatch.errors import (CorruptRecordError, FileChangedError, InvalidConfigurationError, KBatchError,
                           LogDirectoryLockedError, LogWriteError, SegmentTooLargeError, StorageError,
                           UncleanablePartitionError)
from kbatch.log.segment import FileRecords, MAX_SEGMENT_BYTES, build_indexes

NOW = 1_700_000_000_000
SEG = "00000000000000000000"


def batch(base, n=3, ts=NOW, value_size=40, codec=kbatch.Compression.NONE):
    b = kbatch.BatchBuilder(base_offset=base, timestamp_extended=False, compression=codec)
    for j in range(n):
        b.append(ts + base + j, b"k%d" % ((base + j) % 7), bytes([65 + (base + j) % 26]) * value_size)
    return b.build()


def batches(n, per=3, start=0, **kw):
    return [batch(start + i * per, per, **kw) for i in range(n)]


def write_log(d: Path, data: bytes, base: int = 0) -> Path:
    d.mkdir(parents=True, exist_ok=True)
    p = d / f"{base:020d}.log"
    p.write_bytes(data)
    return p


def files(d: Path) -> dict:
    return {p.name: p.read_bytes() for p in sorted(d.iterdir()) if p.is_file() and p.name != ".lock"}


def indexes_exact(d, interval=4096) -> bool:
    """Valid, and exactly what rebuild_indexes writes."""
    v = kbatch.verify_indexes(d, index_interval_bytes=interval)
    return v.ok and v.matches_rebuild


def offsets(d) -> list:
    log = kbatch.Log.open(d)
    try:
        return [r.offset for b in log.batches() for r in b]
    finally:
        log.close()


@pytest.fixture
def cli_main():
    pytest.importorskip("typer")
    from kbatch.cli import main
    return main


# ------------------------------------------------------------------------------------ item 1
@pytest.mark.parametrize("tail", ["zeros", "bad magic", "size below minimum"])
def test_recovery_keeps_every_valid_batch_before_a_bad_header(backend, tmp_path, tail):
    """Kafka's LogSegment.recover truncates to the end of the last valid batch. The bad header is
    in the first scan window, after ten good batches: all ten stay."""
    good = b"".join(batches(10))
    bad = {"zeros": bytes(4096),
           "bad magic": batch(30)[:16] + b"\x07" + batch(30)[17:],
           "size below minimum": struct.pack(">qi", 30, 5) + bytes(40)}[tail]
    p = write_log(tmp_path / "t-0", good + bad)
    log = kbatch.Log.open(tmp_path / "t-0", kbatch.LogConfig(), writable=True)
    try:
        assert log.recovery.truncated_bytes == len(bad)
        assert log.end_offset() == 30
        log.append(batch(0, 1), now_ms=NOW, from_client=True)
    finally:
        log.close()
    assert p.read_bytes()[:len(good)] == good
    assert offsets(tmp_path / "t-0") == list(range(31))


def test_build_indexes_hands_out_the_batches_before_a_bad_header(backend):
    good = b"".join(batches(10))
    built = build_indexes(good + bytes(100), 0, 100, stop_on_error=True)
    assert built.valid_bytes == len(good) and built.last_offset == 29 and built.error is not None


def test_a_2gib_sparse_segment_keeps_its_ten_batches(backend, tmp_path):
    """A preallocated / power-cut 2 GiB segment holding 10 valid batches: recovery cuts only the
    zeros (before the fix it cut all 2 GiB). Only the first window is read."""
    good = b"".join(batches(10))
    p = write_log(tmp_path / "t-0", good)
    os.truncate(p, 2 << 30)
    log = kbatch.Log.open(tmp_path / "t-0", kbatch.LogConfig(), writable=True)
    try:
        assert log.recovery.truncated_bytes == (2 << 30) - len(good) and log.end_offset() == 30
    finally:
        log.close()
    assert p.stat().st_size == len(good) and p.read_bytes() == good


def test_a_read_only_open_reports_the_bad_tail_and_answers_from_the_good_batches(backend, tmp_path):
    good = b"".join(batches(10))
    write_log(tmp_path / "t-0", good + bytes(200))
    before = files(tmp_path / "t-0")
    log = kbatch.Log.open(tmp_path / "t-0")
    assert log.end_offset() == 30 and any("200 bytes" in p for p in log.problems)
    log.close()
    assert files(tmp_path / "t-0") == before


# ------------------------------------------------------------------------------------ item 2
def _fail_pwrite(monkeypatch, when, short=True, err=errno.ENOSPC):
    """Make the write to the file whose name ends with `when` write half, then fail with `err`."""
    real = os.pwrite
    state = {"fired": False}

    def fake(fd, data, offset):
        name = os.readlink(f"/proc/self/fd/{fd}") if os.path.exists(f"/proc/self/fd/{fd}") else ""
        if not state["fired"] and name.endswith(when):
            state["fired"] = True
            if short and len(data) > 1:
                return real(fd, bytes(data[:len(data) // 2]), offset)
            raise OSError(err, os.strerror(err))
        if state["fired"] and name.endswith(when) and short:
            state["fired"] = "done"
            raise OSError(err, os.strerror(err))
        return real(fd, data, offset)
    monkeypatch.setattr(os, "pwrite", fake)
    return state


@pytest.mark.skipif(not os.path.exists("/proc/self/fd"), reason="needs /proc/self/fd to aim the failure at one file")
@pytest.mark.parametrize("where,short,err", [(".log", True, errno.ENOSPC), (".log", False, errno.EFBIG),
                                             (".index", False, errno.ENOSPC), (".timeindex", True, errno.ENOSPC)])
def test_a_failed_append_leaves_the_files_as_they_were_and_the_log_usable(backend, tmp_path, monkeypatch,
                                                                                 where, short, err):
    d = tmp_path / "t-0"
    cfg = kbatch.LogConfig(index_interval_bytes=50, segment_bytes=100_000)
    log = kbatch.Log.create(d, cfg, now_ms=NOW)
    try:
        for i in range(5):
            log.append(batch(0, 3, ts=NOW + 10 * i), now_ms=NOW)
        before = files(d)
        state = _fail_pwrite(monkeypatch, where, short, err)
        with pytest.raises(LogWriteError) as e:
            log.append(batch(0, 3, ts=NOW + 100), now_ms=NOW)
        assert state["fired"] and e.value.errno == err and isinstance(e.value, OSError)
        assert files(d) == before
        monkeypatch.undo()  # space returns
        log.append(batch(0, 3, ts=NOW + 100), now_ms=NOW)
        assert log.end_offset() == 18
    finally:
        log.close()
    assert offsets(d) == list(range(18))
    assert indexes_exact(d, 50)


def test_a_failed_roll_is_undone(backend, tmp_path, monkeypatch):
    """The append that rolls fails while creating the new segment: no new files stay, the old
    segment's final time-index entry is taken back, and the log goes on."""
    d = tmp_path / "t-0"
    cfg = kbatch.LogConfig(segment_bytes=400, index_interval_bytes=50)
    log = kbatch.Log.create(d, cfg, now_ms=NOW)
    try:
        log.append(batch(0, 3), now_ms=NOW)
        log.append(batch(0, 3), now_ms=NOW)
        n = len(log.segments)
        before = files(d)
        real = os.open

        def fake(path, flags, *a):
            if str(path).endswith(".index") and flags & os.O_CREAT:
                raise OSError(errno.ENOSPC, "No space left on device")
            return real(path, flags, *a)
        monkeypatch.setattr(os, "open", fake)
        with pytest.raises(LogWriteError):
            log.append(batch(0, 3), now_ms=NOW)
        assert files(d) == before and len(log.segments) == n
        monkeypatch.undo()
        log.append(batch(0, 3), now_ms=NOW)
        assert len(log.segments) == n + 1
    finally:
        log.close()
    assert offsets(d) == list(range(9))


def test_unclean_shutdown_recovers_every_segment_past_the_recovery_point(backend, tmp_path):
    """After an unclean shutdown every segment from the recovery point on is read in full. A
    torn batch left in an inactive segment (what the old ENOSPC bug produced) is found. Kafka
    would truncate there and delete every later segment; kbatch refuses and changes nothing."""
    d = tmp_path / "t-0"
    cfg = kbatch.LogConfig(segment_bytes=300)
    log = kbatch.Log.create(d, cfg, now_ms=NOW)
    for i in range(3):
        log.append(batch(0, 3), now_ms=NOW)
    log.flush()  # recovery point: offset 9
    for i in range(4):
        log.append(batch(0, 3), now_ms=NOW)
    segs = sorted(p for p in d.iterdir() if p.suffix == ".log")
    log._lock.release()  # the process "dies": no clean shutdown recorded
    assert len(segs) >= 4
    victim = segs[-2]
    data = bytearray(victim.read_bytes())
    data[-5] ^= 0xFF  # a bit flip in the last batch of an inactive segment past the recovery point
    victim.write_bytes(bytes(data))
    before = files(d)
    with pytest.raises(CorruptRecordError) as e:
        kbatch.Log.open(d, cfg, writable=True)
    assert victim.name in str(e.value) and "kbatch changes nothing" in str(e.value)
    assert files(d) == before


def test_clean_shutdown_skips_the_inactive_segments_and_crash_recovery_covers_them(backend, tmp_path):
    d = tmp_path / "t-0"
    cfg = kbatch.LogConfig(segment_bytes=300)
    log = kbatch.Log.create(d, cfg, now_ms=NOW)
    for i in range(6):
        log.append(batch(0, 3), now_ms=NOW)
    log.close()
    assert (d / ".kbatch-recovery-checkpoint").read_text().splitlines()[1:] == ["recovery-point 18",
                                                                               "clean-shutdown true"]
    log = kbatch.Log.open(d, cfg, writable=True)
    assert log.recovery.recovered_segments == (log.active_segment.base_offset,)  # only the active one
    log._lock.release()  # crash
    log = kbatch.Log.open(d, cfg, writable=True)
    assert len(log.recovery.recovered_segments) == 1  # the open wrote recovery point 18: only the active
    log.close()
    (d / ".kbatch-recovery-checkpoint").unlink()  # no checkpoint (a broker's directory): everything
    log = kbatch.Log.open(d, cfg, writable=True)
    assert len(log.recovery.recovered_segments) == len(log.segments)
    log.close()


# ------------------------------------------------------------------------------------ item 3
def test_a_second_writer_is_refused_in_the_same_process(tmp_path):
    d = tmp_path / "t-0"
    log = kbatch.Log.create(d)
    try:
        for second in (lambda: kbatch.Log.open(d, kbatch.LogConfig(), writable=True),
                       lambda: kbatch.compact(d, NOW), lambda: kbatch.rebuild_indexes(d)):
            with pytest.raises(LogDirectoryLockedError) as e:
                second()
            assert isinstance(e.value, KBatchError) and isinstance(e.value, OSError)
            assert ".lock" in str(e.value)
    finally:
        log.close()
    kbatch.rebuild_indexes(d)


def test_a_second_writer_is_refused_in_another_process(tmp_path):
    d = tmp_path / "t-0"
    log = kbatch.Log.create(d)
    try:
        code = ("import kbatch, sys\n"
                "try:\n    kbatch.Log.open(sys.argv[1], kbatch.LogConfig(), writable=True)\n"
                "except kbatch.LogDirectoryLockedError as e:\n    print('refused:', e)\n")
        r = subprocess.run([sys.executable, "-c", code, str(d)], capture_output=True, text=True, timeout=120)
        assert r.stdout.startswith("refused:"), r.stdout + r.stderr
        assert f"(pid {os.getpid()}:" in r.stdout  # the other process is told who holds it
    finally:
        log.close()


def test_the_cli_write_commands_refuse_a_locked_directory(tmp_path, cli_main, capsys):
    d = tmp_path / "t-0"
    log = kbatch.Log.create(d)
    log.append(batch(0), now_ms=NOW)
    try:
        assert cli_main(["compact", str(d), "--now", str(NOW)]) == 2
        assert cli_main(["reindex", str(d)]) == 2
        err = capsys.readouterr().err
        assert "another writer holds" in err and f"this process, pid {os.getpid()}" in err  # the holder named
        assert cli_main(["verify", str(d), "-q"]) in (0, 1)  # readers are not refused
    finally:
        log.close()


# ------------------------------------------------------------------------------------ item 4
def test_a_truncated_file_gives_a_kbatch_error_not_sigbus(tmp_path):
    """The reader runs in a child process, so a regression (SIGBUS) fails the test, not the run."""
    d = tmp_path / "t-0"
    write_log(d, b"".join(batches(300)))
    code = ("import kbatch, os, sys\n"
            "log = kbatch.Log.open(sys.argv[1])\n"
            "p = os.path.join(sys.argv[1], '%s.log')\n"
            "os.truncate(p, os.path.getsize(p) // 4)\n"
            "try:\n    n = sum(1 for b in log.batches())\n    print('read', n)\n"
            "except kbatch.FileChangedError as e:\n    print('FileChangedError', e)\n" % SEG)
    r = subprocess.run([sys.executable, "-c", code, str(d)], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, (r.returncode, r.stderr)
    assert r.stdout.startswith("FileChangedError") and "truncated while being read" in r.stdout


def test_file_changed_error_is_a_kbatch_error_with_the_position(backend, tmp_path):
    p = write_log(tmp_path / "t-0", b"".join(batches(50)))
    f = FileRecords(p)
    os.truncate(p, 100)
    with pytest.raises(FileChangedError) as e:
        list(f.batches())
    assert e.value.position == 100 and isinstance(e.value, KBatchError)
    f.close()


# ------------------------------------------------------------------------------------ item 5
def test_a_reader_sees_one_generation_across_a_compaction_swap(backend, tmp_path):
    d = tmp_path / "t-0"
    cfg = kbatch.LogConfig(segment_bytes=600, index_interval_bytes=50)
    log = kbatch.Log.create(d, cfg, now_ms=NOW)
    for i in range(20):
        log.append(batch(0, 3, ts=NOW + 3 * i, value_size=30), now_ms=NOW)  # record i has timestamp NOW + i
    log.close()
    reader = kbatch.Log.open(d)  # indexes are read lazily: after the swap below
    before = [(r.offset, bytes(r.value)) for b in kbatch.Log.open(d).batches() for r in b]
    assert kbatch.compact(d, NOW, index_interval_bytes=50).segments_cleaned > 0
    assert [reader.offset_for(NOW + t) for t in range(0, 60, 5)]  # used to raise CorruptRecordError
    assert [(r.offset, bytes(r.value)) for b in reader.batches() for r in b] == before
    assert reader.offset_for(NOW + 31).offset == 31 and not reader.problems
    reader.close()


# ------------------------------------------------------------------------------------ item 6
def _corrupt_length_partition(d: Path):
    data = bytearray(b"".join(batches(12)))
    pos = len(b"".join(batches(5)))
    struct.pack_into(">i", data, pos + 8, 1_000_000)  # a length field that runs past the end
    write_log(d, bytes(data))
    write_log(d, b"".join(batches(2, start=36)), 36)


def test_compact_refuses_a_partition_it_cannot_read_in_full(backend, tmp_path, cli_main, capsys):
    d = tmp_path / "t-0"
    _corrupt_length_partition(d)
    before = files(d)
    with pytest.raises(UncleanablePartitionError) as e:
        kbatch.compact(d, NOW)
    assert "not a complete batch" in str(e.value) and "nothing was changed" in str(e.value)
    assert files(d) == before
    assert cli_main(["compact", str(d), "--now", str(NOW)]) == 1
    assert "cannot be compacted" in capsys.readouterr().err
    assert files(d) == before
    assert cli_main(["verify", str(d)]) == 1  # the evidence is still there


def test_compact_refuses_a_text_file_named_like_a_segment(tmp_path, cli_main):
    d = tmp_path / "t-0"
    write_log(d, b"this is a text file, not a Kafka segment\n" * 20)
    before = files(d)
    with pytest.raises(UncleanablePartitionError):
        kbatch.compact(d, NOW)
    assert cli_main(["compact", str(d), "--now", str(NOW)]) == 1
    assert files(d) == before


def _keyed(d: Path):
    log = kbatch.Log.create(d, kbatch.LogConfig(segment_bytes=500), now_ms=NOW)
    for i in range(12):
        log.append(batch(0, 4), now_ms=NOW)
    log.close()


def test_dry_run_writes_nothing_and_says_what_a_run_would_do(tmp_path, cli_main, capsys):
    d = tmp_path / "t-0"
    _keyed(d)
    before = files(d)
    dry = kbatch.compact(d, NOW, dry_run=True)
    assert files(d) == before and dry.dry_run and dry.records_removed > 0 and dry.bytes_saved > 0
    assert cli_main(["compact", str(d), "--now", str(NOW), "--dry-run"]) == 0
    assert "dry run, nothing written" in capsys.readouterr().out and files(d) == before
    real = kbatch.compact(d, NOW)
    assert (real.records_removed, real.bytes_saved) == (dry.records_removed, dry.bytes_saved)


def test_output_dir_writes_the_compacted_copy_and_leaves_the_input(tmp_path, cli_main):
    d, copy = tmp_path / "in" / "t-0", tmp_path / "ref" / "t-0"
    _keyed(d)
    import shutil
    shutil.copytree(d, copy)
    before = files(d)
    out = tmp_path / "out"
    assert cli_main(["compact", str(d), "--now", str(NOW), "--output", str(out)]) == 0
    assert files(d) == before
    kbatch.compact(copy, NOW)
    got, want = files(out / "t-0"), files(copy)
    assert {n: v for n, v in got.items() if n.endswith(".log")} == {n: v for n, v in want.items() if n.endswith(".log")}
    assert indexes_exact(out / "t-0")
    with pytest.raises(LogWriteError):  # an existing, non-empty output is never overwritten
        kbatch.compact(d, NOW, output_dir=out / "t-0")


# ------------------------------------------------------------------------------------ item 7
def _wrong_index_partition(d: Path) -> int:
    data = batches(600, per=3, value_size=60)
    write_log(d, b"".join(data))
    kbatch.rebuild_indexes(d)
    idx = d / f"{SEG}.index"
    raw = bytearray(idx.read_bytes())
    for i in range(len(raw) // 8):  # every entry points somewhere that is not its batch
        struct.pack_into(">i", raw, i * 8 + 4, struct.unpack_from(">i", raw, i * 8 + 4)[0] + 7)
    idx.write_bytes(bytes(raw))
    return 1800


def test_latest_is_not_answered_from_an_index_the_log_contradicts(backend, tmp_path, cli_main, capsys):
    d = tmp_path / "t-0"
    n = _wrong_index_partition(d)
    log = kbatch.Log.open(d)
    assert log.offset_for(kbatch.LATEST).offset == n
    assert log.offset_for(NOW + 1000).offset == 1000
    assert log.problems and all(".index entry" in p and "answering from a scan of the log" in p
                                for p in log.problems), log.problems
    log.close()
    code = cli_main(["offsets", str(d), "--latest"])
    out, err = capsys.readouterr()
    assert code == 1 and f"offset {n}" in out and "answering from a scan of the log" in err


@pytest.mark.parametrize("kind", ["text file", "bad length"])
def test_offsets_exits_1_on_bytes_it_cannot_read(backend, tmp_path, cli_main, capsys, kind):
    d = tmp_path / "t-0"
    if kind == "text file":
        write_log(d, b"hello, this is not a segment\n" * 60)
    else:
        _corrupt_length_partition(d)
        (d / "00000000000000000036.log").unlink()
    code = cli_main(["offsets", str(d), "--latest"])
    out, err = capsys.readouterr()
    assert code == 1 and "could not be read" in err


# ------------------------------------------------------------------------------------ item 8
@pytest.mark.parametrize("damage", ["truncated", "bit flip", "bad length"])
def test_validate_exits_1_and_names_what_it_could_not_read(tmp_path, cli_main, capsys, damage):
    d = tmp_path / "t-0"
    data = bytearray(b"".join(batches(10)))
    if damage == "truncated":
        data = data[:-30]
    elif damage == "bit flip":
        data[len(batch(0)) * 3 + 70] ^= 0x04
    else:
        struct.pack_into(">i", data, len(batch(0)) * 4 + 8, 99999)
    write_log(d, bytes(data))
    code = cli_main(["validate", str(d), "--now", str(NOW)])
    out = capsys.readouterr().out
    assert code == 1 and "NOT READ" in out and "cannot read" in out, out


# ------------------------------------------------------------------------------------ item 9
def test_the_demo_refuses_a_directory_it_did_not_make(tmp_path):
    precious = tmp_path / "mine"
    precious.mkdir()
    (precious / "thesis.tex").write_text("years of work")
    r = subprocess.run([sys.executable, "-m", "kbatch.demo", "--dir", str(precious), "--no-spark", "--records", "100"],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 2 and "not made by the demo" in r.stderr
    assert [p.name for p in precious.iterdir()] == ["thesis.tex"]


def test_the_demo_uses_an_empty_directory_and_replaces_only_its_own_topics(tmp_path):
    from kbatch import demo
    root = tmp_path / "sample"
    root.mkdir()
    demo.generate(str(root), records=150, now_ms=NOW)
    assert (root / demo.MARKER).exists() and (root / "orders-0").is_dir()
    (root / "notes.txt").write_text("added later by the user")
    demo.generate(str(root), records=150, now_ms=NOW)  # a marked directory: its topics are replaced
    assert (root / "notes.txt").read_text() == "added later by the user"


# ------------------------------------------------------------------------------------ item 10
def test_log_open_with_a_config_is_read_only(backend, tmp_path):
    d = tmp_path / "t-0"
    write_log(d, b"".join(batches(4)) + b"\x00\x01torn")
    before = {p.name: (p.read_bytes(), p.stat().st_mtime_ns) for p in d.iterdir()}
    log = kbatch.Log.open(d, kbatch.LogConfig())
    with pytest.raises(KBatchError, match="read-only"):
        log.append(batch(0), now_ms=NOW)
    log.close()
    assert {p.name: (p.read_bytes(), p.stat().st_mtime_ns) for p in d.iterdir()} == before


@pytest.mark.parametrize("mode", [0o644, 0o640, 0o664])
def test_rewritten_index_files_keep_their_mode(tmp_path, mode):
    d = tmp_path / "t-0"
    write_log(d, b"".join(batches(30)))
    kbatch.rebuild_indexes(d)
    for suffix in (".index", ".timeindex"):
        os.chmod(d / f"{SEG}{suffix}", mode)
        (d / f"{SEG}{suffix}").write_bytes(b"junk")
    kbatch.rebuild_indexes(d)
    for suffix in (".index", ".timeindex"):
        assert stat.S_IMODE((d / f"{SEG}{suffix}").stat().st_mode) == mode


def test_segments_over_2gib_are_a_kbatch_error(backend, tmp_path):
    with pytest.raises(InvalidConfigurationError):
        kbatch.LogConfig(segment_bytes=2**31)
    # an append that would take a segment past 2147483647 bytes (a sparse file, no disk used)
    p = tmp_path / f"{SEG}.log"
    p.write_bytes(b"")
    os.truncate(p, MAX_SEGMENT_BYTES - 10)
    f = FileRecords(p, writable=True)
    with pytest.raises(SegmentTooLargeError, match="2147483647"):
        f.append(batch(0))
    f.close()
    assert p.stat().st_size == MAX_SEGMENT_BYTES - 10
    # indexing a batch that starts past the int32 limit: a legacy message whose (unchecked) body
    # spans the first 2 GiB of a sparse file, then a real batch
    q = tmp_path / "big.log"
    head = struct.pack(">qiIbbii", 0, MAX_SEGMENT_BYTES - 112, 0, 0, 0, -1, 0)  # ends at byte 2**31 - 101
    with open(q, "wb") as f:
        f.write(head)
        f.seek(MAX_SEGMENT_BYTES - 100)
        f.write(batch(1))  # ends past byte 2147483647
    with open(q, "rb") as f:
        m = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
        try:
            with pytest.raises(SegmentTooLargeError, match="2147483647"):
                build_indexes(m, 0, verify_crc=False)
        finally:
            m.close()


def test_a_writer_removes_orphans_and_temp_files_a_kill_left(tmp_path):
    d = tmp_path / "t-0"
    log = kbatch.Log.create(d, kbatch.LogConfig(segment_bytes=300))
    for i in range(4):
        log.append(batch(0), now_ms=NOW)
    log.close()
    leftovers = ["00000000000000099999.index", "00000000000000099999.timeindex", f".{SEG}.index.0a1b2c3d4e5f.tmp",
                 "00000000000000000003.log.deleted", "..kbatch-recovery-checkpoint.00ff00ff00ff.tmp"]
    for n in leftovers:
        (d / n).write_bytes(b"x")
    (d / "notes.txt").write_text("not ours")
    log = kbatch.Log.open(d, kbatch.LogConfig(), writable=True)
    assert set(log.recovery.cleaned_up) == set(leftovers)
    log.close()
    assert not any((d / n).exists() for n in leftovers) and (d / "notes.txt").exists()


def _no_hang(fn, seconds=20):
    out = {}

    def run():
        try:
            out["value"] = fn()
        except BaseException as e:  # noqa: BLE001
            out["error"] = e
    t = threading.Thread(target=run, daemon=True)
    t.start()
    t.join(seconds)
    assert not t.is_alive(), "hung"
    return out


def test_a_fifo_named_like_a_segment_is_an_error_not_a_hang(tmp_path, cli_main):
    d = tmp_path / "t-0"
    write_log(d, b"".join(batches(3)))
    os.mkfifo(d / "00000000000000000009.log")
    for fn in (lambda: kbatch.Log.open(d), lambda: kbatch.compact(d, NOW), lambda: kbatch.verify_indexes(d)):
        out = _no_hang(fn)
        assert isinstance(out.get("error"), KBatchError), out
        assert "FIFO" in str(out["error"])
    assert _no_hang(lambda: cli_main(["verify", str(d)]))["value"] == 1
    assert _no_hang(lambda: cli_main(["compact", str(d), "--now", str(NOW)]))["value"] == 1


@pytest.mark.parametrize("kind", ["dangling symlink", "directory"])
def test_non_files_named_like_segments_give_kbatch_errors(tmp_path, cli_main, kind):
    d = tmp_path / "t-0"
    write_log(d, b"".join(batches(3)))
    bogus = d / "00000000000000000009.log"
    if kind == "directory":
        bogus.mkdir()
    else:
        bogus.symlink_to(tmp_path / "gone.log")
    with pytest.raises(StorageError, match="directory|symbolic link"):
        kbatch.Log.open(d)
    with pytest.raises(UncleanablePartitionError):
        kbatch.compact(d, NOW)
    assert cli_main(["verify", str(d)]) == 1
    assert cli_main(["offsets", str(d), "--latest"]) == 2


def test_a_retention_race_while_opening_is_retried(tmp_path, monkeypatch):
    """A segment deleted between listing and opening (another writer's retention) is not a crash:
    the reader lists again; if segments keep vanishing it says so with a kbatch error."""
    d = tmp_path / "t-0"
    log = kbatch.Log.create(d, kbatch.LogConfig(segment_bytes=300))
    for i in range(4):
        log.append(batch(0), now_ms=NOW)
    log.close()
    real = _files.list_segment_bases
    calls = []

    def racing(directory):
        calls.append(1)
        bases = real(directory)
        return [0] + bases if len(calls) == 1 and bases[0] != 0 else bases
    (d / f"{SEG}.log").rename(d / "gone")  # segment 0 "deleted by retention" after the listing
    monkeypatch.setattr(_files, "list_segment_bases", racing)
    log = kbatch.Log.open(d)
    assert len(calls) == 2 and log.segments[0].base_offset > 0
    log.close()
    monkeypatch.setattr(_files, "list_segment_bases", lambda directory: [0] + real(directory))
    with pytest.raises(FileChangedError, match="disappearing"):
        kbatch.Log.open(d)


def test_an_index_entry_for_an_append_in_flight_is_not_damage(backend, tmp_path):
    """A reader opened while a writer's batch was half on disk, the index entry for it already
    there when the reader reads the index: that entry describes bytes the reader does not see, so
    it is set aside (not reported as damage), and answers come from what the reader sees."""
    d = tmp_path / "t-0"
    data = b"".join(batches(60, value_size=80))
    p = write_log(d, data)
    kbatch.rebuild_indexes(d, index_interval_bytes=200)
    last_entry_pos = struct.unpack_from(">i", (d / f"{SEG}.index").read_bytes()[-8:], 4)[0]
    os.truncate(p, last_entry_pos + 30)  # the batch the last entry names is cut
    log = kbatch.Log.open(d)
    size = len(batch(0, value_size=80))  # every batch has the same size
    assert last_entry_pos % size == 0 and log.end_offset() == 3 * (last_entry_pos // size)
    assert all("could not be read" in m for m in log.problems) and log.problems
    assert log.offset_for(NOW + 10).offset == 10
    log.close()
