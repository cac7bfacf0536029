package kbatch.kafka.storage;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.ByteBuffer;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.HashSet;
import java.util.Iterator;
import java.util.List;
import java.util.Map;
import java.util.Set;

import org.apache.hadoop.fs.FileSystem;

import kbatch.kafka.wire.BatchHeader;
import kbatch.kafka.wire.KafkaSegmentsException;
import kbatch.kafka.wire.RecordBatchDecoder;
import kbatch.kafka.wire.Wire;

/**
 * Where a live partition can be read up to, kept on the driver by a streaming query and advanced
 * incrementally: each call scans only the batches appended since the last one.
 *
 * <ul>
 * <li>the end of the complete batches: the offset after the last batch that is whole on disk (a
 *     partial batch a writer is in the middle of appending is never counted);</li>
 * <li>the stable end: that, or the high watermark when the log directory's
 *     `replication-offset-checkpoint` names the partition and it is lower (a broker's records above
 *     it are not committed to its replicas yet, and a consumer would not see them);</li>
 * <li>for read_committed, the last stable offset below the stable end: the first offset of the
 *     first transaction that has no marker yet (Kafka's LSO), so a read never enters a transaction
 *     whose outcome is unknown.</li>
 * </ul>
 *
 * The transactions are followed batch by batch from the partition's first segment (the first scan of
 * a read_committed stream reads the partition's batch headers once); read_uncommitted needs only the
 * newest segment, scanned from its last `.index` entry.
 */
public final class PartitionTail {
    private final boolean transactions;
    /** failOnDataLoss: a transaction damage leaves undecided fails the read (else it is left out). */
    private final boolean failOnDataLoss;

    // the scan so far: bytes [0, pos) of segment `path` are whole batches
    private String path;
    private long pos;
    private long completeEnd;
    // the transactions followed (open, closed at or above the last stable end asked for, aborted, undecided)
    private Follower follower = new Follower(true);

    public PartitionTail(boolean transactions, boolean failOnDataLoss) {
        this.transactions = transactions;
        this.failOnDataLoss = failOnDataLoss;
    }

    /**
     * A transaction still open where the header pass met bytes it could not read (not the partial
     * tail of the last segment): its COMMIT or ABORT marker may be in them, so whether its records
     * were committed is not known (kbatch.log.fetch.UnknownTxn). It is damage, never a last stable
     * offset: a read_committed read that reaches it fails (failOnDataLoss=false: its records are
     * left out, as an aborted transaction's are).
     */
    public static final class UnknownTxn {
        final long producerId;
        final long firstOffset;
        final long lastOffset;  // the last offset read before the damage
        // the damage: bytes [position, position + size) of path; the next segment's base (null: none)
        final String path;
        final long position;
        final long size;
        final Long nextBase;
        final String why;

        UnknownTxn(long producerId, long firstOffset, long lastOffset, String path, long position, long size,
                   Long nextBase, String why) {
            this.producerId = producerId;
            this.firstOffset = firstOffset;
            this.lastOffset = lastOffset;
            this.path = path;
            this.position = position;
            this.size = size;
            this.nextBase = nextBase;
            this.why = why;
        }

        /** The read path's error where a read_committed read stops at it (kbatch.log.fetch._unknown_range). */
        public KafkaSegmentsException error(String context) {
            return KafkaSegmentsException.unreadableRange(context, path, position, size, lastOffset, nextBase, why
                    + "; the transaction of producer " + producerId + " from offset " + firstOffset
                    + " has no COMMIT or ABORT marker before these bytes: whether it committed is in or behind"
                    + " them, so a read_committed read cannot pass offset " + firstOffset);
        }
    }

    /**
     * The header pass behind read_committed (kbatch.log.fetch._Follower): batches in offset order,
     * per producer the first offset of its transaction with no marker yet (Kafka's
     * currentTxnFirstOffset), the transaction of every ABORT marker. Where it meets bytes it cannot
     * read (a framing error, or bytes after the last whole batch of a segment that is not the last
     * one: the partial tail of the last segment is a live log's end), every transaction open there
     * becomes an {@link UnknownTxn} and is closed, so a later marker is never taken for its.
     */
    public static final class Follower {
        private final RecordBatchDecoder decoder = new RecordBatchDecoder(Wire.DEFAULT_MAX_DECOMPRESSED_BYTES);
        // producer -> first offset of its transaction with no marker yet
        final Map<Long, Long> open = new HashMap<>();
        // {producer, first offset, ABORT marker offset} of every aborted transaction followed
        public final List<long[]> aborted = new ArrayList<>();
        // {first offset, marker offset} of closed transactions (a stream's tail; null: not kept)
        final List<long[]> closed;
        final List<UnknownTxn> unknown = new ArrayList<>();
        // the last offset of the last batch followed (Long.MIN_VALUE: none)
        long lastRead = Long.MIN_VALUE;
        // the scan error the last segment() call met (null: none)
        KafkaSegmentsException scanError;
        // undecided transactions added since the last resolve()
        boolean fresh;

