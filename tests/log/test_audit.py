"""kbatch.log.audit: every planted anomaly (tests/support/audit_logs.py) is found exactly once, at
its offset, segment and byte position; the clean background and real brokers' logs give no
finding; hostile bytes (bit flips, truncation, forged lengths) give error findings, never a crash."""
from __future__ import annotations

import os
import random
import shutil
import struct
from pathlib import Path

import pytest

from kbatch import _wire as W
from kbatch.cli._common import resolve_segments
from kbatch.log.audit import AuditConfig, AuditResult, audit_partitions, read_properties
from kbatch.log.findings import Finding, Severity
from support.audit_logs import IDEM, NOW, PLANTS, PlantedLog, clean, planted

BROKERS = Path(__file__).resolve().parents[1] / "data" / "brokers"



@pytest.fixture(autouse=True)
def _summary_cache(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> None:
    """The header cache (kbatch.log.summary) of these tests is theirs, never the user's."""
    monkeypatch.setenv("KBATCH_SUMMARY_CACHE", str(tmp_path_factory.mktemp("summary-cache")))

def audit(path: str | os.PathLike[str], **options: object) -> AuditResult:
    return audit_partitions(resolve_segments(os.fspath(path)), AuditConfig(**options))  # type: ignore[arg-type]


def test_clean_background_has_no_finding(tmp_path: Path) -> None:
    log = clean(str(tmp_path / "orders-0"))
    log.write()
    res = audit(tmp_path)
    assert res.findings == []
    (s,) = [p.summary for p in res.partitions]
    assert (s["topic"], s["partition"], s["segments"], s["end_offset"]) == ("orders", 0, 2, log.next_offset)
    assert s["last_stable_offset"] == log.next_offset and s["open_transactions"] == 0
    assert res.clock == log.clock and res.clock_source == "log"


@pytest.mark.parametrize("name", sorted(PLANTS))
def test_planted_anomaly_found_once_with_its_location(tmp_path: Path, name: str, backend: object) -> None:
    log, plant = planted(str(tmp_path / "orders-3"), name)
    res = audit(tmp_path, **plant.options)
    assert [f.check for f in res.findings] == [plant.check], [f.text() for f in res.findings]
    (f,) = res.findings
    assert (f.topic, f.partition) == ("orders", 3)
    if plant.offset is not None:
        path, position = log.file_of(plant.offset)
        assert (f.first_offset, f.segment, f.position) == (plant.offset, path, position)
    else:
        assert f.segment is not None and f.position is not None and os.path.exists(f.segment)
    assert f.message and f.severity in Severity
    assert f.as_json()["severity"] == f.severity.label


def test_hanging_is_judged_by_the_log_clock_and_the_timeout(tmp_path: Path) -> None:
    planted(str(tmp_path / "t-0"), "hanging-transaction")
    (f,) = audit(tmp_path).findings
    assert f.details["started"] < f.details["clock"] - 900_000
    # a longer transaction.max.timeout.ms: still open, not hanging; the LSO is its first offset
    res = audit(tmp_path, transaction_max_timeout_ms=3_600_000)
    (f,) = res.findings
    assert (f.check, f.severity) == ("transaction.open", Severity.INFO)
    assert res.partitions[0].summary["last_stable_offset"] == f.first_offset
    # an explicit clock far later makes it hang again
    (f,) = audit(tmp_path, transaction_max_timeout_ms=3_600_000, now=NOW + 86_400_000).findings
    assert f.check == "transaction.hanging"


def test_future_timestamp_holds_back_retention(tmp_path: Path) -> None:
    planted(str(tmp_path / "t-0"), "future")
    (f,) = audit(tmp_path).findings
    assert f.details["retention_blocked_until"] == f.details["timestamp"] + 604_800_000


def test_sequence_gap_after_compaction_is_not_a_finding(tmp_path: Path) -> None:
    """The cleaner removes whole batches (offsets go missing with them): a producer's sequence
    then skips numbers across the hole, which is not lost data."""
    log = clean(str(tmp_path / "t-0"))
    log.data(2, pid=IDEM)
    log.seqs[(IDEM, 0)] += 4
    log.next_offset += 4  # the batch between them was compacted away
    log.data(2, pid=IDEM)
    log.data(1)
    log.write()
    assert audit(tmp_path).findings == []


def test_sequences_wrap_and_transactional_markers_keep_sequences(tmp_path: Path) -> None:
    log = PlantedLog(str(tmp_path / "t-0"))
    log.data(2, pid=7, seq=W.INT32_MAX - 1)
    log.data(3, pid=7, seq=0)  # Integer.MAX_VALUE wraps to 0
    log.data(2, pid=8, txn=True)
    log.marker(8)
    log.data(2, pid=8, txn=True)  # the same epoch's sequence goes on after the marker
    log.marker(8, commit=False)
    log.data(2, pid=8, epoch=1, txn=True, seq=0)  # a new epoch starts at 0
    log.marker(8, epoch=1)
    log.write()
    assert audit(tmp_path).findings == []


def test_findings_are_capped_per_check_and_partition(tmp_path: Path) -> None:
    log = clean(str(tmp_path / "t-0"))
    for _ in range(7):
        log.data(1, ts=-1000)
    log.data(1)
    log.write()
    fs = audit(tmp_path, max_findings=3).findings
    assert [f.check for f in fs] == ["timestamp.negative"] * 4
    assert fs[-1].details == {"more": 4} and "4 more" in fs[-1].message


def test_properties_files_broker_and_topic_names(tmp_path: Path) -> None:
    p = tmp_path / "server.properties"
    p.write_text("# broker\nbroker.id=1\nlog.message.timestamp.after.max.ms=60000\nmessage.max.bytes = 5000\n"
                 "log.retention.hours=24\ntransaction.max.timeout.ms: 120000\n")
    cfg = AuditConfig.from_properties(read_properties(str(p)))
    assert (cfg.after_max_ms, cfg.max_message_bytes, cfg.retention_ms, cfg.transaction_max_timeout_ms) == (
        60_000, 5000, 86_400_000, 120_000)
    assert cfg.before_max_ms == W.INT64_MAX
    # a topic's own name wins over the broker's
    cfg = AuditConfig.from_properties({"max.message.bytes": "10", "message.max.bytes": "20"})
    assert cfg.max_message_bytes == 10


@pytest.mark.parametrize("broker", sorted(d.name for d in BROKERS.iterdir() if d.is_dir()))
def test_real_broker_logs_give_no_finding(tmp_path: Path, broker: str) -> None:
    import lzma

    src = BROKERS / broker
    dst = tmp_path / broker
    shutil.copytree(src, dst)
    for xz in dst.rglob("*.xz"):  # kept compressed in the repository (tests/data/brokers/README.md)
        xz.with_suffix("").write_bytes(lzma.decompress(xz.read_bytes()))
        xz.unlink()
    res = audit(dst)
    assert res.partitions and sum(p.rows for p in res.partitions) > 0
    assert res.findings == [], [f.text() for f in res.findings]


def _mutations(data: bytes, rng: random.Random) -> list[tuple[str, bytes]]:
    out = []
    for _ in range(12):
        i = rng.randrange(len(data))
        b = bytearray(data)
        b[i] ^= 1 << rng.randrange(8)
        out.append((f"flip@{i}", bytes(b)))
    for _ in range(4):
        out.append((f"cut@{(n := rng.randrange(1, len(data)))}", data[:n]))
    starts = []
    pos = 0
    while pos < len(data):
        starts.append(pos)
        pos += struct.unpack_from(">i", data, pos + 8)[0] + 12
    for value in (0, 1, 60, 2**31 - 1, -5, 49):
        b = bytearray(data)
        struct.pack_into(">i", b, rng.choice(starts) + 8, value)
        out.append((f"length={value}", bytes(b)))
    b = bytearray(data)
    b[rng.choice(starts) + 16] = 7  # magic
    out.append(("magic=7", bytes(b)))
    return out


def test_hostile_bytes_never_crash_and_damage_is_an_error(tmp_path: Path) -> None:
    log = clean(str(tmp_path / "src-0"))
    log.write()
    seg = sorted((tmp_path / "src-0").glob("*.log"))[0]
    data = seg.read_bytes()
    rng = random.Random(39)
    for n, (what, bad) in enumerate(_mutations(data, rng)):
        d = tmp_path / f"bad{n}-0"
        d.mkdir()
        (d / seg.name).write_bytes(bad)
        res = audit(d)
        errors = [f for f in res.findings if f.severity == Severity.ERROR]
        if what.startswith("flip@"):
            i = int(what[5:])
            start = max(p for p in _batch_starts(data) if p <= i)
            if i >= start + W.CRC_OFFSET:  # the CRC covers attributes .. end; the CRC field itself too
                assert errors, what
        elif bad != data:
            assert errors or any(f.severity >= Severity.WARNING for f in res.findings), what
        for f in res.findings:
            assert isinstance(f, Finding) and f.message


def _batch_starts(data: bytes) -> list[int]:
    starts, pos = [], 0
    while pos < len(data):
        starts.append(pos)
        pos += struct.unpack_from(">i", data, pos + 8)[0] + 12
    return starts


def test_unreadable_segment_is_an_error_finding(tmp_path: Path) -> None:
    d = tmp_path / "t-0"
    d.mkdir()
    os.mkdir(d / f"{0:020d}.log")  # a directory named like a segment
    log = PlantedLog(str(d))
    log.data(2)
    res = audit(d)
    assert [f.check for f in res.findings] == ["storage.unreadable"]
    assert res.findings[0].severity == Severity.ERROR


def test_cached_headers_give_the_same_findings(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The header walk is kbatch.log.summary's: a second audit replays the sealed segments'
    CRC-verified headers from its cache (reading none of their bytes) and finds the same."""
    monkeypatch.setenv("KBATCH_SUMMARY_CACHE", str(tmp_path / "cache"))
    planted(str(tmp_path / "logs" / "t-0"), "fenced-epoch")
    first = [f.as_json() for f in audit(tmp_path / "logs").findings]
    assert list((tmp_path / "cache").iterdir())  # the sealed segment's headers were remembered
    again = [f.as_json() for f in audit(tmp_path / "logs").findings]
    assert first == again and [f["check"] for f in first] == ["producer.fenced-epoch"]
    assert [f["check"] for f in (f.as_json() for f in audit(tmp_path / "logs", cache=False).findings)] == [
        "producer.fenced-epoch"]


def test_record_timestamps_find_what_headers_cannot(tmp_path: Path) -> None:
    """A negative timestamp between a batch's first and max: headers cannot see it, decoding does."""
    log = clean(str(tmp_path / "t-0"))
    base, _ = log.data(3, stamps=[log.clock, -7000, log.clock + 1])
    log.data(2)
    log.write()
    assert audit(tmp_path).findings == []
    (f,) = audit(tmp_path, record_timestamps=True).findings
    assert (f.check, f.first_offset, f.details["timestamp"]) == ("timestamp.negative", base, -7000)


def _verify_index_messages(path: Path) -> list[tuple[str, int | None, str]]:
    from kbatch.cli.verify import _Verifier

    v = _Verifier(lambda n: None)
    for d, segs in resolve_segments(os.fspath(path)):
        v.partition(d, segs)
    return [(f.segment, f.position, f.message) for f in v.findings if f.segment and f.segment.endswith(".txnindex")]


def test_txn_index_is_checked_against_the_markers_as_verify_checks_it(tmp_path: Path) -> None:
    """audit reads each segment's .txnindex against its ABORT/COMMIT markers by the one rule
    (kbatch.log.index_rules.check_txn_index) verify uses: the same findings, at the same place."""
    from kbatch.log.index import TransactionIndex
    from kbatch.log.producer_state import txn_index_bytes

    part = tmp_path / "orders-0"
    log = clean(str(part))
    log.write()
    files = sorted(part.glob("*.txnindex"))
    assert files, "the background has an aborted transaction"
    good = files[0].read_bytes()
    (entry,) = list(TransactionIndex.parse(good, str(files[0])))
    commits = [b for b in _markers(log) if b[1]]

    def findings() -> list[tuple[str | None, int | None, str]]:
        res = audit(tmp_path)
        assert all(f.check == "storage.index" and f.severity == Severity.ERROR for f in res.findings)
        got = [(f.segment, f.position, f.message) for f in res.findings]
        assert got == _verify_index_messages(tmp_path)
        return got

    assert findings() == []
    files[0].unlink()                                  # an aborted transaction's records would be served
    (missing,) = findings()
    assert missing[0] == str(files[0]) and missing[2].startswith("file is missing: the segment holds 1 ABORT")
    files[0].write_bytes(txn_index_bytes([entry._replace(last_stable_offset=entry.last_stable_offset + 7)]))
    (lso,) = findings()
    assert lso[1] == 0 and "entry 0 is" in lso[2] and "the log's markers say" in lso[2]
    commit_pid, commit_offset = commits[0][0], commits[0][2]
    files[0].write_bytes(good + txn_index_bytes([entry._replace(producer_id=commit_pid, first_offset=commit_offset,
                                                                last_offset=commit_offset)]))
    (named,) = findings()
    assert named[1] == 34 and "holds a COMMIT marker" in named[2]
    files[0].write_bytes(good[:20])                    # not whole entries
    (torn,) = findings()
    assert "cannot read" in torn[2]


def _markers(log: PlantedLog) -> list[tuple[int, bool, int]]:
    """(producer id, commit?, offset) of the planted log's markers."""
    import kbatch

    out = []
    for seg in log.segments:
        for data in seg:
            (b,) = list(kbatch.iter_batches(data))
            if b.is_control and b.is_transactional:
                from kbatch.log.producer_state import marker_type
                out.append((b.producer_id, marker_type(b) == W.ControlRecordType.COMMIT, b.base_offset))
    return out


def test_txn_index_after_damage_is_not_judged(tmp_path: Path) -> None:
    """Past a segment that cannot be read whole, the open transactions are not known: no
    .txnindex finding is made there (the damage is the finding), as verify does."""
    from support.audit_logs import TXN

    part = tmp_path / "orders-0"
    log = PlantedLog(str(part))
    log.data(3)
    log.data(2)
    log.roll()
    log.data(2, pid=TXN, txn=True)
    log.marker(TXN, commit=False)
    log.write()
    segs = sorted(part.glob("*.log"))
    (txn,) = part.glob("*.txnindex")
    assert len(segs) == 2 and txn.stem == segs[1].stem
    txn.unlink()
    assert [f.segment for f in audit(tmp_path).findings] == [str(txn)]   # the control: found when known
    with open(segs[0], "r+b") as f:                     # the first segment's first length field
        f.seek(8)
        f.write(struct.pack(">i", 2**31 - 1))
    res = audit(tmp_path)
    assert res.findings and not [f for f in res.findings if (f.segment or "").endswith(".txnindex")]
    assert _verify_index_messages(tmp_path) == []
