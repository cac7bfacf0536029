"""The `kbatch` command line: every command on generated segments, good and damaged; golden
`dump` output on a fixed segment; exit codes; no progress output when stderr is not a terminal.

Segments are built here with BatchBuilder (timestamp_extended=False, no compression, so the bytes
are what a broker writes and the golden files do not depend on a compressor's version). Set
KBATCH_REGEN_GOLDEN=1 to rewrite tests/cli/golden/ after a deliberate format change.
"""
from __future__ import annotations

import json
import os
import struct
import subprocess
import sys
from pathlib import Path

import pytest

import kbatch
from kbatch import _wire as W
from kbatch import cli
from kbatch.record.builder import BatchBuilder, build_end_txn_marker

typer_testing = pytest.importorskip("typer.testing")

GOLDEN = Path(__file__).parent / "golden"
SRC = Path(__file__).resolve().parents[2] / "src"
T0 = 1_714_554_000_000  # 2024-05-01T09:00:00Z
SEG = "00000000000000000000"


# ------------------------------------------------------------------------------------ fixtures
def fixed_batches() -> list[bytes]:
    """The golden segment: data with headers, a tombstone, an idempotent transactional batch and its
    COMMIT marker, LogAppendTime, a legacy v1 and a v0 message, and non-consecutive offsets."""
    out = []
    b = BatchBuilder(base_offset=0, timestamp_extended=False, partition_leader_epoch=3)
    b.append(T0, b"user-1", b"hello")
    b.append(T0 + 5, None, b"no key", headers=[("trace", b"abc"), ("empty", None)])
    b.append(T0 + 2, b"user-2", None)  # tombstone, timestamp below the batch max
    out.append(b.build())
    b = BatchBuilder(base_offset=3, timestamp_extended=False, producer_id=4242, producer_epoch=7,
                     base_sequence=10, is_transactional=True, partition_leader_epoch=3)
    b.append(T0 + 10, b"tx-key", b"\xff\xfe binary")
    b.append(T0 + 11, b"tx-key2", "caf\u00e9".encode())
    out.append(b.build())
    out.append(build_end_txn_marker(producer_id=4242, producer_epoch=7, commit=True, coordinator_epoch=5,
                                    base_offset=5, timestamp=T0 + 12, partition_leader_epoch=3))
    b = BatchBuilder(base_offset=6, timestamp_extended=False, timestamp_type=kbatch.TimestampType.LOG_APPEND_TIME,
                     log_append_time=T0 + 100, partition_leader_epoch=3)
    b.append(T0 + 20, b"lat", b"appended")
    b.append(T0 + 21, b"lat", b"appended again", offset=8)  # offset gap (compacted-style)
    out.append(b.build())
    b = BatchBuilder(magic=1, base_offset=9)
    b.append(T0 + 30, b"v1-key", b"v1-value")
    out.append(b.build())
    b = BatchBuilder(magic=0, base_offset=10)
    b.append(None, None, b"v0-value")
    out.append(b.build())
    return out


def positions(batches):
    pos, out = 0, []
    for b in batches:
        out.append(pos)
        pos += len(b)
    return out


def write_segment(directory: Path, batches, base: int = 0, *, index=None, time_index=None, txn=None) -> Path:
    """Write <base>.log (and, when given, .index [(offset, pos)], .timeindex [(ts, offset)],
    .txnindex [(pid, first, last, lso)])."""
    directory.mkdir(parents=True, exist_ok=True)
    stem = directory / f"{base:020d}"
    log = stem.with_suffix(".log")
    log.write_bytes(b"".join(batches))
    if index is not None:
        stem.with_suffix(".index").write_bytes(b"".join(struct.pack(">ii", o - base, p) for o, p in index))
    if time_index is not None:
        stem.with_suffix(".timeindex").write_bytes(b"".join(struct.pack(">qi", t, o - base) for t, o in time_index))
    if txn is not None:
        stem.with_suffix(".txnindex").write_bytes(
            b"".join(struct.pack(">hqqqq", 0, pid, f, la, lso) for pid, f, la, lso in txn))
    return log


def fixed_segment(directory: Path) -> Path:
    batches = fixed_batches()
    pos = positions(batches)
    # offset index: (last offset of the batch, its position), as a broker writes it
    index = [(2, pos[0]), (4, pos[1]), (8, pos[3])]
    time_index = [(T0 + 5, 2), (T0 + 11, 4), (T0 + 100, 8)]
    return write_segment(directory, batches, index=index, time_index=time_index, txn=[(4242, 3, 5, 3)])


