package kbatch.spark;

import java.io.IOException;
import java.nio.ByteBuffer;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.regex.Pattern;

import org.apache.hadoop.fs.FileSystem;

import kbatch.kafka.storage.AbortedTransactions;
import kbatch.kafka.storage.HeaderScan;
import kbatch.kafka.storage.LogDirectory;
import kbatch.kafka.storage.OffsetIndex;
import kbatch.kafka.storage.PartitionTail;
import kbatch.kafka.storage.SegmentReader;
import kbatch.kafka.wire.BatchHeader;
import kbatch.kafka.wire.KafkaSegmentsException;
import kbatch.kafka.wire.RecordBatchDecoder;
import kbatch.kafka.wire.RecordColumns;
import kbatch.kafka.wire.Wire;

/**
 * Planning a read on the driver: partitions, their offset bounds (options and pushed filters;
 * timestamps resolved through `.timeindex`/`.index` as Kafka's offsetsForTimes), and the byte
 * ranges of segments that hold them (split at `.index` batch boundaries), so skipped bytes are
 * never read. The same answers as kbatch.log.segment_plan and KafkaSegmentsReader._bounds; time lookups
 * follow kbatch.Log (Kafka's UnifiedLog/LogSegment rules).
 */
final class Planner {
    private final FileSystem fs;
    private final ReadOptions options;
    private final RecordBatchDecoder decoder = new RecordBatchDecoder(Wire.DEFAULT_MAX_DECOMPRESSED_BYTES);

    // narrowed by pushed filters
    Set<Integer> partitionsIn;
    Set<String> topicsIn;
    /** A batch read: a root without partition folders is an error (a stream waits for them). */
    boolean requirePartitions;
    Long offsetLo;  // inclusive
    Long offsetHi;  // exclusive
    Long timestampLo;  // ms: rows before the first offset with a timestamp >= it are skipped

    Planner(FileSystem fs, ReadOptions options) {
        this.fs = fs;
        this.options = options;
    }

    List<SegmentSlice> plan() throws IOException {
        List<SegmentSlice> out = new ArrayList<>();
        for (Range r : ranges()) {
            out.addAll(planPartition(r.tp, r.start, r.end, options.maxPartitionBytes(), r.aborted));
        }
        return out;
    }

    /** One partition's offset bounds [start, end) (null: unbounded) and its aborted transactions. */
    static final class Range {
        final LogDirectory.TopicPartition tp;
        final Long start;
        final Long end;
        final AbortedTransactions aborted;

        Range(LogDirectory.TopicPartition tp, Long start, Long end, AbortedTransactions aborted) {
            this.tp = tp;
            this.start = start;
            this.end = end;
            this.aborted = aborted;
        }
    }

    /** The partitions to read, each with its bounds (options, pushed filters, the last stable offset). */
    List<Range> ranges() throws IOException {
        Set<String> topics = options.topics();
        if (topicsIn != null) {
            if (topics == null) {
                topics = topicsIn;
            } else {
                topics.retainAll(topicsIn);
            }
        }
        String pattern = options.topicPattern();
        boolean readCommitted = options.readCommitted();
        List<Range> out = new ArrayList<>();
        for (LogDirectory.TopicPartition tp : LogDirectory.list(fs, options.path(), topics,
                pattern == null ? null : Pattern.compile(pattern), requirePartitions,
                options.bool("includeInternalTopics", false))) {
            if (partitionsIn != null && !partitionsIn.contains(tp.partition)) {
                continue;
            }
            Long[] b = bounds(tp);
            AbortedTransactions aborted = readCommitted ? abortedTransactions(tp) : null;
            Long unstable = readCommitted ? firstUnstable.get(tp.path) : null;
            if (unstable != null) { // read_committed stops at the last stable offset (kbatch.log.fetch)
                KafkaSegmentsException undecided = b[1] == null || unstable < b[1] ? undecidedAt(tp, unstable) : null;
                if (undecided != null) { // damage hiding a marker is no last stable offset: fail, as read_log raises
                    throw undecided;
                }
                b[1] = b[1] == null ? unstable : Math.min(b[1], unstable);
            }
            if (b[0] != null && b[1] != null && b[1] <= b[0]) {
                continue;
            }
            out.add(new Range(tp, b[0], b[1], aborted));
        }
        return out;
    }

