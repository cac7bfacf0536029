import java.io.File;
import java.lang.management.ManagementFactory;
import java.lang.management.ThreadMXBean;
import java.nio.ByteBuffer;
import java.nio.channels.FileChannel;
import java.nio.file.StandardOpenOption;
import java.util.ArrayList;
import java.util.List;
import java.util.zip.CRC32C;

import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.FileSystem;

import kbatch.kafka.storage.LogDirectory;
import kbatch.kafka.storage.RangeSummary;

/**
 * What a cold aggregate's summary walk costs per byte, on one thread, taken apart (issue 40,
 * bench/results-spark-agg.md): the segments' bytes read into a direct buffer alone (the kernel's
 * copy), that plus CRC-32C (a verified walk's floor), Hadoop's stream into a heap array plus
 * CRC-32C (the walk before), a mapping plus CRC-32C (page faults instead of the copy; not used by
 * the reader: a file truncated under a mapping kills the JVM), then RangeSummary's walks: verified through the file channel, through
 * Hadoop's stream, and trusting headers. Files in the page cache (a warm-up pass first).
 *
 *   java -cp java/kafka-segments/target/classes:$(python -c 'import pyspark,os;print(os.path.dirname(pyspark.__file__))')/jars/'*' \
 *       bench/SummaryWalk.java ~/.cache/kbatch/bench-spark/scale-10000000-8p/broker/logs/scale-?/0*.log
 */
public class SummaryWalk {
    interface Pass {
        void run(String path, long size) throws Exception;
    }

    static long sink;

    public static void main(String[] args) throws Exception {
        List<String> files = new ArrayList<>();
        long total = 0;
        for (String a : args) {
            files.add(new File(a).getAbsolutePath());
            total += new File(a).length();
        }
        Configuration conf = new Configuration();
        FileSystem fs = LogDirectory.fileSystem("file:///", conf);
        ByteBuffer direct = ByteBuffer.allocateDirect(1 << 20);
        byte[] heap = new byte[1 << 20];
        String[] names = {"read into a direct buffer", "read into a direct buffer + CRC-32C",
            "Hadoop stream into a heap array + CRC-32C", "mapped (FileChannel.map) + CRC-32C (not used: SIGBUS)", "RangeSummary verified, file channel",
            "RangeSummary verified, Hadoop stream", "RangeSummary trustHeaders, file channel"};
        Pass[] passes = {
            (p, n) -> scan(p, n, direct, false),
            (p, n) -> scan(p, n, direct, true),
            (p, n) -> {
                CRC32C c = new CRC32C();
                try (LogDirectory.FsSource s = new LogDirectory.FsSource(fs, "file://" + p)) {
                    for (long at = 0; at < n; at += heap.length) {
                        int len = (int) Math.min(heap.length, n - at);
                        s.readFully(at, heap, 0, len);
                        c.update(heap, 0, len);
                    }
                }
                sink += c.getValue();
            },
            (p, n) -> {
                CRC32C c = new CRC32C();
                try (FileChannel ch = FileChannel.open(new File(p).toPath(), StandardOpenOption.READ)) {
                    c.update(ch.map(FileChannel.MapMode.READ_ONLY, 0, n));
                }
                sink += c.getValue();
            },
            (p, n) -> walk(fs, p, n, true, false),
            (p, n) -> walk(fs, p, n, false, false),
            (p, n) -> walk(fs, p, n, true, true),
        };
        ThreadMXBean mx = ManagementFactory.getThreadMXBean();
        System.out.printf("%d files, %.2f GB; best of 5 rounds, one thread%n", files.size(), total / 1e9);
        System.out.println("| pass | CPU s | wall s | GB/s (CPU) |");
        System.out.println("|---|---:|---:|---:|");
        long[][] best = new long[passes.length][2];
        for (long[] b : best) {
            b[0] = b[1] = Long.MAX_VALUE;
        }
        for (int round = 0; round < 6; round++) {
            for (int i = 0; i < passes.length; i++) {
                long c0 = mx.getCurrentThreadCpuTime();
                long t0 = System.nanoTime();
                for (String f : files) {
                    passes[i].run(f, new File(f).length());
                }
                long cpu = mx.getCurrentThreadCpuTime() - c0;
                long wall = System.nanoTime() - t0;
                if (round > 0) { // the first round warms the JIT and the page cache
                    best[i][0] = Math.min(best[i][0], cpu);
                    best[i][1] = Math.min(best[i][1], wall);
                }
            }
        }
        for (int i = 0; i < passes.length; i++) {
            System.out.printf("| %s | %.3f | %.3f | %.1f |%n", names[i], best[i][0] / 1e9, best[i][1] / 1e9,
                    total / (double) best[i][0]);
        }
        System.err.println(sink);
    }

    static void scan(String p, long n, ByteBuffer b, boolean crc) throws Exception {
        CRC32C c = new CRC32C();
        try (FileChannel ch = FileChannel.open(new File(p).toPath(), StandardOpenOption.READ)) {
            for (long at = 0; at < n; ) {
                b.clear();
                int r = ch.read(b, at);
                at += r;
                if (crc) {
                    b.flip();
                    c.update(b);
                }
            }
        }
        sink += c.getValue();
    }

    static void walk(FileSystem fs, String p, long n, boolean channel, boolean trust) throws Exception {
        try (LogDirectory.FsSource s = new LogDirectory.FsSource(fs, "file://" + p, channel)) {
            RangeSummary r = RangeSummary.walk(s, 0, n, n, null, Long.MIN_VALUE, Long.MAX_VALUE, null, trust);
            if (r.error != null) {
                throw r.error;
            }
            sink += r.count;
        }
    }
}
