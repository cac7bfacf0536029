"""LogValidator (KIP-32 / KIP-228 / KIP-937): every check, every boundary, offset assignment,
LogAppendTime stamping, conversions, the KIP-228 producer and consumer tables, and a property test
against a direct transcription of KIP-937's pseudocode.

Every test takes the `backend` fixture, so it runs on the Cython core and on the pure twin.
"""
import logging
import struct
import zlib

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import kbatch
from kbatch import _wire as W
from kbatch.errors import (CrcMismatchError, InvalidOffsetError, InvalidRecordError, InvalidTimestampError,
                           RecordTooLargeError, TruncatedDataError, UnsupportedForMessageFormatError)
from kbatch.log.validator import (INVALID_TIMESTAMP_MESSAGE, AppendInfo, LogValidator, RecordError,
                             TimestampCheck, ValidationResult)

NOW = 1_700_000_000_000
MAX = W.INT64_MAX
MIN = W.INT64_MIN
HOUR = 3_600_000
CT = kbatch.TimestampType.CREATE_TIME
LAT = kbatch.TimestampType.LOG_APPEND_TIME
HYP = settings(suppress_health_check=[HealthCheck.function_scoped_fixture], deadline=None)


def build(timestamps, *, keys=None, extended=False, **kw):
    """One batch of records with these timestamps (None = no timestamp); Kafka bytes unless extended."""
    b = kbatch.BatchBuilder(timestamp_extended=extended, **kw)
    for i, ts in enumerate(timestamps):
        key = b"k%d" % i if keys is None else keys[i]
        b.append(ts, key, b"value-%d" % i)
    return b.build()


def one(data):
    (batch,) = list(kbatch.iter_batches(data))
    return batch


def raw_timestamps(batch):
    """The int64 each record stores, "no timestamp" as the batch's own sentinel."""
    return [batch.no_timestamp if r.timestamp is None else r.timestamp for r in batch]


def old_consumer_reads(batch):
    """A pre-KIP-228 consumer: ignores bit 7, -1 means no timestamp, anything else is an instant."""
    return [None if t == -1 else t for t in raw_timestamps(batch)]


def new_consumer_reads(batch):
    return [r.timestamp for r in batch]


def patch(data, offset, fmt, value, fix_crc=True):
    buf = bytearray(data)
    struct.pack_into(fmt, buf, offset, value)
    if fix_crc:
        struct.pack_into(">I", buf, W.CRC_OFFSET, kbatch.crc32c(bytes(buf[W.ATTRIBUTES_OFFSET:])))
    return bytes(buf)


def kafka_rejects(ts, now, before, after):
    """KIP-937's rule transcribed with Java's wrapping long arithmetic (what Kafka computes)."""
    def wrap(v):
        v &= (1 << 64) - 1
        return v - (1 << 64) if v >> 63 else v
    diff = wrap(now - ts)
    return diff > before or wrap(-diff) > after


def exact_rejects(ts, now, before, after):
    """The same pseudocode in exact integer arithmetic (kbatch, DESIGN.md decision 4)."""
    diff = now - ts
    return diff > before or -diff > after


# ------------------------------------------------------------------------------------ kernel facade
def test_check_timestamps_counts_and_bounds(backend):
    col = np.array([NOW, NOW - 11, NOW + 11, -1, NOW - 10, NOW + 10], dtype=np.int64)
    r = kbatch.check_timestamps(col, NOW, 10, 10)
    assert isinstance(r, TimestampCheck)
    assert (r.first_bad_index, r.too_old, r.too_new) == (1, 1, 1)
    assert (r.lower_bound, r.upper_bound) == (NOW - 10, NOW + 10)
    assert not r.ok and r.bad == 2
    assert kbatch.check_timestamps(col[[0, 3, 4, 5]], NOW, 10, 10).ok


def test_check_timestamps_inputs(backend):
    assert kbatch.check_timestamps([NOW, NOW + 1], NOW, 0, 0).first_bad_index == 1
    assert kbatch.check_timestamps(np.array([5, 6], dtype=np.int32), 5, 0, 0).too_new == 1
    arrow = pa.array([NOW, None, NOW - 100], type=pa.int64())
    assert kbatch.check_timestamps(arrow, NOW, 50, 0) == (2, 1, 0, NOW - 50, NOW)
    # no_timestamp=None checks every value; the extended sentinel skips Long.MIN_VALUE only
    assert kbatch.check_timestamps([-1], NOW, 0, 0, no_timestamp=None).too_old == 1
    assert kbatch.check_timestamps([MIN, -1], NOW, 0, 0, no_timestamp=MIN) == (1, 1, 0, NOW, NOW)
    with pytest.raises(ValueError):
        kbatch.check_timestamps([1], NOW, -1, 0)
    with pytest.raises(ValueError):
        kbatch.check_timestamps(np.zeros((2, 2), dtype=np.int64), NOW)


def test_check_timestamps_saturates_instead_of_wrapping(backend):
    # now + MAX and now - MAX do not fit: the bounds saturate, nothing wraps
    r = kbatch.check_timestamps([MAX, MIN + 1], NOW, MAX, MAX, no_timestamp=None)
    assert r.upper_bound == MAX and r.lower_bound == NOW - MAX
    assert (r.too_old, r.too_new) == (1, 0)  # MIN + 1 is more than Long.MAX_VALUE ms before now


