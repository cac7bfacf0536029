package kbatch.spark;

/**
 * The same source under the short name `kafka-segments-jvm`, to ask for the JVM reader by name
 * (tests run every query on both readers in one session: `kafka-segments-python` is the Python one).
 */
public class KafkaSegmentsJvmSource extends KafkaSegmentsSource {
    public static final String JVM_NAME = "kafka-segments-jvm";

    @Override
    public String shortName() {
        return JVM_NAME;
    }
}
