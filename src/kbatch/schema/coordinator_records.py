"""Records of Kafka's internal coordinator topics: `__consumer_offsets` (GroupCoordinatorRecordSerde)
and `__transaction_state` (TransactionLog), decoded with Kafka's own schemas (kbatch.schema).

Both keys start with an int16: for `__consumer_offsets` it is the record type (0/1 offset commit,
2 group metadata, 3-15 the KIP-848 consumer and share group records), and the key is read at that
version; the value starts with its own int16 version. A null value is a tombstone (`<DELETE>`).
`format_offsets_record` / `format_transaction_record` give the key and payload text
`kafka-dump-log --offsets-decoder` / `--transaction-log-decoder` print.

Typed records for the classic group protocol (what `kbatch serve` writes and reads back):
`OffsetCommitKey` (key versions 0 and 1) with `OffsetCommitValue` (versions 0-4; 1 is the only one
with expireTimestamp, 3 adds leaderEpoch, 4 is flexible), `GroupMetadataKey` (version 2) with
`GroupMetadataValue` (versions 0-4); `encode_key` / `encode_value` / `decode` go through the same
schema tables. What Kafka writes today (MetadataVersion.offsetCommitValueVersion /
groupMetadataValueVersion): key 1 + value 3 (value 1 when an expire timestamp is given), group key
2 + value 3; those are the defaults. Key types 3-15 decode as `OtherGroupRecord` (schema dicts).
"""
from __future__ import annotations

import json
import struct
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Union

from ..errors import CorruptRecordError
from . import MESSAGES, Message, read_message, to_json, write_message

if TYPE_CHECKING:
    from .._typing import Buffer

# GroupCoordinatorRecordSerde.apiMessageKeyFor / apiMessageValueFor
GROUP_RECORD_TYPES = {
    0: "OffsetCommit", 1: "OffsetCommit", 2: "GroupMetadata", 3: "ConsumerGroupMetadata",
    4: "ConsumerGroupPartitionMetadata", 5: "ConsumerGroupMemberMetadata", 6: "ConsumerGroupTargetAssignmentMetadata",
    7: "ConsumerGroupTargetAssignmentMember", 8: "ConsumerGroupCurrentMemberAssignment",
    9: "ShareGroupPartitionMetadata", 10: "ShareGroupMemberMetadata", 11: "ShareGroupMetadata",
    12: "ShareGroupTargetAssignmentMetadata", 13: "ShareGroupTargetAssignmentMember",
    14: "ShareGroupCurrentMemberAssignment", 15: "ShareGroupStatePartitionMetadata",
}
# TransactionState ids (kafka.coordinator.transaction.TransactionState.fromId)
TRANSACTION_STATES = ("Empty", "Ongoing", "PrepareCommit", "PrepareAbort", "CompleteCommit", "CompleteAbort", "Dead",
                      "PrepareEpochFence")
CONSUMER_PROTOCOL_TYPE = "consumer"


class UnknownRecordTypeError(CorruptRecordError):
    """A coordinator record key whose type this Kafka schema set does not know."""


def _version(buf: bytes, what: str) -> int:
    if len(buf) < 2:
        raise CorruptRecordError(f"Could not read version from {what}'s buffer.", position=0, expected="2 bytes",
                                 found=len(buf))
    version: int = struct.unpack_from(">h", buf, 0)[0]
    return version


def read_group_record(key: Buffer | None, value: Buffer | None
                      ) -> tuple[int, Message, int | None, Message | None]:
    """(record type, key dict, value version or None, value dict or None) of a __consumer_offsets record."""
    if key is None:
        raise CorruptRecordError("Failed to decode message using offset topic decoder (message had a missing key)",
                                 expected="a key", found="null")
    kb = bytes(key)
    rtype = _version(kb, "key")
    name = GROUP_RECORD_TYPES.get(rtype)
    if name is None:
        raise UnknownRecordTypeError(f"Unknown record type {rtype}", position=0, found=rtype)
    key_data, _ = read_message(name + "Key", rtype, kb, 2, exact=False)
    if value is None:
        return rtype, key_data, None, None
    vb = bytes(value)
    vversion = _version(vb, "value")
    value_data, _ = read_message(name + "Value", vversion, vb, 2, exact=False)
    return rtype, key_data, vversion, value_data


def _embedded_consumer_protocol(member: Message, field: str, schema: str) -> None:
    """GroupMetadataValue members of a "consumer" group: the subscription / assignment bytes
    decoded (version-prefixed ConsumerProtocol messages); left as bytes when they do not decode."""
    raw = member.get(field)
    if raw is None:
        return
    try:
        data = base64_decode(raw)
        version = _version(data, field)
        decoded, _ = read_message(schema, version, data, 2, exact=False)
        member[field] = to_json(schema, version, decoded)
    except (CorruptRecordError, ValueError, KeyError):
        pass


def base64_decode(text: str) -> bytes:
    import base64
    return base64.b64decode(text)


