package kbatch.kafka.storage;

import java.io.FileNotFoundException;
import java.io.IOException;
import java.io.Serializable;
import java.nio.ByteBuffer;
import java.nio.channels.FileChannel;
import java.nio.file.StandardOpenOption;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Collections;
import java.util.Comparator;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeMap;
import java.util.TreeSet;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

import com.fasterxml.jackson.core.JsonProcessingException;
import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;

import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.FSDataInputStream;
import org.apache.hadoop.fs.FileStatus;
import org.apache.hadoop.fs.FileSystem;
import org.apache.hadoop.fs.LocalFileSystem;
import org.apache.hadoop.fs.Path;
import org.apache.hadoop.fs.RawLocalFileSystem;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

import kbatch.kafka.wire.KafkaSegmentsException;

/**
 * A directory of partition folders of segments, through Hadoop's FileSystem (so hdfs://, s3a://,
 * abfs://, gs:// paths work wherever the cluster has the connector), listed as
 * kbatch.log.segment_plan.list_partitions lists one with kbatch.log.layout, in the three layouts it reads:
 *
 * - broker: `<topic>-<partition>/<20-digit base offset>.log` with `.index`, `.timeindex`, `.txnindex`
 *   beside it;
 * - Kafka's LocalTieredStorage: `<topic>-<partition>-<topic id>/<start offset>-<segment id>.log` with
 *   `.index`, `.timeindex`, `.txnindex` (optional), `.snapshot`, `.leader_epoch_checkpoint`;
 * - Aiven's tiered-storage: `[prefix]<topic>-<topic id>/<partition>/<20-digit start offset>-<segment
 *   id>.log`, the indexes as byte ranges of one `.indexes` object that the `.rsm-manifest` JSON
 *   names; manifests of transformed (compressed, encrypted) segments are refused.
 *
 * As in kbatch.log.layout, a tiered fileset missing a required file (an upload cut short; Aiven's
 * plugin writes the manifest last) is left out and logged as a problem, and two complete copies of
 * the same start offset are refused: kbatch reads the objects, not `__remote_log_metadata`.
 */
public final class LogDirectory {
    private static final Logger LOG = LoggerFactory.getLogger("kbatch.spark");

    static final String BROKER = "broker";
    static final String TIERED = "kafka-local-tiered-storage";
    static final String AIVEN = "aiven-tiered-storage";

    private static final String UUID = "[A-Za-z0-9_-]{22}";
    static final Pattern BROKER_SEGMENT = Pattern.compile("^(\\d{20})\\.(log|index|timeindex|txnindex)$");
    static final Pattern TIERED_SEGMENT = Pattern.compile(
            "^(\\d+)-(" + UUID + ")\\.(log|index|timeindex|txnindex|snapshot|leader_epoch_checkpoint)$");
    static final Pattern AIVEN_SEGMENT = Pattern.compile("^(\\d{20})-(" + UUID + ")\\.(log|indexes|rsm-manifest)$");
    static final Pattern BROKER_DIR = Pattern.compile("^(.+)-(\\d+)$");
    static final Pattern TIERED_DIR = Pattern.compile("^(.+)-(\\d+)-(" + UUID + ")$");
    static final Pattern AIVEN_TOPIC_DIR = Pattern.compile("^(.+)-(" + UUID + ")$");
    /** Aiven's names of the indexes in a manifest's segmentIndexes, in {@link Segment#ranges} order. */
    static final String[][] AIVEN_INDEXES = {{".index", "offset"}, {".timeindex", "timestamp"},
        {".txnindex", "transaction"}};
    private static final ObjectMapper JSON = new ObjectMapper();

    private LogDirectory() {}

    /** One segment file: path (as built from the user's path), base offset, size, mtime. */
    public static final class Segment implements Serializable {
        private static final long serialVersionUID = 2L;
        public final String path;
        public final long baseOffset;
        public final long size;
        public final long modificationTime;
        /** Aiven's layout: the `.indexes` object, and {position, size} per AIVEN_INDEXES (size -1: none). */
        final String indexes;
        final long[] ranges;
        public transient OffsetIndex planIndex;

        Segment(String path, long baseOffset, long size, long modificationTime) {
            this(path, baseOffset, size, modificationTime, null, null);
        }

