package kbatch.spark;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.TreeMap;
import java.util.regex.Pattern;

import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.FSDataOutputStream;
import org.apache.hadoop.fs.FileSystem;
import org.apache.hadoop.fs.Path;
import org.apache.spark.network.util.JavaUtils;
import org.apache.spark.sql.connector.read.InputPartition;
import org.apache.spark.sql.connector.read.PartitionReaderFactory;
import org.apache.spark.sql.connector.read.streaming.CompositeReadLimit;
import org.apache.spark.sql.connector.read.streaming.MicroBatchStream;
import org.apache.spark.sql.connector.read.streaming.Offset;
import org.apache.spark.sql.connector.read.streaming.ReadLimit;
import org.apache.spark.sql.connector.read.streaming.ReadMaxRows;
import org.apache.spark.sql.connector.read.streaming.ReadMinRows;
import org.apache.spark.sql.connector.read.streaming.ReportsSourceMetrics;
import org.apache.spark.sql.connector.read.streaming.SupportsTriggerAvailableNow;
import org.apache.spark.sql.types.StructType;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

import kbatch.kafka.storage.AbortedTransactions;
import kbatch.kafka.storage.LogDirectory;
import kbatch.kafka.storage.PartitionTail;
import kbatch.kafka.wire.KafkaSegmentsException;

/**
 * `spark.readStream.format("kafka-segments").load(dir)`: micro-batches over a directory of
 * `<topic>-<partition>/` logs that may be growing, or a tiered-storage layout that gains segment
 * objects as uploads add them (the layouts {@link LogDirectory} lists). A micro-batch reads, per partition, offsets
 * [start, end) of the batch reader's plan (the same slices, readers and rows); the end is never past
 * the partition's stable end ({@link PartitionTail}: whole batches only, the high watermark where a
 * broker's `replication-offset-checkpoint` gives one, the last stable offset for read_committed),
 * so a planned batch reads the same rows whenever it is (re)run, and a query restarted from its
 * checkpoint goes on exactly where the last committed batch ended.
 *
 * Options, named as in Spark's Kafka source: startingOffsets (earliest | latest | JSON),
 * startingTimestamp, startingOffsetsByTimestamp, maxOffsetsPerTrigger, minOffsetsPerTrigger,
 * maxTriggerDelay, failOnDataLoss, includeHeaders, isolation.level; topics / topicPattern (or
 * subscribe / subscribePattern) choose the partitions, and partitions and topics that appear later
 * are read from their first offset.
 */
final class KafkaSegmentsStream implements MicroBatchStream, SupportsTriggerAvailableNow, ReportsSourceMetrics {
    private static final Logger LOG = LoggerFactory.getLogger("kbatch.spark");
    static final String INITIAL_OFFSETS_FILE = "kafka-segments-initial-offsets.json";
    static final String HIGH_WATERMARKS_FILE = "replication-offset-checkpoint";
    static final String DEFAULT_MAX_TRIGGER_DELAY = "15m";

    private final ReadOptions options;
    private final StructType schema;
    private final String checkpointLocation;
    private final Configuration hadoop;
    private final SerializableConfiguration conf;
    private final boolean readCommitted;
    private final Map<String, PartitionTail> tails = new HashMap<>();
    private final Map<String, Long> firstOffsets = new HashMap<>(); // as listed by the last stableEnds

    private KafkaSegmentsOffset initial;
    private KafkaSegmentsOffset availableNow; // the ends when Trigger.AvailableNow began
    private KafkaSegmentsOffset latestSeen;   // the ends found by the last latestOffset
    private long lastTriggerMs = System.currentTimeMillis();

