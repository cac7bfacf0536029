package kbatch.spark;

import java.io.FileNotFoundException;
import java.io.IOException;
import java.io.Serializable;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Comparator;
import java.util.List;
import java.util.Set;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.FSDataInputStream;
import org.apache.hadoop.fs.FileStatus;
import org.apache.hadoop.fs.FileSystem;
import org.apache.hadoop.fs.LocalFileSystem;
import org.apache.hadoop.fs.Path;

/**
 * A directory of `<topic>-<partition>/` folders of segments, through Hadoop's FileSystem (so
 * hdfs://, s3a://, abfs://, gs:// paths work wherever the cluster has the connector), listed as
 * kbatch.spark._plan.list_partitions lists a local one.
 */
final class LogDirectory {
    static final Pattern PARTITION_DIR = Pattern.compile("^(?<topic>.+)-(?<partition>\\d+)$");
    static final Pattern SEGMENT = Pattern.compile("^(?<base>\\d{20})\\.log$");

    private LogDirectory() {}

    /** One segment file: path (as built from the user's path), base offset, size, mtime. */
    static final class Segment implements Serializable {
        private static final long serialVersionUID = 1L;
        final String path;
        final long baseOffset;
        final long size;
        final long modificationTime;
        transient OffsetIndex planIndex;

        Segment(String path, long baseOffset, long size, long modificationTime) {
            this.path = path;
            this.baseOffset = baseOffset;
            this.size = size;
            this.modificationTime = modificationTime;
        }

        String sibling(String suffix) {
            return path.substring(0, path.length() - ".log".length()) + suffix;
        }
    }

    static final class TopicPartition {
        final String topic;
        final int partition;
        final String path;
        final List<Segment> segments;

        TopicPartition(String topic, int partition, String path, List<Segment> segments) {
            this.topic = topic;
            this.partition = partition;
            this.path = path;
            this.segments = segments;
        }
    }

    /** The file system of a path, unwrapped to the raw local one for file: paths (no .crc files). */
    static FileSystem fileSystem(String path, Configuration conf) throws IOException {
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

    /**
     * Every `<topic>-<partition>` folder under root (or root itself when it is one), sorted, each
     * with its segments in base-offset order; topics / a full-match pattern narrow them.
     */
    static List<TopicPartition> list(FileSystem fs, String root, Set<String> topics, Pattern pattern)
            throws IOException {
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
        FileStatus[] entries = fs.listStatus(rootPath);
        Arrays.sort(entries, Comparator.comparing(s -> s.getPath().getName()));
        List<String[]> dirs = new ArrayList<>(); // name, path
        boolean anyPartition = false;
        for (FileStatus s : entries) {
            if (s.isDirectory()) {
                String name = s.getPath().getName();
                dirs.add(new String[] {name, child(root, name)});
                anyPartition |= PARTITION_DIR.matcher(name).matches();
            }
        }
        if (!anyPartition && PARTITION_DIR.matcher(basename(root)).matches()) {
            dirs.clear();
            dirs.add(new String[] {basename(root), root});
        }
        List<TopicPartition> out = new ArrayList<>();
        for (String[] d : dirs) {
            Matcher m = PARTITION_DIR.matcher(d[0]);
            if (!m.matches()) {
                continue;
            }
            String topic = m.group("topic");
            int partition;
            try {
                partition = Integer.parseInt(m.group("partition"));
            } catch (NumberFormatException e) {
                continue;
            }
            if (topics != null && !topics.contains(topic)) {
                continue;
            }
            if (pattern != null && !pattern.matcher(topic).matches()) {
                continue;
            }
            FileStatus[] files = fs.listStatus(new Path(d[1]));
            Arrays.sort(files, Comparator.comparing(s -> s.getPath().getName()));
            List<Segment> segs = new ArrayList<>();
            for (FileStatus f : files) {
                Matcher sm = SEGMENT.matcher(f.getPath().getName());
                if (sm.matches() && f.isFile()) {
                    segs.add(new Segment(child(d[1], f.getPath().getName()), Long.parseLong(sm.group("base")),
                            f.getLen(), f.getModificationTime()));
                }
            }
            out.add(new TopicPartition(topic, partition, d[1], segs));
        }
        out.sort(Comparator.<TopicPartition, String>comparing(tp -> tp.topic).thenComparingInt(tp -> tp.partition));
        return out;
    }

    /** A whole small file (an index), or null when it does not exist. */
    static byte[] readAll(FileSystem fs, String path) throws IOException {
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
     * Positioned reads of one file through Hadoop. Local files are read too, never mapped: a mapped
     * file truncated under a reader faults in the JDK's CRC-32C stub, which kills the JVM (SIGBUS);
     * a read past the new end is an error that names the file and the byte.
     */
    static final class FsSource implements SegmentReader.Source {
        private final FSDataInputStream in;

        FsSource(FileSystem fs, String path) throws IOException {
            in = fs.open(new Path(path), 1 << 16);
        }

        @Override
        public void readFully(long position, byte[] b, int off, int len) throws IOException {
            in.readFully(position, b, off, len);
        }

        @Override
        public void close() throws IOException {
            in.close();
        }
    }
}
