"""Byte vectors from outside kbatch, with the values they are known to decode to.

These are data (facts about the wire format), transcribed byte for byte; each block names where
it comes from. kafka-format.md §1.7 and §9 list them and what is known about their provenance.
"""

# --------------------------------------------------------------------------------------------
# dpkp/kafka-python, test/record/test_records.py: "real live data from Kafka 11 broker" (magic 2).
# In the source list the third and fourth batches are one concatenated string (a missing comma);
# here they are split at the batch boundary. The concatenation is 299 bytes either way.
KAFKA11_V2_BATCHES = [
    # first batch: value "123"
    b'\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00;\x00\x00\x00\x01\x02\x03'
    b'\x18\xa2p\x00\x00\x00\x00\x00\x00\x00\x00\x01]\xff{\x06<\x00\x00\x01]'
    b'\xff{\x06<\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\x00'
    b'\x00\x00\x01\x12\x00\x00\x00\x01\x06123\x00',
    # second batch: two records, values "" and ""
    b'\x00\x00\x00\x00\x00\x00\x00\x01\x00\x00\x00@\x00\x00\x00\x02\x02\xc8'
    b'\\\xbd#\x00\x00\x00\x00\x00\x01\x00\x00\x01]\xff|\xddl\x00\x00\x01]\xff'
    b'|\xde\x14\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\x00'
    b'\x00\x00\x02\x0c\x00\x00\x00\x01\x00\x00\x0e\x00\xd0\x02\x02\x01\x00'
    b'\x00',
    # third batch: value "123"
    b'\x00\x00\x00\x00\x00\x00\x00\x03\x00\x00\x00;\x00\x00\x00\x02\x02.\x0b'
    b'\x85\xb7\x00\x00\x00\x00\x00\x00\x00\x00\x01]\xff|\xe7\x9d\x00\x00\x01]'
    b'\xff|\xe7\x9d\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff'
    b'\x00\x00\x00\x01\x12\x00\x00\x00\x01\x06123\x00',
    # fourth batch: value "hdr" with header hkey=hval
    b'\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00E\x00\x00\x00\x00\x02\\'
    b'\xd8\xefR\x00\x00\x00\x00\x00\x00\x00\x00\x01e\x85\xb6\xf3\xc1\x00\x00'
    b'\x01e\x85\xb6\xf3\xc1\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff'
    b'\xff\xff\x00\x00\x00\x01&\x00\x00\x00\x01\x06hdr\x02\x08hkey\x08hval',
]

# Expected header fields per batch: (base_offset, size_in_bytes, partition_leader_epoch, crc,
# attributes, last_offset, first_timestamp, max_timestamp, producer_id, producer_epoch,
# base_sequence, record_count). CRCs are the stored values; kafka-format.md §1.1 verified them.
KAFKA11_V2_HEADERS = [
    (0, 71, 1, 51946096, 0, 0, 1503229838908, 1503229838908, -1, -1, -1, 1),
    (1, 76, 2, 3361520931, 0, 2, 1503229959532, 1503229959700, -1, -1, -1, 2),
    (3, 71, 2, 772507063, 0, 3, 1503229962141, 1503229962141, -1, -1, -1, 1),
    (0, 81, 0, 1557720914, 0, 0, 1535546684353, 1535546684353, -1, -1, -1, 1),
]

# Expected records per batch: (offset, timestamp, key, value, headers).
KAFKA11_V2_RECORDS = [
    [(0, 1503229838908, None, b"123", ())],
    [(1, 1503229959532, None, b"", ()), (2, 1503229959700, None, b"", ())],
    [(3, 1503229962141, None, b"123", ())],
    [(0, 1535546684353, None, b"hdr", (("hkey", b"hval"),))],
]

# Same file: magic 1 messages (no provenance comment in the source; aiokafka ships the same
# bytes) and magic 0 messages, "real live data from Kafka 10 broker".
KAFKA10_V1_MESSAGES = [
    # value "123"
    b'\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x19G\x86(\xc2\x01\x00\x00'
    b'\x00\x01^\x18g\xab\xae\xff\xff\xff\xff\x00\x00\x00\x03123',
    # value ""
    b'\x00\x00\x00\x00\x00\x00\x00\x01\x00\x00\x00\x16\xef\x98\xc9 \x01\x00'
    b'\x00\x00\x01^\x18g\xaf\xc0\xff\xff\xff\xff\x00\x00\x00\x00',
    # value ""
    b'\x00\x00\x00\x00\x00\x00\x00\x02\x00\x00\x00\x16_\xaf\xfb^\x01\x00\x00'
    b'\x00\x01^\x18g\xb0r\xff\xff\xff\xff\x00\x00\x00\x00',
    # value "123"
    b'\x00\x00\x00\x00\x00\x00\x00\x03\x00\x00\x00\x19\xa8\x12W \x01\x00\x00'
    b'\x00\x01^\x18g\xb8\x03\xff\xff\xff\xff\x00\x00\x00\x03123',
]
# (offset, size_in_bytes, crc, timestamp, value); keys are null, attributes 0 (CreateTime).
KAFKA10_V1_EXPECTED = [
    (0, 37, 1199974594, 1503648000942, b"123"),
    (1, 34, 4019767584, 1503648001984, b""),
    (2, 34, 1605368670, 1503648002162, b""),
    (3, 37, 2819774240, 1503648004099, b"123"),
]

