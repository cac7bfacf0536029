package kbatch.spark;

import java.io.IOException;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;

import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.FileSystem;
import org.apache.spark.sql.SparkSession;
import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.sql.catalyst.expressions.GenericInternalRow;
import org.apache.spark.sql.connector.expressions.Expression;
import org.apache.spark.sql.connector.expressions.NamedReference;
import org.apache.spark.sql.connector.expressions.aggregate.AggregateFunc;
import org.apache.spark.sql.connector.expressions.aggregate.Aggregation;
import org.apache.spark.sql.connector.expressions.aggregate.Count;
import org.apache.spark.sql.connector.expressions.aggregate.CountStar;
import org.apache.spark.sql.connector.expressions.aggregate.Max;
import org.apache.spark.sql.connector.expressions.aggregate.Min;
import org.apache.spark.sql.connector.read.LocalScan;
import org.apache.spark.sql.types.DataType;
import org.apache.spark.sql.types.DataTypes;
import org.apache.spark.sql.types.StructField;
import org.apache.spark.sql.types.StructType;
import org.apache.spark.unsafe.types.UTF8String;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

import kbatch.kafka.storage.LogDirectory;
import kbatch.kafka.storage.RangeSummary;

/**
 * Aggregates answered on the driver from segment summaries ({@link RangeSummary}): COUNT(*) (and
 * COUNT of topic, partition or offset, never null), MIN/MAX(offset) and MAX(timestamp), grouped by
 * nothing, topic, partition or both, over exactly what a read with the same options returns (the
 * planner's partitions, offset bounds, last stable offset and aborted transactions). The answer is
 * a {@link LocalScan} of one row per group (Iceberg's pattern). Not pushed, with an INFO line of
 * kbatch.spark saying why: another aggregate or grouping (MIN(timestamp): CreateTime is not
 * ordered and a header holds no minimum), verifyCrc=false without trustHeaders=true (header
 * figures rest on the CRC; trustHeaders=true is the opt-in that answers without CRCs, RangeSummary),
 * damage met anywhere in the read (the read reports it as it reports it, or skips as
 * failOnDataLoss=false skips), option pushDownAggregates=false or session conf
 * spark.kbatch.pushDownAggregates=false, option pushdown=false. Spark itself pushes no aggregate
 * over a filter it keeps (key, value, timestamp): only filters the reader applies exactly
 * (partition, topic, offset ranges) may sit under a pushed aggregate.
 */
final class AggregatePushdown {
    static final Logger LOG = LoggerFactory.getLogger("kbatch.spark");
    static final String SESSION_CONF = "spark.kbatch.pushDownAggregates";

    private enum Fn { COUNT, MIN_OFFSET, MAX_OFFSET, MAX_TIMESTAMP }

    private final List<String> groups = new ArrayList<>();
    private final List<Fn> fns = new ArrayList<>();
    private final String described;
    /** Option trustHeaders=true: summaries without CRCs, batches hopped over (RangeSummary). */
    private final boolean trustHeaders;

    private AggregatePushdown(String described, boolean trustHeaders) {
        this.described = described;
        this.trustHeaders = trustHeaders;
    }

