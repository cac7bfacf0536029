package kbatch.kafka.storage;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.IOException;
import java.nio.ByteBuffer;
import java.util.List;

import org.apache.kafka.common.compress.Compression;
import org.apache.kafka.common.record.CompressionType;
import org.apache.kafka.common.record.ControlRecordType;
import org.apache.kafka.common.record.MemoryRecords;
import org.apache.kafka.common.record.MemoryRecordsBuilder;
import org.apache.kafka.common.record.RecordBatch;
import org.apache.kafka.common.record.TimestampType;
import org.apache.kafka.common.utils.BufferSupplier;
import org.junit.jupiter.api.Test;

import kbatch.kafka.wire.RecordBatchDecoder;
import kbatch.kafka.wire.RecordColumns;
import kbatch.kafka.wire.Wire;

/**
 * A range's summary (count, first and last offset, largest timestamp) equals what a read of the
 * same range returns, row by row: whole batches from headers, boundary batches of an offset
 * range, magic 0/1, compressed batches, aborted transactions, compaction's gaps and empty
 * batches (with their stale maxTimestamp), out-of-order CreateTime, LogAppendTime; damage is the
 * read's error, never a figure.
 */
class RangeSummaryTest {
    /** The read's figures: {count, first offset, last offset, max timestamp us (MIN_VALUE: none)}. */
    static long[] read(byte[] log, long lo, long hi, AbortedTransactions aborted) {
        RecordColumns c = new RecordColumns(false, false, true, true, false, false, false, false);
        long[] f = {0, Long.MIN_VALUE, Long.MIN_VALUE, Long.MIN_VALUE};
        try (SegmentReader r = new SegmentReader(Segments.source(log), 0, log.length, log.length, true, lo, hi, aborted,
                c, 7, new RecordBatchDecoder(Wire.DEFAULT_MAX_DECOMPRESSED_BYTES)).followedBy(null, log.length)) {
            while (r.next()) {
                for (int i = 0; i < c.rows; i++) {
                    f[1] = f[0] == 0 ? c.offsets[i] : f[1];
                    f[0]++;
                    f[2] = c.offsets[i];
                    if (!c.timestampNull[i]) {
                        f[3] = Math.max(f[3], c.timestampsUs[i]);
                    }
                }
            }
        } catch (IOException e) {
            throw new java.io.UncheckedIOException(e);
        }
        return f;
    }

    static RangeSummary summary(byte[] log, long lo, long hi, AbortedTransactions aborted) throws IOException {
        return RangeSummary.walk(Segments.source(log), 0, log.length, log.length, null, lo, hi, aborted);
    }

    static void same(byte[] log, long lo, long hi, AbortedTransactions aborted) throws IOException {
        long[] want = read(log, lo, hi, aborted);
        RangeSummary s = summary(log, lo, hi, aborted);
        assertNull(s.error);
        long[] got = {s.count, s.count == 0 ? Long.MIN_VALUE : s.firstOffset, s.count == 0 ? Long.MIN_VALUE : s.lastOffset,
            s.hasTimestamp ? s.maxTimestampUs : Long.MIN_VALUE};
        assertEquals(java.util.Arrays.toString(want), java.util.Arrays.toString(got), "range [" + lo + ", " + hi + ")");
    }

    /** Every offset range of the log with ends in {none, each offset}. */
    static void everyRange(byte[] log, long last, AbortedTransactions aborted) throws IOException {
        same(log, Long.MIN_VALUE, Long.MAX_VALUE, aborted);
        for (long lo = 0; lo <= last + 1; lo++) {
            same(log, lo, Long.MAX_VALUE, aborted);
            for (long hi = lo; hi <= last + 2; hi += 3) {
                same(log, lo, hi, aborted);
            }
        }
    }

    /** Records at the given offsets, CreateTime `times`, as a compacted batch keeps them (gaps). */
    static byte[] withOffsets(long base, long[] offsets, long[] times, TimestampType tt, CompressionType codec) {
        ByteBuffer buf = ByteBuffer.allocate(64 * 1024);
        MemoryRecordsBuilder b = MemoryRecords.builder(buf, RecordBatch.CURRENT_MAGIC_VALUE, Compression.of(codec).build(),
                tt, base, tt == TimestampType.LOG_APPEND_TIME ? Segments.T0 + 99 : RecordBatch.NO_TIMESTAMP);
        for (int i = 0; i < offsets.length; i++) {
            b.appendWithOffset(offsets[i], times[i], ("k" + i).getBytes(), ("v" + i).getBytes());
        }
        return Segments.bytes(b.build());
    }

    @Test
    void wholeAndBoundaryBatchesOfEveryCodecAndMagic() throws IOException {
        byte[] log = Segments.concat(
                Segments.batch((byte) 0, CompressionType.NONE, 0, 3),
                Segments.batch((byte) 1, CompressionType.GZIP, 3, 4),
                Segments.batch((byte) 2, CompressionType.NONE, 7, 5),
                Segments.batch((byte) 2, CompressionType.LZ4, 12, 6),
                Segments.batch((byte) 2, CompressionType.ZSTD, 18, 4));
        everyRange(log, 21, null);
        RangeSummary s = summary(log, Long.MIN_VALUE, Long.MAX_VALUE, null);
        assertEquals(3, s.headerBatches); // the magic 2 batches: from their headers
    }