@pytest.fixture
def runner():
    return typer_testing.CliRunner()


@pytest.fixture
def app():
    return cli.make_app()


def invoke(runner, app, *args):
    return runner.invoke(app, [str(a) for a in args])


def check_golden(name: str, text: str) -> None:
    path = GOLDEN / name
    if os.environ.get("KBATCH_REGEN_GOLDEN"):
        GOLDEN.mkdir(exist_ok=True)
        path.write_text(text)
    assert path.exists(), f"missing golden file {path}; run with KBATCH_REGEN_GOLDEN=1"
    assert text == path.read_text()


def many_batches(n_batches: int, per_batch: int = 3, base: int = 0, value_size: int = 20, ts0: int = T0):
    out, off = [], base
    for i in range(n_batches):
        b = BatchBuilder(base_offset=off, timestamp_extended=False)
        for j in range(per_batch):
            b.append(ts0 + off + j, f"k{off + j}".encode(), bytes([65 + (off + j) % 26]) * value_size)
        out.append(b.build())
        off += per_batch
    return out


def broker_indexes(batches, base: int, interval: int = 4096):
    """The .index/.timeindex entries a broker writes for these batches (kafka-format.md §5.1-5.2)."""
    index, tindex = [], []
    since, pos, max_ts, max_off = 0, 0, -1, base
    for raw in batches:
        b = next(kbatch.iter_batches(raw))
        if b.max_timestamp > max_ts:
            max_ts, max_off = b.max_timestamp, b.last_offset
        if since > interval:
            index.append((b.last_offset, pos))
            if not tindex or max_ts > tindex[-1][0]:
                tindex.append((max_ts, max_off))
            since = 0
        since += len(raw)
        pos += len(raw)
    if max_ts >= 0 and (not tindex or max_ts > tindex[-1][0]):
        tindex.append((max_ts, max_off))
    return index, tindex


# ------------------------------------------------------------------------------------ dump: golden
def test_dump_golden_deep_with_data(runner, app, tmp_path, monkeypatch):
    fixed_segment(tmp_path)
    monkeypatch.chdir(tmp_path)
    r = invoke(runner, app, "dump", f"{SEG}.log", f"{SEG}.index", f"{SEG}.timeindex", f"{SEG}.txnindex",
               "--deep-iteration", "--print-data-log")
    assert r.exit_code == 0, r.output
    check_golden("dump_deep_print_data.txt", r.stdout)
    # offsets 6 -> 8 skip 7: reported on stderr as DumpLogSegments does
    assert r.stderr == f"Non-consecutive offsets in {tmp_path / (SEG + '.log')}\n  6 is followed by 8\n"


def test_dump_golden_shallow(runner, app, tmp_path, monkeypatch):
    fixed_segment(tmp_path)
    monkeypatch.chdir(tmp_path)
    r = invoke(runner, app, "dump", "--files", f"{SEG}.log")
    assert r.exit_code == 0, r.output
    check_golden("dump_shallow.txt", r.stdout)
    assert r.stderr == ""


def test_dump_golden_json(runner, app, tmp_path, monkeypatch):
    fixed_segment(tmp_path)
    monkeypatch.chdir(tmp_path)
    r = invoke(runner, app, "dump", f"{SEG}.log", "--print-data-log", "--json")
    assert r.exit_code == 0, r.output
    check_golden("dump_print_data.jsonl", r.stdout)
    objs = [json.loads(line) for line in r.stdout.splitlines()]
    recs = [o for o in objs if o["type"] == "record"]
    by_offset = {o["offset"]: o for o in recs}
    assert by_offset[0]["key"] == "user-1" and by_offset[0]["key_encoding"] == "utf8"
    assert by_offset[3]["value_encoding"] == "base64"
    assert bytes(__import__("base64").b64decode(by_offset[3]["value"])) == b"\xff\xfe binary"
    assert by_offset[4]["value"] == "caf\u00e9"
    assert by_offset[2]["value"] is None and by_offset[2]["is_tombstone"] is True
    assert by_offset[5]["control"] == {"type": "COMMIT", "type_id": 1, "coordinator_epoch": 5}
    assert by_offset[10]["timestamp"] is None  # magic 0: no timestamp


