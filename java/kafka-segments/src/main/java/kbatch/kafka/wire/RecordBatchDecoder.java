package kbatch.kafka.wire;

import java.nio.ByteBuffer;
import java.nio.CharBuffer;
import java.nio.charset.CharacterCodingException;
import java.nio.charset.CharsetDecoder;
import java.nio.charset.CodingErrorAction;
import java.nio.charset.StandardCharsets;
import java.util.zip.CRC32;
import java.util.zip.CRC32C;

/**
 * Records of one batch into {@link RecordColumns}: the Java twin of kbatch's record kernels
 * (decode_columns_v2 for magic 2; magic 0/1 in {@link LegacyRecordDecoder}), with the same checks, in the same
 * order, raising the same error classes at the same byte positions (kafka-format.md 1-2;
 * DESIGN.md decisions 1 and 2: the extended-timestamp bit 7 and the tombstone bit 5).
 */
public final class RecordBatchDecoder {
    final Compression codecs;
    private final LegacyRecordDecoder legacy = new LegacyRecordDecoder(this);
    private final CRC32C crc32c = new CRC32C();
    private final CRC32 crc32 = new CRC32();
    private final CharsetDecoder utf8 = StandardCharsets.UTF_8.newDecoder()
            .onMalformedInput(CodingErrorAction.REPORT).onUnmappableCharacter(CodingErrorAction.REPORT);
    /** Where the last varint ended. */
    private int next;
    /** Base offset of the batch being decoded, for error messages. */
    private long errBase;

    // the record being decoded (fields of the last walk step)
    private int recAttributes;
    private long tsDelta;
    private int offDelta;
    private int keyPos, keyLen, valuePos, valueLen;

    public RecordBatchDecoder(int maxDecompressedBytes) {
        codecs = new Compression(maxDecompressedBytes);
    }

    // ------------------------------------------------------------------ checksums
    /** The stored CRC of a framed entry at b[p] is wrong: CrcMismatchError (kbatch's _check_crc). */
    public void checkCrc(ByteBuffer b, int p, BatchHeader h) {
        long computed;
        if (h.magic == 2) {
            crc32c.reset();
            crc32c.update(slice(b, p + Wire.ATTRIBUTES_OFFSET, p + h.size));
            computed = crc32c.getValue();
        } else {
            int from = Wire.LOG_OVERHEAD + Wire.LEGACY_MAGIC_OFFSET;
            crc32.reset();
            crc32.update(slice(b, p + from, p + h.size));
            computed = crc32.getValue();
        }
        if (computed != h.crc) {
            throw KafkaSegmentsException.crc("Record is corrupt", h.crc, computed, h.position, h.baseOffset);
        }
    }

    private ByteBuffer view;
    private ByteBuffer viewOf;

    /** b[from, to) as a buffer whose position/limit can be moved (one duplicate per input buffer). */
    ByteBuffer slice(ByteBuffer b, int from, int to) {
        if (viewOf != b) {
            view = b.duplicate();
            viewOf = b;
        }
        view.limit(to).position(from);
        return view;
    }

    // ------------------------------------------------------------------ varints (ByteUtils)
    private int varint(ByteBuffer b, int pos, int limit) {
        if (pos + 1 < limit) { // the common 1- and 2-byte forms
            int x0 = b.get(pos);
            if (x0 >= 0) {
                next = pos + 1;
                return (x0 >>> 1) ^ -(x0 & 1);
            }
            int x1 = b.get(pos + 1);
            if (x1 >= 0) {
                int raw = (x0 & 0x7f) | (x1 << 7);
                next = pos + 2;
                return (raw >>> 1) ^ -(raw & 1);
            }
        } else if (pos < limit) {
            int x0 = b.get(pos);
            if (x0 >= 0) {
                next = pos + 1;
                return (x0 >>> 1) ^ -(x0 & 1);
            }
        }
        int raw = 0;
        for (int i = 0; i < 5; i++) {
            if (pos + i >= limit) {
                throw KafkaSegmentsException.truncated(pos + i, 1, 0, errBase);
            }
            int x = b.get(pos + i) & 0xff;
            if (i == 4) {
                if ((x & 0x80) != 0) {
                    throw KafkaSegmentsException.varintTooLong(pos, errBase);
                }
                raw |= x << 28;
                next = pos + 5;
                break;
            }
            raw |= (x & 0x7f) << (7 * i);
            if ((x & 0x80) == 0) {
                next = pos + i + 1;
                break;
            }
        }
        return (raw >>> 1) ^ -(raw & 1);
    }

