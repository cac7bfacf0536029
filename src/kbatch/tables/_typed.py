"""Typed key/value columns in a table (issue 33): Confluent-framed keys or values decoded by a
kbatch.values format (as decode_columns' key_schema=/value_schema= give them), so the table is
queryable by field.

Types: what the values decoders give, with the few Arrow types a table format cannot hold made
into ones it can (timestamps in microseconds, fixed -> binary, unsigned -> the next signed width,
Avro time-millis/-micros -> int/long in Delta as spark-avro reads them; a union of several
non-null types is refused). Evolution: the table's column type is the union, by field name, of
every type written into it (a field added with a default appears, as null in the rows written
before it; a removed field stays, null in the rows written after); Delta takes it as a schema
change (ADD COLUMN) before the data commit, Iceberg as a schema update in the data commit. A
field whose type changes is refused before anything is written.
"""
from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from ..errors import KBatchError

if TYPE_CHECKING:
    import pyarrow as pa

    from ..values import SchemaSource, ValueFormat

FIELDS = ("key", "value")


class TypeChangeError(KBatchError):
    """A typed column's type cannot evolve into the type this run decodes."""


def lake_type(t: pa.DataType, fmt: str, path: str) -> pa.DataType:
    """`t` as a type Delta (`fmt` "delta") or Iceberg ("iceberg") can hold."""
    import pyarrow as pa
    import pyarrow.types as T

    if T.is_struct(t):
        return pa.struct([pa.field(f.name, lake_type(f.type, fmt, f"{path}.{f.name}")) for f in t])
    if T.is_map(t):
        return pa.map_(lake_type(t.key_type, fmt, f"{path}.key"), lake_type(t.item_type, fmt, f"{path}.value"))
    if T.is_list(t) or T.is_large_list(t):
        return pa.list_(lake_type(t.value_type, fmt, f"{path}.element"))
    if T.is_timestamp(t):
        return pa.timestamp("us", tz=t.tz)  # both formats keep microseconds
    if T.is_time(t):
        if fmt == "delta":  # Delta has no time type: milliseconds or microseconds of the day, as spark-avro
            return pa.int32() if t.unit in ("s", "ms") else pa.int64()
        return pa.time64("us")
    if T.is_fixed_size_binary(t) or T.is_large_binary(t):
        return pa.binary()
    if T.is_large_string(t):
        return pa.string()
    if T.is_unsigned_integer(t):
        return {8: pa.int16(), 16: pa.int32(), 32: pa.int64()}.get(t.bit_width, pa.decimal128(20, 0))
    if T.is_int8(t):
        return pa.int32()  # Iceberg's smallest integer; Delta's byte is rarely what a reader expects either
    if T.is_int16(t):
        return pa.int32()
    if T.is_union(t):
        raise TypeChangeError(f"{path}: a union of several non-null types ({t}) has no column type in Delta or "
                              f"Iceberg: export it with a reader schema without that union, or without -s")
    if T.is_decimal(t) and t.precision > 38:
        raise TypeChangeError(f"{path}: decimal({t.precision}, {t.scale}) is wider than the 38 digits Delta and "
                              f"Iceberg hold")
    if T.is_null(t):
        raise TypeChangeError(f"{path}: a field that is always null has no column type in Delta or Iceberg")
    return t


def merge_type(old: pa.DataType, new: pa.DataType, path: str) -> pa.DataType:
    """The type that holds both: structs are merged by field name (old fields first, in order, then
    the new ones), lists and maps by their items; any other difference raises TypeChangeError."""
    import pyarrow as pa
    import pyarrow.types as T

    if old == new:
        return old
    if T.is_struct(old) and T.is_struct(new):
        fields = []
        new_by = {f.name: f for f in new}
        for f in old:
            g = new_by.get(f.name)
            fields.append(f if g is None else pa.field(f.name, merge_type(f.type, g.type, f"{path}.{f.name}")))
        old_names = set(old.names)
        fields += [g for g in new if g.name not in old_names]
        return pa.struct(fields)
    if T.is_list(old) and T.is_list(new):
        return pa.list_(merge_type(old.value_type, new.value_type, f"{path}.element"))
    if T.is_map(old) and T.is_map(new):
        return pa.map_(merge_type(old.key_type, new.key_type, f"{path}.key"),
                       merge_type(old.item_type, new.item_type, f"{path}.value"))
    raise TypeChangeError(f"{path} is {old} in the table and {new} in this run: Delta and Iceberg tables can add "
                          f"and keep fields, not change a field's type (export into a new table, or give the "
                          f"values a reader schema that keeps the type)")


