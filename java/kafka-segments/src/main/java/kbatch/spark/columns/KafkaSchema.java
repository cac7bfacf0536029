package kbatch.spark.columns;

import java.util.ArrayList;
import java.util.HashSet;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;

import org.apache.spark.sql.types.DataType;
import org.apache.spark.sql.types.DataTypes;
import org.apache.spark.sql.types.StructField;
import org.apache.spark.sql.types.StructType;

import kbatch.kafka.wire.KafkaSegmentsException;

/**
 * Spark's Kafka-source columns (+ isTombstone, + batch fields on request), exactly as the Python
 * source's spark_schema (kbatch/spark/datasource.py): key, value binary; topic string; partition
 * int; offset long; timestamp timestamp; timestampType int; headers
 * array<struct<key: string, value: binary>>; isTombstone boolean; producerId long, producerEpoch
 * short, baseSequence int, isTransactional boolean, isControl boolean.
 */
public final class KafkaSchema {
    private KafkaSchema() {}

    static final DataType HEADERS = DataTypes.createArrayType(DataTypes.createStructType(new StructField[] {
        DataTypes.createStructField("key", DataTypes.StringType, true),
        DataTypes.createStructField("value", DataTypes.BinaryType, true)}), true);

    public static StructType schema(boolean includeHeaders, boolean batchFields) {
        List<StructField> f = new ArrayList<>();
        f.add(DataTypes.createStructField("key", DataTypes.BinaryType, true));
        f.add(DataTypes.createStructField("value", DataTypes.BinaryType, true));
        f.add(DataTypes.createStructField("topic", DataTypes.StringType, true));
        f.add(DataTypes.createStructField("partition", DataTypes.IntegerType, true));
        f.add(DataTypes.createStructField("offset", DataTypes.LongType, true));
        f.add(DataTypes.createStructField("timestamp", DataTypes.TimestampType, true));
        f.add(DataTypes.createStructField("timestampType", DataTypes.IntegerType, true));
        if (includeHeaders) {
            f.add(DataTypes.createStructField("headers", HEADERS, true));
        }
        f.add(DataTypes.createStructField("isTombstone", DataTypes.BooleanType, true));
        if (batchFields) {
            f.add(DataTypes.createStructField("producerId", DataTypes.LongType, true));
            f.add(DataTypes.createStructField("producerEpoch", DataTypes.ShortType, true));
            f.add(DataTypes.createStructField("baseSequence", DataTypes.IntegerType, true));
            f.add(DataTypes.createStructField("isTransactional", DataTypes.BooleanType, true));
            f.add(DataTypes.createStructField("isControl", DataTypes.BooleanType, true));
        }
        return DataTypes.createStructType(f);
    }

    /**
     * A user-given schema (`.schema(...)` before `.load`) selects columns: any subset of the full
     * schema, in any order, with the same types (datasource._columns); anything else is refused.
     */
    public static StructType checkGiven(StructType given) {
        Map<String, DataType> full = new LinkedHashMap<>();
        for (StructField f : schema(true, true).fields()) {
            full.put(f.name(), f.dataType());
        }
        List<String> names = new ArrayList<>();
        for (StructField f : given.fields()) {
            names.add(f.name());
            DataType want = full.get(f.name());
            if (want == null) {
                throw KafkaSegmentsException.invalidRequest("kafka-segments: unknown column '" + f.name()
                        + "' in the given schema", "columns of " + String.join(", ", full.keySet()), f.name());
            }
            if (!want.catalogString().equals(f.dataType().catalogString())) {
                throw KafkaSegmentsException.invalidRequest("kafka-segments: column '" + f.name()
                        + "' has the wrong type in the given schema", want.simpleString(), f.dataType().simpleString());
            }
        }
        Set<String> distinct = new HashSet<>(names);
        if (names.isEmpty() || distinct.size() != names.size()) {
            throw KafkaSegmentsException.invalidRequest("kafka-segments: the given schema needs distinct columns",
                    "at least one column, each once", String.join(", ", names));
        }
        return given;
    }
}