    @Test
    void compactionGapsOutOfOrderTimesAndLogAppendTime() throws IOException {
        byte[] log = Segments.concat(
                // compaction kept offsets 11 and 13 of a batch at base 10 (last offset delta 2 here)
                withOffsets(10, new long[] {11, 13}, new long[] {Segments.T0 + 50, Segments.T0 + 5},
                        TimestampType.CREATE_TIME, CompressionType.NONE),
                withOffsets(20, new long[] {20, 21, 22}, new long[] {Segments.T0 + 9, Segments.T0 + 70, Segments.T0 + 1},
                        TimestampType.CREATE_TIME, CompressionType.SNAPPY),
                withOffsets(30, new long[] {30, 31}, new long[] {Segments.T0, Segments.T0},
                        TimestampType.LOG_APPEND_TIME, CompressionType.NONE));
        everyRange(log, 32, null);
    }

    @Test
    void anEmptyBatchCompactionLeftCountsNothingAndItsStaleMaxTimestampIsNotAnAnswer() throws IOException {
        // Kafka's own filterTo keeps an empty batch (its header, stale maxTimestamp and all) for producer state
        byte[] whole = withOffsets(40, new long[] {40, 41}, new long[] {Segments.T0 + 1000, Segments.T0 + 2000},
                TimestampType.CREATE_TIME, CompressionType.NONE);
        ByteBuffer out = ByteBuffer.allocate(4096);
        MemoryRecords.readableRecords(ByteBuffer.wrap(whole)).filterTo(new org.apache.kafka.common.TopicPartition("t", 0), new MemoryRecords.RecordFilter(0, 0) {
            @Override
            protected BatchRetentionResult checkBatchRetention(RecordBatch batch) {
                return new BatchRetentionResult(BatchRetention.RETAIN_EMPTY, false);
            }

            @Override
            protected boolean shouldRetainRecord(RecordBatch batch, org.apache.kafka.common.record.Record r) {
                return false;
            }
        }, out, Integer.MAX_VALUE, BufferSupplier.NO_CACHING);
        out.flip();
        byte[] empty = new byte[out.remaining()];
        out.get(empty);
        byte[] log = Segments.concat(Segments.batch((byte) 2, CompressionType.NONE, 30, 5), empty,
                Segments.batch((byte) 2, CompressionType.NONE, 42, 3));
        assertTrue(empty.length > 0, "Kafka kept an empty batch");
        everyRange(log, 44, null);
        RangeSummary s = summary(log, Long.MIN_VALUE, Long.MAX_VALUE, null);
        assertEquals(8, s.count);
        assertEquals((Segments.T0 + 4) * 1000, s.maxTimestampUs); // not the empty batch's T0 + 2000
    }

    @Test
    void abortedTransactionsAndMarkers() throws IOException {
        byte[] log = AbortedTransactionsTest.LOG;
        AbortedTransactions aborted = AbortedTransactions.of(List.of(new long[] {AbortedTransactionsTest.ABORTED, 0, 3}));
        everyRange(log, 8, aborted);
        everyRange(log, 8, null);
    }

    @Test
    void aMarkerTheListContradictsIsTheReadsError() throws IOException {
        byte[] log = Segments.concat(Segments.batch((byte) 2, CompressionType.NONE, 0, 3, 7, true),
                AbortedTransactionsTest.marker(3, 7, ControlRecordType.ABORT));
        RangeSummary s = summary(log, Long.MIN_VALUE, Long.MAX_VALUE, AbortedTransactions.of(List.of()));
        assertNotNull(s.error);
        assertEquals("CorruptIndexError", s.error.errorClass());
    }

    @Test
    void aFlippedBitIsDamageNotACount() throws IOException {
        byte[] log = Segments.concat(Segments.batch((byte) 2, CompressionType.NONE, 0, 5),
                Segments.batch((byte) 2, CompressionType.NONE, 5, 5));
        byte[] bad = log.clone();
        bad[bad.length - 3] ^= 0x10; // inside the second batch's last record
        RangeSummary s = summary(bad, Long.MIN_VALUE, Long.MAX_VALUE, null);
        assertNotNull(s.error, "a CRC mismatch is the read's error");
        assertEquals(5, s.count); // the rows before it, as the read returns them first
        assertEquals(Segments.error(bad, false).getMessage(), s.error.getMessage());
    }

    @Test
    void aTruncatedTailOfTheLastSegmentIsIgnoredAsTheReadIgnoresIt() throws IOException {
        byte[] log = Segments.concat(Segments.batch((byte) 2, CompressionType.NONE, 0, 5),
                Segments.batch((byte) 2, CompressionType.NONE, 5, 5));
        byte[] cut = java.util.Arrays.copyOf(log, log.length - 7);
        everyRange(cut, 9, null);
        assertEquals(5, summary(cut, Long.MIN_VALUE, Long.MAX_VALUE, null).count);
    }
}
