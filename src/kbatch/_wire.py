"""Kafka's wire constants, written once, with Kafka's names.

Sources: DefaultRecordBatch.java, LegacyRecord.java, RecordBatch.java, Records.java,
ControlRecordType.java (see ../shared/docs/kafka-format.md §1-3, 5).
"""
from enum import IntEnum

# --- every format: offset | size | ... | magic at byte 16 (Records.java)
OFFSET_OFFSET = 0
OFFSET_LENGTH = 8
SIZE_OFFSET = OFFSET_OFFSET + OFFSET_LENGTH  # 8
SIZE_LENGTH = 4
LOG_OVERHEAD = SIZE_OFFSET + SIZE_LENGTH  # 12
MAGIC_OFFSET = 16
HEADER_SIZE_UP_TO_MAGIC = MAGIC_OFFSET + 1  # 17

# --- magic 2 (DefaultRecordBatch)
BASE_OFFSET_OFFSET = 0
LENGTH_OFFSET = 8
PARTITION_LEADER_EPOCH_OFFSET = 12
MAGIC_V2_OFFSET = 16
CRC_OFFSET = 17
ATTRIBUTES_OFFSET = 21
LAST_OFFSET_DELTA_OFFSET = 23
BASE_TIMESTAMP_OFFSET = 27
MAX_TIMESTAMP_OFFSET = 35
PRODUCER_ID_OFFSET = 43
PRODUCER_EPOCH_OFFSET = 51
BASE_SEQUENCE_OFFSET = 53
RECORDS_COUNT_OFFSET = 57
RECORDS_OFFSET = 61
RECORD_BATCH_OVERHEAD = RECORDS_OFFSET  # 61
MAX_RECORD_OVERHEAD = 21  # length 5 + attributes 1 + timestamp 10 + offset 5

# batch attributes (int16; Kafka reads only the low byte)
COMPRESSION_CODEC_MASK = 0x07
TIMESTAMP_TYPE_MASK = 0x08
TRANSACTIONAL_FLAG_MASK = 0x10
CONTROL_FLAG_MASK = 0x20
DELETE_HORIZON_FLAG_MASK = 0x40
# kbatch (DESIGN.md decision 1): KIP-228's isTimestampExtended, the first bit Kafka leaves unused.
TIMESTAMP_EXTENDED_FLAG_MASK = 0x80

# record attributes (int8, v2): kbatch (DESIGN.md decision 2): KIP-87's tombstone flag, bit 5.
RECORD_TOMBSTONE_FLAG_MASK = 0x20

# --- magic 0/1 (LegacyRecord): offsets inside the message (after offset|size)
LEGACY_CRC_OFFSET = 0
LEGACY_CRC_LENGTH = 4
LEGACY_MAGIC_OFFSET = 4
LEGACY_ATTRIBUTES_OFFSET = 5
LEGACY_TIMESTAMP_OFFSET = 6
LEGACY_KEY_SIZE_OFFSET_V0 = 6
LEGACY_KEY_SIZE_OFFSET_V1 = 14
RECORD_OVERHEAD_V0 = 14  # crc 4 + magic 1 + attributes 1 + key size 4 + value size 4
RECORD_OVERHEAD_V1 = 22  # + timestamp 8
LEGACY_COMPRESSION_CODEC_MASK = 0x07
LEGACY_TIMESTAMP_TYPE_MASK = 0x08

MAGIC_VALUE_V0 = 0
MAGIC_VALUE_V1 = 1
MAGIC_VALUE_V2 = 2
CURRENT_MAGIC_VALUE = MAGIC_VALUE_V2

# --- sentinels (RecordBatch.java)
NO_TIMESTAMP = -1
NO_TIMESTAMP_EXTENDED = -(2**63)  # KIP-228 "no timestamp" when bit 7 is set
NO_PRODUCER_ID = -1
NO_PRODUCER_EPOCH = -1
NO_SEQUENCE = -1
NO_PARTITION_LEADER_EPOCH = -1

INT32_MAX = 2**31 - 1
INT32_MIN = -(2**31)
INT64_MAX = 2**63 - 1
INT64_MIN = -(2**63)