@HYP
@given(ts=st.lists(st.integers(MIN, MAX), max_size=40), now=st.integers(MIN, MAX),
       before=st.sampled_from([0, 1, HOUR, MAX]) | st.integers(0, MAX),
       after=st.sampled_from([0, 1, HOUR, MAX]) | st.integers(0, MAX))
def test_check_timestamps_matches_exact_pseudocode(backend, ts, now, before, after):
    bad = [i for i, t in enumerate(ts) if t != -1 and exact_rejects(t, now, before, after)]
    r = kbatch.check_timestamps(np.array(ts, dtype=np.int64), now, before, after)
    assert r.first_bad_index == (bad[0] if bad else -1)
    assert r.bad == len(bad)
    assert r.too_old == sum(1 for i in bad if now - ts[i] > before)


# ------------------------------------------------------------------------------------ the range rule
@pytest.mark.parametrize("ts,ok", [
    (NOW - 1000, True), (NOW - 1001, False),      # exactly at lo / one past
    (NOW + 500, True), (NOW + 501, False),        # exactly at hi / one past
    (NOW, True), (-1, True),                       # -1: "no timestamp", never range-checked
    (MIN, False), (MAX, False), (0, False),
])
def test_boundaries(backend, ts, ok):
    v = LogValidator(before_max_ms=1000, after_max_ms=500)
    data = build([ts])
    if ok:
        assert v.validate(data, NOW).record_count == 1
    else:
        with pytest.raises(InvalidTimestampError) as ei:
            v.validate(data, NOW)
        assert ei.value.error_code == 32
        assert ei.value.record_errors == [RecordError(0, 0, 0, f"Timestamp {ts} of message with offset 0 is out of "
                                                               f"range. The timestamp should be within "
                                                               f"[{NOW - 1000}, {NOW + 500}]")]


def test_defaults_accept_long_max_and_ancient_negative(backend):
    v = LogValidator()
    assert (v.before_max_ms, v.after_max_ms) == (MAX, MAX)
    r = v.validate(build([MAX, -10**15, NOW]), NOW)
    assert r.max_timestamp == MAX and r.offset_of_max_timestamp == 0


def test_every_record_is_checked_not_the_batch_max(backend):
    v = LogValidator(before_max_ms=HOUR, after_max_ms=HOUR)
    data = build([NOW - 2 * HOUR, NOW, NOW + 2 * HOUR, NOW - 5])
    # the header claims an in-range max, which is not what the rule looks at
    data = patch(data, W.MAX_TIMESTAMP_OFFSET, ">q", NOW)
    with pytest.raises(InvalidTimestampError) as ei:
        v.validate(data, NOW)
    e = ei.value
    assert e.reason == INVALID_TIMESTAMP_MESSAGE
    assert [(x.batch_index, x.record_index, x.offset) for x in e.record_errors] == [(0, 0, 0), (0, 2, 2)]
    assert e.record_errors[0].message == (f"Timestamp {NOW - 2 * HOUR} of message with offset 0 is out of range. "
                                          f"The timestamp should be within [{NOW - HOUR}, {NOW + HOUR}]")
    assert e.position == 0 and e.base_offset == 0
    assert "expected timestamps within" in str(e) and "found 2 invalid of 4 records" in str(e)


def test_garbage_header_max_is_ignored_and_rewritten(backend):
    data = patch(build([NOW - 5, NOW - 1, NOW - 3]), W.MAX_TIMESTAMP_OFFSET, ">q", NOW + 10 * HOUR)
    v = LogValidator(before_max_ms=HOUR, after_max_ms=HOUR)
    assert v.validate(data, NOW).max_timestamp == NOW - 1
    out, info = v.validate_and_assign(data, 0, NOW)
    b = one(out)
    assert b.max_timestamp == NOW - 1 and b.is_valid()
    assert (info.max_timestamp, info.offset_of_max_timestamp) == (NOW - 1, 1)


def test_kafka_wrapping_would_call_an_ancient_record_future(backend):
    """DESIGN.md decision 4: the one place kbatch knowingly differs from Kafka."""
    ancient = MIN + 1000
    before, after = MAX, HOUR  # Kafka 4.0's defaults
    assert kafka_rejects(ancient, NOW, before, after)
    # Kafka's reason: wrapped now - ts is negative, so -diff > after: "in the future"
    wrapped = (NOW - ancient) - (1 << 64)
    assert wrapped < 0 and -wrapped > after
    # kbatch: exact arithmetic, the record is too OLD and never too new
    r = kbatch.check_timestamps([ancient], NOW, before, after)
    assert (r.too_old, r.too_new) == (1, 0)
    # the printed bounds are saturated, not wrapped: now + MAX would wrap to a negative number
    v = LogValidator(before_max_ms=before, after_max_ms=MAX)
    with pytest.raises(InvalidTimestampError) as ei:
        v.validate(build([ancient]), NOW)
    assert ei.value.record_errors[0].message.endswith(f"[{NOW - MAX}, {MAX}]")
    assert not kafka_rejects(ancient, NOW, before, MAX)  # Kafka accepts it under 3.x defaults


def test_difference_max_ms_is_used_when_the_new_configs_are_default(backend):
    v = LogValidator(difference_max_ms=100)
    assert (v.before_max_ms, v.after_max_ms) == (100, 100)
    with pytest.raises(InvalidTimestampError):
        v.validate(build([NOW + 101]), NOW)
    v = LogValidator(before_max_ms=10, difference_max_ms=100)
    assert (v.before_max_ms, v.after_max_ms) == (10, 100)
    assert v.validate(build([NOW + 100, NOW - 10]), NOW).record_count == 2
    with pytest.raises(ValueError):
        LogValidator(after_max_ms=-1)


