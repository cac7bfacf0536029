"""KRaft metadata records (the `__cluster_metadata` log and its snapshots), as Kafka's
MetadataRecordSerde frames them: unsigned varints frame version (1), record type (the schema's
apiKey) and version, then the record in Kafka's message format (kbatch.schema, generated from
metadata/src/main/resources/common/metadata/*.json).

`format_metadata_record` prints a record as `kafka-dump-log --cluster-metadata-decoder` does:
`{"type":"TOPIC_RECORD","version":0,"data":{...}}`.
"""
from __future__ import annotations

import json
from typing import TYPE_CHECKING

from ..errors import CorruptRecordError
from . import MESSAGES, Message, read_message, to_json

if TYPE_CHECKING:
    from .._typing import Buffer

FRAME_VERSION = 1  # AbstractApiMessageSerde.DEFAULT_FRAME_VERSION

RECORD_TYPES = {spec["api_key"]: name for name, spec in MESSAGES.items() if spec["type"] == "metadata"}


def type_name(record_name: str) -> str:
    """MetadataRecordType's constant name: TopicRecord -> TOPIC_RECORD (MessageGenerator.toSnakeCase)."""
    out: list[str] = []
    prev_upper = True
    for c in record_name:
        if c.isupper():
            if not prev_upper:
                out.append("_")
            out.append(c.lower())
            prev_upper = True
        else:
            out.append(c)
            prev_upper = False
    return "".join(out).upper()


def _uvarint(buf: bytes, pos: int, what: str) -> tuple[int, int]:
    value = shift = 0
    for i in range(5):
        if pos >= len(buf):
            raise CorruptRecordError(f"Error while reading {what}", position=pos, expected="an unsigned varint",
                                     found="end of data")
        b = buf[pos]
        pos += 1
        value |= (b & 0x7F) << shift
        if not b & 0x80:
            if value > 0x7FFF:
                raise CorruptRecordError(f"Value for {what} was too large.", position=pos - i - 1,
                                         expected="<= 32767", found=value)
            return value, pos
        shift += 7
    raise CorruptRecordError(f"Error while reading {what}", position=pos, expected="at most 5 varint bytes",
                             found="more")


def read_metadata_record(value: Buffer | None) -> tuple[str, int, Message]:
    """(record name, version, decoded dict) of one metadata record value."""
    if value is None:  # MetadataRecordSerde reads a value; a null one is a corrupt record, not a crash
        raise CorruptRecordError("Metadata record has a null value", position=0, expected="a record value",
                                 found="null")
    buf = bytes(value)
    frame, pos = _uvarint(buf, 0, "frame version")
    if frame == 0:
        raise CorruptRecordError("Could not deserialize metadata record with frame version 0. Note that upgrades "
                                 "from the preview release of KRaft in 2.8 to newer versions are not supported.",
                                 position=0, expected=FRAME_VERSION, found=0)
    if frame != FRAME_VERSION:
        raise CorruptRecordError(f"Could not deserialize metadata record due to unknown frame version {frame}"
                                 f"(only frame version {FRAME_VERSION} is supported)", position=0,
                                 expected=FRAME_VERSION, found=frame)
    api_key, pos = _uvarint(buf, pos, "type")
    version, pos = _uvarint(buf, pos, "version")
    name = RECORD_TYPES.get(api_key)
    if name is None:
        raise CorruptRecordError(f"Unknown metadata id {api_key}", position=pos, expected="a known record type",
                                 found=api_key)
    data, _end = read_message(name, version, buf, pos)
    return name, version, data


def metadata_record_json(value: Buffer | None) -> Message:
    name, version, data = read_metadata_record(value)
    return {"type": type_name(name), "version": version, "data": to_json(name, version, data)}


def format_metadata_record(value: Buffer | None, offset: int) -> str:
    """The payload text kafka-dump-log prints with --cluster-metadata-decoder."""
    try:
        return json.dumps(metadata_record_json(value), separators=(",", ":"), ensure_ascii=False)
    except CorruptRecordError as e:
        return f"Error at {offset}, skipping. {e}"


__all__ = ["RECORD_TYPES", "FRAME_VERSION", "type_name", "read_metadata_record", "metadata_record_json",
           "format_metadata_record"]
