"""`-s key=avro|json|protobuf` / `-s value=...` with `--schemas SOURCE` (or kcat's `-r URL`) for
`kbatch cat`, and the typed columns of `kbatch export`: the CLI's side of kbatch.values.

cat keeps its own deserializers (text, hex, base64, pack formats); this module takes the schema
ones out of the -s list before cat parses the rest, and puts them on cat's Formatter: `%s` / `%k`
print the decoded value as compact JSON, and `-J` puts it in the envelope as JSON (not as a
string), with `key_schema_id` / `value_schema_id`.
"""
from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from ._common import UsageProblem

if TYPE_CHECKING:
    from ..values import SchemaSource, ValueFormat

KINDS = ("avro", "json", "protobuf")
#: kcat's and the registry's spellings
ALIASES = {"avro": "avro", "json": "json", "jsonschema": "json", "json_sr": "json", "protobuf": "protobuf",
           "proto": "protobuf"}


def source_for(schemas: str | None, registry: str | None = None) -> "SchemaSource":
    from ..values import SchemaError, open_schemas

    spec = schemas if schemas is not None else registry
    if spec is None:
        raise UsageProblem("-s ...=avro|json|protobuf needs --schemas SOURCE (a _schemas partition directory, a "
                           "registry URL or a folder of schema files) or -r URL")
    if schemas is not None and registry is not None:
        raise UsageProblem("give --schemas or -r, not both")
    try:
        return open_schemas(spec)
    except SchemaError as e:
        raise UsageProblem(f"--schemas {spec}: {e.detail}") from None
    except (OSError, ValueError) as e:  # a _schemas directory that cannot be read
        raise UsageProblem(f"--schemas {spec}: {e}") from None


def split_serdes(specs: Sequence[str]) -> tuple[list[str], dict[str, str]]:
    """-s values -> (the ones cat parses itself, {"key"|"value": schema kind})."""
    rest: list[str] = []
    kinds: dict[str, str] = {}
    for spec in specs:
        field, eq, what = spec.partition("=")
        kind = ALIASES.get((what if eq else spec).lower())
        if kind is None:
            rest.append(spec)
        elif not eq:
            kinds["key"] = kinds["value"] = kind
        elif field in ("key", "value"):
            kinds[field] = kind
        else:
            rest.append(spec)
    return rest, kinds


def formats(kinds: dict[str, str], source: "SchemaSource") -> dict[str, "ValueFormat"]:
    from ..values import value_format

    return {field: value_format(kind, source) for field, kind in kinds.items()}


class _SchemaSerdes:
    """A cat deserializer: framed bytes -> the decoded value as compact JSON (UTF-8)."""

    def __init__(self, fmt: "ValueFormat", what: str) -> None:
        self.fmt = fmt
        self.what = what
        self.spec = fmt.kind.lower()

    def json(self, data: bytes) -> Any:
        return self.fmt.to_json(data, None, self.what)

    def __call__(self, data: bytes) -> bytes:
        return json.dumps(self.json(data), ensure_ascii=False, separators=(",", ":")).encode("utf-8")


def cat_serdes(specs: Sequence[str], schemas: str | None, registry: str | None = None
               ) -> tuple[list[str], Callable[[Any], Any]]:
    """cat's hook: (the -s specs cat parses itself, a function that puts the schema deserializers on
    cat's Formatter and returns it)."""
    rest, kinds = split_serdes(list(specs))
    if not kinds:
        if schemas is not None or registry is not None:
            source_for(schemas, registry)  # a bad --schemas is a usage error even when unused
        return rest, lambda formatter: formatter
    fmts = formats(kinds, source_for(schemas, registry))

    def install(formatter: Any) -> Any:
        serdes = {field: _SchemaSerdes(f, field) for field, f in fmts.items()}
        if "key" in serdes:
            formatter.key_serdes = serdes["key"]
        if "value" in serdes:
            formatter.value_serdes = serdes["value"]
        plain_json = formatter._json

        def as_json(topic: str, partition: int, rec: Any, tstype: str | None) -> bytes:
            obj = json.loads(plain_json(topic, partition, rec, tstype))
            for field, name in (("key", "key"), ("value", "payload")):
                data = rec.key if field == "key" else rec.value
                if field in serdes and obj.get(name) is not None and data is not None and len(data) >= 5:
                    obj[name] = json.loads(obj[name])
                    obj[f"{field}_schema_id"] = int.from_bytes(bytes(data[1:5]), "big", signed=True)
            return json.dumps(obj, ensure_ascii=False, separators=(",", ":")).encode("utf-8")
        formatter._json = as_json
        return formatter
    return rest, install