    /** The aggregation's plan, or null (logged) when it is not one this reader answers from headers. */
    static AggregatePushdown of(Aggregation a, ReadOptions options, StructType schema) {
        String what = describe(a);
        String off = disabled(options);
        if (off != null) {
            return skip(what, off);
        }
        AggregatePushdown p = new AggregatePushdown(what, options.trustHeaders());
        for (Expression g : a.groupByExpressions()) {
            String col = column(g);
            if (col == null || !(col.equals("topic") || col.equals("partition"))) {
                return skip(what, "grouping by " + g.describe() + " (only topic and partition are known without records)");
            }
            p.groups.add(col);
        }
        for (AggregateFunc f : a.aggregateExpressions()) {
            Fn fn = null;
            if (f instanceof CountStar) {
                fn = Fn.COUNT;
            } else if (f instanceof Count && !((Count) f).isDistinct()) {
                String col = column(((Count) f).column());
                fn = col != null && (col.equals("topic") || col.equals("partition") || col.equals("offset"))
                        ? Fn.COUNT : null;
            } else if (f instanceof Max) {
                String col = column(((Max) f).column());
                fn = "offset".equals(col) ? Fn.MAX_OFFSET : "timestamp".equals(col) ? Fn.MAX_TIMESTAMP : null;
            } else if (f instanceof Min) {
                fn = "offset".equals(column(((Min) f).column())) ? Fn.MIN_OFFSET : null;
            }
            if (fn == null) {
                return skip(what, f.describe() + " is not known from batch headers (MIN(timestamp): CreateTime "
                        + "timestamps are not ordered; COUNT(DISTINCT), COUNT(nullable column), other columns need records)");
            }
            p.fns.add(fn);
        }
        for (String c : p.groups) {
            if (!java.util.Arrays.asList(schema.fieldNames()).contains(c)) {
                return skip(what, "no column " + c);
            }
        }
        return p;
    }

    /** Why aggregates are not pushed for these options (null: they may be). */
    static String disabled(ReadOptions options) {
        if (!options.bool("pushdown", true)) {
            return "option pushdown=false";
        }
        if (!options.bool("pushDownAggregates", true)) {
            return "option pushDownAggregates=false";
        }
        SparkSession s = SparkSession.getActiveSession().isDefined() ? SparkSession.getActiveSession().get() : null;
        if (s != null && !Boolean.parseBoolean(s.conf().get(SESSION_CONF, "true").trim())) {
            return SESSION_CONF + "=false";
        }
        if (!options.verifyCrc() && !options.trustHeaders()) {
            return "verifyCrc=false (figures from headers rest on the CRC; trustHeaders=true answers without it)";
        }
        return null;
    }

    private static AggregatePushdown skip(String what, String why) {
        LOG.info("kafka-segments: aggregate {} not pushed down: {}", what, why);
        return null;
    }

    private static String column(Expression e) {
        if (e instanceof NamedReference && ((NamedReference) e).fieldNames().length == 1) {
            return ((NamedReference) e).fieldNames()[0];
        }
        return null;
    }

    private static String describe(Aggregation a) {
        List<String> parts = new ArrayList<>();
        for (AggregateFunc f : a.aggregateExpressions()) {
            parts.add(f.describe());
        }
        List<String> g = new ArrayList<>();
        for (Expression e : a.groupByExpressions()) {
            g.add(e.describe());
        }
        return parts + (g.isEmpty() ? "" : " group by " + g);
    }

    /** The columns of the answer: the grouping columns, then one per aggregate (Spark's order). */
    StructType schema() {
        List<StructField> f = new ArrayList<>();
        for (String g : groups) {
            f.add(DataTypes.createStructField(g, g.equals("topic") ? DataTypes.StringType : DataTypes.IntegerType,
                    false));
        }
        for (int i = 0; i < fns.size(); i++) {
            DataType t = fns.get(i) == Fn.MAX_TIMESTAMP ? DataTypes.TimestampType : DataTypes.LongType;
            f.add(DataTypes.createStructField("agg_func_" + i, t, fns.get(i) != Fn.COUNT));
        }
        return DataTypes.createStructType(f);
    }

    /** One range of a segment a read covers, with the partition it belongs to. */
    private static final class Unit {
        final SegmentSlice slice;
        final long modificationTime;
        final boolean trustHeaders;

        Unit(SegmentSlice slice, long modificationTime, boolean trustHeaders) {
            this.slice = slice;
            this.modificationTime = modificationTime;
            this.trustHeaders = trustHeaders;
        }

        /** The summary this query would remember (a trusted summary never answers a query that checks CRCs). */
        String key() {
            return SegmentSummaries.key(verifiedKey(), trustHeaders);
        }

