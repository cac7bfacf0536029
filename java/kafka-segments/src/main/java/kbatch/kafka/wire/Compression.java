package kbatch.kafka.wire;

import java.io.ByteArrayInputStream;
import java.io.IOException;
import java.util.Arrays;
import java.util.zip.CRC32;
import java.util.zip.DataFormatException;
import java.util.zip.Inflater;

import com.github.luben.zstd.ZstdInputStreamNoFinalizer;
import net.jpountz.lz4.LZ4Exception;
import net.jpountz.lz4.LZ4Factory;
import net.jpountz.lz4.LZ4SafeDecompressor;
import net.jpountz.xxhash.XXHash32;
import net.jpountz.xxhash.XXHashFactory;
import org.xerial.snappy.Snappy;

/**
 * Kafka's codecs, framed as Kafka frames them (kafka-format.md 1.6), read with the libraries Spark
 * ships (JDK zlib, snappy-java, lz4-java, zstd-jni), with kbatch.record.compression's rules: gzip members
 * back to back (trailing non-gzip bytes ignored), xerial or raw snappy, lz4 frames with independent
 * blocks (the header checksum skipped for magic 0, KAFKA-3160), zstd frames without content size,
 * one after another. Every decompressor stops at the limit (a compression bomb costs at most that).
 * One instance per thread: it owns its output buffer and inflater.
 */
final class Compression {
    static final byte[] XERIAL_MAGIC = {(byte) 0x82, 'S', 'N', 'A', 'P', 'P', 'Y', 0};
    static final int XERIAL_HEADER_SIZE = 16;

    private static final LZ4SafeDecompressor LZ4 = LZ4Factory.fastestInstance().safeDecompressor();
    private static final XXHash32 XXH32 = XXHashFactory.fastestInstance().hash32();

    private final Inflater inflater = new Inflater(true);
    private final CRC32 crc32 = new CRC32();
    private final byte[] scratch = new byte[1];
    final int maxBytes;
    /** The output of the last decompress call: out[0, length). */
    byte[] out = new byte[1 << 16];
    int length;

    Compression(int maxBytes) {
        this.maxBytes = maxBytes;
    }

    static String name(int codec) {
        return codec >= 0 && codec < Wire.CODEC_NAMES.length ? Wire.CODEC_NAMES[codec] : "unknown(" + codec + ")";
    }

    /** kbatch.record.compression.check_codec: ids 5-7 are unknown, zstd needs magic 2. */
    static void checkCodec(int codec, int magic, long position) {
        if (codec < 0 || codec > 4) {
            throw KafkaSegmentsException.unsupportedCodec("Unknown compression type id: " + codec, position,
                    "codec id 0-4", codec);
        }
        if (codec == Wire.ZSTD && magic < 2) {
            throw KafkaSegmentsException.unsupportedCodec("zstd compression is only supported by magic 2 batches",
                    position, "magic 2", "magic " + magic);
        }
    }

    /** Decompress src[off, off+len) into out[0, length); errors name `position`. */
    void decompress(int codec, byte[] src, int off, int len, int magic, long position) {
        checkCodec(codec, magic, position);
        length = 0;
        try {
            switch (codec) {
                case Wire.GZIP:
                    gunzip(src, off, len);
                    break;
                case Wire.SNAPPY:
                    unsnappy(src, off, len);
                    break;
                case Wire.LZ4:
                    unlz4(src, off, len, magic);
                    break;
                case Wire.ZSTD:
                    unzstd(src, off, len);
                    break;
                default:
                    ensure(len);
                    System.arraycopy(src, off, out, 0, len);
                    length = len;
            }
        } catch (KafkaSegmentsException e) {
            throw e.at(position, null);
        } catch (IOException | RuntimeException | DataFormatException e) {
            throw KafkaSegmentsException.corrupt("Invalid " + name(codec) + " compressed data", position,
                    "a valid " + name(codec) + " stream", String.valueOf(e.getMessage()), null);
        }
    }

