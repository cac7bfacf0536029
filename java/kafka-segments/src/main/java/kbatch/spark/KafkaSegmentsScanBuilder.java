package kbatch.spark;

import java.sql.Timestamp;
import java.time.Instant;
import java.time.LocalDateTime;
import java.time.ZoneOffset;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.List;
import java.util.Set;

import org.apache.spark.sql.connector.expressions.aggregate.Aggregation;
import org.apache.spark.sql.connector.read.Scan;
import org.apache.spark.sql.connector.read.ScanBuilder;
import org.apache.spark.sql.connector.read.SupportsPushDownAggregates;
import org.apache.spark.sql.connector.read.SupportsPushDownFilters;
import org.apache.spark.sql.connector.read.SupportsPushDownRequiredColumns;
import org.apache.spark.sql.sources.EqualTo;
import org.apache.spark.sql.sources.Filter;
import org.apache.spark.sql.sources.GreaterThan;
import org.apache.spark.sql.sources.GreaterThanOrEqual;
import org.apache.spark.sql.sources.In;
import org.apache.spark.sql.sources.IsNotNull;
import org.apache.spark.sql.sources.LessThan;
import org.apache.spark.sql.sources.LessThanOrEqual;
import org.apache.spark.sql.types.StructType;

/**
 * Column pruning (only the columns a query reads are decoded) and filter pushdown with the
 * Python pushdown reader's rules (KafkaSegmentsPushdownReader): `partition` and `topic` equality
 * and IN prune partitions; `offset` comparisons are exact offset ranges (skipped bytes are never
 * read); a lower bound on `timestamp` resolves through the time index to a start offset, and
 * Spark still applies the timestamp filter. Aggregates over what is left are answered on the
 * driver from batch headers where exact ({@link AggregatePushdown}). Option pushdown=false pushes
 * nothing.
 */