        /** The verified summary of the same range (it answers a trusted query as well). */
        String verifiedKey() {
            SegmentSlice s = slice;
            return s.path + "|" + s.fileSize + "|" + modificationTime + "|" + s.start + "-" + s.end + "|"
                    + s.startOffset + "-" + s.endOffset + "|" + s.nextBase + "|" + (s.aborted == null ? "-" : s.aborted.key());
        }
    }

    /** The figures per group of what the read returns: computed, or null (logged) when the read must decide. */
    Answer answer(Planner planner, Configuration conf) throws IOException {
        long t0 = System.nanoTime();
        List<Unit> units = new ArrayList<>();
        for (Planner.Range r : planner.ranges()) {
            Map<String, Long> mtimes = new java.util.HashMap<>();
            for (LogDirectory.Segment seg : r.tp.segments) {
                mtimes.put(seg.path, seg.modificationTime);
            }
            for (SegmentSlice s : planner.planPartition(r.tp, r.start, r.end, Long.MAX_VALUE, r.aborted)) {
                units.add(new Unit(s, mtimes.get(s.path), trustHeaders));
            }
        }
        RangeSummary[] sums = new RangeSummary[units.size()];
        List<Integer> todo = new ArrayList<>();
        for (int i = 0; i < units.size(); i++) {
            Unit u = units.get(i);
            sums[i] = u.slice.nextBase != null ? SegmentSummaries.sealed(u.verifiedKey(), u.trustHeaders) : null;
            if (sums[i] == null) {
                todo.add(i);
            }
        }
        int remembered = units.size() - todo.size();
        int threads = Math.max(1, Math.min(todo.size(), Runtime.getRuntime().availableProcessors()));
        long t1 = System.nanoTime();
        if (!todo.isEmpty()) {
            // the largest ranges first, over the driver's cores
            todo.sort((a, b) -> Long.compare(units.get(b).slice.end - units.get(b).slice.start,
                    units.get(a).slice.end - units.get(a).slice.start));
            ExecutorService pool = Executors.newFixedThreadPool(threads, r -> {
                Thread t = new Thread(r, "kbatch-summary");
                t.setDaemon(true);
                return t;
            });
            try {
                List<Future<RangeSummary>> futures = new ArrayList<>();
                for (int i : todo) {
                    Unit u = units.get(i);
                    futures.add(pool.submit(() -> summarize(u, conf)));
                }
                for (int k = 0; k < todo.size(); k++) {
                    sums[todo.get(k)] = futures.get(k).get();
                }
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
                throw new IOException("kafka-segments: interrupted while summarising segments", e);
            } catch (ExecutionException e) {
                Throwable c = e.getCause();
                if (c instanceof IOException) {
                    throw (IOException) c;
                }
                if (c instanceof RuntimeException) {
                    throw (RuntimeException) c;
                }
                throw new IOException(c);
            } finally {
                pool.shutdownNow();
            }
        }
        Answer answer = new Answer();
        int decoded = 0;
        int headers = 0;
        for (int i = 0; i < units.size(); i++) {
            RangeSummary s = sums[i];
            if (s.error != null) {
                skip(described, "damage in " + units.get(i).slice.path + " (" + s.error.getMessage().split("\n")[0]
                        + "): the read reports it or, with failOnDataLoss=false, skips as it skips");
                return null;
            }
            decoded += s.decodedBatches;
            headers += s.headerBatches;
            answer.add(units.get(i).slice, s);
        }
        LOG.info("kafka-segments: aggregate {} pushed down: {} ranges ({} remembered), {} batches from headers, "
                + "{} decoded; planned in {} ms, summarised in {} ms", described, units.size(), remembered, headers,
                decoded, (t1 - t0) / 1_000_000, (System.nanoTime() - t1) / 1_000_000);
        return answer;
    }

