package kbatch.kafka.storage;

import java.io.Closeable;
import java.io.EOFException;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.ByteBuffer;
import java.nio.channels.FileChannel;

import kbatch.kafka.wire.BatchHeader;
import kbatch.kafka.wire.KafkaSegmentsException;
import kbatch.kafka.wire.RecordBatchDecoder;
import kbatch.kafka.wire.RecordColumns;
import kbatch.kafka.wire.Wire;

/**
 * Reads the batches of bytes [start, end) of one segment into {@link RecordColumns}, batch after
 * batch, with the flow of kbatch.columns.decode.iter_record_batches: batch headers are scanned window by
 * window (as kbatch.record.batch.scan_headers, so framing errors surface where they surface in the
 * Python reader; {@link #SCAN_WINDOW} says why the window is smaller here), then each batch in order: a magic 2 batch at or past the end offset stops the
 * read, batches before the start offset are skipped unread, control batches are not rows, the CRC
 * is checked, records are decoded. On a bad batch the rows of the batches before it are returned
 * first and the error is thrown by the following call. A partial last batch is an error unless the
 * range ends at the end of the file (where Kafka ignores it).
 */
public final class SegmentReader implements Closeable {
    /**
     * How many bytes are read at a time (the system property kbatch.spark.scanWindow changes it).
     * Any size gives the same rows and errors (batches are never split; a batch larger than the
     * window is read whole; framing errors come after the whole batches before them, as in
     * kbatch.record.batch.scan_headers, whatever its window): tests read through 4 KiB windows.
     * 1 MiB rather than kbatch's 16 MiB because the window is read three times (copied in, CRC,
     * record walk): at 1 MiB it stays in the core's L2 cache, at 16 MiB every pass streams it
     * from memory and evicts what the query keeps in cache (a groupBy's hash map). Measured at
     * 10 M rows (bench/README.md): a key-only scan's executor CPU 0.9 -> 0.5 s, groupBy(key)
     * 2.4 -> 1.4 s.
     */
    static final int SCAN_WINDOW = Integer.getInteger("kbatch.spark.scanWindow", 1024 * 1024);

    /**
     * A read window that readers of one task use one after the other (a pack's slices), so a
     * task allocates it once. Never shared by readers that are open at the same time: the rows of
     * an output batch refer into it.
     */
    public static final class Window {
        byte[] bytes = new byte[0];
        /** A summary walk's window over a FileChannel: the kernel reads into it, the CRC runs over it. */
        ByteBuffer direct;
    }
    /** Output batches end after the Kafka batch that takes them past this many key+value bytes. */
    static final int MAX_OUTPUT_BYTES = 64 * 1024 * 1024;

    /** Positioned reads of one file (never a mapping: see LogDirectory.FsSource). */
    public interface Source extends Closeable {
        /** Exactly len bytes at position; EOFException when the file ends before them. */
        void readFully(long position, byte[] b, int off, int len) throws IOException;

        /** The local file's channel, which a summary walk reads into a direct buffer (null: none). */
        default FileChannel channel() {
            return null;
        }
    }

    /** Exactly dst.remaining() bytes of `ch` at position into dst; EOFException when the file ends before them. */
    public static void readFully(FileChannel ch, ByteBuffer dst, long position) throws IOException {
        long at = position;
        while (dst.hasRemaining()) {
            int n = ch.read(dst, at);
            if (n < 0) {
                throw new EOFException("end of file at byte " + at + ", " + dst.remaining() + " bytes short");
            }
            at += n;
        }
    }

    /**
     * The window of a walk that trusts headers: enough for the headers of a run of small batches;
     * a batch taken from its header is hopped over, its records never read.
     */
    static final int HOP_WINDOW = 16 * 1024;