# ------------------------------------------------------------------------------------ KIP-228 -1 / MIN
def test_minus_one_skipped_only_without_the_extended_bit(backend):
    v = LogValidator(before_max_ms=HOUR, after_max_ms=HOUR)
    r = v.validate(build([NOW, None]), NOW)  # -1 on the wire
    assert (r.no_timestamp_count, r.max_timestamp) == (1, NOW)
    ext = build([NOW, -1], extended=True)  # -1 is the real instant 1969-12-31T23:59:59.999Z
    with pytest.raises(InvalidTimestampError) as ei:
        v.validate(ext, NOW)
    assert [x.record_index for x in ei.value.record_errors] == [1]
    r = v.validate(build([NOW, None], extended=True), NOW)  # Long.MIN_VALUE: no timestamp, skipped
    assert r.no_timestamp_count == 1
    # a non-extended batch's Long.MIN_VALUE is a real (ancient) instant and is checked
    with pytest.raises(InvalidTimestampError):
        v.validate(build([MIN]), NOW)


def test_all_records_without_timestamp(backend):
    r = LogValidator(before_max_ms=0, after_max_ms=0).validate(build([None, None]), NOW)
    assert (r.max_timestamp, r.offset_of_max_timestamp, r.no_timestamp_count) == (None, None, 2)
    _out, info = LogValidator().validate_and_assign(build([None, None]), 5, NOW)
    assert (info.max_timestamp, info.offset_of_max_timestamp) == (-1, -1)


def _kip228_records(producer):
    # what the application hands the producer: now, "no timestamp", a negative instant, and
    # (new producers only) the instant -1 that old ones cannot express
    return [NOW, None, -5000] if producer == "old" else [NOW, None, -5000, -1]


@pytest.mark.parametrize("producer,broker,stored_extended,stored_raw,rebuilt", [
    ("old", "old", False, [NOW, -1, -5000], False),
    ("old", "new", True, [NOW, MIN, -5000], True),
    ("new", "old", True, [NOW, MIN, -5000, -1], False),
    ("new", "new", True, [NOW, MIN, -5000, -1], False),
])
def test_kip228_producer_table(backend, producer, broker, stored_extended, stored_raw, rebuilt):
    data = build(_kip228_records(producer), extended=producer == "new")
    v = LogValidator(timestamp_extended=broker == "new")
    out, info = v.validate_and_assign(data, 0, NOW)
    b = one(out)
    assert b.timestamp_extended is stored_extended
    assert raw_timestamps(b) == stored_raw
    assert info.rebuilt is rebuilt
    assert b.is_valid()
    # extended output tracks the max from Long.MIN_VALUE (DESIGN.md decision 5)
    assert info.max_timestamp == NOW


@pytest.mark.parametrize("stored,consumer,reads", [
    ("old", "old", [NOW, None, -5000]),
    ("old", "new", [NOW, None, -5000]),
    ("new", "new", [NOW, None, -5000, -1]),
    # the cost of the opt-in format for a pre-KIP-228 reader: Long.MIN_VALUE looks like an
    # instant and the real -1 looks like "no timestamp"
    ("new", "old", [NOW, MIN, -5000, None]),
])
def test_kip228_consumer_table(backend, stored, consumer, reads):
    data = build(_kip228_records(stored), extended=stored == "new")
    out, _info = LogValidator(timestamp_extended=stored == "new").validate_and_assign(data, 0, NOW)
    b = one(out)
    assert (new_consumer_reads(b) if consumer == "new" else old_consumer_reads(b)) == reads


def test_new_broker_sets_the_bit_in_place_when_no_record_lacks_a_timestamp(backend):
    data = build([NOW, -5])
    out, info = LogValidator(timestamp_extended=True).validate_and_assign(data, 0, NOW)
    assert not info.rebuilt
    assert out[W.RECORDS_OFFSET:] == data[W.RECORDS_OFFSET:]
    assert one(out).timestamp_extended and one(out).is_valid()


def test_new_broker_up_converts_legacy_no_timestamp_to_long_min(backend):
    v0 = kbatch.build_batch([(None, b"k", b"v")], magic=0)
    old, _ = LogValidator().validate_and_assign(v0, 0, NOW)
    new, _ = LogValidator(timestamp_extended=True).validate_and_assign(v0, 0, NOW)
    assert raw_timestamps(one(old)) == [-1] and not one(old).timestamp_extended
    assert raw_timestamps(one(new)) == [MIN] and one(new).timestamp_extended
    assert new_consumer_reads(one(old)) == new_consumer_reads(one(new)) == [None]


# ------------------------------------------------------------------------------------ LogAppendTime
def test_producer_log_append_time_rejected_on_a_log_append_time_topic(backend):
    data = build([NOW, NOW], timestamp_type=LAT, log_append_time=NOW)
    with pytest.raises(InvalidTimestampError) as ei:
        LogValidator(LAT).validate(data, NOW)
    assert [x.record_index for x in ei.value.record_errors] == [0, 1]
    assert ei.value.record_errors[0].message == (
        f"Invalid timestamp type in message DefaultRecord(offset=0, timestamp={NOW}, key=2 bytes, value=7 bytes). "
        "Producer should not set timestamp type to LogAppendTime.")


