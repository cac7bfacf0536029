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

KINDS = ("avro", "json", "protobuf", "json-plain")
#: kcat's and the registry's spellings; json-plain: unframed JSON (kbatch.values.plain_json), no registry
ALIASES = {"avro": "avro", "json": "json", "jsonschema": "json", "json_sr": "json", "protobuf": "protobuf",
           "proto": "protobuf", "json-plain": "json-plain"}


def _plain(kind: str) -> bool:
    return kind.partition(":")[0] == "json-plain"


def needs_source(kinds: dict[str, str]) -> bool:
    """Does any -s kind read the registry's framing (json-plain needs no --schemas)?"""
    return any(not _plain(k) for k in kinds.values())


def source_for(schemas: str | None, registry: str | None = None) -> "SchemaSource":
    from ..values import SchemaError, open_schemas

    spec = schemas if schemas is not None else registry
    if spec is None:
        raise UsageProblem("-s ...=avro|json|protobuf needs --schemas SOURCE (a _schemas partition directory, a "
                           "registry URL or a folder of schema files) or -r URL (unframed JSON values: -s "
                           "value=json-plain, no --schemas)")
    if schemas is not None and registry is not None:
        raise UsageProblem("give --schemas or -r, not both")
    try:
        return open_schemas(spec)
    except SchemaError as e:
        raise UsageProblem(f"--schemas {spec}: {e.detail}") from None
    except (OSError, ValueError) as e:  # a _schemas directory that cannot be read
        raise UsageProblem(f"--schemas {spec}: {e}") from None


def split_serdes(specs: Sequence[str]) -> tuple[list[str], dict[str, str]]:
    """-s values -> (the ones cat parses itself, {"key"|"value": schema kind}). A kind may pin the
    reader schema: `value=avro:orders-value@3` (or `@latest`, the subject's newest version now);
    the kind is then "avro:orders-value@3"."""
    from ..values.rules import parse_kind

    rest: list[str] = []
    kinds: dict[str, str] = {}
    for spec in specs:
        field, eq, what = spec.partition("=")
        text = what if eq else spec
        base, colon, pin = text.partition(":")
        kind = ALIASES.get(base.lower())
        if kind is None:
            rest.append(spec)
            continue
        if colon and kind == "json-plain":  # json-plain:SCHEMA_FILE: read it now, a usage error if it cannot be
            _plain_format(f"{kind}:{pin}", spec)
            kind = f"{kind}:{pin}"
        elif colon:
            try:
                parse_kind(f"{kind}:{pin}")
            except ValueError as e:
                raise UsageProblem(f"-s {spec!r}: {e}") from None
            kind = f"{kind}:{pin}"
        if not eq:
            kinds["key"] = kinds["value"] = kind
        elif field in ("key", "value"):
            kinds[field] = kind
        else:
            rest.append(spec)
    return rest, kinds


def _plain_format(kind: str, spec: str | None = None) -> "ValueFormat":
    from ..values import PlainJson, SchemaError

    try:
        return PlainJson.from_spec(kind)
    except SchemaError as e:
        raise UsageProblem(f"-s {spec or kind!r}: {e.detail}") from None
    except ValueError as e:
        raise UsageProblem(f"-s {spec or kind!r}: {e}") from None


def format_for(kind: str, source: "SchemaSource | None") -> "ValueFormat":
    """A format from an -s kind ("avro", or "avro:SUBJECT@VERSION": that reader schema pinned;
    "json-plain[:SCHEMA_FILE]": unframed JSON, no source)."""
    from ..values import SchemaError, value_format
    from ..values.rules import parse_kind

    if _plain(kind):
        return _plain_format(kind)
    assert source is not None
    name, pin = parse_kind(kind)
    try:
        if pin is None:
            return value_format(name, source)
        return value_format(name, source, subject=pin[0], version=pin[1])
    except SchemaError as e:
        raise UsageProblem(f"-s ...={kind}: {e.detail}") from None
    except ValueError as e:
        raise UsageProblem(f"-s ...={kind}: {e}") from None


def formats(kinds: dict[str, str], source: "SchemaSource | None") -> dict[str, "ValueFormat"]:
    return {field: format_for(kind, source) for field, kind in kinds.items()}


class SourceStopped(Exception):
    """The schema source cannot answer (kbatch.values.sources.SchemaSourceUnavailable): the command
    stops at the first such failure. Not a ValueError, so cat's per-record error handling lets it
    through."""


