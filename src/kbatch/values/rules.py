"""Which schema a column of framed values is read with, and what an undecodable value does: the one
rule `decode_columns`, `kbatch export` and the tables share (docs/schemas.md, "Which reader schema").

The rule (issue 38): without a pinned reader schema, every value is decoded with its own writer
schema (the id in its header), as `kbatch cat` prints it; the column's type is the union, by field
name, of the types of the writer schemas in it (in schema-id order: older fields first), and a
field a value's writer schema does not have is null in that row. Nothing is taken from a reader's
defaults and nothing is dropped, so the same bytes give the same fields whatever else is in the
column, the file or the table, and whenever they are exported. A type that differs between writer
schemas (int in one, string in another) has no union: Avro's promotions (int -> long -> double,
float -> double) widen, anything else is refused, naming the field and both types.

A pinned reader schema (a format built with `reader_schema=`, `subject=`, or value_format's
`subject=` + `version=`) resolves every value to that one schema by the format's own rules (Avro's
resolution: defaults for fields the writer lacks, fields the reader lacks dropped).

Undecodable values (`on_error`): a wrong magic byte, an unknown schema id, a payload that does
not decode or a schema id whose schema does not parse (or is of another kind) is an error of the
records that carry it; a schema source that cannot answer is not (it stops the run whatever
`on_error` says), nor are writer schemas whose union has no type.
"""
from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from .errors import PayloadError, SchemaError
from .sources import SchemaSourceUnavailable

if TYPE_CHECKING:
    import pyarrow as pa

#: called with (row, error) for each value that does not decode; the row's value becomes null
OnError = Callable[[int, SchemaError], None]
ON_DECODE_ERROR = ("fail", "null", "dead-letter")


class WriterSchemasConflict(SchemaError):
    """Two writer schemas in one column give a field types no column holds together."""


def pinned(fmt: Any) -> bool:
    """Does the format resolve every value to one reader schema (Avro, JSON Schema)?"""
    return getattr(fmt, "_reader_raw", None) is not None or getattr(fmt, "_reader", None) is not None


def per_record(e: BaseException) -> bool:
    """An error of the records it names (dead-letterable: a wrong magic byte, an unknown id, a
    payload that does not decode, an id whose schema does not parse or is of another kind), not of
    the source (unavailable) or of the column (writer schemas without a union)."""
    return isinstance(e, SchemaError) and not isinstance(e, (SchemaSourceUnavailable, WriterSchemasConflict))


# ------------------------------------------------------------------------------------ the union of types
def merge_types(a: "pa.DataType", b: "pa.DataType", path: str) -> "pa.DataType":
    """The type that holds values of both: structs by field name (a's fields first), lists and maps
    by their items, Avro's numeric promotions; WriterSchemasConflict otherwise."""
    import pyarrow as pa
    import pyarrow.types as T

    if a == b:
        return a
    if T.is_null(a):
        return b
    if T.is_null(b):
        return a
    if T.is_struct(a) and T.is_struct(b):
        by_name = {f.name: f for f in b}
        fields = []
        for f in a:
            g = by_name.get(f.name)
            fields.append(f.with_nullable(True) if g is None else
                          pa.field(f.name, merge_types(f.type, g.type, f"{path}.{f.name}")))
        fields += [g.with_nullable(True) for g in b if g.name not in set(a.names)]
        return pa.struct(fields)
    if T.is_list(a) and T.is_list(b):
        return pa.list_(merge_types(a.value_type, b.value_type, f"{path}.element"))
    if T.is_large_list(a) and T.is_large_list(b):
        return pa.large_list(merge_types(a.value_type, b.value_type, f"{path}.element"))
    if T.is_map(a) and T.is_map(b):
        return pa.map_(merge_types(a.key_type, b.key_type, f"{path}.key"),
                       merge_types(a.item_type, b.item_type, f"{path}.value"))
    rank = {pa.int32(): 0, pa.int64(): 1, pa.float32(): 2, pa.float64(): 3}
    if a in rank and b in rank:  # Avro's promotions: int -> long -> float -> double
        if {a, b} == {pa.int64(), pa.float32()}:
            return pa.float64()
        return a if rank[a] > rank[b] else b
    raise WriterSchemasConflict(f"{path} is {a} in one writer schema and {b} in another: no one column holds both "
                                f"(pin a reader schema: -s value=avro:SUBJECT@VERSION, or a format's reader_schema=)",
                                what=path.split(".")[0])