    // ------------------------------------------------------------------ bounds (datasource._bounds)
    Long[] bounds(LogDirectory.TopicPartition tp) throws IOException {
        Long start = null;
        Long end = null;
        String startTs = options.get("startingTimestamp");
        String startByTs = options.get("startingOffsetsByTimestamp");
        String startOffs = options.get("startingOffsets");
        if (startTs != null) {
            start = offsetForTimeOrEnd(tp, parseLong("startingTimestamp", startTs));
        } else if (startByTs != null) {
            Long ts = lookup(ReadOptions.json("startingOffsetsByTimestamp", startByTs), tp);
            if (ts != null) {
                start = offsetForTimeOrEnd(tp, ts);
            }
        } else if (startOffs != null && !startOffs.trim().equalsIgnoreCase("earliest")) {
            if (startOffs.trim().equalsIgnoreCase("latest")) {
                start = endOffset(tp);
            } else {
                Long v = lookup(ReadOptions.json("startingOffsets", startOffs), tp);
                long x = v == null ? -2 : v;
                start = x == -2 ? null : (x == -1 ? endOffset(tp) : x);
            }
        }
        String endTs = options.get("endingTimestamp");
        String endByTs = options.get("endingOffsetsByTimestamp");
        String endOffs = options.get("endingOffsets");
        if (endTs != null) {
            end = offsetForTimeOrEnd(tp, parseLong("endingTimestamp", endTs));
        } else if (endByTs != null) {
            Long ts = lookup(ReadOptions.json("endingOffsetsByTimestamp", endByTs), tp);
            if (ts != null) {
                end = offsetForTimeOrEnd(tp, ts);
            }
        } else if (endOffs != null && !endOffs.trim().equalsIgnoreCase("latest")) {
            Long v = lookup(ReadOptions.json("endingOffsets", endOffs), tp);
            long x = v == null ? -1 : v;
            end = x == -1 ? null : x;
        }
        if (offsetLo != null) {
            start = start == null ? offsetLo : Math.max(start, offsetLo);
        }
        if (offsetHi != null) {
            end = end == null ? offsetHi : Math.min(end, offsetHi);
        }
        if (timestampLo != null) {
            long t = offsetForTimeOrEnd(tp, timestampLo);
            start = start == null ? t : Math.max(start, t);
        }
        return new Long[] {start, end};
    }

    private static long parseLong(String name, String v) {
        try {
            return Long.parseLong(v.trim());
        } catch (NumberFormatException e) {
            throw KafkaSegmentsException.invalidRequest("kafka-segments: option " + name + " is not an integer",
                    "milliseconds since the epoch", v);
        }
    }

    private static Long lookup(Map<String, Map<Integer, Long>> m, LogDirectory.TopicPartition tp) {
        Map<Integer, Long> parts = m.get(tp.topic);
        return parts == null ? null : parts.get(tp.partition);
    }

    private long offsetForTimeOrEnd(LogDirectory.TopicPartition tp, long ts) throws IOException {
        long[] found = offsetForTime(tp, ts);
        return found == null ? endOffset(tp) : found[0];
    }

    // ------------------------------------------------------------------ end offset (_plan.end_offset)
    private final Map<String, Long> endOffsets = new HashMap<>();

    long endOffset(LogDirectory.TopicPartition tp) throws IOException {
        Long cached = endOffsets.get(tp.path);
        if (cached != null) {
            return cached;
        }
        long result = tp.segments.isEmpty() ? 0 : tp.segments.get(0).baseOffset;
        for (int k = tp.segments.size() - 1; k >= 0; k--) {
            LogDirectory.Segment seg = tp.segments.get(k);
            OffsetIndex idx = planIndex(seg);
            long from = idx.size() > 0 ? idx.values[idx.size() - 1] : 0;
            long[] last = {Long.MIN_VALUE};
            boolean[] any = {false};
            try (SegmentReader.Source src = new LogDirectory.FsSource(fs, seg.path)) {
                HeaderScan.scan(src, from, seg.size, (h, b, p, d) -> {
                    last[0] = h.lastOffset;
                    any[0] = true;
                    return true;
                });
            }
            if (any[0]) {
                result = last[0] + 1;
                break;
            }
        }
        endOffsets.put(tp.path, result);
        return result;
    }

    private OffsetIndex planIndex(LogDirectory.Segment seg) throws IOException {
        if (seg.planIndex == null) {
            seg.planIndex = OffsetIndex.forPlanning(fs, seg, false);
        }
        return seg.planIndex;
    }

