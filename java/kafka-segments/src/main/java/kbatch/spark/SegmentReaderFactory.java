package kbatch.spark;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.charset.StandardCharsets;
import java.util.LinkedHashMap;
import java.util.Map;
import java.util.UUID;

import com.fasterxml.jackson.databind.ObjectMapper;
import org.apache.hadoop.fs.FSDataOutputStream;
import org.apache.hadoop.fs.FileSystem;
import org.apache.hadoop.fs.Path;
import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.sql.connector.read.InputPartition;
import org.apache.spark.sql.connector.read.PartitionReader;
import org.apache.spark.sql.connector.read.PartitionReaderFactory;
import org.apache.spark.sql.types.DataTypes;
import org.apache.spark.sql.types.StructField;
import org.apache.spark.sql.types.StructType;
import org.apache.spark.sql.vectorized.ColumnVector;
import org.apache.spark.sql.vectorized.ColumnarBatch;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

import kbatch.kafka.storage.LogDirectory;
import kbatch.kafka.storage.SegmentReader;
import kbatch.kafka.wire.KafkaSegmentsException;
import kbatch.kafka.wire.RecordBatchDecoder;
import kbatch.kafka.wire.RecordColumns;
import kbatch.kafka.wire.Wire;
import kbatch.spark.columns.KafkaVectors;

/**
 * Readers of {@link SegmentSlice}s on executors: columnar batches of the pruned columns, with the
 * Python reader's error policy: a bad batch fails the task with the file and byte position, or
 * with failOnDataLoss=false / badRecordsPath the rest of the range is skipped and reported.
 */
final class SegmentReaderFactory implements PartitionReaderFactory {
    private static final long serialVersionUID = 1L;
    private static final Logger LOG = LoggerFactory.getLogger("kbatch.spark");

    private final ReadOptions options;
    private final StructType schema;
    private final SerializableConfiguration conf;

    SegmentReaderFactory(ReadOptions options, StructType schema, SerializableConfiguration conf) {
        this.options = options;
        this.schema = schema;
        this.conf = conf;
    }

    @Override
    public boolean supportColumnarReads(InputPartition partition) {
        return true;
    }

    @Override
    public PartitionReader<ColumnarBatch> createColumnarReader(InputPartition partition) {
        if (partition instanceof SegmentPack) {
            return new PackReader(((SegmentPack) partition).slices);
        }
        return new ColumnarReader((SegmentSlice) partition);
    }

    /** Rows, for a plan that asks for them: views of the columnar batches' rows. */
    @Override
    public PartitionReader<InternalRow> createReader(InputPartition partition) {
        PartitionReader<ColumnarBatch> columnar = createColumnarReader(partition);
        return new PartitionReader<InternalRow>() {
            private ColumnarBatch batch;
            private int row = -1;

            @Override
            public boolean next() throws IOException {
                while (batch == null || ++row >= batch.numRows()) {
                    if (!columnar.next()) {
                        return false;
                    }
                    batch = columnar.get();
                    row = -1;
                }
                return true;
            }

            @Override
            public InternalRow get() {
                return batch.getRow(row);
            }

            @Override
            public void close() throws IOException {
                columnar.close();
            }
        };
    }

    /** The slices of a {@link SegmentPack}, one after the other, each as its own input partition would be read. */
    final class PackReader implements PartitionReader<ColumnarBatch> {
        private final SegmentSlice[] slices;
        private int nextSlice;
        private ColumnarReader current;
        /** One read window for the pack's slices, read one after the other. */
        private final SegmentReader.Window window = new SegmentReader.Window();

        PackReader(SegmentSlice[] slices) {
            this.slices = slices;
        }

        @Override
        public boolean next() throws IOException {
            while (true) {
                if (current == null) {
                    if (nextSlice == slices.length) {
                        return false;
                    }
                    current = new ColumnarReader(slices[nextSlice++], window);
                }
                if (current.next()) {
                    return true;
                }
                current.close();
                current = null;
            }
        }

        @Override
        public ColumnarBatch get() {
            return current.get();
        }

        @Override
        public void close() throws IOException {
            if (current != null) {
                current.close();
            }
        }
    }

    final class ColumnarReader implements PartitionReader<ColumnarBatch> {
        private final SegmentSlice slice;
        private final SegmentReader.Window window;
        private SegmentReader reader;
        private RecordColumns columns;
        private ColumnarBatch batch;
        private boolean done;

        ColumnarReader(SegmentSlice slice) {
            this(slice, new SegmentReader.Window());
        }

        ColumnarReader(SegmentSlice slice, SegmentReader.Window window) {
            this.slice = slice;
            this.window = window;
        }

        private void open() throws IOException {
            java.util.Set<String> names = new java.util.HashSet<>();
            for (StructField f : schema.fields()) {
                names.add(f.name());
            }
            boolean batchFields = names.contains("producerId") || names.contains("producerEpoch")
                    || names.contains("baseSequence") || names.contains("isTransactional")
                    || names.contains("isControl");
            columns = new RecordColumns(names.contains("key"), names.contains("value"), names.contains("offset"),
                    names.contains("timestamp"), names.contains("timestampType"), names.contains("headers"),
                    names.contains("isTombstone"), batchFields);
            FileSystem fs = LogDirectory.fileSystem(slice.path, conf.get());
            // a range that ends at the end of the file may end in a partial batch only in the last
            // (active) segment, as Kafka ignores it; in a middle segment that is unreadable bytes
            reader = new SegmentReader(new LogDirectory.FsSource(fs, slice.path), slice.start, slice.end,
                    slice.nextBase == null ? slice.fileSize : Long.MAX_VALUE, options.verifyCrc(),
                    slice.startOffset == null ? Long.MIN_VALUE : slice.startOffset,
                    slice.endOffset == null ? Long.MAX_VALUE : slice.endOffset, slice.aborted, columns,
                    options.rowsPerBatch(), new RecordBatchDecoder(Wire.DEFAULT_MAX_DECOMPRESSED_BYTES), window)
                    .followedBy(slice.nextBase, slice.fileSize);
        }

