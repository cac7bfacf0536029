package kbatch.kafka.storage;

import java.io.EOFException;
import java.io.IOException;
import java.nio.ByteBuffer;
import java.util.ArrayList;
import java.util.List;

import org.apache.kafka.common.compress.Compression;
import org.apache.kafka.common.record.CompressionType;
import org.apache.kafka.common.record.MemoryRecords;
import org.apache.kafka.common.record.MemoryRecordsBuilder;
import org.apache.kafka.common.record.RecordBatch;
import org.apache.kafka.common.record.TimestampType;

import kbatch.kafka.wire.KafkaSegmentsException;
import kbatch.kafka.wire.RecordBatchDecoder;
import kbatch.kafka.wire.RecordColumns;
import kbatch.kafka.wire.Wire;

/**
 * The test goldens: log bytes written by Kafka's own MemoryRecordsBuilder (kafka-clients), and the
 * JVM reader's rows of them, read as the Spark reader reads a segment (SegmentReader).
 */
public final class Segments {
    private Segments() {}

    /** Fixed create times: the same inputs give the same bytes on every run. */
    public static final long T0 = 1_700_000_000_000L;

    /**
     * One batch of `n` records at `baseOffset`: record i has key "k<i>" (null for i % 5 == 4),
     * value "v<i>" repeated (null for i % 7 == 6: a tombstone), and on magic 2 a header
     * ("h", "<i>") on every third record.
     */
    public static byte[] batch(byte magic, CompressionType codec, long baseOffset, int n) {
        return batch(magic, codec, baseOffset, n, RecordBatch.NO_PRODUCER_ID, false);
    }

    public static byte[] batch(byte magic, CompressionType codec, long baseOffset, int n, long producerId,
                               boolean transactional) {
        ByteBuffer buf = ByteBuffer.allocate(64 * 1024);
        TimestampType tt = magic == 0 ? TimestampType.NO_TIMESTAMP_TYPE : TimestampType.CREATE_TIME;
        MemoryRecordsBuilder b = MemoryRecords.builder(buf, magic, Compression.of(codec).build(), tt, baseOffset,
                RecordBatch.NO_TIMESTAMP, producerId, (short) (producerId < 0 ? -1 : 0),
                producerId < 0 ? -1 : 0, transactional, RecordBatch.NO_PARTITION_LEADER_EPOCH);
        for (int i = 0; i < n; i++) {
            byte[] key = i % 5 == 4 ? null : ("k" + i).getBytes();
            byte[] value = i % 7 == 6 ? null : ("v" + i).repeat(1 + i % 3).getBytes();
            org.apache.kafka.common.header.Header[] headers = magic == 2 && i % 3 == 0
                    ? new org.apache.kafka.common.header.Header[] {
                        new org.apache.kafka.common.header.internals.RecordHeader("h", ("" + i).getBytes())}
                    : new org.apache.kafka.common.header.Header[0];
            b.appendWithOffset(baseOffset + i, T0 + i, key, value, headers);
        }
        return bytes(b.build());
    }

    public static byte[] bytes(MemoryRecords records) {
        ByteBuffer b = records.buffer();
        byte[] out = new byte[b.remaining()];
        b.duplicate().get(out);
        return out;
    }

    public static byte[] concat(byte[]... parts) {
        int n = 0;
        for (byte[] p : parts) {
            n += p.length;
        }
        byte[] out = new byte[n];
        int at = 0;
        for (byte[] p : parts) {
            System.arraycopy(p, 0, out, at, p.length);
            at += p.length;
        }
        return out;
    }

    /** Positioned reads of an array, as LogDirectory.FsSource reads a file. */
    public static SegmentReader.Source source(byte[] bytes) {
        return new SegmentReader.Source() {
            @Override
            public void readFully(long position, byte[] b, int off, int len) throws IOException {
                if (position + len > bytes.length) {
                    throw new EOFException();
                }
                System.arraycopy(bytes, (int) position, b, off, len);
            }

            @Override
            public void close() {}
        };
    }

    /** One decoded row (every column), for comparisons. */
    public record Row(long offset, Long timestampMs, int timestampType, String key, String value,
                      List<String> headers, boolean tombstone, long producerId, boolean control) {}

    /**
     * Every row of `log` read as one segment. strict: the segment is not the partition's last, so
     * bytes after its last whole batch are an error (the active segment's partial tail is not).
     */
    public static List<Row> read(byte[] log, boolean strict, AbortedTransactions aborted) {
        RecordColumns c = new RecordColumns(true, true, true, true, true, true, true, true);
        List<Row> rows = new ArrayList<>();
        try (SegmentReader r = new SegmentReader(source(log), 0, log.length, strict ? log.length + 1 : log.length,
                true, Long.MIN_VALUE, Long.MAX_VALUE, aborted, c, 7,
                new RecordBatchDecoder(Wire.DEFAULT_MAX_DECOMPRESSED_BYTES))) {
            while (r.next()) {
                for (int i = 0; i < c.rows; i++) {
                    List<String> headers = new ArrayList<>();
                    for (int h = c.headerStart[i]; h < c.headerStart[i + 1]; h++) {
                        headers.add(str(c.headerKeys.get(h)) + "=" + str(c.headerValues.get(h)));
                    }
                    rows.add(new Row(c.offsets[i], c.timestampNull[i] ? null : c.timestampsUs[i] / 1000,
                            c.timestampTypes[i], str(c.keys.get(i)), str(c.values.get(i)), headers, c.tombstones[i],
                            c.producerIds[i], c.control[i]));
                }
            }
        } catch (IOException e) {
            throw new java.io.UncheckedIOException(e);
        }
        return rows;
    }

    /** The error reading `log` gives (after any rows before it); fails when there is none. */
    public static KafkaSegmentsException error(byte[] log, boolean strict) {
        try {
            read(log, strict, null);
        } catch (KafkaSegmentsException e) {
            return e;
        }
        throw new AssertionError("no error reading " + log.length + " bytes");
    }

    static String str(byte[] b) {
        return b == null ? null : new String(b, java.nio.charset.StandardCharsets.UTF_8);
    }
}
