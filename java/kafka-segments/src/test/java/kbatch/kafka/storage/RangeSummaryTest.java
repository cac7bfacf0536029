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

    private static final java.util.Map<byte[], java.nio.file.Path> FILES = new java.util.IdentityHashMap<>();

    /** The log in a local file, read as the aggregate reads it: through its FileChannel into a direct buffer. */
    static LogDirectory.FsSource file(byte[] log) throws IOException {
        java.nio.file.Path f = FILES.get(log);
        if (f == null) {
            f = java.nio.file.Files.createTempFile("range-summary", ".log");
            f.toFile().deleteOnExit();
            java.nio.file.Files.write(f, log);
            FILES.put(log, f);
        }
        String path = f.toUri().toString();
        LogDirectory.FsSource src = new LogDirectory.FsSource(
                LogDirectory.fileSystem(path, new org.apache.hadoop.conf.Configuration()), path, true);
        assertNotNull(src.channel());
        return src;
    }

    /** The summary of every way of walking: array or file channel, CRCs checked or headers trusted. */
    static RangeSummary[] summaries(byte[] log, long lo, long hi, AbortedTransactions aborted) throws IOException {
        try (LogDirectory.FsSource f = file(log)) {
            return new RangeSummary[] {
                summary(log, lo, hi, aborted),
                RangeSummary.walk(f, 0, log.length, log.length, null, lo, hi, aborted),
                RangeSummary.walk(Segments.source(log), 0, log.length, log.length, null, lo, hi, aborted, true),
                RangeSummary.walk(f, 0, log.length, log.length, null, lo, hi, aborted, true),
            };
        }
    }

    static void same(byte[] log, long lo, long hi, AbortedTransactions aborted) throws IOException {
        long[] want = read(log, lo, hi, aborted);
        for (RangeSummary s : summaries(log, lo, hi, aborted)) {
            assertNull(s.error);
            long[] got = {s.count, s.count == 0 ? Long.MIN_VALUE : s.firstOffset,
                s.count == 0 ? Long.MIN_VALUE : s.lastOffset, s.hasTimestamp ? s.maxTimestampUs : Long.MIN_VALUE};
            assertEquals(java.util.Arrays.toString(want), java.util.Arrays.toString(got), "range [" + lo + ", " + hi + ")");
        }
    }

    /** One batch of `n` records from `base` with values of `valueBytes` bytes (larger than the hop window). */
    static byte[] large(long base, int n, int valueBytes, CompressionType codec) {
        ByteBuffer buf = ByteBuffer.allocate(n * (valueBytes + 64) + 1024);
        MemoryRecordsBuilder b = MemoryRecords.builder(buf, RecordBatch.CURRENT_MAGIC_VALUE, Compression.of(codec).build(),
                TimestampType.CREATE_TIME, base);
        java.util.Random r = new java.util.Random(base);
        for (int i = 0; i < n; i++) {
            byte[] v = new byte[valueBytes];
            r.nextBytes(v);
            b.appendWithOffset(base + i, Segments.T0 + (base + i) * 7 % 13, ("k" + i).getBytes(), v);
        }
        return Segments.bytes(b.build());
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

    @Test
    void trustedHeadersHopOverLargeBatchesAndAnswerAsTheRead() throws IOException {
        // batches larger than the trusting walk's 16 KiB window, small ones between them, a boundary
        // batch of every offset range decoded whole, a compressed one, a marker and an aborted batch
        byte[] log = Segments.concat(large(0, 4, 9000, CompressionType.NONE), Segments.batch((byte) 2, CompressionType.NONE, 4, 3),
                large(7, 5, 6000, CompressionType.NONE), large(12, 3, 20000, CompressionType.LZ4),
                Segments.batch((byte) 2, CompressionType.NONE, 15, 2), large(17, 2, 30000, CompressionType.NONE));
        assertTrue(log.length > 8 * SegmentReader.HOP_WINDOW);
        everyRange(log, 18, null);
        byte[] cut = java.util.Arrays.copyOf(log, log.length - 100); // the last batch torn: ignored at the file's end
        everyRange(cut, 16, null);
        try (LogDirectory.FsSource f = file(log)) {
            RangeSummary s = RangeSummary.walk(f, 0, log.length, log.length, null, Long.MIN_VALUE, Long.MAX_VALUE, null, true);
            assertEquals(19, s.count);
            assertEquals(6, s.headerBatches);
        }
        // the large batches' records are never read: far fewer bytes than the log
        long[] read = {0};
        SegmentReader.Source counting = new SegmentReader.Source() {
            @Override
            public void readFully(long position, byte[] b, int off, int len) throws IOException {
                read[0] += len;
                Segments.source(log).readFully(position, b, off, len);
            }

            @Override
            public void close() {}
        };
        RangeSummary s = RangeSummary.walk(counting, 0, log.length, log.length, null, 5, 16, null, true);
        assertEquals(11, s.count);
        // ten batches of 100 KB between two small ones: their headers, and the one batch the largest timestamp needs
        byte[][] parts = new byte[12][];
        parts[0] = Segments.batch((byte) 2, CompressionType.NONE, 0, 3);
        for (int i = 0; i < 10; i++) {
            parts[i + 1] = large(3 + 5 * i, 5, 20000, CompressionType.NONE);
        }
        parts[11] = Segments.batch((byte) 2, CompressionType.NONE, 53, 3);
        byte[] many = Segments.concat(parts);
        for (long[] r : new long[][] {{Long.MIN_VALUE, Long.MAX_VALUE}, {2, 54}, {3, 53}, {4, 40}, {20, Long.MAX_VALUE}}) {
            same(many, r[0], r[1], null);
        }
        read[0] = 0;
        counting = new SegmentReader.Source() {
            @Override
            public void readFully(long position, byte[] b, int off, int len) throws IOException {
                read[0] += len;
                Segments.source(many).readFully(position, b, off, len);
            }

            @Override
            public void close() {}
        };
        s = RangeSummary.walk(counting, 0, many.length, many.length, null, Long.MIN_VALUE, Long.MAX_VALUE, null, true);
        assertEquals(56, s.count);
        assertTrue(read[0] < many.length / 2, read[0] + " of " + many.length + " bytes read");
    }

    @Test
    void aFlippedBitInARecordIsDamageByDefaultAndCountedWhenHeadersAreTrusted() throws IOException {
        byte[] log = Segments.concat(large(0, 4, 9000, CompressionType.NONE), large(4, 4, 9000, CompressionType.NONE));
        byte[] bad = log.clone();
        bad[bad.length - 500] ^= 0x10; // inside the second batch's last value
        for (RangeSummary s : java.util.Arrays.copyOf(summaries(bad, Long.MIN_VALUE, Long.MAX_VALUE, null), 2)) {
            assertNotNull(s.error, "a CRC mismatch is the read's error");
            assertEquals(Segments.error(bad, false).getMessage(), s.error.getMessage());
        }
        RangeSummary[] all = summaries(bad, Long.MIN_VALUE, Long.MAX_VALUE, null);
        for (RangeSummary s : java.util.Arrays.copyOfRange(all, 2, 4)) {
            assertNull(s.error, "what trusting headers misses");
            assertEquals(8, s.count);
        }
        // structure is still checked when headers are trusted: a length field past the end of a sealed range
        byte[] badLength = log.clone();
        ByteBuffer.wrap(badLength).putInt(Wire.SIZE_OFFSET + log.length / 2, 1 << 30);
        RangeSummary t = RangeSummary.walk(Segments.source(badLength), 0, log.length, log.length + 1, 100L,
                Long.MIN_VALUE, Long.MAX_VALUE, null, true);
        assertNotNull(t.error);
    }
}