# --- producer sequences wrap from Int32.MAX to 0 (DefaultRecordBatch's two static helpers)
def increment_sequence(sequence: int, increment: int) -> int:
    """DefaultRecordBatch.incrementSequence: `sequence + increment`, wrapping past Int32.MAX to 0."""
    if sequence > INT32_MAX - increment:
        return increment - (INT32_MAX - sequence) - 1
    return sequence + increment


def decrement_sequence(sequence: int, decrement: int) -> int:
    """DefaultRecordBatch.decrementSequence: `sequence - decrement`, wrapping below 0 to Int32.MAX."""
    if sequence < decrement:
        return INT32_MAX - (decrement - sequence) + 1
    return sequence - decrement

# --- control records (ControlRecordType.java, EndTransactionMarker.java)
CONTROL_KEY_SIZE = 4  # version int16 + type int16
END_TXN_MARKER_VALUE_SIZE = 6  # version int16 + coordinatorEpoch int32

# --- index files (OffsetIndex.java, TimeIndex.java, AbstractIndex.java)
OFFSET_INDEX_ENTRY_SIZE = 8
TIME_INDEX_ENTRY_SIZE = 12
TXN_INDEX_ENTRY_SIZE = 34

# --- defaults (LogConfig)
DEFAULT_MAX_MESSAGE_BYTES = 1048588
DEFAULT_INDEX_INTERVAL_BYTES = 4096
DEFAULT_SEGMENT_INDEX_BYTES = 10485760

# compression levels (KIP-390: compression.gzip.level, compression.lz4.level, compression.zstd.level;
# GzipCompression, Lz4Compression, ZstdCompression): (lowest, highest, default). gzip's default -1 is
# Deflater.DEFAULT_COMPRESSION (zlib's level 6); lz4's default 9 runs lz4-java's fast compressor,
# every other lz4 level its high-compression one at that level (Lz4BlockOutputStream); snappy has none
GZIP_LEVELS = (1, 9, -1)
LZ4_LEVELS = (1, 17, 9)
ZSTD_LEVELS = (-131072, 22, 3)

# the log cleaner's key map (LogCleaner / SkimpyOffsetMap): log.cleaner.dedupe.buffer.size (for one
# cleaner thread), log.cleaner.io.buffer.load.factor, and the bytes of one entry (an MD5-sized key
# digest and an offset)
DEFAULT_DEDUPE_BUFFER_SIZE = 128 * 1024 * 1024
DEFAULT_DEDUPE_LOAD_FACTOR = 0.9
OFFSET_MAP_ENTRY_SIZE = 24

# decompressed bytes allowed per batch unless the caller says otherwise (bomb guard)
DEFAULT_MAX_DECOMPRESSED_BYTES = 256 * 1024 * 1024


class TimestampType(IntEnum):
    """KIP-32 timestamp type. NO_TIMESTAMP_TYPE (-1) exists only for magic 0 data."""

    NO_TIMESTAMP_TYPE = -1
    CREATE_TIME = 0
    LOG_APPEND_TIME = 1


class Compression(IntEnum):
    """Codec ids of the attributes' low three bits (CompressionType.java)."""

    NONE = 0
    GZIP = 1
    SNAPPY = 2
    LZ4 = 3
    ZSTD = 4


class ControlRecordType(IntEnum):
    """Type field of a control record key (ControlRecordType.java); UNKNOWN for anything else."""

    UNKNOWN = -1
    ABORT = 0
    COMMIT = 1
    LEADER_CHANGE = 2
    SNAPSHOT_HEADER = 3
    SNAPSHOT_FOOTER = 4
    KRAFT_VERSION = 5
    KRAFT_VOTERS = 6


class OffsetSpec(IntEnum):
    """Special offset-lookup targets (DESIGN.md decision 3): enum members, never plain integers,
    because every int64 is a valid timestamp under KIP-228. The values are ListOffsets' wire
    numbers, used only where that protocol is read or written."""

    LATEST = -1
    EARLIEST = -2
    MAX_TIMESTAMP = -3

    def __eq__(self, other: object) -> bool:  # an int timestamp target must never compare equal to a member
        return self is other

    def __hash__(self) -> int:
        return hash((OffsetSpec, self.value))