    KafkaSegmentsStream(ReadOptions options, StructType schema, String checkpointLocation, Configuration hadoop) {
        for (String refused : new String[] {"endingOffsets", "endingTimestamp", "endingOffsetsByTimestamp"}) {
            if (options.get(refused) != null) {
                throw KafkaSegmentsException.invalidRequest("kafka-segments: option " + refused
                        + " is for batch reads; a streaming query reads on as the directory grows",
                        "no " + refused + " in readStream", options.get(refused));
            }
        }
        if (options.badRecordsPath() != null) {
            LOG.warn("kafka-segments: badRecordsPath in a stream skips bad ranges as failOnDataLoss=false does");
        }
        this.options = options;
        this.schema = schema;
        this.checkpointLocation = checkpointLocation;
        this.hadoop = hadoop;
        this.conf = new SerializableConfiguration(hadoop);
        this.readCommitted = options.readCommitted();
        long max = maxOffsetsPerTrigger();
        long min = minOffsetsPerTrigger();
        if (max == 0 || max < -1 || min == 0 || min < -1 || (max > 0 && min > max)) {
            throw KafkaSegmentsException.invalidRequest("kafka-segments: maxOffsetsPerTrigger and "
                    + "minOffsetsPerTrigger must be positive, min <= max", "1 <= minOffsetsPerTrigger <= "
                    + "maxOffsetsPerTrigger", "min " + min + ", max " + max);
        }
    }

    private long maxOffsetsPerTrigger() {
        return options.longOption("maxOffsetsPerTrigger", -1);
    }

    private long minOffsetsPerTrigger() {
        return options.longOption("minOffsetsPerTrigger", -1);
    }

    private long maxTriggerDelayMs() {
        String v = options.get("maxTriggerDelay");
        try {
            return JavaUtils.timeStringAsMs(v == null ? DEFAULT_MAX_TRIGGER_DELAY : v.trim());
        } catch (RuntimeException e) {
            throw KafkaSegmentsException.invalidRequest("kafka-segments: option maxTriggerDelay is not a duration",
                    "a duration such as 15m or 30s", v);
        }
    }

    // ------------------------------------------------------------------ the directory now
    private FileSystem fs() throws IOException {
        return LogDirectory.fileSystem(options.path(), hadoop);
    }

    private List<LogDirectory.TopicPartition> list(FileSystem fs) throws IOException {
        String pattern = options.topicPattern();
        return LogDirectory.list(fs, options.path(), options.topics(), pattern == null ? null : Pattern.compile(pattern),
                false, options.bool("includeInternalTopics", false));
    }

    private static String key(LogDirectory.TopicPartition tp) {
        return tp.topic + "-" + tp.partition;
    }

    /** The first offset of a partition: its first segment's base offset (0 with no segments). */
    private static long earliest(LogDirectory.TopicPartition tp) {
        return tp.segments.isEmpty() ? 0 : tp.segments.get(0).baseOffset;
    }

    /** High watermarks of the log directories holding these partitions (`replication-offset-checkpoint`). */
    private Map<String, Long> highWatermarks(FileSystem fs, List<LogDirectory.TopicPartition> tps) throws IOException {
        Map<String, Long> out = new HashMap<>();
        Map<String, Boolean> read = new HashMap<>();
        for (LogDirectory.TopicPartition tp : tps) {
            String parent = new Path(tp.path).getParent().toString();
            if (read.putIfAbsent(parent, true) != null) {
                continue;
            }
            String file = parent + "/" + HIGH_WATERMARKS_FILE;
            byte[] raw = LogDirectory.readAll(fs, file);
            if (raw != null) {
                parseCheckpoint(file, new String(raw, StandardCharsets.UTF_8), out);
            }
        }
        return out;
    }

    /** Kafka's offset checkpoint file: version 0, an entry count, then `topic partition offset` lines. */
    static void parseCheckpoint(String file, String text, Map<String, Long> out) {
        String[] lines = text.split("\n");
        if (text.trim().isEmpty()) {
            return;
        }
        try {
            if (Integer.parseInt(lines[0].trim()) != 0) {
                throw new NumberFormatException("version " + lines[0].trim());
            }
            int n = Integer.parseInt(lines[1].trim());
            if (lines.length < 2 + n) {
                throw new NumberFormatException(n + " entries announced, " + (lines.length - 2) + " found");
            }
            for (int i = 2; i < 2 + n; i++) {
                String[] f = lines[i].trim().split("\\s+");
                if (f.length != 3) {
                    throw new NumberFormatException("line " + (i + 1) + ": " + lines[i]);
                }
                out.put(f[0] + "-" + Integer.parseInt(f[1]), Long.parseLong(f[2]));
            }
        } catch (RuntimeException e) {
            throw KafkaSegmentsException.invalidRequest("kafka-segments: " + file + " is not an offset checkpoint ("
                    + e.getMessage() + ")", "version 0, a count, then 'topic partition offset' lines", null);
        }
    }