final class KafkaSegmentsScanBuilder implements ScanBuilder, SupportsPushDownRequiredColumns,
        SupportsPushDownFilters, SupportsPushDownAggregates {
    private final ReadOptions options;
    private final StructType schema;
    private StructType required;
    private final List<Filter> pushed = new ArrayList<>();

    Set<Integer> partitionsIn;
    Set<String> topicsIn;
    Long offsetLo;
    Long offsetHi;
    Long timestampLo;

    KafkaSegmentsScanBuilder(ReadOptions options, StructType schema) {
        this.options = options;
        this.schema = schema;
        this.required = schema;
    }

    @Override
    public void pruneColumns(StructType requiredSchema) {
        required = requiredSchema;
    }

    /** The pushed aggregate's answer (null: none pushed). */
    private AggregatePushdown.Scan aggregated;

    @Override
    public Scan build() {
        if (aggregated != null) {
            return aggregated;
        }
        return new KafkaSegmentsScan(options, required, this);
    }

    /** The answer is one row per group: Spark needs no aggregation above it. */
    @Override
    public boolean supportCompletePushDown(Aggregation aggregation) {
        return true;
    }

    /**
     * Answer the aggregate now, on the driver, from segment summaries; false (logged) when the
     * read must answer it (see {@link AggregatePushdown}), and Spark then reads rows.
     */
    @Override
    public boolean pushAggregation(Aggregation aggregation) {
        AggregatePushdown plan = AggregatePushdown.of(aggregation, options, schema);
        if (plan == null) {
            return false;
        }
        AggregatePushdown.Answer answer;
        try {
            org.apache.hadoop.conf.Configuration c = KafkaSegmentsScan.hadoopConf(options);
            answer = plan.answer(KafkaSegmentsScan.planner(options, this, c), c);
        } catch (java.io.IOException | RuntimeException e) {
            // the read meets it again and reports it as a read does
            AggregatePushdown.LOG.info("kafka-segments: aggregate {} not pushed down: {}", plan.described(),
                    String.valueOf(e.getMessage()).split("\n")[0]);
            return false;
        }
        if (answer == null) {
            return false;
        }
        aggregated = new AggregatePushdown.Scan(plan.schema(), answer.rows(), "kafka-segments (JVM reader "
                + KafkaSegmentsSource.VERSION + ") " + options.get("path") + " pushedAggregates="
                + plan.described() + " from segment summaries");
        return true;
    }

    @Override
    public Filter[] pushFilters(Filter[] filters) {
        if (!options.bool("pushdown", true)) {
            return filters;
        }
        List<Filter> left = new ArrayList<>();
        for (Filter f : filters) {
            if (push(f)) {
                pushed.add(f);
            } else {
                left.add(f);
            }
        }
        if (!left.isEmpty()) { // Spark pushes no aggregate over a filter it applies itself
            AggregatePushdown.LOG.info("kafka-segments: filters {} are applied by Spark: an aggregate over this "
                    + "read is not pushed down", left);
        }
        return left.toArray(new Filter[0]);
    }

    @Override
    public Filter[] pushedFilters() {
        return pushed.toArray(new Filter[0]);
    }

    /** True when the reader applies the filter fully (Spark then drops it). */
    private boolean push(Filter f) {
        String[] refs = f.references();
        if (refs.length != 1) {
            return false;
        }
        String col = refs[0];
        if (f instanceof IsNotNull && (col.equals("partition") || col.equals("topic") || col.equals("offset"))) {
            return true; // never null in a read (Spark infers these from a comparison)
        }
        if (col.equals("partition")) {
            Set<Integer> values = null;
            if (f instanceof EqualTo) {
                values = intSet(new Object[] {((EqualTo) f).value()});
            } else if (f instanceof In) {
                values = intSet(((In) f).values());
            }
            if (values == null) {
                return false;
            }
            if (partitionsIn == null) {
                partitionsIn = values;
            } else {
                partitionsIn.retainAll(values);
            }
            return true;
        }
        if (col.equals("topic")) {
            Set<String> values = null;
            if (f instanceof EqualTo) {
                values = stringSet(new Object[] {((EqualTo) f).value()});
            } else if (f instanceof In) {
                values = stringSet(((In) f).values());
            }
            if (values == null) {
                return false;
            }
            if (topicsIn == null) {
                topicsIn = values;
            } else {
                topicsIn.retainAll(values);
            }
            return true;
        }
        if (col.equals("offset")) {
            if (f instanceof EqualTo && number(((EqualTo) f).value())) {
                long v = ((Number) ((EqualTo) f).value()).longValue();
                offsets(v, v + 1);
            } else if (f instanceof GreaterThan && number(((GreaterThan) f).value())) {
                offsets(((Number) ((GreaterThan) f).value()).longValue() + 1, null);
            } else if (f instanceof GreaterThanOrEqual && number(((GreaterThanOrEqual) f).value())) {
                offsets(((Number) ((GreaterThanOrEqual) f).value()).longValue(), null);
            } else if (f instanceof LessThan && number(((LessThan) f).value())) {
                offsets(null, ((Number) ((LessThan) f).value()).longValue());
            } else if (f instanceof LessThanOrEqual && number(((LessThanOrEqual) f).value())) {
                offsets(null, ((Number) ((LessThanOrEqual) f).value()).longValue() + 1);
            } else if (f instanceof In) {
                Long min = null;
                Long max = null;
                for (Object v : ((In) f).values()) {
                    if (number(v)) {
                        long x = ((Number) v).longValue();
                        min = min == null ? x : Math.min(min, x);
                        max = max == null ? x : Math.max(max, x);
                    }
                }
                if (min != null) {
                    offsets(min, max + 1);
                }
                return false; // the range is a superset: Spark keeps the exact test
            } else {
                return false;
            }
            return true;
        }
        if (col.equals("timestamp")) {
            Object v = null;
            if (f instanceof GreaterThan) {
                v = ((GreaterThan) f).value();
            } else if (f instanceof GreaterThanOrEqual) {
                v = ((GreaterThanOrEqual) f).value();
            } else if (f instanceof EqualTo) {
                v = ((EqualTo) f).value();
            }
            Long ms = millis(v);
            if (ms != null) {
                // floor to ms: rows with ts > v or ts >= v all have ts_ms >= floor(v)
                timestampLo = timestampLo == null ? ms : Math.max(timestampLo, ms);
            }
            return false;
        }
        return false;
    }

    private static boolean number(Object v) {
        return v instanceof Long || v instanceof Integer || v instanceof Short || v instanceof Byte;
    }

    private static Long millis(Object v) {
        if (v instanceof Timestamp) {
            Timestamp t = (Timestamp) v;
            return Math.floorDiv(t.getTime(), 1000) * 1000 + t.getNanos() / 1_000_000;
        }
        if (v instanceof Instant) {
            Instant i = (Instant) v;
            return Math.multiplyExact(i.getEpochSecond(), 1000) + i.getNano() / 1_000_000;
        }
        if (v instanceof LocalDateTime) {
            return ((LocalDateTime) v).toInstant(ZoneOffset.UTC).toEpochMilli();
        }
        return null;
    }

    private static Set<Integer> intSet(Object[] values) {
        Set<Integer> out = new HashSet<>();
        for (Object v : values) {
            if (v instanceof Number) {
                out.add(((Number) v).intValue());
            } else if (v != null) {
                return null;
            }
        }
        return out;
    }

    private static Set<String> stringSet(Object[] values) {
        Set<String> out = new HashSet<>();
        for (Object v : values) {
            if (v instanceof String) {
                out.add((String) v);
            } else if (v != null) {
                return null;
            }
        }
        return out;
    }

    private void offsets(Long lo, Long hi) {
        if (lo != null) {
            offsetLo = offsetLo == null ? lo : Math.max(offsetLo, lo);
        }
        if (hi != null) {
            offsetHi = offsetHi == null ? hi : Math.min(offsetHi, hi);
        }
    }
}
