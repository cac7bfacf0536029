"""Fault-injection helpers for kbatch's storage layer (tests/system/test_faults.py).

- `writer`: appends forever with frequent rolls, retention and flushes, logging every append the
  Log acknowledged (returned from `append`) to a separate file, one fsynced line per append:
  `i first_offset last_offset sha256(bytes appended)`. Batches are built with the offsets the
  log will give them, so what is on disk must equal them byte for byte.
- `check`: what must hold after any crash: a writer's open recovers; every acknowledged append
  that retention may not have removed is present byte for byte at its offsets; offsets are
  contiguous; indexes verify; nothing is left over.
- `kill_at(k)`: replace kbatch's crash-point hook so that the k-th durable step (a rename, a
  truncation, a file created or deleted, a compaction step) SIGKILLs the process right there.
- `in_child(fn)`: run fn in a forked child; returns (wait status, JSON result or None).

As a program (a separate interpreter, for the tests that need a real second process):

    python tests/support/faults/helper.py writer DIR ACKS        append until killed
    python tests/support/faults/helper.py hold DIR               hold DIR open for writing until stdin closes
"""
from __future__ import annotations

import contextlib
import hashlib
import json
import os
import random
import signal
import sys
import traceback

import kbatch
from kbatch import _files as _io
from kbatch.log import files as _files

# small segments and index intervals: rolls, index entries and retention happen every few appends
CONFIG = dict(segment_bytes=1500, index_interval_bytes=100, retention_ms=60, segment_ms=10**12)
RETENTION_MS = CONFIG["retention_ms"]


def config(**kw) -> kbatch.LogConfig:
    return kbatch.LogConfig(**{**CONFIG, **kw})


def make_batches(i: int, base_offset: int) -> list[bytes]:
    """Append number i: one batch (sometimes two), 1-4 records stamped i, sizes and codec from i."""
    rng = random.Random(i)
    out, off = [], base_offset
    for _ in range(1 if rng.random() < 0.8 else 2):
        codec = kbatch.Compression.LZ4 if rng.random() < 0.3 else kbatch.Compression.NONE
        b = kbatch.BatchBuilder(base_offset=off, compression=codec, timestamp_extended=False)
        n = rng.randint(1, 4)
        for j in range(n):
            b.append(i, b"key-%d" % rng.randint(0, 50), rng.randbytes(rng.randint(5, 180)))
        out.append(b.build())
        off += n
    return out


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def read_acks(path) -> list[tuple]:
    """The complete ack lines (a kill mid-line leaves a partial last line, which is no ack)."""
    try:
        with open(path, "rb") as f:
            text = f.read().decode()
    except FileNotFoundError:
        return []
    lines = text.split("\n")[:-1]  # the part after the last newline is not a complete line
    return [(int(a), int(b), int(c), d) for a, b, c, d in (line.split() for line in lines)]


def record_ack(fd: int, i: int, first: int, last: int, digest: str) -> None:
    os.write(fd, f"{i} {first} {last} {digest}\n".encode())
    os.fsync(fd)


def open_log(directory, **kw):
    if os.path.isdir(directory) and _files.list_segment_bases(directory):
        return kbatch.Log.open(directory, config(**kw), writable=True)
    return kbatch.Log.create(directory, config(**kw))


