"""Kafka protocol messages for `kbatch serve`: which APIs and versions are served, and the codec.

Request and response layouts come from kafka-python's protocol classes, which are generated from
Kafka's own JSON message schemas (one class per API, a `version` argument, unknown tagged fields
skipped). This module adds only what a server needs around them: the table of APIs served (each
handler module in server/apis/ registers its own with its version range),
the request header peek (api key and version decide whether the header is flexible), and the
framing of responses, including Fetch responses whose record bytes are sent straight from
segment files (`encode_with_slices`).
"""
from __future__ import annotations

import asyncio
import io
import os
import struct
from dataclasses import dataclass
from typing import Any

from ..errors import InvalidRequestError

try:
    from kafka.protocol.api_header import RequestHeader
    from kafka.protocol.api_message import ApiMessage
    from kafka.protocol.data_container import DataContainer
    from kafka.protocol.metadata.api_versions import ApiVersionsResponse
    from kafka.protocol.schemas.fields.codecs import UnsignedVarInt32
except ImportError as e:  # pragma: no cover - the serve extra is missing
    raise ImportError("kbatch serve needs kafka-python's protocol classes (kafka-python >= 3): "
                      "pip install 'kafka-kbatch[serve]'") from e


# kafka-python's message classes (ApiMessage, and DataContainer for their parts) carry no type information:
# they are Any to a type checker


@dataclass(frozen=True)
class Api:
    key: int
    name: str
    request: type[ApiMessage]
    response: type[ApiMessage]
    min_version: int
    max_version: int
    first_flexible: int


# What is advertised (protocol-notes.md §2.4): every range is implemented and tested, reaches down
# to the oldest version a client of the test matrix sends (aiokafka, kafka-python 2.0.2, kcat) and
# up to the newest (librdkafka 2.16, kafka-python 3, Kafka's Java client 4.4). Fetch stops at 12 (topic
# names, no topic ids) and ListOffsets at 10 (v11's -6 EARLIEST_PENDING_UPLOAD is not answered).
APIS: dict[int, Api] = {}
API_VERSIONS_KEY = 18
PRODUCE_KEY = 0
FETCH_KEY = 1


def register(api: Api) -> Api:
    """Declare an API served, with its version range: each handler module (server/apis/<name>.py)
    registers its own at import, as franz-go's kfake does (regKey(key, min, max))."""
    if api.key in APIS:
        raise ValueError(f"API key {api.key} registered twice ({APIS[api.key].name}, {api.name})")
    APIS[api.key] = api
    return api

class Request:
    """One decoded request: the header fields and the body (a kafka-python message object)."""

    __slots__ = ("api", "version", "correlation_id", "client_id", "body", "size")

    def __init__(self, api: Api, version: int, correlation_id: int, client_id: str | None, body: ApiMessage,
                 size: int) -> None:
        self.api, self.version, self.correlation_id = api, version, correlation_id
        self.client_id, self.body, self.size = client_id, body, size

    def response(self, **fields: Any) -> ApiMessage:
        """A response object of this request's API and version."""
        return self.api.response(version=self.version, **fields)


class UnsupportedApiVersion(InvalidRequestError):
    """ApiVersions at a version above the advertised range (answered at v0, KIP-511)."""

    def __init__(self, correlation_id: int, version: int) -> None:
        self.correlation_id = correlation_id
        self.version = version
        super().__init__("Unsupported ApiVersions version", expected=f"version <= {APIS[18].max_version}",
                         found=version)


#: the slices of a Fetch response: each partition's part of the response and its records in a segment file
Slices = list[tuple[DataContainer, "FileSlice"]]
#: what a request handler answers: a response message; for Fetch (response, Slices); None: no answer
#: (Produce with acks=0)
Answer = ApiMessage | tuple[ApiMessage, Slices] | None


class CloseConnection(Exception):
    """Raised by a handler when Kafka would close the connection instead of answering."""


def peek_header(frame: bytes | bytearray | memoryview) -> tuple[int, int, int]:
    """(api key, api version, correlation id) from the first 8 bytes of a request frame."""
    if len(frame) < 8:
        raise InvalidRequestError("Request is shorter than its header", position=0, expected="at least 8 bytes",
                                  found=f"{len(frame)} bytes")
    key, version, correlation_id = struct.unpack_from(">hhi", frame, 0)
    return key, version, correlation_id