KAFKA10_V0_MESSAGES = [
    # value "123"
    b'\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x11\xfe\xb0\x1d\xbf\x00'
    b'\x00\xff\xff\xff\xff\x00\x00\x00\x03123',
    # value ""
    b'\x00\x00\x00\x00\x00\x00\x00\x01\x00\x00\x00\x0eyWH\xe0\x00\x00\xff'
    b'\xff\xff\xff\x00\x00\x00\x00',
    # value ""
    b'\x00\x00\x00\x00\x00\x00\x00\x02\x00\x00\x00\x0eyWH\xe0\x00\x00\xff'
    b'\xff\xff\xff\x00\x00\x00\x00',
    # value "123"
    b'\x00\x00\x00\x00\x00\x00\x00\x03\x00\x00\x00\x11\xfe\xb0\x1d\xbf\x00'
    b'\x00\xff\xff\xff\xff\x00\x00\x00\x03123',
]
# (offset, size_in_bytes, crc, value); no timestamps in magic 0. The source asserts the first
# checksum as -22012481 & 0xffffffff.
KAFKA10_V0_EXPECTED = [
    (0, 29, 4272954815, b"123"),
    (1, 26, 2035763424, b""),
    (2, 26, 2035763424, b""),
    (3, 29, 4272954815, b"123"),
]

# Same file: "Single record control batch (abort)". SYNTHETIC, not broker data (kafka-format.md
# §9): its stored CRC does not match, attributes are 0x20 without the transactional bit, pid is
# -1, and the value is not an EndTxnMarker.
KAFKA_PYTHON_CONTROL_BATCH = (
    b'\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00R\x00\x00\x00\x00'
    b'\x02e\x97\xff\xd0\x00\x20\x00\x00\x00\x00\x00\x00\x00\x00\x00'
    b'\x98\x96\x7f\x00\x00\x00\x00\x00\x98\x96'
    b'\x7f\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff'
    b'\x00\x00\x00\x01@\x00\x00\x00\x08\x00\x00\x00\x00,opaque-control-message\x00'
)

# --------------------------------------------------------------------------------------------
# IBM/sarama, record_test.go, recordBatchTestCases(): batches written by sarama (not a broker),
# useful for framing variants: gzip, RAW (unframed) snappy, and an lz4 frame with FLG 0x64
# (content checksum) and BD 0x70 (4 MiB blocks). Every one holds the same record:
# ts = 1479847795000 + 5, key 01 02 03 04, value 05 06 07, one header key 08 09 0A value 0B 0C.
# sarama writes maxTimestamp 0, partition leader epoch 0, producer id/epoch/sequence 0.
def _sarama(length, crc, attributes, records_section):
    return bytes([
        0, 0, 0, 0, 0, 0, 0, 0,              # first offset
        0, 0, 0, length,                     # length
        0, 0, 0, 0,                          # partition leader epoch
        2,                                   # version
        *crc,                                # crc
        0, attributes,                       # attributes
        0, 0, 0, 0,                          # last offset delta
        0, 0, 1, 88, 141, 205, 89, 56,       # first timestamp
        0, 0, 0, 0, 0, 0, 0, 0,              # max timestamp
        0, 0, 0, 0, 0, 0, 0, 0,              # producer id
        0, 0,                                # producer epoch
        0, 0, 0, 0,                          # first sequence
        0, 0, 0, 1,                          # number of records
        *records_section,
    ])


SARAMA_UNCOMPRESSED = _sarama(70, (84, 121, 97, 253), 0, [
    40, 0, 10, 0, 8, 1, 2, 3, 4, 6, 5, 6, 7, 2, 6, 8, 9, 10, 4, 11, 12,
])
SARAMA_GZIP = _sarama(95, (231, 74, 206, 165), 1, [
    31, 139, 8, 0, 0, 9, 110, 136, 0, 255, 0, 21, 0, 234, 255, 40, 0, 10, 0, 8, 1, 2,
    3, 4, 6, 5, 6, 7, 2, 6, 8, 9, 10, 4, 11, 12, 3, 0, 173, 201, 88, 103, 21, 0, 0, 0,
])
SARAMA_SNAPPY_RAW = _sarama(72, (21, 0, 159, 97), 2, [
    21, 80, 40, 0, 10, 0, 8, 1, 2, 3, 4, 6, 5, 6, 7, 2, 6, 8, 9, 10, 4, 11, 12,
])
SARAMA_LZ4 = _sarama(89, (169, 74, 119, 197), 3, [
    4, 34, 77, 24, 100, 112, 185, 21, 0, 0, 128, 40, 0, 10, 0, 8, 1, 2, 3, 4, 6, 5, 6, 7, 2,
    6, 8, 9, 10, 4, 11, 12, 0, 0, 0, 0, 12, 59, 239, 146,
])
SARAMA_RECORD = (0, 1479847795005, b"\x01\x02\x03\x04", b"\x05\x06\x07", (("\x08\t\n", b"\x0b\x0c"),))
# the decompressed records section of each (the uncompressed vector's section)
SARAMA_RECORDS_SECTION = bytes([40, 0, 10, 0, 8, 1, 2, 3, 4, 6, 5, 6, 7, 2, 6, 8, 9, 10, 4, 11, 12])