        public Follower(boolean keepClosed) {
            closed = keepClosed ? new ArrayList<>() : null;
        }

        /** Follow one batch (`b[p]` holds it whole; `delta` maps buffer indexes to file positions). */
        void batch(BatchHeader h, ByteBuffer b, int p, long delta) {
            if (h.isTransactional() && h.producerId >= 0) {
                if (!h.isControl()) {
                    open.putIfAbsent(h.producerId, h.baseOffset);
                } else {
                    int type = decoder.controlType(b, p, delta, h);
                    if (type == Wire.CONTROL_ABORT || type == Wire.CONTROL_COMMIT) {
                        Long first = open.remove(h.producerId);
                        if (first != null && closed != null) {
                            closed.add(new long[] {first, h.baseOffset});
                        }
                        if (type == Wire.CONTROL_ABORT) {
                            aborted.add(new long[] {h.producerId, first == null ? h.baseOffset : first,
                                h.baseOffset});
                        }
                    }
                }
            }
            lastRead = h.lastOffset;
        }

        /**
         * Follow bytes [from, seg.size) of a segment; `nextBase`: the next segment's base offset
         * (null: this is the last one). Returns where its whole batches end. `also` sees each batch
         * after it was followed (null: none).
         */
        public long segment(FileSystem fs, LogDirectory.Segment seg, long from, Long nextBase, HeaderScan.Visitor also)
                throws IOException {
            scanError = null;
            if (seg.size <= from) {
                return from;
            }
            long[] end = {from};
            try (SegmentReader.Source src = new LogDirectory.FsSource(fs, seg.path)) {
                try {
                    HeaderScan.scan(src, from, seg.size, (h, b, p, delta) -> {
                        batch(h, b, p, delta);
                        end[0] = h.position + h.size;
                        return also == null || also.visit(h, b, p, delta);
                    });
                } catch (KafkaSegmentsException e) {
                    damage(seg.path, e.position() == null ? end[0] : e.position(), seg.size, nextBase, e.render());
                    scanError = e;
                    return end[0];
                }
                if (nextBase != null && end[0] < seg.size) { // not the last segment: no write is in progress there
                    damage(seg.path, end[0], seg.size, nextBase,
                            SegmentReader.incompleteBatch(src, seg.size, end[0], "the segment"));
                }
            } catch (UncheckedIOException e) {
                throw e.getCause();
            }
            return end[0];
        }

        /** Bytes from `position` of `path` could not be read: the transactions open there are undecided. */
        void damage(String path, long position, long fileSize, Long nextBase, String why) {
            List<Map.Entry<Long, Long>> here = new ArrayList<>(open.entrySet());
            here.sort(Map.Entry.comparingByValue());
            for (Map.Entry<Long, Long> t : here) {
                unknown.add(new UnknownTxn(t.getKey(), t.getValue(), lastRead, path, position,
                        Math.max(0, fileSize - position), nextBase, why));
                fresh = true;
            }
            open.clear();
        }

        /**
         * The entries ({producer, first offset, marker offset}) of every `.txnindex` file there is:
         * an undecided transaction one lists is aborted, as the broker recorded it, whatever the
         * damage hid (even where not every segment has a file).
         */
        public void resolve(List<long[]> listed) {
            fresh = false;
            if (unknown.isEmpty()) {
                return;
            }
            Map<String, long[]> byFirst = new HashMap<>();
            for (long[] t : listed) {
                byFirst.putIfAbsent(t[0] + ":" + t[1], t);
            }
            Set<String> known = new HashSet<>();
            for (long[] t : aborted) {
                known.add(t[0] + ":" + t[1]);
            }
            for (Iterator<UnknownTxn> it = unknown.iterator(); it.hasNext(); ) {
                UnknownTxn u = it.next();
                String k = u.producerId + ":" + u.firstOffset;
                long[] t = byFirst.get(k);
                if (known.contains(k) || t != null) {
                    if (known.add(k)) {
                        aborted.add(t);
                    }
                    it.remove();
                }
            }
        }

        /** The first offset of the earliest open transaction, with the undecided ones when `undecided`; null: none. */
        public Long firstUnstable(boolean undecided) {
            Long first = open.isEmpty() ? null : java.util.Collections.min(open.values());
            if (undecided) {
                for (UnknownTxn u : unknown) {
                    first = first == null ? u.firstOffset : Math.min(first, u.firstOffset);
                }
            }
            return first;
        }

        /** The undecided transaction whose first offset is `offset` (where a read stopping there fails), or null. */
        public UnknownTxn undecidedAt(long offset) {
            for (UnknownTxn u : unknown) {
                if (u.firstOffset == offset) {
                    return u;
                }
            }
            return null;
        }

        /**
         * The undecided transactions as {producer, first offset, last offset read}: with
         * failOnDataLoss=false their data batches are left out as an aborted transaction's are
         * (kbatch.log.fetch.AbortedFilter).
         */
        public List<long[]> undecided() {
            List<long[]> out = new ArrayList<>();
            for (UnknownTxn u : unknown) {
                out.add(new long[] {u.producerId, u.firstOffset, u.lastOffset});
            }
            return out;
        }
    }