    private final Source src;
    private final long start;
    private final long end;
    private final boolean strict;
    private final boolean verifyCrc;
    private final long lo;
    private final long hi;
    private final AbortedTransactions aborted;
    private final RecordColumns out;
    private final int rowsPerBatch;
    private final RecordBatchDecoder decoder;
    /** No columns asked for (count()): well-formed uncompressed batches are walked, not decoded. */
    private final boolean countOnly;

    /** The bytes being read: the current read window. */
    private ByteBuffer buf;
    private final Window window;
    private long bufPos;
    /** Where the bytes loaded into the window end (file position; bufPos when none). */
    private long loadedEnd;
    private long pos;
    private BatchHeader[] headers = new BatchHeader[0];
    private int count;
    private int next;
    private boolean finished;
    private boolean stopped;
    private long validEnd;
    private long lastRead = Long.MIN_VALUE;
    // a range of a partition's log (followedBy): its batches' offsets must follow the log's order
    // (a file decoded on its own, DecodeMain's, is batches as kbatch.decode_columns reads them);
    // the next segment's base offset (null: the last segment), the file's size
    private boolean ofLog;
    private Long nextBase;
    private long fileLength = -1;
    // the offset order (kbatch.log.fetch.offset_disorder): the last offset of the batch before,
    // and whether a batch reaching the start offset was met (from there on every batch is checked)
    private long prevLast = Long.MIN_VALUE;
    private boolean hasPrev;
    private boolean reached;
    /** A framing error met after some whole batches of a window: thrown once those are read. */
    private KafkaSegmentsException framing;
    private KafkaSegmentsException pending;
    /** A summary walk ({@link RangeSummary}): batches whose rows the header says, not decoded (null: a read). */
    private HeaderSink sink;
    /** A summary walk without CRCs: batches taken from headers are found by the lengths alone (hopped over). */
    private boolean hop;

    /** Takes the batches a summary walk answers from their header (after every check the read makes but the record walk). */
    interface HeaderSink {
        void batch(BatchHeader h);
    }

    /**
     * @param lo first offset to keep (inclusive), hi: end offset (exclusive)
     * @param aborted the partition's aborted transactions for read_committed; null for read_uncommitted
     */
    public SegmentReader(Source src, long start, long end, long fileSize, boolean verifyCrc, long lo, long hi,
                  AbortedTransactions aborted, RecordColumns out, int rowsPerBatch, RecordBatchDecoder decoder) {
        this(src, start, end, fileSize, verifyCrc, lo, hi, aborted, out, rowsPerBatch, decoder, new Window());
    }

    /** As above, reading through `window` (reused from a reader of the same task that is done). */
    public SegmentReader(Source src, long start, long end, long fileSize, boolean verifyCrc, long lo, long hi,
                  AbortedTransactions aborted, RecordColumns out, int rowsPerBatch, RecordBatchDecoder decoder,
                  Window window) {
        this.window = window;
        this.src = src;
        this.start = start;
        this.end = end;
        this.strict = end < fileSize;
        this.verifyCrc = verifyCrc;
        this.lo = lo;
        this.hi = hi;
        this.aborted = aborted;
        this.out = out;
        this.rowsPerBatch = Math.max(1, rowsPerBatch);
        this.decoder = decoder;
        this.countOnly = out.none();
        this.pos = start;
    }

    /**
     * What follows the range: `nextBase`, the base offset of the partition's next segment (null:
     * this is the last one), and `fileLength`, the segment's size. A batch whose offsets run past
     * the next segment's base is damage, and so is a batch just after the range (a split segment)
     * whose base offset is not above the last one read.
     */
    public SegmentReader followedBy(Long nextBase, long fileLength) {
        this.ofLog = true;
        this.nextBase = nextBase;
        this.fileLength = fileLength;
        return this;
    }

