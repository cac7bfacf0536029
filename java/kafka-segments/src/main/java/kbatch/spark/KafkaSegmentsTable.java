package kbatch.spark;

import java.util.EnumSet;
import java.util.HashMap;
import java.util.Map;
import java.util.Set;

import org.apache.spark.sql.connector.catalog.SupportsRead;
import org.apache.spark.sql.connector.catalog.SupportsWrite;
import org.apache.spark.sql.connector.catalog.Table;
import org.apache.spark.sql.connector.catalog.TableCapability;
import org.apache.spark.sql.connector.catalog.TableProvider;
import org.apache.spark.sql.connector.expressions.Transform;
import org.apache.spark.sql.connector.read.ScanBuilder;
import org.apache.spark.sql.connector.write.LogicalWriteInfo;
import org.apache.spark.sql.connector.write.WriteBuilder;
import org.apache.spark.sql.types.StructType;
import org.apache.spark.sql.util.CaseInsensitiveStringMap;

import kbatch.spark.columns.KafkaSchema;

/**
 * The table behind `format("kafka-segments")`. Reads (batch, and micro-batch streams) are this
 * package's scan; writes go to the
 * Python source registered under the same name (kbatch's Spark writer lives there), because a JVM
 * provider that claims the short name also receives `df.write.format("kafka-segments")`.
 */
final class KafkaSegmentsTable implements SupportsRead, SupportsWrite {
    static final String PYTHON_PROVIDER = "org.apache.spark.sql.execution.datasources.v2.python.PythonDataSourceV2";

    private final StructType given;
    private final Transform[] partitioning;
    private final Map<String, String> properties;

    KafkaSegmentsTable(StructType given, Transform[] partitioning, Map<String, String> properties) {
        this.given = given;
        this.partitioning = partitioning;
        this.properties = properties;
    }

    @Override
    public String name() {
        return KafkaSegmentsSource.NAME;
    }

    /** The given schema (a read's column selection, or a write's DataFrame schema), else the default. */
    @Override
    @SuppressWarnings("deprecation") // columns() is the newer name; schema() works on every Spark 4.x
    public StructType schema() {
        return given != null ? given : new ReadOptions(properties).schema();
    }

    @Override
    public Transform[] partitioning() {
        return partitioning == null ? new Transform[0] : partitioning;
    }

    @Override
    public Map<String, String> properties() {
        return properties;
    }

    @Override
    public Set<TableCapability> capabilities() {
        return EnumSet.of(TableCapability.BATCH_READ, TableCapability.MICRO_BATCH_READ, TableCapability.BATCH_WRITE,
                TableCapability.TRUNCATE);
    }

    @Override
    public ScanBuilder newScanBuilder(CaseInsensitiveStringMap options) {
        Map<String, String> all = new HashMap<>(properties);
        all.putAll(options);
        ReadOptions o = new ReadOptions(all);
        StructType schema = given != null ? KafkaSchema.checkGiven(given) : o.schema();
        return new KafkaSegmentsScanBuilder(o, schema);
    }

    /** Hand the write to the Python data source of the same name (Spark's PythonDataSourceV2). */
    @Override
    public WriteBuilder newWriteBuilder(LogicalWriteInfo info) {
        Table python;
        try {
            Object provider = Class.forName(PYTHON_PROVIDER).getDeclaredConstructor().newInstance();
            provider.getClass().getMethod("setShortName", String.class).invoke(provider, KafkaSegmentsSource.NAME);
            python = ((TableProvider) provider).getTable(schema(), partitioning(), properties);
        } catch (ReflectiveOperationException | LinkageError e) {
            throw new UnsupportedOperationException("kafka-segments: the JVM reader hands writes to the Python "
                    + "data source of the same name, and this Spark has no " + PYTHON_PROVIDER + " (" + e + ")", e);
        }
        if (!(python instanceof SupportsWrite)) {
            throw new UnsupportedOperationException("kafka-segments: the Python data source does not write");
        }
        return ((SupportsWrite) python).newWriteBuilder(info);
    }
}