def test_producer_log_append_time_on_a_create_time_topic(backend):
    # Kafka's rule: the record's timestamp (the batch max) is range-checked; only a -1 one is
    # rejected for its type
    v = LogValidator(before_max_ms=HOUR, after_max_ms=HOUR)
    assert v.validate(build([NOW], timestamp_type=LAT, log_append_time=NOW), NOW).record_count == 1
    with pytest.raises(InvalidTimestampError) as ei:
        v.validate(build([NOW], timestamp_type=LAT, log_append_time=NOW + 2 * HOUR), NOW)
    assert "out of range" in ei.value.record_errors[0].message
    with pytest.raises(InvalidTimestampError) as ei:
        v.validate(build([NOW], timestamp_type=LAT, log_append_time=-1), NOW)
    assert "Producer should not set timestamp type to LogAppendTime" in ei.value.record_errors[0].message


def test_log_append_time_topic_skips_the_range_and_stamps_without_recompressing(backend):
    for codec in (kbatch.Compression.NONE, kbatch.Compression.LZ4, kbatch.Compression.ZSTD):
        data = build([-10**15, MAX, NOW], compression=codec)
        v = LogValidator(LAT, before_max_ms=0, after_max_ms=0)
        out, info = v.validate_and_assign(data, 42, NOW + 7, partition_leader_epoch=3)
        b = one(out)
        assert b.timestamp_type == LAT and b.max_timestamp == NOW + 7 and b.is_valid()
        assert [r.timestamp for r in b] == [NOW + 7] * 3
        assert out[W.RECORDS_OFFSET:] == data[W.RECORDS_OFFSET:]  # records bytes untouched
        assert b.first_timestamp == -10**15  # create times kept (KAFKA-5353)
        assert (b.base_offset, b.partition_leader_epoch) == (42, 3)
        assert info == AppendInfo(42, 44, NOW + 7, 42, NOW + 7, False, 3, 1, len(data), len(out))


def test_monotonic_log_append_time(backend):
    data = build([NOW])
    v = LogValidator(LAT, monotonic_log_append_time=True)
    _, first = v.validate_and_assign(data, 0, NOW)
    _, second = v.validate_and_assign(data, 1, NOW - 500)  # the clock stepped back
    assert (first.log_append_time, second.log_append_time) == (NOW, NOW)
    _, third = v.validate_and_assign(data, 2, NOW + 1)
    assert third.log_append_time == NOW + 1
    plain = LogValidator(LAT)
    plain.validate_and_assign(data, 0, NOW)
    assert plain.validate_and_assign(data, 1, NOW - 500)[1].log_append_time == NOW - 500


def test_legacy_v1_log_append_time_in_place(backend):
    msgs = kbatch.build_batch([(NOW - 3, b"a", b"1"), (NOW - 2, b"b", b"2")], magic=1)
    out, info = LogValidator(LAT, magic=1).validate_and_assign(msgs, 10, NOW)
    batches = list(kbatch.iter_batches(out))  # verifies each message's CRC-32
    assert [b.offset for b in batches] == [10, 11]
    assert all(b.timestamp_type == LAT and b.timestamp == NOW for b in batches)
    assert not info.rebuilt and len(out) == len(msgs)
    # compressed wrapper: only the wrapper's timestamp, attributes and CRC change
    wrapped = kbatch.build_batch([(NOW - 3, b"a", b"1"), (NOW - 2, b"b", b"2")], magic=1,
                                 compression=kbatch.Compression.GZIP)
    out, info = LogValidator(LAT, magic=1).validate_and_assign(wrapped, 10, NOW)
    (w,) = list(kbatch.iter_batches(out))
    assert (w.offset, w.timestamp, w.timestamp_type) == (11, NOW, LAT)
    assert [(r.offset, r.timestamp) for r in w] == [(10, NOW), (11, NOW)]
    assert out[26:] == wrapped[26:]  # key and compressed value unchanged
    assert struct.unpack_from(">I", out, 12)[0] == zlib.crc32(out[16:])
    assert (info.max_timestamp, info.offset_of_max_timestamp, info.rebuilt) == (NOW, 10, False)


# ------------------------------------------------------------------------------------ in place
def test_in_place_rewrites_base_offset_and_epoch_without_touching_the_crc(backend):
    data = build([NOW - 2, NOW - 1])
    out, info = LogValidator().validate_and_assign(data, 1000, NOW, partition_leader_epoch=9)
    assert out[W.MAGIC_OFFSET:] == data[W.MAGIC_OFFSET:]  # CRC and everything it covers
    b = one(out)
    assert (b.base_offset, b.partition_leader_epoch, b.crc) == (1000, 9, one(data).crc)
    assert [r.offset for r in b] == [1000, 1001]
    assert info == AppendInfo(1000, 1001, NOW - 1, 1001, None, False, 2, 1, len(data), len(data))
    out2, _ = LogValidator().validate_and_assign(data, 5, NOW)
    assert one(out2).partition_leader_epoch == -1  # None leaves the epoch as sent


def test_offset_of_max_is_the_first_record_holding_it(backend):
    _out, info = LogValidator().validate_and_assign(build([NOW - 9, NOW, NOW, NOW - 1]), 50, NOW)
    assert (info.max_timestamp, info.offset_of_max_timestamp) == (NOW, 51)


