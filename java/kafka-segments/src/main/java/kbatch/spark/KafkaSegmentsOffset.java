package kbatch.spark;

import java.util.Collections;
import java.util.Map;
import java.util.TreeMap;

import com.fasterxml.jackson.core.JsonProcessingException;
import com.fasterxml.jackson.databind.ObjectMapper;
import org.apache.spark.sql.connector.read.streaming.Offset;

/**
 * A streaming query's position: per topic-partition, the next offset to read (the end, exclusive,
 * of what has been read). Written to the checkpoint as JSON in the layout Spark's Kafka source uses
 * for its own offsets, `{"topic":{"0":123,"1":456}}`, topics and partitions in order, so the
 * checkpoint's offsets files read the same for both sources.
 */
final class KafkaSegmentsOffset extends Offset {
    /** topic -> partition -> next offset; sorted, never modified after construction. */
    final Map<String, Map<Integer, Long>> offsets;

    KafkaSegmentsOffset(Map<String, Map<Integer, Long>> offsets) {
        Map<String, Map<Integer, Long>> copy = new TreeMap<>();
        for (Map.Entry<String, Map<Integer, Long>> t : offsets.entrySet()) {
            if (!t.getValue().isEmpty()) {
                copy.put(t.getKey(), Collections.unmodifiableMap(new TreeMap<>(t.getValue())));
            }
        }
        this.offsets = Collections.unmodifiableMap(copy);
    }

    static KafkaSegmentsOffset parse(String json) {
        return new KafkaSegmentsOffset(ReadOptions.json("offset", json));
    }

    /** The next offset of a partition, or null when this position does not know it. */
    Long get(String topic, int partition) {
        Map<Integer, Long> parts = offsets.get(topic);
        return parts == null ? null : parts.get(partition);
    }

    @Override
    public String json() {
        try {
            return new ObjectMapper().writeValueAsString(offsets);
        } catch (JsonProcessingException e) {
            throw new IllegalStateException("kafka-segments: offsets to JSON: " + e, e);
        }
    }
}
