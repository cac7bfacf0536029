"""The one matrix of damaged and transactional partition directories every reader is held to
(issue 28): transactions committed, aborted and open, with, without and with a stale `.txnindex`
(tests/support/partitions.py); damage in a middle segment and in the active one (a torn write, a
bad length field, a CRC failure, a bad magic byte); and the damaged logs of
tests/support/damaged_logs.py (bad length fields past the end or into a batch, a CRC flip, a
timestamp changed with its CRC fixed, garbage and missing indexes, an old broker's in-batch time
index).

`CASES[name](path)` builds the partition directory `path` (its last element names the topic and
partition, e.g. `.../t-0`); `expected(path, isolation, skip)` is what the read path
(kbatch.log.fetch.read_log) gives there: the oracle of tests/spark/test_spark_read_path.py and
tests/system/test_read_path_differential.py.
"""
from __future__ import annotations

import os

import kbatch
from kbatch.log.fetch import IsolationLevel, UnreadableDataError, read_log

from . import damaged_logs as D
from . import partitions as P

D = D  # (damaged_logs, for the tests: D.TS0)


def _flip(log_path: str, which: int) -> None:
    """Flip a bit near the end (the last record's value) of batch number `which` of a .log: its
    CRC no longer matches."""
    rows = P.batch_positions(log_path)
    pos, _base, _last = rows[which]
    nxt = rows[which + 1][0] if which + 1 < len(rows) else os.path.getsize(log_path)
    with open(log_path, "r+b") as f:
        f.seek(nxt - 3)
        b = f.read(1)
        f.seek(nxt - 3)
        f.write(bytes([b[0] ^ 0x01]))


def _tear_active(path: str) -> None:
    last = P.segment_logs(path)[-1]
    rows = P.batch_positions(last)
    with open(last, "r+b") as f:
        f.truncate(rows[-1][0] + 30)


