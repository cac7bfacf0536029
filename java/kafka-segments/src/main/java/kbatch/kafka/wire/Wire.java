package kbatch.kafka.wire;

/**
 * Kafka's wire constants, with Kafka's names (the Java twin of kbatch/_wire.py; sources in
 * ../shared/docs/kafka-format.md sections 1-3 and 5).
 */
public final class Wire {
    private Wire() {}

    // every format: offset | size | ... | magic at byte 16 (Records.java)
    public static final int SIZE_OFFSET = 8;
    public static final int LOG_OVERHEAD = 12;
    public static final int MAGIC_OFFSET = 16;
    public static final int HEADER_SIZE_UP_TO_MAGIC = 17;

    // magic 2 (DefaultRecordBatch)
    public static final int CRC_OFFSET = 17;
    public static final int ATTRIBUTES_OFFSET = 21;
    static final int LAST_OFFSET_DELTA_OFFSET = 23;
    static final int BASE_TIMESTAMP_OFFSET = 27;
    static final int MAX_TIMESTAMP_OFFSET = 35;
    static final int PRODUCER_ID_OFFSET = 43;
    static final int PRODUCER_EPOCH_OFFSET = 51;
    static final int BASE_SEQUENCE_OFFSET = 53;
    static final int RECORDS_COUNT_OFFSET = 57;
    static final int RECORDS_OFFSET = 61;
    public static final int RECORD_BATCH_OVERHEAD = 61;

    // batch attributes (Kafka reads only the low byte)
    public static final int COMPRESSION_CODEC_MASK = 0x07;
    public static final int TIMESTAMP_TYPE_MASK = 0x08;
    static final int TRANSACTIONAL_FLAG_MASK = 0x10;
    static final int CONTROL_FLAG_MASK = 0x20;
    /** kbatch (DESIGN.md decision 1): KIP-228's isTimestampExtended, bit 7. */
    public static final int TIMESTAMP_EXTENDED_FLAG_MASK = 0x80;
    /** Kafka's hasDeleteHorizonMs: the cleaner put a delete horizon in baseTimestamp. */
    public static final int DELETE_HORIZON_FLAG_MASK = 0x40;
    /** kbatch (DESIGN.md decision 2): KIP-87's tombstone flag, record attributes bit 5. */
    static final int RECORD_TOMBSTONE_FLAG_MASK = 0x20;

    // magic 0/1 (LegacyRecord): offsets inside the message (after offset|size)
    static final int LEGACY_MAGIC_OFFSET = 4;
    static final int LEGACY_ATTRIBUTES_OFFSET = 5;
    static final int LEGACY_TIMESTAMP_OFFSET = 6;
    static final int LEGACY_KEY_SIZE_OFFSET_V0 = 6;
    static final int LEGACY_KEY_SIZE_OFFSET_V1 = 14;
    public static final int RECORD_OVERHEAD_V0 = 14;
    public static final int RECORD_OVERHEAD_V1 = 22;
    static final int LEGACY_TIMESTAMP_TYPE_MASK = 0x08;

    // sentinels (RecordBatch.java)
    public static final long NO_TIMESTAMP = -1L;
    static final long NO_TIMESTAMP_EXTENDED = Long.MIN_VALUE;

    // codecs (CompressionType.java)
    public static final int NONE = 0, GZIP = 1, SNAPPY = 2, LZ4 = 3, ZSTD = 4;
    static final String[] CODEC_NAMES = {"none", "gzip", "snappy", "lz4", "zstd"};

    // control records (ControlRecordType.java)
    public static final int CONTROL_ABORT = 0;
    public static final int CONTROL_COMMIT = 1;

    // index files (OffsetIndex.java, TimeIndex.java, TransactionIndex.java)
    public static final int OFFSET_INDEX_ENTRY_SIZE = 8;
    public static final int TIME_INDEX_ENTRY_SIZE = 12;
    public static final int TXN_INDEX_ENTRY_SIZE = 34;

    /** Decompressed bytes allowed per batch (the bomb guard of kbatch.record.compression). */
    public static final int DEFAULT_MAX_DECOMPRESSED_BYTES = 256 * 1024 * 1024;
    /** Largest |ms| whose microseconds fit in int64: beyond it a timestamp column value is null. */
    static final long US_LIMIT = Long.MAX_VALUE / 1000;

    public static int i32(byte[] b, int p) {
        return ((b[p] & 0xff) << 24) | ((b[p + 1] & 0xff) << 16) | ((b[p + 2] & 0xff) << 8) | (b[p + 3] & 0xff);
    }

    public static long i64(byte[] b, int p) {
        return ((long) i32(b, p) << 32) | (i32(b, p + 4) & 0xffffffffL);
    }

    public static short i16(byte[] b, int p) {
        return (short) (((b[p] & 0xff) << 8) | (b[p + 1] & 0xff));
    }

    static int le32(byte[] b, int p) {
        return (b[p] & 0xff) | ((b[p + 1] & 0xff) << 8) | ((b[p + 2] & 0xff) << 16) | ((b[p + 3] & 0xff) << 24);
    }
}