def test_dump_line_formats(runner, app, tmp_path, monkeypatch):
    """Spot checks of the DumpLogSegments layout (kafka-format.md §6.2) independent of the golden files."""
    fixed_segment(tmp_path)
    monkeypatch.chdir(tmp_path)
    out = invoke(runner, app, "dump", f"{SEG}.log", "--deep-iteration").stdout.splitlines()
    assert out[0] == f"Dumping {SEG}.log"
    assert out[1] == "Log starting offset: 0"
    assert out[2].startswith("baseOffset: 0 lastOffset: 2 count: 3 baseSequence: -1 lastSequence: -1 producerId: -1 "
                             "producerEpoch: -1 partitionLeaderEpoch: 3 isTransactional: false isControl: false "
                             "deleteHorizonMs: OptionalLong.empty position: 0 CreateTime: ")
    assert out[2].endswith("magic: 2 compresscodec: none crc: %d isvalid: true" % next(
        kbatch.iter_batches(fixed_batches()[0])).crc)
    assert out[4] == f"| offset: 1 CreateTime: {T0 + 5} keySize: -1 valueSize: 6 sequence: -1 headerKeys: [trace,empty]"
    assert any(line.startswith("baseOffset: 3 lastOffset: 4 count: 2 baseSequence: 10 lastSequence: 11 "
                               "producerId: 4242 producerEpoch: 7") for line in out)
    assert any(line.endswith(" endTxnMarker: COMMIT coordinatorEpoch: 5") for line in out)
    assert any(f"| offset: 6 LogAppendTime: {T0 + 100} " in line for line in out)
    assert any(line.startswith("offset: 9 position: ") and " magic: 1 " in line for line in out)
    assert any(line.startswith("offset: 10 position: ") and "NoTimestampType: -1" in line for line in out)
    assert any(line.startswith("| offset: 10 NoTimestampType: -1 keySize: -1 valueSize: 8 isValid: true crc: ")
               for line in out)


def test_dump_index_and_timeindex(runner, app, tmp_path, monkeypatch):
    fixed_segment(tmp_path)
    monkeypatch.chdir(tmp_path)
    pos = positions(fixed_batches())
    r = invoke(runner, app, "dump", f"{SEG}.index", f"{SEG}.timeindex")
    assert r.exit_code == 0, r.output
    assert r.stdout.splitlines() == [
        f"Dumping {SEG}.index", f"offset: 2 position: {pos[0]}", f"offset: 4 position: {pos[1]}",
        f"offset: 8 position: {pos[3]}", f"Dumping {SEG}.timeindex", f"timestamp: {T0 + 5} offset: 2",
        f"timestamp: {T0 + 11} offset: 4", f"timestamp: {T0 + 100} offset: 8"]
    r = invoke(runner, app, "dump", f"{SEG}.index", f"{SEG}.timeindex", "--verify-index-only")
    assert r.exit_code == 0 and r.stdout == f"Dumping {SEG}.index\nDumping {SEG}.timeindex\n"
    r = invoke(runner, app, "dump", f"{SEG}.index", f"{SEG}.timeindex", "--index-sanity-check")
    assert r.exit_code == 0
    assert r.stdout.splitlines()[1] == f"{SEG}.index passed sanity check."
    assert r.stdout.splitlines()[3] == f"{SEG}.timeindex passed sanity check."


def test_dump_preallocated_index_stops_at_zero_tail(runner, app, tmp_path, monkeypatch):
    fixed_segment(tmp_path)
    idx = tmp_path / f"{SEG}.index"
    idx.write_bytes(idx.read_bytes() + bytes(8 * 50))
    monkeypatch.chdir(tmp_path)
    r = invoke(runner, app, "dump", f"{SEG}.index")
    assert r.exit_code == 0, r.output
    assert len(r.stdout.splitlines()) == 4


def test_dump_empty_index(runner, app, tmp_path, monkeypatch):
    write_segment(tmp_path, many_batches(1), index=[])
    monkeypatch.chdir(tmp_path)
    r = invoke(runner, app, "dump", f"{SEG}.index")
    assert r.exit_code == 0 and r.stdout == f"Dumping {SEG}.index\n{SEG}.index is empty.\n"


def test_dump_skip_record_metadata(runner, app, tmp_path, monkeypatch):
    fixed_segment(tmp_path)
    monkeypatch.chdir(tmp_path)
    out = invoke(runner, app, "dump", f"{SEG}.log", "--print-data-log", "--skip-record-metadata").stdout
    lines = out.splitlines()
    assert "| key: user-1 payload: hello" in lines
    assert "| payload: no key" in lines  # kafka-dump-log 4.x (3.x dropped the indent: " payload: no key")


