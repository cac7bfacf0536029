package kbatch.kafka.wire;

import java.nio.ByteBuffer;
import java.util.zip.CRC32;

/**
 * Magic 0 and 1 entries (Kafka's LegacyRecord and AbstractLegacyRecordBatch) into
 * {@link RecordColumns}: the Java twin of kbatch.record.legacy, a wrapper message's compressed
 * inner messages included, with its checks, error classes and byte positions. Part of
 * {@link RecordBatchDecoder}, whose codecs and row appending it shares.
 */
final class LegacyRecordDecoder {
    private final RecordBatchDecoder d;
    private final CRC32 crc32 = new CRC32();
    /** Where the last length-prefixed field ended. */
    private int next;

    LegacyRecordDecoder(RecordBatchDecoder d) {
        this.d = d;
    }

    /** A legacy message at b[m, mend): its fields (kbatch.record.legacy.parse_message). */
    private int lmMagic, lmAttributes;
    private long lmCrc, lmTimestamp;
    private int lmKeyPos, lmKeyLen, lmValuePos, lmValueLen;

    private void parseMessage(ByteBuffer b, int m, int mend, long delta, Long base) {
        lmCrc = b.getInt(m) & 0xffffffffL;
        lmMagic = b.get(m + Wire.LEGACY_MAGIC_OFFSET);
        lmAttributes = b.get(m + Wire.LEGACY_ATTRIBUTES_OFFSET) & 0xff;
        if (lmMagic != 0 && lmMagic != 1) {
            throw KafkaSegmentsException.corrupt("Invalid magic found in record", m + Wire.LEGACY_MAGIC_OFFSET + delta,
                    "magic 0 or 1", lmMagic, base);
        }
        int overhead = lmMagic == 1 ? Wire.RECORD_OVERHEAD_V1 : Wire.RECORD_OVERHEAD_V0;
        if (mend - m < overhead) {
            throw KafkaSegmentsException.corrupt("Legacy message is smaller than its overhead", m + delta,
                    ">= " + overhead + " bytes", mend - m, base);
        }
        int p;
        if (lmMagic == 1) {
            lmTimestamp = b.getLong(m + Wire.LEGACY_TIMESTAMP_OFFSET);
            p = m + Wire.LEGACY_KEY_SIZE_OFFSET_V1;
        } else {
            lmTimestamp = Wire.NO_TIMESTAMP;
            p = m + Wire.LEGACY_KEY_SIZE_OFFSET_V0;
        }
        lmKeyLen = legacySized(b, p, mend, delta, base);
        lmKeyPos = next - Math.max(lmKeyLen, 0);
        lmValueLen = legacySized(b, next, mend, delta, base);
        lmValuePos = next - Math.max(lmValueLen, 0);
        if (next != mend) {
            throw KafkaSegmentsException.corrupt("Legacy message size does not match its fields", next + delta,
                    "message end at byte " + (mend + delta), "byte " + (next + delta), base);
        }
    }

    private int legacySized(ByteBuffer b, int p, int mend, long delta, Long base) {
        if (mend - p < 4) {
            throw KafkaSegmentsException.corrupt("Truncated legacy message", p + delta, "4-byte length",
                    (mend - p) + " bytes", base);
        }
        int n = b.getInt(p);
        p += 4;
        if (n < 0) {
            next = p;
            return -1;
        }
        if (n > mend - p) {
            throw KafkaSegmentsException.corrupt("Legacy message field runs past the message", p - 4 + delta,
                    "<= " + (mend - p) + " bytes", n, base);
        }
        next = p + n;
        return n;
    }

