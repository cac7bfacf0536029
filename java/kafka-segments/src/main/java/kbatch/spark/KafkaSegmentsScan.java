package kbatch.spark;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.util.List;
import java.util.Map;

import org.apache.hadoop.conf.Configuration;
import org.apache.spark.SparkContext;
import org.apache.spark.sql.SparkSession;
import org.apache.spark.sql.connector.read.Batch;
import org.apache.spark.sql.connector.read.InputPartition;
import org.apache.spark.sql.connector.read.PartitionReaderFactory;
import org.apache.spark.sql.connector.read.Scan;
import org.apache.spark.sql.connector.read.streaming.MicroBatchStream;
import org.apache.spark.sql.types.StructType;

import kbatch.kafka.storage.LogDirectory;

/** One planned read: the pruned schema, and input partitions planned once (one per segment byte range). */
final class KafkaSegmentsScan implements Scan, Batch {
    private final ReadOptions options;
    private final StructType readSchema;
    private final KafkaSegmentsScanBuilder filters;
    private InputPartition[] partitions;
    private SerializableConfiguration conf;

    KafkaSegmentsScan(ReadOptions options, StructType readSchema, KafkaSegmentsScanBuilder filters) {
        this.options = options;
        this.readSchema = readSchema;
        this.filters = filters;
    }

    @Override
    public StructType readSchema() {
        return readSchema;
    }

    @Override
    public String description() {
        return "kafka-segments (JVM reader " + KafkaSegmentsSource.VERSION + ") " + options.get("path")
                + " columns=" + readSchema.simpleString();
    }

    @Override
    public Batch toBatch() {
        return this;
    }

    @Override
    public ColumnarSupportMode columnarSupportMode() {
        return ColumnarSupportMode.SUPPORTED;
    }

    /** A streaming query over the same directory, columns and options (see {@link KafkaSegmentsStream}). */
    @Override
    public MicroBatchStream toMicroBatchStream(String checkpointLocation) {
        if (filters.pushedFilters().length > 0) { // Spark pushes no filters into a stream's scan; never drop one
            throw new IllegalStateException("kafka-segments: filters were pushed into a streaming scan");
        }
        return new KafkaSegmentsStream(options, readSchema, checkpointLocation, hadoopConf(options));
    }

    /** Hadoop settings of the session (spark.hadoop.*, the session's SQL conf) plus fs.* options of the read. */
    static Configuration hadoopConf(ReadOptions options) {
        Configuration c = new Configuration(SparkContext.getOrCreate().hadoopConfiguration());
        SparkSession session = SparkSession.getActiveSession().isDefined() ? SparkSession.getActiveSession().get()
                : null;
        if (session != null) {
            Map<String, String> all = scala.jdk.javaapi.CollectionConverters.asJava(session.conf().getAll());
            for (Map.Entry<String, String> e : all.entrySet()) {
                if (e.getKey().startsWith("spark.hadoop.")) {
                    c.set(e.getKey().substring("spark.hadoop.".length()), e.getValue());
                } else if (!e.getKey().startsWith("spark.")) {
                    c.set(e.getKey(), e.getValue());
                }
            }
        }
        for (String prefix : new String[] {"fs.", "dfs.", "hadoop."}) {
            options.putMatching(prefix, c);
        }
        return c;
    }

    @Override
    public InputPartition[] planInputPartitions() {
        if (partitions == null) {
            Configuration c = hadoopConf(options);
            conf = new SerializableConfiguration(c);
            try {
                Planner planner = planner(options, filters, c);
                if (options.get("maxPartitionBytes") != null) { // the read's own rule: one input partition per slice
                    partitions = planner.plan().toArray(new InputPartition[0]);
                } else {
                    partitions = packed(planner);
                }
            } catch (IOException e) {
                throw new UncheckedIOException("kafka-segments: planning " + options.get("path") + ": " + e, e);
            }
        }
        return partitions;
    }

    /** A batch read's planner, narrowed by the filters pushed into `filters`. */
    static Planner planner(ReadOptions options, KafkaSegmentsScanBuilder filters, Configuration c) throws IOException {
        Planner planner = new Planner(LogDirectory.fileSystem(options.path(), c), options);
        planner.requirePartitions = true;
        planner.partitionsIn = filters.partitionsIn;
        planner.topicsIn = filters.topicsIn;
        planner.offsetLo = filters.offsetLo;
        planner.offsetHi = filters.offsetHi;
        planner.timestampLo = filters.timestampLo;
        return planner;
    }

    /** Input partitions by Spark's file-split rule over the bytes this scan reads (see {@link InputPlan}). */
    private InputPartition[] packed(Planner planner) throws IOException {
        InputPlan rule = InputPlan.fromSession();
        List<Planner.Range> ranges = planner.ranges();
        List<SegmentSlice> whole = new java.util.ArrayList<>();
        for (Planner.Range r : ranges) {
            whole.addAll(planner.planPartition(r.tp, r.start, r.end, Long.MAX_VALUE, r.aborted));
        }
        java.util.Set<String> names = new java.util.HashSet<>(java.util.Arrays.asList(readSchema.fieldNames()));
        double fraction = planner.readFraction(whole, names.contains("key"), names.contains("value"),
                names.contains("headers"));
        long maxSplit = rule.maxSplit(whole, fraction);
        long cut = InputPlan.fileBytes(maxSplit, fraction);
        List<SegmentSlice> slices = new java.util.ArrayList<>();
        for (Planner.Range r : ranges) {
            slices.addAll(planner.planPartition(r.tp, r.start, r.end, cut, r.aborted));
        }
        return rule.pack(slices, fraction, maxSplit);
    }

    @Override
    public PartitionReaderFactory createReaderFactory() {
        if (conf == null) {
            planInputPartitions();
        }
        return new SegmentReaderFactory(options, readSchema, conf);
    }
}
