"""Protobuf values in Confluent framing: after the schema id, the message indexes (which message
type of the schema, see framing.message_indexes), then the serialized message.

Descriptors: a registry keeps Protobuf schemas as .proto text. Google's `protobuf` package parses
binary descriptors but not .proto text, and no pure-Python parser on PyPI builds descriptors (the
pure-Python ones, such as proto-schema-parser, give a syntax tree); so the text is compiled by
protoc itself as the `grpcio-tools` package ships it (`grpc_tools.protoc`, in-process: no protoc on
PATH needed), into a FileDescriptorSet, with the schema's references as its imports and the
well-known types (google/protobuf/*.proto) from grpcio-tools. Without grpcio-tools, a schema folder
can hold the FileDescriptorSet itself (`<id>.desc`, from `protoc --include_imports
--descriptor_set_out=...`; `buf build -o` writes the same).

Arrow types: message -> struct (fields in declaration order), repeated -> list, map -> map,
int32/sint32/sfixed32 -> int32, uint32/fixed32 -> uint32, the 64-bit ones likewise, float ->
float32, double -> float64, bool, string, bytes -> binary, enum -> string (the value's name);
google.protobuf.Timestamp -> timestamp[us, UTC]; the wrapper types (Int64Value, StringValue, ...)
-> their value, nullable. A message field that is not set is null; a scalar field without
presence reads as its default (proto3's rule). A message type that contains itself is cut at
depth 16 (deeper levels become the message's JSON text).

Columns: `decode_arrow` (what decode_column, and so decode_columns, read_topic, export and the
tables call) runs the message type's compiled plan (protobuf_program, the kernel
_protobuf_kernel, or its pure twin without it); what the plan does not take, a type or a value,
comes here a message at a time (upb's parser, then Python), which gives the same answers (a map's
entries excepted: the plan keeps the writer's order, upb's maps iterate in hash order).
"""
from __future__ import annotations

import datetime
import importlib
import os
import tempfile
import threading
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from ..errors import MissingDependencyError
from .base import Format
from .errors import PayloadError, SchemaError, SchemaSourceError
from .framing import header, message_indexes
from .protobuf_program import MAX_DEPTH, WRAPPERS
from .sources import PROTOBUF, RegisteredSchema, SchemaSource

if TYPE_CHECKING:
    import pyarrow as pa

_MAX_DEPTH = MAX_DEPTH
_WRAPPERS = WRAPPERS
_COMPILE_LOCK = threading.Lock()
_EPOCH = datetime.datetime(1970, 1, 1, tzinfo=datetime.timezone.utc)


def _module(name: str, feature: str = "decoding Protobuf values", package: str = "protobuf") -> Any:
    try:
        return importlib.import_module(name)
    except ImportError:
        raise MissingDependencyError(feature, package, "schemas") from None


def _protobuf() -> Any:
    return (_module("google.protobuf.descriptor_pb2"), _module("google.protobuf.descriptor_pool"),
            _module("google.protobuf.message_factory"))


def compile_proto(files: dict[str, str], main: str) -> bytes:
    """.proto texts (import path -> text) -> a serialized FileDescriptorSet of `main` and everything
    it imports, compiled by grpcio-tools' protoc."""
    feature = "compiling .proto schema text (or give a FileDescriptorSet: <id>.desc)"
    grpc_tools = _module("grpc_tools", feature, "grpcio-tools")
    protoc = _module("grpc_tools.protoc", feature, "grpcio-tools")
    well_known = os.path.join(os.path.dirname(grpc_tools.__file__), "_proto")
    with tempfile.TemporaryDirectory(prefix="kbatch-proto-") as d:
        for name, text in files.items():
            path = os.path.join(d, name)
            if not os.path.abspath(path).startswith(os.path.abspath(d) + os.sep):
                raise SchemaSourceError(f"a Protobuf import path that leaves its folder: {name!r}")
            os.makedirs(os.path.dirname(path), exist_ok=True)
            with open(path, "w", encoding="utf-8") as f:
                f.write(text)
        out = os.path.join(d, "out.desc")
        import contextlib
        import io

        err = io.StringIO()
        with _COMPILE_LOCK, contextlib.redirect_stderr(err):
            # protoc writes its messages to the process's stderr (fd 2): capture them through a file
            saved = os.dup(2)
            log = os.path.join(d, "protoc.err")
            with open(log, "w") as lf:
                os.dup2(lf.fileno(), 2)
                try:
                    code = protoc.main(["protoc", f"-I{d}", f"-I{well_known}", "--include_imports",
                                        f"--descriptor_set_out={out}", os.path.join(d, main)])
                finally:
                    os.dup2(saved, 2)
                    os.close(saved)
        if code != 0:
            with open(log, encoding="utf-8", errors="replace") as lf:
                msg = lf.read().replace(d + os.sep, "").strip()
            raise SchemaSourceError(f"the .proto schema does not compile: {msg or 'protoc exit ' + str(code)}")
        with open(out, "rb") as f:
            return f.read()


