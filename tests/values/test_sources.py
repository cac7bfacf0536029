"""Schema sources: the `_schemas` topic read offline (Confluent's and Karapace's record shapes,
soft and hard deletes), a registry's REST API (cached), a folder of schema files."""
import base64
import json

import pytest

pytest.importorskip("fastavro")

from kbatch.values import (Avro, DirectorySchemas, RegistrySchemas, SchemaSourceError, TopicSchemas,
                           UnknownSchemaError, open_schemas)
from kbatch.values.sources import Reference
from support.schemas import Registry, SchemasTopic, avro_value, schema_key, schema_value

V1 = {"type": "record", "name": "User", "fields": [{"name": "name", "type": "string"}]}
V2 = {"type": "record", "name": "User", "fields": [{"name": "name", "type": "string"},
                                                  {"name": "age", "type": "int", "default": 0}]}
PROTO = 'syntax = "proto3";\nmessage Click { string url = 1; }\n'
JSON_SCHEMA = {"type": "object", "properties": {"n": {"type": "integer"}}}


@pytest.fixture
def topic_dir(tmp_path):
    t = SchemasTopic(str(tmp_path / "_schemas-0"))
    t.other("NOOP", None)
    t.other("CONFIG", {"compatibilityLevel": "BACKWARD"})
    t.register("users-value", 1, 1, V1)
    t.register("users-value", 2, 2, V2)
    t.register("clicks-value", 1, 3, PROTO, "PROTOBUF")
    t.register("events-value", 1, 4, JSON_SCHEMA, "JSON", karapace=True)
    t.register("copy-value", 1, 1, V1)                     # the same schema under another subject: same id
    t.register("old-value", 1, 5, V1 | {"name": "Old"})
    t.soft_delete("old-value", 1, 5, V1 | {"name": "Old"})
    t.register("gone-value", 1, 6, V1 | {"name": "Gone"})
    t.hard_delete("gone-value", 1)
    t.register("bye-value", 1, 7, V1 | {"name": "Bye"})
    t.register("bye-value", 2, 8, V2 | {"name": "Bye"})
    t.delete_subject("bye-value", 2)
    t.raw(b"not json", b"{}")
    t.close()
    return t.path


def test_topic_replays_schemas_in_offset_order(topic_dir):
    src = open_schemas(topic_dir)
    assert isinstance(src, TopicSchemas)
    assert src.get(1).schema_type == "AVRO" and json.loads(src.get(1).schema) == V1
    assert src.get(2).version == 2 and src.get(2).subject == "users-value"
    assert src.get(3).schema_type == "PROTOBUF" and "Click" in src.get(3).schema
    assert src.get(4).schema_type == "JSON"                     # Karapace's shape: no references, no deleted
    assert src.latest("users-value").id == 2
    assert src.subjects() == {"clicks-value": [1], "copy-value": [1], "events-value": [1], "users-value": [1, 2]}
    assert len(src.problems) == 1 and "not JSON" in src.problems[0]


def test_soft_deleted_schemas_still_decode_hard_deleted_do_not(topic_dir):
    src = TopicSchemas.open(topic_dir)
    assert src.get(5).deleted                                  # soft delete: the id still resolves
    assert src.latest("old-value") is None                     # ... but it is no subject's latest
    assert src.get(7).deleted and src.get(8).deleted           # DELETE_SUBJECT soft-deletes up to its version
    with pytest.raises(UnknownSchemaError, match=r"id 6 .*hard-deleted.*offset \d+") as e:
        src.get(6)
    assert e.value.schema_id == 6
    assert isinstance(e.value, LookupError) and isinstance(e.value, ValueError)


def test_hard_delete_of_one_subject_keeps_an_id_another_subject_holds(tmp_path):
    t = SchemasTopic(str(tmp_path / "_schemas-0"))
    t.register("a-value", 1, 1, V1)
    t.register("b-value", 1, 1, V1)
    t.hard_delete("a-value", 1)
    t.close()
    src = open_schemas(t.path)
    assert src.get(1).subject == "b-value"