    /** Room for `extra` more output bytes, or DecompressionLimitError past the limit. */
    private void ensure(long extra) {
        long need = (long) length + extra;
        if (need > maxBytes) {
            throw KafkaSegmentsException.decompressionLimit(maxBytes, null);
        }
        if (need > out.length) {
            out = Arrays.copyOf(out, (int) Math.max(need, Math.min((long) out.length * 2, maxBytes)));
        }
    }

    /** Double the output buffer (up to the limit); false when it already holds the limit. */
    private boolean grow() {
        if (out.length >= maxBytes) {
            return false;
        }
        out = Arrays.copyOf(out, (int) Math.min((long) out.length * 2, maxBytes));
        return true;
    }

    // ------------------------------------------------------------------ gzip (RFC 1952 members)
    private void gunzip(byte[] src, int off, int len) throws DataFormatException {
        int p = off;
        int end = off + len;
        while (p < end) {
            p = gunzipMember(src, p, end);
            if (p < end && (end - p < 2 || src[p] != 0x1f || src[p + 1] != (byte) 0x8b)) {
                break; // trailing non-gzip bytes are ignored, as GZIPInputStream does
            }
        }
    }

    private static KafkaSegmentsException badGzip(String what) {
        return KafkaSegmentsException.corrupt("Invalid gzip compressed data", null, "a valid gzip stream", what,
                null);
    }

    private int gunzipMember(byte[] src, int p, int end) throws DataFormatException {
        int start = p;
        if (end - p < 10) {
            throw KafkaSegmentsException.corrupt("Truncated gzip stream", null, "gzip trailer", "end of data", null);
        }
        if (src[p] != 0x1f || src[p + 1] != (byte) 0x8b) {
            throw badGzip("incorrect header check");
        }
        if (src[p + 2] != 8) {
            throw badGzip("unknown compression method");
        }
        int flags = src[p + 3] & 0xff;
        if ((flags & 0xe0) != 0) {
            throw badGzip("unknown header flags set");
        }
        p += 10;
        if ((flags & 0x04) != 0) { // FEXTRA
            if (end - p < 2) {
                throw truncatedGzip();
            }
            int xlen = (src[p] & 0xff) | ((src[p + 1] & 0xff) << 8);
            p += 2;
            if (end - p < xlen) {
                throw truncatedGzip();
            }
            p += xlen;
        }
        for (int bit : new int[] {0x08, 0x10}) { // FNAME, FCOMMENT: zero-terminated
            if ((flags & bit) != 0) {
                while (p < end && src[p] != 0) {
                    p++;
                }
                if (p >= end) {
                    throw truncatedGzip();
                }
                p++;
            }
        }
        if ((flags & 0x02) != 0) { // FHCRC: low 16 bits of the header's CRC-32
            if (end - p < 2) {
                throw truncatedGzip();
            }
            crc32.reset();
            crc32.update(src, start, p - start);
            int stored = (src[p] & 0xff) | ((src[p + 1] & 0xff) << 8);
            if (((int) crc32.getValue() & 0xffff) != stored) {
                throw badGzip("header crc mismatch");
            }
            p += 2;
        }
        inflater.reset();
        inflater.setInput(src, p, end - p);
        crc32.reset();
        int memberStart = length;
        while (!inflater.finished()) {
            if (length == out.length && !grow()) {
                if (inflater.inflate(scratch) > 0) { // one byte more than the limit
                    throw KafkaSegmentsException.decompressionLimit(maxBytes, null);
                }
            } else {
                length += inflater.inflate(out, length, out.length - length);
            }
            if (!inflater.finished()) {
                if (inflater.needsDictionary()) {
                    throw badGzip("need dictionary");
                }
                if (inflater.needsInput()) {
                    throw truncatedGzip();
                }
            }
        }
        crc32.update(out, memberStart, length - memberStart);
        int q = end - inflater.getRemaining();
        if (end - q < 8) {
            throw truncatedGzip();
        }
        if (Wire.le32(src, q) != (int) crc32.getValue()) {
            throw badGzip("incorrect data check");
        }
        if (Wire.le32(src, q + 4) != length - memberStart) {
            throw badGzip("incorrect length check");
        }
        return q + 8;
    }