#: False: cat prints every typed value from its own decode (`to_json`), never from a column (the
#: differential tests' reference)
CAT_FROM_COLUMNS = True


class _SchemaSerdes:
    """A cat deserializer: framed bytes -> the decoded value as compact JSON (UTF-8).

    cat hands it the values of a run of records first (`prepare`): those its format decodes as a
    column (`decode_column`, the path decode_columns and export take) are printed from the column
    (kbatch.values.render); a value the column does not give (it does not decode, or its type has
    no faithful rendering) is decoded alone, as before, and its error is the per-value one."""

    def __init__(self, fmt: "ValueFormat", what: str) -> None:
        self.fmt = fmt
        self.what = what
        self.spec = fmt.kind.lower()
        self._ready: dict[bytes, bytes] = {}

    def prepare(self, values: "list[bytes | None]", offsets: list[int]) -> None:
        """Decode the values of the records about to be printed as one column (per writer schema)."""
        self._ready = {}
        if not CAT_FROM_COLUMNS:
            return
        try:
            self._ready = rendered(self.fmt, values, offsets, self.what)
        except Exception:  # noqa: BLE001 (the per-value path decodes them, and names any error)
            self._ready = {}

    def json(self, data: bytes) -> Any:
        from ..values.sources import SchemaSourceUnavailable

        try:
            return self.fmt.to_json(data, None, self.what)
        except SchemaSourceUnavailable as e:  # no later value can decode either: stop, do not fail record by record
            raise SourceStopped(str(e)) from None

    def __call__(self, data: bytes) -> bytes:
        hit = self._ready.get(data)
        if hit is not None:
            return hit
        return json.dumps(self.json(data), ensure_ascii=False, separators=(",", ":")).encode("utf-8")


def rendered(fmt: "ValueFormat", values: "list[bytes | None]", offsets: list[int], what: str) -> dict[bytes, bytes]:
    """{value: its compact JSON} for the values `fmt` decodes as columns and renders faithfully
    (Avro: each writer schema's values as one column, or all of them with a pinned reader schema;
    plain JSON with a given schema: all of them; the rest are left to the per-value path:
    kbatch.values.render says why)."""
    from ..values import Avro, PlainJson, Protobuf
    from ..values.render import avro_renders
    from ..values.rules import pinned

    if isinstance(fmt, PlainJson) and fmt.given:  # (inferred: cat prints each value as it is written)
        return _encoded(fmt, values, offsets, [[i for i, v in enumerate(values) if v]], what)
    if isinstance(fmt, Protobuf):
        return _protobuf(fmt, values, offsets, what)
    if not isinstance(fmt, Avro):
        return {}
    by_id: dict[int, list[int]] = {}
    for i, v in enumerate(values):
        if v and len(v) >= 5 and v[0] == 0:
            by_id.setdefault(int.from_bytes(v[1:5], "big", signed=True), []).append(i)
    how: dict[int, str | None] = {}
    for sid in by_id:
        try:
            how[sid] = avro_renders(fmt, sid)
        except Exception:  # noqa: BLE001 (an id that does not resolve: its values' own error)
            how[sid] = None
    if pinned(fmt):  # every value read with the one reader schema: one column
        rows = sorted(r for sid, rows in by_id.items() if how[sid] is not None for r in rows)
        kernel = any(how[sid] == "kernel" for sid in by_id)
        return _encoded(fmt, values, offsets, [rows], what, kernel_only=kernel)
    out = _encoded(fmt, values, offsets, [rows for sid, rows in by_id.items() if how[sid] == "column"], what)
    out.update(_encoded(fmt, values, offsets, [rows for sid, rows in by_id.items() if how[sid] == "kernel"], what,
                        kernel_only=True))
    return out


def _protobuf(fmt: Any, values: "list[bytes | None]", offsets: list[int], what: str) -> dict[bytes, bytes]:
    """Protobuf values by schema id and message type, each run one column, printed in the
    canonical JSON mapping (kbatch.values.render.protobuf_rows) where the type allows it."""
    from ..values import message_indexes
    from ..values.render import protobuf_renders, protobuf_rows

    by_type: dict[tuple[int, tuple[int, ...]], list[int]] = {}
    for i, v in enumerate(values):
        if v and len(v) >= 5 and v[0] == 0:
            try:
                indexes, _ = message_indexes(v, 5)
            except ValueError:
                continue  # (its own error, value by value)
            by_type.setdefault((int.from_bytes(v[1:5], "big", signed=True), tuple(indexes)), []).append(i)
    out: dict[bytes, bytes] = {}
    for (sid, path), rows in by_type.items():
        try:
            d = fmt.schema(sid).descriptor(list(path))
            if not protobuf_renders(d):
                continue
        except Exception:  # noqa: BLE001 (an id or type that does not resolve: its values' own error)
            continue
        for v, text in _encoded(fmt, values, offsets, [rows], what, lambda arr: protobuf_rows(arr, d)).items():
            out[v] = text
    return out


