package kbatch.kafka.storage;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.List;

import org.apache.kafka.common.record.CompressionType;
import org.apache.kafka.common.record.ControlRecordType;
import org.apache.kafka.common.record.EndTransactionMarker;
import org.apache.kafka.common.record.MemoryRecords;
import org.apache.kafka.common.record.RecordBatch;
import org.junit.jupiter.api.Test;

import kbatch.kafka.wire.KafkaSegmentsException;

/**
 * read_committed's rules (kafka-format.md 5.5; kbatch.log.fetch.transaction_state): the batches of
 * an aborted transaction are left out, the `.txnindex` entries are completed by the ABORT markers
 * the log holds, and a marker that contradicts the list is a CorruptIndexError, not an answer.
 */
class AbortedTransactionsTest {
    static final long ABORTED = 7;
    static final long COMMITTED = 8;

    static byte[] marker(long offset, long producerId, ControlRecordType type) {
        return Segments.bytes(MemoryRecords.withEndTransactionMarker(offset, Segments.T0, RecordBatch.NO_PARTITION_LEADER_EPOCH,
                producerId, (short) 0, new EndTransactionMarker(type, 0)));
    }

    /** Producer 7's transaction at offsets 0-2 aborted at 3; producer 8's at 4-5 committed at 6; 7-8 plain. */
    static final byte[] LOG = Segments.concat(
            Segments.batch((byte) 2, CompressionType.NONE, 0, 3, ABORTED, true),
            marker(3, ABORTED, ControlRecordType.ABORT),
            Segments.batch((byte) 2, CompressionType.ZSTD, 4, 2, COMMITTED, true),
            marker(6, COMMITTED, ControlRecordType.COMMIT),
            Segments.batch((byte) 2, CompressionType.NONE, 7, 2));

    static List<Long> offsets(AbortedTransactions aborted) {
        return Segments.read(LOG, true, aborted).stream().map(Segments.Row::offset).toList();
    }

    @Test
    void readUncommittedGivesEveryRecordAndNoMarker() {
        assertEquals(List.of(0L, 1L, 2L, 4L, 5L, 7L, 8L), offsets(null));
    }

    @Test
    void readCommittedLeavesOutTheAbortedTransaction() {
        AbortedTransactions indexed = AbortedTransactions.of(List.of(new long[] {ABORTED, 0, 3}));
        assertEquals(List.of(4L, 5L, 7L, 8L), offsets(indexed));
    }

    @Test
    void anAbortMarkerTheIndexDoesNotListStillAbortsItsTransaction() {
        // a stale or cut .txnindex: the header pass derived (producer, first offset, marker offset)
        AbortedTransactions all = AbortedTransactions.fromIndexAndMarkers(List.of(), List.of(new long[] {ABORTED, 0, 3}));
        assertEquals(List.of(4L, 5L, 7L, 8L), offsets(all));
    }

    @Test
    void anEntryBothListAndDeriveIsKeptOnce() {
        AbortedTransactions all = AbortedTransactions.fromIndexAndMarkers(
                List.of(new long[] {ABORTED, 0, 3}, new long[] {9, 20, 30}),
                List.of(new long[] {ABORTED, 1, 3}, new long[] {9, 40, 50}));
        assertEquals(3, all.size());
        assertEquals(0, all.firstOffsets[0]); // the index's first offset wins for the same transaction
        assertEquals(50, all.lastOffsets[2]);
    }

    @Test
    void theAbortedRangeIsFirstOffsetToMarkerOfTheSameProducer() {
        AbortedTransactions a = AbortedTransactions.of(List.of(new long[] {ABORTED, 10, 20}));
        assertTrue(a.isAborted(ABORTED, 10));
        assertTrue(a.isAborted(ABORTED, 20));
        assertFalse(a.isAborted(ABORTED, 9));
        assertFalse(a.isAborted(ABORTED, 21));
        assertFalse(a.isAborted(COMMITTED, 15));
    }

    @Test
    void overlappingKeepsTransactionsThatTouchTheRange() {
        AbortedTransactions a = AbortedTransactions.of(List.of(new long[] {1, 0, 5}, new long[] {2, 10, 20},
                new long[] {3, 30, 40}));
        AbortedTransactions in = a.overlapping(5, 30); // [5, 30): the marker at 5 counts, the start at 30 does not
        assertEquals(2, in.size());
        assertEquals(1, in.producerIds[0]);
        assertEquals(2, in.producerIds[1]);
    }

    @Test
    void aListThatContradictsTheLogIsACorruptIndex() {
        // the index says producer 8's transaction was aborted at 6, where the log has its COMMIT marker
        AbortedTransactions wrong = AbortedTransactions.of(List.of(new long[] {ABORTED, 0, 3},
                new long[] {COMMITTED, 4, 6}));
        KafkaSegmentsException e = assertThrows(KafkaSegmentsException.class, () -> offsets(wrong));
        assertEquals("CorruptIndexError", e.errorClass());
        // kbatch/log/segment_plan.py's words: expected what the index says, found what the log has
        assertEquals("The transaction index contradicts the log: expected an ABORT marker of producer 8 at offset 6, "
                + "found COMMIT (at byte " + e.position() + ", in batch with base offset 6)", e.render());
    }
}
