// Kafka's own Java clients driven by a JSON plan, for the real-Kafka tests (tests/support/kafka_driver.py
// compiles this against the broker version's jars and runs it; docs/real-kafka.md).
//
//   java -cp <classes>:<kafka lib>/* KafkaDriver plan.json result.json
//
// plan: {"bootstrap": "127.0.0.1:port", "actions": [action, ...]}; each action's result goes into
// result.json's "results" list, in order (each with "ms": how long it took). Bytes travel as base64;
// a null key, value or header value as null.
//
//   {"op": "create_topics", "topics": [{"name", "partitions", "configs": {k: v}}]}
//       -> {"created": [names]}
//   {"op": "produce", "producers": [{producer config}, ...], "steps": [step, ...]}
//       steps, each on producer "p" (an index into producers, default 0), in order:
//              {"send": [topic, partition, key, value, timestamp|null, [[hkey, hvalue], ...]]},
//              {"flush": true}, {"begin": true}, {"commit": true}, {"abort": true}
//       (a producer with a "transactional.id": initTransactions first)
//       -> {"sent": [[topic, partition, offset, timestamp], ...]} one per send, in order; with
//          "errors": true a refused send gives [null, null, null, null, exception class, message]
//          instead of failing the plan
//   {"op": "consume", "topics": [names], "isolation": "read_committed"|"read_uncommitted", "out": path}
//       every partition from its beginning to the end offset at the start (the LSO for read_committed);
//       JSON lines to `out`: {"t", "p", "o", "ts", "tt", "k", "v", "h": [[k, v]], "le"}
//       -> {"records": n}
//   {"op": "list_offsets", "topics": [names], "timestamps": [t, ...], "isolation": ...}
//       ListOffsets through the Admin client, one request per target for every partition:
//       -> {"partitions": {"topic-p": {"earliest": [offset, ts, epoch], "latest": [...],
//                                      "max_timestamp": [...] (brokers and clients that have it),
//                                      "times": [[target, offset, ts, epoch], ...]}}}
//       (-1 offset and timestamp: no record at or after the target; epoch null when unknown)
import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;

import java.io.BufferedWriter;
import java.io.File;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Paths;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Base64;
import java.util.Collection;
import java.lang.reflect.Method;
import java.util.HashMap;
import java.util.Iterator;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.ListOffsetsOptions;
import org.apache.kafka.clients.admin.ListOffsetsResult;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.admin.OffsetSpec;
import org.apache.kafka.clients.admin.TopicDescription;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.clients.producer.RecordMetadata;
import org.apache.kafka.common.IsolationLevel;
import org.apache.kafka.common.KafkaFuture;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.TopicPartitionInfo;
import org.apache.kafka.common.header.Header;
import org.apache.kafka.common.header.internals.RecordHeader;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;
import org.apache.kafka.common.serialization.ByteArraySerializer;

@SuppressWarnings("deprecation")  // JsonNode.fields(): its replacement is newer than 2.8's Jackson
public final class KafkaDriver {
    private static final ObjectMapper JSON = new ObjectMapper();
    private static final long WAIT_MS = 120_000;  // every wait on the broker is bounded by this

    public static void main(String[] args) throws Exception {
        if (args.length != 2) {
            System.err.println("usage: KafkaDriver plan.json result.json");
            System.exit(2);
        }
        JsonNode plan = JSON.readTree(new File(args[0]));
        String bootstrap = plan.get("bootstrap").asText();
        ArrayNode results = JSON.createArrayNode();
        for (JsonNode action : plan.get("actions")) {
            String op = action.get("op").asText();
            long start = System.nanoTime();
            JsonNode result;
            switch (op) {
                case "create_topics": result = createTopics(bootstrap, action); break;
                case "produce": result = produce(bootstrap, action); break;
                case "consume": result = consume(bootstrap, action); break;
                case "list_offsets": result = listOffsets(bootstrap, action); break;
                default: throw new IllegalArgumentException("unknown op " + op);
            }
            ((ObjectNode) result).put("ms", (System.nanoTime() - start) / 1_000_000);
            results.add(result);
        }
        ObjectNode out = JSON.createObjectNode();
        out.set("results", results);
        JSON.writeValue(new File(args[1]), out);
    }