    private long varlong(ByteBuffer b, int pos, int limit) {
        if (pos + 1 < limit) { // the common 1- and 2-byte forms
            int x0 = b.get(pos);
            if (x0 >= 0) {
                next = pos + 1;
                return (x0 >>> 1) ^ -(x0 & 1);
            }
            int x1 = b.get(pos + 1);
            if (x1 >= 0) {
                int raw = (x0 & 0x7f) | (x1 << 7);
                next = pos + 2;
                return (raw >>> 1) ^ -(raw & 1);
            }
        }
        long raw = 0;
        int shift = 0;
        int i = pos;
        while (true) {
            if (i >= limit) {
                throw KafkaSegmentsException.truncated(i, 1, 0, errBase);
            }
            int x = b.get(i++) & 0xff;
            if ((x & 0x80) != 0) {
                raw |= (long) (x & 0x7f) << shift;
                shift += 7;
                if (shift > 63) {
                    throw KafkaSegmentsException.varlongTooLong(pos, errBase);
                }
            } else {
                raw |= (long) x << shift;
                break;
            }
        }
        next = i;
        return (raw >>> 1) ^ -(raw & 1);
    }

    /** A varint length and that many bytes; a negative length is null (Utils.readBytes). Sets
     * `next`; returns the length (-1 for null); the bytes start at next - length. */
    private int sized(ByteBuffer b, int pos, int limit) {
        int n = varint(b, pos, limit);
        if (n < 0) {
            return -1;
        }
        int at = next;
        if (n > limit - at) {
            throw KafkaSegmentsException.invalidRecord(
                    "Found invalid record structure, a field runs past the end of the record", at, n + " bytes",
                    (limit - at) + " bytes left in record", errBase);
        }
        next = at + n;
        return n;
    }

    // ------------------------------------------------------------------ magic 2
    /**
     * Decode the batch framed at b[p] (header h, already CRC-checked if asked) into `out`, keeping
     * rows with lo <= offset < hi when `emit` (an aborted transaction's batch is walked and checked
     * but gives no rows). `delta` maps buffer indexes to file positions; `stable`: b outlives the
     * output batch, so uncompressed keys and values are referenced, not copied.
     */
    public void decodeV2(ByteBuffer b, int p, long delta, BatchHeader h, RecordColumns out, long lo, long hi, boolean emit,
                  boolean stable) {
        int codec = h.attributes & Wire.COMPRESSION_CODEC_MASK;
        ByteBuffer data = b;
        int start = p + Wire.RECORDS_OFFSET;
        int end = p + h.size;
        long shift = delta;
        if (codec != Wire.NONE) {
            Compression.checkCodec(codec, 2, h.position + Wire.ATTRIBUTES_OFFSET);
            byte[] src = packedCopy(b, start, end - start);
            try {
                codecs.decompress(codec, src, packedOffset, end - start, 2, h.position + Wire.RECORDS_OFFSET);
            } catch (KafkaSegmentsException e) {
                throw e.at(null, h.baseOffset);
            }
            data = decompressed();
            start = 0;
            end = codecs.length;
            shift = 0;
            stable = false;
        }
        try {
            walkV2(data, start, end, h, out, lo, hi, emit, stable);
        } catch (KafkaSegmentsException e) {
            if (codec != Wire.NONE) {
                throw e.relocate(h.position, h.baseOffset, "the decompressed records");
            }
            throw e.shift(shift);
        }
    }

    private byte[] packed = new byte[1 << 16];

    /** The compressed bytes b[from, from + len) in a reusable array (the codecs read arrays). */
    byte[] packedCopy(ByteBuffer b, int from, int len) {
        if (b.hasArray()) {
            if (b.arrayOffset() == 0) {
                packedOffset = from;
                return b.array();
            }
        }
        if (packed.length < len) {
            packed = new byte[Math.max(len, packed.length * 2)];
        }
        b.get(from, packed, 0, len);
        packedOffset = 0;
        return packed;
    }

    int packedOffset;
    private ByteBuffer outView;
    private byte[] outViewOf;

    ByteBuffer decompressed() {
        if (outViewOf != codecs.out) {
            outView = ByteBuffer.wrap(codecs.out);
            outViewOf = codecs.out;
        }
        return outView;
    }

