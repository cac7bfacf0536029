package kbatch.kafka.storage;

import java.io.IOException;
import java.io.Serializable;
import java.util.ArrayList;
import java.util.List;

import org.apache.hadoop.fs.FileSystem;

import kbatch.kafka.wire.BatchHeader;
import kbatch.kafka.wire.KafkaSegmentsException;
import kbatch.kafka.wire.Wire;

/**
 * The aborted transactions of one partition, as `.txnindex` holds them (AbortedTxn: producer id,
 * first offset, last offset = the ABORT marker's offset; kafka-format.md 3 and 5.5). A
 * read_committed consumer leaves out the transactional batches of a producer between the first
 * offset and the marker of one of its aborted transactions.
 */
public final class AbortedTransactions implements Serializable {
    private static final long serialVersionUID = 1L;

    final long[] producerIds;
    final long[] firstOffsets;
    final long[] lastOffsets;

    AbortedTransactions(long[] producerIds, long[] firstOffsets, long[] lastOffsets) {
        this.producerIds = producerIds;
        this.firstOffsets = firstOffsets;
        this.lastOffsets = lastOffsets;
    }

    public static AbortedTransactions of(List<long[]> entries) {
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
    public static AbortedTransactions fromIndexAndMarkers(List<long[]> indexed, List<long[]> derived) {
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
        return of(all);
    }

    /**
     * The entries {producer id, first offset, last offset} of the partition's `.txnindex` files
     * that are there, in segment order (a bad file is an error, as a broker reading it);
     * `allIndexed[0]` (when not null): whether every segment has one.
     */
    public static List<long[]> txnIndexEntries(FileSystem fs, LogDirectory.TopicPartition tp, boolean[] allIndexed)
            throws IOException {
        List<long[]> entries = new ArrayList<>();
        boolean all = !tp.segments.isEmpty();
        for (LogDirectory.Segment seg : tp.segments) {
            byte[] raw = seg.readIndex(fs, ".txnindex");
            if (raw == null) {
                all = false;
                continue;
            }
            String path = seg.indexPath(".txnindex");
            if (raw.length % Wire.TXN_INDEX_ENTRY_SIZE != 0) {
                throw KafkaSegmentsException.corruptIndex("Transaction index " + path
                        + " is corrupt, its size is not a multiple of " + Wire.TXN_INDEX_ENTRY_SIZE,
                        (long) (raw.length - raw.length % Wire.TXN_INDEX_ENTRY_SIZE),
                        "a multiple of " + Wire.TXN_INDEX_ENTRY_SIZE + " bytes", raw.length + " bytes");
            }
            for (int p = 0; p < raw.length; p += Wire.TXN_INDEX_ENTRY_SIZE) {
                int version = Wire.i16(raw, p);
                if (version != 0) {
                    throw KafkaSegmentsException.corruptIndex("Unexpected aborted transaction version in " + path,
                            (long) p, 0, version);
                }
                entries.add(new long[] {Wire.i64(raw, p + 2), Wire.i64(raw, p + 10), Wire.i64(raw, p + 18)});
            }
        }
        if (allIndexed != null) {
            allIndexed[0] = all;
        }
        return entries;
    }

    /** Those overlapping offsets [from, to) (TransactionIndex.collectAbortedTxns). */
    public AbortedTransactions overlapping(long from, long to) {
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

    /** The entries as text: equal for equal lists (a key of remembered summaries). */
    public String key() {
        StringBuilder b = new StringBuilder();
        for (int i = 0; i < producerIds.length; i++) {
            b.append(producerIds[i]).append(':').append(firstOffsets[i]).append('-').append(lastOffsets[i]).append(',');
        }
        return b.toString();
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