def test_topic_from_records_and_references():
    ref_schema = {"type": "record", "name": "Address", "namespace": "x", "fields": [{"name": "city", "type": "string"}]}
    user = {"type": "record", "name": "User", "namespace": "x",
            "fields": [{"name": "name", "type": "string"}, {"name": "home", "type": "x.Address"}]}
    records = [(0, schema_key("address", 1), schema_value("address", 1, 10, ref_schema)),
               (1, schema_key("users-value", 1), schema_value("users-value", 1, 11, user,
                                                              references=[{"name": "x.Address", "subject": "address",
                                                                           "version": 1}]))]
    src = TopicSchemas.from_records(records)
    assert [r.name for r, _ in src.resolve(src.get(11))] == ["x.Address"]
    # an Avro value whose schema references another subject's named type
    import fastavro
    named = {}
    fastavro.parse_schema(ref_schema, named_schemas=named)
    parsed = fastavro.parse_schema(user, named_schemas=named)
    import io
    b = io.BytesIO()
    fastavro.schemaless_writer(b, parsed, {"name": "a", "home": {"city": "Oslo"}})
    from kbatch.values import frame
    fmt = Avro(src)
    assert fmt.decode(frame(11, b.getvalue())) == {"name": "a", "home": {"city": "Oslo"}}
    arr = fmt.to_arrow([frame(11, b.getvalue())])
    assert arr.to_pylist() == [{"name": "a", "home": {"city": "Oslo"}}]


def test_registry_rest_source_caches_each_id():
    with Registry({1: ("AVRO", json.dumps(V1), [], "users-value", 1),
                   3: ("PROTOBUF", PROTO, [], "clicks-value", 1)}) as reg:
        src = open_schemas(reg.url)
        assert isinstance(src, RegistrySchemas)
        assert json.loads(src.get(1).schema) == V1 and src.get(1).schema_type == "AVRO"
        assert src.get(3).schema_type == "PROTOBUF"
        src.get(1)
        assert reg.requests.count("/schemas/ids/1") == 1      # cached
        with pytest.raises(UnknownSchemaError, match="no schema with id 99"):
            src.get(99)
        with pytest.raises(UnknownSchemaError):
            src.get(99)
        assert reg.requests.count("/schemas/ids/99") == 1      # a miss is remembered too
        assert src.latest("users-value").id == 1
        fmt = Avro(src)
        assert fmt.decode(avro_value(1, V1, {"name": "x"}), offset=5) == {"name": "x"}


def test_registry_basic_auth_from_the_url():
    token = "Basic " + base64.b64encode(b"me:s3cret").decode()
    with Registry({1: ("AVRO", json.dumps(V1), [], "s", 1)}, auth=token) as reg:
        ok = RegistrySchemas(reg.url.replace("http://", "http://me:s3cret@"))
        assert ok.get(1).id == 1
        assert "s3cret" not in ok.url
        with pytest.raises(SchemaSourceError, match="HTTP 401"):
            RegistrySchemas(reg.url).get(1)


def test_unreachable_registry_is_a_clear_error():
    src = RegistrySchemas("http://127.0.0.1:9", timeout=2)
    with pytest.raises(SchemaSourceError, match="failed"):
        src.get(1)


def test_directory_source(tmp_path):
    (tmp_path / "1.avsc").write_text(json.dumps(V1))
    (tmp_path / "4.json").write_text(json.dumps(JSON_SCHEMA))
    (tmp_path / "3.proto").write_text('syntax = "proto3";\nimport "common/money.proto";\n'
                                      'message Order { common.Money total = 1; }\n')
    (tmp_path / "common").mkdir()
    (tmp_path / "common" / "money.proto").write_text('syntax = "proto3";\npackage common;\n'
                                                     'message Money { int64 cents = 1; string currency = 2; }\n')
    src = open_schemas(tmp_path)
    assert isinstance(src, DirectorySchemas)
    assert src.ids() == [1, 3, 4]
    assert src.get(4).schema_type == "JSON"
    assert src.get(3).references == (Reference("common/money.proto"),)
    with pytest.raises(UnknownSchemaError):
        src.get(2)
    (tmp_path / "5.avsc").write_text("{}")
    (tmp_path / "5.json").write_text("{}")
    with pytest.raises(SchemaSourceError, match="has 2 files"):
        src.get(5)


def test_open_schemas_refuses_what_it_cannot_read(tmp_path):
    with pytest.raises(SchemaSourceError, match="not a registry URL"):
        open_schemas(tmp_path / "missing")


def test_schema_contexts_keep_their_own_ids():
    """Confluent's contexts: `:.staging:orders-value` has its own id space; the default context is `.`."""
    prod = {"type": "record", "name": "P", "fields": [{"name": "a", "type": "long"}]}
    staging = {"type": "record", "name": "S", "fields": [{"name": "b", "type": "string"}]}
    records = [(0, schema_key("orders-value", 1), schema_value("orders-value", 1, 1, prod)),
               (1, schema_key(":.staging:orders-value", 1), schema_value(":.staging:orders-value", 1, 1, staging))]
    assert json.loads(TopicSchemas.from_records(records).get(1).schema) == prod
    assert json.loads(TopicSchemas.from_records(records, context=".staging").get(1).schema) == staging