    // ------------------------------------------------------------------ offsets for times (kbatch.Log)
    /**
     * {offset, timestamp} of the first record of the partition with a timestamp >= target (any
     * int64), or null: the first segment whose largest timestamp >= target, then its time index,
     * offset index and a scan of batches from there (Kafka's fetchOffsetByTimestamp).
     */
    long[] offsetForTime(LogDirectory.TopicPartition tp, long target) throws IOException {
        if (tp.segments.isEmpty()) {
            return null;
        }
        long logStart = tp.segments.get(0).baseOffset;
        for (LogDirectory.Segment seg : tp.segments) {
            OffsetIndex offsets = OffsetIndex.forLookup(fs, seg, false);
            OffsetIndex times = OffsetIndex.forLookup(fs, seg, true);
            if (largestTimestamp(seg, offsets, times) >= target) {
                return findOffsetByTimestamp(seg, offsets, times, target, logStart);
            }
        }
        return null;
    }

    /** LogSegment.largestTimestamp: the max batch timestamp so far (DESIGN.md decision 5 floors), else the mtime. */
    private long largestTimestamp(LogDirectory.Segment seg, OffsetIndex offsets, OffsetIndex times)
            throws IOException {
        boolean indexed = offsets.usable && times.usable;
        Long[] max = {indexed && times.size() > 0 ? times.keys[times.size() - 1] : null};
        long from = indexed && offsets.size() > 0 ? offsets.values[offsets.size() - 1] : 0;
        try (SegmentReader.Source src = new LogDirectory.FsSource(fs, seg.path)) {
            HeaderScan.scan(src, from, seg.size, (h, b, p, d) -> {
                long floor = h.magic == 2 && (h.attributes & Wire.TIMESTAMP_EXTENDED_FLAG_MASK) != 0
                        ? Long.MIN_VALUE : Wire.NO_TIMESTAMP;
                if (h.maxTimestamp > floor && (max[0] == null || h.maxTimestamp > max[0])) {
                    max[0] = h.maxTimestamp;
                }
                return true;
            });
        }
        return max[0] != null ? max[0] : seg.modificationTime;
    }

    private long[] findOffsetByTimestamp(LogDirectory.Segment seg, OffsetIndex offsets, OffsetIndex times,
                                         long target, long startOffset) throws IOException {
        int t = times.floor(target);
        long fromOffset = t < 0 ? seg.baseOffset : times.values[t];
        int o = offsets.floor(Math.max(fromOffset, startOffset));
        long position = o < 0 ? 0 : offsets.values[o];
        long[][] hit = {null};
        try (SegmentReader.Source src = new LogDirectory.FsSource(fs, seg.path)) {
            HeaderScan.scan(src, position, seg.size, (h, b, p, delta) -> {
                if (h.maxTimestamp >= target && h.lastOffset >= startOffset) {
                    hit[0] = firstRecordAtOrAfter(h, b, p, delta, target, startOffset);
                }
                return hit[0] == null;
            });
        }
        return hit[0];
    }

    /** kbatch.log.segment.first_record_at_or_after: {offset, timestamp} or null. */
    private long[] firstRecordAtOrAfter(BatchHeader h, ByteBuffer b, int p, long delta, long target,
                                        long startOffset) {
        if (h.magic == 2 && (h.attributes & Wire.TIMESTAMP_TYPE_MASK) != 0) {
            long noTs = (h.attributes & Wire.TIMESTAMP_EXTENDED_FLAG_MASK) != 0 ? Long.MIN_VALUE : Wire.NO_TIMESTAMP;
            if (h.maxTimestamp != noTs && h.maxTimestamp >= target && h.baseOffset >= startOffset
                    && h.recordCount > 0 && !h.isControl()) {
                return new long[] {h.baseOffset, h.maxTimestamp};
            }
        }
        RecordColumns rc = RecordColumns.raw();
        if (h.magic == 2) {
            decoder.decodeV2(b, p, delta, h, rc, Long.MIN_VALUE, Long.MAX_VALUE, true, false);
        } else {
            decoder.decodeLegacy(b, p, delta, h, rc, Long.MIN_VALUE, Long.MAX_VALUE, false, false);
        }
        for (int i = 0; i < rc.rows; i++) {
            if (!rc.timestampNull[i] && rc.timestampsUs[i] >= target && rc.offsets[i] >= startOffset) {
                return new long[] {rc.offsets[i], rc.timestampsUs[i]};
            }
        }
        return null;
    }

