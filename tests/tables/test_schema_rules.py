"""Issue 38 in tables and exports: the same bytes give the same row whenever they are exported (each
value with its writer schema; a pinned reader schema recorded and kept), and --on-decode-error
null / dead-letter (exactly once across reruns, a crash between the two commits included)."""
from __future__ import annotations

import io
import json
import os

import pytest

import kbatch

pa = pytest.importorskip("pyarrow")
pytest.importorskip("deltalake")
pytest.importorskip("pyiceberg")
pytest.importorskip("fastavro")

from kbatch.values import Avro, frame  # noqa: E402
from support.schemas import ORDER_V1, ORDER_V2, Registry, avro_value  # noqa: E402

from test_typed_tables import FORMATS, Table, append  # noqa: E402

V1, V2 = ORDER_V1, ORDER_V2


@pytest.fixture(params=FORMATS)
def table(request, tmp_path):
    return Table(request.param, tmp_path)


def v1(i: int) -> bytes:
    return avro_value(1, V1, {"id": i, "item": f"i{i}", "legacy": "L"})


def v2(i: int) -> bytes:
    return avro_value(2, V2, {"id": i, "item": "n", "qty": i, "note": None, "ship": None})


def test_v1_rows_read_the_same_whichever_run_exported_them(table, tmp_path):
    """Run 1: the registry has only v1. Then v2 (qty with a default) is registered and run 2 exports
    more v1 values and v2 values. Before issue 38 run 2 read its v1 values with v2 (qty = 1, legacy
    dropped) while run 1's v1 rows had qty = NULL: one table, two answers for the same bytes."""
    path = str(tmp_path / "logs" / "orders-0")
    append(path, [v1(i) for i in range(3)])
    schemas = {1: ("AVRO", json.dumps(V1), [], "orders-value", 1)}
    with Registry(schemas) as reg:
        assert table.export(str(tmp_path / "logs"), value_schema="avro", schemas=reg.url).rows == 3
        schemas[2] = ("AVRO", json.dumps(V2), [], "orders-value", 2)
        append(path, [v1(i) for i in range(3)] + [v2(i) for i in range(6, 8)])   # the same v1 bytes again
        assert table.export(str(tmp_path / "logs"), value_schema="avro", schemas=reg.url).rows == 5
    rows = table.rows()["value"].to_pylist()
    first, second = rows[:3], rows[3:6]
    assert all(r["qty"] is None and r["legacy"] == "L" for r in first + second), rows
    assert first == second
    assert rows[6]["qty"] == 6 and rows[6]["legacy"] is None
    # decode_columns of the same bytes agrees row for row
    want = kbatch.decode_columns(b"".join(open(os.path.join(path, n), "rb").read() for n in sorted(os.listdir(path))
                                          if n.endswith(".log")),
                                 value_schema=Avro(_source(schemas)))
    typ = table.rows().schema.field("value").type
    assert want["value"].cast(typ).to_pylist() == rows


def _source(schemas):
    from kbatch.values import TopicSchemas
    from support.schemas import schema_key, schema_value

    return TopicSchemas.from_records([(i, schema_key(s[3], s[4]), schema_value(s[3], s[4], sid, json.loads(s[1])))
                                      for i, (sid, s) in enumerate(sorted(schemas.items()))])


def test_a_pinned_reader_schema_is_recorded_and_kept(table, tmp_path):
    path = str(tmp_path / "logs" / "orders-0")
    append(path, [v1(0), v2(1)])
    schemas = {1: ("AVRO", json.dumps(V1), [], "orders-value", 1), 2: ("AVRO", json.dumps(V2), [], "orders-value", 2)}
    with Registry(schemas) as reg:
        r = table.export(str(tmp_path / "logs"), value_schema="avro:orders-value@2", schemas=reg.url)
        assert r.rows == 2
        assert table.rows()["value"].to_pylist()[0] == {"id": 0, "item": "i0", "qty": 1, "note": None, "ship": None}
        append(path, [v1(2)])
        # another rule for the same table is refused before anything is written
        for other in ("avro", "avro:orders-value@1"):
            with pytest.raises(kbatch.KBatchError, match="the same bytes would read differently"):
                table.export(str(tmp_path / "logs"), value_schema=other, schemas=reg.url)
        assert table.export(str(tmp_path / "logs"), value_schema="avro:orders-value@2", schemas=reg.url).rows == 1
        assert table.rows()["value"].to_pylist()[2]["qty"] == 1