    /** Scan what was appended since the last call; the segments as listed now. */
    public void advance(FileSystem fs, LogDirectory.TopicPartition tp) throws IOException {
        List<LogDirectory.Segment> segs = tp.segments;
        int k = -1;
        if (path != null) {
            for (int i = 0; i < segs.size(); i++) {
                if (segs.get(i).path.equals(path)) {
                    k = i;
                }
            }
            if (k < 0 || segs.get(k).size < pos) { // deleted or cut under us: start again
                reset();
            }
        }
        if (segs.isEmpty()) {
            return;
        }
        resolve(fs, tp); // damage met by a call that failed at the active segment's (scan)
        if (path == null) {
            k = transactions ? 0 : segs.size() - 1;
            LogDirectory.Segment seg = segs.get(k);
            path = seg.path;
            pos = 0;
            completeEnd = seg.baseOffset;
            if (!transactions && seg.size > 0) {
                OffsetIndex idx = OffsetIndex.forPlanning(fs, seg, false);
                if (idx.size() > 0 && idx.values[idx.size() - 1] < seg.size) {
                    pos = idx.values[idx.size() - 1];
                }
            }
        }
        while (true) {
            LogDirectory.Segment seg = segs.get(k);
            scan(fs, seg, k + 1 < segs.size() ? segs.get(k + 1).baseOffset : null);
            if (k + 1 >= segs.size()) {
                break;
            }
            // a rolled segment does not grow again: go on to the next one
            k++;
            path = segs.get(k).path;
            pos = 0;
            completeEnd = Math.max(completeEnd, segs.get(k).baseOffset);
        }
        resolve(fs, tp);
    }

    /** Transactions damage left undecided since the last call: what the `.txnindex` files say of them. */
    private void resolve(FileSystem fs, LogDirectory.TopicPartition tp) throws IOException {
        if (follower.fresh) {
            follower.resolve(AbortedTransactions.txnIndexEntries(fs, tp, null));
        }
    }

    private void reset() {
        path = null;
        pos = 0;
        completeEnd = 0;
        follower = new Follower(true);
    }

    /** Follow segment `seg` from `pos` on; `nextBase`: the next segment's base offset (null: it is the last). */
    private void scan(FileSystem fs, LogDirectory.Segment seg, Long nextBase) throws IOException {
        HeaderScan.Visitor each = (h, b, p, delta) -> {
            pos = h.position + h.size;
            completeEnd = Math.max(completeEnd, h.lastOffset + 1);
            return true;
        };
        if (transactions) { // bytes it cannot read are damage that may hide markers (Follower)
            follower.segment(fs, seg, pos, nextBase, each);
            if (nextBase == null && follower.scanError != null) {
                // in the active segment no read can pass them either: the query fails, as without
                // transactions, rather than wait at them for ever
                throw follower.scanError;
            }
            return;
        }
        if (seg.size <= pos) {
            return;
        }
        try (SegmentReader.Source src = new LogDirectory.FsSource(fs, seg.path)) {
            HeaderScan.scan(src, pos, seg.size, each);
        } catch (UncheckedIOException e) {
            throw e.getCause();
        }
    }

    /**
     * The aborted transactions scanned so far, by the rule of Planner's scan of the log (per
     * producer, from its first transactional batch after its previous marker to an ABORT marker);
     * null unless this tail follows transactions from the partition's first segment.
     */
    public AbortedTransactions aborted() {
        if (!transactions || path == null) {
            return null;
        }
        List<long[]> out = new ArrayList<>(follower.aborted);
        if (!failOnDataLoss) {
            out.addAll(follower.undecided());
        }
        return AbortedTransactions.of(out);
    }

    /** The offset after the last whole batch on disk. */
    public long completeEnd() {
        return completeEnd;
    }

    /**
     * Where a read may end: the end of the complete batches, at most the high watermark (null: none
     * known), and for read_committed before the first transaction still open at that point. One
     * that damage leaves undecided is no last stable offset: with failOnDataLoss a read that would
     * stop there fails, naming the damage (kbatch.log.fetch); without, its records are left out.
     */
    public long stableEnd(Long highWatermark, String context) {
        long end = highWatermark == null ? completeEnd : Math.min(completeEnd, highWatermark);
        if (!transactions) {
            return end;
        }
        Long unstable = follower.firstUnstable(failOnDataLoss);
        if (unstable != null && unstable < end && failOnDataLoss) {
            UnknownTxn u = follower.undecidedAt(unstable);
            if (u != null) {
                throw u.error(context);
            }
        }
        long lso = unstable == null ? end : Math.min(end, unstable);
        for (Iterator<long[]> it = follower.closed.iterator(); it.hasNext(); ) {
            long[] t = it.next();
            if (t[1] < end) {
                it.remove(); // its marker is below the stable end: it can no longer hold a read back
            } else if (t[0] < lso) {
                lso = t[0]; // its marker is above the high watermark: not yet decided for a consumer
            }
        }
        return lso;
    }
}