def decode_request(frame: bytes | bytearray | memoryview) -> Request:
    """Decode a request frame (without its 4-byte size). Unknown keys and versions outside the
    advertised range raise InvalidRequestError (the connection is closed, as Kafka does), except
    ApiVersions above its range, which raises UnsupportedApiVersion (answered at v0)."""
    key, version, correlation_id = peek_header(frame)
    api = APIS.get(key)
    if api is None:
        raise InvalidRequestError("Unknown API key", position=0, expected=f"one of {sorted(APIS)}", found=key)
    if not api.min_version <= version <= api.max_version:
        if key == API_VERSIONS_KEY and version > api.max_version:
            raise UnsupportedApiVersion(correlation_id, version)
        raise InvalidRequestError(f"Unsupported {api.name} version", position=2,
                                  expected=f"{api.min_version}-{api.max_version}", found=version)
    flexible = version >= api.first_flexible
    data = io.BytesIO(bytes(frame))
    try:
        header = RequestHeader.decode(data, flexible=flexible)
        start = data.tell()
        body = api.request.decode(memoryview(frame)[start:], version=version)
    except InvalidRequestError:
        raise
    except Exception as e:  # the library's own errors (struct.error, ValueError, ...) for malformed bytes
        raise InvalidRequestError(f"Malformed {api.name} v{version} request: {type(e).__name__}: {e}",
                                  expected=f"a valid {api.name} v{version} body", found=f"{len(frame)} bytes") from e
    null = _first_null(_null_plan(api.request.fields.values(), version), body, "")
    if null is not None:
        # Kafka's generated readers refuse this while parsing ("non-nullable field ... was serialized as
        # null"): the request is invalid and the connection is closed, before any handler runs
        raise InvalidRequestError(f"Malformed {api.name} v{version} request: non-nullable field {null} was "
                                  "serialized as null", expected="a value", found="null")
    return Request(api, version, correlation_id, header.client_id, body, len(frame))


#: the fields of a message (at one version) to check for nulls: (name, what it is, whether it may be null,
#: the plan of its elements or members)
_NullPlan = tuple[tuple[str, str, bool, "_NullPlan"], ...]
_NULL_PLANS: dict[tuple[int, int], _NullPlan] = {}
_NULLABLE_TYPES = ("string", "bytes", "records")


def _null_plan(fields: Any, version: int) -> _NullPlan:
    """The strings, bytes, arrays and structs among kafka-python schema fields at `version` that may
    not be null (kafka-python decodes a -1 length as None whatever the schema says), and the struct
    arrays and structs that may be null but whose members may not (OffsetFetch v2+: `topics` null
    asks for every topic, a topic's `partition_indexes` never null), each with the plan for its
    elements or members; cached per field list and version."""
    fields = tuple(fields)
    key = (id(fields[0]) if fields else 0, version)
    plan = _NULL_PLANS.get(key)
    if plan is None:
        out = []
        for f in fields:
            if not f.for_version_q(version) or f.tagged_field_q(version):
                continue
            nullable = f.nullable_for_version_q(version)
            if f.is_struct_array():
                sub = _null_plan(f.array_of.fields.values(), version)
                if not nullable or sub:
                    out.append((f.name, "structs", nullable, sub))
            elif f.is_struct():
                sub = _null_plan(f.fields.values(), version)
                if not nullable or sub:
                    out.append((f.name, "struct", nullable, sub))
            elif nullable:
                continue
            elif f.is_array():
                out.append((f.name, "array", False, ()))
            elif f.type_str in _NULLABLE_TYPES:
                out.append((f.name, "value", False, ()))
        plan = _NULL_PLANS[key] = tuple(out)
    return plan


def _first_null(plan: _NullPlan, obj: Any, path: str) -> str | None:
    """The path of the first non-nullable field that is None in a decoded message, or None."""
    for name, kind, nullable, sub in plan:
        value = getattr(obj, name, None)
        if value is None:
            if nullable:
                continue
            return path + name
        if kind == "structs" and sub:
            for i, item in enumerate(value):
                found = _first_null(sub, item, f"{path}{name}[{i}].")
                if found is not None:
                    return found
        elif kind == "struct" and sub:
            found = _first_null(sub, value, f"{path}{name}.")
            if found is not None:
                return found
    return None


