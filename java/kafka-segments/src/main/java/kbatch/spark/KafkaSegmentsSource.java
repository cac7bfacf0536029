package kbatch.spark;

import java.util.Map;

import org.apache.spark.sql.connector.catalog.Table;
import org.apache.spark.sql.connector.catalog.TableProvider;
import org.apache.spark.sql.connector.expressions.Transform;
import org.apache.spark.sql.sources.DataSourceRegister;
import org.apache.spark.sql.types.StructType;
import org.apache.spark.sql.util.CaseInsensitiveStringMap;

/**
 * `spark.read.format("kafka-segments").load(dir)` on the JVM: kbatch's DataSource V2 over a
 * directory of `<topic>-<partition>/` segment folders or a tiered-storage layout (the layouts
 * {@link LogDirectory} lists), with the schema, options, partitioning and errors of the Python
 * source (kbatch/spark/datasource.py), columnar batches, column pruning and filter pushdown. A JVM
 * DataSourceRegister takes precedence over a Python data source of the same short name, so adding
 * this jar switches `kafka-segments` to it; writes are handed to the Python source's writer (see
 * {@link KafkaSegmentsTable#newWriteBuilder}).
 */
public class KafkaSegmentsSource implements TableProvider, DataSourceRegister {
    /** The short name, shared with the Python source. */
    public static final String NAME = "kafka-segments";
    /** The kbatch version this jar was built from (set by the build in the jar's manifest). */
    public static final String VERSION = versionFromManifest();

    private static String versionFromManifest() {
        String v = KafkaSegmentsSource.class.getPackage().getImplementationVersion();
        return v == null ? "dev" : v;
    }

    @Override
    public String shortName() {
        return NAME;
    }

    @Override
    public StructType inferSchema(CaseInsensitiveStringMap options) {
        return new ReadOptions(options).schema();
    }

    @Override
    public boolean supportsExternalMetadata() {
        return true; // a schema given before load selects columns, as in the Python source
    }

    @Override
    public Table getTable(StructType schema, Transform[] partitioning, Map<String, String> properties) {
        return new KafkaSegmentsTable(schema, partitioning, properties);
    }
}