    private void walkV2(ByteBuffer b, int start, int end, BatchHeader h, RecordColumns out, long lo, long hi,
                        boolean emit, boolean stable) {
        errBase = h.baseOffset;
        int count = h.recordCount;
        if (count < 0) {
            throw KafkaSegmentsException.invalidRecord("Found invalid record count", start, "count >= 0", count,
                    errBase);
        }
        boolean extended = (h.attributes & Wire.TIMESTAMP_EXTENDED_FLAG_MASK) != 0;
        long noTs = extended ? Wire.NO_TIMESTAMP_EXTENDED : Wire.NO_TIMESTAMP;
        boolean lat = (h.attributes & Wire.TIMESTAMP_TYPE_MASK) != 0;
        if (emit) {
            out.reserve(count);
        }
        int pos = start;
        for (int done = 0; done < count; done++) {
            if (pos >= end) {
                throw KafkaSegmentsException.invalidRecord("Incorrect declared batch size, premature EOF reached", pos,
                        count + " records", done, errBase);
            }
            int recStart = pos;
            int length = varint(b, pos, end);
            pos = next;
            if (length < 0 || length > end - pos) {
                throw KafkaSegmentsException.invalidRecord(
                        "Invalid record size, the record runs past the end of the batch", recStart,
                        "record length <= " + (end - pos), length, errBase);
            }
            int recEnd = pos + length;
            if (recEnd - pos < 1) {
                throw KafkaSegmentsException.invalidRecord(
                        "Found invalid record structure, a field runs past the end of the record", pos, 1, 0, errBase);
            }
            recAttributes = b.get(pos) & 0xff;
            pos++;
            tsDelta = varlong(b, pos, recEnd);
            offDelta = varint(b, next, recEnd);
            keyLen = sized(b, next, recEnd);
            keyPos = next - Math.max(keyLen, 0);
            valueLen = sized(b, next, recEnd);
            valuePos = next - Math.max(valueLen, 0);
            pos = next;
            int nHeaders = varint(b, pos, recEnd);
            pos = next;
            if (nHeaders < 0) {
                throw KafkaSegmentsException.invalidRecord("Found invalid number of record headers", pos,
                        "header count >= 0", nHeaders, errBase);
            }
            if (nHeaders > recEnd - pos) {
                throw KafkaSegmentsException.invalidRecord("Found invalid number of record headers", pos,
                        "header count <= " + (recEnd - pos), nHeaders, errBase);
            }
            long offset = h.baseOffset + offDelta;
            boolean keep = emit && offset >= lo && offset < hi;
            int headersAt = pos;
            for (int k = 0; k < nHeaders; k++) {
                int klenPos = pos;
                int klen = varint(b, pos, recEnd);
                pos = next;
                if (klen < 0) {
                    throw KafkaSegmentsException.invalidRecord("Invalid negative header key size", klenPos,
                            "header key size >= 0", klen, errBase);
                }
                if (klen > recEnd - pos) {
                    throw KafkaSegmentsException.invalidRecord(
                            "Found invalid record structure, a field runs past the end of the record", pos, klen,
                            recEnd - pos, errBase);
                }
                pos += klen;
                sized(b, pos, recEnd);
                pos = next;
            }
            if (pos != recEnd) {
                throw KafkaSegmentsException.invalidRecord("Invalid record size", recStart,
                        length + " bytes in record payload", (length - (recEnd - pos)) + " bytes read", errBase);
            }
            if (keep) {
                long ts = lat ? h.maxTimestamp : h.firstTimestamp + tsDelta;
                appendRow(out, b, stable, offset, ts, ts != noTs, lat ? 1 : 0,
                        valueLen < 0 || (recAttributes & Wire.RECORD_TOMBSTONE_FLAG_MASK) != 0, h);
                if (out.headers) {
                    appendHeaders(out, b, headersAt, nHeaders, recEnd, stable);
                }
            }
        }
        if (pos != end) {
            throw KafkaSegmentsException.invalidRecord(
                    "Incorrect declared batch size, records still remaining in file", pos,
                    count + " records ending at byte " + pos, (end - pos) + " more bytes", errBase);
        }
    }

