"""`__consumer_offsets` keys and values (kbatch.schema.coordinator_records) against Kafka's message schemas.

kbatch writes and reads them with its tables generated from Kafka's schema files (kbatch.schema).
The oracle is a second implementation: kafka-python's generic schema engine (StructField) fed the
schemas of Kafka's group-coordinator/src/main/resources/common/message/{OffsetCommitKey,
OffsetCommitValue,GroupMetadataKey,GroupMetadataValue}.json, restated below field by field: every
version of every record must encode to the same bytes both ways and decode back. Hand-checked bytes
pin the layouts Kafka writes today (key v1 + value v3, group key v2 + value v3)."""
from __future__ import annotations

import struct

import pytest

from kbatch.schema import coordinator_records as cr
from kbatch.errors import CorruptRecordError

pytest.importorskip("kafka.protocol.schemas", reason="the oracle is kafka-python >= 3's schema engine")
from kafka.protocol.data_container import DataContainer  # noqa: E402
from kafka.protocol.schemas import StructField  # noqa: E402

KAFKA_SCHEMAS = {
    "OffsetCommitKey": {"type": "data", "name": "OffsetCommitKey", "validVersions": "0-1", "flexibleVersions": "none",
                        "fields": [{"name": "group", "type": "string", "versions": "0-1"},
                                   {"name": "topic", "type": "string", "versions": "0-1"},
                                   {"name": "partition", "type": "int32", "versions": "0-1"}]},
    "GroupMetadataKey": {"type": "data", "name": "GroupMetadataKey", "validVersions": "2", "flexibleVersions": "none",
                         "fields": [{"name": "group", "type": "string", "versions": "2"}]},
    "OffsetCommitValue": {"type": "data", "name": "OffsetCommitValue", "validVersions": "0-4", "flexibleVersions": "4+",
                          "fields": [{"name": "offset", "type": "int64", "versions": "0+"},
                                     {"name": "leaderEpoch", "type": "int32", "versions": "3+", "default": -1},
                                     {"name": "metadata", "type": "string", "versions": "0+"},
                                     {"name": "commitTimestamp", "type": "int64", "versions": "0+"},
                                     {"name": "expireTimestamp", "type": "int64", "versions": "1", "default": -1}]},
    "GroupMetadataValue": {
        "type": "data", "name": "GroupMetadataValue", "validVersions": "0-4", "flexibleVersions": "4+",
        "fields": [{"name": "protocolType", "versions": "0+", "type": "string"},
                   {"name": "generation", "versions": "0+", "type": "int32"},
                   {"name": "protocol", "versions": "0+", "type": "string", "nullableVersions": "0+"},
                   {"name": "leader", "versions": "0+", "type": "string", "nullableVersions": "0+"},
                   {"name": "currentStateTimestamp", "versions": "2+", "type": "int64", "default": -1},
                   {"name": "members", "versions": "0+", "type": "[]MemberMetadata", "fields": [
                       {"name": "memberId", "versions": "0+", "type": "string"},
                       {"name": "groupInstanceId", "versions": "3+", "type": "string", "default": "null",
                        "nullableVersions": "3+"},
                       {"name": "clientId", "versions": "0+", "type": "string"},
                       {"name": "clientHost", "versions": "0+", "type": "string"},
                       {"name": "rebalanceTimeout", "versions": "1+", "type": "int32"},
                       {"name": "sessionTimeout", "versions": "0+", "type": "int32"},
                       {"name": "subscription", "versions": "0+", "type": "bytes"},
                       {"name": "assignment", "versions": "0+", "type": "bytes"}]}]},
}


def oracle(name):
    sf = StructField(KAFKA_SCHEMAS[name])
    cls = type(name, (DataContainer,), {"_struct": sf})
    sf.set_data_class(cls)
    return sf, cls


def oracle_encode(name, version, **fields):
    sf, cls = oracle(name)
    flexible = version >= 4 and name.endswith("Value")
    if "members" in fields:
        member_cls = sf.fields["members"].data_class
        fields["members"] = [member_cls(**m) for m in fields["members"]]
    body = sf.encode(cls(version=version, **fields), version=version, compact=flexible, tagged=flexible)
    return struct.pack(">h", version) + bytes(body)


MEMBERS = [dict(member_id="m-1", group_instance_id="static-1", client_id="c1", client_host="/127.0.0.1",
                rebalance_timeout=30000, session_timeout=10000, subscription=b"\x00\x01sub", assignment=b"asg"),
           dict(member_id="m-2", group_instance_id=None, client_id="c2", client_host="/127.0.0.2",
                rebalance_timeout=45000, session_timeout=6000, subscription=b"", assignment=b"\xff" * 300)]


