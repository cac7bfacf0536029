package kbatch.kafka.storage;

import java.io.IOException;
import java.nio.ByteBuffer;
import java.util.Arrays;

import kbatch.kafka.wire.BatchHeader;
import kbatch.kafka.wire.KafkaSegmentsException;
import kbatch.kafka.wire.RecordBatchDecoder;
import kbatch.kafka.wire.RecordColumns;
import kbatch.kafka.wire.Wire;

/**
 * What a read of bytes [start, end) of one segment returns, summarised without decoding every
 * record: the row count, the first and last row offsets and the largest row timestamp (as the
 * read gives it: microseconds, null timestamps left out). A {@link SegmentReader} walks the range
 * with every check a read makes (framing, CRC of every batch, offset order, markers against the
 * aborted list, truncation), but takes a checked data batch wholly inside the offset range from its
 * header (recordCount rows; aborted: none) instead of walking its records; other batches (the
 * boundary batches of an offset range, magic 0/1, delete-horizon batches) are decoded.
 *
 * Exact figures from headers: the count is recordCount; the first and last offsets and the
 * largest timestamp of header-taken batches are those of decoded records: the first and last
 * such batch are decoded (compaction leaves gaps at a batch's ends), and batches are decoded in
 * decreasing order of their header maxTimestamp until the largest timestamp found is at least the
 * next batch's header maxTimestamp (compaction leaves a stale, larger maxTimestamp; the broker
 * writes no smaller one). What rests on the CRC: a batch whose CRC holds is taken to hold the
 * records its header says (a writer that forges both is not detected; a read would decode them).
 *
 * trustHeaders (an explicit opt-in, as Parquet trusts its footers): no CRC is checked and a batch
 * taken from its header is hopped over by its length, its records never read; every other check
 * stays (framing, offset order, markers, truncation). What it misses: a bit flipped inside a batch
 * (a record, or a header's count, timestamp, attributes or producer fields), which is then
 * counted by its header as if it were good.
 */
public final class RangeSummary {
    /** Rows the read returns. */
    public long count;
    /** First and last row offsets (Long.MIN_VALUE: no rows). */
    public long firstOffset = Long.MIN_VALUE;
    public long lastOffset = Long.MIN_VALUE;
    /** The largest non-null row timestamp in microseconds (Long.MIN_VALUE with hasTimestamp false: none). */
    public long maxTimestampUs = Long.MIN_VALUE;
    public boolean hasTimestamp;
    /** The read's error after the rows counted (null: none). */
    public KafkaSegmentsException error;
    /** Batches decoded (boundaries, legacy, resolution of offsets and timestamps) and taken from headers. */
    public int decodedBatches;
    public int headerBatches;

    // header-taken batches with rows, in file order: position, size, header maxTimestamp
    private long[] positions = new long[16];
    private int[] sizes = new int[16];
    private long[] maxTimestamps = new long[16];
    private int batches;

    /** A thread's read window, reused walk after walk (a summary keeps no row that refers into it). */
    private static final ThreadLocal<SegmentReader.Window> WINDOW = ThreadLocal.withInitial(SegmentReader.Window::new);

    private RangeSummary() {}

    /**
     * Walk bytes [start, end) of `src` (a file of `fileSize` bytes; `nextBase` the next segment's base
     * offset, null for the last segment) for rows with offsets in [lo, hi), as SegmentReader reads
     * them with CRC checks and the aborted list `aborted` (null: read_uncommitted).
     */
    public static RangeSummary walk(SegmentReader.Source src, long start, long end, long fileSize, Long nextBase,
                                    long lo, long hi, AbortedTransactions aborted) throws IOException {
        return walk(src, start, end, fileSize, nextBase, lo, hi, aborted, false);
    }

