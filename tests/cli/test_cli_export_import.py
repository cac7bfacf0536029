"""`kbatch export` and `kbatch import`: segments to Parquet / JSON lines and back through Log,
lossless; resumable per segment; damaged segments named, not exported, exit 1."""
import base64
import json
import os

import numpy as np
import pyarrow as pa
import pyarrow.dataset as ds
import pytest

import kbatch
from kbatch import cli
from kbatch.columns.decode import HEADER_TYPE

typer_testing = pytest.importorskip("typer.testing")

NOW = 1_700_000_000_000


@pytest.fixture
def logs(tmp_path):
    """Two partitions of `orders` in several segments: headers, null keys, tombstones with payloads,
    timestamps before 1970 and none (the log keeps KIP-228 extended timestamps)."""
    root = tmp_path / "logs"
    cfg = kbatch.LogConfig(segment_bytes=16 * 1024, timestamp_extended=True)
    for p in range(2):
        log = kbatch.Log.create(root / f"orders-{p}", cfg)
        i = np.arange(600) + 1000 * p
        log.append_table(pa.table({
            "key": pa.array([None if k % 11 == 0 else b"k%d" % k for k in i], pa.binary()),
            "value": pa.array([None if k % 13 == 0 else b"value %d" % k * 3 for k in i], pa.binary()),
            "timestamp": pa.array([None if k % 7 == 0 else (NOW if k % 2 else -86_400_000) + int(k) for k in i],
                                  pa.timestamp("ms", tz="UTC")),
            "headers": pa.array([[{"key": "n", "value": b"%d" % k}] if k % 5 == 0 else None for k in i], HEADER_TYPE),
            "isTombstone": pa.array([True if k % 17 == 0 else None for k in i], pa.bool_()),
        }), NOW)
        log.close()
    return root


def table_of(root) -> pa.Table:
    """Every partition decoded, sorted by (topic, partition, offset)."""
    parts = []
    for name in sorted(os.listdir(root)):
        log = kbatch.Log.open(root / name)
        data = b"".join(bytes(s.log.buffer()) for s in log.segments)
        t, p = name.rsplit("-", 1)
        parts.append(kbatch.decode_columns(data, t, int(p)))
    return pa.concat_tables(parts)


def invoke(*args):
    res = typer_testing.CliRunner().invoke(cli.make_app(), [str(a) for a in args])
    return res.exit_code, res.output


def test_export_parquet_directory_and_import_back(logs, tmp_path):
    code, text = invoke("export", logs, "--to", tmp_path / "out")
    assert code == 0, text
    assert "exported" in text
    files = sorted(p.relative_to(tmp_path / "out").as_posix() for p in (tmp_path / "out").rglob("*.parquet"))
    assert files[0] == "topic=orders/partition=0/00000000000000000000.parquet" and len(files) == 4
    data = ds.dataset(tmp_path / "out", partitioning="hive").to_table()
    assert data.num_rows == 1200 and {"topic", "partition", "offset", "headers", "isTombstone"} <= set(data.column_names)
    code, text = invoke("import", tmp_path / "out", "--to", tmp_path / "replay", "--config", "timestamp.extended=true")
    assert code == 0, text
    assert "orders-1: 600 records appended, offsets 0..599" in text
    assert table_of(tmp_path / "replay").equals(table_of(logs))  # lossless, offsets as before (no gaps)
    assert kbatch.verify_indexes(tmp_path / "replay" / "orders-0").ok


def test_export_is_resumable_per_segment(logs, tmp_path):
    out = tmp_path / "out"
    assert invoke("export", logs, "--to", out)[0] == 0
    state = json.loads((out / ".kbatch-export.json").read_text())
    first = sorted(state)[0]
    os.unlink(out / first)                                  # as if interrupted before this file was renamed
    code, text = invoke("export", logs, "--to", out, "--json")
    assert code == 0
    lines = [json.loads(x) for x in text.splitlines()]
    assert [x["to"] for x in lines if x["type"] == "exported"] == [first]
    assert all(x["type"] == "skipped" for x in lines if x["to"] != first)
    assert not list(out.rglob(".*.tmp"))


def test_jsonl_round_trip_and_repartitioning(logs, tmp_path):
    code, _ = invoke("export", logs / "orders-1", "--to", tmp_path / "o.jsonl", "-q")
    assert code == 0
    first = json.loads((tmp_path / "o.jsonl").read_text().splitlines()[0])
    assert (first["offset"], first["partition"], first["key"]) == (0, 1, "azEwMDA=")  # base64 of b"k1000"
    code, text = invoke("import", tmp_path / "o.jsonl", "--to", tmp_path / "r", "--config", "timestamp.extended=true")
    assert code == 0, text
    want = table_of(logs)
    assert table_of(tmp_path / "r").equals(want.filter(pa.compute.equal(want["partition"], 1)))
    code, text = invoke("import", tmp_path / "o.jsonl", "--to", tmp_path / "r3", "--topic", "t", "--partitions", "3")
    assert code == 0, text
    assert sorted(os.listdir(tmp_path / "r3")) == ["t-0", "t-1", "t-2"]
    assert table_of(tmp_path / "r3").num_rows == 600


