package kbatch.kafka.storage;

import static org.junit.jupiter.api.Assertions.assertEquals;

import java.nio.ByteBuffer;
import java.util.Arrays;

import org.apache.kafka.common.record.CompressionType;
import org.junit.jupiter.api.Test;

import kbatch.kafka.wire.KafkaSegmentsException;

/**
 * What the bytes after a segment's last whole batch are, in the words of the Python read path
 * (kbatch.record.batch.incomplete_batch, the one home of those messages): a partial batch at the
 * end (a torn write), a bad length field, or bytes that are not a batch. A segment that is not the
 * partition's last raises them (TruncatedDataError at the position where the whole batches stop);
 * the active segment's partial tail is left unread, as Kafka does. The texts were checked against
 * incomplete_batch over the same bytes.
 */
class IncompleteBatchTest {
    /** A whole batch of 4 records (119 bytes: its size is part of the expected texts). */
    static final byte[] WHOLE = Segments.batch((byte) 2, CompressionType.NONE, 0, 4);
    static final byte[] NEXT = Segments.batch((byte) 2, CompressionType.NONE, 4, 4);

    static String reason(byte[] log) {
        KafkaSegmentsException e = Segments.error(log, true);
        assertEquals("TruncatedDataError", e.errorClass(), e.getMessage());
        assertEquals(Long.valueOf(WHOLE.length), e.position(), e.getMessage());
        return e.reason();
    }

    @Test
    void theGoldenBatchIsTheSizeTheTextsSay() {
        assertEquals(119, WHOLE.length);
        assertEquals(119, NEXT.length);
    }

    @Test
    void fewerBytesThanTheOffsetAndLengthFields() {
        byte[] log = Segments.concat(WHOLE, Arrays.copyOf(NEXT, 5));
        assertEquals("a partial batch at the end of the data: 5 bytes at byte 119, fewer than a batch's offset and "
                + "length fields (12 bytes)", reason(log));
    }

    @Test
    void aPartialBatchAtTheEnd() {
        byte[] log = Segments.concat(WHOLE, Arrays.copyOf(NEXT, 40));
        assertEquals("a partial batch at the end of the data: batch length 107 at byte 119 runs past its end "
                + "(159 bytes; 28 of the 107 bytes are there)", reason(log));
        // the active segment: the torn write is not read, the whole batch before it is
        assertEquals(4, Segments.read(log, false, null).size());
    }

    @Test
    void bytesThatAreNotABatch() {
        byte[] junk = Arrays.copyOf(NEXT, 20);
        junk[16] = 9; // the magic byte
        assertEquals("20 bytes at byte 119 of the data are not a batch: magic byte 9, length field 107",
                reason(Segments.concat(WHOLE, junk)));
    }

    @Test
    void aLengthFieldSmallerThanAnyBatch() {
        byte[] junk = Arrays.copyOf(NEXT, 15);
        ByteBuffer.wrap(junk).putInt(8, 3);
        assertEquals("batch length 3 at byte 119 of the data is smaller than any batch (14 bytes): a bad length field",
                reason(Segments.concat(WHOLE, junk)));
    }

    @Test
    void aLengthFieldThatRunsPastTheEndWithAValidBatchBehindIt() {
        byte[] bad = NEXT.clone();
        ByteBuffer.wrap(bad).putInt(8, 100_000);
        byte[] after = Segments.batch((byte) 2, CompressionType.NONE, 8, 4);
        assertEquals("batch length 100000 at byte 119 of the data runs past its end (357 bytes), but a valid batch "
                + "starts at byte 238: a bad length field, not a partial batch", reason(Segments.concat(WHOLE, bad, after)));
    }
}
