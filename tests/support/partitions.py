"""Partition directories with known transactions and known damage, for the read path's tests
(kbatch.log.fetch) and the commands on top of it (cat, reindex, verify, serve).

Every builder writes through `kbatch.Log` (so `.index`/`.timeindex` are a writer's) and returns a
`Built` naming what a Kafka consumer should see. The damage builders change bytes afterwards, as a
crash or a bad disk would.
"""
from __future__ import annotations

import os
import struct
from typing import NamedTuple

import kbatch

NOW = 1_714_554_000_000
PID_COMMIT, PID_ABORT, PID_OPEN, PID_LATE = 1000, 1001, 1002, 1003


class Built(NamedTuple):
    path: str
    uncommitted: list[int]        # offsets of every data record (read_uncommitted)
    committed: list[int]          # offsets a read_committed consumer gets
    txnindex: dict[int, bytes]    # segment base offset -> the .txnindex bytes a broker writes (by hand, 5.5)


def aborted_txn_entry(pid: int, first: int, last: int, lso: int) -> bytes:
    """One AbortedTxn as kafka-format.md 5.5 lays it out: int16 version 0, then producer id, first
    offset, last offset (the ABORT marker's), last stable offset, int64 big-endian: 34 bytes."""
    return struct.pack(">hqqqq", 0, pid, first, last, lso)


def _data(pid: int, seq: int, n: int, transactional: bool, tag: str) -> bytes:
    b = kbatch.BatchBuilder(producer_id=pid, producer_epoch=0 if pid >= 0 else -1,
                            base_sequence=seq if pid >= 0 else -1, is_transactional=transactional)
    for i in range(n):
        b.append(NOW + seq + i, f"{tag}-k{i}".encode(), f"{tag}-v{seq + i}".encode())
    return b.build()


def _marker(pid: int, commit: bool) -> bytes:
    return kbatch.build_end_txn_marker(producer_id=pid, producer_epoch=0, commit=commit, coordinator_epoch=3,
                                       timestamp=NOW)


def transactional(path: str, *, txn_index: bool = True, open_txn: bool = True, segment_bytes: int = 600) -> Built:
    """Small segments (a transaction spans several), offsets:

        0-1    plain
        2-4    committed txn of PID_COMMIT (two batches: 2-3, 4)
        5-6    aborted txn of PID_ABORT, first batch          (interleaved with the next)
        7-8    plain
        9      PID_ABORT again (same transaction)
        10     COMMIT marker of PID_COMMIT
        11     ABORT marker of PID_ABORT -> .txnindex (1001, 5, 11, 12)
        12-13  plain
        14-15  aborted txn of PID_LATE, 16 its ABORT marker   -> (1003, 14, 16, 17) or, with the open
        (open) 17-18 open txn of PID_OPEN (no marker): LSO 17       transaction before it, see below
        19     plain (after the LSO: read_committed stops at 17)

    With open_txn the open transaction starts at 14 instead (before PID_LATE's), so PID_LATE's entry
    names last stable offset 14. txn_index=False removes every .txnindex afterwards (a directory
    from a writer that kept none)."""
    log = kbatch.Log.create(path, kbatch.LogConfig(segment_bytes=segment_bytes), now_ms=NOW)
    a = lambda data: log.append(data, now_ms=NOW, from_client=False)  # noqa: E731
    try:
        a(_data(-1, 0, 2, False, "plain"))
        a(_data(PID_COMMIT, 0, 2, True, "c"))
        a(_data(PID_COMMIT, 2, 1, True, "c"))
        a(_data(PID_ABORT, 0, 2, True, "x"))
        a(_data(-1, 7, 2, False, "plain"))
        a(_data(PID_ABORT, 2, 1, True, "x"))
        a(_marker(PID_COMMIT, True))
        a(_marker(PID_ABORT, False))
        a(_data(-1, 12, 2, False, "plain"))
        if open_txn:
            a(_data(PID_OPEN, 0, 1, True, "o"))          # 14
            a(_data(PID_LATE, 0, 2, True, "l"))          # 15-16
            a(_marker(PID_LATE, False))                  # 17
            a(_data(PID_OPEN, 1, 1, True, "o"))          # 18
            a(_data(-1, 19, 1, False, "plain"))          # 19
            uncommitted = [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 12, 13, 14, 15, 16, 18, 19]
            committed = [0, 1, 2, 3, 4, 7, 8, 12, 13]    # LSO 14: the open transaction's first offset
            late = (PID_LATE, 15, 17, 14)
        else:
            a(_data(PID_LATE, 0, 2, True, "l"))          # 14-15
            a(_marker(PID_LATE, False))                  # 16
            a(_data(-1, 17, 1, False, "plain"))          # 17
            uncommitted = [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 12, 13, 14, 15, 17]
            committed = [0, 1, 2, 3, 4, 7, 8, 12, 13, 17]
            late = (PID_LATE, 14, 16, 17)
        bases = [s.base_offset for s in log.segments]
    finally:
        log.close()

    def seg_of(offset: int) -> int:
        return max(b for b in bases if b <= offset)

    want: dict[int, bytes] = {}
    for pid, first, last, lso in ((PID_ABORT, 5, 11, 12), late):
        want[seg_of(last)] = want.get(seg_of(last), b"") + aborted_txn_entry(pid, first, last, lso)
    if not txn_index:
        for name in os.listdir(path):
            if name.endswith(".txnindex"):
                os.unlink(os.path.join(path, name))
    return Built(path, uncommitted, committed, want)


