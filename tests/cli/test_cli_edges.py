"""A new user's first runs (issue 38): a failed partition never reads "up to date", cat prints no
line for a record it could not format, internal topics stay out of a directory read unless asked
for, CSV export, a file --to with another format refused, repeated -t, unwrapped --help in a pipe,
the Iceberg catalog's name."""
from __future__ import annotations

import csv
import io
import json
import os
import subprocess
import sys

import pytest

pytest.importorskip("typer", reason="the CLI needs typer (the cli extra)")
pa = pytest.importorskip("pyarrow")

import kbatch  # noqa: E402
from kbatch.cli import main  # noqa: E402
from kbatch.cli.cat import SHOWN_ERRORS, cmd_cat  # noqa: E402

INTERNAL = ("__consumer_offsets", "__transaction_state", "__cluster_metadata", "_schemas", "__remote_log_metadata")


def _partition(path, records):
    log = kbatch.Log.create(str(path))
    b = kbatch.BatchBuilder()
    for i, (k, v) in enumerate(records):
        b.append(1000 + i, k, v)
    log.append(b.build(), now_ms=5000)
    log.close()


def run(argv, capsys):
    code = main([str(a) for a in argv])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


# ------------------------------------------------------------------------------------ schemas
@pytest.fixture
def bad_schema(tmp_path):
    """orders_bad-0: values framed with schema id 9, which the _schemas partition does not hold;
    orders-0: values with id 1, which it does."""
    pytest.importorskip("fastavro")
    from support.schemas import SchemasTopic, avro_value

    v1 = {"type": "record", "name": "Order", "fields": [{"name": "id", "type": "long"}]}
    t = SchemasTopic(str(tmp_path / "sr" / "_schemas-0"))
    t.register("orders-value", 1, 1, v1)
    t.register("orders_bad-value", 1, 1, v1)
    t.close()
    _partition(tmp_path / "logs" / "orders_bad-0", [(b"\x07", avro_value(9, v1, {"id": i})) for i in range(30)])
    _partition(tmp_path / "logs" / "orders-0", [(None, avro_value(1, v1, {"id": i})) for i in range(3)])
    return tmp_path


def test_a_failed_delta_partition_says_failed_and_leaves_no_folders(bad_schema, capsys):
    root = bad_schema
    to = root / "orders_delta"
    args = ["export", root / "logs" / "orders_bad-0", "--format", "delta", "--to", to, "-s", "value=avro",
            "--schemas", root / "sr" / "_schemas-0"]
    code, out, err = run(args, capsys)
    assert code == 1
    assert "up to date" not in out
    assert out.startswith("orders_bad-0: FAILED at offset 0: value at offset 0 (schema id 9): no schema with id 9")
    assert "FAILED" in out.splitlines()[-1] and "no table written" in out
    assert not to.exists(), list(os.walk(to))  # a first export that failed leaves nothing
    code, out, err = run(args + ["--json"], capsys)
    assert code == 1
    part, table = (json.loads(line) for line in out.splitlines())
    assert part["error"].startswith("value at offset 0 (schema id 9)") and part["error_offset"] == 0
    assert part["rows"] == 0 and table["failed"] == 1 and table["version"] is None
    assert not to.exists()


def test_a_failed_partition_beside_a_good_one(bad_schema, capsys):
    """The good partition is committed; the failed one leaves no topic=/partition= folder behind."""
    root = bad_schema
    to = root / "orders_delta"
    code, out, err = run(["export", root / "logs", "--format", "delta", "--to", to, "-s", "value=avro",
                          "--schemas", root / "sr" / "_schemas-0", "--json"], capsys)
    assert code == 1
    by_topic = {o.get("topic"): o for o in map(json.loads, out.splitlines())}
    assert by_topic["orders"]["error"] is None and by_topic["orders"]["rows"] == 3
    assert by_topic["orders_bad"]["error"] and by_topic["orders_bad"]["end"] == by_topic["orders_bad"]["start"]
    assert (to / "_delta_log").is_dir() and (to / "topic=orders").is_dir()
    assert not (to / "topic=orders_bad").exists()


def test_a_failed_iceberg_partition_says_failed(bad_schema, capsys):
    pytest.importorskip("pyiceberg")
    root = bad_schema
    code, out, err = run(["export", root / "logs" / "orders_bad-0", "--format", "iceberg", "--to", "kafka.orders",
                          "--warehouse", root / "wh", "-s", "value=avro", "--schemas", root / "sr" / "_schemas-0"],
                         capsys)
    assert code == 1
    assert out.startswith("orders_bad-0: FAILED at offset 0:") and "up to date" not in out
    assert not list((root / "wh").rglob("*.parquet"))


