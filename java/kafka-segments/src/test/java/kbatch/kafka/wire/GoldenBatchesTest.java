package kbatch.kafka.wire;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.ByteBuffer;
import java.util.ArrayList;
import java.util.List;
import java.util.stream.Stream;

import org.apache.kafka.common.header.Header;
import org.apache.kafka.common.record.CompressionType;
import org.apache.kafka.common.record.MemoryRecords;
import org.apache.kafka.common.record.Record;
import org.apache.kafka.common.record.RecordBatch;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.Arguments;
import org.junit.jupiter.params.provider.MethodSource;

import kbatch.kafka.storage.Segments;
import kbatch.kafka.storage.Segments.Row;

/**
 * Batches of every magic (0, 1, 2) and every codec each can carry (none, gzip, snappy, lz4; zstd
 * from magic 2), written by Kafka's MemoryRecordsBuilder and read back by Kafka's own record
 * iterators: the JVM reader's rows must be Kafka's, field by field.
 */
class GoldenBatchesTest {
    static Stream<Arguments> magicsAndCodecs() {
        List<Arguments> out = new ArrayList<>();
        for (byte magic = 0; magic <= 2; magic++) {
            for (CompressionType codec : CompressionType.values()) {
                if (codec != CompressionType.ZSTD || magic == 2) { // zstd needs magic 2 (KIP-110)
                    out.add(Arguments.of(magic, codec));
                }
            }
        }
        return out.stream();
    }

    /** Kafka's reading of the bytes, as rows. */
    static List<Row> kafkaRows(byte[] log) {
        List<Row> rows = new ArrayList<>();
        for (RecordBatch b : MemoryRecords.readableRecords(ByteBuffer.wrap(log)).batches()) {
            for (Record r : b) {
                List<String> headers = new ArrayList<>();
                for (Header h : r.headers()) {
                    headers.add(h.key() + "=" + (h.value() == null ? null : new String(h.value())));
                }
                rows.add(new Row(r.offset(), r.timestamp() == RecordBatch.NO_TIMESTAMP ? null : r.timestamp(),
                        b.timestampType().id, text(r.key()), text(r.value()), headers, !r.hasValue(),
                        b.producerId(), b.isControlBatch()));
            }
        }
        return rows;
    }

    static String text(ByteBuffer b) {
        if (b == null) {
            return null;
        }
        byte[] a = new byte[b.remaining()];
        b.duplicate().get(a);
        return new String(a);
    }

    @ParameterizedTest(name = "magic {0}, {1}")
    @MethodSource("magicsAndCodecs")
    void everyRecordAsKafkaReadsIt(byte magic, CompressionType codec) {
        // three batches: offsets 0.., 30.. (a gap, as compaction leaves) and one of a single record
        byte[] log = Segments.concat(Segments.batch(magic, codec, 0, 20), Segments.batch(magic, codec, 30, 11),
                Segments.batch(magic, codec, 41, 1));
        List<Row> kafka = kafkaRows(log);
        assertEquals(32, kafka.size());
        assertEquals(kafka, Segments.read(log, true, null));
    }

    @Test
    void producerFieldsAndTransactionalBatches() {
        byte[] log = Segments.batch((byte) 2, CompressionType.LZ4, 5, 3, 4242L, true);
        List<Row> rows = Segments.read(log, true, null);
        assertEquals(kafkaRows(log), rows);
        assertTrue(rows.stream().allMatch(r -> r.producerId() == 4242L && !r.control()));
    }

    @Test
    void aCorruptBatchIsACrcMismatchAtItsPosition() {
        byte[] first = Segments.batch((byte) 2, CompressionType.NONE, 0, 3);
        byte[] second = Segments.batch((byte) 2, CompressionType.GZIP, 3, 3);
        byte[] log = Segments.concat(first, second);
        log[log.length - 1] ^= 1; // a byte of the second batch's records
        KafkaSegmentsException e = Segments.error(log, true);
        assertEquals("CrcMismatchError", e.errorClass());
        assertEquals(Long.valueOf(first.length), e.position());
        assertEquals(Long.valueOf(3), e.baseOffset());
        assertTrue(e.render().contains("stored crc = "), e.render());
    }

    @Test
    void aLegacyMessageWithAWrongCrcIsACrcMismatch() {
        byte[] log = Segments.batch((byte) 1, CompressionType.NONE, 7, 1);
        log[log.length - 1] ^= 1;
        KafkaSegmentsException e = Segments.error(log, true);
        assertEquals("CrcMismatchError", e.errorClass());
        assertEquals(Long.valueOf(7), e.baseOffset());
    }
}