    // ------------------------------------------------------------------ slices (_plan.plan_partition)
    List<SegmentSlice> planPartition(LogDirectory.TopicPartition tp, Long start, Long end, long maxBytes,
                                     AbortedTransactions aborted) throws IOException {
        List<SegmentSlice> out = new ArrayList<>();
        List<LogDirectory.Segment> segs = tp.segments;
        for (int k = 0; k < segs.size(); k++) {
            LogDirectory.Segment seg = segs.get(k);
            Long nextBase = k + 1 < segs.size() ? segs.get(k + 1).baseOffset : null;
            if (end != null && seg.baseOffset >= end) {
                break;
            }
            if (start != null && nextBase != null && nextBase <= start) {
                continue;
            }
            if (seg.size == 0) {
                continue;
            }
            long lo = 0;
            if (start != null && start > seg.baseOffset) {
                OffsetIndex idx = planIndex(seg);
                int i = idx.floor(start);
                lo = i >= 0 ? idx.values[i] : 0;
            }
            long hi = seg.size;
            if (end != null && (nextBase == null || end < nextBase)) {
                OffsetIndex idx = planIndex(seg);
                int i = idx.ceiling(end);
                hi = i + 1 < idx.size() ? idx.values[i + 1] : seg.size;
            }
            if (nextBase == null && hi - lo > maxBytes) {
                hi = Math.min(hi, completeEnd(seg, lo, hi));
            }
            if (hi <= lo) {
                continue;
            }
            List<Long> cuts = new ArrayList<>();
            cuts.add(lo);
            if (hi - lo > maxBytes) {
                for (long p : planIndex(seg).values) {
                    long last = cuts.get(cuts.size() - 1);
                    if (last < p && p < hi && p - last >= maxBytes) {
                        cuts.add(p);
                    }
                }
            }
            cuts.add(hi);
            for (int c = 0; c + 1 < cuts.size(); c++) {
                out.add(new SegmentSlice(tp.topic, tp.partition, seg.path, cuts.get(c), cuts.get(c + 1), seg.size,
                        start, end, aborted, nextBase));
            }
        }
        return out;
    }

    /**
     * Where the whole batches of bytes [lo, hi) of the last (active) segment end: a split read plans
     * up to there, so a partial batch there (what the read path ignores, as Kafka does) is ignored
     * by every input partition alike. A bad header leaves hi (the reader fails on it).
     */
    private long completeEnd(LogDirectory.Segment seg, long lo, long hi) throws IOException {
        try (SegmentReader.Source src = new LogDirectory.FsSource(fs, seg.path)) {
            return Math.min(HeaderScan.wholeEnd(src, lo, seg.size, hi), hi);
        } catch (KafkaSegmentsException e) {
            return hi;
        }
    }

    // ------------------------------------------------------------------ aborted transactions
    /**
     * The first offset of the earliest transaction with no marker yet, by partition path (absent:
     * none open), as abortedTransactions found it: read_committed stops there (the last stable
     * offset, kbatch.log.fetch). With failOnDataLoss, the transactions damage leaves undecided
     * count ({@link #undecidedAt} names the damage where a read stops at one).
     */
    final Map<String, Long> firstUnstable = new HashMap<>();
    /** The header pass of each partition abortedTransactions followed, by path. */
    private final Map<String, PartitionTail.Follower> followed = new HashMap<>();

    /**
     * The partition's aborted transactions: from the segments' `.txnindex` files when every segment
     * has one, otherwise from the log itself (a broker writes a `.txnindex` only for a segment that
     * holds an ABORT marker, so a missing one says nothing): per producer, its transactional batches
     * from the first after its previous marker up to an ABORT marker (kafka-format.md 3). With
     * failOnDataLoss=false, the transactions damage leaves undecided too (their records left out).
     */
    AbortedTransactions abortedTransactions(LogDirectory.TopicPartition tp) throws IOException {
        return abortedTransactions(tp, null);
    }