def test_damaged_segment_is_named_not_exported(logs, tmp_path):
    seg = sorted((logs / "orders-0").glob("*.log"))[1]
    data = bytearray(seg.read_bytes())
    data[200] ^= 0xFF
    seg.write_bytes(bytes(data))
    code, text = invoke("export", logs, "--to", tmp_path / "out")
    assert code == 1
    assert seg.name in text and "crc" in text.lower()
    assert not (tmp_path / "out" / "topic=orders" / "partition=0" / seg.name.replace(".log", ".parquet")).exists()
    code, text = invoke("export", logs, "--to", tmp_path / "all.parquet")
    assert code == 1 and not (tmp_path / "all.parquet").exists()   # one file: all or nothing


def test_import_stops_at_a_refused_row_and_says_what_was_appended(tmp_path):
    rows = [{"value": "dg==", "timestamp": NOW + i} for i in range(5)] + [{"value": None, "isTombstone": False}]
    (tmp_path / "in.jsonl").write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    code, text = invoke("import", tmp_path / "in.jsonl", "--to", tmp_path / "r", "--topic", "t")
    assert code == 1
    assert "must be a tombstone" in text and "at row 5" in text
    (tmp_path / "bad.jsonl").write_text('{"value": "not base64!"}\n')
    code, text = invoke("import", tmp_path / "bad.jsonl", "--to", tmp_path / "r2", "--topic", "t")
    assert code == 1 and "Not base64" in text
    assert invoke("import", tmp_path / "missing.parquet", "--to", tmp_path / "r2")[0] == 2


def files_of(root) -> dict:
    """Every file under root (relative path -> bytes): what "left as it was" is checked against."""
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def test_failed_import_leaves_the_files_as_they_were(tmp_path):
    """A failed command leaves the files as they were: the import's earlier append_table calls
    (three partitions, several calls each, segments rolled) are taken out of the partitions that
    existed, byte for byte, and the partition directories it created are removed."""
    root = tmp_path / "r"
    for p in (0, 1):
        log = kbatch.Log.create(root / f"t-{p}", kbatch.LogConfig(segment_bytes=4096))
        log.append_table(pa.table({"value": pa.array([b"old %d" % i * 20 for i in range(40 + p)], pa.binary())}), NOW)
        log.close()
    before = files_of(root)
    src = tmp_path / "src"
    src.mkdir()
    value = base64.b64encode(b"x" * 300).decode()
    (src / "a.jsonl").write_text("".join(json.dumps({"partition": i % 3, "value": value, "timestamp": NOW + i}) + "\n"
                                         for i in range(120)))
    (src / "b.jsonl").write_text("".join(json.dumps({"partition": i % 3, "value": value}) + "\n" for i in range(30))
                                 + json.dumps({"partition": 1, "value": None, "isTombstone": False}) + "\n")
    args = ("import", src, "--to", root, "--topic", "t", "--format", "jsonl", "--config", "segment.bytes=4096")
    code, text = invoke(*args)
    assert code == 1 and "must be a tombstone" in text
    assert f"{root / 't-0'}: not imported, left as it was: the log ends at 40 as before" in text
    assert f"{root / 't-1'}: not imported, left as it was: the log ends at 41 as before" in text
    assert f"{root / 't-2'}: not imported, removed (this import created it)" in text
    assert files_of(root) == before
    assert sorted(os.listdir(root)) == ["t-0", "t-1"]
    for p, end in ((0, 40), (1, 41)):
        log = kbatch.Log.open(root / f"t-{p}")
        assert log.end_offset() == end and not log.problems and log.recovery.recovered_segments == ()
        log.close()
    # --json says the same; a --to directory the import made (two levels here) goes too
    code, text = invoke(*args[:3], tmp_path / "new" / "deeper", *args[4:], "--json")
    assert code == 1 and not (tmp_path / "new").exists()
    assert [json.loads(x) for x in text.splitlines() if x.startswith("{")] == [
        {"type": "rolled_back", "partition": str(tmp_path / "new" / "deeper" / f"t-{p}"), "records": n,
         "next_offset": 0, "removed": True, "outcome": "removed (this import created it)"}
        for p, n in ((0, 50), (1, 40), (2, 40))]  # b.jsonl: partition 0 appended, 1 refused, 2 not reached
    # without the refused row the same import lands whole
    (src / "b.jsonl").write_text("".join((src / "b.jsonl").read_text().splitlines(keepends=True)[:30]))
    assert invoke(*args)[0] == 0
    assert [kbatch.Log.open(root / f"t-{p}").end_offset() for p in range(3)] == [40 + 50, 41 + 50, 50]


def test_topic_names_are_checked_as_kafka_does(tmp_path):
    """A topic names a directory: Kafka's legal names only (Topic.validate), nothing that walks out."""
    (tmp_path / "in.jsonl").write_text('{"topic": "../../etc", "value": "dg=="}\n')
    code, text = invoke("import", tmp_path / "in.jsonl", "--to", tmp_path / "r")
    assert code == 1 and "Topic name is illegal" in text
    assert not (tmp_path / "etc-0").exists() and not (tmp_path / "r").exists()  # --to made, then removed
    assert invoke("import", tmp_path / "in.jsonl", "--to", tmp_path / "r", "--topic", "ok.topic_1-x")[0] == 0