        Segment(String path, long baseOffset, long size, long modificationTime, String indexes, long[] ranges) {
            this.path = path;
            this.baseOffset = baseOffset;
            this.size = size;
            this.modificationTime = modificationTime;
            this.indexes = indexes;
            this.ranges = ranges;
        }

        String sibling(String suffix) {
            return path.substring(0, path.length() - ".log".length()) + suffix;
        }

        /** Where an index's bytes are, for messages: its file, or its range of Aiven's `.indexes`. */
        public String indexPath(String suffix) {
            if (indexes == null) {
                return sibling(suffix);
            }
            int k = aivenSlot(suffix);
            return indexes + " (" + AIVEN_INDEXES[k][1] + " index, bytes " + ranges[2 * k] + ".."
                    + (ranges[2 * k] + ranges[2 * k + 1]) + ")";
        }

        /**
         * An index's bytes (`.index`, `.timeindex`, `.txnindex`), or null when the segment has none:
         * the file beside the `.log`, or in Aiven's layout the byte range the manifest names.
         */
        public byte[] readIndex(FileSystem fs, String suffix) throws IOException {
            if (indexes == null) {
                return readAll(fs, sibling(suffix));
            }
            int k = aivenSlot(suffix);
            if (ranges[2 * k + 1] < 0) {
                return null;
            }
            return readRange(fs, indexes, ranges[2 * k], (int) ranges[2 * k + 1]);
        }

        private static int aivenSlot(String suffix) {
            for (int k = 0; k < AIVEN_INDEXES.length; k++) {
                if (AIVEN_INDEXES[k][0].equals(suffix)) {
                    return k;
                }
            }
            throw new IllegalArgumentException("no index " + suffix + " in Aiven's layout");
        }
    }

    public static final class TopicPartition {
        public final String topic;
        public final int partition;
        public final String path;
        public final List<Segment> segments;
        final String layout;
        /** Filesets left out (incomplete tiered copies), as kbatch.log.layout.Listing.problems. */
        final List<String> problems;

        TopicPartition(String topic, int partition, String path, List<Segment> segments) {
            this(topic, partition, path, segments, BROKER, List.of());
        }

        TopicPartition(String topic, int partition, String path, List<Segment> segments, String layout,
                       List<String> problems) {
            this.topic = topic;
            this.partition = partition;
            this.path = path;
            this.segments = segments;
            this.layout = layout;
            this.problems = problems;
        }
    }

    /** The file system of a path, unwrapped to the raw local one for file: paths (no .crc files). */
    public static FileSystem fileSystem(String path, Configuration conf) throws IOException {
        FileSystem fs = new Path(path).getFileSystem(conf);
        if (fs instanceof LocalFileSystem) {
            return ((LocalFileSystem) fs).getRaw();
        }
        return fs;
    }

    private static String child(String parent, String name) {
        return parent.endsWith("/") ? parent + name : parent + "/" + name;
    }

    private static String basename(String path) {
        String p = path;
        while (p.length() > 1 && p.endsWith("/")) {
            p = p.substring(0, p.length() - 1);
        }
        int i = p.lastIndexOf('/');
        return i < 0 ? p : p.substring(i + 1);
    }

    private static String parent(String path) {
        String p = path;
        while (p.length() > 1 && p.endsWith("/")) {
            p = p.substring(0, p.length() - 1);
        }
        int i = p.lastIndexOf('/');
        return i < 0 ? "" : p.substring(0, i);
    }

    private static FileStatus[] sortedListing(FileSystem fs, String dir) throws IOException {
        FileStatus[] entries = fs.listStatus(new Path(dir));
        Arrays.sort(entries, Comparator.comparing(s -> s.getPath().getName()));
        return entries;
    }

    /** layout._is_segment_name: a `.log` named as one of the three layouts name segments. */
    static boolean isSegmentName(String name) {
        return name.endsWith(".log") && (BROKER_SEGMENT.matcher(name).matches()
                || TIERED_SEGMENT.matcher(name).matches() || AIVEN_SEGMENT.matcher(name).matches());
    }