def test_in_place_keeps_reserved_attribute_bits_when_the_max_changes(backend):
    data = patch(build([NOW - 5]), W.ATTRIBUTES_OFFSET, ">h", 0x0100)  # bit 8, unused by Kafka
    data = patch(data, W.MAX_TIMESTAMP_OFFSET, ">q", 0)
    out, _ = LogValidator().validate_and_assign(data, 0, NOW)
    assert struct.unpack_from(">h", out, W.ATTRIBUTES_OFFSET)[0] == 0x0100
    assert one(out).max_timestamp == NOW - 5 and one(out).is_valid()


def test_many_legacy_messages_from_one_client_get_consecutive_offsets(backend):
    msgs = kbatch.build_batch([(NOW, b"a", b"1"), (-7, b"b", b"2"), (NOW + 1, b"c", b"3")], magic=1)
    out, info = LogValidator(magic=1).validate_and_assign(msgs, 100, NOW)
    assert [(b.offset, b.timestamp) for b in kbatch.iter_batches(out)] == [(100, NOW), (101, -7), (102, NOW + 1)]
    assert (info.first_offset, info.last_offset, info.max_timestamp, info.offset_of_max_timestamp) == (
        100, 102, NOW + 1, 102)
    assert not info.rebuilt


# ------------------------------------------------------------------------------------ conversions
def test_up_conversion_v0_v1_v2_fills_no_timestamp(backend):
    v0 = kbatch.build_batch([(None, b"k", b"v"), (None, b"k2", None)], magic=0)
    v1, info1 = LogValidator(magic=1).validate_and_assign(v0, 0, NOW)
    assert info1.rebuilt and all(b.magic == 1 for b in kbatch.iter_batches(v1))
    assert [b.timestamp for b in kbatch.iter_batches(v1)] == [-1, -1]
    v2, info2 = LogValidator().validate_and_assign(v1, 0, NOW, partition_leader_epoch=1)
    b = one(v2)
    assert raw_timestamps(b) == [-1, -1] and [r.is_tombstone for r in b] == [False, True]
    assert (info2.max_timestamp, info2.offset_of_max_timestamp, info2.record_count) == (-1, -1, 2)


def test_down_conversion_keeps_what_fits_and_refuses_headers(backend):
    b = kbatch.BatchBuilder(timestamp_extended=False)
    b.append(NOW, b"k", b"v", headers=[("h", b"x")])
    b.append(NOW + 1, b"k", b"gone", tombstone=True)  # KIP-87 tombstone with a value
    data = b.build()
    with pytest.raises(UnsupportedForMessageFormatError) as ei:
        LogValidator(magic=1).validate_and_assign(data, 0, NOW)
    assert ei.value.error_code == 43 and "headers" in str(ei.value)
    out, info = LogValidator(magic=1, allow_drop_headers=True).validate_and_assign(data, 0, NOW)
    msgs = list(kbatch.iter_batches(out))
    assert [(m.magic, m.timestamp) for m in msgs] == [(1, NOW), (1, NOW + 1)]
    assert [r.value for m in msgs for r in m][1] is None  # a legacy tombstone is a null value
    out0, info0 = LogValidator(magic=0, allow_drop_headers=True).validate_and_assign(data, 0, NOW)
    assert [m.timestamp for m in kbatch.iter_batches(out0)] == [-1, -1]
    assert (info0.max_timestamp, info0.offset_of_max_timestamp) == (-1, -1)


def test_down_conversion_refuses_the_instant_minus_one(backend):
    with pytest.raises(UnsupportedForMessageFormatError):
        LogValidator(magic=1).validate_and_assign(build([-1], extended=True), 0, NOW)


def test_recompression_to_the_topic_codec(backend):
    data = build([NOW - 1, NOW], compression=kbatch.Compression.GZIP)
    v = LogValidator(compression=kbatch.Compression.ZSTD)
    out, info = v.validate_and_assign(data, 7, NOW, partition_leader_epoch=2)
    b = one(out)
    assert b.compression == kbatch.Compression.ZSTD and info.rebuilt
    assert [(r.offset, r.timestamp, bytes(r.key)) for r in b] == [(7, NOW - 1, b"k0"), (8, NOW, b"k1")]
    assert b.partition_leader_epoch == 2
    # compression.type=producer keeps the codec and the bytes
    out, info = LogValidator().validate_and_assign(data, 7, NOW)
    assert not info.rebuilt and out[W.RECORDS_OFFSET:] == data[W.RECORDS_OFFSET:]


def test_legacy_wrapper_with_wrong_inner_offsets_is_rebuilt(backend):
    b = kbatch.BatchBuilder(magic=1, compression=kbatch.Compression.GZIP)
    for off in (0, 2, 4):
        b.append(NOW, b"k", b"v", offset=off)
    out, info = LogValidator(magic=1).validate_and_assign(b.build(), 20, NOW)
    assert info.rebuilt
    assert [r.offset for r in one(out)] == [20, 21, 22]
    good = kbatch.build_batch([(NOW, b"k", b"v")] * 3, magic=1, compression=kbatch.Compression.GZIP)
    assert not LogValidator(magic=1).validate_and_assign(good, 20, NOW)[1].rebuilt
    # magic 0 wrappers always are (their inner offsets are absolute)
    v0 = kbatch.build_batch([(None, b"k", b"v")] * 2, magic=0, compression=kbatch.Compression.GZIP)
    assert LogValidator(magic=0).validate_and_assign(v0, 3, NOW)[1].rebuilt