    private static KafkaSegmentsException truncatedGzip() {
        return KafkaSegmentsException.corrupt("Truncated gzip stream", null, "gzip trailer", "end of data", null);
    }

    // ------------------------------------------------------------------ snappy (xerial or raw)
    /** The raw snappy length preamble (up to 5 varint bytes), as kbatch reads it. */
    private static long rawSnappyLength(byte[] src, int off, int len) {
        long n = 0;
        int shift = 0;
        for (int i = 0; i < Math.min(5, len); i++) {
            int b = src[off + i] & 0xff;
            n |= (long) (b & 0x7f) << shift;
            if ((b & 0x80) == 0) {
                return n;
            }
            shift += 7;
        }
        throw KafkaSegmentsException.corrupt("Invalid snappy block length preamble", null, null, null, null);
    }

    private void snappyBlock(byte[] src, int off, int len) throws IOException {
        long n = rawSnappyLength(src, off, len);
        if (length + n > maxBytes) {
            throw KafkaSegmentsException.decompressionLimit(maxBytes, null);
        }
        ensure(n);
        length += Snappy.uncompress(src, off, len, out, length);
    }

    private void unsnappy(byte[] src, int off, int len) throws IOException {
        boolean xerial = len >= XERIAL_MAGIC.length;
        for (int i = 0; xerial && i < XERIAL_MAGIC.length; i++) {
            xerial = src[off + i] == XERIAL_MAGIC[i];
        }
        if (!xerial) { // a raw block, as snappy-java's SnappyInputStream accepts
            snappyBlock(src, off, len);
            return;
        }
        if (len < XERIAL_HEADER_SIZE) {
            throw KafkaSegmentsException.corrupt("Truncated xerial snappy header", null, XERIAL_HEADER_SIZE + " bytes",
                    len + " bytes", null);
        }
        int p = off + XERIAL_HEADER_SIZE;
        int end = off + len;
        while (p < end) {
            if (end - p < 4) {
                throw KafkaSegmentsException.corrupt("Truncated xerial snappy chunk length", null, "4 bytes",
                        (end - p) + " bytes", null);
            }
            int n = Wire.i32(src, p);
            p += 4;
            if (n < 0 || n > end - p) {
                throw KafkaSegmentsException.corrupt("Invalid xerial snappy chunk length", null, "0.." + (end - p), n,
                        null);
            }
            snappyBlock(src, p, n);
            p += n;
        }
    }

    // ------------------------------------------------------------------ lz4 frame
    private static KafkaSegmentsException badLz4(String what) {
        return KafkaSegmentsException.corrupt("Invalid lz4 compressed data", null, "a valid lz4 stream", what, null);
    }

    private static KafkaSegmentsException truncatedLz4() {
        return KafkaSegmentsException.corrupt("Truncated lz4 frame", null, "lz4 end of frame", "end of data", null);
    }