def _encoded(fmt: "ValueFormat", values: "list[bytes | None]", offsets: list[int], groups: list[list[int]],
             what: str, rows_of: "Callable[[Any], list[Any]] | None" = None, kernel_only: bool = False
             ) -> dict[bytes, bytes]:
    """{value: its compact JSON} for the rows of each group decoded as one column (the rows'
    JSON-able forms: `rows_of(column)`, by default render.json_rows); kernel_only: the rows the
    format's compiled column path (decode_arrow) takes, by halves, no other path's column."""
    from ..values.render import Unrenderable, json_rows

    out: dict[bytes, bytes] = {}
    encode = json.JSONEncoder(ensure_ascii=False, separators=(",", ":")).encode  # json.dumps's, made once
    pieces: list[tuple[list[int], Any]] = []
    for rows in groups:
        if kernel_only:
            pieces += _kernel_pieces(fmt, values, offsets, rows, what)
        else:
            col = _column(fmt, values, offsets, rows, what)
            if col is not None:
                pieces.append(col)
    for rows, arr in pieces:
        try:
            objs = (json_rows if rows_of is None else rows_of)(arr)
        except Unrenderable:
            continue
        for r, obj in zip(rows, objs):
            out[values[r]] = encode(obj).encode("utf-8")  # type: ignore[index]
    return out


#: kernel-only rows are halved down to this many; a part that still does not decode goes value by value
KERNEL_PIECE = 16


def _kernel_pieces(fmt: Any, values: "list[bytes | None]", offsets: list[int], rows: list[int], what: str,
                   top: bool = True) -> "list[tuple[list[int], Any]]":
    """[(rows, their column)] from the format's compiled column path alone (decode_arrow, the path
    decode_column takes first): a part it declines (a bad value, no kernel) is halved."""
    import pyarrow as pa

    from ..values import SchemaError

    if not rows:
        return []
    try:
        arr = fmt.decode_arrow(pa.array([values[r] for r in rows], pa.binary()),
                               pa.array([offsets[r] for r in rows], pa.int64()), what)
    except SchemaError:
        arr = None
    if arr is not None:
        return [(rows, arr)]
    if len(rows) <= KERNEL_PIECE:
        return []
    if top and not _kernel_pieces(fmt, values, offsets, rows[:KERNEL_PIECE], what, False):
        return []  # (a few rows declined too: the schema, most likely, not a value: no halving)
    half = len(rows) // 2
    return (_kernel_pieces(fmt, values, offsets, rows[:half], what, False) +
            _kernel_pieces(fmt, values, offsets, rows[half:], what, False))


def _column(fmt: "ValueFormat", values: "list[bytes | None]", offsets: list[int], rows: list[int], what: str
            ) -> "tuple[list[int], Any] | None":
    """(the rows that decode, their column): the rows at once; if one does not decode, the rules'
    on_error finds which, and the others are decoded again without them (the rows that fail are
    printed value by value, with the per-value path's own error; a column resolved without them
    keeps its type the one the good rows give)."""
    import pyarrow as pa

    from ..values import SchemaError

    def decode(take: list[int], on_error: Any = None) -> Any:
        return fmt.decode_column(pa.array([values[r] for r in take], pa.binary()),
                                 pa.array([offsets[r] for r in take], pa.int64()), what, on_error=on_error)
    if not rows:
        return None
    try:
        return rows, decode(rows)
    except SchemaError:
        pass
    bad: set[int] = set()
    decode(rows, lambda k, _e: bad.add(k))
    rows = [r for k, r in enumerate(rows) if k not in bad]
    if not rows:
        return None
    try:
        return rows, decode(rows)
    except SchemaError:  # (a bound the column's values reach together: each is decoded alone)
        return None