# -- issue 38: a wrong schema source fails fast, saying what it is
def test_a_topic_without_schema_records_is_refused_at_open(tmp_path):
    """A partition directory of another topic (orders-0 given as --schemas) is refused at open, not
    answered "unknown id" for every record."""
    import kbatch

    log = kbatch.Log.create(str(tmp_path / "orders-0"))
    b = kbatch.BatchBuilder()
    for i in range(3):
        b.append(1_700_000_000_000 + i, b"k%d" % i, b'{"id": %d}' % i)
    log.append(b.build())
    log.close()
    with pytest.raises(SchemaSourceError, match=r"orders-0: 0 schema ids in 3 records: is this the _schemas topic"):
        open_schemas(tmp_path / "orders-0")


def test_a_log_directory_that_holds_schemas_0_says_did_you_mean(topic_dir, tmp_path):
    import os

    with pytest.raises(SchemaSourceError, match="did you mean " + os.path.join(str(tmp_path), "_schemas-0")):
        open_schemas(tmp_path)
    (tmp_path / "other").mkdir()
    with pytest.raises(SchemaSourceError, match="no schema files in it"):
        open_schemas(tmp_path / "other")


def _closed_port() -> int:
    import socket

    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()  # nothing listens there now: connections are refused
    return port


def test_a_registry_that_refuses_connections_is_asked_once():
    from kbatch.values.sources import SchemaSourceUnavailable

    url = f"http://127.0.0.1:{_closed_port()}"
    src = RegistrySchemas(url, timeout=5)
    with pytest.raises(SchemaSourceUnavailable, match=f"GET {url}/schemas/ids/1 failed: .*refused"):
        src.get(1)
    for sid in (2, 3, 1):  # every later lookup fails at once, without a request
        with pytest.raises(SchemaSourceUnavailable, match="refused"):
            src.get(sid)
    assert src.requests == 1


def test_cat_stops_at_the_first_refused_registry_request(tmp_path):
    """One error line and exit 1 for a partition of many records, not one failed request per record."""
    import io

    pytest.importorskip("typer")
    import kbatch
    from kbatch.cli.cat import cmd_cat

    log = kbatch.Log.create(str(tmp_path / "users-0"))
    b = kbatch.BatchBuilder()
    for i in range(200):
        b.append(1_700_000_000_000 + i, None, avro_value(1 + i % 7, V1, {"name": f"u{i}"}))
    log.append(b.build())
    log.close()
    out, err = io.BytesIO(), io.StringIO()
    url = f"http://127.0.0.1:{_closed_port()}"
    code = cmd_cat(str(tmp_path / "users-0"), serdes=["value=avro"], registry=url, out=out, err=err, quiet=True)
    assert code == 1
    lines = [line for line in err.getvalue().splitlines() if line]
    assert len(lines) == 1 and url in lines[0] and "refused" in lines[0] and "stopped" in lines[0], lines
    assert out.getvalue() == b""


def test_a_registry_answer_that_is_not_its_json_says_so():
    """A URL that answers HTML (a web UI, a proxy's page) or JSON that is not a schema: the error
    names the URL, what was expected and what came back, and the source stops there."""
    import threading
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    from kbatch.values.sources import SchemaSourceUnavailable

    answers = {"/schemas/ids/1": (200, "text/html", b"<html><body>Welcome to nginx!</body></html>"),
               "/schemas/ids/2": (200, "application/json", b'{"status": "ok"}'),
               "/schemas/ids/3": (404, "text/html", b"<h1>Not Found</h1>")}
    asked = []

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args):
            pass

        def do_GET(self):  # noqa: N802
            asked.append(self.path)
            code, kind, body = answers[self.path]
            self.send_response(code)
            self.send_header("Content-Type", kind)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{server.server_address[1]}"
    try:
        src = RegistrySchemas(url)
        with pytest.raises(SchemaSourceUnavailable, match=r"answered text/html, not the registry's JSON: "
                                                          r"'<html><body>Welcome to nginx"):
            src.get(1)
        with pytest.raises(SchemaSourceUnavailable):
            src.get(2)
        assert asked == ["/schemas/ids/1"]
        with pytest.raises(SchemaSourceUnavailable, match=r'answered \{"status": "ok"\}, not a schema'):
            RegistrySchemas(url).get(2)
        with pytest.raises(SchemaSourceUnavailable, match="a 404 that is not the registry's JSON error"):
            RegistrySchemas(url).get(3)
    finally:
        server.shutdown()
        server.server_close()