    /**
     * layout.describe: {topic, partition} from a partition folder's name (and its parent's, for
     * Aiven's `<topic>-<id>/<partition>`), or null when the names do not say.
     */
    static String[] describe(String path) {
        String name = basename(path);
        Matcher m = TIERED_DIR.matcher(name);
        if (m.matches()) {
            return new String[] {m.group(1), m.group(2)};
        }
        if (isDigits(name)) {
            Matcher p = AIVEN_TOPIC_DIR.matcher(basename(parent(path)));
            if (p.matches()) {
                return new String[] {p.group(1), name};
            }
        }
        m = BROKER_DIR.matcher(name);
        if (m.matches()) {
            return new String[] {m.group(1), m.group(2)};
        }
        return null;
    }

    private static boolean isDigits(String s) {
        return !s.isEmpty() && s.chars().allMatch(c -> c >= '0' && c <= '9');
    }

    /**
     * layout.find_partitions (segments not required): root itself when it holds segments, else
     * broker `<topic>-<p>` and LocalTieredStorage `<topic>-<p>-<id>` folders, and Aiven's
     * `<topic>-<id>/<p>` folders, under it; root itself when none and it is named as a partition.
     */
    static List<String> partitionDirs(FileSystem fs, String root, FileStatus[] entries) throws IOException {
        List<String> out = new ArrayList<>();
        for (FileStatus s : entries) {
            if (isSegmentName(s.getPath().getName())) {
                out.add(root);
                return out;
            }
        }
        for (FileStatus s : entries) {
            if (!s.isDirectory()) {
                continue;
            }
            String name = s.getPath().getName();
            if (TIERED_DIR.matcher(name).matches() || BROKER_DIR.matcher(name).matches()) {
                out.add(child(root, name));
            } else if (AIVEN_TOPIC_DIR.matcher(name).matches()) {
                String topicDir = child(root, name);
                for (FileStatus p : sortedListing(fs, topicDir)) {
                    if (p.isDirectory() && isDigits(p.getPath().getName())) {
                        out.add(child(topicDir, p.getPath().getName()));
                    }
                }
            }
        }
        if (out.isEmpty() && BROKER_DIR.matcher(basename(root)).matches()) {
            out.add(root);
        }
        return out;
    }

    /**
     * Every partition folder under root (or root itself when it is one), any of the three layouts,
     * sorted by (topic, partition), each with its segments in base-offset order; topics / a
     * full-match pattern narrow them. Incomplete tiered copies are left out and logged.
     * requirePartitions (a batch read): a root without any partition folder, before topics
     * narrow them, is an error rather than an empty read (_plan.list_partitions).
     */
    public static List<TopicPartition> list(FileSystem fs, String root, Set<String> topics, Pattern pattern,
            boolean requirePartitions) throws IOException {
        return list(fs, root, topics, pattern, requirePartitions, false);
    }

    /**
     * kbatch.log.topics.is_internal_topic: Kafka's internal topics (every `__` name:
     * __consumer_offsets, __transaction_state, __cluster_metadata, ...) and the Schema Registry's
     * `_schemas`.
     */
    static boolean isInternalTopic(String topic) {
        return topic.startsWith("__") || topic.equals("_schemas");
    }

