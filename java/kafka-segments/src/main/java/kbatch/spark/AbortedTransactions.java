package kbatch.spark;

import java.io.Serializable;
import java.util.ArrayList;
import java.util.List;

/**
 * The aborted transactions of one partition, as `.txnindex` holds them (AbortedTxn: producer id,
 * first offset, last offset = the ABORT marker's offset; kafka-format.md 3 and 5.5). A
 * read_committed consumer leaves out the transactional batches of a producer between the first
 * offset and the marker of one of its aborted transactions.
 */
final class AbortedTransactions implements Serializable {
    private static final long serialVersionUID = 1L;

    final long[] producerIds;
    final long[] firstOffsets;
    final long[] lastOffsets;

    AbortedTransactions(long[] producerIds, long[] firstOffsets, long[] lastOffsets) {
        this.producerIds = producerIds;
        this.firstOffsets = firstOffsets;
        this.lastOffsets = lastOffsets;
    }

    static AbortedTransactions of(List<long[]> entries) {
        int n = entries.size();
        long[] p = new long[n];
        long[] f = new long[n];
        long[] l = new long[n];
        for (int i = 0; i < n; i++) {
            p[i] = entries.get(i)[0];
            f[i] = entries.get(i)[1];
            l[i] = entries.get(i)[2];
        }
        return new AbortedTransactions(p, f, l);
    }

    /**
     * The `.txnindex` entries, plus every ABORT marker's transaction the header pass derived that
     * they do not list (same producer and marker offset): a stale or cut index must not let the
     * records of an aborted transaction through (kbatch.log.fetch.transaction_state, the same rule).
     */
    static List<long[]> fromIndexAndMarkers(List<long[]> indexed, List<long[]> derived) {
        java.util.Set<String> listed = new java.util.HashSet<>();
        for (long[] e : indexed) {
            listed.add(e[0] + ":" + e[2]);
        }
        List<long[]> all = new ArrayList<>(indexed);
        for (long[] e : derived) {
            if (!listed.contains(e[0] + ":" + e[2])) {
                all.add(e);
            }
        }
        return all;
    }

    /** Those overlapping offsets [from, to) (TransactionIndex.collectAbortedTxns). */
    AbortedTransactions overlapping(long from, long to) {
        List<long[]> keep = new ArrayList<>();
        for (int i = 0; i < producerIds.length; i++) {
            if (lastOffsets[i] >= from && firstOffsets[i] < to) {
                keep.add(new long[] {producerIds[i], firstOffsets[i], lastOffsets[i]});
            }
        }
        return of(keep);
    }

    int size() {
        return producerIds.length;
    }

    /** Whether a transactional batch of `producerId` starting at `offset` belongs to an aborted transaction. */
    boolean isAborted(long producerId, long offset) {
        for (int i = 0; i < producerIds.length; i++) {
            if (producerIds[i] == producerId && firstOffsets[i] <= offset && offset <= lastOffsets[i]) {
                return true;
            }
        }
        return false;
    }

    /**
     * A transaction marker read from the log must agree with the list: an ABORT marker is the last
     * offset of an aborted transaction of its producer, a COMMIT marker is not. An index that
     * contradicts the log gives no answer (DESIGN.md storage invariants).
     */
    void checkMarker(BatchHeader h, int type) {
        if (type != Wire.CONTROL_ABORT && type != Wire.CONTROL_COMMIT) {
            return;
        }
        boolean listed = false;
        for (int i = 0; i < producerIds.length; i++) {
            listed |= producerIds[i] == h.producerId && lastOffsets[i] == h.baseOffset;
        }
        if (listed != (type == Wire.CONTROL_ABORT)) {
            throw KafkaSegmentsException.corruptIndex(
                    "The transaction index contradicts the log", h.position,
                    (listed ? "an ABORT" : "a COMMIT") + " marker of producer " + h.producerId + " at offset "
                            + h.baseOffset,
                    type == Wire.CONTROL_ABORT ? "ABORT" : "COMMIT").at(h.position, h.baseOffset);
        }
    }
}