class _Schema:
    """One registered Protobuf schema: its file's descriptor and message classes."""

    def __init__(self, schema: RegisteredSchema, source: SchemaSource) -> None:
        descriptor_pb2, descriptor_pool, message_factory = _protobuf()
        self.id = schema.id
        if schema.descriptor_set is not None:
            raw = schema.descriptor_set
            main = None
        else:
            main = f"kbatch_schema_{schema.id if schema.id >= 0 else 'x'}.proto"
            files = {main: schema.schema}
            for ref, target in source.resolve(schema):
                if target.descriptor_set is not None:
                    raise SchemaSourceError(f"reference {ref.name!r} is a descriptor set; a .proto text imports "
                                            f".proto text", schema_id=schema.id)
                files[ref.name] = target.schema
            raw = compile_proto(files, main)
        fds = descriptor_pb2.FileDescriptorSet()
        try:
            fds.ParseFromString(raw)
        except Exception as e:
            raise SchemaSourceError(f"not a FileDescriptorSet: {e}", schema_id=schema.id) from None
        if not fds.file:
            raise SchemaSourceError("an empty FileDescriptorSet", schema_id=schema.id)
        pool = descriptor_pool.DescriptorPool()
        try:
            for fp in fds.file:
                pool.Add(fp)
            name = main if main is not None else fds.file[-1].name  # protoc lists dependencies first
            self.file = pool.FindFileByName(name)
        except Exception as e:
            raise SchemaSourceError(f"the descriptors do not load: {e}", schema_id=schema.id) from None
        self._factory = message_factory
        self._classes: dict[tuple[int, ...], Any] = {}
        self._plans: dict[tuple[int, ...], Any] = {}  # message indexes -> the decode plan (None: not planned)

    def descriptor(self, indexes: Sequence[int]) -> Any:
        types = self.file.message_types_by_name
        top = list(self.file.message_types_by_name.values()) if types else []
        if not top:
            raise ValueError("the schema defines no message type")
        if indexes[0] >= len(top):
            raise ValueError(f"message index {indexes[0]}, but the schema has {len(top)} top-level message types")
        d = top[indexes[0]]
        for i in indexes[1:]:
            if i >= len(d.nested_types):
                raise ValueError(f"nested message index {i}, but {d.full_name} has {len(d.nested_types)}")
            d = d.nested_types[i]
        return d

    def message_class(self, indexes: Sequence[int]) -> Any:
        k = tuple(indexes)
        cls = self._classes.get(k)
        if cls is None:
            cls = self._classes[k] = self._factory.GetMessageClass(self.descriptor(indexes))
        return cls

    def plan(self, indexes: Sequence[int]) -> Any:
        """The compiled decode plan of a message type (protobuf_program), built once; None when
        the plan does not take the type (the per-message path decodes it)."""
        from . import protobuf_program as P

        k = tuple(indexes)
        if k not in self._plans:
            try:
                d = self.descriptor(indexes)
                self._plans[k] = P.plan(d, k, arrow_type(d))
            except P.Unsupported:
                self._plans[k] = None
        return self._plans[k]


# ------------------------------------------------------------------------------------ Arrow
def arrow_type(d: Any, depth: int = 0) -> "pa.DataType":
    """The Arrow type of a message descriptor."""
    import pyarrow as pa

    if d.full_name == "google.protobuf.Timestamp":
        return pa.timestamp("us", tz="UTC")
    if d.full_name in _WRAPPERS:
        return _field_type(d.fields_by_name["value"], depth + 1)
    if depth >= _MAX_DEPTH:
        return pa.string()
    return pa.struct([pa.field(f.name, _field_type(f, depth + 1)) for f in d.fields])