def test_dump_max_bytes(runner, app, tmp_path, monkeypatch):
    fixed_segment(tmp_path)
    monkeypatch.chdir(tmp_path)
    pos = positions(fixed_batches())
    out = invoke(runner, app, "dump", f"{SEG}.log", "--max-bytes", pos[2] + 1).stdout
    assert [line.split()[1] for line in out.splitlines()[2:]] == ["0", "3"]
    assert "invalid bytes" not in out


def test_dump_unknown_file(runner, app, tmp_path, monkeypatch):
    (tmp_path / "notes.txt").write_text("x")
    monkeypatch.chdir(tmp_path)
    r = invoke(runner, app, "dump", "notes.txt")
    assert r.exit_code == 0
    assert r.stdout == "Dumping notes.txt\n" and r.stderr == "Ignoring unknown file notes.txt\n"


# ------------------------------------------------------------------------------------ dump: damaged
def flip_bit(path: Path, position: int) -> None:
    data = bytearray(path.read_bytes())
    data[position] ^= 0x10
    path.write_bytes(bytes(data))


def test_dump_bit_flip_marks_batch_invalid(runner, app, tmp_path, monkeypatch):
    log = fixed_segment(tmp_path)
    pos = positions(fixed_batches())
    flip_bit(log, pos[1] + 70)  # inside the second batch's records
    monkeypatch.chdir(tmp_path)
    r = invoke(runner, app, "dump", f"{SEG}.log")
    assert r.exit_code == 1
    lines = r.stdout.splitlines()
    assert lines[2].endswith("isvalid: true")
    assert lines[3].startswith("baseOffset: 3 ") and lines[3].endswith("isvalid: false")


def test_dump_truncated_tail(runner, app, tmp_path, monkeypatch):
    log = fixed_segment(tmp_path)
    data = log.read_bytes()
    log.write_bytes(data[:-7])
    monkeypatch.chdir(tmp_path)
    r = invoke(runner, app, "dump", f"{SEG}.log")
    assert r.exit_code == 1
    last_size = len(fixed_batches()[-1])
    assert r.stdout.splitlines()[-1] == f"Found {last_size - 7} invalid bytes at the end of {SEG}.log"


def test_dump_wrong_index_entry(runner, app, tmp_path, monkeypatch):
    batches = fixed_batches()
    pos = positions(batches)
    write_segment(tmp_path, batches, index=[(2, pos[0]), (5, pos[1])], time_index=[(T0 + 5, 2), (T0 + 99, 4)])
    monkeypatch.chdir(tmp_path)
    r = invoke(runner, app, "dump", f"{SEG}.index", f"{SEG}.timeindex")
    assert r.exit_code == 1
    # offset 5 is the last offset of a later batch before the end: a follower's chunk entry, valid
    # (kafka-dump-log would call it a mismatch); the time index entry is damage
    assert r.stderr.splitlines() == [
        f"Found timestamp mismatch in :{tmp_path / (SEG + '.timeindex')}",
        f"  Index timestamp: {T0 + 99}, log timestamp: {T0 + 11}",
        f"Valid index entries kafka-dump-log would flag (older brokers, followers; not problems) in :{tmp_path / (SEG + '.index')}",
        "  entry 1 (offset 5, position %d) names the last offset of a later batch before the next entry: one entry "
        "for a follower's append of a fetched chunk of batches" % pos[1]]
    write_segment(tmp_path, batches, index=[(2, pos[0]), (6, pos[1])], time_index=[(T0 + 5, 2)])
    r = invoke(runner, app, "dump", f"{SEG}.index", f"{SEG}.timeindex")
    assert r.exit_code == 1
    assert r.stderr.splitlines() == [f"Mismatches in :{tmp_path / (SEG + '.index')}", "  Index offset: 6, log offset: 4"]