    // ------------------------------------------------------------------ magic 2, no columns (count)
    /**
     * The rows a scan of no columns keeps from the uncompressed magic 2 batch framed at b[p]
     * (records with lo <= offset < hi): a walk over b's array that makes every check walkV2 makes,
     * in the same order, and stores nothing. -1 when any check fails (or b has no array): the
     * caller then runs decodeV2, which throws that error at its byte, so count() fails where
     * collect() fails and counts what collect() returns.
     */
    public int countV2(ByteBuffer b, int p, BatchHeader h, long lo, long hi) {
        int count = h.recordCount;
        if (!b.hasArray() || count < 0) {
            return -1;
        }
        byte[] a = b.array();
        int pos = b.arrayOffset() + p + Wire.RECORDS_OFFSET;
        int end = b.arrayOffset() + p + h.size;
        int kept = 0;
        for (int done = 0; done < count; done++) {
            if (pos >= end) {
                return -1;
            }
            int length = leanVarint(a, pos, end);
            if (next < 0) {
                return -1;
            }
            pos = next;
            if (length < 0 || length > end - pos) {
                return -1;
            }
            int recEnd = pos + length;
            if (recEnd - pos < 1) {
                return -1;
            }
            pos++; // attributes
            // the timestamp delta: a varlong of at most 64 bits
            int shift = 0;
            while (true) {
                if (pos >= recEnd) {
                    return -1;
                }
                if (a[pos++] >= 0) {
                    break;
                }
                shift += 7;
                if (shift > 63) {
                    return -1;
                }
            }
            int offDelta = leanVarint(a, pos, recEnd);
            if (next < 0 || leanSized(a, next, recEnd) < 0 || leanSized(a, next, recEnd) < 0) {
                return -1;
            }
            pos = next;
            int nHeaders = leanVarint(a, pos, recEnd);
            if (next < 0) {
                return -1;
            }
            pos = next;
            if (nHeaders < 0 || nHeaders > recEnd - pos) {
                return -1;
            }
            for (int k = 0; k < nHeaders; k++) {
                int klen = leanVarint(a, pos, recEnd);
                if (next < 0) {
                    return -1;
                }
                pos = next;
                if (klen < 0 || klen > recEnd - pos) {
                    return -1;
                }
                pos += klen;
                if (leanSized(a, pos, recEnd) < 0) {
                    return -1;
                }
                pos = next;
            }
            if (pos != recEnd) {
                return -1;
            }
            long offset = h.baseOffset + offDelta;
            if (offset >= lo && offset < hi) {
                kept++;
            }
        }
        return pos == end ? kept : -1;
    }

    /** varint's value over an array; `next` = -1 where varint throws (truncated, or a 5th byte that continues). */
    private int leanVarint(byte[] a, int pos, int limit) {
        int raw = 0;
        for (int i = 0; i < 5; i++) {
            if (pos + i >= limit) {
                next = -1;
                return 0;
            }
            int x = a[pos + i];
            if (i == 4) {
                if (x < 0) {
                    next = -1;
                    return 0;
                }
                raw |= x << 28;
                next = pos + 5;
                break;
            }
            raw |= (x & 0x7f) << (7 * i);
            if (x >= 0) {
                next = pos + i + 1;
                break;
            }
        }
        return (raw >>> 1) ^ -(raw & 1);
    }

    /** sized over an array: 0 or more when it holds (`next` past the bytes; a negative length is null), else -1. */
    private int leanSized(byte[] a, int pos, int limit) {
        int n = leanVarint(a, pos, limit);
        if (next < 0) {
            return -1;
        }
        if (n > limit - next) {
            return -1;
        }
        if (n > 0) {
            next += n;
        }
        return 0;
    }

    private void appendRow(RecordColumns out, ByteBuffer b, boolean stable, long offset, long ts, boolean hasTs,
                           int tsType, boolean tombstone, BatchHeader h) {
        int r = out.rows;
        if (out.offset) {
            out.offsets[r] = offset;
        }
        if (out.timestamp) {
            if (out.rawTimestamps) {
                out.timestampNull[r] = !hasTs;
                out.timestampsUs[r] = ts;
            } else {
                boolean isNull = !hasTs || ts < -Wire.US_LIMIT || ts > Wire.US_LIMIT;
                out.timestampNull[r] = isNull;
                out.timestampsUs[r] = isNull ? 0 : ts * 1000;
            }
        }
        if (out.timestampType) {
            out.timestampTypes[r] = tsType;
        }
        if (out.tombstone) {
            out.tombstones[r] = tombstone;
        }
        if (out.key) {
            if (keyLen < 0) {
                out.keys.addNull();
            } else {
                out.keys.add(b, keyPos, keyLen, stable);
            }
        }
        if (out.value) {
            if (valueLen < 0) {
                out.values.addNull();
            } else {
                out.values.add(b, valuePos, valueLen, stable);
            }
        }
        if (out.batchFields) {
            out.producerIds[r] = h.producerId;
            out.producerEpochs[r] = h.producerEpoch;
            out.baseSequences[r] = h.baseSequence;
            out.transactional[r] = h.isTransactional();
            out.control[r] = h.isControl();
        }
        if (out.headers) {
            out.headerStart[r + 1] = out.headerCount;
        }
        out.rows = r + 1;
    }