def cat_serdes(specs: Sequence[str], schemas: str | None, registry: str | None = None
               ) -> tuple[list[str], Callable[[Any], Any]]:
    """cat's hook: (the -s specs cat parses itself, a function that puts the schema deserializers on
    cat's Formatter and returns it)."""
    rest, kinds = split_serdes(list(specs))
    if not kinds:
        if schemas is not None or registry is not None:
            source_for(schemas, registry)  # a bad --schemas is a usage error even when unused
        return rest, lambda formatter: formatter
    fmts = formats(kinds, source_for(schemas, registry) if needs_source(kinds) or schemas or registry else None)

    def install(formatter: Any) -> Any:
        serdes = {field: _SchemaSerdes(f, field) for field, f in fmts.items()}
        if "key" in serdes:
            formatter.key_serdes = serdes["key"]
        if "value" in serdes:
            formatter.value_serdes = serdes["value"]
        tokens = {p[1] for p in formatter.parts if p[0] == "tok"}
        shown = {field: s for field, s in serdes.items()
                 if formatter.as_json or ("k" if field == "key" else "s") in tokens}  # only what is printed

        def prepare(records: Sequence[Any]) -> None:
            offsets = [r.offset for r in records]
            for field, s in shown.items():
                s.prepare([None if (d := (r.key if field == "key" else r.value)) is None or not len(d) else bytes(d)
                           for r in records], offsets)
        formatter.prepare = prepare
        plain_json = formatter._json

        def as_json(topic: str, partition: int, rec: Any, tstype: str | None) -> bytes:
            obj = json.loads(plain_json(topic, partition, rec, tstype))
            for field, name in (("key", "key"), ("value", "payload")):
                data = rec.key if field == "key" else rec.value
                if field in serdes and obj.get(name) is not None and data is not None and not serdes[field].fmt.framed:
                    obj[name] = json.loads(obj[name])  # plain JSON: no schema id
                elif field in serdes and obj.get(name) is not None and data is not None and len(data) >= 5:
                    obj[name] = json.loads(obj[name])
                    obj[f"{field}_schema_id"] = int.from_bytes(bytes(data[1:5]), "big", signed=True)
            return json.dumps(obj, ensure_ascii=False, separators=(",", ":")).encode("utf-8")
        formatter._json = as_json
        return formatter
    return rest, install


ON_DECODE_ERROR = ("fail", "null", "dead-letter")


def export_typing(specs: Sequence[str], schemas: str | None, registry: str | None = None,
                  on_decode_error: str = "fail") -> "FileTyping":
    """export's hook: a FileTyping, (topic, record batch) -> the batch with its key/value columns
    typed (kbatch.values.rules: each value with its writer schema unless -s pins a reader schema),
    every batch of a topic with the topic's column type so far (widened by field name)."""
    rest, kinds = split_serdes(list(specs))
    if rest:
        raise UsageProblem(f"-s {rest[0]!r}: export decodes keys and values with avro, json, protobuf or "
                           f"json-plain (key=KIND / value=KIND, KIND:SUBJECT@VERSION to pin the reader schema, "
                           f"json-plain:SCHEMA_FILE)")
    if on_decode_error not in ON_DECODE_ERROR:
        raise UsageProblem(f"--on-decode-error must be one of {', '.join(ON_DECODE_ERROR)}, not {on_decode_error!r}")
    if not kinds:
        if schemas is not None or registry is not None:
            raise UsageProblem("--schemas: say which column it decodes, with -s value=avro|json|protobuf|json-plain")
        if on_decode_error != "fail":
            raise UsageProblem("--on-decode-error is for typed columns: give -s value=avro|json|protobuf|json-plain too")
        return FileTyping({}, None, on_decode_error)
    return FileTyping(kinds, source_for(schemas, registry) if needs_source(kinds) or schemas or registry else None,
                      on_decode_error)