def test_output_larger_than_max_message_bytes_after_conversion(backend):
    b = kbatch.BatchBuilder(compression=kbatch.Compression.GZIP, timestamp_extended=False)
    b.append(NOW, b"k", b"\0" * 5000)
    data = b.build()
    assert len(data) < 1000
    with pytest.raises(RecordTooLargeError) as ei:
        LogValidator(compression=kbatch.Compression.NONE, max_message_bytes=1000).validate_and_assign(data, 0, NOW)
    assert ei.value.error_code == 10


# ------------------------------------------------------------------------------------ other checks
def test_error_codes_of_batch_checks(backend):
    good = build([NOW])
    bad_crc = bytearray(good)
    bad_crc[-1] ^= 1
    cases = [
        (bytes(bad_crc), LogValidator(), CrcMismatchError, 2),
        (good, LogValidator(max_message_bytes=len(good) - 1), RecordTooLargeError, 10),
        (build([NOW], producer_id=5, producer_epoch=0, base_sequence=0), LogValidator(magic=1),
         UnsupportedForMessageFormatError, 43),
        (build([NOW], producer_id=5, producer_epoch=0, base_sequence=0, is_transactional=True),
         LogValidator(magic=0), UnsupportedForMessageFormatError, 43),
        (build([NOW], producer_id=5, producer_epoch=0), LogValidator(), InvalidRecordError, 87),
        (build([NOW], base_offset=3), LogValidator(), InvalidRecordError, 87),
        (patch(good, W.RECORDS_COUNT_OFFSET, ">i", 2), LogValidator(), InvalidRecordError, 87),
        (patch(good, W.LAST_OFFSET_DELTA_OFFSET, ">i", -1), LogValidator(), InvalidRecordError, 87),
        (kbatch.build_end_txn_marker(producer_id=1, producer_epoch=0, commit=True, coordinator_epoch=0),
         LogValidator(), InvalidRecordError, 87),
        (good + good, LogValidator(), InvalidRecordError, 87),
        (b"", LogValidator(), InvalidRecordError, 87),
        (good[:-3], LogValidator(), TruncatedDataError, 2),
    ]
    for data, v, cls, code in cases:
        with pytest.raises(cls) as ei:
            v.validate(data, NOW)
        assert ei.value.error_code == code, (cls, str(ei.value))
        assert ei.value.position is not None


def test_batch_errors_name_position_expected_and_found(backend):
    with pytest.raises(InvalidRecordError) as ei:
        LogValidator().validate(build([NOW, NOW]) + build([NOW]), NOW)
    e = ei.value
    assert e.position == len(build([NOW, NOW])) and "expected one batch" in str(e)
    with pytest.raises(InvalidRecordError) as ei:
        LogValidator().validate(patch(build([NOW]), W.RECORDS_COUNT_OFFSET, ">i", 2), NOW)
    assert ei.value.expected == "count 1" and ei.value.found == 2


def test_compacted_topic_needs_keys(backend):
    v = LogValidator(compacted=True, topic_partition="t-0")
    data = build([NOW, NOW], keys=[b"k", None])
    with pytest.raises(InvalidRecordError) as ei:
        v.validate(data, NOW)
    e = ei.value
    assert e.error_code == 87
    msg = "Compacted topic cannot accept message without key in topic partition t-0"
    assert e.record_errors == [RecordError(0, 1, 1, msg)]
    assert e.reason == ("One or more records have been rejected due to 1 record errors in total, and only showing "
                        f"the first three errors at most: [RecordError(batchIndex=1, message='{msg}')]")
    assert LogValidator().validate(data, NOW).record_count == 2


def test_invalid_timestamp_wins_over_invalid_record(backend):
    v = LogValidator(compacted=True, after_max_ms=0)
    with pytest.raises(InvalidTimestampError) as ei:
        v.validate(build([NOW, NOW + 1], keys=[None, b"k"]), NOW)
    assert [x.record_index for x in ei.value.record_errors] == [0, 1]
    # a record without a key is not also timestamp-checked (Kafka's order)
    with pytest.raises(InvalidRecordError) as ei:
        v.validate(build([NOW + 1], keys=[None]), NOW)
    assert not isinstance(ei.value, InvalidTimestampError)


def test_segment_mode_many_batches(backend):
    seg = (build([NOW - 3, NOW - 2], base_offset=0)
           + kbatch.build_batch([(NOW - 1, b"k", b"v")], magic=1, base_offset=2) + build([NOW + 5], base_offset=3))
    r = LogValidator().validate(seg, NOW, from_client=False)
    assert r == ValidationResult(3, 4, 0, NOW + 5, 3, NOW - MAX, MAX, 0, len(seg))
    out, info = LogValidator(magic=2).validate_and_assign(seg, 100, NOW, from_client=False)
    assert [b.magic for b in kbatch.iter_batches(out)] == [2, 2, 2]
    assert [r.offset for b in kbatch.iter_batches(out) for r in b] == [100, 101, 102, 103]
    assert info.batch_count == 3 and info.rebuilt
    repeated = build([NOW], base_offset=5) + build([NOW], base_offset=5)
    with pytest.raises(InvalidOffsetError):
        LogValidator().validate(repeated, NOW, from_client=False)
    # assignment re-numbers them, so there they need not increase
    out, _info = LogValidator().validate_and_assign(repeated, 9, NOW, from_client=False)
    assert [b.base_offset for b in kbatch.iter_batches(out)] == [9, 10]
    # the error names the failing batch and where it starts
    bad = build([NOW], base_offset=0) + build([NOW + 2 * HOUR], base_offset=1)
    with pytest.raises(InvalidTimestampError) as ei:
        LogValidator(after_max_ms=HOUR).validate(bad, NOW, from_client=False)
    assert ei.value.position == len(build([NOW])) and ei.value.record_errors[0].batch_index == 1