def split_writes(pause_s: float = 0.0005) -> None:
    """Make every write of more than 64 bytes a short write of half the bytes followed by a pause,
    so that a kill can land inside a batch (kbatch continues a short write; a power cut or a full
    disk can stop it there). For a forked writer only."""
    import time
    real = os.pwrite

    def half(fd, data, offset):
        if len(data) > 64:
            n = real(fd, bytes(memoryview(data)[:len(data) // 2]), offset)
            time.sleep(pause_s)
            return n
        return real(fd, data, offset)
    os.pwrite = half


def writer(directory, ack_path, *, stop_after: int | None = None, seed: int = 0) -> int:
    """Append forever (or `stop_after` appends): roll, retain, flush, close and reopen now and
    then. Returns the number of appends made."""
    rng = random.Random(seed)
    i = len(read_acks(ack_path))
    os.makedirs(os.path.dirname(os.path.abspath(ack_path)), exist_ok=True)
    fd = os.open(ack_path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    log = open_log(directory)
    made = 0
    try:
        while stop_after is None or made < stop_after:
            batches = make_batches(i, log.end_offset())
            data = b"".join(batches)
            info = log.append(data, now_ms=i, from_client=False)
            record_ack(fd, i, info.first_offset, info.last_offset, sha(data))
            log.delete_old_segments(now_ms=i)
            if rng.random() < 0.15:
                log.flush()
            if rng.random() < 0.04:
                log.close()
                log = open_log(directory)
            i += 1
            made += 1
    finally:
        log.close()
        os.close(fd)
    return made


def check(directory, ack_path) -> dict:
    """Recover (a writer's open) and check everything the faults may not break. Raises
    AssertionError with the reason; returns counts."""
    acks = read_acks(ack_path)
    log = kbatch.Log.open(directory, config(), writable=True)
    try:
        report = log.recovery
        batches = [(b.base_offset, b.last_offset, bytes(b.raw)) for b in log.batches()]
        start, end = log.log_start_offset, log.end_offset()
        problems = list(log.problems)
    finally:
        log.close()
    assert not problems, problems
    assert not [n for n in os.listdir(directory)
                if n.endswith((".cleaned", ".swap", ".deleted", ".tmp")) or n.startswith(".kbatch-cleaner")], \
        sorted(os.listdir(directory))
    # offsets contiguous from the log start to the end
    expect = start
    for base, last, _raw in batches:
        assert base == expect, f"offset gap: batch at {base}, expected {expect}"
        expect = last + 1
    assert expect == end, (expect, end)
    by_base = {base: (last, raw) for base, last, raw in batches}
    last_i = acks[-1][0] if acks else -1
    present = removed = 0
    for i, first, last, digest in acks:
        if first < start:
            # retention may remove a segment whose largest timestamp (>= i) is older than
            # now - retention.ms, and the writer's clock never passed last_i + 1
            assert i < last_i + 1 - RETENTION_MS, f"acknowledged append {i} ({first}..{last}) is gone"
            removed += 1
            continue
        got, off = b"", first
        while off <= last:
            assert off in by_base, f"acknowledged append {i}: no batch starts at offset {off}"
            blast, raw = by_base[off]
            got += raw
            off = blast + 1
        assert off == last + 1 and sha(got) == digest, f"acknowledged append {i} ({first}..{last}) differs"
        present += 1
    v = kbatch.verify_indexes(directory, index_interval_bytes=CONFIG["index_interval_bytes"])
    assert v.ok and v.matches_rebuild, str(v)  # valid, and exactly what a broker's recovery writes
    return dict(acks=len(acks), present=present, removed_by_retention=removed, batches=len(batches),
                truncated_bytes=report.truncated_bytes, recovered_segments=len(report.recovered_segments),
                cleaned_up=list(report.cleaned_up))


def indexes_exact(directory, index_interval_bytes=CONFIG["index_interval_bytes"]) -> bool:
    """The indexes are valid and exactly what a broker's recovery writes for the .log files."""
    v = kbatch.verify_indexes(directory, index_interval_bytes=index_interval_bytes)
    return v.ok and v.matches_rebuild


def append_one(directory, ack_path) -> None:
    """The log accepts appends: one more, acknowledged like the writer's."""
    i = len(read_acks(ack_path))
    fd = os.open(ack_path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    log = open_log(directory)
    try:
        data = b"".join(make_batches(i, log.end_offset()))
        info = log.append(data, now_ms=i, from_client=False)
        record_ack(fd, i, info.first_offset, info.last_offset, sha(data))
    finally:
        log.close()
        os.close(fd)


# ------------------------------------------------------------------------------------ crash points
def kill_at(k: int, names: list | None = None) -> None:
    """SIGKILL this process at the k-th crash point from now (1-based); `names` collects them."""
    count = [0]

    def hook(name):
        count[0] += 1
        if names is not None:
            names.append(name)
        if count[0] == k:
            os.kill(os.getpid(), signal.SIGKILL)
    _io.crash_point = hook


@contextlib.contextmanager
def recording_crash_points(names: list):
    """Collect the names of the crash points passed while the block runs."""
    orig = _io.crash_point
    _io.crash_point = names.append
    try:
        yield names
    finally:
        _io.crash_point = orig


def in_child(fn, *args, **kw):
    """fn(*args, **kw) in a forked child. Returns (wait status, its JSON-able result or None);
    an exception in the child comes back as {"error": traceback}."""
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child never returns to the caller
        os.close(r)
        code = 0
        try:
            out = {"result": fn(*args, **kw)}
        except BaseException:  # noqa: BLE001 - reported to the parent
            out, code = {"error": traceback.format_exc()}, 1
        try:
            os.write(w, json.dumps(out, default=str).encode())
        finally:
            os._exit(code)
    os.close(w)
    chunks = []
    while True:
        c = os.read(r, 65536)
        if not c:
            break
        chunks.append(c)
    os.close(r)
    _, status = os.waitpid(pid, 0)
    data = b"".join(chunks)
    return status, (json.loads(data) if data else None)


def snapshot(directory) -> dict:
    """Every file's bytes (the writers' `.lock` aside)."""
    out = {}
    for name in sorted(os.listdir(directory)):
        p = os.path.join(directory, name)
        if name != _files.LOCK_FILE and os.path.isfile(p):
            with open(p, "rb") as f:
                out[name] = f.read()
    return out


def main(argv) -> int:
    cmd = argv[0]
    if cmd == "writer":
        writer(argv[1], argv[2], seed=int(argv[3]) if len(argv) > 3 else 0)
        return 0
    if cmd == "hold":
        log = open_log(argv[1])
        print("holding", flush=True)
        sys.stdin.read()
        log.close()
        return 0
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