# ------------------------------------------------------------------------------------ one column
def _framing(column: "pa.Array") -> tuple[Any, Any, Any]:
    """(valid, framed, schema id) per row, as numpy arrays: framed means magic byte 0 and 5 bytes."""
    import numpy as np
    import pyarrow as pa

    n = len(column)
    valid = column.is_valid().to_numpy(zero_copy_only=False) if column.null_count else np.ones(n, bool)
    bufs = column.buffers()
    wide = pa.types.is_large_binary(column.type)
    offs = np.frombuffer(bufs[1], np.int64 if wide else np.int32)[column.offset:column.offset + n + 1]
    data = np.frombuffer(bufs[2], np.uint8) if bufs[2] is not None and bufs[2].size else np.zeros(5, np.uint8)
    starts = offs[:-1].astype(np.int64)
    lens = np.diff(offs)
    framed = valid & (lens >= 5)
    idx = np.where(framed, starts, 0)
    safe = np.minimum(idx, max(len(data) - 5, 0))
    framed &= data[safe] == 0
    sids = ((data[safe + 1].astype(np.int64) << 24) | (data[safe + 2].astype(np.int64) << 16) |
            (data[safe + 3].astype(np.int64) << 8) | data[safe + 4].astype(np.int64))
    sids = np.where(sids >= 2**31, sids - 2**32, sids)
    return valid, framed, np.where(framed, sids, 0)


def _one_schema(column: "pa.Array") -> bool:
    """Is every valid value framed, all with one schema id? (The compiled scan, one pass in C;
    False without it: _framing then tells.)"""
    import numpy as np
    import pyarrow as pa

    from .avro_program import K

    if K is None or not pa.types.is_binary(column.type):
        return False
    n = len(column)
    bufs = column.buffers()
    offs = np.ascontiguousarray(np.frombuffer(bufs[1], np.int32)[column.offset:column.offset + n + 1])
    data = np.frombuffer(bufs[2], np.uint8) if bufs[2] is not None and bufs[2].size else np.zeros(1, np.uint8)
    valid = column.is_valid().to_numpy(zero_copy_only=False).view(np.uint8) if column.null_count else None
    ids = K.schema_ids(data, offs, valid, n)
    return ids is not None and len(ids) == 1


def decode_column(fmt: Any, column: "pa.Array", offsets: "pa.Array | None", what: str,
                  on_error: OnError | None = None) -> "pa.Array":
    """A binary column of framed values -> one typed array, by the rule above. on_error None: the
    first undecodable value (in row order) raises; else on_error(row, error) for each, the row null."""
    import numpy as np
    import pyarrow as pa

    n = len(column)
    if n == 0 or column.null_count == n or pinned(fmt) or not getattr(fmt, "framed", True) or not (
            pa.types.is_binary(column.type) or
                                                                pa.types.is_large_binary(column.type)):
        return _decode(fmt, column, offsets, what, on_error, np.arange(n))
    if _one_schema(column):  # (rows: a range, read only for an error)
        return _decode(fmt, column, offsets, what, on_error, range(n))
    valid, framed, sids = _framing(column)
    groups = [(int(s), np.flatnonzero(framed & (sids == s))) for s in np.unique(sids[framed])]
    bad = np.flatnonzero(valid & ~framed)
    if len(groups) == 1 and not len(bad):
        return _decode(fmt, column, offsets, what, on_error, np.arange(n))
    if len(bad):
        groups.append((-1, bad))  # not in the wire format: the format's own error names them
    parts: list[tuple[Any, pa.Array]] = []
    first_error: SchemaError | None = None
    noted: list[tuple[int, SchemaError]] = []
    collect = None if on_error is None else (lambda row, error: noted.append((row, error)))
    for _sid, rows in groups:
        take = pa.array(rows)
        try:
            arr = _decode(fmt, column.take(take), None if offsets is None else offsets.take(take), what, collect,
                          rows)
        except SchemaError as e:
            if not per_record(e) or on_error is not None:
                raise
            if first_error is None or _before(e, first_error):
                first_error = e  # the earliest row's error is the one raised, as a one-schema column would
            continue
        parts.append((rows, arr))
    if first_error is not None:
        raise first_error
    if on_error is not None:
        for row, error in sorted(noted, key=lambda re: re[0]):  # in row order, as one schema's column gives them
            on_error(row, error)
    typ = pa.null()
    for _rows, arr in parts:
        typ = merge_types(typ, arr.type, what)
    if pa.types.is_null(typ):
        return pa.nulls(n)
    pieces = [_as_type(arr, typ) for _rows, arr in parts]
    where = np.full(n, -1, np.int64)
    at = 0
    for (rows, _arr), piece in zip(parts, pieces):
        where[rows] = np.arange(at, at + len(piece))
        at += len(piece)
    joined = pa.concat_arrays(pieces) if pieces else pa.nulls(0, typ)
    return joined.take(pa.array(where, mask=where < 0))