    private static byte[] bytes(JsonNode n) {
        return n == null || n.isNull() ? null : Base64.getDecoder().decode(n.asText());
    }

    private static String b64(byte[] b) {
        return b == null ? null : Base64.getEncoder().encodeToString(b);
    }

    private static Admin admin(String bootstrap) {
        Properties p = new Properties();
        p.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        p.put(AdminClientConfig.REQUEST_TIMEOUT_MS_CONFIG, "60000");
        return Admin.create(p);
    }

    private static JsonNode createTopics(String bootstrap, JsonNode action) throws Exception {
        List<NewTopic> topics = new ArrayList<>();
        ArrayNode names = JSON.createArrayNode();
        for (JsonNode t : action.get("topics")) {
            NewTopic nt = new NewTopic(t.get("name").asText(), t.get("partitions").asInt(), (short) 1);
            Map<String, String> configs = new HashMap<>();
            Iterator<Map.Entry<String, JsonNode>> it = t.path("configs").fields();
            while (it.hasNext()) {
                Map.Entry<String, JsonNode> e = it.next();
                configs.put(e.getKey(), e.getValue().asText());
            }
            topics.add(nt.configs(configs));
            names.add(t.get("name").asText());
        }
        try (Admin admin = admin(bootstrap)) {
            admin.createTopics(topics).all().get(WAIT_MS, TimeUnit.MILLISECONDS);
            // until every partition has its leader (a produce right after creation would wait otherwise)
            long deadline = System.currentTimeMillis() + WAIT_MS;
            List<String> wanted = new ArrayList<>();
            names.forEach(n -> wanted.add(n.asText()));
            while (true) {
                boolean ready = true;
                try {
                    for (TopicDescription d : describe(admin, wanted))
                        for (TopicPartitionInfo p : d.partitions())
                            ready &= p.leader() != null && !p.leader().isEmpty();
                } catch (Exception e) {
                    ready = false;
                }
                if (ready) break;
                if (System.currentTimeMillis() > deadline)
                    throw new IllegalStateException("topics without leaders: " + wanted);
                Thread.sleep(100);
            }
        }
        ObjectNode r = JSON.createObjectNode();
        r.set("created", names);
        return r;
    }

