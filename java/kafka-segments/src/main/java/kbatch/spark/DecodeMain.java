package kbatch.spark;

import java.io.BufferedWriter;
import java.io.IOException;
import java.io.OutputStreamWriter;
import java.io.RandomAccessFile;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

import com.fasterxml.jackson.databind.ObjectMapper;

import kbatch.kafka.storage.SegmentReader;
import kbatch.kafka.wire.KafkaSegmentsException;
import kbatch.kafka.wire.RecordBatchDecoder;
import kbatch.kafka.wire.RecordColumns;
import kbatch.kafka.wire.Wire;

/**
 * The JVM decoder without Spark, for differential tests against kbatch.decode_columns:
 *
 * <pre>java -cp 'pyspark/jars/*:kbatch-kafka-segments.jar' kbatch.spark.DecodeMain [--no-crc] [--lenient] [--cut-after=BYTES] FILE...</pre>
 *
 * prints one JSON line per file: every column of every row decoded before the first error (all
 * columns, headers and batch fields included; keys, values and header keys/values in hex;
 * timestamps in microseconds as Spark holds them), and the error's kbatch class, byte position and
 * base offset. --lenient ignores a partial last batch (decode_columns(strict=False)). Files are read
 * through 16 MiB windows (the system property kbatch.spark.scanWindow changes it), as the reader does.
 */
public final class DecodeMain {
    private DecodeMain() {}

    /** Reads a local file by positioned reads, as the Spark reader reads every file. */
    private static final class FileSource implements SegmentReader.Source {
        private final RandomAccessFile f;

        FileSource(String path) throws IOException {
            f = new RandomAccessFile(path, "r");
        }

        @Override
        public void readFully(long position, byte[] b, int off, int len) throws IOException {
            f.seek(position);
            f.readFully(b, off, len);
        }

        @Override
        public void close() throws IOException {
            f.close();
        }
    }

    private static String hex(byte[] b, int off, int len) {
        char[] out = new char[2 * len];
        for (int i = 0; i < len; i++) {
            int x = b[off + i] & 0xff;
            out[2 * i] = Character.forDigit(x >> 4, 16);
            out[2 * i + 1] = Character.forDigit(x & 15, 16);
        }
        return new String(out);
    }

    private static List<Object> binaries(RecordColumns.Binary b, int from, int to) {
        List<Object> out = new ArrayList<>();
        for (int i = from; i < to; i++) {
            byte[] v = b.get(i);
            out.add(v == null ? null : hex(v, 0, v.length));
        }
        return out;
    }

    /**
     * cutAfter >= 0: once the first rows are out, truncate the file to that many bytes (a test of
     * a file cut by another process while it is read; -1: never).
     */
    static Map<String, Object> decode(String path, boolean verifyCrc, boolean strict, long cutAfter)
            throws IOException {
        Map<String, List<Object>> cols = new LinkedHashMap<>();
        for (String n : new String[] {"key", "value", "offset", "timestamp", "timestampType", "headers",
                "isTombstone", "producerId", "producerEpoch", "baseSequence", "isTransactional", "isControl"}) {
            cols.put(n, new ArrayList<>());
        }
        Map<String, Object> result = new LinkedHashMap<>();
        result.put("file", path);
        long size;
        try (RandomAccessFile f = new RandomAccessFile(path, "r")) {
            size = f.length();
        }
        RecordColumns c = new RecordColumns(true, true, true, true, true, true, true, true);
        try (SegmentReader r = new SegmentReader(new FileSource(path), 0, size, strict ? size + 1 : size, verifyCrc,
                Long.MIN_VALUE, Long.MAX_VALUE, null, c, 1000, new RecordBatchDecoder(Wire.DEFAULT_MAX_DECOMPRESSED_BYTES))) {
            while (r.next()) {
                if (cutAfter >= 0) {
                    try (RandomAccessFile cut = new RandomAccessFile(path, "rw")) {
                        cut.setLength(cutAfter);
                    }
                    cutAfter = -1;
                }
                cols.get("key").addAll(binaries(c.keys, 0, c.rows));
                cols.get("value").addAll(binaries(c.values, 0, c.rows));
                for (int i = 0; i < c.rows; i++) {
                    cols.get("offset").add(c.offsets[i]);
                    cols.get("timestamp").add(c.timestampNull[i] ? null : c.timestampsUs[i]);
                    cols.get("timestampType").add(c.timestampTypes[i]);
                    int hs = c.headerStart[i];
                    int he = c.headerStart[i + 1];
                    if (he == hs) {
                        cols.get("headers").add(null);
                    } else {
                        List<Object> hdrs = new ArrayList<>();
                        List<Object> ks = binaries(c.headerKeys, hs, he);
                        List<Object> vs = binaries(c.headerValues, hs, he);
                        for (int k = 0; k < he - hs; k++) {
                            hdrs.add(java.util.Arrays.asList(ks.get(k), vs.get(k)));
                        }
                        cols.get("headers").add(hdrs);
                    }
                    cols.get("isTombstone").add(c.tombstones[i]);
                    cols.get("producerId").add(c.producerIds[i]);
                    cols.get("producerEpoch").add(c.producerEpochs[i]);
                    cols.get("baseSequence").add(c.baseSequences[i]);
                    cols.get("isTransactional").add(c.transactional[i]);
                    cols.get("isControl").add(c.control[i]);
                }
            }
        } catch (KafkaSegmentsException e) {
            Map<String, Object> err = new LinkedHashMap<>();
            err.put("class", e.errorClass());
            err.put("position", e.position());
            err.put("baseOffset", e.baseOffset());
            err.put("message", e.render());
            result.put("error", err);
        }
        result.put("columns", cols);
        return result;
    }

    public static void main(String[] args) throws IOException {
        boolean verifyCrc = true;
        boolean strict = true;
        long cutAfter = -1;
        ObjectMapper json = new ObjectMapper();
        BufferedWriter out = new BufferedWriter(new OutputStreamWriter(System.out, StandardCharsets.UTF_8));
        for (String a : args) {
            if (a.equals("--no-crc")) {
                verifyCrc = false;
            } else if (a.equals("--lenient")) {
                strict = false;
            } else if (a.startsWith("--cut-after=")) {
                cutAfter = Long.parseLong(a.substring("--cut-after=".length()));
            } else {
                out.write(json.writeValueAsString(decode(a, verifyCrc, strict, cutAfter)));
                out.newLine();
            }
        }
        out.flush();
    }
}