    /** As above; `trustHeaders`: no CRC checked, batches taken from headers not read (see the class). */
    public static RangeSummary walk(SegmentReader.Source src, long start, long end, long fileSize, Long nextBase,
                                    long lo, long hi, AbortedTransactions aborted, boolean trustHeaders)
            throws IOException {
        RangeSummary s = new RangeSummary();
        RecordColumns rows = new RecordColumns(false, false, true, true, false, false, false, false);
        RecordBatchDecoder decoder = new RecordBatchDecoder(Wire.DEFAULT_MAX_DECOMPRESSED_BYTES);
        // a range that ends at the end of the last segment's file may end in a partial batch (SegmentReaderFactory)
        SegmentReader reader = new SegmentReader(src, start, end, nextBase == null ? fileSize : Long.MAX_VALUE,
                !trustHeaders, lo, hi, aborted, rows, 1 << 16, decoder, WINDOW.get()).followedBy(nextBase, fileSize).summarizing(s::header);
        try {
            while (reader.next()) {
                s.rows(rows);
            }
            s.resolve(src, decoder, lo, hi);
        } catch (KafkaSegmentsException e) {
            s.error = e; // the read's error, or records a header misstates: no answer from headers
        }
        s.positions = null; // a remembered summary keeps its figures only
        s.sizes = null;
        s.maxTimestamps = null;
        return s;
    }

    private void header(BatchHeader h) {
        headerBatches++;
        count += h.recordCount;
        if (h.recordCount == 0) {
            return; // an empty batch compaction left: no rows, a stale maxTimestamp
        }
        if (batches == positions.length) {
            positions = Arrays.copyOf(positions, batches * 2);
            sizes = Arrays.copyOf(sizes, batches * 2);
            maxTimestamps = Arrays.copyOf(maxTimestamps, batches * 2);
        }
        positions[batches] = h.position;
        sizes[batches] = h.size;
        maxTimestamps[batches] = h.maxTimestamp;
        batches++;
    }

    private void rows(RecordColumns rc) {
        count += rc.rows;
        for (int i = 0; i < rc.rows; i++) {
            row(rc, i);
        }
    }

    private void row(RecordColumns rc, int i) {
        long o = rc.offsets[i];
        if (firstOffset == Long.MIN_VALUE || o < firstOffset) {
            firstOffset = o;
        }
        if (o > lastOffset) {
            lastOffset = o;
        }
        if (!rc.timestampNull[i] && (!hasTimestamp || rc.timestampsUs[i] > maxTimestampUs)) {
            maxTimestampUs = rc.timestampsUs[i];
            hasTimestamp = true;
        }
    }

    /** Decode the header-taken batches the offsets and the largest timestamp need. */
    private void resolve(SegmentReader.Source src, RecordBatchDecoder decoder, long lo, long hi) throws IOException {
        if (batches == 0) {
            return;
        }
        boolean[] done = new boolean[batches];
        decode(src, decoder, 0, lo, hi, done);
        decode(src, decoder, batches - 1, lo, hi, done);
        Integer[] order = new Integer[batches];
        for (int i = 0; i < batches; i++) {
            order[i] = i;
        }
        Arrays.sort(order, (a, b) -> Long.compare(maxTimestamps[b], maxTimestamps[a]));
        for (int i : order) {
            long bound = maxTimestamps[i];
            // the header bound in microseconds; one past the range Spark keeps, or "no timestamp": decode
            if (hasTimestamp && Math.abs(bound) < Long.MAX_VALUE / 1000 && maxTimestampUs >= bound * 1000) {
                break;
            }
            decode(src, decoder, i, lo, hi, done);
        }
    }

    private void decode(SegmentReader.Source src, RecordBatchDecoder decoder, int i, long lo, long hi, boolean[] done)
            throws IOException {
        if (done[i]) {
            return;
        }
        done[i] = true;
        decodedBatches++;
        byte[] bytes = new byte[sizes[i]];
        src.readFully(positions[i], bytes, 0, bytes.length);
        ByteBuffer b = ByteBuffer.wrap(bytes);
        BatchHeader h = new BatchHeader();
        h.read(b, 0, positions[i], bytes.length);
        RecordColumns rc = new RecordColumns(false, false, true, true, false, false, false, false);
        decoder.decodeV2(b, 0, positions[i], h, rc, lo, hi, true, false);
        for (int r = 0; r < rc.rows; r++) {
            row(rc, r);
        }
    }
}