def _scalar_type(f: Any, depth: int) -> "pa.DataType":
    import pyarrow as pa
    F = _module("google.protobuf.descriptor").FieldDescriptor

    t = f.type
    if t == F.TYPE_MESSAGE or t == F.TYPE_GROUP:
        return arrow_type(f.message_type, depth)
    table = {F.TYPE_INT32: pa.int32(), F.TYPE_SINT32: pa.int32(), F.TYPE_SFIXED32: pa.int32(),
             F.TYPE_UINT32: pa.uint32(), F.TYPE_FIXED32: pa.uint32(), F.TYPE_INT64: pa.int64(),
             F.TYPE_SINT64: pa.int64(), F.TYPE_SFIXED64: pa.int64(), F.TYPE_UINT64: pa.uint64(),
             F.TYPE_FIXED64: pa.uint64(), F.TYPE_FLOAT: pa.float32(), F.TYPE_DOUBLE: pa.float64(),
             F.TYPE_BOOL: pa.bool_(), F.TYPE_STRING: pa.string(), F.TYPE_BYTES: pa.binary(), F.TYPE_ENUM: pa.string()}
    return table[t]


def _is_map(f: Any) -> bool:
    mt = f.message_type
    return mt is not None and mt.GetOptions().map_entry


def _repeated(f: Any) -> bool:
    flag = getattr(f, "is_repeated", None)
    if flag is not None:
        return bool(flag)
    return bool(f.label == f.LABEL_REPEATED)


def _field_type(f: Any, depth: int) -> "pa.DataType":
    import pyarrow as pa

    if _is_map(f):
        mt = f.message_type
        return pa.map_(_scalar_type(mt.fields_by_name["key"], depth), _scalar_type(mt.fields_by_name["value"], depth))
    if _repeated(f):
        return pa.list_(_scalar_type(f, depth))
    return _scalar_type(f, depth)


