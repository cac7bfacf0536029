package kbatch.spark;

import java.util.Arrays;

/**
 * Growable column buffers for one output batch of records, filled by {@link RecordBatchDecoder}
 * (only the columns a scan needs), then handed to Spark as {@link KafkaVectors} without a copy.
 * Reused for the next batch once Spark has asked for it (a ColumnarBatch is valid until the next
 * call to next()).
 */
final class RecordColumns {
    final boolean key, value, offset, timestamp, timestampType, headers, tombstone, batchFields;
    /** Timestamps as int64 milliseconds (null only for "no timestamp"), for lookups, not for Spark. */
    boolean rawTimestamps;

    int rows;
    long[] offsets = new long[0];
    long[] timestampsUs = new long[0];
    boolean[] timestampNull = new boolean[0];
    int[] timestampTypes = new int[0];
    boolean[] tombstones = new boolean[0];
    final Binary keys;
    final Binary values;
    /** Row i's headers are entries [headerStart[i], headerStart[i + 1]) of headerKeys/headerValues. */
    int[] headerStart = new int[1];
    int headerCount;
    final Binary headerKeys;
    final Binary headerValues;
    long[] producerIds = new long[0];
    short[] producerEpochs = new short[0];
    int[] baseSequences = new int[0];
    boolean[] transactional = new boolean[0];
    boolean[] control = new boolean[0];

    RecordColumns(boolean key, boolean value, boolean offset, boolean timestamp, boolean timestampType,
                  boolean headers, boolean tombstone, boolean batchFields) {
        this.key = key;
        this.value = value;
        this.offset = offset;
        this.timestamp = timestamp;
        this.timestampType = timestampType;
        this.headers = headers;
        this.tombstone = tombstone;
        this.batchFields = batchFields;
        keys = key ? new Binary() : null;
        values = value ? new Binary() : null;
        headerKeys = headers ? new Binary() : null;
        headerValues = headers ? new Binary() : null;
    }

    /** Offsets and raw millisecond timestamps only (time lookups on the driver). */
    static RecordColumns raw() {
        RecordColumns c = new RecordColumns(false, false, true, true, false, false, false, false);
        c.rawTimestamps = true;
        return c;
    }

    void reset() {
        rows = 0;
        headerCount = 0;
        for (Binary b : new Binary[] {keys, values, headerKeys, headerValues}) {
            if (b != null) {
                b.reset();
            }
        }
    }

    private int markRows;
    private int markHeaders;

    /** Remember the row count before a batch, to drop its rows if the batch turns out bad. */
    void mark() {
        markRows = rows;
        markHeaders = headerCount;
        for (Binary b : new Binary[] {keys, values, headerKeys, headerValues}) {
            if (b != null) {
                b.mark();
            }
        }
    }

    /** Drop the rows added since mark(): a bad batch gives no rows (its good records neither). */
    void rollback() {
        rows = markRows;
        headerCount = markHeaders;
        for (Binary b : new Binary[] {keys, values, headerKeys, headerValues}) {
            if (b != null) {
                b.rollback();
            }
        }
    }

    /** Room for `n` more rows in every column this scan fills. */
    void reserve(int n) {
        int need = rows + n;
        if (need <= capacity) {
            return;
        }
        int cap = Math.max(need, Math.max(1024, capacity * 2));
        if (offset) {
            offsets = Arrays.copyOf(offsets, cap);
        }
        if (timestamp) {
            timestampsUs = Arrays.copyOf(timestampsUs, cap);
            timestampNull = Arrays.copyOf(timestampNull, cap);
        }
        if (timestampType) {
            timestampTypes = Arrays.copyOf(timestampTypes, cap);
        }
        if (tombstone) {
            tombstones = Arrays.copyOf(tombstones, cap);
        }
        if (headers) {
            headerStart = Arrays.copyOf(headerStart, cap + 1);
        }
        if (batchFields) {
            producerIds = Arrays.copyOf(producerIds, cap);
            producerEpochs = Arrays.copyOf(producerEpochs, cap);
            baseSequences = Arrays.copyOf(baseSequences, cap);
            transactional = Arrays.copyOf(transactional, cap);
            control = Arrays.copyOf(control, cap);
        }
        for (Binary b : new Binary[] {keys, values}) {
            if (b != null) {
                b.reserveRows(cap);
            }
        }
        capacity = cap;
    }

    private int capacity;

    /** Nullable binary values: Arrow's layout (offsets n + 1, one data array, a null flag per row). */
    static final class Binary {
        int n;
        int[] offsets = new int[1];
        byte[] data = new byte[1 << 12];
        boolean[] nulls = new boolean[0];
        int nullCount;

        private int markN;
        private int markNulls;

        void reset() {
            n = 0;
            nullCount = 0;
            offsets[0] = 0;
        }

        void mark() {
            markN = n;
            markNulls = nullCount;
        }

        void rollback() {
            n = markN;
            nullCount = markNulls;
        }

        void reserveRows(int cap) {
            if (offsets.length < cap + 1) {
                offsets = Arrays.copyOf(offsets, cap + 1);
                nulls = Arrays.copyOf(nulls, cap);
            }
        }

        void addNull() {
            reserveRows(n + 1);
            nulls[n] = true;
            nullCount++;
            offsets[n + 1] = offsets[n];
            n++;
        }

        void add(byte[] src, int off, int len) {
            reserveRows(n + 1);
            int end = offsets[n];
            if (end + len > data.length) {
                long cap = Math.max((long) end + len, (long) data.length * 2);
                if (cap > Integer.MAX_VALUE - 8) {
                    cap = Integer.MAX_VALUE - 8;
                }
                data = Arrays.copyOf(data, (int) cap);
            }
            System.arraycopy(src, off, data, end, len);
            nulls[n] = false;
            offsets[n + 1] = end + len;
            n++;
        }

        int bytes() {
            return offsets[n];
        }
    }
}
