package kbatch.kafka.storage;

import java.io.IOException;
import java.nio.ByteBuffer;
import java.util.Arrays;

import kbatch.kafka.wire.BatchHeader;
import kbatch.kafka.wire.KafkaSegmentsException;
import kbatch.kafka.wire.Wire;

/**
 * Batch headers of one file from a position to its end, for planning on the driver (end offsets,
 * time lookups, the aborted transactions of a partition): framing as kbatch's scan_batches
 * (errors for a size below the overhead or a bad magic; a partial last batch ends the scan
 * quietly), no CRC checks, whole batches in memory so a visitor may decode one.
 */
public final class HeaderScan {
    public interface Visitor {
        /** b[p, p + h.size) holds the batch; `delta` maps buffer indexes to file positions. False stops. */
        boolean visit(BatchHeader h, ByteBuffer b, int p, long delta) throws IOException;
    }

    private static final int WINDOW = 1 << 20;

    private HeaderScan() {}

    /** Bytes {@link #wholeEnd} reads at a time: a few small batches' headers, or one large batch's. */
    private static final int HOP_WINDOW = 16 * 1024;

    /**
     * Where the whole batches from `from` end, up to the first batch end at or past `until`: the
     * answer {@link #scan} gives with a visitor that stops there, with the same framing errors,
     * reading only the windows that hold batch headers (a large batch's records are hopped over).
     */
    public static long wholeEnd(SegmentReader.Source src, long from, long size, long until) throws IOException {
        byte[] buf = new byte[HOP_WINDOW];
        long bufPos = 0;
        int bufLen = 0;
        long pos = from;
        while (pos < until && size - pos > Wire.HEADER_SIZE_UP_TO_MAGIC) {
            if (pos < bufPos || pos + Wire.HEADER_SIZE_UP_TO_MAGIC > bufPos + bufLen) {
                bufLen = (int) Math.min(buf.length, size - pos);
                src.readFully(pos, buf, 0, bufLen);
                bufPos = pos;
            }
            int p = (int) (pos - bufPos);
            long offset = Wire.i64(buf, p);
            int sz = Wire.i32(buf, p + Wire.SIZE_OFFSET);
            if (sz < Wire.RECORD_OVERHEAD_V0) {
                throw KafkaSegmentsException.batchTooSmall(pos, "size >= " + Wire.RECORD_OVERHEAD_V0, sz, offset);
            }
            long total = (long) sz + Wire.LOG_OVERHEAD;
            if (total > size - pos) {
                break; // a partial last batch ends the scan quietly
            }
            int magic = buf[p + Wire.MAGIC_OFFSET];
            if (magic == 2 && total < Wire.RECORD_BATCH_OVERHEAD) {
                throw KafkaSegmentsException.batchTooSmall(pos, "size >= " + Wire.RECORD_BATCH_OVERHEAD, total, offset);
            } else if (magic == 1 && sz < Wire.RECORD_OVERHEAD_V1) {
                throw KafkaSegmentsException.batchTooSmall(pos, "size >= " + Wire.RECORD_OVERHEAD_V1, sz, offset);
            } else if (magic < 0 || magic > 2) {
                throw KafkaSegmentsException.badMagic(pos + Wire.MAGIC_OFFSET, magic, offset);
            }
            pos += total;
        }
        return pos;
    }

    public static void scan(SegmentReader.Source src, long from, long size, Visitor visitor) throws IOException {
        byte[] buf = new byte[(int) Math.min(WINDOW, Math.max(64, size - from))];
        ByteBuffer bb = ByteBuffer.wrap(buf);
        BatchHeader h = new BatchHeader();
        long pos = from;
        while (size - pos > Wire.HEADER_SIZE_UP_TO_MAGIC) {
            int n = (int) Math.min(buf.length, size - pos);
            src.readFully(pos, buf, 0, n);
            int p = 0;
            while (n - p > Wire.HEADER_SIZE_UP_TO_MAGIC) {
                long offset = Wire.i64(buf, p);
                int sz = Wire.i32(buf, p + Wire.SIZE_OFFSET);
                if (sz < Wire.RECORD_OVERHEAD_V0) {
                    throw KafkaSegmentsException.batchTooSmall(pos + p, "size >= " + Wire.RECORD_OVERHEAD_V0, sz, offset);
                }
                long total = (long) sz + Wire.LOG_OVERHEAD;
                if (total > n - p) {
                    break;
                }
                int magic = buf[p + Wire.MAGIC_OFFSET];
                if (magic == 2 && total < Wire.RECORD_BATCH_OVERHEAD) {
                    throw KafkaSegmentsException.batchTooSmall(pos + p, "size >= " + Wire.RECORD_BATCH_OVERHEAD, total,
                            offset);
                } else if (magic == 1 && sz < Wire.RECORD_OVERHEAD_V1) {
                    throw KafkaSegmentsException.batchTooSmall(pos + p, "size >= " + Wire.RECORD_OVERHEAD_V1, sz, offset);
                } else if (magic < 0 || magic > 2) {
                    throw KafkaSegmentsException.badMagic(pos + p + Wire.MAGIC_OFFSET, magic, offset);
                }
                h.read(bb, p, pos + p, (int) total);
                if (!visitor.visit(h, bb, p, pos)) {
                    return;
                }
                p += (int) total;
            }
            if (p == 0) { // one batch larger than the buffer, or a partial last batch
                long total = (long) Wire.i32(buf, Wire.SIZE_OFFSET) + Wire.LOG_OVERHEAD;
                if (pos + total > size) {
                    return;
                }
                buf = Arrays.copyOf(buf, (int) total);
                bb = ByteBuffer.wrap(buf);
                continue;
            }
            pos += p;
        }
    }
}