def to_python(msg: Any, depth: int = 0) -> Any:
    """A message -> dicts, lists and scalars shaped as arrow_type(msg.DESCRIPTOR)."""
    d = msg.DESCRIPTOR
    if d.full_name == "google.protobuf.Timestamp":
        try:
            return _EPOCH + datetime.timedelta(seconds=msg.seconds, microseconds=msg.nanos // 1000)
        except OverflowError:
            raise ValueError(f"google.protobuf.Timestamp {msg.seconds} s, {msg.nanos} ns is outside the years "
                             f"1-9999") from None
    if d.full_name in _WRAPPERS:
        return msg.value
    if depth >= _MAX_DEPTH:
        json_format = _module("google.protobuf.json_format")

        return json_format.MessageToJson(msg, preserving_proto_field_name=True, indent=None)
    out = {}
    for f in d.fields:
        out[f.name] = _field_value(msg, f, depth + 1)
    return out


def _scalar_value(v: Any, f: Any, depth: int) -> Any:
    F = _module("google.protobuf.descriptor").FieldDescriptor

    if f.type == F.TYPE_MESSAGE or f.type == F.TYPE_GROUP:
        return to_python(v, depth)
    if f.type == F.TYPE_ENUM:
        ev = f.enum_type.values_by_number.get(v)
        return ev.name if ev is not None else str(v)
    return v


def _field_value(msg: Any, f: Any, depth: int) -> Any:
    if _is_map(f):
        vf = f.message_type.fields_by_name["value"]
        return [(k, _scalar_value(v, vf, depth)) for k, v in getattr(msg, f.name).items()]
    if _repeated(f):
        return [_scalar_value(v, f, depth) for v in getattr(msg, f.name)]
    if f.message_type is not None or getattr(f, "has_presence", False):
        if not msg.HasField(f.name):
            return None
    return _scalar_value(getattr(msg, f.name), f, depth)


class Protobuf(Format):
    """Protobuf values framed by a schema registry (message indexes after the schema id)."""

    kind = PROTOBUF

    def __init__(self, source: SchemaSource, *, subject: str | None = None) -> None:
        self.source = source
        self._schemas: dict[int, _Schema] = {}
        self.subject = subject

    def schema(self, schema_id: int) -> _Schema:
        hit = self._schemas.get(schema_id)
        if hit is None:
            s = self.source.get(schema_id)
            if s.schema_type != PROTOBUF:
                raise SchemaSourceError(f"schema {schema_id} is {s.schema_type}, not PROTOBUF", schema_id=schema_id)
            hit = self._schemas[schema_id] = _Schema(s, self.source)
        return hit

    def parse(self, data: "bytes | memoryview", offset: int | None = None, what: str = "value") -> Any:
        """One framed value -> the protobuf message object."""
        sid, pos = header(data, offset, what)
        try:
            schema = self.schema(sid)
        except SchemaError as e:
            raise e.located(offset=offset, what=what)
        indexes, pos = message_indexes(data, pos, offset=offset, schema_id=sid, what=what)
        try:
            cls = schema.message_class(indexes)
        except ValueError as e:
            raise PayloadError(str(e), offset=offset, schema_id=sid, what=what) from None
        msg = cls()
        try:
            msg.ParseFromString(bytes(data[pos:]))
        except Exception as e:
            raise PayloadError(f"the Protobuf message {cls.DESCRIPTOR.full_name} does not parse: {e}", offset=offset,
                               schema_id=sid, what=what) from None
        return msg

    def decode(self, data: "bytes | memoryview", offset: int | None = None, what: str = "value") -> Any:
        """One framed value -> dicts and scalars (the Arrow column's Python form)."""
        return to_python(self.parse(data, offset, what))

    def arrow_type(self, schema_id: int | None = None, indexes: Sequence[int] = (0,)) -> "pa.DataType":
        if schema_id is None:
            raise ValueError("the Arrow type of Protobuf values is a schema's: name its id")
        return arrow_type(self.schema(schema_id).descriptor(indexes))

    def decode_arrow(self, column: "pa.Array", offsets: "pa.Array | None", what: str) -> "pa.Array | None":
        """The compiled plan's path (protobuf_program; the kernel, or its pure twin without it):
        an Arrow binary array of values of one schema id and message type in, the typed array out.
        None when it does not apply (values of several ids or types, a type or a value the plan
        does not take): the per-message path then decodes, or names the error."""
        import pyarrow as pa

        from . import protobuf_program as P

        if not pa.types.is_binary(column.type) or len(column) == column.null_count:
            return None
        at = 0
        if column.null_count:
            import numpy as np
            at = int(np.argmax(column.is_valid().to_numpy(zero_copy_only=False)))
        first = column[at].as_py()
        if len(first) < 5 or first[0] != 0:
            return None
        sid = int.from_bytes(first[1:5], "big", signed=True)
        try:
            schema = self.schema(sid)
            indexes, _ = message_indexes(first, 5)
            p = schema.plan(indexes)
        except (SchemaError, ValueError):
            return None  # the per-message path names it
        if p is None:
            return None
        return P.decode(p, column, sid)

    def to_arrow(self, values: Sequence["bytes | memoryview | None"], offsets: Sequence[int] | None = None,
                 what: str = "value") -> "pa.Array":
        """Many framed values -> one Arrow array, typed by the message type of the newest schema id
        seen (every value must be of that message type's shape: fields it lacks are null)."""
        import pyarrow as pa

        msgs: list[Any] = []
        target: tuple[int, Any] | None = None
        for i, v in enumerate(values):
            if v is None:
                msgs.append(None)
                continue
            m = self.parse(v, None if offsets is None else offsets[i], what)
            msgs.append(m)
            sid = int.from_bytes(bytes(v[1:5]), "big", signed=True)
            if target is None or sid > target[0]:
                target = (sid, m.DESCRIPTOR)
        if target is None:
            return pa.nulls(len(values))
        rows: list[Any] = []
        for i, m in enumerate(msgs):
            try:
                rows.append(None if m is None else to_python(m))
            except (OverflowError, OSError, ValueError) as e:  # a Timestamp outside datetime's years 1-9999
                v = values[i]
                raise PayloadError(f"the Protobuf message {m.DESCRIPTOR.full_name} holds a value Arrow's type cannot "
                                   f"hold: {e}", offset=None if offsets is None else offsets[i],
                                   schema_id=int.from_bytes(bytes(v[1:5]), "big", signed=True) if v is not None
                                   else None, what=what) from None
        return pa.array(rows, type=arrow_type(target[1]))

    def to_json(self, data: "bytes | memoryview", offset: int | None = None, what: str = "value") -> Any:
        """One framed value in Protobuf's canonical JSON mapping (field names as in the .proto)."""
        json_format = _module("google.protobuf.json_format")

        return json_format.MessageToDict(self.parse(data, offset, what), preserving_proto_field_name=True)
