package kbatch.kafka.wire;

import java.io.ByteArrayOutputStream;

/**
 * UTF-8 with invalid sequences replaced by U+FFFD, one per maximal subpart (Unicode's recommended
 * practice, which Python's bytes.decode("utf-8", "replace") follows): header keys are strings in
 * both readers and must come out the same for the same bytes.
 */
final class Utf8 {
    private Utf8() {}

    private static final byte[] REPLACEMENT = {(byte) 0xEF, (byte) 0xBF, (byte) 0xBD};

    static byte[] replaceInvalid(byte[] b, int off, int len) {
        ByteArrayOutputStream out = new ByteArrayOutputStream(len + 8);
        int i = off;
        int end = off + len;
        while (i < end) {
            int c = b[i] & 0xff;
            int need;
            int lo = 0x80;
            int hi = 0xBF;
            if (c < 0x80) {
                out.write(c);
                i++;
                continue;
            } else if (c >= 0xC2 && c <= 0xDF) {
                need = 1;
            } else if (c >= 0xE0 && c <= 0xEF) {
                need = 2;
                if (c == 0xE0) {
                    lo = 0xA0;
                } else if (c == 0xED) {
                    hi = 0x9F;
                }
            } else if (c >= 0xF0 && c <= 0xF4) {
                need = 3;
                if (c == 0xF0) {
                    lo = 0x90;
                } else if (c == 0xF4) {
                    hi = 0x8F;
                }
            } else {
                out.write(REPLACEMENT, 0, 3);
                i++;
                continue;
            }
            // the longest valid prefix of the sequence; the second byte has its own range
            int j = 1;
            while (j <= need && i + j < end) {
                int x = b[i + j] & 0xff;
                boolean ok = j == 1 ? (x >= lo && x <= hi) : (x >= 0x80 && x <= 0xBF);
                if (!ok) {
                    break;
                }
                j++;
            }
            if (j == need + 1) {
                out.write(b, i, j);
            } else {
                out.write(REPLACEMENT, 0, 3);
            }
            i += j;
        }
        return out.toByteArray();
    }
}
