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
from .protobuf import Protobuf
from .sources import (DirectorySchemas, Reference, RegisteredSchema, RegistrySchemas, SchemaSource, TopicSchemas,
                      open_schemas)

if TYPE_CHECKING:
    import pyarrow as pa

    from .._typing import PathLike

#: a value format: what decode_columns' key_schema= / value_schema= take
ValueFormat = Union[Avro, JsonSchema, Protobuf]
FORMATS = {"avro": Avro, "json": JsonSchema, "protobuf": Protobuf}


def value_format(kind: str, schemas: "SchemaSource | str | PathLike", **options: Any) -> ValueFormat:
    """A format by name (`avro`, `json`, `protobuf`; kcat's spellings) over a schema source (or what
    `open_schemas` takes). options go to the format (`reader_schema=`, `subject=`, `validate=`)."""
    cls = FORMATS.get(kind.lower())
    if cls is None:
        raise ValueError(f"{kind!r}: a schema format is one of {', '.join(FORMATS)}")
    return cls(open_schemas(schemas), **options)  # type: ignore[no-any-return]


def topic_format(kind: str, source: "SchemaSource", topic: str | None, field: str = "value") -> ValueFormat:
    """The format `kbatch export` and the tables use for one topic's keys or values: the newest
    version of the subject `<topic>-<field>` (the registry's TopicNameStrategy) as the reader
    schema where the source knows that subject (Avro, JSON Schema), so every chunk of the topic
    decodes to one type; without it, each chunk's newest writer schema."""
    if topic is None or FORMATS.get(kind.lower()) is Protobuf:  # Protobuf: the message its indexes name
        return value_format(kind, source)
    return value_format(kind, source, subject=f"{topic}-{field}")


def decode_column(fmt: ValueFormat, column: "pa.Array | pa.ChunkedArray",
                  offsets: "pa.Array | pa.ChunkedArray | None" = None, what: str = "value") -> "pa.Array":
    """A binary column of framed keys or values (e.g. decode_columns' `value`) -> one typed Arrow
    array; `offsets` (the `offset` column) names the record in errors."""
    return fmt.decode_column(column, offsets, what)


def typed_columns(table: "pa.Table", *, key_schema: ValueFormat | None = None,
                  value_schema: ValueFormat | None = None) -> "pa.Table":
    """decode_columns' table with its `key` / `value` columns decoded by these formats (in place,
    same names)."""
    import pyarrow as pa

    offsets = table.column("offset") if "offset" in table.column_names else None
    for name, fmt in (("key", key_schema), ("value", value_schema)):
        if fmt is None or name not in table.column_names:
            continue
        typed = decode_column(fmt, table.column(name), offsets, name)
        table = table.set_column(table.schema.get_field_index(name), pa.field(name, typed.type), typed)
    return table


__all__ = ["Avro", "JsonSchema", "Protobuf", "ValueFormat", "value_format", "topic_format", "decode_column", "typed_columns",
           "SchemaSource", "TopicSchemas", "RegistrySchemas", "DirectorySchemas", "open_schemas", "RegisteredSchema",
           "Reference", "SchemaError", "WrongMagicError", "UnknownSchemaError", "PayloadError", "PayloadLimitError",
           "SchemaSourceError",
           "frame", "header", "message_indexes", "FORMATS"]
