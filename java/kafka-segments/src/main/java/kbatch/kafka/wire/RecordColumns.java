package kbatch.kafka.wire;

import java.nio.ByteBuffer;
import java.util.Arrays;

/**
 * Growable column buffers for one output batch of records, filled by {@link RecordBatchDecoder}
 * (only the columns a scan needs), then handed to Spark as {@link KafkaVectors} without a copy.
 * Reused for the next batch once Spark has asked for it (a ColumnarBatch is valid until the next
 * call to next()).
 */
public final class RecordColumns {
    public final boolean key, value, offset, timestamp, timestampType, headers, tombstone, batchFields;
    /** Timestamps as int64 milliseconds (null only for "no timestamp"), for lookups, not for Spark. */
    boolean rawTimestamps;

    public int rows;
    public long[] offsets = new long[0];
    public long[] timestampsUs = new long[0];
    public boolean[] timestampNull = new boolean[0];
    public int[] timestampTypes = new int[0];
    public boolean[] tombstones = new boolean[0];
    public final Binary keys;
    public final Binary values;
    /** Row i's headers are entries [headerStart[i], headerStart[i + 1]) of headerKeys/headerValues. */
    public int[] headerStart = new int[1];
    int headerCount;
    public final Binary headerKeys;
    public final Binary headerValues;
    public long[] producerIds = new long[0];
    public short[] producerEpochs = new short[0];
    public int[] baseSequences = new int[0];
    public boolean[] transactional = new boolean[0];
    public boolean[] control = new boolean[0];

    public RecordColumns(boolean key, boolean value, boolean offset, boolean timestamp, boolean timestampType,
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

    /** Whether the scan asks for no column at all (count()): rows are only counted. */
    public boolean none() {
        return !key && !value && !offset && !timestamp && !timestampType && !headers && !tombstone && !batchFields;
    }

    /** Offsets and raw millisecond timestamps only (time lookups on the driver). */
    public static RecordColumns raw() {
        RecordColumns c = new RecordColumns(false, false, true, true, false, false, false, false);
        c.rawTimestamps = true;
        return c;
    }

    public void reset() {
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
    public void mark() {
        markRows = rows;
        markHeaders = headerCount;
        for (Binary b : new Binary[] {keys, values, headerKeys, headerValues}) {
            if (b != null) {
                b.mark();
            }
        }
    }

    /** Drop the rows added since mark(): a bad batch gives no rows (its good records neither). */
    public void rollback() {
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

    /**
     * Nullable binary values. A value is either a reference into the input (the read window, which
     * lives until the next output batch) or a
     * copy (values from decompressed records, whose buffer is reused by the next batch).
     */
    public static final class Binary {
        int n;
        public int nullCount;
        public boolean[] nulls = new boolean[0];
        public int[] starts = new int[0];
        public int[] lengths = new int[0];
        /** Which buffer each value is in: 0 = the copies in `data`, else an index into `sources`. */
        public byte[] source = new byte[0];
        public byte[] data = new byte[1 << 12];
        int dataLength;
        final ByteBuffer[] sources = new ByteBuffer[8];
        int sourceCount = 1;
        long totalBytes;

        private int markN;
        private int markNulls;
        private int markData;
        private long markTotal;

        void reset() {
            n = 0;
            nullCount = 0;
            dataLength = 0;
            totalBytes = 0;
            sourceCount = 1;
        }

        void mark() {
            markN = n;
            markNulls = nullCount;
            markData = dataLength;
            markTotal = totalBytes;
        }

        void rollback() {
            n = markN;
            nullCount = markNulls;
            dataLength = markData;
            totalBytes = markTotal;
        }

        void reserveRows(int cap) {
            if (starts.length < cap) {
                int c = Math.max(cap, starts.length * 2);
                starts = Arrays.copyOf(starts, c);
                lengths = Arrays.copyOf(lengths, c);
                source = Arrays.copyOf(source, c);
                nulls = Arrays.copyOf(nulls, c);
            }
        }

        void addNull() {
            reserveRows(n + 1);
            nulls[n] = true;
            starts[n] = 0;
            lengths[n] = 0;
            source[n] = 0;
            nullCount++;
            n++;
        }

        /** A value at src[pos, pos + len): referenced when `stable`, else copied. */
        void add(ByteBuffer src, int pos, int len, boolean stable) {
            reserveRows(n + 1);
            nulls[n] = false;
            lengths[n] = len;
            totalBytes += len;
            if (stable) {
                int k = sourceCount - 1;
                if (k == 0 || sources[k] != src) {
                    k = sourceCount;
                    for (int i = 1; i < sourceCount; i++) {
                        if (sources[i] == src) {
                            k = i;
                        }
                    }
                    if (k == sourceCount) {
                        if (k == sources.length) { // more stable buffers than expected: copy
                            stable = false;
                        } else {
                            sources[sourceCount++] = src;
                        }
                    }
                }
                if (stable) {
                    source[n] = (byte) k;
                    starts[n] = pos;
                    n++;
                    return;
                }
            }
            if (dataLength + len > data.length) {
                long cap = Math.max((long) dataLength + len, (long) data.length * 2);
                data = Arrays.copyOf(data, (int) Math.min(cap, Integer.MAX_VALUE - 8));
            }
            src.get(pos, data, dataLength, len);
            source[n] = 0;
            starts[n] = dataLength;
            dataLength += len;
            n++;
        }

        /** A copy of value i (null for a null value). */
        public byte[] get(int i) {
            if (nulls[i]) {
                return null;
            }
            byte[] out = new byte[lengths[i]];
            if (source[i] == 0) {
                System.arraycopy(data, starts[i], out, 0, out.length);
            } else {
                sources[source[i]].get(starts[i], out, 0, out.length);
            }
            return out;
        }

        public long bytes() {
            return totalBytes;
        }
    }
}