    /**
     * list, with kbatch.log.topics.left_out's rule: an internal topic is left out unless topics
     * names it, includeInternal (the includeInternalTopics option) is set, or root is that
     * partition itself.
     */
    public static List<TopicPartition> list(FileSystem fs, String root, Set<String> topics, Pattern pattern,
            boolean requirePartitions, boolean includeInternal) throws IOException {
        Path rootPath = new Path(root);
        FileStatus rootStatus;
        try {
            rootStatus = fs.getFileStatus(rootPath);
        } catch (FileNotFoundException e) {
            rootStatus = null;
        }
        if (rootStatus == null || !rootStatus.isDirectory()) {
            throw new KafkaSegmentsException("FileNotFoundError", "kafka-segments: no such directory: " + root, null,
                    null, "a directory of <topic>-<partition> folders", root);
        }
        List<TopicPartition> out = new ArrayList<>();
        FileStatus[] listing = sortedListing(fs, root);
        boolean found = false;
        for (String dir : partitionDirs(fs, root, listing)) {
            String[] tp = describe(dir);
            if (tp == null) {
                continue;
            }
            found = true;
            String topic = tp[0];
            int partition;
            try {
                partition = Integer.parseInt(tp[1]);
            } catch (NumberFormatException e) {
                continue;
            }
            if (topics != null && !topics.contains(topic)) {
                continue;
            }
            if (pattern != null && !pattern.matcher(topic).matches()) {
                continue;
            }
            boolean named = (topics != null && topics.contains(topic)) || dir.equals(root);
            if (isInternalTopic(topic) && !named && !includeInternal) {
                continue;
            }
            TopicPartition listed = listSegments(fs, dir, topic, partition);
            for (String problem : listed.problems) {
                LOG.warn("kafka-segments: {}", problem);
            }
            out.add(listed);
        }
        if (requirePartitions && !found) {
            List<String> names = new ArrayList<>();
            for (FileStatus f : listing) {
                names.add(f.getPath().getName());
            }
            Collections.sort(names);
            String shown = String.join(", ", names.subList(0, Math.min(5, names.size())))
                    + (names.size() > 5 ? " and " + (names.size() - 5) + " more" : "");
            throw new KafkaSegmentsException("FileNotFoundError", "kafka-segments: no partition folders under " + root
                    + ": expected <topic>-<partition> folders or a tiered-storage layout (docs/remote.md), found "
                    + (shown.isEmpty() ? "an empty directory" : shown), null, null, null, null);
        }
        out.sort(Comparator.<TopicPartition, String>comparing(tp -> tp.topic).thenComparingInt(tp -> tp.partition)
                .thenComparing(tp -> tp.path));
        return out;
    }

    /** One fileset of a listing: a segment's files by suffix, its layout, base offset. */
    private static final class Fileset {
        final String layout;
        final long base;
        final Map<String, FileStatus> files = new TreeMap<>();

        Fileset(String layout, long base) {
            this.layout = layout;
            this.base = base;
        }
    }

    private static final Object[][] SEGMENT_PATTERNS = {{BROKER, BROKER_SEGMENT}, {AIVEN, AIVEN_SEGMENT},
        {TIERED, TIERED_SEGMENT}};

    /** layout.list_segments: one partition folder's segments, any layout, from one listing. */
    static TopicPartition listSegments(FileSystem fs, String dir, String topic, int partition) throws IOException {
        Map<String, Fileset> groups = new TreeMap<>(); // stem -> its files
        for (FileStatus f : sortedListing(fs, dir)) {
            if (!f.isFile()) {
                continue;
            }
            String name = f.getPath().getName();
            for (Object[] lp : SEGMENT_PATTERNS) {
                Matcher m = ((Pattern) lp[1]).matcher(name);
                if (m.matches()) {
                    String suffix = "." + m.group(m.groupCount());
                    String stem = name.substring(0, name.length() - suffix.length());
                    groups.computeIfAbsent(stem, s -> new Fileset((String) lp[0], Long.parseLong(m.group(1))))
                            .files.put(suffix, f);
                    break;
                }
            }
        }
        List<String> problems = new ArrayList<>();
        Map<Long, Segment> found = new TreeMap<>();
        Set<String> layouts = new TreeSet<>();
        for (Map.Entry<String, Fileset> g : groups.entrySet()) {
            Fileset set = g.getValue();
            String path = child(dir, g.getKey());
            Set<String> have = set.files.keySet();
            if (!have.contains(".log")) {
                if (!set.layout.equals(BROKER)) {
                    problems.add(path + ": an incomplete tiered copy (no .log; files " + String.join(", ", have)
                            + "): left out");
                }
                continue;
            }
            List<String> missing = new ArrayList<>();
            String why = "";
            if (set.layout.equals(TIERED)) {
                for (String s : new String[] {".index", ".timeindex"}) {
                    if (!have.contains(s)) {
                        missing.add(s);
                    }
                }
            } else if (set.layout.equals(AIVEN)) {
                for (String s : new String[] {".indexes", ".rsm-manifest"}) {
                    if (!have.contains(s)) {
                        missing.add(s);
                    }
                }
                why = "; the plugin writes the manifest last";
            }
            if (!missing.isEmpty()) {
                problems.add(path + ".log: an incomplete tiered copy (missing " + String.join(", ", missing) + why
                        + "): left out");
                continue;
            }
            layouts.add(set.layout);
            Segment other = found.get(set.base);
            if (other != null) {
                throw unsupportedLayout(dir, "two copies of the segment starting at offset " + set.base + ": "
                        + other.path + " and " + path + ".log (a copy retried by another leader); kbatch reads the "
                        + "objects, not __remote_log_metadata, so it cannot tell which one the broker uses: move the "
                        + "other away");
            }
            FileStatus log = set.files.get(".log");
            String logPath = path + ".log";
            if (set.layout.equals(AIVEN)) {
                long[] ranges = aivenManifest(fs, path + ".rsm-manifest", logPath, log.getLen());
                found.put(set.base, new Segment(logPath, set.base, log.getLen(), log.getModificationTime(),
                        path + ".indexes", ranges));
            } else {
                found.put(set.base, new Segment(logPath, set.base, log.getLen(), log.getModificationTime()));
            }
        }
        String layout = layouts.size() == 1 ? layouts.iterator().next() : layouts.isEmpty() ? BROKER : "mixed";
        return new TopicPartition(topic, partition, dir, new ArrayList<>(found.values()), layout, problems);
    }