    /** Per partition listed now, where a micro-batch may end (PartitionTail.stableEnd). */
    private Map<String, Map<Integer, Long>> stableEnds() {
        try {
            FileSystem fs = fs();
            List<LogDirectory.TopicPartition> tps = list(fs);
            Map<String, Long> hw = highWatermarks(fs, tps);
            Map<String, Map<Integer, Long>> out = new TreeMap<>();
            for (LogDirectory.TopicPartition tp : tps) {
                PartitionTail tail = tails.computeIfAbsent(key(tp),
                        k -> new PartitionTail(readCommitted, options.failOnDataLoss()));
                tail.advance(fs, tp);
                long end = tp.segments.isEmpty() ? 0
                        : tail.stableEnd(hw.get(key(tp)), "kafka-segments stream: " + key(tp) + ": ");
                firstOffsets.put(key(tp), earliest(tp));
                out.computeIfAbsent(tp.topic, t -> new TreeMap<>()).put(tp.partition, end);
            }
            return out;
        } catch (IOException e) {
            throw new UncheckedIOException("kafka-segments: reading " + options.path() + ": " + e, e);
        }
    }

    // ------------------------------------------------------------------ SparkDataStream
    /**
     * Where the query starts, per startingOffsets / startingTimestamp / startingOffsetsByTimestamp
     * (resolved once, with the batch reader's rules, and written beside the query's checkpoint so a
     * restart before the first commit starts at the same offsets).
     */
    @Override
    public Offset initialOffset() {
        if (initial != null) {
            return initial;
        }
        try {
            Path file = checkpointLocation == null ? null : new Path(checkpointLocation, INITIAL_OFFSETS_FILE);
            FileSystem cfs = file == null ? null : file.getFileSystem(hadoop);
            if (file != null && cfs.exists(file)) {
                byte[] raw = LogDirectory.readAll(cfs, file.toString());
                initial = KafkaSegmentsOffset.parse(new String(raw, StandardCharsets.UTF_8));
                return initial;
            }
            initial = resolveStart();
            if (file != null) {
                cfs.mkdirs(file.getParent());
                Path tmp = new Path(file.getParent(), "." + INITIAL_OFFSETS_FILE + ".tmp");
                try (FSDataOutputStream out = cfs.create(tmp, true)) {
                    out.write(initial.json().getBytes(StandardCharsets.UTF_8));
                }
                if (!cfs.rename(tmp, file)) {
                    throw new IOException("could not rename " + tmp + " to " + file);
                }
            }
            return initial;
        } catch (IOException e) {
            throw new UncheckedIOException("kafka-segments: initial offsets in " + checkpointLocation + ": " + e, e);
        }
    }

