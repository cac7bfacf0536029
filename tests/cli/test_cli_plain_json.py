"""`-s value=json-plain[:SCHEMA_FILE]`: unframed JSON values typed in `kbatch cat`, `kbatch export`
(files and tables) with no --schemas, and bad values under --on-decode-error fail|null|dead-letter."""
from __future__ import annotations

import io
import json
import os

import pytest

pytest.importorskip("typer", reason="the CLI needs typer (the cli extra)")
pa = pytest.importorskip("pyarrow")

import kbatch
from kbatch.cli._common import UsageProblem
from kbatch.cli.cat import cmd_cat
from kbatch.cli.export import cmd_export

SCHEMA = {"type": "object", "properties": {"id": {"type": "integer"}, "item": {"type": "string"},
                                           "ship": {"type": "object", "properties": {"city": {"type": "string"}}}}}
VALUES = [b'{"id":1,"item":"pen","ship":{"city":"Oslo"},"extra":[1]}', None, b'{"id":2,"item":"ink","ship":null}',
          b'{"id":"three"}', b"{oops"]


@pytest.fixture
def logs(tmp_path):
    log = kbatch.Log.create(str(tmp_path / "logs" / "orders-0"))
    b = kbatch.BatchBuilder()
    for i, v in enumerate(VALUES):
        b.append(1000 + i, b"k%d" % i, v)
    log.append(b.build(), now_ms=2000)
    log.close()
    (tmp_path / "order.json").write_text(json.dumps(SCHEMA))
    return tmp_path


def cat(*args, **kw):
    out, err = io.BytesIO(), io.StringIO()
    code = cmd_cat(*args, out=out, err=err, quiet=True, **kw)
    return code, out.getvalue().decode(), err.getvalue()


def export(*args, **kw):
    out, err = io.StringIO(), io.StringIO()
    return cmd_export(*args, quiet=True, out=out, err=err, **kw), err.getvalue()


def test_cat_prints_values_fitted_to_the_schema_and_names_bad_ones(logs):
    code, out, err = cat(str(logs / "logs" / "orders-0"), serdes=[f"value=json-plain:{logs / 'order.json'}"],
                         fmt="%o %s\\n")
    assert code == 1
    assert out.splitlines() == ['0 {"id":1,"item":"pen","ship":{"city":"Oslo"}}', "1 ",
                                '2 {"id":2,"item":"ink","ship":null}']
    assert "offset 3" in err and "expected integer at /id, found string" in err
    assert "offset 4" in err and "not JSON" in err


def test_cat_json_envelope_embeds_the_value_without_a_schema_id(logs):
    code, out, _err = cat(str(logs / "logs" / "orders-0"), serdes=["value=json-plain"], as_json=True, count=1)
    assert code == 0
    row = json.loads(out.splitlines()[0])
    assert row["payload"] == {"id": 1, "item": "pen", "ship": {"city": "Oslo"}, "extra": [1]}
    assert "value_schema_id" not in row


def test_usage_errors(logs):
    with pytest.raises(UsageProblem, match="cannot be read"):
        cat(str(logs / "logs"), serdes=["value=json-plain:nowhere.json"])
    with pytest.raises(UsageProblem, match="json-plain"):
        export(str(logs / "logs"), to=str(logs / "o"), serdes=["value=xml"])


@pytest.mark.parametrize("mode", ["fail", "null", "dead-letter"])
def test_export_files_under_each_on_decode_error(logs, mode):
    to = str(logs / "out") + "/"
    code, err = export(str(logs / "logs"), to=to, serdes=[f"value=json-plain:{logs / 'order.json'}"],
                       on_decode_error=mode)
    if mode == "fail":
        assert code == 1 and "offset 3" in err and not os.path.exists(os.path.join(to, "topic=orders"))
        return
    assert code == 0, err
    import pyarrow.dataset as ds

    t = ds.dataset(to, partitioning="hive", format="parquet").to_table()
    assert t.schema.field("value").type == pa.struct([("id", pa.int64()), ("item", pa.string()),
                                                      ("ship", pa.struct([("city", pa.string())]))])
    ids = [None if v is None else v["id"] for v in t.column("value").to_pylist()]
    if mode == "null":
        assert ids == [1, None, 2, None, None]
        return
    assert ids == [1, None, 2]
    letters_dir = os.path.join(to, "_dead_letter", "topic=orders", "partition=0")
    letters = [json.loads(line) for f in os.listdir(letters_dir) for line in open(os.path.join(letters_dir, f))]
    assert [(x["offset"], x["schema_id"]) for x in letters] == [(3, None), (4, None)]
    assert "not JSON" in letters[1]["error"]


def test_export_files_infers_per_topic_as_jsonl(logs):
    to = str(logs / "orders.jsonl")
    code, err = export(str(logs / "logs"), to=to, serdes=["value=json-plain"], on_decode_error="null")
    assert code == 0, err
    rows = [json.loads(line) for line in open(to)]
    # inferred over the sample: id is an integer in one value, a string in another -> its JSON text
    assert rows[0]["value"] == {"id": "1", "item": "pen", "ship": {"city": "Oslo"}, "extra": [1]}
    assert rows[3]["value"]["id"] == "three" and rows[4]["value"] is None


def test_export_table_with_plain_json(logs):
    pytest.importorskip("deltalake")
    import deltalake

    to = str(logs / "tbl")
    code, err = export(str(logs / "logs"), to=to, fmt="delta", serdes=[f"value=json-plain:{logs / 'order.json'}"],
                       on_decode_error="dead-letter")
    assert code == 0, err
    t = deltalake.DeltaTable(to).to_pyarrow_table()
    assert [None if v is None else v["id"] for v in t.column("value").to_pylist()] == [1, None, 2]
    assert deltalake.DeltaTable(to + "_dead_letter").to_pyarrow_table().num_rows == 2
    # another rule than the table's (its schema's hash): refused before anything is written
    with pytest.raises(kbatch.KBatchError, match="json-plain:inferred"):
        kbatch.export_table(str(logs / "logs"), to, format="delta", value_schema="json-plain")
