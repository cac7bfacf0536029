package kbatch.kafka.storage;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.Iterator;
import java.util.List;
import java.util.Map;

import org.apache.hadoop.fs.FileSystem;

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
    private final RecordBatchDecoder decoder = new RecordBatchDecoder(Wire.DEFAULT_MAX_DECOMPRESSED_BYTES);

    // the scan so far: bytes [0, pos) of segment `path` are whole batches
    private String path;
    private long pos;
    private long completeEnd;
    // producer -> first offset of its transaction with no marker yet (as of completeEnd)
    private final Map<Long, Long> open = new HashMap<>();
    // {first offset, marker offset} of transactions closed at or above the last stable end asked for
    private final List<long[]> closed = new ArrayList<>();
    // {producer, first offset, ABORT marker offset} of every aborted transaction scanned
    private final List<long[]> aborted = new ArrayList<>();

    public PartitionTail(boolean transactions) {
        this.transactions = transactions;
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
            scan(fs, seg);
            if (k + 1 >= segs.size()) {
                break;
            }
            // a rolled segment does not grow again: go on to the next one
            k++;
            path = segs.get(k).path;
            pos = 0;
            completeEnd = Math.max(completeEnd, segs.get(k).baseOffset);
        }
    }

    private void reset() {
        path = null;
        pos = 0;
        completeEnd = 0;
        open.clear();
        closed.clear();
        aborted.clear();
    }

    private void scan(FileSystem fs, LogDirectory.Segment seg) throws IOException {
        if (seg.size <= pos) {
            return;
        }
        try (SegmentReader.Source src = new LogDirectory.FsSource(fs, seg.path)) {
            HeaderScan.scan(src, pos, seg.size, (h, b, p, delta) -> {
                if (transactions && h.isTransactional()) {
                    if (!h.isControl()) {
                        open.putIfAbsent(h.producerId, h.baseOffset);
                    } else {
                        int type = decoder.controlType(b, p, delta, h);
                        if (type == Wire.CONTROL_ABORT || type == Wire.CONTROL_COMMIT) {
                            Long first = open.remove(h.producerId);
                            if (first != null) {
                                closed.add(new long[] {first, h.baseOffset});
                            }
                            if (type == Wire.CONTROL_ABORT) {
                                aborted.add(new long[] {h.producerId, first == null ? h.baseOffset : first,
                                    h.baseOffset});
                            }
                        }
                    }
                }
                pos = h.position + h.size;
                completeEnd = Math.max(completeEnd, h.lastOffset + 1);
                return true;
            });
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
        return transactions && path != null ? AbortedTransactions.of(new ArrayList<>(aborted)) : null;
    }

    /** The offset after the last whole batch on disk. */
    public long completeEnd() {
        return completeEnd;
    }

    /**
     * Where a read may end: the end of the complete batches, at most the high watermark (null: none
     * known), and for read_committed before the first transaction still open at that point.
     */
    public long stableEnd(Long highWatermark) {
        long end = highWatermark == null ? completeEnd : Math.min(completeEnd, highWatermark);
        if (!transactions) {
            return end;
        }
        long lso = end;
        for (long first : open.values()) {
            if (first < lso) {
                lso = first;
            }
        }
        for (Iterator<long[]> it = closed.iterator(); it.hasNext(); ) {
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