    private KafkaSegmentsOffset resolveStart() throws IOException {
        Map<String, Map<Integer, Long>> ends = stableEnds();
        FileSystem fs = fs();
        Planner planner = new Planner(fs, options);
        String starting = options.get("startingOffsets");
        boolean byTime = options.get("startingTimestamp") != null || options.get("startingOffsetsByTimestamp") != null;
        Map<String, Map<Integer, Long>> given = null;
        if (!byTime && starting != null && !starting.trim().equalsIgnoreCase("earliest")
                && !starting.trim().equalsIgnoreCase("latest")) {
            given = ReadOptions.json("startingOffsets", starting);
        }
        Map<String, Map<Integer, Long>> out = new TreeMap<>();
        for (LogDirectory.TopicPartition tp : list(fs)) {
            long end = ends.getOrDefault(tp.topic, Map.of()).getOrDefault(tp.partition, earliest(tp));
            long start;
            if (byTime) {
                Long b = planner.bounds(tp)[0]; // the time index, as the batch reader; none: the end
                start = b == null ? earliest(tp) : b;
            } else if (starting != null && starting.trim().equalsIgnoreCase("latest")) {
                start = end;
            } else if (given != null) {
                Long v = given.getOrDefault(tp.topic, Map.of()).get(tp.partition);
                start = v == null || v == -2 ? earliest(tp) : v == -1 ? end : v;
            } else {
                start = earliest(tp);
            }
            out.computeIfAbsent(tp.topic, t -> new TreeMap<>()).put(tp.partition, start);
        }
        return new KafkaSegmentsOffset(out);
    }

    @Override
    public Offset deserializeOffset(String json) {
        return KafkaSegmentsOffset.parse(json);
    }

    @Override
    public void commit(Offset end) {
        // nothing to release: the directory is read, never consumed
    }

    @Override
    public void stop() {
        tails.clear();
    }

    // ------------------------------------------------------------------ admission control
    @Override
    public ReadLimit getDefaultReadLimit() {
        long max = maxOffsetsPerTrigger();
        long min = minOffsetsPerTrigger();
        if (min > 0 && max > 0) {
            return ReadLimit.compositeLimit(new ReadLimit[] {ReadLimit.minRows(min, maxTriggerDelayMs()),
                ReadLimit.maxRows(max)});
        }
        if (min > 0) {
            return ReadLimit.minRows(min, maxTriggerDelayMs());
        }
        return max > 0 ? ReadLimit.maxRows(max) : ReadLimit.allAvailable();
    }

    @Override
    public void prepareForTriggerAvailableNow() {
        availableNow = new KafkaSegmentsOffset(stableEnds());
    }

    @Override
    public Offset latestOffset() {
        throw new UnsupportedOperationException("kafka-segments: latestOffset(start, limit) is the one Spark calls");
    }

    @Override
    public Offset latestOffset(Offset startOffset, ReadLimit limit) {
        KafkaSegmentsOffset start = startOffset == null ? (KafkaSegmentsOffset) initialOffset()
                : (KafkaSegmentsOffset) startOffset;
        Map<String, Map<Integer, Long>> ends = stableEnds();
        latestSeen = new KafkaSegmentsOffset(ends);
        // per partition: [from, to), in (topic, partition) order
        Map<String, Map<Integer, Long>> from = new TreeMap<>();
        Map<String, Map<Integer, Long>> to = new TreeMap<>();
        for (Map.Entry<String, Map<Integer, Long>> t : start.offsets.entrySet()) {
            from.put(t.getKey(), new TreeMap<>(t.getValue()));
            to.put(t.getKey(), new TreeMap<>(t.getValue()));
        }
        for (Map.Entry<String, Map<Integer, Long>> t : ends.entrySet()) {
            for (Map.Entry<Integer, Long> p : t.getValue().entrySet()) {
                Long s = start.get(t.getKey(), p.getKey());
                long f = s != null ? s : earliestNow(t.getKey(), p.getKey());
                long e = Math.max(f, p.getValue());
                if (availableNow != null) {
                    Long cap = availableNow.get(t.getKey(), p.getKey());
                    e = cap == null ? f : Math.max(f, Math.min(e, cap));
                }
                from.computeIfAbsent(t.getKey(), k -> new TreeMap<>()).put(p.getKey(), f);
                to.computeIfAbsent(t.getKey(), k -> new TreeMap<>()).put(p.getKey(), e);
            }
        }
        ReadMinRows min = null;
        ReadMaxRows max = null;
        for (ReadLimit l : limit instanceof CompositeReadLimit ? ((CompositeReadLimit) limit).getReadLimits()
                : new ReadLimit[] {limit}) {
            if (l instanceof ReadMinRows) {
                min = (ReadMinRows) l;
            } else if (l instanceof ReadMaxRows) {
                max = (ReadMaxRows) l;
            }
        }
        long total = lag(from, to);
        if (min != null && availableNow == null && total < min.minRows()
                && System.currentTimeMillis() - lastTriggerMs < min.maxTriggerDelayMs()) {
            return start; // too little yet, and the delay has not passed: no batch
        }
        if (max != null && total > max.maxRows()) {
            to = rateLimit(from, to, total, max.maxRows());
        }
        KafkaSegmentsOffset end = new KafkaSegmentsOffset(to);
        if (!end.equals(start)) {
            lastTriggerMs = System.currentTimeMillis();
        }
        return end;
    }