def _before(a: SchemaError, b: SchemaError) -> bool:
    return a.offset is not None and (b.offset is None or a.offset < b.offset)


def _decode(fmt: Any, column: "pa.Array", offsets: "pa.Array | None", what: str, on_error: OnError | None,
            rows: Any) -> "pa.Array":
    """The format's own decode of (a part of) the column; with on_error, the values that do not
    decode are found by halving (a poison record costs a few decodes of log2(n) parts) and nulled."""
    import pyarrow as pa

    try:
        return _plain(fmt, column, offsets, what)
    except SchemaError as e:
        if on_error is None or not per_record(e):
            raise
        if len(column) == 1 or not isinstance(e, PayloadError) and _one_kind(column):
            for i in range(len(column)):  # every value of the part fails the same way
                if column[i].is_valid:
                    on_error(int(rows[i]), _located(e, offsets, i))
            return pa.nulls(len(column))
    half = len(column) // 2
    lo = _decode(fmt, column.slice(0, half), None if offsets is None else offsets.slice(0, half), what, on_error,
                 rows[:half])
    hi = _decode(fmt, column.slice(half), None if offsets is None else offsets.slice(half), what, on_error,
                 rows[half:])
    typ = merge_types(lo.type, hi.type, what)
    if pa.types.is_null(typ):
        return pa.nulls(len(column))
    return pa.concat_arrays([_as_type(lo, typ), _as_type(hi, typ)])


def _as_type(arr: "pa.Array", typ: "pa.DataType") -> "pa.Array":
    """arr as a column of typ; the nulled rows of a part made as nulls of typ (Arrow casts no null
    column to a union, whose null row is a row of a branch, null there: pa.nulls builds that)."""
    import pyarrow as pa

    if arr.type == typ:
        return arr
    if pa.types.is_null(arr.type):
        return pa.nulls(len(arr), typ)
    return arr.cast(typ)


def _one_kind(column: "pa.Array") -> bool:
    """Are all the values of the part framed alike (every one unframed, or all one schema id)?"""
    import numpy as np

    valid, framed, sids = _framing(column)
    if not framed.any():
        return True
    return bool(framed[valid].all()) and len(np.unique(sids[framed])) == 1


def _located(e: SchemaError, offsets: "pa.Array | None", i: int) -> SchemaError:
    """e as the error of row i (its offset; the part's first error named another row)."""
    off = None if offsets is None else offsets[i].as_py()
    if off == e.offset:
        return e
    return type(e)(e.detail, offset=off, schema_id=e.schema_id, what=e.what)


def _plain(fmt: Any, column: "pa.Array", offsets: "pa.Array | None", what: str) -> "pa.Array":
    got = fmt.decode_arrow(column, offsets, what)
    if got is not None:
        return got
    return fmt.to_arrow(column.to_pylist(), None if offsets is None else offsets.to_pylist(), what)


def parse_kind(spec: str) -> tuple[str, tuple[str, int | None] | None]:
    """"avro" -> ("avro", None); "avro:orders-value@3" -> ("avro", ("orders-value", 3)); the
    version "latest" or none: the subject's newest version when the format is made."""
    kind, colon, pin = spec.partition(":")
    if not colon:
        return kind.lower(), None
    subject, at, version = pin.rpartition("@") if "@" in pin else (pin, "", "")
    if not subject:
        raise ValueError(f"{spec!r}: a pinned reader schema is KIND:SUBJECT@VERSION (e.g. avro:orders-value@3)")
    if not at or version == "latest":
        return kind.lower(), (subject, None)
    if not version.isdigit() or int(version) < 1:
        raise ValueError(f"{spec!r}: the version after @ is a number >= 1 or 'latest', not {version!r}")
    return kind.lower(), (subject, int(version))