# ------------------------------------------------------------------------------------ WARN
def test_one_warning_per_batch_more_than_an_hour_ahead(backend, caplog):
    caplog.set_level(logging.WARNING, logger="kbatch.log.validator")
    v = LogValidator()
    v.validate(build([NOW + HOUR, NOW]), NOW)  # exactly one hour: fine
    assert not caplog.records
    r = v.validate(build([NOW + HOUR + 1, NOW + 2 * HOUR, NOW]), NOW)
    assert r.future_warning_batches == 1
    assert len(caplog.records) == 1
    rec = caplog.records[0]
    assert rec.name == "kbatch.log.validator" and rec.levelno == logging.WARNING
    assert "2 record(s)" in rec.getMessage()
    caplog.clear()
    seg = build([NOW + 2 * HOUR], base_offset=0) + build([NOW + 3 * HOUR], base_offset=1)
    assert v.validate(seg, NOW, from_client=False).future_warning_batches == 2
    assert len(caplog.records) == 2
    caplog.clear()
    LogValidator(LAT).validate_and_assign(build([NOW + 5 * HOUR]), 0, NOW)  # LAT topics: no WARN
    with pytest.raises(InvalidTimestampError):
        LogValidator(after_max_ms=HOUR).validate(build([NOW + 2 * HOUR]), NOW)  # rejected: no WARN
    hdrs = kbatch.BatchBuilder(timestamp_extended=False)
    hdrs.append(NOW + 2 * HOUR, b"k", b"v", headers=[("h", b"")])
    with pytest.raises(UnsupportedForMessageFormatError):  # refused by the conversion: no WARN
        LogValidator(magic=1).validate_and_assign(hdrs.build(), 0, NOW)
    assert not caplog.records
    LogValidator().validate_and_assign(build([NOW + 2 * HOUR]), 0, NOW)
    assert len(caplog.records) == 1


# ------------------------------------------------------------------------------------ property
timestamps = st.one_of(
    st.none(), st.integers(MIN + 1, MAX), st.integers(NOW - 10 * HOUR, NOW + 10 * HOUR),
    st.sampled_from([-1, 0, MIN + 1, MAX, NOW - HOUR, NOW + HOUR]))


@HYP
@given(ts=st.lists(timestamps, min_size=1, max_size=12), extended=st.booleans(),
       now=st.one_of(st.just(NOW), st.integers(MIN, MAX)),
       before=st.one_of(st.sampled_from([0, HOUR, MAX]), st.integers(0, MAX)),
       after=st.one_of(st.sampled_from([0, HOUR, MAX]), st.integers(0, MAX)),
       codec=st.sampled_from([kbatch.Compression.NONE, kbatch.Compression.LZ4]))
def test_validate_matches_kip937_pseudocode(backend, ts, extended, now, before, after, codec):
    no_ts = MIN if extended else -1
    ts = [None if t == no_ts else t for t in ts]  # -1 in a non-extended batch is "no timestamp"
    data = build(ts, extended=extended, compression=codec)
    raw = [no_ts if t is None else t for t in ts]
    bad = [i for i, t in enumerate(raw) if t != no_ts and exact_rejects(t, now, before, after)]
    v = LogValidator(before_max_ms=before, after_max_ms=after)
    if bad:
        with pytest.raises(InvalidTimestampError) as ei:
            v.validate(data, now)
        assert [e.record_index for e in ei.value.record_errors] == bad
        with pytest.raises(InvalidTimestampError):
            v.validate_and_assign(data, 0, now)
    else:
        real = [t for t in ts if t is not None]
        r = v.validate(data, now)
        assert r.max_timestamp == (max(real) if real else None)
        out, info = v.validate_and_assign(data, 10, now)
        b = one(out)
        assert b.is_valid() and [x.timestamp for x in b] == ts
        start = no_ts
        assert info.max_timestamp == max([start] + real)
        if info.offset_of_max_timestamp >= 0:
            assert ts[info.offset_of_max_timestamp - 10] == info.max_timestamp


# ------------------------------------------------------------------------------------ legacy details
def legacy_message(magic, ts, key, value, attrs=0):
    body = struct.pack(">bB", magic, attrs) + (struct.pack(">q", ts) if magic == 1 else b"")
    for blob in (key, value):
        body += struct.pack(">i", -1) if blob is None else struct.pack(">i", len(blob)) + blob
    return struct.pack(">I", zlib.crc32(body)) + body


def legacy_entry(offset, message):
    return struct.pack(">qi", offset, len(message)) + message


def test_inner_message_magic_must_match_the_wrapper(backend):
    inner = legacy_entry(0, legacy_message(1, NOW, b"a", b"1")) + legacy_entry(1, legacy_message(0, 0, b"b", b"2"))
    wrapper = legacy_entry(1, legacy_message(1, NOW, None, kbatch.record.compression.compress(1, inner, 1), attrs=1))
    with pytest.raises(InvalidRecordError) as ei:
        LogValidator(magic=1).validate(wrapper, NOW)
    (err,) = ei.value.record_errors
    assert (err.record_index, err.offset) == (1, 1)
    assert "'s magic does not match outer magic 1" in err.message


