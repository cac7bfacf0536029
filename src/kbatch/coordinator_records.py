"""Records of Kafka's internal coordinator topics: `__consumer_offsets` (GroupCoordinatorRecordSerde)
and `__transaction_state` (TransactionLog), decoded with Kafka's own schemas (kbatch.schema).

Both keys start with an int16: for `__consumer_offsets` it is the record type (0/1 offset commit,
2 group metadata, 3-15 the KIP-848 consumer and share group records), and the key is read at that
version; the value starts with its own int16 version. A null value is a tombstone (`<DELETE>`).
`format_offsets_record` / `format_transaction_record` give the key and payload text
`kafka-dump-log --offsets-decoder` / `--transaction-log-decoder` print.
"""
from __future__ import annotations

import json
import struct

from .errors import CorruptRecordError
from .schema import MESSAGES, read_message, to_json

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


def _version(buf, what: str) -> int:
    if len(buf) < 2:
        raise CorruptRecordError(f"Could not read version from {what}'s buffer.", position=0, expected="2 bytes",
                                 found=len(buf))
    return struct.unpack_from(">h", buf, 0)[0]


def read_group_record(key, value) -> tuple:
    """(record type, key dict, value version or None, value dict or None) of a __consumer_offsets record."""
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


def _embedded_consumer_protocol(member: dict, field: str, schema: str) -> None:
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


def group_record_json(key, value) -> tuple:
    """(key JSON, value JSON or None): what the offsets decoder prints, as dicts."""
    rtype, key_data, vversion, value_data = read_group_record(key, value)
    name = GROUP_RECORD_TYPES[rtype]
    key_json = {"type": str(rtype), "data": to_json(name + "Key", rtype, key_data)}
    if value_data is None:
        return key_json, None
    data = to_json(name + "Value", vversion, value_data)
    if name == "GroupMetadata" and data.get("protocolType") == CONSUMER_PROTOCOL_TYPE:
        for m in data.get("members") or ():
            _embedded_consumer_protocol(m, "subscription", "ConsumerProtocolSubscription")
            _embedded_consumer_protocol(m, "assignment", "ConsumerProtocolAssignment")
    return key_json, {"version": str(vversion), "data": data}


def _dumps(obj) -> str:
    return json.dumps(obj, separators=(",", ":"), ensure_ascii=False)


def format_offsets_record(key, value, offset: int) -> tuple:
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


def read_transaction_record(key, value) -> tuple:
    """(key version, transactional id, value version or None, value dict or None) of a
    __transaction_state record; transactional id None for a key version Kafka does not know."""
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


def format_transaction_record(key, value) -> tuple:
    """(key text, payload text or None) as TransactionLog.formatRecordKeyAndValue prints them.
    Partitions are listed in the stored order (Kafka prints them from a hash set)."""
    kversion, txn_id, _vv, v = read_transaction_record(key, value)
    if txn_id is None:
        return f"unknown::version={kversion}", None
    key_text = f"transaction_metadata::transactionalId={txn_id}"
    if v is None:
        return key_text, "<DELETE>"
    state = transaction_state_name(v["transactionStatus"])
    parts = []
    if state != "Empty":
        for tp in v.get("transactionPartitions") or ():
            parts += [f"{tp['topic']}-{p}" for p in tp["partitionIds"]]
    return key_text, (f"producerId:{v['producerId']},producerEpoch:{v['producerEpoch']},state={state},"
                      f"partitions=[{','.join(parts)}],txnLastUpdateTimestamp={v['transactionLastUpdateTimestampMs']},"
                      f"txnTimeoutMs={v['transactionTimeoutMs']}")


__all__ = ["GROUP_RECORD_TYPES", "TRANSACTION_STATES", "UnknownRecordTypeError", "read_group_record",
           "group_record_json", "format_offsets_record", "read_transaction_record", "format_transaction_record",
           "transaction_state_name"]