def export_typing(specs: Sequence[str], schemas: str | None, registry: str | None = None
                  ) -> Callable[[str | None, Any], Any]:
    """export's hook: a function (topic, record batch) -> the batch with its key/value columns typed.
    The formats of a topic take its subjects' newest schemas (`<topic>-key`, `<topic>-value`, the
    registry's TopicNameStrategy) as reader schemas where the source knows them, so every file of
    the topic has the same column types."""
    rest, kinds = split_serdes(list(specs))
    if rest:
        raise UsageProblem(f"-s {rest[0]!r}: export decodes keys and values with avro, json or protobuf "
                           f"(key=KIND / value=KIND)")
    if not kinds:
        if schemas is not None or registry is not None:
            raise UsageProblem("--schemas: say which column it decodes, with -s value=avro|json|protobuf")
        return lambda topic, rb: rb
    from ..values import SchemaError, topic_format

    source = source_for(schemas, registry)
    per_topic: dict[str | None, dict[str, ValueFormat]] = {}
    first: dict[tuple[str | None, str], Any] = {}

    def typing_for(topic: str | None, rb: Any) -> Any:
        try:
            return typing_one(topic, rb)
        except SchemaError as e:  # name the topic and partition, as decode_columns' errors do
            part = rb.column("partition")[0].as_py() if "partition" in rb.schema.names and rb.num_rows else None
            raise e.located(topic=topic, partition=part) from None

    def typing_one(topic: str | None, rb: Any) -> Any:
        fmts = per_topic.get(topic)
        if fmts is None:
            fmts = per_topic[topic] = {}
            for field, kind in kinds.items():
                fmts[field] = topic_format(kind, source, topic, field)
        out = typed(rb, fmts)
        for field in fmts:  # one type per topic and column, so the topic's files agree
            typ = out.schema.field(field).type
            want = first.setdefault((topic, field), typ)
            if typ != want:
                try:
                    out = typed_cast(out, field, want)
                except Exception:
                    raise SchemaError(f"topic {topic}: the {field}s decode to {typ}, earlier ones to {want} (schemas "
                                      f"without a common reader schema: a source that knows the subject "
                                      f"{topic}-{field} gives its newest version)", what=field) from None
        return out
    return typing_for


def typed_cast(rb: Any, field: str, typ: Any) -> Any:
    import pyarrow as pa

    i = rb.schema.get_field_index(field)
    cols = list(rb.columns)
    cols[i] = cols[i].cast(typ)
    fields = list(rb.schema)
    fields[i] = pa.field(field, typ)
    return pa.RecordBatch.from_arrays(cols, schema=pa.schema(fields, metadata=rb.schema.metadata))


def typed(rb: Any, fmts: dict[str, "ValueFormat"]) -> Any:
    """One of decode_columns' record batches with its key/value columns typed."""
    import pyarrow as pa

    names = rb.schema.names
    cols = list(rb.columns)
    offsets = cols[names.index("offset")] if "offset" in names else None
    fields = list(rb.schema)
    for field, fmt in fmts.items():
        i = names.index(field)
        cols[i] = fmt.decode_column(cols[i], offsets, field)
        fields[i] = pa.field(field, cols[i].type)
    return pa.RecordBatch.from_arrays(cols, schema=pa.schema(fields, metadata=rb.schema.metadata))
