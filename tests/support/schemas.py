"""Test helpers for kbatch.values: a `_schemas` partition directory written with kbatch's own Log
(records shaped as Confluent's Schema Registry and Karapace write them), a registry REST API on
127.0.0.1 (stdlib http.server, the documented JSON), and framed values from the real encoders."""
from __future__ import annotations

import io
import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import kbatch
from kbatch.values.framing import encode_message_indexes, frame



#: the Order schemas the values and tables tests evolve: v2 adds a field with a default, removes
#: one, adds a nullable union and a nested record
ORDER_V1 = {"type": "record", "name": "Order", "namespace": "shop", "fields": [
    {"name": "id", "type": "long"},
    {"name": "item", "type": "string"},
    {"name": "legacy", "type": "string", "default": ""}]}
ORDER_V2 = {"type": "record", "name": "Order", "namespace": "shop", "fields": [
    {"name": "id", "type": "long"},
    {"name": "item", "type": "string"},
    {"name": "qty", "type": "int", "default": 1},
    {"name": "note", "type": ["null", "string"], "default": None},
    {"name": "ship", "type": ["null", {"type": "record", "name": "Address", "fields": [
        {"name": "city", "type": "string"}, {"name": "zip", "type": ["null", "string"], "default": None}]}],
     "default": None}]}

def schema_key(subject: str, version: int, *, magic: int = 1) -> bytes:
    """The registry's key of a schema record (keytype first, as Confluent's serializer orders it)."""
    return json.dumps({"keytype": "SCHEMA", "subject": subject, "version": version, "magic": magic},
                      separators=(",", ":")).encode()


def schema_value(subject: str, version: int, schema_id: int, schema: Any, schema_type: str | None = None,
                 references: list[dict[str, Any]] | None = None, deleted: bool = False, karapace: bool = False) -> bytes:
    """A schema record's value. Confluent leaves schemaType out for Avro and always writes
    `deleted`; the Karapace shape here leaves out what it may (references, deleted) as well."""
    text = schema if isinstance(schema, str) else json.dumps(schema)
    v: dict[str, Any] = {"subject": subject, "version": version, "id": schema_id, "schema": text}
    if schema_type is not None and schema_type != "AVRO":
        v["schemaType"] = schema_type
    if references:
        v["references"] = references
    if deleted or not karapace:
        v["deleted"] = deleted
    return json.dumps(v).encode()


class SchemasTopic:
    """Builds a `_schemas` partition directory, one record per call, with kbatch.Log."""

    def __init__(self, path: str) -> None:
        self.log = kbatch.Log.create(path)
        self.path = path
        self.now = 1_700_000_000_000

    def _append(self, key: bytes | None, value: bytes | None) -> int:
        b = kbatch.BatchBuilder()
        self.now += 1
        b.append(self.now, key, value)
        return self.log.append(b.build(), now_ms=self.now).first_offset

    def register(self, subject: str, version: int, schema_id: int, schema: Any, schema_type: str | None = None,
                 references: list[dict[str, Any]] | None = None, karapace: bool = False) -> int:
        return self._append(schema_key(subject, version), schema_value(subject, version, schema_id, schema, schema_type,
                                                                      references, karapace=karapace))

    def soft_delete(self, subject: str, version: int, schema_id: int, schema: Any, schema_type: str | None = None) -> int:
        return self._append(schema_key(subject, version),
                            schema_value(subject, version, schema_id, schema, schema_type, deleted=True))

    def hard_delete(self, subject: str, version: int) -> int:
        return self._append(schema_key(subject, version), None)

    def delete_subject(self, subject: str, version: int) -> int:
        key = json.dumps({"keytype": "DELETE_SUBJECT", "subject": subject, "magic": 0}).encode()
        return self._append(key, json.dumps({"subject": subject, "version": version}).encode())

    def other(self, keytype: str, value: dict[str, Any] | None) -> int:
        key = json.dumps({"keytype": keytype, "magic": 0}).encode()
        return self._append(key, None if value is None else json.dumps(value).encode())

    def raw(self, key: bytes | None, value: bytes | None) -> int:
        return self._append(key, value)

    def close(self) -> None:
        self.log.close()


def avro_value(schema_id: int, schema: Any, record: Any) -> bytes:
    import fastavro

    b = io.BytesIO()
    fastavro.schemaless_writer(b, fastavro.parse_schema(schema), record)
    return frame(schema_id, b.getvalue())


def protobuf_value(schema_id: int, message: Any, indexes: list[int] | None = None) -> bytes:
    return frame(schema_id, encode_message_indexes(indexes or [0]) + message.SerializeToString())


def json_value(schema_id: int, obj: Any) -> bytes:
    return frame(schema_id, json.dumps(obj).encode())


def segment(values: list[bytes | None], keys: list[bytes | None] | None = None) -> bytes:
    b = kbatch.BatchBuilder()
    for i, v in enumerate(values):
        b.append(1_700_000_000_000 + i, None if keys is None else keys[i], v)
    return b.build()


class Registry:
    """A Schema Registry REST API on 127.0.0.1 serving `schemas` ({id: (type, text, references,
    subject, version)}): GET /schemas/ids/{id} and /subjects/{s}/versions/{v|latest}; counts requests."""

    def __init__(self, schemas: dict[int, tuple[str, str, list[dict[str, Any]], str, int]],
                 auth: str | None = None) -> None:
        self.schemas = schemas
        self.requests: list[str] = []
        registry = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def _send(self, code: int, body: Any) -> None:
                data = json.dumps(body).encode()
                self.send_response(code)
                self.send_header("Content-Type", "application/vnd.schemaregistry.v1+json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self) -> None:  # noqa: N802
                registry.requests.append(self.path)
                if auth is not None and self.headers.get("Authorization") != auth:
                    return self._send(401, {"error_code": 401, "message": "Unauthorized"})
                parts = self.path.strip("/").split("/")
                if len(parts) == 3 and parts[:2] == ["schemas", "ids"] and parts[2].isdigit():
                    s = registry.schemas.get(int(parts[2]))
                    if s is None:
                        return self._send(404, {"error_code": 40403, "message": "Schema not found"})
                    body: dict[str, Any] = {"schema": s[1]}
                    if s[0] != "AVRO":
                        body["schemaType"] = s[0]
                    if s[2]:
                        body["references"] = s[2]
                    return self._send(200, body)
                if len(parts) == 4 and parts[0] == "subjects" and parts[2] == "versions":
                    from urllib.parse import unquote

                    subject = unquote(parts[1])
                    found = [(sid, s) for sid, s in registry.schemas.items() if s[3] == subject and
                             (parts[3] == "latest" or str(s[4]) == parts[3])]
                    if not found:
                        return self._send(404, {"error_code": 40402, "message": "Version not found."})
                    sid, s = max(found, key=lambda x: x[1][4])
                    body = {"subject": subject, "version": s[4], "id": sid, "schema": s[1]}
                    if s[0] != "AVRO":
                        body["schemaType"] = s[0]
                    if s[2]:
                        body["references"] = s[2]
                    return self._send(200, body)
                return self._send(404, {"error_code": 404, "message": "HTTP 404 Not Found"})

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()

    def __enter__(self) -> "Registry":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()