def group_record_json(key: Buffer | None, value: Buffer | None) -> tuple[Message, Message | None]:
    """(key JSON, value JSON or None): what the offsets decoder prints, as dicts."""
    rtype, key_data, vversion, value_data = read_group_record(key, value)
    name = GROUP_RECORD_TYPES[rtype]
    key_json = {"type": str(rtype), "data": to_json(name + "Key", rtype, key_data)}
    if value_data is None:
        return key_json, None
    assert vversion is not None  # a value has its version
    data = to_json(name + "Value", vversion, value_data)
    if name == "GroupMetadata" and data.get("protocolType") == CONSUMER_PROTOCOL_TYPE:
        for m in data.get("members") or ():
            _embedded_consumer_protocol(m, "subscription", "ConsumerProtocolSubscription")
            _embedded_consumer_protocol(m, "assignment", "ConsumerProtocolAssignment")
    return key_json, {"version": str(vversion), "data": data}


def _dumps(obj: Message) -> str:
    return json.dumps(obj, separators=(",", ":"), ensure_ascii=False)


def format_offsets_record(key: Buffer | None, value: Buffer | None, offset: int) -> tuple[str, str | None]:
    """(key text, payload text or None) as DumpLogSegments' OffsetsMessageParser prints them."""
    if key is None:
        raise CorruptRecordError(f"Failed to decode message at offset {offset} using offset topic decoder "
                                 f"(message had a missing key)", found="a null key")
    try:
        k, v = group_record_json(key, value)
    except UnknownRecordTypeError as e:
        return f"Unknown record type {e.found} at offset {offset}, skipping.", None
    except CorruptRecordError as e:
        return f"Error at offset {offset}, skipping. {e}", None
    return _dumps(k), ("<DELETE>" if v is None else _dumps(v))


def read_transaction_record(key: Buffer | None, value: Buffer | None
                            ) -> tuple[int, str | None, int | None, Message | None]:
    """(key version, transactional id, value version or None, value dict or None) of a
    __transaction_state record; transactional id None for a key version Kafka does not know."""
    if key is None:
        raise CorruptRecordError("Failed to decode message using transaction log decoder (message had a missing "
                                 "key)", expected="a key", found="null")
    kb = bytes(key)
    kversion = _version(kb, "key")
    valid = MESSAGES["TransactionLogKey"]["valid"]
    if not valid[0] <= kversion <= valid[1]:
        return kversion, None, None, None
    key_data, _ = read_message("TransactionLogKey", kversion, kb, 2, exact=False)
    if value is None:
        return kversion, key_data["transactionalId"], None, None
    vb = bytes(value)
    vversion = _version(vb, "value")
    value_data, _ = read_message("TransactionLogValue", vversion, vb, 2, exact=False)
    return kversion, key_data["transactionalId"], vversion, value_data


def transaction_state_name(status: int) -> str:
    if not 0 <= status < len(TRANSACTION_STATES):
        raise CorruptRecordError("Unknown transaction state id from the transaction status message",
                                 expected="0..7", found=status)
    return TRANSACTION_STATES[status]


def format_transaction_record(key: Buffer | None, value: Buffer | None) -> tuple[str, str | None]:
    """(key text, payload text or None) as TransactionLog.formatRecordKeyAndValue prints them.
    Partitions are listed in the stored order (Kafka prints them from a hash set)."""
    kversion, txn_id, _vv, v = read_transaction_record(key, value)
    if txn_id is None:
        return f"unknown::version={kversion}", None
    key_text = f"transaction_metadata::transactionalId={txn_id}"
    if v is None:
        return key_text, "<DELETE>"
    state = transaction_state_name(v["transactionStatus"])
    parts: list[str] = []
    if state != "Empty":
        for tp in v.get("transactionPartitions") or ():
            parts += [f"{tp['topic']}-{p}" for p in tp["partitionIds"]]
    return key_text, (f"producerId:{v['producerId']},producerEpoch:{v['producerEpoch']},state={state},"
                      f"partitions=[{','.join(parts)}],txnLastUpdateTimestamp={v['transactionLastUpdateTimestampMs']},"
                      f"txnTimeoutMs={v['transactionTimeoutMs']}")


# ------------------------------------------------------------------------------------ typed records
@dataclass(frozen=True)
class OffsetCommitKey:
    group: str
    topic: str
    partition: int
    version: int = 1


@dataclass(frozen=True)
class GroupMetadataKey:
    group: str
    version: int = 2


@dataclass(frozen=True)
class OffsetCommitValue:
    """A committed offset. leader_epoch -1 = unknown; expire_timestamp exists only in version 1."""

    offset: int
    metadata: str = ""
    commit_timestamp: int = -1
    leader_epoch: int = -1
    expire_timestamp: int = -1
    version: int = 3


@dataclass(frozen=True)
class MemberMetadata:
    member_id: str
    client_id: str
    client_host: str
    session_timeout: int
    subscription: bytes = b""
    assignment: bytes = b""
    rebalance_timeout: int = -1
    group_instance_id: str | None = None