def poison(path: str) -> None:
    """orders-0: good values with one that is not framed (offset 2) and one of an unknown id (4)."""
    append(path, [v1(0), v1(1), b"plain text", v2(3), frame(99, b"\x00"), v2(5)],
           keys=[b"k%d" % i for i in range(6)], per_batch=2)


def test_dead_letters_exactly_once_across_reruns_and_a_crash(table, tmp_path, monkeypatch):
    logs = tmp_path / "logs"
    poison(str(logs / "orders-0"))
    append(str(logs / "orders-1"), [v2(10), v2(11)])
    sr = {1: ("AVRO", json.dumps(V1), [], "orders-value", 1), 2: ("AVRO", json.dumps(V2), [], "orders-value", 2)}
    with Registry(sr) as reg:
        # fail (the default): the poisoned partition is not advanced, the other one is
        r = table.export(str(logs), value_schema="avro", schemas=reg.url)
        assert table.ends() == {"orders-1": 2} and len(r.problems) == 1 and "offset 2" in r.problems[0]
        # a run that dies after the dead-letter commit, before the table's own commit
        target_cls = type(_target(table))
        real = target_cls.commit
        calls = []

        def dying(self, *a, **kw):
            if not self.uri.endswith("_dead_letter"):
                calls.append(1)
                raise RuntimeError("killed between the two commits")
            return real(self, *a, **kw)
        monkeypatch.setattr(target_cls, "commit", dying)
        with pytest.raises(RuntimeError, match="killed"):
            table.export(str(logs), value_schema="avro", schemas=reg.url, on_decode_error="dead-letter")
        monkeypatch.setattr(target_cls, "commit", real)
        assert calls and table.ends() == {"orders-1": 2}
        r = table.export(str(logs), value_schema="avro", schemas=reg.url, on_decode_error="dead-letter")
        assert r.dead_letters == 2 and not r.problems and r.rows == 4
        again = table.export(str(logs), value_schema="avro", schemas=reg.url, on_decode_error="dead-letter")
        assert again.rows == 0 and again.dead_letters == 0
    assert table.ends() == {"orders-0": 6, "orders-1": 2}
    got = table.rows()
    import pyarrow.compute as pc

    p0 = got.filter(pc.equal(got["partition"], 0))
    assert p0["offset"].to_pylist() == [0, 1, 3, 5]
    letters = _letters(table)
    assert letters["offset"].to_pylist() == [2, 4]            # once each, the crash notwithstanding
    assert letters["value"].to_pylist() == [b"plain text", frame(99, b"\x00")]
    assert letters["key"].to_pylist() == [b"k2", b"k4"]
    assert letters["schema_id"].to_pylist() == [None, 99]
    err = letters["error"].to_pylist()
    assert "offset 2" in err[0] and "magic byte" in err[0] and "no schema with id 99" in err[1]


def _target(table):
    if table.fmt == "delta":
        from kbatch.tables._delta import DeltaTarget

        return DeltaTarget(table.name)
    from kbatch.tables._iceberg import IcebergTarget

    return IcebergTarget(table.name, None, table.warehouse)


def _letters(table) -> pa.Table:
    import pathlib

    t = Table(table.fmt, pathlib.Path(table.warehouse).parent)
    t.name = table.name + "_dead_letter"
    return t.rows()