    /** The first offset of a partition that the start offset does not know (a new partition or topic). */
    private long earliestNow(String topic, int partition) {
        Long e = firstOffsets.get(topic + "-" + partition);
        return e == null ? 0 : e;
    }

    private static long lag(Map<String, Map<Integer, Long>> from, Map<String, Map<Integer, Long>> to) {
        long total = 0;
        for (Map.Entry<String, Map<Integer, Long>> t : to.entrySet()) {
            for (Map.Entry<Integer, Long> p : t.getValue().entrySet()) {
                total += p.getValue() - from.get(t.getKey()).get(p.getKey());
            }
        }
        return total;
    }

    /**
     * Share `budget` offsets among the partitions in proportion to how far behind each is (floors),
     * then one more each to those with the largest remainders (ties in topic, partition order), so
     * the batch holds exactly `budget` offsets and every partition moves on in turn.
     */
    static Map<String, Map<Integer, Long>> rateLimit(Map<String, Map<Integer, Long>> from,
                                                     Map<String, Map<Integer, Long>> to, long total, long budget) {
        List<Object[]> parts = new ArrayList<>(); // topic, partition, lag, share, remainder
        long given = 0;
        for (Map.Entry<String, Map<Integer, Long>> t : to.entrySet()) {
            for (Map.Entry<Integer, Long> p : t.getValue().entrySet()) {
                long lag = p.getValue() - from.get(t.getKey()).get(p.getKey());
                // lag * budget may not fit a long: floor(lag * budget / total) through doubles is not exact
                java.math.BigInteger prod = java.math.BigInteger.valueOf(lag).multiply(
                        java.math.BigInteger.valueOf(budget));
                java.math.BigInteger[] qr = prod.divideAndRemainder(java.math.BigInteger.valueOf(total));
                long share = qr[0].longValue();
                given += share;
                parts.add(new Object[] {t.getKey(), p.getKey(), lag, share, qr[1].longValue()});
            }
        }
        List<Object[]> order = new ArrayList<>(parts);
        order.sort(Comparator.comparing((Object[] o) -> -(Long) o[4])); // stable: ties keep topic, partition order
        for (Object[] o : order) {
            if (given >= budget) {
                break;
            }
            if ((Long) o[3] < (Long) o[2]) {
                o[3] = (Long) o[3] + 1;
                given++;
            }
        }
        Map<String, Map<Integer, Long>> out = new TreeMap<>();
        for (Object[] o : parts) {
            String topic = (String) o[0];
            int partition = (Integer) o[1];
            out.computeIfAbsent(topic, k -> new TreeMap<>()).put(partition,
                    from.get(topic).get(partition) + (Long) o[3]);
        }
        return out;
    }

    @Override
    public Offset reportLatestOffset() {
        return latestSeen;
    }