    /**
     * A summary walk: a magic 2 data batch whose CRC holds, within the offset range, of a known
     * codec and without the delete-horizon bit goes to `sink` with its header's figures instead of
     * being decoded (an aborted one is passed over); every other batch is decoded as a read
     * decodes it, framing, order, marker and truncation checks included. Without verifyCrc (the
     * trust-headers opt-in) such a batch is not checked and its records are not read: the walk
     * reads its header and hops to the next by its length (every other check stays).
     */
    SegmentReader summarizing(HeaderSink sink) {
        this.sink = sink;
        this.hop = !verifyCrc;
        return this;
    }

    /** Whether a summary walk may take batch `h`, checked, from its header. */
    private boolean fromHeader(BatchHeader h) {
        return h.baseOffset >= lo && h.lastOffset < hi && h.recordCount >= 0
                && (h.attributes & Wire.COMPRESSION_CODEC_MASK) <= Wire.ZSTD
                && (h.attributes & Wire.DELETE_HORIZON_FLAG_MASK) == 0;
    }

    /** The last offset of the last batch read whole (Long.MIN_VALUE: none yet). */
    public long lastRead() {
        return lastRead;
    }

    /** Where the bytes read so far end as whole batches (the error position of a truncation). */
    long position() {
        return pos;
    }