def test_on_decode_error_null_keeps_the_rows(table, tmp_path):
    logs = tmp_path / "logs"
    poison(str(logs / "orders-0"))
    folder = tmp_path / "schemas"
    folder.mkdir()
    (folder / "1.avsc").write_text(json.dumps(V1))
    (folder / "2.avsc").write_text(json.dumps(V2))
    r = table.export(str(logs), value_schema="avro", schemas=str(folder), on_decode_error="null")
    assert r.rows == 6 and r.nulled == 2 and not r.problems
    vals = table.rows()["value"].to_pylist()
    assert [v is None for v in vals] == [False, False, True, False, True, False]


def test_cli_file_export_dead_letters_beside_each_file(tmp_path):
    pytest.importorskip("typer")
    from kbatch.cli.export import cmd_export

    logs = tmp_path / "logs"
    poison(str(logs / "orders-0"))
    folder = tmp_path / "schemas"
    folder.mkdir()
    (folder / "1.avsc").write_text(json.dumps(V1))
    (folder / "2.avsc").write_text(json.dumps(V2))
    out = tmp_path / "out"
    err = io.StringIO()
    code = cmd_export(str(logs), to=str(out), serdes=["value=avro"], schemas=str(folder), quiet=True,
                      on_decode_error="dead-letter", out=io.StringIO(), err=err)
    assert code == 0, err.getvalue()
    assert "2 record(s) did not decode" in err.getvalue()
    letters = [json.loads(line) for f in sorted(out.rglob("*.dead-letter.jsonl")) for line in open(f)]
    assert [(x["offset"], x["schema_id"]) for x in letters] == [(2, None), (4, 99)]
    import base64

    assert base64.b64decode(letters[0]["value"]) == b"plain text" and letters[0]["key"] == base64.b64encode(b"k2").decode()
    import pyarrow.dataset as ds

    rows = ds.dataset(str(out), partitioning="hive").to_table().sort_by("offset")
    assert rows["offset"].to_pylist() == [0, 1, 3, 5]
    # the default is still fail: the segment is named and not exported, exit 1
    err = io.StringIO()
    assert cmd_export(str(logs), to=str(tmp_path / "strict"), serdes=["value=avro"], schemas=str(folder), quiet=True,
                      out=io.StringIO(), err=err) == 1
    assert "offset 2" in err.getvalue()


def test_cli_on_decode_error_option(tmp_path):
    pytest.importorskip("typer")
    import subprocess
    import sys

    logs = tmp_path / "logs"
    poison(str(logs / "orders-0"))
    folder = tmp_path / "schemas"
    folder.mkdir()
    (folder / "1.avsc").write_text(json.dumps(V1))
    (folder / "2.avsc").write_text(json.dumps(V2))
    base = [sys.executable, "-m", "kbatch", "export", str(logs), "-s", "value=avro", "--schemas", str(folder), "-q"]
    bad = subprocess.run(base + ["--to", str(tmp_path / "a"), "--on-decode-error", "skip"], capture_output=True,
                         text=True, timeout=300)
    assert bad.returncode == 2 and "--on-decode-error must be one of fail, null, dead-letter" in bad.stderr
    ok = subprocess.run(base + ["--to", str(tmp_path / "t"), "--format", "delta", "--on-decode-error", "dead-letter"],
                        capture_output=True, text=True, timeout=300)
    assert ok.returncode == 0, ok.stderr
    assert f"2 record(s) did not decode: in the table {tmp_path / 't'}_dead_letter" in ok.stderr


def test_a_refused_registry_stops_a_table_export_at_the_first_failure(table, tmp_path):
    """Not one failed partition (and request) after another: the run stops, nothing is committed."""
    import socket

    from kbatch.values import RegistrySchemas
    from kbatch.values.sources import SchemaSourceUnavailable

    for p in range(3):
        append(str(tmp_path / "logs" / f"orders-{p}"), [v1(i) for i in range(4)])
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    source = RegistrySchemas(f"http://127.0.0.1:{port}", timeout=5)
    with pytest.raises(SchemaSourceUnavailable, match="refused"):
        table.export(str(tmp_path / "logs"), value_schema="avro", schemas=source, on_decode_error="null")
    assert source.requests == 1
    with pytest.raises(Exception):
        table.version()  # no table was made