#: the table property that records which schema the typed columns read values with
READER_PROPERTY = "kbatch.valueReader"
#: the columns of a dead-letter table (after the Kafka source's columns)
DEAD_LETTER_EXTRA = (("schema_id", "int32"), ("error", "string"))


class Typing:
    """Which formats type the key and value columns of each topic, and the types the table has
    for them so far (widened as batches of new types come). on_decode_error: "fail" (an
    undecodable key or value stops its partition), "null" (it is null in the row) or "dead-letter"
    (the record leaves the table for `dead_letters`, raw, with the error)."""

    def __init__(self, key_schema: "ValueFormat | str | None", value_schema: "ValueFormat | str | None",
                 schemas: "SchemaSource | str | Any | None", fmt: str, on_decode_error: str = "fail") -> None:
        from ..values import FORMATS as KINDS
        from ..values import open_schemas
        from ..values.rules import ON_DECODE_ERROR, parse_kind

        self.wanted: dict[str, ValueFormat | str] = {f: s for f, s in zip(FIELDS, (key_schema, value_schema))
                                                      if s is not None}
        self.fmt = fmt
        if on_decode_error not in ON_DECODE_ERROR:
            raise ValueError(f"on_decode_error must be one of {', '.join(ON_DECODE_ERROR)}, not {on_decode_error!r}")
        if on_decode_error != "fail" and not self.wanted:
            raise ValueError("on_decode_error is for typed columns: give value_schema= / key_schema= too")
        self.on_decode_error = on_decode_error
        from ..values.plain_json import plain_spec

        kinds = [s for s in self.wanted.values() if isinstance(s, str) and not plain_spec(s)]
        if kinds and schemas is None:
            raise ValueError(f"key_schema/value_schema {kinds[0]!r} names a format: it needs schemas= (a _schemas "
                             f"partition directory, a registry URL, a folder of schema files or a SchemaSource)")
        self.pins: dict[str, tuple[str, int | None] | None] = {}
        for field, want in self.wanted.items():
            if plain_spec(want):  # unframed JSON: a format per topic (each infers its own schema)
                from ..values import PlainJson

                PlainJson.from_spec(str(want))  # a schema file that cannot be read fails now
                continue
            if isinstance(want, str):
                kind, pin = parse_kind(want)
                if kind not in KINDS:
                    raise ValueError(f"{want!r}: a schema format is one of {', '.join(KINDS)}")
                self.wanted[field], self.pins[field] = kind, pin
        if schemas is not None and not self.wanted:
            raise ValueError("schemas= names where the schemas are; say which column they decode with "
                             "value_schema= / key_schema= (\"avro\", \"json\", \"protobuf\" or a kbatch.values format)")
        self.source = None if schemas is None else open_schemas(schemas)
        self._formats: dict[str | None, dict[str, ValueFormat]] = {}
        self.types: dict[str, pa.DataType] = {}
        #: (topic, partition) -> record batches of dead letters not yet written
        self.dead_letters: dict[tuple[str, int], list[pa.RecordBatch]] = {}
        self.nulled = 0

    def __bool__(self) -> bool:
        return bool(self.wanted)

    def props(self) -> dict[str, str]:
        """The table property recording what the typed columns read values with (a pinned reader
        schema, or each value's writer schema): a later run with another rule is refused."""
        from ..values import reader_rule

        if not self.wanted:
            return {}
        rules = {field: reader_rule(fmt) for field, fmt in self.formats(None).items()}
        return {READER_PROPERTY: ",".join(f"{field}={rule}" for field, rule in sorted(rules.items()))}

    def start(self, table_types: dict[str, pa.DataType]) -> None:
        """A run begins over a table whose key/value columns have these types (none: a new table)."""
        import pyarrow as pa

        self.types = {}
        self.dead_letters = {}
        for field in FIELDS:
            have = table_types.get(field)
            typed = field in self.wanted
            if have is None:
                continue
            binary = pa.types.is_binary(have) or pa.types.is_large_binary(have)  # pyiceberg reads large types
            if binary != (not typed):
                raise KBatchError(f"the table's {field} column is {'bytes' if binary else have}; "
                                  f"this run writes {'a typed ' + field if typed else 'bytes'} (-s {field}=... as "
                                  f"when the table was created)")
            if typed:
                self.types[field] = lake_type(have, self.fmt, field)

    def formats(self, topic: str | None) -> dict[str, ValueFormat]:
        from ..values import topic_format
        from ..values.plain_json import plain_spec

        fmts = self._formats.get(topic)
        if fmts is None:
            fmts = self._formats[topic] = {}
            for field, want in self.wanted.items():
                if plain_spec(want):
                    from ..values import PlainJson

                    fmts[field] = PlainJson.from_spec(str(want))
                elif isinstance(want, str):
                    assert self.source is not None
                    fmts[field] = topic_format(want, self.source, topic, field, self.pins.get(field))
                else:
                    fmts[field] = want
        return fmts

    def apply(self, topic: str | None, rb: pa.RecordBatch) -> pa.RecordBatch:
        """One of the read path's record batches with its key/value columns typed, as the table
        holds them (the table's types widened where this batch has more fields)."""
        import numpy as np
        import pyarrow as pa

        names = rb.schema.names
        cols = list(rb.columns)
        fields = list(rb.schema)
        offsets = cols[names.index("offset")]
        failed: dict[int, list[Any]] = {}

        def note(row: int, error: Any) -> None:
            failed.setdefault(row, []).append(error)
        on_error = None if self.on_decode_error == "fail" else note
        for field, fmt in self.formats(topic).items():
            i = names.index(field)
            col = fmt.decode_column(cols[i], offsets, field, on_error=on_error)
            have = self.types.get(field)
            if pa.types.is_null(col.type):  # every key/value of the batch is null: no type of its own
                if have is None:
                    have = self.types[field] = self._type_without_rows(field, topic)
                cols[i] = pa.nulls(len(col), have)
                fields[i] = pa.field(field, have)
                continue
            want = lake_type(col.type, self.fmt, field)
            if have is not None:
                want = merge_type(have, want, field)
            self.types[field] = want
            cols[i] = col if col.type == want else col.cast(want)
            fields[i] = pa.field(field, want)
        out = pa.RecordBatch.from_arrays(cols, schema=pa.schema(fields))
        if not failed:
            return out
        if self.on_decode_error == "null":
            self.nulled += len(failed)
            return out
        rows = np.array(sorted(failed), np.int64)
        self._dead_letter(rb, rows, [failed[int(r)] for r in rows])
        keep = np.ones(rb.num_rows, bool)
        keep[rows] = False
        return out.filter(pa.array(keep))

    def _dead_letter(self, rb: pa.RecordBatch, rows: Any, errors: list[list[Any]]) -> None:
        import pyarrow as pa

        raw = rb.take(pa.array(rows))
        sids = [next((e.schema_id for e in errs if e.schema_id is not None), None) for errs in errors]
        text = ["; ".join(str(e) for e in errs) for errs in errors]
        letters = raw.append_column("schema_id", pa.array(sids, pa.int32())).append_column("error", pa.array(text, pa.string()))
        topic = raw.column(raw.schema.get_field_index("topic"))[0].as_py()
        partition = raw.column(raw.schema.get_field_index("partition"))[0].as_py()
        self.dead_letters.setdefault((topic, partition), []).append(letters)

    def rows(self, topic: str | None, batches: Iterator[pa.RecordBatch], counters: dict[str, int]
             ) -> Iterator[pa.RecordBatch]:
        """apply() over `batches`, counting their record bytes (of the framed bytes) in counters."""
        from ._source import record_bytes

        for rb in batches:
            counters["record_bytes"] = counters.get("record_bytes", 0) + record_bytes(rb)
            yield self.apply(topic, rb)

    def schema(self, base: pa.Schema) -> pa.Schema:
        """`base` (the binary table schema) with the key/value types the table now has."""
        import pyarrow as pa

        for field in self.wanted:
            t = self.types.get(field)
            if t is None:  # no row typed yet (a run whose records were all aborted): the reader schema's type
                t = self.types[field] = self._type_without_rows(field)
            base = base.set(base.get_field_index(field), pa.field(field, t))
        return base

    def _type_without_rows(self, field: str, topic: str | None = None) -> pa.DataType:
        """The column's type where no value gave one: a pinned reader schema's, else the newest
        version of the topic's subject `<topic>-<field>`."""
        for t, fmts in list(self._formats.items()) + ([(topic, self.formats(topic))] if topic is not None else []):
            fmt = fmts.get(field)
            if fmt is None:
                continue
            try:
                return lake_type(fmt.arrow_type(), self.fmt, field)
            except (ValueError, TypeError):  # no reader schema: the type is a writer schema's, by id
                pass
            latest = None if t is None or self.source is None else self.source.latest(f"{t}-{field}")
            if latest is not None:
                try:
                    return lake_type(fmt.arrow_type(latest.id), self.fmt, field)
                except (ValueError, TypeError):
                    pass
        where = f"the {field}s of topic {topic} are all null" if topic is not None else f"no {field} was typed"
        raise KBatchError(f"{where}, and no schema gives the {field} column's type (a `<topic>-{field}` subject in "
                          f"the schema source, or a pinned reader schema)")