    private static KafkaProducer<byte[], byte[]> producer(String bootstrap, JsonNode props) {
        Properties p = new Properties();
        p.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        p.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class.getName());
        p.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class.getName());
        Iterator<Map.Entry<String, JsonNode>> it = props.fields();
        while (it.hasNext()) {
            Map.Entry<String, JsonNode> e = it.next();
            p.put(e.getKey(), e.getValue().asText());
        }
        KafkaProducer<byte[], byte[]> producer = new KafkaProducer<>(p);
        if (p.containsKey(ProducerConfig.TRANSACTIONAL_ID_CONFIG))
            producer.initTransactions();
        return producer;
    }

    private static JsonNode produce(String bootstrap, JsonNode action) throws Exception {
        List<KafkaProducer<byte[], byte[]>> producers = new ArrayList<>();
        List<Future<RecordMetadata>> sent = new ArrayList<>();
        try {
            for (JsonNode props : action.get("producers"))
                producers.add(producer(bootstrap, props));
            for (JsonNode step : action.get("steps")) {
                KafkaProducer<byte[], byte[]> producer = producers.get(step.path("p").asInt(0));
                if (step.has("send")) {
                    JsonNode s = step.get("send");
                    List<Header> headers = new ArrayList<>();
                    for (JsonNode h : s.get(5))
                        headers.add(new RecordHeader(h.get(0).asText(), bytes(h.get(1))));
                    Long ts = s.get(4).isNull() ? null : s.get(4).asLong();
                    sent.add(producer.send(new ProducerRecord<>(s.get(0).asText(), s.get(1).asInt(), ts,
                            bytes(s.get(2)), bytes(s.get(3)), headers)));
                } else if (step.has("flush")) {
                    producer.flush();
                } else if (step.has("begin")) {
                    producer.beginTransaction();
                } else if (step.has("commit")) {
                    producer.commitTransaction();
                } else if (step.has("abort")) {
                    producer.flush();  // the aborted records are written (and get offsets) before the marker
                    producer.abortTransaction();
                } else {
                    throw new IllegalArgumentException("unknown step " + step);
                }
            }
            for (KafkaProducer<byte[], byte[]> producer : producers) producer.flush();
        } finally {
            for (KafkaProducer<byte[], byte[]> producer : producers) producer.close(Duration.ofMillis(WAIT_MS));
        }
        ArrayNode out = JSON.createArrayNode();
        boolean keepErrors = action.path("errors").asBoolean(false);
        for (Future<RecordMetadata> f : sent) {
            ArrayNode row = out.addArray();
            try {
                RecordMetadata m = f.get(WAIT_MS, TimeUnit.MILLISECONDS);
                row.add(m.topic()).add(m.partition()).add(m.offset()).add(m.timestamp());
            } catch (ExecutionException e) {
                if (!keepErrors) throw e;
                // what the producer reports for a send the broker refused: exception class and message
                Throwable cause = e.getCause() == null ? e : e.getCause();
                row.addNull().addNull().addNull().addNull().add(cause.getClass().getName()).add(cause.getMessage());
            }
        }
        ObjectNode r = JSON.createObjectNode();
        r.set("sent", out);
        return r;
    }

    /** Admin.describeTopics' answers: allTopicNames() (clients 3.1+), all() before it. */
    @SuppressWarnings("unchecked")
    private static Collection<TopicDescription> describe(Admin admin, List<String> names) throws Exception {
        Object result = admin.describeTopics(names);
        Method m;
        try {
            m = result.getClass().getMethod("allTopicNames");
        } catch (NoSuchMethodException e) {
            m = result.getClass().getMethod("all");
        }
        KafkaFuture<Map<String, TopicDescription>> f = (KafkaFuture<Map<String, TopicDescription>>) m.invoke(result);
        return f.get(WAIT_MS, TimeUnit.MILLISECONDS).values();
    }

    private static List<TopicPartition> partitions(Admin admin, JsonNode topics) throws Exception {
        List<String> names = new ArrayList<>();
        topics.forEach(n -> names.add(n.asText()));
        List<TopicPartition> out = new ArrayList<>();
        for (TopicDescription d : describe(admin, names))
            for (TopicPartitionInfo p : d.partitions())
                out.add(new TopicPartition(d.name(), p.partition()));
        out.sort((a, b) -> a.topic().equals(b.topic()) ? Integer.compare(a.partition(), b.partition())
                                                       : a.topic().compareTo(b.topic()));
        return out;
    }

    private static JsonNode consume(String bootstrap, JsonNode action) throws Exception {
        String isolation = action.path("isolation").asText("read_uncommitted");
        List<TopicPartition> tps;
        try (Admin admin = admin(bootstrap)) {
            tps = partitions(admin, action.get("topics"));
        }
        Properties p = new Properties();
        p.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        p.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
        p.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
        p.put(ConsumerConfig.ISOLATION_LEVEL_CONFIG, isolation);
        p.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
        p.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
        long n = 0;
        try (KafkaConsumer<byte[], byte[]> consumer = new KafkaConsumer<>(p);
             BufferedWriter w = Files.newBufferedWriter(Paths.get(action.get("out").asText()),
                                                        StandardCharsets.UTF_8)) {
            consumer.assign(tps);
            consumer.seekToBeginning(tps);
            Map<TopicPartition, Long> end = consumer.endOffsets(tps, Duration.ofMillis(WAIT_MS));
            Map<TopicPartition, List<ConsumerRecord<byte[], byte[]>>> got = new LinkedHashMap<>();
            for (TopicPartition tp : tps) got.put(tp, new ArrayList<>());
            long deadline = System.currentTimeMillis() + WAIT_MS;
            while (true) {
                boolean done = true;
                for (TopicPartition tp : tps)
                    done &= consumer.position(tp, Duration.ofMillis(WAIT_MS)) >= end.get(tp);
                if (done) break;
                if (System.currentTimeMillis() > deadline)
                    throw new IllegalStateException("consume did not reach the end offsets " + end);
                for (ConsumerRecord<byte[], byte[]> r : consumer.poll(Duration.ofMillis(200))) {
                    TopicPartition tp = new TopicPartition(r.topic(), r.partition());
                    if (r.offset() < end.get(tp)) got.get(tp).add(r);
                }
            }
            for (List<ConsumerRecord<byte[], byte[]>> rs : got.values()) {
                for (ConsumerRecord<byte[], byte[]> r : rs) {
                    ObjectNode o = JSON.createObjectNode();
                    o.put("t", r.topic()).put("p", r.partition()).put("o", r.offset()).put("ts", r.timestamp())
                            .put("tt", r.timestampType().name).put("k", b64(r.key())).put("v", b64(r.value()));
                    ArrayNode hs = o.putArray("h");
                    for (Header h : r.headers()) hs.addArray().add(h.key()).add(b64(h.value()));
                    if (r.leaderEpoch().isPresent()) o.put("le", r.leaderEpoch().get());
                    else o.putNull("le");
                    w.write(JSON.writeValueAsString(o));
                    w.write('\n');
                    n++;
                }
            }
        }
        ObjectNode r = JSON.createObjectNode();
        r.put("records", n);
        return r;
    }

    private static ArrayNode answer(ListOffsetsResult.ListOffsetsResultInfo info) {
        ArrayNode a = JSON.createArrayNode();
        a.add(info.offset()).add(info.timestamp());
        if (info.leaderEpoch().isPresent()) a.add(info.leaderEpoch().get());
        else a.addNull();
        return a;
    }

    private static Map<TopicPartition, ListOffsetsResult.ListOffsetsResultInfo> ask(
            Admin admin, List<TopicPartition> tps, OffsetSpec spec, ListOffsetsOptions options) throws Exception {
        Map<TopicPartition, OffsetSpec> req = new LinkedHashMap<>();
        for (TopicPartition tp : tps) req.put(tp, spec);
        return admin.listOffsets(req, options).all().get(WAIT_MS, TimeUnit.MILLISECONDS);
    }

    private static JsonNode listOffsets(String bootstrap, JsonNode action) throws Exception {
        String isolation = action.path("isolation").asText("read_uncommitted");
        ListOffsetsOptions options = new ListOffsetsOptions(
                isolation.equals("read_committed") ? IsolationLevel.READ_COMMITTED : IsolationLevel.READ_UNCOMMITTED);
        ObjectNode parts = JSON.createObjectNode();
        try (Admin admin = admin(bootstrap)) {
            List<TopicPartition> tps = partitions(admin, action.get("topics"));
            Map<TopicPartition, ObjectNode> byTp = new HashMap<>();
            for (TopicPartition tp : tps) {
                ObjectNode o = parts.putObject(tp.topic() + "-" + tp.partition());
                o.putArray("times");
                byTp.put(tp, o);
            }
            ask(admin, tps, OffsetSpec.earliest(), options)
                    .forEach((tp, info) -> byTp.get(tp).set("earliest", answer(info)));
            ask(admin, tps, OffsetSpec.latest(), options)
                    .forEach((tp, info) -> byTp.get(tp).set("latest", answer(info)));
            OffsetSpec max = maxTimestampSpec();
            if (max != null)
                ask(admin, tps, max, options).forEach((tp, info) -> byTp.get(tp).set("max_timestamp", answer(info)));
            for (JsonNode t : action.get("timestamps")) {
                long target = t.asLong();
                ask(admin, tps, OffsetSpec.forTimestamp(target), options).forEach((tp, info) -> {
                    ArrayNode row = ((ArrayNode) byTp.get(tp).get("times")).addArray();
                    row.add(target);
                    answer(info).forEach(row::add);
                });
            }
        }
        ObjectNode r = JSON.createObjectNode();
        r.set("partitions", parts);
        return r;
    }

    /** OffsetSpec.maxTimestamp() (KIP-734, clients 3.0+), or null for an older client. */
    private static OffsetSpec maxTimestampSpec() {
        try {
            return (OffsetSpec) OffsetSpec.class.getMethod("maxTimestamp").invoke(null);
        } catch (ReflectiveOperationException e) {
            return null;
        }
    }
}
