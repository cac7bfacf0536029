"""Confluent's wire format: magic byte 0, the schema id as a big-endian int32, then the payload
(for Protobuf, the message indexes come first: a zigzag varint count, then that many zigzag varint
indexes into the schema's nested message types; a single 0 byte stands for [0], the first
message)."""
from __future__ import annotations

from .errors import PayloadError, WrongMagicError

MAGIC = 0
HEADER_SIZE = 5


def header(data: bytes | memoryview, offset: int | None = None, what: str = "value") -> tuple[int, int]:
    """(schema id, where the payload starts) of a framed key or value."""
    if len(data) < HEADER_SIZE:
        raise WrongMagicError(f"{len(data)} bytes, shorter than the 5-byte header (magic byte 0 and a schema id)",
                              offset=offset, what=what)
    if data[0] != MAGIC:
        raise WrongMagicError(f"magic byte {data[0]}, expected 0 (not in the Schema Registry wire format)",
                              offset=offset, what=what)
    return int.from_bytes(data[1:5], "big", signed=True), HEADER_SIZE


def frame(schema_id: int, payload: bytes) -> bytes:
    """The framed bytes of a payload, as a registry-aware serializer writes them."""
    return bytes([MAGIC]) + schema_id.to_bytes(4, "big", signed=True) + payload


def _varint(data: bytes | memoryview, pos: int) -> tuple[int, int]:
    shift = result = 0
    while True:
        if pos >= len(data):
            raise ValueError("the message indexes end inside a varint")
        b = data[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if not b & 0x80:
            return (result >> 1) ^ -(result & 1), pos  # zigzag
        shift += 7
        if shift > 63:
            raise ValueError("a message-index varint longer than 10 bytes")


def message_indexes(data: bytes | memoryview, pos: int, *, offset: int | None = None, schema_id: int | None = None,
                    what: str = "value") -> tuple[list[int], int]:
    """Protobuf's message-index list after the header: (indexes, where the message starts)."""
    try:
        count, pos = _varint(data, pos)
        if count == 0:
            return [0], pos
        if count < 0 or count > 100:
            raise ValueError(f"a message-index count of {count}")
        out = []
        for _ in range(count):
            i, pos = _varint(data, pos)
            if i < 0:
                raise ValueError(f"a negative message index {i}")
            out.append(i)
        return out, pos
    except ValueError as e:
        raise PayloadError(f"the Protobuf message indexes do not read: {e}", offset=offset, schema_id=schema_id,
                           what=what) from None


def encode_message_indexes(indexes: list[int]) -> bytes:
    """The bytes of a message-index list ([0] as the single byte 0, as Confluent's serializer does)."""
    if indexes == [0]:
        return b"\x00"

    def zz(v: int) -> bytes:
        v = (v << 1) ^ (v >> 63)
        out = bytearray()
        while True:
            b = v & 0x7F
            v >>= 7
            if v:
                out.append(b | 0x80)
            else:
                out.append(b)
                return bytes(out)
    return zz(len(indexes)) + b"".join(zz(i) for i in indexes)