    /**
     * The next rows into `out` (reset first): true when there are some. Throws the first error of
     * the range, after returning the rows of the batches before it.
     */
    public boolean next() {
        if (pending != null) {
            KafkaSegmentsException e = pending;
            pending = null;
            throw e;
        }
        out.reset();
        if (finished) {
            return false;
        }
        try {
            while (true) {
                if (next == count) {
                    if (out.rows > 0) {
                        return true; // the rows refer to this window: hand them out before it is reloaded
                    }
                    if (stopped || !scanWindow()) {
                        finished = true;
                        break;
                    }
                    continue;
                }
                out.mark();
                try {
                    process(headers[next++]);
                } catch (KafkaSegmentsException e) {
                    out.rollback(); // a bad batch gives no rows, as in the Python reader
                    throw e;
                }
                if (stopped) {
                    finished = true;
                    break;
                }
                if (out.rows >= rowsPerBatch || outputBytes() >= MAX_OUTPUT_BYTES) {
                    return true;
                }
            }
            if (strict && !stopped && validEnd < end) {
                throw truncation(validEnd);
            }
            if (!stopped) {
                checkFollowing();
            }
        } catch (KafkaSegmentsException e) {
            finished = true;
            if (out.rows > 0) {
                pending = e;
                return true;
            }
            throw e;
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
        return out.rows > 0;
    }

    private long outputBytes() {
        return (out.key ? out.keys.bytes() : 0) + (out.value ? out.values.bytes() : 0);
    }

    private void process(BatchHeader h) {
        int p = (int) (h.position - bufPos);
        reached |= h.lastOffset >= lo;
        if (reached && ofLog) { // the batch at the read's end too: a forged base offset must not end a read silently
            checkOrder(h);
        }
        prevLast = h.lastOffset;
        hasPrev = true;
        if (h.magic == 2) {
            if (h.baseOffset >= hi) {
                stopped = true;
                return;
            }
            if (h.lastOffset < lo) {
                return;
            }
            if (h.isControl()) {
                if (verifyCrc) { // a consumer checks every batch's CRC, markers too (kbatch.log.fetch)
                    decoder.checkCrc(buf, p, h);
                }
                if (aborted != null) { // read_committed: markers are checked against the aborted list
                    aborted.checkMarker(h, decoder.controlType(buf, p, bufPos, h));
                }
                lastRead = h.lastOffset;
                return;
            }
            if (verifyCrc) {
                decoder.checkCrc(buf, p, h);
            }
            boolean emit = aborted == null || !h.isTransactional() || !aborted.isAborted(h.producerId, h.baseOffset);
            if (sink != null && fromHeader(h)) {
                if (emit) {
                    sink.batch(h);
                }
                lastRead = h.lastOffset;
                return;
            }
            int counted = countOnly && (h.attributes & Wire.COMPRESSION_CODEC_MASK) == Wire.NONE
                    ? decoder.countV2(buf, p, h, lo, hi) : -1;
            if (counted >= 0) { // well-formed records, nothing to store: count them
                out.rows += emit ? counted : 0;
            } else {
                decoder.decodeV2(buf, p, bufPos, h, out, lo, hi, emit, true);
            }
            lastRead = h.lastOffset;
        } else {
            if (h.lastOffset < lo) {
                return;
            }
            if (verifyCrc) {
                decoder.checkCrc(buf, p, h);
            }
            decoder.decodeLegacy(buf, p, bufPos, h, out, lo, hi, verifyCrc, true);
            lastRead = h.lastOffset;
        }
    }

    /**
     * kbatch.log.fetch.offset_disorder: Kafka's CRC does not cover a batch's base offset, so only
     * the log's order shows one forged or damaged: a base offset not above the last offset of the
     * batch before, or offsets at or past the next segment's base. Read on, such a batch would end
     * the read silently or give offsets twice.
     */
    private void checkOrder(BatchHeader h) {
        if (hasPrev && h.baseOffset <= prevLast) {
            throw KafkaSegmentsException.offsetDisorder(h.position, "offsets go backwards: batch at byte "
                    + h.position + " has base offset " + h.baseOffset + " but follows offset " + prevLast);
        }
        if (nextBase != null && h.lastOffset >= nextBase) {
            throw KafkaSegmentsException.offsetDisorder(h.position, "batch at byte " + h.position + " has offsets "
                    + h.baseOffset + ".." + h.lastOffset + ", at or past the next segment's base offset " + nextBase);
        }
    }

    /**
     * A range that ends inside its segment (split at an `.index` entry): the order carries on into
     * the next range, whose reader does not see the batch before its first, so the base offset of
     * the batch that follows is checked here (a read of the whole segment checks it in order).
     */
    private void checkFollowing() throws IOException {
        if (!ofLog || !reached || !hasPrev || end + Wire.HEADER_SIZE_UP_TO_MAGIC > fileLength) {
            return;
        }
        byte[] head = new byte[Wire.HEADER_SIZE_UP_TO_MAGIC];
        try {
            src.readFully(end, head, 0, head.length);
        } catch (EOFException e) {
            return; // the file was cut: the next range's reader says so
        }
        long base = Wire.i64(head, 0);
        int magic = head[Wire.MAGIC_OFFSET];
        if (magic < 0 || magic > 2 || Wire.i32(head, Wire.SIZE_OFFSET) < Wire.RECORD_OVERHEAD_V0) {
            return; // not a batch's header: the next range's reader names what it is
        }
        if (base <= prevLast) {
            throw KafkaSegmentsException.offsetDisorder(end, "offsets go backwards: batch at byte " + end
                    + " has base offset " + base + " but follows offset " + prevLast);
        }
    }

    // ------------------------------------------------------------------ framing (scan_headers)
    /**
     * Bytes [from, to) of the file into the window array (buf). Bytes of [from, to) the previous
     * load already holds (the partial batch at its end) are moved to the front, not read again:
     * no row refers into the window any more when it is reloaded.
     */
    private void load(long from, long to) throws IOException {
        if (sink != null && src.channel() != null) {
            loadDirect(from, to);
            return;
        }
        int n = (int) (to - from);
        byte[] w = window.bytes;
        int kept = 0;
        if (buf != null && buf.array() == w && from >= bufPos && from < loadedEnd && w.length >= n) {
            kept = (int) (Math.min(loadedEnd, to) - from);
            System.arraycopy(w, (int) (from - bufPos), w, 0, kept);
        } else if (w.length < n) {
            w = new byte[Math.max(n, Math.min(windowSize(), (int) Math.min(Integer.MAX_VALUE - 8, end - start)))];
            window.bytes = w;
        }
        if (buf == null || buf.array() != w) {
            buf = ByteBuffer.wrap(w);
        }
        bufPos = from;
        loadedEnd = from + kept;
        try {
            src.readFully(from + kept, w, kept, n - kept);
        } catch (EOFException e) { // planned from a longer file: it was truncated while being read
            throw KafkaSegmentsException.fileChanged(from, n + " bytes at byte " + from + " (the size planned: " + end
                    + ")", "the end of the file before them");
        }
        loadedEnd = to;
    }

    /**
     * load() for a summary walk over a local file: the kernel copies the bytes straight into a
     * direct buffer that the CRC-32C intrinsic reads (a heap window costs a second copy, from the
     * JDK's temporary direct buffer into the array).
     */
    private void loadDirect(long from, long to) throws IOException {
        int n = (int) (to - from);
        ByteBuffer w = window.direct;
        int kept = 0;
        if (buf != null && buf == w && from >= bufPos && from < loadedEnd && w.capacity() >= n) {
            kept = (int) (Math.min(loadedEnd, to) - from);
            w.put(0, w, (int) (from - bufPos), kept);
        } else if (w == null || w.capacity() < n) {
            w = ByteBuffer.allocateDirect(Math.max(n, Math.min(windowSize(),
                    (int) Math.min(Integer.MAX_VALUE - 8, end - start))));
            window.direct = w;
        }
        buf = w;
        bufPos = from;
        loadedEnd = from + kept;
        try {
            readFully(src.channel(), w.duplicate().limit(n).position(kept), from + kept);
        } catch (EOFException e) { // planned from a longer file: it was truncated while being read
            throw KafkaSegmentsException.fileChanged(from, n + " bytes at byte " + from + " (the size planned: " + end
                    + ")", "the end of the file before them");
        }
        loadedEnd = to;
    }

    private int windowSize() {
        return hop ? HOP_WINDOW : SCAN_WINDOW;
    }

    /** Scan the next window's headers; false when no whole batch is left. */
    private boolean scanWindow() throws IOException {
        count = 0;
        next = 0;
        if (framing != null) { // the batches before it were handed out: now the error
            KafkaSegmentsException e = framing;
            framing = null;
            throw e;
        }
        if (end - pos <= Wire.HEADER_SIZE_UP_TO_MAGIC) {
            validEnd = pos;
            return false;
        }
        long wend = Math.min(end, pos + windowSize());
        load(pos, wend);
        long valid = scan(pos, wend);
        if (valid == pos) { // the next batch is larger than the window, or truncated
            if (wend == end) {
                validEnd = pos;
                return false;
            }
            long need = (long) buf.getInt((int) (pos - bufPos) + Wire.SIZE_OFFSET) + Wire.LOG_OVERHEAD;
            if (pos + need > end) {
                validEnd = pos;
                return false;
            }
            load(pos, pos + need);
            valid = scan(pos, pos + need);
        }
        pos = valid;
        return true;
    }

    /** kbatch's scan_batches over [from, to) of the loaded window: framing errors, then headers. */
    private long scan(long from, long to) {
        long p = from;
        while (to - p > Wire.HEADER_SIZE_UP_TO_MAGIC) {
            int i = (int) (p - bufPos);
            long offset = buf.getLong(i);
            int size = buf.getInt(i + Wire.SIZE_OFFSET);
            if (size < Wire.RECORD_OVERHEAD_V0) {
                return framing(from, p, KafkaSegmentsException.batchTooSmall(p, "size >= " + Wire.RECORD_OVERHEAD_V0,
                        size, offset));
            }
            long total = (long) size + Wire.LOG_OVERHEAD;
            if (total > to - p) {
                if (hop && hopOver(i, p, total, to)) {
                    p += total;
                    continue;
                }
                break;
            }
            int magic = buf.get(i + Wire.MAGIC_OFFSET);
            if (magic == 2) {
                if (total < Wire.RECORD_BATCH_OVERHEAD) {
                    return framing(from, p, KafkaSegmentsException.batchTooSmall(p,
                            "size >= " + Wire.RECORD_BATCH_OVERHEAD, total, offset));
                }
            } else if (magic == 0 || magic == 1) {
                if (magic == 1 && size < Wire.RECORD_OVERHEAD_V1) {
                    return framing(from, p, KafkaSegmentsException.batchTooSmall(p,
                            "size >= " + Wire.RECORD_OVERHEAD_V1, size, offset));
                }
            } else {
                return framing(from, p, KafkaSegmentsException.badMagic(p + Wire.MAGIC_OFFSET, magic, offset));
            }
            if (count == headers.length) {
                BatchHeader[] more = java.util.Arrays.copyOf(headers, Math.max(64, count * 2));
                for (int k = count; k < more.length; k++) {
                    more[k] = new BatchHeader();
                }
                headers = more;
            }
            headers[count++].read(buf, i, p, (int) total);
            p += total;
        }
        return p;
    }

    /**
     * A walk that trusts headers: whether the batch at p (buffer index i), only partly in the
     * window [.., to), is one the walk takes from its header or passes over (outside the offset
     * range), which the window holds: then it is
     * scanned as a whole one (its framing checks are those of a magic 2 batch, and it must end
     * within the range, else it is the partial batch the read names) and its records are never read.
     */
    private boolean hopOver(int i, long p, long total, long to) {
        if (to - p < Wire.RECORD_BATCH_OVERHEAD || total > end - p || total < Wire.RECORD_BATCH_OVERHEAD
                || buf.get(i + Wire.MAGIC_OFFSET) != 2) {
            return false;
        }
        if (count == headers.length) {
            BatchHeader[] more = java.util.Arrays.copyOf(headers, Math.max(64, count * 2));
            for (int k = count; k < more.length; k++) {
                more[k] = new BatchHeader();
            }
            headers = more;
        }
        BatchHeader h = headers[count];
        h.read(buf, i, p, (int) total);
        boolean unread = h.lastOffset < lo || h.baseOffset >= hi; // passed over, or the end of the read
        if (!unread && (h.isControl() || !fromHeader(h))) {
            return false; // decoded (boundary, legacy, marker, ...): the next window holds it whole
        }
        count++;
        return true;
    }

    /** A framing error at p: thrown now when no whole batch came before it in [from, p), else after them. */
    private long framing(long from, long p, KafkaSegmentsException e) {
        if (p == from) {
            throw e;
        }
        framing = e;
        return p;
    }

    /** kbatch.record.batch.truncation_error: a partial batch where the range should end with a whole one. */
    private KafkaSegmentsException truncation(long valid) throws IOException {
        long left = end - valid;
        String expected;
        if (left >= Wire.LOG_OVERHEAD) {
            byte[] size = new byte[4];
            src.readFully(valid + Wire.SIZE_OFFSET, size, 0, 4);
            expected = ((long) Wire.i32(size, 0) + Wire.LOG_OVERHEAD) + " bytes for the batch";
        } else {
            expected = "at least " + Wire.HEADER_SIZE_UP_TO_MAGIC + " bytes of batch header";
        }
        return KafkaSegmentsException.truncatedBatch(valid, incompleteBatch(src, end, valid, "the data"), expected,
                left + " bytes");
    }

    /**
     * kbatch.record.batch.incomplete_batch: what the bytes of `src` from `position` (where the whole
     * batches stop) to `size` (the end of the range: of the file unless the segment was split) are,
     * said from what is there (`where`: "the data", "the segment"). A length field that runs past
     * the end with a valid batch behind it is a bad length field, not a partial batch at the end.
     */
    static String incompleteBatch(Source src, long size, long position, String where) throws IOException {
        long left = size - position;
        if (left < Wire.LOG_OVERHEAD) {
            return "a partial batch at the end of " + where + ": " + left + " bytes at byte " + position
                    + ", fewer than a batch's offset and length fields (" + Wire.LOG_OVERHEAD + " bytes)";
        }
        byte[] head = new byte[Wire.HEADER_SIZE_UP_TO_MAGIC];
        src.readFully(position, head, 0, (int) Math.min(head.length, left));
        long n = Wire.i32(head, Wire.SIZE_OFFSET);
        if (left >= Wire.HEADER_SIZE_UP_TO_MAGIC) {
            int magic = head[Wire.MAGIC_OFFSET] & 0xff;
            if (magic > 2) {
                return left + " bytes at byte " + position + " of " + where + " are not a batch: magic byte " + magic
                        + ", length field " + n;
            }
        }
        if (n < Wire.RECORD_OVERHEAD_V0) {
            return "batch length " + n + " at byte " + position + " of " + where + " is smaller than any batch ("
                    + Wire.RECORD_OVERHEAD_V0 + " bytes): a bad length field";
        }
        if (n + Wire.LOG_OVERHEAD <= left) {
            return left + " bytes at byte " + position + " of " + where + " are not a complete batch";
        }
        long behind = nextValidBatch(src, position + 1, size);
        if (behind >= 0) {
            return "batch length " + n + " at byte " + position + " of " + where + " runs past its end (" + size
                    + " bytes), but a valid batch starts at byte " + behind + ": a bad length field, not a partial batch";
        }
        return "a partial batch at the end of " + where + ": batch length " + n + " at byte " + position
                + " runs past its end (" + size + " bytes; " + (left - Wire.LOG_OVERHEAD) + " of the " + n
                + " bytes are there)";
    }

    /** kbatch.record.batch.next_batch_start: the first byte >= from where a whole batch whose CRC holds begins; -1: none. */
    private static long nextValidBatch(Source src, long from, long size) throws IOException {
        final int chunk = 1 << 20;
        byte[] b = new byte[chunk + Wire.HEADER_SIZE_UP_TO_MAGIC];
        for (long p = from; size - p > Wire.HEADER_SIZE_UP_TO_MAGIC; p += chunk) {
            int n = (int) Math.min(b.length, size - p);
            src.readFully(p, b, 0, n);
            for (int q = 0; q < Math.min(chunk, n - Wire.HEADER_SIZE_UP_TO_MAGIC + 1); q++) {
                int magic = b[q + Wire.MAGIC_OFFSET];
                if (magic < 0 || magic > 2) {
                    continue;
                }
                long length = Wire.i32(b, q + Wire.SIZE_OFFSET);
                if (length >= Wire.RECORD_OVERHEAD_V0 && p + q + Wire.LOG_OVERHEAD + length <= size
                        && validBatchAt(src, p + q, (int) length + Wire.LOG_OVERHEAD, magic)) {
                    return p + q;
                }
            }
        }
        return -1;
    }

    /** Whether one whole batch of `total` bytes whose CRC holds starts at `position`. */
    private static boolean validBatchAt(Source src, long position, int total, int magic) throws IOException {
        byte[] batch = new byte[total];
        src.readFully(position, batch, 0, total);
        if (magic == 2) {
            if (total < Wire.RECORD_BATCH_OVERHEAD) {
                return false;
            }
            java.util.zip.CRC32C crc = new java.util.zip.CRC32C();
            crc.update(batch, Wire.ATTRIBUTES_OFFSET, total - Wire.ATTRIBUTES_OFFSET);
            return crc.getValue() == (Wire.i32(batch, Wire.CRC_OFFSET) & 0xffffffffL);
        }
        // magic 0/1: the record's CRC32 covers the bytes from its magic byte to its end
        java.util.zip.CRC32 crc = new java.util.zip.CRC32();
        int crcAt = Wire.LOG_OVERHEAD;
        crc.update(batch, crcAt + 4, total - crcAt - 4);
        return crc.getValue() == (Wire.i32(batch, crcAt) & 0xffffffffL);
    }

    @Override
    public void close() throws IOException {
        src.close();
    }
}