    @Override
    public Map<String, String> metrics(Optional<Offset> latestConsumedOffset) {
        Map<String, String> m = new LinkedHashMap<>();
        if (latestSeen == null || latestConsumedOffset.isEmpty()) {
            return m;
        }
        KafkaSegmentsOffset done = (KafkaSegmentsOffset) latestConsumedOffset.get();
        long behind = 0;
        long max = 0;
        long min = Long.MAX_VALUE;
        int n = 0;
        for (Map.Entry<String, Map<Integer, Long>> t : latestSeen.offsets.entrySet()) {
            for (Map.Entry<Integer, Long> p : t.getValue().entrySet()) {
                Long at = done.get(t.getKey(), p.getKey());
                long b = Math.max(0, p.getValue() - (at == null ? earliestNow(t.getKey(), p.getKey()) : at));
                behind += b;
                max = Math.max(max, b);
                min = Math.min(min, b);
                n++;
            }
        }
        m.put("minOffsetsBehindLatest", String.valueOf(n == 0 ? 0 : min));
        m.put("maxOffsetsBehindLatest", String.valueOf(max));
        m.put("avgOffsetsBehindLatest", String.valueOf(n == 0 ? 0.0 : (double) behind / n));
        return m;
    }

    // ------------------------------------------------------------------ planning a micro-batch
    @Override
    public InputPartition[] planInputPartitions(Offset startOffset, Offset endOffset) {
        KafkaSegmentsOffset start = startOffset == null ? null : (KafkaSegmentsOffset) startOffset;
        KafkaSegmentsOffset end = (KafkaSegmentsOffset) endOffset;
        List<InputPartition> out = new ArrayList<>();
        try {
            FileSystem fs = fs();
            Planner planner = new Planner(fs, options);
            Map<String, LogDirectory.TopicPartition> listed = new HashMap<>();
            for (LogDirectory.TopicPartition tp : list(fs)) {
                listed.put(key(tp), tp);
            }
            for (Map.Entry<String, Map<Integer, Long>> t : end.offsets.entrySet()) {
                for (Map.Entry<Integer, Long> p : t.getValue().entrySet()) {
                    String topic = t.getKey();
                    int partition = p.getKey();
                    long to = p.getValue();
                    LogDirectory.TopicPartition tp = listed.get(topic + "-" + partition);
                    Long s = start == null ? null : start.get(topic, partition);
                    if (tp == null || tp.segments.isEmpty()) {
                        if (s == null || s < to) {
                            dataLoss(topic, partition, "its directory or segments are gone, offsets "
                                    + (s == null ? "" : s) + " to " + to + " cannot be read");
                        }
                        continue;
                    }
                    long logStart = earliest(tp);
                    long from = s == null ? logStart : s;
                    if (from < logStart) {
                        dataLoss(topic, partition, "offsets " + from + " to " + Math.min(logStart, to)
                                + " were deleted before they were read (the log now starts at " + logStart + ")");
                        from = logStart;
                    }
                    if (to <= from) {
                        continue;
                    }
                    AbortedTransactions aborted = null;
                    if (readCommitted) {
                        // the tail's scan covers [0, to) when it got that far (not after a restart)
                        PartitionTail tail = tails.get(key(tp));
                        aborted = planner.abortedTransactions(tp,
                                tail != null && tail.completeEnd() >= to ? tail.aborted() : null);
                    }
                    out.addAll(planner.planPartition(tp, from, to, options.maxPartitionBytes(), aborted));
                }
            }
        } catch (IOException e) {
            throw new UncheckedIOException("kafka-segments: planning " + options.path() + ": " + e, e);
        }
        return out.toArray(new InputPartition[0]);
    }

    /** failOnDataLoss (default true): fail the query; false: log and go on from what is there. */
    private void dataLoss(String topic, int partition, String what) {
        String msg = "kafka-segments: partition " + topic + "-" + partition + ": " + what;
        if (options.failOnDataLoss()) {
            throw new IllegalStateException(msg + ". Some data may have been lost (segments deleted by retention, "
                    + "or a partition removed); set failOnDataLoss=false to skip what is gone and go on.");
        }
        LOG.warn("{} (failOnDataLoss=false: skipped)", msg);
    }

    @Override
    public PartitionReaderFactory createReaderFactory() {
        return new SegmentReaderFactory(options, schema, conf);
    }

    @Override
    public String toString() {
        return "KafkaSegmentsStream[" + options.get("path") + "]";
    }
}