# --------------------------------------------------------------------------------------------
# apache/kafka, clients/src/test/java/org/apache/kafka/common/utils/ByteUtilsTest.java:
# testVarintSerde / testVarlongSerde (value, minimal encoding) and the invalid overlong inputs.
VARINTS = [
    (0, b"\x00"), (-1, b"\x01"), (1, b"\x02"), (63, b"\x7e"), (-64, b"\x7f"), (64, b"\x80\x01"),
    (-65, b"\x81\x01"), (8191, b"\xfe\x7f"), (-8192, b"\xff\x7f"), (8192, b"\x80\x80\x01"),
    (-8193, b"\x81\x80\x01"), (1048575, b"\xfe\xff\x7f"), (-1048576, b"\xff\xff\x7f"),
    (1048576, b"\x80\x80\x80\x01"), (-1048577, b"\x81\x80\x80\x01"), (134217727, b"\xfe\xff\xff\x7f"),
    (-134217728, b"\xff\xff\xff\x7f"), (134217728, b"\x80\x80\x80\x80\x01"),
    (-134217729, b"\x81\x80\x80\x80\x01"), (2**31 - 1, b"\xfe\xff\xff\xff\x0f"),
    (-(2**31), b"\xff\xff\xff\xff\x0f"),
]
VARLONGS = VARINTS + [
    (17179869183, b"\xfe\xff\xff\xff\x7f"), (-17179869184, b"\xff\xff\xff\xff\x7f"),
    (17179869184, b"\x80\x80\x80\x80\x80\x01"), (-17179869185, b"\x81\x80\x80\x80\x80\x01"),
    (2199023255551, b"\xfe\xff\xff\xff\xff\x7f"), (-2199023255552, b"\xff\xff\xff\xff\xff\x7f"),
    (2199023255552, b"\x80\x80\x80\x80\x80\x80\x01"), (-2199023255553, b"\x81\x80\x80\x80\x80\x80\x01"),
    (281474976710655, b"\xfe\xff\xff\xff\xff\xff\x7f"), (-281474976710656, b"\xff\xff\xff\xff\xff\xff\x7f"),
    (281474976710656, b"\x80\x80\x80\x80\x80\x80\x80\x01"),
    (-281474976710657, b"\x81\x80\x80\x80\x80\x80\x80\x01"),
    (36028797018963967, b"\xfe\xff\xff\xff\xff\xff\xff\x7f"),
    (-36028797018963968, b"\xff\xff\xff\xff\xff\xff\xff\x7f"),
    (36028797018963968, b"\x80\x80\x80\x80\x80\x80\x80\x80\x01"),
    (-36028797018963969, b"\x81\x80\x80\x80\x80\x80\x80\x80\x01"),
    (4611686018427387903, b"\xfe\xff\xff\xff\xff\xff\xff\xff\x7f"),
    (-4611686018427387904, b"\xff\xff\xff\xff\xff\xff\xff\xff\x7f"),
    (4611686018427387904, b"\x80\x80\x80\x80\x80\x80\x80\x80\x80\x01"),
    (-4611686018427387905, b"\x81\x80\x80\x80\x80\x80\x80\x80\x80\x01"),
    (2**63 - 1, b"\xfe\xff\xff\xff\xff\xff\xff\xff\xff\x01"),
    (-(2**63), b"\xff\xff\xff\xff\xff\xff\xff\xff\xff\x01"),
]
INVALID_VARINT = b"\xff\xff\xff\xff\xff\x01"                      # 5th byte has its MSB set
INVALID_VARLONG = b"\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\x01"  # 10th byte has its MSB set

# --------------------------------------------------------------------------------------------
# kafka-format.md §1.6 [verified]: Kafka's lz4 frame header (FLG 0x60, BD 0x40, HC 0x82) and the
# broken magic-0 header (HC computed over the magic bytes too) that strict decoders report as
# "invalid header checksum: got 1a; expected 82" (IBM/sarama#1205).
LZ4_KAFKA_HEADER = bytes.fromhex("04224d18604082")
LZ4_KAFKA_HEADER_MAGIC0 = bytes.fromhex("04224d1860401a")
XERIAL_SNAPPY_HEADER = b"\x82SNAPPY\x00" + b"\x00\x00\x00\x01" + b"\x00\x00\x00\x01"
