"""JSON lines for `kbatch export` and `kbatch import`: one object per record, with the columns of
decode_columns. Keys, values and header values are base64 (lossless, as Spark writes binary in
JSON) or, with --binary text, UTF-8 text; timestamps are epoch milliseconds (null: none).

    {"topic": "orders", "partition": 0, "offset": 5, "timestamp": 1700000000000, "timestampType": 0,
     "key": "azE=", "value": "djE=", "headers": [{"key": "trace", "value": "YWJj"}], "isTombstone": false}
"""
import base64
import binascii
import json
from collections.abc import Callable, Iterable, Iterator
from typing import IO, Any

import numpy as np
import pyarrow as pa

from ..errors import InvalidRecordError
from ._common import UsageProblem, parse_time

BINARY_FORMS = ("base64", "text")

#: a row's JSON value of a binary field (base64 or text) -> its bytes; the line is for errors
Decoder = Callable[[object, int], "bytes | None"]


def _encoder(binary: str) -> Callable[[bytes | None], str | None]:
    if binary == "base64":
        return lambda b: None if b is None else base64.b64encode(b).decode("ascii")

    def text(b: bytes | None) -> str | None:
        if b is None:
            return None
        try:
            return b.decode("utf-8")
        except UnicodeDecodeError:
            raise InvalidRecordError("A key, value or header value is not UTF-8 text",
                                     expected="UTF-8 (or --binary base64)", found=repr(b[:16])) from None
    return text


def _decoder(binary: str) -> Decoder:
    if binary == "base64":
        def b64(s: object, line: int) -> bytes | None:
            if s is None:
                return None
            try:
                if not isinstance(s, str):  # a JSON number, list, ...
                    raise TypeError(type(s).__name__)
                return base64.b64decode(s, validate=True)
            except (binascii.Error, TypeError, ValueError):
                raise InvalidRecordError("Not base64", expected="base64 (or --binary text)", found=repr(s)[:40],
                                         row=line) from None
        return b64
    return lambda s, line: None if s is None else str(s).encode("utf-8")


def rows_of(rb: pa.RecordBatch, binary: str) -> list[dict[str, Any]]:
    """JSON-ready dicts of a decode_columns record batch."""
    from ..columns.decode import timestamps_ms

    enc = _encoder(binary)
    cols = rb.to_pydict()
    if "timestamp" in cols:
        ms = timestamps_ms(rb.column(rb.schema.get_field_index("timestamp")))
        cols["timestamp"] = [None if t == np.iinfo(np.int64).min else t for t in ms.tolist()]
    for name in ("key", "value"):
        if name in cols:
            typ = rb.schema.field(name).type
            if pa.types.is_binary(typ) or pa.types.is_large_binary(typ) or pa.types.is_string(typ):
                cols[name] = [enc(b) for b in cols[name]]
            else:  # a typed column (export -s value=avro ...): its values as plain JSON
                from ..values.avro import jsonable

                cols[name] = [jsonable(v) for v in cols[name]]
    if "headers" in cols:
        cols["headers"] = [None if h is None else [{"key": x["key"], "value": enc(x["value"])} for x in h]
                           for h in cols["headers"]]
    names = list(cols)
    return [dict(zip(names, vals)) for vals in zip(*(cols[n] for n in names))]


def write_lines(f: IO[str], rb: pa.RecordBatch, binary: str) -> None:
    for row in rows_of(rb, binary):
        f.write(json.dumps(row, separators=(",", ":")) + "\n")


def _timestamp(v: object, line: int) -> int | None:
    if v is None or isinstance(v, int) and not isinstance(v, bool):
        return v
    if isinstance(v, str):
        try:
            return parse_time(v)
        except UsageProblem as e:
            raise InvalidRecordError("Bad timestamp", expected="epoch ms or ISO-8601", found=v, row=line) from e
    raise InvalidRecordError("Bad timestamp", expected="epoch ms or ISO-8601", found=repr(v), row=line)


def batches_of(f: Iterable[str], binary: str, chunk_rows: int = 10_000, first_line: int = 0) -> Iterator[pa.RecordBatch]:
    """pyarrow record batches (kbatch's column names and types) from JSON lines; errors name the
    line (0-based, blank lines counted)."""
    from ..columns.decode import HEADER_TYPE

    dec = _decoder(binary)
    fields = {"topic": pa.string(), "partition": pa.int32(), "key": pa.binary(), "value": pa.binary(),
              "timestamp": pa.int64(), "headers": HEADER_TYPE, "isTombstone": pa.bool_()}
    cols: dict[str, list[Any]] = {k: [] for k in fields}
    n, line = 0, first_line - 1
    seen: set[str] = set()

    def flush() -> pa.RecordBatch:
        arrays = {k: pa.array(v, fields[k]) for k, v in cols.items() if k in seen}
        if "timestamp" in arrays:
            arrays["timestamp"] = arrays["timestamp"].cast(pa.timestamp("ms", tz="UTC"))
        return pa.RecordBatch.from_pydict(arrays)

    for text in f:
        line += 1
        if not text.strip():
            continue
        try:
            obj = json.loads(text)
        except json.JSONDecodeError as e:
            raise InvalidRecordError("Not JSON", expected="one JSON object a line", found=str(e), row=line) from None
        if not isinstance(obj, dict):
            raise InvalidRecordError("Not a JSON object", expected="one JSON object a line", found=type(obj).__name__,
                                     row=line)
        seen.update(k for k in obj if k in fields)
        cols["topic"].append(obj.get("topic"))
        cols["partition"].append(obj.get("partition"))
        cols["key"].append(dec(obj.get("key"), line))
        cols["value"].append(dec(obj.get("value"), line))
        cols["timestamp"].append(_timestamp(obj.get("timestamp"), line))
        h = obj.get("headers")
        cols["headers"].append(None if h is None else [{"key": x.get("key"), "value": dec(x.get("value"), line)}
                                                       for x in h])
        cols["isTombstone"].append(obj.get("isTombstone"))
        n += 1
        if n == chunk_rows:
            yield flush()
            cols, n = {k: [] for k in fields}, 0
    if n:
        yield flush()