    /** Decode one legacy entry framed at b[p] (kbatch.record.legacy.LegacyRecordBatch._decode). */
    void decode(ByteBuffer b, int p, long delta, BatchHeader h, RecordColumns out, long lo, long hi,
                      boolean verifyCrc, boolean stable) {
        int m = p + Wire.LOG_OVERHEAD;
        int mend = p + h.size;
        parseMessage(b, m, mend, delta, h.baseOffset);
        int magic = lmMagic;
        int attrs = lmAttributes;
        long ts = lmTimestamp;
        int tsType = h.magic == 0 ? -1 : ((h.attributes & Wire.LEGACY_TIMESTAMP_TYPE_MASK) != 0 ? 1 : 0);
        int codec = h.attributes & Wire.COMPRESSION_CODEC_MASK;
        Compression.checkCodec(codec, h.magic, h.position + Wire.LOG_OVERHEAD + Wire.LEGACY_ATTRIBUTES_OFFSET);
        if (codec == Wire.NONE) {
            if (h.baseOffset >= lo && h.baseOffset < hi) {
                out.reserve(1);
                d.appendRow(out, b, stable, h.baseOffset, ts, ts != Wire.NO_TIMESTAMP, tsType, lmValueLen < 0, h,
                        lmKeyPos, lmKeyLen, lmValuePos, lmValueLen);
            }
            return;
        }
        if (lmValueLen < 0) {
            throw KafkaSegmentsException.invalidRecord("Found invalid compressed record set with null value",
                    m + delta, "a compressed value", "null", h.baseOffset);
        }
        byte[] src = d.packedCopy(b, lmValuePos, lmValueLen);
        try {
            d.codecs.decompress(codec, src, d.packedOffset, lmValueLen, magic, m + delta);
        } catch (KafkaSegmentsException e) {
            throw e.at(null, h.baseOffset);
        }
        ByteBuffer inner = d.decompressed();
        int n = d.codecs.length;
        int count;
        try {
            count = innerEntries(inner, n, verifyCrc);
        } catch (KafkaSegmentsException e) {
            throw e.relocate(h.position, h.baseOffset, "the decompressed records");
        }
        long base = 0;
        if (magic > 0) {
            // magic 1: inner offsets are relative; the wrapper carries the absolute last offset
            long lastInner = innerOffsets[count - 1];
            if (h.baseOffset != 0) { // 0: produce data from some librdkafka versions (Kafka's comment)
                if (h.baseOffset < lastInner) {
                    throw KafkaSegmentsException.invalidRecord(
                            "Found invalid wrapper offset in compressed v1 message set", h.position,
                            ">= " + lastInner, h.baseOffset, h.baseOffset);
                }
                base = h.baseOffset - lastInner;
            }
        }
        boolean lat = magic > 0 && (attrs & Wire.LEGACY_TIMESTAMP_TYPE_MASK) != 0;
        out.reserve(count);
        for (int i = 0; i < count; i++) {
            long offset = base + innerOffsets[i];
            if (offset < lo || offset >= hi) {
                continue;
            }
            int q = innerPositions[i];
            parseMessage(inner, q + Wire.LOG_OVERHEAD, q + Wire.LOG_OVERHEAD + inner.getInt(q + Wire.SIZE_OFFSET), 0,
                    null);
            long t = lat ? ts : lmTimestamp;
            if (lmMagic == 0) {
                t = Wire.NO_TIMESTAMP;
            }
            d.appendRow(out, inner, false, offset, t, t != Wire.NO_TIMESTAMP, tsType, lmValueLen < 0, h, lmKeyPos,
                    lmKeyLen, lmValuePos, lmValueLen);
        }
    }

    private long[] innerOffsets = new long[64];
    private int[] innerPositions = new int[64];

    /** The inner messages of a decompressed wrapper value; positions are inner positions. */
    private int innerEntries(ByteBuffer inner, int n, boolean verifyCrc) {
        int count = 0;
        int q = 0;
        while (n - q >= Wire.LOG_OVERHEAD) { // a partial trailing inner entry is ignored, as Kafka does
            long ioff = inner.getLong(q);
            int isize = inner.getInt(q + Wire.SIZE_OFFSET);
            if (isize < Wire.RECORD_OVERHEAD_V0) {
                throw KafkaSegmentsException.corrupt("Inner message size is smaller than the minimum overhead",
                        (long) q, ">= " + Wire.RECORD_OVERHEAD_V0, isize, null);
            }
            if (isize > n - q - Wire.LOG_OVERHEAD) {
                break;
            }
            int ms = q + Wire.LOG_OVERHEAD;
            int me = ms + isize;
            parseMessage(inner, ms, me, 0, null);
            if ((lmAttributes & Wire.COMPRESSION_CODEC_MASK) != 0) {
                throw KafkaSegmentsException.invalidRecord("Inner messages must not be compressed",
                        ms + Wire.LEGACY_ATTRIBUTES_OFFSET, "codec none", lmAttributes & Wire.COMPRESSION_CODEC_MASK,
                        null);
            }
            if (verifyCrc) {
                crc32.reset();
                crc32.update(d.slice(inner, ms + Wire.LEGACY_MAGIC_OFFSET, me));
                if (crc32.getValue() != lmCrc) {
                    throw KafkaSegmentsException.crc("Inner record is corrupt", lmCrc, crc32.getValue(), (long) q, null);
                }
            }
            if (count == innerOffsets.length) {
                innerOffsets = java.util.Arrays.copyOf(innerOffsets, count * 2);
                innerPositions = java.util.Arrays.copyOf(innerPositions, count * 2);
            }
            innerOffsets[count] = ioff;
            innerPositions[count] = q;
            count++;
            q = me;
        }
        if (count == 0) {
            throw new KafkaSegmentsException("InvalidRecordError",
                    "Found invalid compressed record set with no inner records", null, null,
                    "at least one inner message", "none");
        }
        return count;
    }
}
