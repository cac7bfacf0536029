"""Protobuf (message indexes, imports, well-known types, descriptor sets) and JSON Schema values
(validation) in Confluent framing, written with the real encoders."""
import datetime
import json

import pytest

pa = pytest.importorskip("pyarrow")
pytest.importorskip("google.protobuf")
pytest.importorskip("grpc_tools")

import kbatch
from kbatch.values import (JsonSchema, PayloadError, Protobuf, SchemaSourceError, TopicSchemas, UnknownSchemaError,
                           frame, open_schemas)
from kbatch.values.protobuf import compile_proto
from support.schemas import json_value, protobuf_value, schema_key, schema_value, segment

COMMON = 'syntax = "proto3";\npackage common;\nmessage Money { int64 cents = 1; string currency = 2; }\n'
ORDERS = '''syntax = "proto3";
package shop;
import "common/money.proto";
import "google/protobuf/timestamp.proto";
import "google/protobuf/wrappers.proto";
message Order {
  int64 id = 1;
  string item = 2;
  common.Money total = 3;
  repeated string tags = 4;
  map<string, int32> counts = 5;
  enum Status { NEW = 0; PAID = 1; }
  Status status = 6;
  google.protobuf.Timestamp at = 7;
  google.protobuf.StringValue coupon = 8;
  optional int32 qty = 9;
  message Line { string sku = 1; uint32 n = 2; }
  repeated Line lines = 10;
  bytes blob = 11;
  double score = 12;
}
message Refund { int64 order_id = 1; }
'''


def classes(schema_id_files):
    """Message classes compiled from the same .proto texts, for the encoder side."""
    from google.protobuf import descriptor_pb2, descriptor_pool, message_factory
    fds = descriptor_pb2.FileDescriptorSet.FromString(compile_proto(schema_id_files, "orders.proto"))
    pool = descriptor_pool.DescriptorPool()
    for f in fds.file:
        pool.Add(f)
    get = message_factory.GetMessageClass
    return (get(pool.FindMessageTypeByName("shop.Order")), get(pool.FindMessageTypeByName("shop.Refund")),
            get(pool.FindMessageTypeByName("shop.Order.Line")), fds.SerializeToString())


@pytest.fixture(scope="module")
def proto():
    Order, Refund, Line, fds = classes({"orders.proto": ORDERS, "common/money.proto": COMMON})
    src = TopicSchemas.from_records([
        (0, schema_key("money", 1), schema_value("money", 1, 1, COMMON, "PROTOBUF")),
        (1, schema_key("orders-value", 1), schema_value("orders-value", 1, 2, ORDERS, "PROTOBUF", references=[
            {"name": "common/money.proto", "subject": "money", "version": 1}]))])
    return Order, Refund, Line, fds, src


def test_protobuf_values_to_arrow_and_json(proto):
    Order, Refund, Line, _, src = proto
    o = Order(id=7, item="pen", tags=["a", "b"], status=1, qty=0, score=0.5, blob=b"\x01")
    o.total.cents = 1999
    o.total.currency = "EUR"
    o.counts["x"] = 3
    o.at.FromDatetime(datetime.datetime(2024, 1, 2, 3, 4, 5, 6000))
    o.coupon.value = "SPRING"
    o.lines.add(sku="s1", n=2)
    empty = Order()
    values = [protobuf_value(2, o), None, protobuf_value(2, empty)]
    table = kbatch.decode_columns(segment(values), value_schema=Protobuf(src))
    col = table.column("value")
    t = col.type
    assert t.field("id").type == pa.int64() and t.field("total").type == pa.struct([("cents", pa.int64()),
                                                                                     ("currency", pa.string())])
    assert t.field("counts").type == pa.map_(pa.string(), pa.int32()) and t.field("status").type == pa.string()
    assert t.field("at").type == pa.timestamp("us", "UTC") and t.field("coupon").type == pa.string()
    assert t.field("lines").type == pa.list_(pa.struct([("sku", pa.string()), ("n", pa.uint32())]))
    got = col.to_pylist()
    assert got[0]["id"] == 7 and got[0]["total"] == {"cents": 1999, "currency": "EUR"}
    assert got[0]["tags"] == ["a", "b"] and got[0]["counts"] == [("x", 3)] and got[0]["status"] == "PAID"
    assert got[0]["at"] == datetime.datetime(2024, 1, 2, 3, 4, 5, 6000, tzinfo=datetime.timezone.utc)
    assert got[0]["coupon"] == "SPRING" and got[0]["qty"] == 0 and got[0]["lines"] == [{"sku": "s1", "n": 2}]
    assert got[1] is None
    # proto3: unset scalars read as their defaults, unset messages and optional fields as null
    assert got[2]["id"] == 0 and got[2]["item"] == "" and got[2]["total"] is None and got[2]["qty"] is None
    js = Protobuf(src).to_json(values[0])
    assert js["item"] == "pen" and js["status"] == "PAID" and js["total"]["currency"] == "EUR"


