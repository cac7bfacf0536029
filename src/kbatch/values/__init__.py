"""Schema-aware keys and values: Avro, JSON Schema and Protobuf in Confluent's wire format (magic
byte 0, a 4-byte schema id, the payload), decoded without a running registry.

    from kbatch.values import open_schemas, Avro
    schemas = open_schemas("/var/kafka-logs/_schemas-0")          # or a registry URL, or a folder
    table = kbatch.decode_columns(data, value_schema=Avro(schemas))  # `value` is a typed struct

Layer: this package sits with `log` (it reads the `_schemas` topic's partition directory through
`kbatch.Log`); `columns.decode` only calls a format's `decode_column` and imports nothing from here.
docs/schemas.md is the guide.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any, Union

from .avro import Avro
from .errors import (PayloadError, PayloadLimitError, SchemaError, SchemaSourceError, UnknownSchemaError,
                     WrongMagicError)
from .framing import frame, header, message_indexes
from .json_schema import JsonSchema
from .plain_json import PlainJson, infer_schema
from .protobuf import Protobuf
from .sources import (DirectorySchemas, Reference, RegisteredSchema, RegistrySchemas, SchemaSource,
                      SchemaSourceUnavailable, TopicSchemas, open_schemas)

if TYPE_CHECKING:
    import pyarrow as pa

    from .._typing import PathLike

#: a value format: what decode_columns' key_schema= / value_schema= take
ValueFormat = Union[Avro, JsonSchema, Protobuf, PlainJson]
FORMATS = {"avro": Avro, "json": JsonSchema, "protobuf": Protobuf}


def value_format(kind: str, schemas: "SchemaSource | str | PathLike", *, version: int | None = None,
                 **options: Any) -> ValueFormat:
    """A format by name (`avro`, `json`, `protobuf`; kcat's spellings) over a schema source (or what
    `open_schemas` takes). options go to the format (`reader_schema=`, `subject=`, `validate=`).
    `subject=` with `version=` pins that subject version as the reader schema (without `version`:
    the subject's newest version now); no reader schema: each value with its writer schema
    (kbatch.values.rules)."""
    cls = FORMATS.get(kind.lower())
    if cls is None:
        raise ValueError(f"{kind!r}: a schema format is one of {', '.join(FORMATS)}")
    source = open_schemas(schemas)
    subject = options.get("subject")
    if subject is not None and options.get("reader_schema") is None:
        if cls is Protobuf:
            raise ValueError("a Protobuf value's message type is the one its message indexes name: Protobuf takes "
                             "no reader schema (subject=/version=)")
        found = source.version(subject, version)
        if found is None:
            raise SchemaSourceError(f"{source.name} has no subject {subject!r}"
                                    f"{'' if version is None else f' version {version}'}: the reader schema cannot "
                                    f"be pinned to it")
        options = dict(options, reader_schema=found.schema)
        options.pop("subject")
    elif version is not None:
        raise ValueError("version= pins a version of subject=: give both")
    return cls(source, **options)  # type: ignore[no-any-return]


def reader_rule(fmt: "ValueFormat") -> str:
    """What a format reads values with, as a table records it: "writer" (each value's writer
    schema, the default) or "reader:<sha256 of the reader schema's canonical JSON>"."""
    import hashlib
    import json

    from .rules import pinned

    if isinstance(fmt, PlainJson):
        return fmt.rule()
    if not pinned(fmt):
        return "writer"
    raw = getattr(fmt, "_reader_raw", None)
    if raw is None:
        raw = getattr(fmt, "_reader", None)
    text = json.dumps(raw, sort_keys=True, separators=(",", ":"))
    return "reader:" + hashlib.sha256(text.encode()).hexdigest()[:16]


def topic_format(kind: str, source: "SchemaSource", topic: str | None, field: str = "value",
                 pin: "tuple[str, int | None] | None" = None) -> ValueFormat:
    """The format `kbatch export` and the tables use for one topic's keys or values: each value with
    its writer schema (kbatch.values.rules: the column is the union of the writer schemas' fields),
    unless `pin` (subject, version or None for the newest now) names the reader schema."""
    if pin is None:
        return value_format(kind, source)
    return value_format(kind, source, subject=pin[0], version=pin[1])


def decode_column(fmt: ValueFormat, column: "pa.Array | pa.ChunkedArray",
                  offsets: "pa.Array | pa.ChunkedArray | None" = None, what: str = "value") -> "pa.Array":
    """A binary column of framed keys or values (e.g. decode_columns' `value`) -> one typed Arrow
    array; `offsets` (the `offset` column) names the record in errors."""
    return fmt.decode_column(column, offsets, what)


def typed_columns(table: "pa.Table", *, key_schema: ValueFormat | None = None,
                  value_schema: ValueFormat | None = None) -> "pa.Table":
    """decode_columns' table with its `key` / `value` columns decoded by these formats (in place,
    same names; the rule of kbatch.values.rules)."""
    import pyarrow as pa

    offsets = table.column("offset") if "offset" in table.column_names else None
    for name, fmt in (("key", key_schema), ("value", value_schema)):
        if fmt is None or name not in table.column_names:
            continue
        typed = decode_column(fmt, table.column(name), offsets, name)
        table = table.set_column(table.schema.get_field_index(name), pa.field(name, typed.type), typed)
    return table


__all__ = ["Avro", "JsonSchema", "Protobuf", "PlainJson", "infer_schema", "ValueFormat", "value_format", "topic_format", "reader_rule", "decode_column", "typed_columns",
           "SchemaSource", "TopicSchemas", "RegistrySchemas", "DirectorySchemas", "open_schemas", "RegisteredSchema",
           "Reference", "SchemaError", "WrongMagicError", "UnknownSchemaError", "PayloadError", "PayloadLimitError",
           "SchemaSourceError", "SchemaSourceUnavailable",
           "frame", "header", "message_indexes", "FORMATS"]