def test_a_failed_segment_of_a_file_export_says_failed(bad_schema, capsys):
    root = bad_schema
    to = root / "out"
    args = ["export", root / "logs", "--to", to, "-s", "value=avro", "--schemas", root / "sr" / "_schemas-0"]
    code, out, err = run(args + ["-q"], capsys)
    assert code == 1
    (line,) = out.splitlines()  # said even with -q
    assert line.endswith("FAILED at offset 0: value in orders_bad [0] at offset 0 (schema id 9): no schema with id 9 "
                         "in the _schemas "
                         "topic at " + str(root / "sr" / "_schemas-0") + " (1 schema ids in 2 records) (not exported)")
    assert not (to / "topic=orders_bad").exists() and (to / "topic=orders").is_dir()
    code, out, err = run(args + ["--json", "--overwrite"], capsys)
    by_type = {}
    for o in map(json.loads, out.splitlines()):
        by_type.setdefault(o["type"], []).append(o)
    assert [o["error_offset"] for o in by_type["failed"]] == [0] and by_type["failed"][0]["error"]
    assert [o["rows"] for o in by_type["exported"]] == [3]


def cat(*args, **kw):
    out, err = io.BytesIO(), io.StringIO()
    code = cmd_cat(*args, out=out, err=err, quiet=True, **kw)
    return code, out.getvalue().decode(), err.getvalue()


def test_cat_prints_no_line_for_a_value_it_cannot_decode(bad_schema):
    root = bad_schema
    code, out, err = cat(str(root / "logs"), serdes=["value=avro"], schemas=str(root / "sr" / "_schemas-0"))
    assert code == 1
    assert out.splitlines() == ['{"id":0}', '{"id":1}', '{"id":2}']  # orders-0 only: not 30 blank lines
    lines = err.splitlines()
    failed = [line for line in lines if line.startswith("% ERROR: Failed to format")]
    assert len(failed) == SHOWN_ERRORS < 30  # bounded, then counted
    assert lines[-1] == f"% ERROR: 30 record(s) could not be formatted and were not printed; the first {SHOWN_ERRORS} " \
                        f"are above"
    # the decoder's error names the value once: no "value: value (schema id 9)"
    assert failed[0] == ("% ERROR: Failed to format message in orders_bad [0] at offset 0: value (schema id 9): no "
                         f"schema with id 9 in the _schemas topic at {root / 'sr' / '_schemas-0'} (1 schema ids in 2 "
                         "records) (not printed)")


def test_cat_key_error_is_not_doubled(bad_schema):
    root = bad_schema
    code, out, err = cat(str(root / "logs" / "orders_bad-0"), serdes=["key=avro"], count=1, fmt="%k %s\\n",
                         schemas=str(root / "sr" / "_schemas-0"))
    assert code == 1 and out == ""
    assert "at offset 0: key: 1 bytes" in err and "key: key:" not in err


def test_cat_json_keeps_the_line_with_the_error_named(bad_schema):
    root = bad_schema
    code, out, err = cat(str(root / "logs" / "orders_bad-0"), serdes=["value=avro"], count=2, as_json=True,
                         schemas=str(root / "sr" / "_schemas-0"))
    assert code == 1
    rows = [json.loads(line) for line in out.splitlines()]
    assert [r["offset"] for r in rows] == [0, 1]
    assert rows[0]["payload"] is None and rows[0]["payload_error"].startswith("value (schema id 9)")
    assert "printed with key_error/payload_error" in err


def test_cat_pack_format_failure_prints_no_line(tmp_path):
    _partition(tmp_path / "t-0", [(None, b"\x00\x00\x00\x01"), (None, b"\x01"), (None, b"\x00\x00\x00\x02")])
    code, out, err = cat(str(tmp_path / "t-0"), serdes=["value=>I"])
    assert code == 1
    assert out.splitlines() == ["1", "2"]
    assert "t [0] at offset 1: value: truncated" in err


def test_cat_s_error_names_the_schema_kinds(tmp_path, capsys):
    _partition(tmp_path / "t-0", [(None, b"v")])
    code, out, err = run(["cat", tmp_path / "t-0", "-s", "value=foo"], capsys)
    assert code == 2
    assert "avro, json, protobuf" in err and "text, hex, base64" in err


# ------------------------------------------------------------------------------------ internal topics
@pytest.fixture
def broker_dir(tmp_path):
    """A broker's log directory: two user topics and the cluster's internal ones."""
    root = tmp_path / "kafka-logs"
    for name in ("orders", "payments", *INTERNAL):
        _partition(root / f"{name}-0", [(b"k", name.encode())])
    return root


