// Kafka's own Java consumer and Admin client calls that KafkaDriver.java does not make, for the
// `kbatch serve` tests (tests/server/test_serve_java.py; tests/support/kafka_driver.py compiles it
// against a Kafka version's jars, beside KafkaDriver, and runs it the same way).
//
//   java -cp <classes>:<kafka lib>/* ServeClientDriver plan.json result.json
//
// plan: {"bootstrap": "127.0.0.1:port", "actions": [action, ...]}; results in order, as KafkaDriver.
// Partitions are "topic-p" keys; every consumer uses group.protocol=classic where it has the setting
// (clients 3.7+), because kbatch serve answers the classic group protocol only.
//
//   {"op": "positions", "topics": [names], "isolation": ..., "timestamps": [t, ...], "seeks": [offset, ...]}
//       KafkaConsumer.assign, then beginningOffsets, endOffsets, offsetsForTimes (one call per target),
//       and for each seek offset: seek(tp, offset) and the first record poll() returns (or null at the end)
//       -> {"beginning": {tp: o}, "end": {tp: o}, "times": {tp: [[target, offset|null, ts|null, epoch|null]]},
//           "seeks": {tp: [[offset, first offset|null], ...]}}
//   {"op": "group", "topics": [names], "group": id, "isolation": ..., "out": path}
//       KafkaConsumer.subscribe in group `group` (auto.offset.reset earliest, no auto commit); polls until
//       every assigned partition's position reaches its end offset, commitSync(), then committed()
//       -> {"records": n, "assigned": [tp], "committed": {tp: offset}}  (records as KafkaDriver's consume)
//       with "protocol": a group.protocol to use instead of classic; an exception the consumer raises is
//       then the result: {"error": "<class>: <message>"}
//   {"op": "describe", "topics": [names]}
//       Admin.describeCluster, describeTopics, describeConfigs for each topic and for the broker
//       -> {"cluster": {"id", "controller", "nodes": [[id, host, port]]},
//           "topics": {name: {"internal", "partitions": [[p, leader, [replicas], [isr]]]}},
//           "configs": {"topic:<name>" | "broker:<id>": {name: [value, source, readOnly, sensitive, isDefault]}}}
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
import java.util.Collections;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.TreeMap;
import java.util.concurrent.TimeUnit;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.Config;
import org.apache.kafka.clients.admin.ConfigEntry;
import org.apache.kafka.clients.admin.DescribeClusterResult;
import org.apache.kafka.clients.admin.TopicDescription;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRebalanceListener;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.consumer.OffsetAndTimestamp;
import org.apache.kafka.common.Node;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.TopicPartitionInfo;
import org.apache.kafka.common.config.ConfigResource;
import org.apache.kafka.common.header.Header;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;

public final class ServeClientDriver {
    private static final ObjectMapper JSON = new ObjectMapper();
    private static final long WAIT_MS = 60_000;  // every wait on the server is bounded by this