        @Override
        public boolean next() throws IOException {
            if (done || slice.end <= slice.start) {
                return false;
            }
            if (reader == null) {
                try {
                    open();
                } catch (java.io.FileNotFoundException e) {
                    // deleted (retention, a stream's segment) between planning and reading: data loss
                    done = true;
                    String msg = "kafka-segments: " + slice.path + " was deleted before it was read (offsets from "
                            + slice.startOffset + " to " + slice.endOffset + ")";
                    if (options.failOnDataLoss()) {
                        throw new IOException(msg + "; failOnDataLoss=false skips what is gone");
                    }
                    LOG.warn("{} (failOnDataLoss=false: skipped)", msg);
                    return false;
                }
            }
            try {
                if (!reader.next()) {
                    done = true;
                    return false;
                }
            } catch (KafkaSegmentsException e) {
                done = true;
                e.inFile(slice.path).unreadable(slice.path, slice.fileSize, reader.lastRead(), slice.nextBase);
                // a file that changed under the read is not bad data: it fails the task whatever
                // failOnDataLoss says, as in the Python reader
                if (options.failOnDataLoss() || "FileChangedError".equals(e.errorClass())) {
                    // a JDK class, message only: the driver deserializes task failures with Spark's
                    // class loader, which does not see a jar added at runtime (ADD JAR)
                    throw new IOException(e.getMessage());
                }
                LOG.warn("kafka-segments: skipping the rest of {} from byte {} to {} (failOnDataLoss=false): {}",
                        slice.path, e.position(), slice.end, e.getMessage());
                if (options.badRecordsPath() != null) {
                    report(options.badRecordsPath(), e);
                }
                return false;
            }
            batch = new ColumnarBatch(vectors(), columns.rows);
            return true;
        }

        private ColumnVector[] vectors() {
            StructField[] fields = schema.fields();
            ColumnVector[] v = new ColumnVector[fields.length];
            RecordColumns c = columns;
            for (int i = 0; i < fields.length; i++) {
                switch (fields[i].name()) {
                    case "key":
                        v[i] = new KafkaVectors.Binaries(DataTypes.BinaryType, c.keys);
                        break;
                    case "value":
                        v[i] = new KafkaVectors.Binaries(DataTypes.BinaryType, c.values);
                        break;
                    case "topic":
                        v[i] = new KafkaVectors.Constant(slice.topic);
                        break;
                    case "partition":
                        v[i] = new KafkaVectors.Constant(slice.partition);
                        break;
                    case "offset":
                        v[i] = new KafkaVectors.Longs(DataTypes.LongType, c.offsets, null, c.rows);
                        break;
                    case "timestamp":
                        v[i] = new KafkaVectors.Longs(DataTypes.TimestampType, c.timestampsUs, c.timestampNull, c.rows);
                        break;
                    case "timestampType":
                        v[i] = new KafkaVectors.Ints(c.timestampTypes);
                        break;
                    case "headers":
                        v[i] = new KafkaVectors.Headers(fields[i].dataType(), c);
                        break;
                    case "isTombstone":
                        v[i] = new KafkaVectors.Booleans(c.tombstones);
                        break;
                    case "producerId":
                        v[i] = new KafkaVectors.Longs(DataTypes.LongType, c.producerIds, null, c.rows);
                        break;
                    case "producerEpoch":
                        v[i] = new KafkaVectors.Shorts(c.producerEpochs);
                        break;
                    case "baseSequence":
                        v[i] = new KafkaVectors.Ints(c.baseSequences);
                        break;
                    case "isTransactional":
                        v[i] = new KafkaVectors.Booleans(c.transactional);
                        break;
                    case "isControl":
                        v[i] = new KafkaVectors.Booleans(c.control);
                        break;
                    default:
                        throw new IllegalStateException("kafka-segments: no column " + fields[i].name());
                }
            }
            return v;
        }

        /** One JSON file per skipped range under `directory`, written whole then renamed into place. */
        private void report(String directory, KafkaSegmentsException e) {
            Map<String, Object> r = new LinkedHashMap<>();
            r.put("path", slice.path);
            r.put("topic", slice.topic);
            r.put("partition", slice.partition);
            r.put("skippedFrom", e.position());
            r.put("skippedTo", slice.end);
            r.put("sliceStart", slice.start);
            r.put("baseOffset", e.baseOffset());
            r.put("errorClass", e.errorClass());
            r.put("error", e.render());
            try {
                FileSystem fs = LogDirectory.fileSystem(directory, conf.get());
                String name = "kafka-segments-" + UUID.randomUUID().toString().replace("-", "") + ".json";
                Path dir = new Path(directory);
                fs.mkdirs(dir);
                Path tmp = new Path(dir, "." + name + ".tmp");
                try (FSDataOutputStream out = fs.create(tmp, true)) {
                    out.write((new ObjectMapper().writeValueAsString(r) + "\n").getBytes(StandardCharsets.UTF_8));
                }
                if (!fs.rename(tmp, new Path(dir, name))) {
                    throw new IOException("could not rename " + tmp + " into place");
                }
            } catch (IOException io) {
                throw new UncheckedIOException("kafka-segments: writing the badRecordsPath report: " + io, io);
            }
        }

        @Override
        public ColumnarBatch get() {
            return batch;
        }

        @Override
        public void close() throws IOException {
            if (reader != null) {
                reader.close();
            }
        }
    }
}