@dataclass(frozen=True)
class GroupMetadataValue:
    protocol_type: str
    generation: int
    protocol: str | None
    leader: str | None
    members: tuple[MemberMetadata, ...] = field(default_factory=tuple)
    current_state_timestamp: int = -1
    version: int = 3


@dataclass(frozen=True)
class OtherGroupRecord:
    """A key of record types 3-15 (KIP-848 consumer groups, share groups) as the schema's dict."""

    record_type: int
    key: Message


#: a `__consumer_offsets` key of the classic group protocol, and its value (None: a tombstone)
ClassicGroupKey = Union[OffsetCommitKey, GroupMetadataKey]
ClassicGroupValue = Union[OffsetCommitValue, GroupMetadataValue, None]
#: what `decode` gives: a typed key and value, or a KIP-848 / share group key with its value as the schema's dict
GroupRecord = Union[tuple[OffsetCommitKey, Union[OffsetCommitValue, None]],
                    tuple[GroupMetadataKey, Union[GroupMetadataValue, None]],
                    tuple[OtherGroupRecord, Union[Message, None]]]


_VALUE_FIELDS = {"offset": "offset", "leaderEpoch": "leader_epoch", "metadata": "metadata",
                 "commitTimestamp": "commit_timestamp", "expireTimestamp": "expire_timestamp"}
_GROUP_FIELDS = {"protocolType": "protocol_type", "generation": "generation", "protocol": "protocol",
                 "leader": "leader", "currentStateTimestamp": "current_state_timestamp"}
_MEMBER_FIELDS = {"memberId": "member_id", "groupInstanceId": "group_instance_id", "clientId": "client_id",
                  "clientHost": "client_host", "rebalanceTimeout": "rebalance_timeout",
                  "sessionTimeout": "session_timeout", "subscription": "subscription", "assignment": "assignment"}


def encode_key(key: ClassicGroupKey) -> bytes:
    """A typed key as `__consumer_offsets` stores it (int16 record type, then the key message)."""
    if isinstance(key, OffsetCommitKey):
        body = write_message("OffsetCommitKey", key.version,
                             {"group": key.group, "topic": key.topic, "partition": key.partition})
    elif isinstance(key, GroupMetadataKey):
        body = write_message("GroupMetadataKey", key.version, {"group": key.group})
    else:
        raise TypeError(f"not a classic __consumer_offsets key: {key!r}")
    return struct.pack(">h", key.version) + body


def encode_value(value: ClassicGroupValue) -> bytes | None:
    """A typed value (int16 version, then the value message); None stays None (a tombstone)."""
    if value is None:
        return None
    if isinstance(value, OffsetCommitValue):
        data = {k: getattr(value, a) for k, a in _VALUE_FIELDS.items()}
        body = write_message("OffsetCommitValue", value.version, data)
    elif isinstance(value, GroupMetadataValue):
        data = {k: getattr(value, a) for k, a in _GROUP_FIELDS.items()}
        data["members"] = [{k: getattr(m, a) for k, a in _MEMBER_FIELDS.items()} for m in value.members]
        body = write_message("GroupMetadataValue", value.version, data)
    else:
        raise TypeError(f"not a classic __consumer_offsets value: {value!r}")
    return struct.pack(">h", value.version) + body


def decode(key: Buffer, value: Buffer | None) -> GroupRecord:
    """(typed key, typed value or None) of one `__consumer_offsets` record: OffsetCommitKey /
    GroupMetadataKey with their values, or (OtherGroupRecord, value dict or None) for record
    types 3-15. Raises CorruptRecordError (with the byte position) for bytes the schemas reject."""
    rtype, key_data, vversion, value_data = read_group_record(key, value)
    if rtype in (0, 1):
        k = OffsetCommitKey(key_data["group"], key_data["topic"], key_data["partition"], version=rtype)
        if value_data is None:
            return k, None
        assert vversion is not None  # a value has its version
        return k, OffsetCommitValue(version=vversion, **{a: value_data[n] for n, a in _VALUE_FIELDS.items()
                                                         if n in value_data})
    if rtype == 2:
        gk = GroupMetadataKey(key_data["group"], version=rtype)
        if value_data is None:
            return gk, None
        assert vversion is not None  # a value has its version
        fields = {a: value_data[n] for n, a in _GROUP_FIELDS.items() if n in value_data}
        members = tuple(MemberMetadata(**{a: m[n] for n, a in _MEMBER_FIELDS.items() if n in m})
                        for m in value_data["members"])
        return gk, GroupMetadataValue(version=vversion, members=members, **fields)
    return OtherGroupRecord(rtype, key_data), value_data


__all__ = ["GROUP_RECORD_TYPES", "TRANSACTION_STATES", "UnknownRecordTypeError", "read_group_record",
           "group_record_json", "format_offsets_record", "read_transaction_record", "format_transaction_record",
           "transaction_state_name", "OffsetCommitKey", "OffsetCommitValue", "GroupMetadataKey", "GroupMetadataValue",
           "MemberMetadata", "OtherGroupRecord", "ClassicGroupKey", "ClassicGroupValue", "GroupRecord", "encode_key", "encode_value", "decode"]