def test_export_leaves_internal_topics_out(broker_dir, tmp_path, capsys):
    import pyarrow.dataset as ds

    def topics(to):
        return sorted(set(ds.dataset(str(to), partitioning="hive").to_table().column("topic").to_pylist()))

    assert run(["export", broker_dir, "--to", tmp_path / "a", "-q"], capsys)[0] == 0
    assert topics(tmp_path / "a") == ["orders", "payments"]
    assert run(["export", broker_dir, "--to", tmp_path / "b", "-q", "--include-internal"], capsys)[0] == 0
    assert topics(tmp_path / "b") == sorted(["orders", "payments", *INTERNAL])
    # named exactly: read (as a Kafka consumer may subscribe to an internal topic by name)
    assert run(["export", broker_dir, "--to", tmp_path / "c", "-q", "--topic", "__consumer_offsets",
                "--topic", "pay*"], capsys)[0] == 0
    assert topics(tmp_path / "c") == ["__consumer_offsets", "payments"]
    # a glob takes internal topics only with --include-internal
    assert run(["export", broker_dir, "--to", tmp_path / "d", "-q", "--topic", "*"], capsys)[0] == 0
    assert topics(tmp_path / "d") == ["orders", "payments"]
    assert run(["export", broker_dir, "--to", tmp_path / "e", "-q", "--exclude-topic", "pay*"], capsys)[0] == 0
    assert topics(tmp_path / "e") == ["orders"]
    # a partition directory named as the path is read whatever its topic
    assert run(["export", broker_dir / "__consumer_offsets-0", "--to", tmp_path / "f.jsonl", "-q"], capsys)[0] == 0
    assert [json.loads(line)["topic"] for line in open(tmp_path / "f.jsonl")] == ["__consumer_offsets"]


def test_tables_and_read_topic_leave_internal_topics_out(broker_dir, tmp_path, capsys):
    from kbatch.tables.read import read_topic

    assert sorted(set(read_topic(str(broker_dir)).column("topic").to_pylist())) == ["orders", "payments"]
    got = read_topic(str(broker_dir), include_internal=True).column("topic").to_pylist()
    assert sorted(set(got)) == sorted(["orders", "payments", *INTERNAL])
    assert read_topic(str(broker_dir), topics=["_schemas"]).column("topic").to_pylist() == ["_schemas"]
    pytest.importorskip("deltalake")
    code, out, err = run(["export", broker_dir, "--format", "delta", "--to", tmp_path / "d", "--json"], capsys)
    assert code == 0, err
    assert sorted(o["topic"] for o in map(json.loads, out.splitlines()) if o["type"] == "partition") == \
        ["orders", "payments"]


def test_cat_and_stats_leave_internal_topics_out_and_take_several_t(broker_dir, capsys):
    code, out, err = run(["cat", broker_dir, "-q"], capsys)
    assert code == 0 and sorted(out.split()) == ["orders", "payments"]
    code, out, err = run(["cat", broker_dir, "-q", "--include-internal"], capsys)
    assert sorted(out.split()) == sorted(["orders", "payments", *INTERNAL])
    # -t repeated: every one, not only the last
    code, out, err = run(["cat", broker_dir, "-q", "-t", "orders", "-t", "__consumer_offsets"], capsys)
    assert code == 0 and sorted(out.split()) == ["__consumer_offsets", "orders"]
    code, out, err = run(["stats", broker_dir, "--json", "-t", "orders", "-t", "payments"], capsys)
    assert code == 0 and sorted(json.loads(line)["topic"] for line in out.splitlines()) == ["orders", "payments"]
    code, out, err = run(["stats", broker_dir, "--json"], capsys)
    assert sorted(json.loads(line)["topic"] for line in out.splitlines()) == ["orders", "payments"]


# ------------------------------------------------------------------------------------ CSV and --to
def test_export_csv(tmp_path, capsys):
    _partition(tmp_path / "t-0", [(b"k1", b"v1"), (None, b"v,2\n"), (b"k3", None)])
    assert run(["export", tmp_path / "t-0", "--to", tmp_path / "events.csv", "-q", "--binary", "text"], capsys)[0] == 0
    assert (tmp_path / "events.csv").is_file()  # one file, not a folder of Parquet files
    with open(tmp_path / "events.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    assert [(r["offset"], r["key"], r["value"], r["topic"]) for r in rows] == [
        ("0", "k1", "v1", "t"), ("1", "", "v,2\n", "t"), ("2", "k3", "", "t")]
    assert rows[0]["timestamp"] == "1000" and rows[2]["isTombstone"] == "true"
    assert run(["export", tmp_path / "t-0", "--to", tmp_path / "out", "--format", "csv", "-q"], capsys)[0] == 0
    (made,) = (tmp_path / "out" / "topic=t" / "partition=0").iterdir()
    assert made.name.endswith(".csv")
    with open(made, newline="") as f:
        rows = list(csv.DictReader(f))
    assert rows[0]["value"] == "djE=" and "topic" not in rows[0]  # base64 by default; topic is in the path