    /**
     * As above; where not every segment has a `.txnindex`, `scanned` (when not null) is the answer
     * of the log scan already made (a stream's {@link PartitionTail}), instead of scanning again.
     */
    AbortedTransactions abortedTransactions(LogDirectory.TopicPartition tp, AbortedTransactions scanned)
            throws IOException {
        boolean[] allIndexed = {false};
        List<long[]> listed = AbortedTransactions.txnIndexEntries(fs, tp, allIndexed);
        if (scanned != null && !allIndexed[0]) {
            return scanned; // a stream's own header pass (PartitionTail), which also gives its stable end
        }
        // one header pass in any case: the open transactions at the end give the last stable offset
        PartitionTail.Follower pass = new PartitionTail.Follower(false);
        List<LogDirectory.Segment> segs = tp.segments;
        for (int k = 0; k < segs.size(); k++) {
            pass.segment(fs, segs.get(k), 0, k + 1 < segs.size() ? segs.get(k + 1).baseOffset : null, null);
        }
        pass.resolve(listed);
        followed.put(tp.path, pass);
        boolean skip = !options.failOnDataLoss();
        Long unstable = pass.firstUnstable(!skip);
        if (unstable == null) {
            firstUnstable.remove(tp.path);
        } else {
            firstUnstable.put(tp.path, unstable);
        }
        // every segment has a file: the files, as a broker reads them, and markers they miss
        List<long[]> entries = new ArrayList<>(pass.aborted);
        if (skip) { // failOnDataLoss=false: the undecided transactions' records are left out too
            entries.addAll(pass.undecided());
        }
        return allIndexed[0] ? AbortedTransactions.fromIndexAndMarkers(listed, entries) : AbortedTransactions.of(entries);
    }

    /**
     * Where a read_committed read of `tp` stopping at `offset` (its last stable offset) fails: the
     * error naming the damage when that offset is the first of a transaction damage leaves
     * undecided (failOnDataLoss; kbatch.log.fetch.undecided_at), else null.
     */
    KafkaSegmentsException undecidedAt(LogDirectory.TopicPartition tp, long offset) {
        PartitionTail.Follower pass = followed.get(tp.path);
        PartitionTail.UnknownTxn u = pass == null || !options.failOnDataLoss() ? null : pass.undecidedAt(offset);
        return u == null ? null : u.error("kafka-segments: " + tp.topic + "-" + tp.partition + ": ");
    }

    // ------------------------------------------------------------------ bytes a query reads (InputPlan)
    /** How many slices' first batches {@link #readFraction} samples: enough to see the record shape, few reads. */
    static final int SAMPLED_SLICES = 8;

    /**
     * The share of a segment's bytes that a scan of these columns works on beyond the CRC (the
     * framing and varints of every record, plus the key, value and header bytes it asked for),
     * estimated from the first batch of up to {@link #SAMPLED_SLICES} slices; 1 when a sampled
     * batch is compressed or legacy (its records are all decompressed or parsed whatever the
     * columns) or nothing could be sampled. Planning only: the reader reads what it reads.
     */
    double readFraction(List<SegmentSlice> slices, boolean key, boolean value, boolean headers) throws IOException {
        long total = 0;
        long read = 0;
        RecordColumns rc = new RecordColumns(true, true, false, false, false, true, false, false);
        int step = Math.max(1, slices.size() / SAMPLED_SLICES);
        for (int k = 0; k < slices.size(); k += step) {
            SegmentSlice s = slices.get(k);
            long[] seen = {0, 0};
            boolean[] whole = {false};
            try (SegmentReader.Source src = new LogDirectory.FsSource(fs, s.path)) {
                HeaderScan.scan(src, s.start, s.end, (h, b, p, delta) -> {
                    if (h.magic == 2 && h.isControl()) {
                        return true;
                    }
                    seen[0] = h.size;
                    if (h.magic != 2 || (h.attributes & Wire.COMPRESSION_CODEC_MASK) != Wire.NONE) {
                        whole[0] = true;
                        return false;
                    }
                    rc.reset();
                    decoder.decodeV2(b, p, delta, h, rc, Long.MIN_VALUE, Long.MAX_VALUE, true, false);
                    long k0 = rc.keys.bytes();
                    long v0 = rc.values.bytes();
                    long h0 = rc.headerKeys.bytes() + rc.headerValues.bytes();
                    seen[1] = h.size - k0 - v0 - h0 + (key ? k0 : 0) + (value ? v0 : 0) + (headers ? h0 : 0);
                    return false;
                });
            } catch (KafkaSegmentsException e) {
                continue; // bytes the reader will report where it meets them
            }
            if (whole[0]) {
                return 1.0;
            }
            total += seen[0];
            read += seen[1];
        }
        return total == 0 ? 1.0 : Math.min(1.0, Math.max((double) read / total, 1e-3));
    }
}
