package kbatch.kafka.wire;

/**
 * Every error of the JVM reader: the name of the kbatch exception class the Python reader raises
 * for the same bytes (CrcMismatchError, InvalidRecordError, ...), what was expected, what was
 * found, the byte position in the file and the batch's base offset, rendered as kbatch renders
 * them (kbatch/errors.py), so both readers fail with the same words.
 */
public final class KafkaSegmentsException extends RuntimeException {
    private static final long serialVersionUID = 1L;

    private final String errorClass;
    private String reason;
    private Long position;
    private Long baseOffset;
    private final String expected;
    private final String found;

    public KafkaSegmentsException(String errorClass, String reason, Long position, Long baseOffset, Object expected,
                           Object found) {
        super(reason);
        this.errorClass = errorClass;
        this.reason = reason;
        this.position = position;
        this.baseOffset = baseOffset;
        this.expected = expected == null ? null : String.valueOf(expected);
        this.found = found == null ? null : String.valueOf(found);
    }

    /** The kbatch exception class name, e.g. "CrcMismatchError". */
    public String errorClass() {
        return errorClass;
    }

    public String reason() {
        return reason;
    }

    /** Byte position in the file (or null). */
    public Long position() {
        return position;
    }

    public Long baseOffset() {
        return baseOffset;
    }

    String expected() {
        return expected;
    }

    String found() {
        return found;
    }

    /** The message without the class name, as str() of the kbatch exception. */
    public String render() {
        StringBuilder sb = new StringBuilder(reason);
        if (expected != null || found != null) {
            sb.append(": expected ").append(expected == null ? "None" : expected).append(", found ")
              .append(found == null ? "None" : found);
        }
        if (position != null || baseOffset != null) {
            sb.append(" (");
            if (position != null) {
                sb.append("at byte ").append(position);
            }
            if (baseOffset != null) {
                sb.append(position != null ? ", " : "").append("in batch with base offset ").append(baseOffset);
            }
            sb.append(')');
        }
        return sb.toString();
    }

    @Override
    public String getMessage() {
        return errorClass + ": " + render();
    }

    /** Fill in location details not known where the error was raised (kbatch's KBatchError.at). */
    public KafkaSegmentsException at(Long position, Long baseOffset) {
        if (this.position == null && position != null) {
            this.position = position;
        }
        if (this.baseOffset == null && baseOffset != null) {
            this.baseOffset = baseOffset;
        }
        return this;
    }

    /** Point an error found inside decompressed records at the batch (kbatch.record.compression.relocate). */
    KafkaSegmentsException relocate(long batchPosition, long baseOffset, String what) {
        if (position != null) {
            reason = reason + " (at byte " + position + " of " + what + " of the batch at byte " + batchPosition + ")";
        }
        position = batchPosition;
        this.baseOffset = null;
        return at(batchPosition, baseOffset);
    }

    /** Name the file, as the Python reader does: "<reason> [kafka-segments: <path>]". */
    public KafkaSegmentsException inFile(String path) {
        reason = reason + " [kafka-segments: " + path + "]";
        return this;
    }

    /**
     * Say which bytes and offsets could not be read, as kbatch.log.fetch.UnreadableRange does:
     * "&lt;path&gt;: N bytes from byte P could not be read; offsets A..B are in or behind them".
     * lastRead: the last offset read before them (Long.MIN_VALUE: none); nextBase: the next
     * segment's base offset (null: the end of the log).
     */
    public KafkaSegmentsException unreadable(String path, long fileSize, long lastRead, Long nextBase) {
        if (position == null) {
            return this;
        }
        reason = reason + "; " + path + ": " + (fileSize - position) + " bytes from byte " + position
                + " could not be read, " + offsets(lastRead, nextBase) + " are in or behind them and were not read";
        return this;
    }

    /** UnreadableRange.offsets: "offsets A..B" (lastRead Long.MIN_VALUE: "?"; nextBase null: the end of the log). */
    public static String offsets(long lastRead, Long nextBase) {
        String lo = lastRead == Long.MIN_VALUE ? "?" : Long.toString(lastRead + 1);
        String hi = nextBase == null ? "the end of the log" : Long.toString(nextBase - 1);
        return "offsets " + lo + ".." + hi;
    }