def test_protobuf_message_indexes_pick_the_type(proto):
    Order, Refund, Line, _, src = proto
    fmt = Protobuf(src)
    assert fmt.decode(protobuf_value(2, Refund(order_id=5), [1])) == {"order_id": 5}
    # nested indexes count the descriptor's nested types, the map field's synthetic CountsEntry (0) too
    assert fmt.decode(protobuf_value(2, Line(sku="q", n=1), [0, 1])) == {"sku": "q", "n": 1}
    with pytest.raises(PayloadError, match=r"offset 3 \(schema id 2\): message index 5"):
        fmt.decode(protobuf_value(2, Refund(), [5]), offset=3)
    with pytest.raises(PayloadError, match="does not parse"):
        fmt.decode(frame(2, b"\x00\xff\xff"), offset=1)
    with pytest.raises(UnknownSchemaError):
        fmt.decode(frame(99, b"\x00"))


def test_protobuf_descriptor_set_file(proto, tmp_path):
    Order, _, _, fds, _ = proto
    (tmp_path / "2.desc").write_bytes(fds)
    fmt = Protobuf(open_schemas(tmp_path))
    assert fmt.decode(protobuf_value(2, Order(id=1, item="x")))["item"] == "x"


def test_bad_proto_text_is_a_clear_error(tmp_path):
    (tmp_path / "1.proto").write_text('syntax = "proto3";\nmessage A { strin x = 1; }\n')
    with pytest.raises(SchemaSourceError, match="does not compile.*strin"):
        Protobuf(open_schemas(tmp_path)).decode(frame(1, b"\x00"))


JSON_V = {"$schema": "http://json-schema.org/draft-07/schema#", "type": "object",
          "properties": {"id": {"type": "integer"}, "name": {"type": "string"},
                         "tags": {"type": "array", "items": {"type": "string"}},
                         "geo": {"$ref": "#/definitions/geo"}, "any": {}},
          "required": ["id"], "definitions": {"geo": {"type": "object", "properties": {
              "lat": {"type": "number"}, "lon": {"type": "number"}}}}}


def test_json_schema_values():
    src = TopicSchemas.from_records([(0, schema_key("j-value", 1), schema_value("j-value", 1, 4, JSON_V, "JSON"))])
    values = [json_value(4, {"id": 1, "name": "a", "tags": ["x"], "geo": {"lat": 1.5, "lon": 2}, "any": {"k": [1]}}),
              json_value(4, {"id": 2}), None]
    t = kbatch.decode_columns(segment(values), value_schema=JsonSchema(src))
    col = t.column("value")
    assert col.type.field("geo").type == pa.struct([("lat", pa.float64()), ("lon", pa.float64())])
    assert col.type.field("any").type == pa.string()
    assert col.to_pylist() == [{"id": 1, "name": "a", "tags": ["x"], "geo": {"lat": 1.5, "lon": 2.0}, "any": '{"k":[1]}'},
                               {"id": 2, "name": None, "tags": None, "geo": None, "any": None}, None]
    strict = JsonSchema(src, validate=True)
    assert strict.decode(values[0])["id"] == 1
    with pytest.raises(PayloadError, match=r"offset 9 \(schema id 4\): the value fails its JSON schema at id"):
        strict.decode(json_value(4, {"id": "one"}), offset=9)
    with pytest.raises(PayloadError, match="fails its JSON schema at \\(the root\\): 'id' is a required"):
        strict.decode(json_value(4, {}))
    with pytest.raises(PayloadError, match="not JSON"):
        JsonSchema(src).decode(frame(4, b"{nope"))
    assert JsonSchema(src).decode(json_value(4, {"id": "one"})) == {"id": "one"}   # no validation by default


def test_json_schema_reference_for_validation():
    money = {"type": "object", "properties": {"cents": {"type": "integer"}}, "required": ["cents"]}
    order = {"type": "object", "properties": {"total": {"$ref": "money.json"}}}
    src = TopicSchemas.from_records([
        (0, schema_key("money", 1), schema_value("money", 1, 1, money, "JSON")),
        (1, schema_key("o-value", 1), schema_value("o-value", 1, 2, order, "JSON",
                                                   references=[{"name": "money.json", "subject": "money", "version": 1}]))])
    fmt = JsonSchema(src, validate=True)
    assert fmt.decode(json_value(2, {"total": {"cents": 5}})) == {"total": {"cents": 5}}
    with pytest.raises(PayloadError, match="total"):
        fmt.decode(json_value(2, {"total": {}}))


def test_a_schema_of_another_type_is_refused():
    src = TopicSchemas.from_records([(0, schema_key("j", 1), schema_value("j", 1, 4, JSON_V, "JSON"))])
    from kbatch.values import Avro
    with pytest.raises(SchemaSourceError, match="schema 4 is JSON, not AVRO"):
        Avro(src).decode(json_value(4, {}))
    assert json.loads(src.get(4).schema) == JSON_V