def test_producer_log_append_time_on_legacy_messages(backend):
    msg = legacy_entry(0, legacy_message(1, NOW, b"k", b"v", attrs=W.LEGACY_TIMESTAMP_TYPE_MASK))
    with pytest.raises(InvalidTimestampError) as ei:
        LogValidator(LAT, magic=1).validate(msg, NOW)
    assert ei.value.record_errors[0].message.startswith("Invalid timestamp type in message LegacyRecord(magic=1")


def test_log_append_time_topic_up_converting_legacy(backend):
    v1 = kbatch.build_batch([(NOW - 9, b"a", b"1"), (NOW - 8, b"b", b"2")], magic=1)
    out, info = LogValidator(LAT).validate_and_assign(v1, 0, NOW)
    b = one(out)
    assert (b.magic, b.timestamp_type, b.max_timestamp) == (2, LAT, NOW) and info.rebuilt
    assert [r.timestamp for r in b] == [NOW, NOW]
    _out, info0 = LogValidator(LAT, magic=0).validate_and_assign(v1, 0, NOW)
    assert (info0.max_timestamp, info0.offset_of_max_timestamp, info0.log_append_time) == (-1, -1, NOW)


def test_public_names(backend):
    assert kbatch.LogValidator is LogValidator
    assert kbatch.ValidationResult is ValidationResult and kbatch.AppendInfo is AppendInfo
    assert kbatch.check_timestamps([NOW], NOW).ok


# ------------------------------------------------------------------------------------ bad bytes
VALIDATORS = [LogValidator(), LogValidator(LAT), LogValidator(magic=1, allow_drop_headers=True),
              LogValidator(compression=kbatch.Compression.GZIP, timestamp_extended=True),
              LogValidator(compacted=True, before_max_ms=HOUR, after_max_ms=HOUR)]
SAMPLES = [build([NOW, None, -5], extended=True), build([NOW - 1, NOW], compression=kbatch.Compression.LZ4),
           kbatch.build_batch([(NOW, b"a", b"1"), (NOW, b"b", None)], magic=1, compression=kbatch.Compression.GZIP),
           kbatch.build_batch([(None, b"a", b"1")] * 2, magic=0)]


@HYP
@given(sample=st.sampled_from(SAMPLES), flips=st.lists(st.tuples(st.integers(0, 10**6), st.integers(1, 255)),
                                                        min_size=1, max_size=3),
       cut=st.integers(0, 3), which=st.integers(0, len(VALIDATORS) - 1), fix_crc=st.booleans())
def test_corrupted_input_gives_a_kbatch_error_or_a_valid_result(backend, sample, flips, cut, which, fix_crc):
    data = bytearray(sample)
    for pos, x in flips:
        data[pos % len(data)] ^= x
    if fix_crc and data[W.MAGIC_OFFSET] == 2:  # reach the checks behind the CRC
        struct.pack_into(">I", data, W.CRC_OFFSET, kbatch.crc32c(bytes(data[W.ATTRIBUTES_OFFSET:])))
    elif fix_crc and data[W.MAGIC_OFFSET] in (0, 1):
        end = 12 + struct.unpack_from(">i", data, 8)[0]
        if 16 <= end <= len(data) - cut:
            struct.pack_into(">I", data, 12, zlib.crc32(bytes(data[16:end])))
    data = bytes(data[:len(data) - cut])
    v = VALIDATORS[which]
    for call in (lambda: v.validate(data, NOW, from_client=False), lambda: v.validate_and_assign(data, 0, NOW)):
        try:
            call()
        except kbatch.KBatchError as e:
            assert e.error_code is not None or isinstance(e, (InvalidOffsetError,))


def test_producer_log_append_time_batch_accepted_on_a_create_time_topic_is_rebuilt(backend):
    # create times far in the past hide behind an in-range max timestamp: clearing the bit in place
    # would expose them unchecked, so every record gets the validated timestamp instead
    for codec in (kbatch.Compression.NONE, kbatch.Compression.GZIP):
        data = build([10, 20], timestamp_type=LAT, log_append_time=NOW, compression=codec)
        out, info = LogValidator(before_max_ms=HOUR, after_max_ms=HOUR).validate_and_assign(data, 0, NOW)
        b = one(out)
        assert info.rebuilt and b.timestamp_type == CT and b.compression == codec
        assert [r.timestamp for r in b] == [NOW, NOW] and info.max_timestamp == NOW
    wrapped = legacy_entry(0, legacy_message(1, NOW, None, kbatch.record.compression.compress(
        1, legacy_entry(0, legacy_message(1, 10, b"k", b"v")), 1), attrs=1 | W.LEGACY_TIMESTAMP_TYPE_MASK))
    out, info = LogValidator(magic=1, before_max_ms=HOUR).validate_and_assign(wrapped, 0, NOW)
    assert info.rebuilt and [r.timestamp for r in one(out)] == [NOW]


def test_rebuild_keeps_the_epoch_as_sent_unless_given(backend):
    data = build([NOW], compression=kbatch.Compression.GZIP, partition_leader_epoch=4)
    v = LogValidator(compression=kbatch.Compression.NONE)
    assert one(v.validate_and_assign(data, 0, NOW)[0]).partition_leader_epoch == 4
    assert one(v.validate_and_assign(data, 0, NOW, partition_leader_epoch=6)[0]).partition_leader_epoch == 6