    /** Headers of the row just appended (already checked by the walk). */
    private void appendHeaders(RecordColumns out, ByteBuffer b, int pos, int n, int recEnd, boolean stable) {
        for (int k = 0; k < n; k++) {
            int klen = varint(b, pos, recEnd);
            pos = next;
            addHeaderKey(out.headerKeys, b, pos, klen);
            pos += klen;
            int vlen = sized(b, pos, recEnd);
            if (vlen < 0) {
                out.headerValues.addNull();
            } else {
                out.headerValues.add(b, next - vlen, vlen, stable);
            }
            pos = next;
        }
        out.headerCount += n;
        out.headerStart[out.rows] = out.headerCount;
    }

    /**
     * Header keys are strings: copied (Spark reads them as UTF8String views of the copy), invalid
     * UTF-8 decoded with replacement, as kbatch.columns.decode does.
     */
    private void addHeaderKey(RecordColumns.Binary keys, ByteBuffer b, int pos, int len) {
        boolean ascii = true;
        for (int i = pos; i < pos + len && ascii; i++) {
            ascii = b.get(i) >= 0;
        }
        if (!ascii) {
            byte[] raw = new byte[len];
            b.get(pos, raw, 0, len);
            try {
                utf8.reset();
                utf8.decode(ByteBuffer.wrap(raw));
            } catch (CharacterCodingException e) {
                raw = Utf8.replaceInvalid(raw, 0, len);
            }
            keys.add(ByteBuffer.wrap(raw), 0, raw.length, false);
            return;
        }
        keys.add(b, pos, len, false);
    }

    // ------------------------------------------------------------------ the control record
    /**
     * The type of the control record of a control batch at b[p] (0 ABORT, 1 COMMIT, ...; -1 for a
     * type Kafka does not know), checked as kbatch.record.control.parse_control_record checks it (a key
     * of at least 4 bytes, version >= 0; a transaction marker's value of at least 6 bytes, version
     * >= 0), for read_committed's check of aborted transactions against the log.
     */
    public int controlType(ByteBuffer b, int p, long delta, BatchHeader h) {
        RecordColumns kv = new RecordColumns(true, true, false, false, false, false, false, false);
        decodeV2(b, p, delta, h, kv, Long.MIN_VALUE, Long.MAX_VALUE, true, false);
        int type = -1;
        for (int i = 0; i < kv.rows; i++) {
            byte[] key = kv.keys.get(i);
            if (key == null || key.length < 4) {
                throw KafkaSegmentsException.invalidRecord("Invalid control record key", h.position, ">= 4 bytes",
                        key == null ? null : key.length + " bytes", h.baseOffset);
            }
            int version = Wire.i16(key, 0);
            if (version < 0) {
                throw KafkaSegmentsException.invalidRecord("Invalid version found for control record", h.position,
                        ">= 0", version, h.baseOffset);
            }
            int t = Wire.i16(key, 2);
            t = t >= 0 && t <= 6 ? t : -1;
            if (t == Wire.CONTROL_ABORT || t == Wire.CONTROL_COMMIT) {
                byte[] value = kv.values.get(i);
                if (value == null || value.length < 6) {
                    throw KafkaSegmentsException.invalidRecord("Invalid end transaction marker value", h.position,
                            ">= 6 bytes", value == null ? null : value.length + " bytes", h.baseOffset);
                }
                int mversion = Wire.i16(value, 0);
                if (mversion < 0) {
                    throw KafkaSegmentsException.invalidRecord("Invalid version found for end transaction marker",
                            h.position, ">= 0", mversion, h.baseOffset);
                }
            }
            if (i == 0) {
                type = t;
            }
        }
        return type;
    }

    // ------------------------------------------------------------------ magic 0 and 1
    /** Decode one legacy entry framed at b[p] (LegacyRecordDecoder). */
    public void decodeLegacy(ByteBuffer b, int p, long delta, BatchHeader h, RecordColumns out, long lo, long hi,
                             boolean verifyCrc, boolean stable) {
        legacy.decode(b, p, delta, h, out, lo, hi, verifyCrc, stable);
    }

    /** A legacy message's row: its key and value at the given bytes of b. */
    void appendRow(RecordColumns out, ByteBuffer b, boolean stable, long offset, long ts, boolean hasTs, int tsType,
                   boolean tombstone, BatchHeader h, int keyPos, int keyLen, int valuePos, int valueLen) {
        this.keyPos = keyPos;
        this.keyLen = keyLen;
        this.valuePos = valuePos;
        this.valueLen = valueLen;
        appendRow(out, b, stable, offset, ts, hasTs, tsType, tombstone, h);
    }
}