    private static RangeSummary summarize(Unit u, Configuration conf) throws IOException {
        SegmentSlice s = u.slice;
        FileSystem fs = LogDirectory.fileSystem(s.path, conf);
        boolean last = s.nextBase == null;
        try (LogDirectory.FsSource src = new LogDirectory.FsSource(fs, s.path, true)) {
            String key = u.key();
            RangeSummary known = last ? SegmentSummaries.get(u.verifiedKey(), u.trustHeaders, src, s.fileSize) : null;
            if (known != null) {
                return known;
            }
            RangeSummary r = RangeSummary.walk(src, s.start, s.end, s.fileSize, s.nextBase,
                    s.startOffset == null ? Long.MIN_VALUE : s.startOffset,
                    s.endOffset == null ? Long.MAX_VALUE : s.endOffset, s.aborted, u.trustHeaders);
            SegmentSummaries.put(key, r, last, src, s.fileSize);
            return r;
        }
    }

    /** Figures per group, in the order groups were met. */
    final class Answer {
        private final Map<List<Object>, long[]> byGroup = new LinkedHashMap<>();
        // per group: count, first offset, last offset, max timestamp, has timestamp

        void add(SegmentSlice slice, RangeSummary s) {
            List<Object> g = new ArrayList<>();
            for (String c : groups) {
                g.add(c.equals("topic") ? slice.topic : (Object) slice.partition);
            }
            long[] f = byGroup.computeIfAbsent(g, k -> new long[] {0, Long.MAX_VALUE, Long.MIN_VALUE, Long.MIN_VALUE, 0});
            if (s.count == 0) {
                return;
            }
            f[0] += s.count;
            f[1] = Math.min(f[1], s.firstOffset);
            f[2] = Math.max(f[2], s.lastOffset);
            if (s.hasTimestamp) {
                f[3] = f[4] == 0 ? s.maxTimestampUs : Math.max(f[3], s.maxTimestampUs);
                f[4] = 1;
            }
        }

        /** One row per group with rows (no grouping: exactly one row, as Spark's global aggregate gives). */
        InternalRow[] rows() {
            List<InternalRow> out = new ArrayList<>();
            if (groups.isEmpty() && byGroup.isEmpty()) {
                byGroup.put(new ArrayList<>(), new long[] {0, Long.MAX_VALUE, Long.MIN_VALUE, Long.MIN_VALUE, 0});
            }
            for (Map.Entry<List<Object>, long[]> e : byGroup.entrySet()) {
                long[] f = e.getValue();
                if (!groups.isEmpty() && f[0] == 0) {
                    continue;
                }
                Object[] row = new Object[groups.size() + fns.size()];
                int k = 0;
                for (Object g : e.getKey()) {
                    row[k++] = g instanceof String ? UTF8String.fromString((String) g) : g;
                }
                for (Fn fn : fns) {
                    switch (fn) {
                        case COUNT:
                            row[k++] = f[0];
                            break;
                        case MIN_OFFSET:
                            row[k++] = f[0] == 0 ? null : (Object) f[1];
                            break;
                        case MAX_OFFSET:
                            row[k++] = f[0] == 0 ? null : (Object) f[2];
                            break;
                        default:
                            row[k++] = f[4] == 0 ? null : (Object) f[3];
                    }
                }
                out.add(new GenericInternalRow(row));
            }
            return out.toArray(new InternalRow[0]);
        }
    }

    /** The pushed aggregate's scan: its rows, computed while Spark planned. */
    static final class Scan implements LocalScan {
        private final StructType schema;
        private final InternalRow[] rows;
        private final String description;

        Scan(StructType schema, InternalRow[] rows, String description) {
            this.schema = schema;
            this.rows = rows;
            this.description = description;
        }

        @Override
        public InternalRow[] rows() {
            return rows;
        }

        @Override
        public StructType readSchema() {
            return schema;
        }

        @Override
        public String description() {
            return description;
        }
    }

    String described() {
        return described;
    }
}