    /** kbatch.errors.UnsupportedLayoutError, rendered as the Python side renders it ("path: message"). */
    static KafkaSegmentsException unsupportedLayout(String path, String message) {
        return new KafkaSegmentsException("UnsupportedLayoutError", path + ": " + message, null, null, null, null);
    }

    /** Python's truthiness of a JSON value (null, false, 0, "", [] and {} are false). */
    private static boolean truthy(JsonNode n) {
        if (n == null || n.isNull() || n.isMissingNode()) {
            return false;
        }
        if (n.isBoolean()) {
            return n.booleanValue();
        }
        if (n.isNumber()) {
            return n.doubleValue() != 0;
        }
        if (n.isTextual()) {
            return !n.textValue().isEmpty();
        }
        return n.size() > 0;
    }

    /** Python's repr of a JSON scalar, for messages ('fixed', None, 4194304). */
    private static String repr(JsonNode n) {
        if (n == null || n.isNull() || n.isMissingNode()) {
            return "None";
        }
        return n.isTextual() ? "'" + n.textValue() + "'" : n.toString();
    }

    /**
     * layout.AivenSegmentFiles: an `.rsm-manifest` of a segment stored untransformed, checked as the
     * Python side checks it; the byte ranges of its indexes in `.indexes`, as {position, size} per
     * AIVEN_INDEXES (size -1: none). Refuses (UnsupportedLayoutError naming the object) a manifest
     * that is not one, or says the segment is encrypted, compressed, in transformed chunks, or of
     * another size than its `.log`.
     */
    static long[] aivenManifest(FileSystem fs, String manifestPath, String logPath, long logSize) throws IOException {
        byte[] raw = readAll(fs, manifestPath);
        if (raw == null) {
            throw new FileNotFoundException(manifestPath);
        }
        JsonNode m;
        try {
            m = JSON.readTree(raw);
        } catch (JsonProcessingException e) {
            throw unsupportedLayout(manifestPath, "not a segment manifest (" + e.getOriginalMessage() + ")");
        }
        if (m == null || !m.isObject() || m.get("version") == null || !"1".equals(m.get("version").asText())
                || !m.has("segmentIndexes")) {
            throw unsupportedLayout(manifestPath,
                    "not a version 1 segment manifest (version, chunkIndex, segmentIndexes)");
        }
        if (truthy(m.get("encryption"))) {
            throw unsupportedLayout(manifestPath, "the segment is encrypted by the tiered-storage plugin (the manifest "
                    + "has an encryption section); kbatch reads only segments stored as plain Kafka bytes");
        }
        if (truthy(m.get("compression"))) {
            throw unsupportedLayout(manifestPath, "the segment is stored as compressed chunks (\"compression\": true "
                    + "in the manifest); kbatch reads only segments stored as plain Kafka bytes");
        }
        JsonNode ci = truthy(m.get("chunkIndex")) ? m.get("chunkIndex") : JSON.createObjectNode();
        JsonNode type = ci.get("type");
        JsonNode transformed = ci.get("transformedChunkSize");
        JsonNode original = ci.get("originalChunkSize");
        boolean sameSize = transformed == null || transformed.isNull()
                ? original == null || original.isNull() : transformed.equals(original);
        if (type == null || !"fixed".equals(type.asText()) || !type.isTextual() || !sameSize) {
            throw unsupportedLayout(manifestPath, "the segment's chunks are transformed (chunk index " + repr(type)
                    + ", " + repr(original) + " -> " + repr(transformed) + " bytes); kbatch reads only untransformed "
                    + "chunks");
        }
        JsonNode originalFileSize = ci.get("originalFileSize");
        if (originalFileSize != null && !originalFileSize.isNull() && originalFileSize.asLong() != logSize) {
            throw unsupportedLayout(logPath, "the manifest says the segment holds " + originalFileSize.asLong()
                    + " bytes, the .log object " + logSize);
        }
        JsonNode indexes = m.get("segmentIndexes");
        long[] ranges = new long[2 * AIVEN_INDEXES.length];
        for (int k = 0; k < AIVEN_INDEXES.length; k++) {
            JsonNode e = indexes == null ? null : indexes.get(AIVEN_INDEXES[k][1]);
            if (!truthy(e) || !truthy(e.get("size"))) {
                ranges[2 * k] = 0;
                ranges[2 * k + 1] = -1;
                continue;
            }
            ranges[2 * k] = e.get("position") == null ? 0 : e.get("position").asLong();
            ranges[2 * k + 1] = e.get("size").asLong();
            if (ranges[2 * k] < 0 || ranges[2 * k + 1] < 0 || ranges[2 * k + 1] > Integer.MAX_VALUE) {
                throw unsupportedLayout(manifestPath, "the " + AIVEN_INDEXES[k][1] + " index's range in .indexes ("
                        + ranges[2 * k] + ", " + ranges[2 * k + 1] + " bytes) is not one");
            }
        }
        return ranges;
    }