@pytest.mark.parametrize("to, fmt", [("events.csv", "parquet"), ("events.json", "csv"), ("x.parquet", "jsonl"),
                                     ("events.csv", "delta")])
def test_a_file_to_with_another_format_is_refused(tmp_path, capsys, to, fmt):
    _partition(tmp_path / "t-0", [(None, b"v")])
    code, out, err = run(["export", tmp_path / "t-0", "--to", tmp_path / to, "--format", fmt], capsys)
    assert code == 2
    assert f"--format is {fmt}" in err and not (tmp_path / to).exists()


# ------------------------------------------------------------------------------------ --help, Iceberg
def test_help_in_a_pipe_is_not_cut_at_80_columns(tmp_path):
    env = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "TERMINAL_WIDTH")}
    src = os.path.dirname(os.path.dirname(kbatch.__file__))
    env["PYTHONPATH"] = src + os.pathsep + env.get("PYTHONPATH", "")
    r = subprocess.run([sys.executable, "-m", "kbatch", "export", "--help"], capture_output=True, text=True, env=env,
                       timeout=120)
    assert r.returncode == 0, r.stderr
    (line,) = [x for x in r.stdout.splitlines() if x.strip().startswith("--include-internal")]
    assert "left out by default, as Kafka's exclude.internal.topics" in line  # the whole help on its line
    assert not any(x.startswith(("│", "╭")) for x in r.stdout.splitlines())


def test_iceberg_catalog_name(tmp_path, capsys):
    pytest.importorskip("pyiceberg")
    from pyiceberg.catalog import load_catalog

    _partition(tmp_path / "orders-0", [(b"k", b"v")] * 2)
    wh = tmp_path / "wh"
    code, out, err = run(["export", tmp_path / "orders-0", "--format", "iceberg", "--to", "kafka.orders",
                          "--warehouse", wh, "--catalog-name", "lake", "-q"], capsys)
    assert code == 0, err
    uri = f"sqlite:///{wh}/catalog.db"
    table = load_catalog("lake", type="sql", uri=uri, warehouse=f"file://{wh}").load_table("kafka.orders")
    assert table.scan().to_arrow().num_rows == 2
    from pyiceberg.exceptions import NoSuchTableError
    with pytest.raises(NoSuchTableError):  # a SQL catalog's rows carry its name: another name sees nothing
        load_catalog("kbatch", type="sql", uri=uri).load_table("kafka.orders")
    code, out, err = run(["export", tmp_path / "orders-0", "--to", tmp_path / "d", "--format", "delta",
                          "--catalog-name", "lake"], capsys)
    assert code == 2 and "--catalog-name" in err


# ------------------------------------------------------------------------------------ the docs a new user reads
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _read(*parts):
    path = os.path.join(ROOT, *parts)
    if not os.path.exists(path):
        pytest.skip(f"{path} is not beside the tests")
    with open(path, encoding="utf-8") as f:
        return f.read()


def test_readme_extras_table_names_every_extra():
    import re
    import tomllib

    extras = set(tomllib.loads(_read("pyproject.toml"))["project"]["optional-dependencies"])
    readme = _read("README.md")
    table = readme[readme.index("| extra | adds | for |"):]
    table = table[:table.index("\n\n")]
    listed = set(re.findall(r"^\| `([a-z]+)` \|", table, re.M))
    assert extras <= listed, f"README's extras table lacks {sorted(extras - listed)}"


def test_spark_docs_speak_to_a_pip_user():
    """No "streams need the JVM reader" (the Python reader streams too), and every `dev.py
    spark-jars` comes after what a pip-installed user does (Maven coordinates), as the checkout's way."""
    text = " ".join(_read("docs", "spark.md").split())
    assert "streams need the JVM reader" not in text
    for at in [i for i in range(len(text)) if text.startswith("dev.py spark-jars", i)]:
        before = text[max(0, at - 400):at]
        assert "In a checkout" in before and ("spark.jars.packages" in before or "--packages" in before), \
            text[at - 200:at + 40]