def encode_response(request: Request, response: ApiMessage) -> bytes | bytearray:
    """The framed response (size, header, body). ApiVersions always uses header v0 (the library's
    ApiVersionsResponse does that), every other flexible version header v1."""
    if response.version != request.version:
        raise ValueError(f"response version {response.version} for a v{request.version} request")
    response.with_header(correlation_id=request.correlation_id)
    framed: bytes | bytearray = response.encode(header=True, framed=True)  # kafka-python: a bytearray
    return framed


def encode_api_versions_fallback(correlation_id: int) -> bytes | bytearray:
    """Kafka's answer to an ApiVersions request above its range: v0 layout, error 35
    UNSUPPORTED_VERSION, and the ApiVersions range so the client can retry (KIP-511)."""
    api = APIS[API_VERSIONS_KEY]
    resp = ApiVersionsResponse(version=0, error_code=35, api_keys=[
        ApiVersionsResponse.ApiVersion(api_key=api.key, min_version=api.min_version, max_version=api.max_version)])
    resp.with_header(correlation_id=correlation_id)
    framed: bytes | bytearray = resp.encode(header=True, framed=True)
    return framed


# Handlers looping over a request's entries yield to the event loop every this many, so other
# connections are served while one large request is worked through (about a millisecond of work).
ENTRIES_PER_TURN = 1000


async def take_turns(i: int) -> None:
    """Called with a loop index: yields to the event loop once every ENTRIES_PER_TURN entries."""
    if i % ENTRIES_PER_TURN == ENTRIES_PER_TURN - 1:
        await asyncio.sleep(0)


# ------------------------------------------------------------------------------------ file slices
class FileSlice:
    """Record bytes of a Fetch response that stay in a segment file: `size` bytes at `position`
    of the open file `fd` (sent with os.sendfile, or read with os.pread)."""

    __slots__ = ("fd", "position", "size")

    def __init__(self, fd: int, position: int, size: int) -> None:
        self.fd, self.position, self.size = fd, position, size

    def read(self) -> bytes:
        data = os.pread(self.fd, self.size, self.position)
        if len(data) != self.size:
            raise InvalidRequestError("Segment file is shorter than expected", position=self.position,
                                      expected=f"{self.size} bytes", found=f"{len(data)} bytes")
        return data


def encode_with_slices(request: Request, response: ApiMessage,
                       slices: Slices) -> list[bytes | bytearray | FileSlice]:
    """Frame a Fetch response whose partitions' `records` are FileSlice objects without reading
    them: the library encodes the response with a unique placeholder in each records field, then
    each placeholder (and its length prefix) is replaced by the slice's real length prefix and the
    slice itself. Returns the pieces in order: bytes and FileSlice objects. The result is byte for
    byte what encode_response gives with the bytes read (tests check this)."""
    flexible = request.version >= request.api.first_flexible
    marks = []
    for i, (part, sl) in enumerate(slices):
        mark = b"\x00kbatch-slice" + struct.pack(">I", i) + os.urandom(8)
        part.records = mark
        marks.append((mark, sl))
    raw = encode_response(request, response)
    pieces: list[bytes | bytearray | FileSlice] = []
    pos, total = 4, 0
    for mark, sl in marks:
        at = raw.find(mark, pos)
        if at < 0:
            raise AssertionError("placeholder not found in the encoded response")
        prefix = _length_prefix(len(mark), flexible)
        head = raw[pos:at - len(prefix)]
        if raw[at - len(prefix):at] != prefix:
            raise AssertionError("unexpected length prefix before a records placeholder")
        new_prefix = _length_prefix(sl.size, flexible)
        pieces.append(head + new_prefix)
        pieces.append(sl)
        total += len(head) + len(new_prefix) + sl.size
        pos = at + len(mark)
    tail = raw[pos:]
    pieces.append(tail)
    total += len(tail)
    first = pieces[0]
    assert not isinstance(first, FileSlice)  # the response head, never a slice
    pieces[0] = struct.pack(">i", total) + first
    return pieces


def _length_prefix(n: int, flexible: bool) -> bytes:
    # the records field is NULLABLE_BYTES (int32 length) or COMPACT_NULLABLE_BYTES (uvarint length + 1)
    if flexible:
        prefix: bytes = UnsignedVarInt32.encode(n + 1)
        return prefix
    return struct.pack(">i", n)


__all__ = ["APIS", "Api", "Request", "FileSlice", "UnsupportedApiVersion", "CloseConnection", "decode_request", "encode_response",
           "encode_api_versions_fallback", "encode_with_slices", "peek_header", "take_turns", "ENTRIES_PER_TURN"]