    public static void main(String[] args) throws Exception {
        if (args.length != 2) {
            System.err.println("usage: ServeClientDriver plan.json result.json");
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
                case "positions": result = positions(bootstrap, action); break;
                case "group": result = group(bootstrap, action); break;
                case "describe": result = describe(bootstrap, action); break;
                default: throw new IllegalArgumentException("unknown op " + op);
            }
            ((ObjectNode) result).put("ms", (System.nanoTime() - start) / 1_000_000);
            results.add(result);
        }
        ObjectNode out = JSON.createObjectNode();
        out.set("results", results);
        JSON.writeValue(new File(args[1]), out);
    }

    private static String key(TopicPartition tp) {
        return tp.topic() + "-" + tp.partition();
    }

    private static String b64(byte[] b) {
        return b == null ? null : Base64.getEncoder().encodeToString(b);
    }

    private static Admin admin(String bootstrap) {
        Properties p = new Properties();
        p.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        p.put(AdminClientConfig.REQUEST_TIMEOUT_MS_CONFIG, "30000");
        p.put(AdminClientConfig.DEFAULT_API_TIMEOUT_MS_CONFIG, "60000");
        return Admin.create(p);
    }

    private static KafkaConsumer<byte[], byte[]> consumer(String bootstrap, JsonNode action, String group) {
        Properties p = new Properties();
        p.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        p.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
        p.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
        p.put(ConsumerConfig.ISOLATION_LEVEL_CONFIG, action.path("isolation").asText("read_uncommitted"));
        p.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
        p.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
        p.put(ConsumerConfig.REQUEST_TIMEOUT_MS_CONFIG, "30000");
        if (group != null) p.put(ConsumerConfig.GROUP_ID_CONFIG, group);
        // the classic group protocol, named explicitly (the setting exists from clients 3.7 on)
        if (ConsumerConfig.configNames().contains("group.protocol"))
            p.put("group.protocol", action.path("protocol").asText("classic"));
        return new KafkaConsumer<>(p);
    }

    private static List<TopicPartition> partitions(KafkaConsumer<byte[], byte[]> c, JsonNode topics) {
        List<TopicPartition> out = new ArrayList<>();
        for (JsonNode t : topics)
            c.partitionsFor(t.asText(), Duration.ofMillis(WAIT_MS))
                    .forEach(i -> out.add(new TopicPartition(i.topic(), i.partition())));
        out.sort((a, b) -> key(a).compareTo(key(b)));
        return out;
    }

    private static ObjectNode offsets(Map<TopicPartition, Long> m) {
        ObjectNode o = JSON.createObjectNode();
        Map<String, Long> sorted = new TreeMap<>();
        m.forEach((tp, v) -> sorted.put(key(tp), v));
        sorted.forEach(o::put);
        return o;
    }

    private static JsonNode positions(String bootstrap, JsonNode action) {
        ObjectNode r = JSON.createObjectNode();
        try (KafkaConsumer<byte[], byte[]> c = consumer(bootstrap, action, null)) {
            List<TopicPartition> tps = partitions(c, action.get("topics"));
            c.assign(tps);
            r.set("beginning", offsets(c.beginningOffsets(tps, Duration.ofMillis(WAIT_MS))));
            r.set("end", offsets(c.endOffsets(tps, Duration.ofMillis(WAIT_MS))));
            ObjectNode times = r.putObject("times");
            for (TopicPartition tp : tps) times.putArray(key(tp));
            for (JsonNode t : action.path("timestamps")) {
                Map<TopicPartition, Long> q = new HashMap<>();
                for (TopicPartition tp : tps) q.put(tp, t.asLong());
                Map<TopicPartition, OffsetAndTimestamp> a = c.offsetsForTimes(q, Duration.ofMillis(WAIT_MS));
                for (TopicPartition tp : tps) {
                    ArrayNode row = ((ArrayNode) times.get(key(tp))).addArray().add(t.asLong());
                    OffsetAndTimestamp o = a.get(tp);
                    if (o == null) row.addNull().addNull().addNull();
                    else {
                        row.add(o.offset()).add(o.timestamp());
                        if (o.leaderEpoch().isPresent()) row.add(o.leaderEpoch().get()); else row.addNull();
                    }
                }
            }
            ObjectNode seeks = r.putObject("seeks");
            for (TopicPartition tp : tps) {
                ArrayNode rows = seeks.putArray(key(tp));
                c.assign(Collections.singletonList(tp));
                for (JsonNode s : action.path("seeks")) {
                    c.seek(tp, s.asLong());
                    ArrayNode row = rows.addArray().add(s.asLong());
                    long end = c.endOffsets(Collections.singletonList(tp), Duration.ofMillis(WAIT_MS)).get(tp);
                    Long first = null;
                    long deadline = System.currentTimeMillis() + WAIT_MS;
                    // poll until a record comes, or the position passes the end offset (nothing at or after s)
                    while (first == null && c.position(tp, Duration.ofMillis(WAIT_MS)) < end) {
                        if (System.currentTimeMillis() > deadline)
                            throw new IllegalStateException("no record after seek(" + tp + ", " + s + ")");
                        ConsumerRecords<byte[], byte[]> got = c.poll(Duration.ofMillis(200));
                        if (!got.isEmpty()) first = got.records(tp).get(0).offset();
                    }
                    if (first == null) row.addNull(); else row.add(first);
                }
            }
        }
        return r;
    }

    private static JsonNode group(String bootstrap, JsonNode action) throws Exception {
        if (!action.has("protocol")) return groupClassic(bootstrap, action);
        try {
            return groupClassic(bootstrap, action);
        } catch (Exception e) {
            ObjectNode r = JSON.createObjectNode();
            r.put("error", e.getClass().getName() + ": " + e.getMessage());
            return r;
        }
    }

    private static JsonNode groupClassic(String bootstrap, JsonNode action) throws Exception {
        ObjectNode r = JSON.createObjectNode();
        long n = 0;
        List<String> topics = new ArrayList<>();
        action.get("topics").forEach(t -> topics.add(t.asText()));
        List<TopicPartition> assigned = new ArrayList<>();
        try (KafkaConsumer<byte[], byte[]> c = consumer(bootstrap, action, action.get("group").asText());
             BufferedWriter w = Files.newBufferedWriter(Paths.get(action.get("out").asText()), StandardCharsets.UTF_8)) {
            c.subscribe(topics, new ConsumerRebalanceListener() {
                public void onPartitionsRevoked(Collection<TopicPartition> ps) { assigned.removeAll(ps); }
                public void onPartitionsAssigned(Collection<TopicPartition> ps) { assigned.addAll(ps); }
            });
            long deadline = System.currentTimeMillis() + WAIT_MS;
            Map<TopicPartition, Long> end = null;
            while (true) {
                if (System.currentTimeMillis() > deadline)
                    throw new IllegalStateException("group consume did not reach the end offsets " + end);
                ConsumerRecords<byte[], byte[]> got = c.poll(Duration.ofMillis(200));
                if (assigned.isEmpty()) continue;
                if (end == null) end = c.endOffsets(assigned, Duration.ofMillis(WAIT_MS));
                for (ConsumerRecord<byte[], byte[]> rec : got) {
                    if (rec.offset() >= end.get(new TopicPartition(rec.topic(), rec.partition()))) continue;
                    ObjectNode o = JSON.createObjectNode();
                    o.put("t", rec.topic()).put("p", rec.partition()).put("o", rec.offset()).put("ts", rec.timestamp())
                            .put("tt", rec.timestampType().name).put("k", b64(rec.key())).put("v", b64(rec.value()));
                    ArrayNode hs = o.putArray("h");
                    for (Header h : rec.headers()) hs.addArray().add(h.key()).add(b64(h.value()));
                    if (rec.leaderEpoch().isPresent()) o.put("le", rec.leaderEpoch().get()); else o.putNull("le");
                    w.write(JSON.writeValueAsString(o));
                    w.write('\n');
                    n++;
                }
                boolean done = true;
                for (TopicPartition tp : assigned) done &= c.position(tp, Duration.ofMillis(WAIT_MS)) >= end.get(tp);
                if (done) break;
            }
            c.commitSync(Duration.ofMillis(WAIT_MS));
            ObjectNode committed = r.putObject("committed");
            Map<TopicPartition, OffsetAndMetadata> cm =
                    c.committed(new java.util.HashSet<>(assigned), Duration.ofMillis(WAIT_MS));
            Map<TopicPartition, Long> flat = new HashMap<>();
            cm.forEach((tp, om) -> { if (om != null) flat.put(tp, om.offset()); });
            committed.setAll(offsets(flat));
            ArrayNode a = r.putArray("assigned");
            assigned.stream().map(ServeClientDriver::key).sorted().forEach(a::add);
        }
        r.put("records", n);
        return r;
    }

    private static JsonNode describe(String bootstrap, JsonNode action) throws Exception {
        ObjectNode r = JSON.createObjectNode();
        List<String> names = new ArrayList<>();
        action.get("topics").forEach(t -> names.add(t.asText()));
        try (Admin admin = admin(bootstrap)) {
            DescribeClusterResult dc = admin.describeCluster();
            ObjectNode cluster = r.putObject("cluster");
            cluster.put("id", dc.clusterId().get(WAIT_MS, TimeUnit.MILLISECONDS));
            Node controller = dc.controller().get(WAIT_MS, TimeUnit.MILLISECONDS);
            cluster.put("controller", controller == null ? -1 : controller.id());
            ArrayNode nodes = cluster.putArray("nodes");
            List<Node> ns = new ArrayList<>(dc.nodes().get(WAIT_MS, TimeUnit.MILLISECONDS));
            for (Node node : ns) nodes.addArray().add(node.id()).add(node.host()).add(node.port());

            ObjectNode topics = r.putObject("topics");
            Map<String, TopicDescription> ds =
                    admin.describeTopics(names).allTopicNames().get(WAIT_MS, TimeUnit.MILLISECONDS);
            for (String name : names) {
                TopicDescription d = ds.get(name);
                ObjectNode t = topics.putObject(name);
                t.put("internal", d.isInternal());
                ArrayNode ps = t.putArray("partitions");
                for (TopicPartitionInfo p : d.partitions()) {
                    ArrayNode row = ps.addArray().add(p.partition()).add(p.leader() == null ? -1 : p.leader().id());
                    ArrayNode reps = row.addArray();
                    p.replicas().forEach(x -> reps.add(x.id()));
                    ArrayNode isr = row.addArray();
                    p.isr().forEach(x -> isr.add(x.id()));
                }
            }

            List<ConfigResource> resources = new ArrayList<>();
            for (String name : names) resources.add(new ConfigResource(ConfigResource.Type.TOPIC, name));
            for (Node node : ns) resources.add(new ConfigResource(ConfigResource.Type.BROKER, String.valueOf(node.id())));
            Map<ConfigResource, Config> cs = admin.describeConfigs(resources).all().get(WAIT_MS, TimeUnit.MILLISECONDS);
            ObjectNode configs = r.putObject("configs");
            for (ConfigResource res : resources) {
                ObjectNode c = configs.putObject(res.type().name().toLowerCase() + ":" + res.name());
                for (ConfigEntry e : cs.get(res).entries()) {
                    ArrayNode row = c.putArray(e.name());
                    row.add(e.value()).add(e.source().name()).add(e.isReadOnly()).add(e.isSensitive()).add(e.isDefault());
                }
            }
        }
        return r;
    }
}