    /** `size` bytes of a file from `position`. */
    static byte[] readRange(FileSystem fs, String path, long position, int size) throws IOException {
        byte[] b = new byte[size];
        try (FSDataInputStream in = fs.open(new Path(path))) {
            in.readFully(position, b, 0, size);
        }
        return b;
    }

    /** A whole small file (an index), or null when it does not exist. */
    public static byte[] readAll(FileSystem fs, String path) throws IOException {
        Path p = new Path(path);
        long len;
        try {
            len = fs.getFileStatus(p).getLen();
        } catch (FileNotFoundException e) {
            return null;
        }
        byte[] b = new byte[(int) len];
        try (FSDataInputStream in = fs.open(p)) {
            in.readFully(0, b, 0, b.length);
        }
        return b;
    }

    /**
     * Positioned reads of one file: a local file (file: paths, Hadoop's raw local file system) through
     * its FileChannel, which can read into a direct buffer (SegmentReader's summary walk: no heap
     * copy), anything else (s3a, ...) through Hadoop's stream. Local files are read, never mapped: a
     * mapped file truncated under a reader faults in the JDK's CRC-32C stub, which kills the JVM
     * (SIGBUS); a read past the new end is an error that names the file and the byte.
     */
    public static final class FsSource implements SegmentReader.Source {
        private final FSDataInputStream in;
        private final FileChannel channel;

        public FsSource(FileSystem fs, String path) throws IOException {
            this(fs, path, false);
        }

        /**
         * `channel`: a local file through its FileChannel (the summary walk); false: Hadoop's stream
         * for every file system (the executors' reads: unchanged, they copy into heap windows anyway).
         */
        public FsSource(FileSystem fs, String path, boolean channel) throws IOException {
            if (channel && fs instanceof RawLocalFileSystem) {
                this.channel = FileChannel.open(((RawLocalFileSystem) fs).pathToFile(new Path(path)).toPath(),
                        StandardOpenOption.READ);
                in = null;
            } else {
                in = fs.open(new Path(path), 1 << 16);
                this.channel = null;
            }
        }

        @Override
        public void readFully(long position, byte[] b, int off, int len) throws IOException {
            if (channel == null) {
                in.readFully(position, b, off, len);
            } else {
                SegmentReader.readFully(channel, ByteBuffer.wrap(b, off, len), position);
            }
        }

        @Override
        public FileChannel channel() {
            return channel;
        }

        @Override
        public void close() throws IOException {
            if (channel == null) {
                in.close();
            } else {
                channel.close();
            }
        }
    }
}