    /**
     * kbatch.log.fetch.UnreadableDataError, raised where a read meets a range it cannot read that
     * no batch error stands for (a transaction whose marker may be in damaged bytes), in
     * UnreadableRange's words: "&lt;context&gt;&lt;path&gt;: N bytes from byte P could not be read
     * (&lt;why&gt;); offsets A..B are in or behind them and were not read".
     */
    public static KafkaSegmentsException unreadableRange(String context, String path, long position, long size,
                                                  long lastRead, Long nextBase, String why) {
        return new KafkaSegmentsException("UnreadableDataError", context + path + ": " + size + " bytes from byte "
                + position + " could not be read (" + why + "); " + offsets(lastRead, nextBase)
                + " are in or behind them and were not read", position, null, null, null);
    }

    /**
     * A base offset that breaks the log's order (kbatch.log.fetch.offset_disorder): Kafka's CRC
     * does not cover it, so only the order shows it forged or damaged; read on, it would end a
     * read silently or give offsets twice. `what` says how it breaks the order.
     */
    public static KafkaSegmentsException offsetDisorder(long pos, String what) {
        return new KafkaSegmentsException("CorruptRecordError", what, pos, null, null, null);
    }

    KafkaSegmentsException shift(long delta) {
        if (position != null) {
            position = position + delta;
        }
        return this;
    }

    // ---------------------------------------------------------------------- the kernels' statuses
    // (kbatch/errors.py _MESSAGES: same classes, same reasons)
    static KafkaSegmentsException truncated(long pos, Object expected, Object found, Long base) {
        return new KafkaSegmentsException("TruncatedDataError", "Truncated data", pos, base, expected, found);
    }

    static KafkaSegmentsException varintTooLong(long pos, Long base) {
        return new KafkaSegmentsException("CorruptRecordError",
                "Varint is too long, the most significant bit in the 5th byte is set", pos, base, "at most 5 bytes",
                "a 5th byte with its MSB set");
    }

    static KafkaSegmentsException varlongTooLong(long pos, Long base) {
        return new KafkaSegmentsException("CorruptRecordError",
                "Varlong is too long, most significant bit in the 10th byte is set", pos, base, "at most 10 bytes",
                "a 10th byte with its MSB set");
    }

    static KafkaSegmentsException invalidRecord(String reason, long pos, Object expected, Object found, Long base) {
        return new KafkaSegmentsException("InvalidRecordError", reason, pos, base, expected, found);
    }

    static KafkaSegmentsException corrupt(String reason, Long pos, Object expected, Object found, Long base) {
        return new KafkaSegmentsException("CorruptRecordError", reason, pos, base, expected, found);
    }

    public static KafkaSegmentsException batchTooSmall(long pos, Object expected, Object found, long base) {
        return corrupt("Record batch is corrupt (the size is smaller than the minimum allowed overhead)", pos,
                expected, found, base);
    }

    public static KafkaSegmentsException badMagic(long pos, int magic, long base) {
        return corrupt("Invalid magic found in record", pos, "magic 0, 1 or 2", magic, base);
    }

    static KafkaSegmentsException crc(String message, long stored, long computed, Long pos, Long base) {
        return new KafkaSegmentsException("CrcMismatchError",
                message + " (stored crc = " + stored + ", computed crc = " + computed + ")", pos, base,
                "crc " + computed, "stored crc " + stored);
    }

    static KafkaSegmentsException unsupportedCodec(String reason, Long pos, Object expected, Object found) {
        return new KafkaSegmentsException("UnsupportedCodecError", reason, pos, null, expected, found);
    }

    static KafkaSegmentsException decompressionLimit(long maxBytes, Long pos) {
        return new KafkaSegmentsException("DecompressionLimitError",
                "Decompressed batch exceeds the decompression limit", pos, null,
                "at most " + maxBytes + " decompressed bytes", "more");
    }

    /** kbatch.record.batch.truncation_error: `reason` says what the bytes are (SegmentReader.incompleteBatch). */
    public static KafkaSegmentsException truncatedBatch(long pos, String reason, Object expected, Object found) {
        return new KafkaSegmentsException("TruncatedDataError", reason, pos, null, expected, found);
    }

    /** kbatch.errors.FileChangedError: the file shrank while it was read. */
    public static KafkaSegmentsException fileChanged(long pos, Object expected, Object found) {
        return new KafkaSegmentsException("FileChangedError", "The file changed while it was read", pos, null,
                expected, found);
    }

    public static KafkaSegmentsException corruptIndex(String reason, Long pos, Object expected, Object found) {
        return new KafkaSegmentsException("CorruptIndexError", reason, pos, null, expected, found);
    }

    public static KafkaSegmentsException invalidRequest(String reason, Object expected, Object found) {
        return new KafkaSegmentsException("InvalidRequestError", reason, null, null, expected, found);
    }
}