class FileTyping:
    """Typed key/value columns of `kbatch export` to Parquet / JSON lines. `letters`: the dead
    letters (raw records that did not decode, with the error) of the batches typed since the last
    take_letters()."""

    def __init__(self, kinds: dict[str, str], source: "SchemaSource | None", on_decode_error: str) -> None:
        self.kinds = kinds
        self.source = source
        self.on_decode_error = on_decode_error
        self.per_topic: dict[str | None, dict[str, ValueFormat]] = {}
        self.types: dict[tuple[str | None, str], Any] = {}
        self.letters: list[dict[str, Any]] = []
        self.nulled = 0

    def __bool__(self) -> bool:
        return bool(self.kinds)

    def take_letters(self) -> list[dict[str, Any]]:
        out, self.letters = self.letters, []
        return out

    def __call__(self, topic: str | None, rb: Any) -> Any:
        from ..values import SchemaError

        try:
            return self._typed(topic, rb)
        except SchemaError as e:  # name the topic and partition, as decode_columns' errors do
            part = rb.column("partition")[0].as_py() if "partition" in rb.schema.names and rb.num_rows else None
            raise e.located(topic=topic, partition=part) from None

    def _typed(self, topic: str | None, rb: Any) -> Any:
        import numpy as np
        import pyarrow as pa

        from ..values import SchemaError
        from ..values.rules import WriterSchemasConflict, merge_types

        if not self.kinds:
            return rb
        fmts = self.per_topic.get(topic)
        if fmts is None:
            fmts = self.per_topic[topic] = formats(self.kinds, self.source)
        failed: dict[int, list[SchemaError]] = {}

        def note(row: int, error: SchemaError) -> None:
            failed.setdefault(row, []).append(error)
        out = typed(rb, fmts, None if self.on_decode_error == "fail" else note)
        for field in fmts:  # one type per topic and column so far, so the topic's files agree
            typ = out.schema.field(field).type
            want = self.types.get((topic, field))
            if want is None or pa.types.is_null(want):
                self.types[(topic, field)] = typ
                continue
            try:
                merged = merge_types(want, typ, field)
            except WriterSchemasConflict as e:
                raise SchemaError(f"topic {topic}: {e.detail}", what=field) from None
            self.types[(topic, field)] = merged
            if typ != merged:
                out = typed_cast(out, field, merged)
        if failed and self.on_decode_error == "null":
            self.nulled += len(failed)
        elif failed:
            rows = sorted(failed)
            self.letters += dead_letters(rb, rows, [failed[r] for r in rows])
            keep = np.ones(rb.num_rows, bool)
            keep[rows] = False
            out = out.filter(pa.array(keep))
        return out


def dead_letters(rb: Any, rows: list[int], errors: list[list[Any]]) -> list[dict[str, Any]]:
    """The raw records at `rows` of a binary record batch as JSON objects (keys, values and header
    values in base64), with the schema id and the error."""
    import base64

    def b64(v: Any) -> str | None:
        return None if v is None else base64.b64encode(v).decode("ascii")
    import pyarrow as pa

    names = rb.schema.names
    ts_ms = rb.column(names.index("timestamp")).cast(pa.int64()) if "timestamp" in names else None
    out = []
    for r, errs in zip(rows, errors):
        rec = {n: rb.column(i)[r].as_py() for i, n in enumerate(names) if n != "timestamp"}
        letter = dict(topic=rec.get("topic"), partition=rec.get("partition"), offset=rec.get("offset"),
                      timestamp=None if ts_ms is None else ts_ms[r].as_py(),
                      timestampType=rec.get("timestampType"), key=b64(rec.get("key")), value=b64(rec.get("value")))
        if "headers" in rec:
            letter["headers"] = None if rec["headers"] is None else [[h["key"], b64(h["value"])] for h in rec["headers"]]
        letter["schema_id"] = next((e.schema_id for e in errs if e.schema_id is not None), None)
        letter["error"] = "; ".join(str(e) for e in errs)
        out.append(letter)
    return out


def typed_cast(rb: Any, field: str, typ: Any) -> Any:
    import pyarrow as pa

    i = rb.schema.get_field_index(field)
    cols = list(rb.columns)
    # (a column of nulls only is made anew: Arrow casts no null column to a union)
    cols[i] = pa.nulls(len(cols[i]), typ) if pa.types.is_null(cols[i].type) else cols[i].cast(typ)
    fields = list(rb.schema)
    fields[i] = pa.field(field, typ)
    return pa.RecordBatch.from_arrays(cols, schema=pa.schema(fields, metadata=rb.schema.metadata))


def typed(rb: Any, fmts: dict[str, "ValueFormat"], on_error: Any = None) -> Any:
    """One of decode_columns' record batches with its key/value columns typed."""
    import pyarrow as pa

    names = rb.schema.names
    cols = list(rb.columns)
    offsets = cols[names.index("offset")] if "offset" in names else None
    fields = list(rb.schema)
    for field, fmt in fmts.items():
        i = names.index(field)
        cols[i] = fmt.decode_column(cols[i], offsets, field, on_error=on_error)
        fields[i] = pa.field(field, cols[i].type)
    return pa.RecordBatch.from_arrays(cols, schema=pa.schema(fields, metadata=rb.schema.metadata))