def _crc_middle(path: str) -> None:
    seg = P.segment_logs(path)[1]
    _flip(seg, len(P.batch_positions(seg)) // 2)


def _crc_active(path: str) -> None:
    seg = P.segment_logs(path)[-1]
    _flip(seg, 0)


def _crc_marker(path: str) -> None:
    """The COMMIT marker (offset 10) of the transactional partition: its CRC fails."""
    for seg in P.segment_logs(path):
        for k, (_pos, base, _last) in enumerate(P.batch_positions(seg)):
            if base == 10:
                _flip(seg, k)
                return
    raise AssertionError("no batch at offset 10")


def _tear_at_marker(path: str) -> None:
    """Cut the sealed segment holding offset 10 (the COMMIT marker of the transaction from 2; 11,
    PID_ABORT's ABORT marker, follows it) 20 bytes into that marker: damage hides both markers, and
    the segment after it is intact (issue 38: read_committed used to stop at offset 2 silently)."""
    for seg in P.segment_logs(path)[:-1]:
        for pos, base, _last in P.batch_positions(seg):
            if base == 10:
                with open(seg, "r+b") as f:
                    f.truncate(pos + 20)
                return
    raise AssertionError("no marker at offset 10 in a sealed segment")


def _forge_base(delta: int):
    """Add `delta` to the base offset of the middle batch of segment 1 (Kafka's CRC does not cover
    it): too high, readers used to stop there silently; too low, to give offsets twice."""
    def forge(path: str) -> None:
        import struct

        seg = P.segment_logs(path)[1]
        rows = P.batch_positions(seg)
        pos, base, _last = rows[len(rows) // 2]
        with open(seg, "r+b") as f:
            f.seek(pos)
            f.write(struct.pack(">q", base + delta))
    return forge


def _bad_magic_active(path: str) -> None:
    """The magic byte of the active segment's middle batch is 7."""
    seg = P.segment_logs(path)[-1]
    rows = P.batch_positions(seg)
    with open(seg, "r+b") as f:
        f.seek(rows[len(rows) // 2][0] + 16)
        f.write(b"\x07")


def _damaged(damage):
    """A damaged_logs partition (60 batches of 10 records in 2 segments) at `path`, then `damage`."""
    def build(path: str) -> None:
        part = D.build_partition(os.path.dirname(path), batches=60, segments=2, name=os.path.basename(path))
        damage(part)
    return build


def _old_broker(path: str) -> None:
    D.old_broker_partition(os.path.dirname(path), batches=40, name=os.path.basename(path))


CASES = {
    "txn-open": lambda p: P.transactional(p),
    "txn-open-no-txnindex": lambda p: P.transactional(p, txn_index=False),
    "txn-closed": lambda p: P.transactional(p, open_txn=False),
    "txn-closed-no-txnindex": lambda p: P.transactional(p, open_txn=False, txn_index=False),
    "txn-stale-txnindex": lambda p: (P.transactional(p, open_txn=False), P.stale_txn_index(p)),
    "txn-torn-middle": lambda p: (P.transactional(p, open_txn=False, txn_index=False, segment_bytes=400),
                                  P.tear_middle_segment(p, 1)),
    "torn-middle": lambda p: (P.plain(p), P.tear_middle_segment(p, 1)),
    "bad-length-middle": lambda p: (P.plain(p), P.bad_length_field(p, 0)),
    "crc-middle": lambda p: (P.plain(p), _crc_middle(p)),
    "torn-active": lambda p: (P.plain(p), _tear_active(p)),
    "bad-length-active": lambda p: (P.plain(p), P.bad_length_field(p, len(P.segment_logs(p)) - 1)),
    "crc-active": lambda p: (P.plain(p), _crc_active(p)),
    "crc-marker": lambda p: (P.transactional(p, open_txn=False), _crc_marker(p)),
    "bad-magic-active": lambda p: (P.plain(p), _bad_magic_active(p)),
    "txn-markers-torn": lambda p: (P.transactional(p, open_txn=False, segment_bytes=400), _tear_at_marker(p)),
    "txn-markers-torn-no-txnindex": lambda p: (P.transactional(p, open_txn=False, txn_index=False, segment_bytes=400),
                                               _tear_at_marker(p)),
    "forged-base-high": lambda p: (P.plain(p), _forge_base(1000)(p)),
    "forged-base-low": lambda p: (P.plain(p), _forge_base(-3)(p)),
    # tests/support/damaged_logs.py (batch 10 is in the first of the two segments)
    "dl-bad-length-past-end": _damaged(lambda part: D.bad_length(part, 10)),
    "dl-bad-length-into-batch": _damaged(lambda part: D.bad_length(part, 10, past_end=False)),
    "dl-crc-flip": _damaged(lambda part: D.crc_flip(part, 10, D.ts_of(900))),
    "dl-bad-timestamp-crc-fixed": _damaged(lambda part: D.bad_timestamp_crc_fixed(part, 10, D.ts_of(5))),
    "dl-garbage-index": _damaged(lambda part: D.garbage_index(part, 0)),
    "dl-missing-index": _damaged(lambda part: D.missing_index(part, 0)),
    "dl-old-broker": _old_broker,
}

#: the cases both Spark readers run by default (each Spark read costs about a second: the
#: damaged_logs.py cases join them with KBATCH_READ_PATH_FULL=1; the other readers run every case)
SPARK_CASES = {n: b for n, b in CASES.items()
               if not n.startswith("dl-") or os.environ.get("KBATCH_READ_PATH_FULL", "") not in ("", "0")}

#: the cases where read_log (from the log start, read_uncommitted) stops at bytes it cannot read
FAILING = {"txn-torn-middle", "torn-middle", "bad-length-middle", "crc-middle", "crc-active", "crc-marker",
           "bad-magic-active", "txn-markers-torn", "txn-markers-torn-no-txnindex", "forged-base-high",
           "forged-base-low", "dl-bad-length-past-end", "dl-bad-length-into-batch", "dl-crc-flip"}
#: the transactional cases (read_committed leaves records out)
TRANSACTIONAL = {"txn-open", "txn-open-no-txnindex", "txn-closed", "txn-closed-no-txnindex", "txn-stale-txnindex"}

ISOLATION = {"read_uncommitted": IsolationLevel.READ_UNCOMMITTED, "read_committed": IsolationLevel.READ_COMMITTED}


def expected(part: str, isolation: IsolationLevel, skip: bool):
    """(records as (offset, key, value, timestamp ms), the UnreadableRange it stopped at or None,
    every unreadable range met) by read_log from the log start."""
    log = kbatch.Log.open(part)
    try:
        res = read_log(log, log.beginning_offset(), isolation=isolation, skip_unreadable=skip)
        rows = []
        try:
            for _b, r in res.records():
                rows.append((r.offset, None if r.key is None else bytes(r.key),
                             None if r.value is None else bytes(r.value), r.timestamp))
        except UnreadableDataError as e:
            return rows, e.range, list(res.unreadable)
        return rows, None, list(res.unreadable)
    finally:
        log.close()


def build_all(root: str, names=None) -> dict[str, str]:
    """Every case (or `names`) as `<root>/<case>-0`: case -> its partition directory."""
    out = {}
    for name in names or CASES:
        part = os.path.join(root, f"{name}-0")
        CASES[name](part)
        out[name] = part
    return out