def test_dump_missing_file_is_exit_2(runner, app, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    r = invoke(runner, app, "dump", f"{SEG}.log")
    assert r.exit_code == 2
    assert f"{SEG}.log" in r.stderr


# ------------------------------------------------------------------------------------ verify
def good_partition(directory: Path, n_segments: int = 2, batches_per_segment: int = 60) -> list[Path]:
    logs, base = [], 0
    for _ in range(n_segments):
        batches = many_batches(batches_per_segment, base=base, value_size=40)
        index, tindex = broker_indexes(batches, base, interval=1024)
        logs.append(write_segment(directory, batches, base, index=index, time_index=tindex))
        base += batches_per_segment * 3
    return logs


def test_verify_good_partition_and_log_dir(runner, app, tmp_path):
    good_partition(tmp_path / "orders-0")
    good_partition(tmp_path / "orders-1", n_segments=1)
    r = invoke(runner, app, "verify", tmp_path / "orders-0")
    assert r.exit_code == 0, r.output
    assert r.stdout.startswith("OK: 1 partition(s), 2 segment(s), 120 batches, 360 records")
    r = invoke(runner, app, "verify", tmp_path)
    assert r.exit_code == 0, r.output
    assert r.stdout.startswith("OK: 2 partition(s), 3 segment(s), 180 batches, 540 records")
    r = invoke(runner, app, "verify", tmp_path / "orders-0" / f"{SEG}.log", "--quiet")
    assert r.exit_code == 0 and r.stdout == ""


def test_verify_fixed_segment_is_clean(runner, app, tmp_path):
    fixed_segment(tmp_path)
    # the fixture's .txnindex (there for dump's output) lists an aborted transaction ending at
    # offset 5, where the log holds a COMMIT marker: verify checks .txnindex against the markers
    r = invoke(runner, app, "verify", tmp_path)
    assert r.exit_code == 1 and f"{SEG}.txnindex at byte 0: entry 0 is (producer 4242" in r.output, r.output
    (tmp_path / f"{SEG}.txnindex").unlink()  # no ABORT marker: no .txnindex is right
    r = invoke(runner, app, "verify", tmp_path)
    assert r.exit_code == 0, r.output


def test_verify_bit_flip(runner, app, tmp_path):
    logs = good_partition(tmp_path / "t-0")
    at = positions(many_batches(60, base=180, value_size=40))[5]
    flip_bit(logs[1], at + 80)
    r = invoke(runner, app, "verify", tmp_path / "t-0")
    assert r.exit_code == 1
    line = r.stdout.splitlines()[0]
    assert line.startswith(f"{logs[1]} at byte {at}: CRC mismatch in batch at byte {at} (base offset {180 + 15})")
    assert r.stdout.splitlines()[-1].startswith("1 problem found")


def test_verify_truncated_tail(runner, app, tmp_path):
    logs = good_partition(tmp_path / "t-0", n_segments=1)
    data = logs[0].read_bytes()
    logs[0].write_bytes(data[:-10])
    batch_len = len(many_batches(60, value_size=40)[-1])
    r = invoke(runner, app, "verify", logs[0])
    assert r.exit_code == 1
    assert r.stdout.splitlines()[0] == (f"{logs[0]} at byte {len(data) - batch_len}: {batch_len - 10} bytes at the end "
                                        f"of the file are not a complete batch (a partial batch at the end of the "
                                        f"segment: batch length {batch_len - 12} at byte {len(data) - batch_len} runs "
                                        f"past its end ({len(data) - 10} bytes; {batch_len - 22} of the "
                                        f"{batch_len - 12} bytes are there))")


def test_verify_wrong_index_entry(runner, app, tmp_path):
    logs = good_partition(tmp_path / "t-0", n_segments=1)
    idx = logs[0].with_suffix(".index")
    raw = bytearray(idx.read_bytes())
    rel, pos = struct.unpack_from(">ii", raw, 8)
    struct.pack_into(">ii", raw, 8, rel, pos + 1)  # second entry points into the middle of a batch
    idx.write_bytes(bytes(raw))
    r = invoke(runner, app, "verify", tmp_path / "t-0")
    assert r.exit_code == 1
    assert r.stdout.splitlines()[0] == (f"{idx} at byte 8: entry 1 (offset {rel}) points to position {pos + 1}, "
                                        f"where no batch starts")


def test_verify_wrong_time_index_entry(runner, app, tmp_path):
    logs = good_partition(tmp_path / "t-0", n_segments=1)
    tidx = logs[0].with_suffix(".timeindex")
    raw = bytearray(tidx.read_bytes())
    ts, rel = struct.unpack_from(">qi", raw, 0)
    struct.pack_into(">qi", raw, 0, ts - 1, rel)
    tidx.write_bytes(bytes(raw))
    r = invoke(runner, app, "verify", tmp_path / "t-0")
    assert r.exit_code == 1
    assert f"{tidx} at byte 0: entry 0 says the max timestamp up to offset {rel} is {ts - 1}, the log says {ts}" \
        in r.stdout


def test_verify_overlapping_segments(runner, app, tmp_path):
    d = tmp_path / "t-0"
    write_segment(d, many_batches(4, base=0), 0)
    write_segment(d, many_batches(4, base=10), 10)  # first segment ends at 11
    r = invoke(runner, app, "verify", d)
    assert r.exit_code == 1
    assert "segment base offset 10 is not above the last offset 11" in r.stdout
    assert "offsets go backwards or overlap" in r.stdout


def test_verify_and_dump_accept_kbatch_written_log_with_negative_timestamps(runner, app, tmp_path):
    """Extended batches index negative timestamps (DESIGN.md decision 5): no false alarms."""
    _needs("Log")
    log = kbatch.Log.create(tmp_path / "t-0", kbatch.LogConfig(segment_bytes=3000, index_interval_bytes=200))
    for i in range(30):
        b = BatchBuilder()  # timestamp_extended=True
        for j in range(3):
            b.append((-10_000_000 + 10 * i + j) if i < 15 else T0 + i, f"k{j}".encode(), b"x" * 30)
        log.append(b.build(), now_ms=T0 + 1000)
    log.close()
    r = invoke(runner, app, "verify", tmp_path)
    assert r.exit_code == 0, r.output
    seg = tmp_path / "t-0" / f"{SEG}"
    r = invoke(runner, app, "dump", f"{seg}.index", f"{seg}.timeindex", "--verify-index-only")
    assert r.exit_code == 0, r.output
    assert r.stderr == ""


def test_verify_json(runner, app, tmp_path):
    logs = good_partition(tmp_path / "t-0", n_segments=1)
    flip_bit(logs[0], 100)
    r = invoke(runner, app, "verify", logs[0], "--json")
    assert r.exit_code == 1
    objs = [json.loads(line) for line in r.stdout.splitlines()]
    assert objs[0]["type"] == "problem" and objs[0]["kind"] == "crc" and objs[0]["position"] == 0
    assert objs[0]["file"] == str(logs[0])
    assert objs[-1]["type"] == "summary" and objs[-1]["ok"] is False


# ------------------------------------------------------------------------------------ exit codes and parsing
@pytest.mark.parametrize("args", [["dump", "--no-such-option"], ["verify"], ["verify", "a", "b"], ["frobnicate"],
                                  ["offsets", ".", "--time", "yesterday"], []])
def test_usage_errors_exit_2(runner, app, args):
    assert invoke(runner, app, *args).exit_code == 2


def test_missing_path_exit_2(runner, app, tmp_path):
    r = invoke(runner, app, "verify", tmp_path / "nope")
    assert r.exit_code == 2 and "no such file or directory" in r.stderr
    r = invoke(runner, app, "verify", tmp_path)  # a directory without segments
    assert r.exit_code == 2 and "no segments" in r.stderr


def test_main_returns_exit_codes(tmp_path, capsys):
    assert cli.main(["--help"]) == 0
    assert cli.main(["verify", str(tmp_path / "nope")]) == 2
    good_partition(tmp_path / "t-0", n_segments=1, batches_per_segment=3)
    assert cli.main(["verify", str(tmp_path), "-q"]) == 0


def test_main_without_typer_says_how_to_install(monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, "typer", None)  # import typer -> ImportError
    assert cli.main(["verify", "."]) == 2
    assert "pip install typer rich" in capsys.readouterr().err


@pytest.mark.parametrize("text, expected", [
    ("2024-05-01T09:00:00Z", T0), ("2024-05-01T11:00:00+02:00", T0), ("2024-05-01T09:00:00.250Z", T0 + 250),
    ("2024-05-01", T0 - 9 * 3600 * 1000), (str(T0), T0), ("-5", -5), ("-86400000", -86_400_000),
    ("1969-12-31T23:59:59.999Z", -1),
])
def test_parse_time(text, expected):
    assert cli.parse_time(text) == expected


def test_parse_time_rejects_garbage():
    with pytest.raises(cli.UsageProblem):
        cli.parse_time("next tuesday")
    with pytest.raises(cli.UsageProblem):
        cli.parse_time(str(2**63))


# ------------------------------------------------------------------------------------ progress
def test_no_progress_when_stderr_is_not_a_terminal(tmp_path):
    """A log over the progress threshold, run as a real process with stderr piped: stderr stays empty."""
    d = tmp_path / "big-0"
    batches = many_batches(40, per_batch=2, value_size=64 * 1024)
    write_segment(d, batches)
    assert sum(map(len, batches)) > cli.PROGRESS_MIN_BYTES
    env = dict(os.environ, PYTHONPATH=str(SRC))
    for args in (["verify", str(d)], ["dump", str(d / f"{SEG}.log")]):
        p = subprocess.run([sys.executable, "-m", "kbatch.cli", *args], capture_output=True, env=env, timeout=120)
        assert p.returncode == 0, p.stderr
        assert p.stderr == b""


def test_progress_bar_gating(monkeypatch):
    monkeypatch.setattr(cli._common, "stderr_is_terminal", lambda: True)
    with cli.progress_bar(cli.PROGRESS_MIN_BYTES - 1, "x") as advance:
        assert advance(10) is None  # below the threshold: a no-op
    with cli.progress_bar(10 * cli.PROGRESS_MIN_BYTES, "x", quiet=True) as advance:
        assert advance(10) is None


def test_progress_bar_draws_on_a_terminal(monkeypatch):
    import io

    import rich.console

    buf = io.StringIO()
    real = rich.console.Console
    monkeypatch.setattr(rich.console, "Console",
                        lambda **kw: real(file=buf, force_terminal=True, width=80))
    monkeypatch.setattr(cli._common, "stderr_is_terminal", lambda: True)
    monkeypatch.setattr(cli._common, "PROGRESS_AFTER_S", 10.0 ** 9)
    with cli.progress_bar(10 * cli.PROGRESS_MIN_BYTES, "verify") as advance:
        advance(cli.PROGRESS_MIN_BYTES)
    assert buf.getvalue() == ""  # not before PROGRESS_AFTER_S: work done sooner draws nothing
    monkeypatch.setattr(cli._common, "PROGRESS_AFTER_S", 0.0)
    with cli.progress_bar(10 * cli.PROGRESS_MIN_BYTES, "verify") as advance:
        advance(cli.PROGRESS_MIN_BYTES)
    assert "verify" in buf.getvalue()


# ------------------------------------------------------------------------------------ library-backed commands
def _needs(name):
    try:
        getattr(kbatch, name)
    except (ImportError, AttributeError):
        pytest.skip(f"kbatch.{name} is not available yet")


def test_reindex_restores_deleted_and_damaged_indexes(runner, app, tmp_path):
    _needs("rebuild_indexes")
    d = tmp_path / "t-0"
    logs = good_partition(d, n_segments=2)
    expected = {p: p.read_bytes() for log in logs for p in (log.with_suffix(".index"), log.with_suffix(".timeindex"))}
    logs[0].with_suffix(".index").unlink()
    flip_bit(logs[1].with_suffix(".timeindex"), 3)
    assert invoke(runner, app, "verify", d).exit_code == 1
    r = invoke(runner, app, "reindex", d, "--index-interval-bytes", 1024)
    assert r.exit_code == 0, r.output
    assert invoke(runner, app, "verify", d).exit_code == 0
    for p, data in expected.items():
        assert p.read_bytes() == data, p


def test_offsets(runner, app, tmp_path):
    _needs("Log")
    good_partition(tmp_path / "t-0", n_segments=2, batches_per_segment=10)  # offsets 0..59, ts = T0 + offset
    good_partition(tmp_path / "t-1", n_segments=1, batches_per_segment=10)
    r = invoke(runner, app, "offsets", tmp_path, "--time", T0 + 35, "--earliest", "--latest", "--json")
    assert r.exit_code == 0, r.output
    objs = [json.loads(line) for line in r.stdout.splitlines()]
    got = {(o["partition"], str(o["target"])): o["offset"] for o in objs}
    assert got[("t-0", "earliest")] == 0 and got[("t-0", "latest")] == 60
    assert got[("t-0", str(T0 + 35))] == 35
    assert got[("t-1", str(T0 + 35))] is None and got[("t-1", "latest")] == 30
    r = invoke(runner, app, "offsets", tmp_path / "t-0", "--time", "2024-05-01T09:00:00.010Z", "--max-timestamp")
    assert r.exit_code == 0, r.output
    lines = r.stdout.splitlines()
    assert lines[0].startswith("t-0\tmax-timestamp\toffset 59\ttimestamp ")
    assert lines[1].startswith("t-0\t2024-05-01T09:00:00.010Z") and "offset 10" in lines[1]
    r = invoke(runner, app, "offsets", tmp_path / "t-0", "--time=-5")
    assert r.exit_code == 0 and "offset 0" in r.stdout
    assert invoke(runner, app, "offsets", tmp_path / "t-0").exit_code == 2


def test_validate(runner, app, tmp_path):
    _needs("check_timestamps")
    d = tmp_path / "t-0"
    batches = many_batches(5, ts0=T0) + many_batches(2, base=15, ts0=T0 + 10 * 3600 * 1000)
    write_segment(d, batches)
    now = T0 + 3600 * 1000
    r = invoke(runner, app, "validate", d, "--before-max-ms", 7200 * 1000, "--after-max-ms", 3600 * 1000,
               "--now", now)
    assert r.exit_code == 1, r.output
    assert "6 too new" in r.stdout and "0 too old" in r.stdout
    r = invoke(runner, app, "validate", d, "--before-max-ms", 7200 * 1000, "--after-max-ms", 3600 * 1000,
               "--now", now, "--json")
    obj = json.loads(r.stdout.splitlines()[0])
    assert obj["too_new"] == 6 and obj["first_too_new_offset"] == 15
    r = invoke(runner, app, "validate", d, "--now", "2024-05-01T10:00:00Z")
    assert r.exit_code == 0, r.output


def test_compact(runner, app, tmp_path):
    _needs("compact")
    d = tmp_path / "t-0"
    out, off = [], 0
    for i in range(3):
        b = BatchBuilder(base_offset=off, timestamp_extended=False)
        for j in range(4):
            b.append(T0 + off + j, f"k{j}".encode(), f"v{i}".encode())
        out.append(b.build())
        off += 4
    write_segment(d, out[:2], 0)
    write_segment(d, out[2:], 8)  # active segment
    r = invoke(runner, app, "compact", d, "--now", T0 + 1000, "--json")
    assert r.exit_code == 0, r.output
    obj = json.loads(r.stdout.splitlines()[0])
    assert obj["partition"] == "t-0" and obj["records_read"] >= 8
    assert obj["records_written"] < obj["records_read"]
    assert invoke(runner, app, "verify", d).exit_code == 0


def test_compact_groups_segments_by_segment_bytes(runner, app, tmp_path):
    """compact cleans consecutive segments into one while their sizes fit --segment-bytes (the
    topic's segment.bytes; Kafka's 1 GiB by default), as the broker's cleaner groups them."""
    _needs("compact")
    batches, off = [], 0
    for i in range(5):
        b = BatchBuilder(base_offset=off, timestamp_extended=False)
        for j in range(3):
            b.append(T0 + off + j, f"k{i}-{j}".encode(), b"v")
        batches.append(b.build())
        off += 3
    size = len(batches[0])
    roots = {}
    for name, args in (("default", []), ("pairs", ["--segment-bytes", 2 * size]),
                       ("alone", ["--segment-bytes", 2 * size - 1]),
                       ("index", ["--segment-index-bytes", 1])):
        d = tmp_path / name / "t-0"
        for k, data in enumerate(batches):
            write_segment(d, [data], 3 * k)
        r = invoke(runner, app, "compact", d, "--now", T0 + 1000, "--json", *args)
        assert r.exit_code == 0, r.output
        assert json.loads(r.stdout.splitlines()[0])["segments_cleaned"] == 4
        assert invoke(runner, app, "verify", d).exit_code == 0
        roots[name] = sorted(int(p.name[:20]) for p in d.iterdir() if p.name.endswith(".log"))
    assert roots == {"default": [0, 12], "pairs": [0, 6, 12], "alone": [0, 3, 6, 9, 12],
                     "index": [0, 3, 6, 9, 12]}
    r = invoke(runner, app, "compact", tmp_path / "default" / "t-0", "--now", T0, "--segment-bytes", 0)
    assert r.exit_code == 2


def test_compact_dedupe_buffer_size(runner, app, tmp_path):
    _needs("compact")
    d = tmp_path / "t-0"
    out, off = [], 0
    for i in range(6):
        b = BatchBuilder(base_offset=off, timestamp_extended=False)
        for j in range(4):
            b.append(T0 + off + j, f"k{i}-{j}".encode(), b"v")
        out.append(b.build())
        off += 4
    write_segment(d, out[:5], 0)
    write_segment(d, out[5:], 20)  # active segment
    r = invoke(runner, app, "compact", d, "--now", T0 + 1000, "--json", "--dedupe-buffer-size", 24 * 10)
    assert r.exit_code == 0, r.output
    obj = json.loads(r.stdout.splitlines()[0])
    # 10 slots hold 9 keys: two batches and one key of the third a pass; 20 keys, all distinct
    assert obj["passes"] == 3 and obj["distinct_keys"] == 9 and obj["records_written"] == 20
    before = sorted((p.name, p.read_bytes()) for p in d.iterdir())
    r = invoke(runner, app, "compact", d, "--now", T0 + 1000, "--dedupe-buffer-size", 24 * 2)
    assert r.exit_code == 2 and "too small" in r.output
    assert sorted((p.name, p.read_bytes()) for p in d.iterdir()) == before
