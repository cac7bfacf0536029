package kbatch.spark;

import java.io.Serializable;
import java.util.Arrays;
import java.util.HashMap;
import java.util.Iterator;
import java.util.LinkedHashSet;
import java.util.Locale;
import java.util.Map;
import java.util.Set;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import org.apache.spark.sql.types.StructType;

import kbatch.kafka.wire.KafkaSegmentsException;
import kbatch.spark.columns.KafkaSchema;

/**
 * The source's options, with the names and meanings of the Python source
 * (kbatch/spark/datasource.py) and Spark's Kafka source where it has one. Names are case-insensitive.
 */
final class ReadOptions implements Serializable {
    private static final long serialVersionUID = 1L;

    static final long DEFAULT_MAX_PARTITION_BYTES = 64L * 1024 * 1024;
    static final int DEFAULT_ROWS_PER_BATCH = 32768;

    private final Map<String, String> options = new HashMap<>();
    private final Map<String, String> original = new HashMap<>();

    ReadOptions(Map<String, String> given) {
        original.putAll(given);
        for (Map.Entry<String, String> e : given.entrySet()) {
            options.put(e.getKey().toLowerCase(Locale.ROOT), e.getValue());
        }
    }

    /** The first of these options that is set and not empty, or null. */
    String get(String... names) {
        for (String n : names) {
            String v = options.get(n.toLowerCase(Locale.ROOT));
            if (v != null && !v.isEmpty()) {
                return v;
            }
        }
        return null;
    }

    boolean bool(String name, boolean dflt) {
        String v = get(name);
        if (v == null) {
            return dflt;
        }
        String s = v.trim().toLowerCase(Locale.ROOT);
        return s.equals("1") || s.equals("true") || s.equals("yes") || s.equals("on");
    }

    long longOption(String name, long dflt) {
        String v = get(name);
        if (v == null) {
            return dflt;
        }
        try {
            return Long.parseLong(v.trim());
        } catch (NumberFormatException e) {
            throw KafkaSegmentsException.invalidRequest("kafka-segments: option " + name + " is not an integer",
                    "an integer", v);
        }
    }

    String path() {
        String p = get("path");
        if (p == null) {
            throw KafkaSegmentsException.invalidRequest(
                    "kafka-segments needs a path: spark.read.format('kafka-segments').load(dir)",
                    "a directory of <topic>-<partition> folders", null);
        }
        return p;
    }

    boolean includeHeaders() {
        return bool("includeHeaders", false);
    }

    /** The columns these options give (the batch fields and headers only when asked for). */
    StructType schema() {
        return KafkaSchema.schema(includeHeaders(), includeBatchFields());
    }

    boolean includeBatchFields() {
        return bool("includeBatchFields", false);
    }

    String badRecordsPath() {
        return get("badRecordsPath");
    }

    boolean failOnDataLoss() {
        return bool("failOnDataLoss", true) && !bool("skipBadSegments", false) && badRecordsPath() == null;
    }

    boolean verifyCrc() {
        return bool("verifyCrc", true);
    }

    /** Aggregates answered from batch headers without CRCs (an opt-in: docs/spark.md says what it misses). */
    boolean trustHeaders() {
        return bool("trustHeaders", false);
    }

    long maxPartitionBytes() {
        return longOption("maxPartitionBytes", DEFAULT_MAX_PARTITION_BYTES);
    }

    int rowsPerBatch() {
        return (int) longOption("rowsPerBatch", DEFAULT_ROWS_PER_BATCH);
    }

    /** `isolation.level` (or Spark's Kafka-source spelling `kafka.isolation.level`). */
    boolean readCommitted() {
        String v = get("isolation.level", "kafka.isolation.level", "isolationLevel");
        if (v == null) {
            return false;
        }
        String s = v.trim().toLowerCase(Locale.ROOT);
        if (s.equals("read_committed")) {
            return true;
        }
        if (s.equals("read_uncommitted")) {
            return false;
        }
        throw KafkaSegmentsException.invalidRequest("kafka-segments: unknown isolation.level",
                "read_uncommitted or read_committed", v);
    }

    Set<String> topics() {
        String v = get("topics", "subscribe");
        if (v == null) {
            return null;
        }
        Set<String> out = new LinkedHashSet<>();
        for (String t : v.split(",")) {
            if (!t.trim().isEmpty()) {
                out.add(t.trim());
            }
        }
        return out;
    }

    String topicPattern() {
        return get("topicPattern", "subscribePattern");
    }

    /** topic -> partition -> value, from an option holding JSON as Spark's Kafka source takes it. */
    static Map<String, Map<Integer, Long>> json(String name, String text) {
        JsonNode root;
        try {
            root = new ObjectMapper().readTree(text);
        } catch (Exception e) {
            throw KafkaSegmentsException.invalidRequest("kafka-segments: option " + name + " is not valid JSON ("
                    + e.getMessage().split("\n")[0] + ")", "{\"topic\": {\"0\": 23}}", text);
        }
        boolean ok = root != null && root.isObject();
        for (Iterator<JsonNode> it = ok ? root.elements() : java.util.Collections.emptyIterator(); it.hasNext(); ) {
            ok &= it.next().isObject();
        }
        if (!ok) {
            throw KafkaSegmentsException.invalidRequest(
                    "kafka-segments: option " + name + " must map topic -> partition -> value",
                    "{\"topic\": {\"0\": 23}}", text);
        }
        Map<String, Map<Integer, Long>> out = new HashMap<>();
        for (Iterator<Map.Entry<String, JsonNode>> it = root.properties().iterator(); it.hasNext(); ) {
            Map.Entry<String, JsonNode> t = it.next();
            Map<Integer, Long> parts = new HashMap<>();
            for (Iterator<Map.Entry<String, JsonNode>> jt = t.getValue().properties().iterator(); jt.hasNext(); ) {
                Map.Entry<String, JsonNode> p = jt.next();
                try {
                    parts.put(Integer.parseInt(p.getKey().trim()), p.getValue().isNumber() ? p.getValue().asLong()
                            : Long.parseLong(p.getValue().asText().trim()));
                } catch (NumberFormatException e) {
                    throw KafkaSegmentsException.invalidRequest("kafka-segments: option " + name
                            + " must map topic -> partition -> integer", "{\"topic\": {\"0\": 23}}", text);
                }
            }
            out.put(t.getKey(), parts);
        }
        return out;
    }

    /** Copy the options whose names start with `prefix` (Hadoop settings such as fs.s3a.*) into conf. */
    void putMatching(String prefix, org.apache.hadoop.conf.Configuration conf) {
        for (Map.Entry<String, String> e : original.entrySet()) {
            if (e.getKey().toLowerCase(Locale.ROOT).startsWith(prefix) && e.getValue() != null) {
                conf.set(e.getKey(), e.getValue());
            }
        }
    }

    @Override
    public String toString() {
        return Arrays.toString(options.keySet().toArray());
    }
}