def plain(path: str, *, batches: int = 40, per_batch: int = 5, segment_bytes: int = 1200) -> Built:
    """Plain batches over several segments (offsets 0 .. batches * per_batch - 1), an .index entry
    every batch or two (index.interval.bytes 100)."""
    log = kbatch.Log.create(path, kbatch.LogConfig(segment_bytes=segment_bytes, index_interval_bytes=100),
                            now_ms=NOW)
    try:
        for k in range(batches):
            log.append(_data(-1, k * per_batch, per_batch, False, "p"), now_ms=NOW, from_client=False)
    finally:
        log.close()
    offs = list(range(batches * per_batch))
    return Built(path, offs, offs, {})


def segment_logs(path: str) -> list[str]:
    return sorted(os.path.join(path, n) for n in os.listdir(path) if n.endswith(".log"))


def batch_positions(log_path: str) -> list[tuple[int, int, int]]:
    """[(position, base offset, last offset)] of the batches of a .log."""
    from kbatch.record.file_records import FileRecords

    f = FileRecords(log_path)
    try:
        return [(b.position, b.base_offset, b.last_offset) for b in f.batches(verify_crc=False)]
    finally:
        f.close()


def tear_middle_segment(path: str, index: int = 1) -> tuple[str, int, int]:
    """Cut segment `index` (not the last) in the middle of a batch, as a torn write would leave it;
    its index files stay. Returns (the .log, the first offset lost, the next segment's base)."""
    logs = segment_logs(path)
    assert 0 < index + 1 < len(logs), "a middle segment"
    target = logs[index]
    rows = batch_positions(target)
    pos, base, _last = rows[len(rows) // 2]
    with open(target, "r+b") as f:
        f.truncate(pos + 20)
    nxt = int(os.path.basename(logs[index + 1])[:20])
    return target, base, nxt


def bad_length_field(path: str, index: int = 0) -> tuple[str, int, int]:
    """Set the length field of the middle batch of segment `index` past the end of the file (one
    flipped high byte): the batches after it are intact, reachable only through the .index.
    Returns (the .log, the damaged batch's position, its base offset)."""
    target = segment_logs(path)[index]
    rows = batch_positions(target)
    pos, base, _last = rows[len(rows) // 2]
    with open(target, "r+b") as f:
        f.seek(pos + 8)
        f.write(b"\x01")  # high byte of the int32 batchLength: 16 MB more than the file holds
    return target, pos, base


def snapshot(path: str) -> dict[str, bytes]:
    """Every file of a directory (name -> bytes), to show a command changed nothing."""
    return {n: open(os.path.join(path, n), "rb").read() for n in sorted(os.listdir(path))
            if os.path.isfile(os.path.join(path, n)) and n != ".lock"}


def stale_txn_index(path: str) -> int:
    """Make the `.txnindex` files stale: every segment gets one (an empty file where there was
    none, so a reader takes the files as the whole answer) and the last entry of the last file
    that has one is cut off, as an index written before its ABORT marker's entry would be.
    Returns the cut entry's ABORT marker offset."""
    last_file = None
    for log_path in segment_logs(path):
        idx = log_path[:-len(".log")] + ".txnindex"
        if not os.path.exists(idx):
            open(idx, "wb").close()
        elif os.path.getsize(idx):
            last_file = idx
    assert last_file is not None, "no .txnindex entry to cut"
    with open(last_file, "r+b") as f:
        data = f.read()
        f.truncate(len(data) - 34)
    return struct.unpack_from(">q", data, len(data) - 34 + 18)[0]