@pytest.mark.parametrize("version", [0, 1])
def test_offset_commit_key_versions(version):
    want = oracle_encode("OffsetCommitKey", version, group="grp", topic="orders", partition=7)
    key = cr.OffsetCommitKey("grp", "orders", 7, version=version)
    assert cr.encode_key(key) == want
    assert cr.decode(want, None) == (key, None)


def test_group_metadata_key():
    want = oracle_encode("GroupMetadataKey", 2, group="grp-é")
    assert cr.encode_key(cr.GroupMetadataKey("grp-é")) == want
    assert cr.decode(want, None) == (cr.GroupMetadataKey("grp-é"), None)


@pytest.mark.parametrize("version", range(5))
def test_offset_commit_value_versions(version):
    fields = dict(offset=123456789012, metadata="meta", commit_timestamp=1_700_000_000_000)
    if version >= 3:
        fields["leader_epoch"] = 5
    if version == 1:
        fields["expire_timestamp"] = 1_800_000_000_000
    want = oracle_encode("OffsetCommitValue", version, **fields)
    value = cr.OffsetCommitValue(version=version, **fields)
    assert cr.encode_value(value) == want
    assert cr.decode(cr.encode_key(cr.OffsetCommitKey("g", "t", 0)), want)[1] == value


@pytest.mark.parametrize("version", range(5))
def test_group_metadata_value_versions(version):
    members = [dict(m) for m in MEMBERS]
    for m in members:
        if version < 3:
            m["group_instance_id"] = None
        if version < 1:
            m["rebalance_timeout"] = -1
    fields = dict(protocol_type="consumer", generation=12, protocol="range", leader="m-1",
                  current_state_timestamp=1_700_000_000_000 if version >= 2 else -1)
    want = oracle_encode("GroupMetadataValue", version, members=[dict(m) for m in members], **fields)
    value = cr.GroupMetadataValue(version=version, members=tuple(cr.MemberMetadata(**m) for m in members), **fields)
    assert cr.encode_value(value) == want
    assert cr.decode(cr.encode_key(cr.GroupMetadataKey("g")), want)[1] == value


def test_nullable_fields_and_empty_group():
    v = cr.GroupMetadataValue(protocol_type="consumer", generation=3, protocol=None, leader=None, members=(),
                              current_state_timestamp=5, version=3)
    raw = cr.encode_value(v)
    assert raw == oracle_encode("GroupMetadataValue", 3, protocol_type="consumer", generation=3, protocol=None,
                                leader=None, current_state_timestamp=5, members=[])
    assert cr.decode(cr.encode_key(cr.GroupMetadataKey("g")), raw)[1] == v


def test_what_kafka_writes_today_byte_for_byte():
    # key v1: version, group, topic, partition
    assert cr.encode_key(cr.OffsetCommitKey("g", "t", 3)) == b"\x00\x01" + b"\x00\x01g" + b"\x00\x01t" + b"\x00\x00\x00\x03"
    # value v3: version, offset, leaderEpoch, metadata, commitTimestamp
    assert cr.encode_value(cr.OffsetCommitValue(offset=9, metadata="", commit_timestamp=2, leader_epoch=-1)) == \
        b"\x00\x03" + struct.pack(">qi", 9, -1) + b"\x00\x00" + struct.pack(">q", 2)


def test_tombstones_and_kip848_record_types():
    k, v = cr.decode(cr.encode_key(cr.GroupMetadataKey("g")), None)
    assert k == cr.GroupMetadataKey("g") and v is None
    raw = struct.pack(">h", 3) + b"\x00\x01g"  # a KIP-848 ConsumerGroupMetadataKey
    k, v = cr.decode(raw, None)
    assert k == cr.OtherGroupRecord(3, {"groupId": "g"}) and v is None


def test_flexible_value_skips_unknown_tagged_fields():
    raw = cr.encode_value(cr.OffsetCommitValue(offset=1, metadata="m", commit_timestamp=2, leader_epoch=0, version=4))
    assert raw.endswith(b"\x00")
    tagged = raw[:-1] + b"\x01\x07\x02ab"  # one field, tag 7, 2 bytes
    assert cr.decode(cr.encode_key(cr.OffsetCommitKey("g", "t", 0)), tagged)[1].offset == 1


@pytest.mark.parametrize("raw, position", [
    (b"\x00", 0),                     # no room for the record type
    (b"\x00\x01\x00\x05gr", 4),        # the group string runs past the end
    (b"\x00\x01\xff\xfe", 4),          # a negative string length (reported after it)
    (b"\xff\xff", 0),                 # record type -1
])
def test_bad_keys_name_the_byte(raw, position):
    with pytest.raises(CorruptRecordError) as e:
        cr.decode(raw, None)
    assert e.value.position == position