    private void unlz4(byte[] src, int off, int len, int magic) {
        int end = off + len;
        if (len < 7 || Wire.le32(src, off) != 0x184D2204) {
            StringBuilder hex = new StringBuilder();
            for (int i = 0; i < Math.min(4, len); i++) {
                hex.append(i > 0 ? " " : "").append(String.format("%02x", src[off + i] & 0xff));
            }
            throw KafkaSegmentsException.corrupt("Invalid lz4 frame", null, "magic 04 22 4D 18", hex.toString(), null);
        }
        int flg = src[off + 4] & 0xff;
        if ((flg & 0x20) == 0) {
            throw KafkaSegmentsException.corrupt("Dependent block stream is unsupported", null,
                    "independent lz4 blocks", String.format("FLG 0x%02x", flg), null);
        }
        if ((flg >> 6) != 1 || (flg & 0x02) != 0) {
            throw badLz4("unsupported frame version or reserved FLG bits");
        }
        int bd = src[off + 5] & 0xff;
        int bsid = (bd >> 4) & 0x07;
        if ((bd & 0x8f) != 0 || bsid < 4) {
            throw badLz4("invalid block size descriptor");
        }
        int blockMax = 1 << (2 * bsid + 8);
        boolean blockChecksum = (flg & 0x10) != 0;
        boolean contentSize = (flg & 0x08) != 0;
        boolean contentChecksum = (flg & 0x04) != 0;
        int hcAt = off + 6 + (contentSize ? 8 : 0) + ((flg & 0x01) != 0 ? 4 : 0);
        if (hcAt >= end) {
            throw truncatedLz4();
        }
        // magic 0: Kafka wrote a wrong header checksum and skips it on read (KAFKA-3160)
        if (magic != 0 && ((XXH32.hash(src, off + 4, hcAt - off - 4, 0) >> 8) & 0xff) != (src[hcAt] & 0xff)) {
            throw badLz4("header checksum mismatch");
        }
        int p = hcAt + 1;
        while (true) {
            if (end - p < 4) {
                throw truncatedLz4();
            }
            int size = Wire.le32(src, p);
            p += 4;
            if (size == 0) {
                break; // EndMark; bytes after the first frame are ignored, as Kafka does
            }
            boolean stored = (size & 0x80000000) != 0;
            size &= 0x7fffffff;
            if (size > blockMax) {
                throw badLz4("block larger than the frame's maximum block size");
            }
            if (end - p < size + (blockChecksum ? 4 : 0)) {
                throw truncatedLz4();
            }
            if (blockChecksum && XXH32.hash(src, p, size, 0) != Wire.le32(src, p + size)) {
                throw badLz4("block checksum mismatch");
            }
            if (stored) {
                ensure(size);
                System.arraycopy(src, p, out, length, size);
                length += size;
            } else {
                int room = (int) Math.min(blockMax, (long) maxBytes - length);
                ensure(room);
                int n;
                try {
                    n = LZ4.decompress(src, p, size, out, length, room);
                } catch (LZ4Exception e) {
                    if (room < blockMax && length + room >= maxBytes) {
                        throw KafkaSegmentsException.decompressionLimit(maxBytes, null);
                    }
                    throw badLz4(String.valueOf(e.getMessage()));
                }
                length += n;
            }
            p += size + (blockChecksum ? 4 : 0);
        }
        if (contentChecksum) {
            if (end - p < 4) {
                throw truncatedLz4();
            }
            if (XXH32.hash(out, 0, length, 0) != Wire.le32(src, p)) {
                throw badLz4("content checksum mismatch");
            }
        }
        if (contentSize && Wire.le32(src, off + 6) != length || contentSize && Wire.le32(src, off + 10) != 0) {
            throw badLz4("frame size does not match the decompressed size");
        }
    }

    // ------------------------------------------------------------------ zstd frames
    private void unzstd(byte[] src, int off, int len) throws IOException {
        // streaming, frame after frame: Kafka's frames carry no content size (kafka-format.md 8)
        try (ZstdInputStreamNoFinalizer in = new ZstdInputStreamNoFinalizer(new ByteArrayInputStream(src, off, len))) {
            while (true) {
                if (length == out.length && !grow()) {
                    if (in.read() < 0) {
                        return;
                    }
                    throw KafkaSegmentsException.decompressionLimit(maxBytes, null);
                }
                int n = in.read(out, length, out.length - length);
                if (n < 0) {
                    return;
                }
                length += n;
            }
        }
    }
}
