package kbatch.spark;

import java.io.IOException;
import java.util.Arrays;
import java.util.LinkedHashMap;
import java.util.Map;

import kbatch.kafka.storage.RangeSummary;
import kbatch.kafka.storage.SegmentReader;

/**
 * The driver's memory of verified segment summaries ({@link RangeSummary}, CRC of every batch
 * checked, no damage met), so a repeated aggregate over unchanged segments reads nothing but the
 * directory listing (one stat per file, which the planner makes anyway). Keyed by the file's path,
 * length and modification time and by what the summary depends on (byte range, offset range,
 * next segment's base offset, the aborted transactions). A sealed segment (not the partition's
 * last) is never rewritten in place by Kafka (the cleaner and retention replace or delete files),
 * so the key is enough. The last (active) segment changes by appends, which change its length;
 * because a truncation followed by appends back to the same length within one modification-time
 * tick would keep the key, its last {@link #TAIL} bytes are remembered too and read again (one
 * small positioned read) before the summary is used. At most {@link #CAPACITY} entries, least
 * recently used dropped first; {@link #forget} drops all (a cold run).
 */
public final class SegmentSummaries {
    static final int CAPACITY = 100_000;
    static final int TAIL = 64;

    private static final class Entry {
        final RangeSummary summary;
        final byte[] tail; // the last segment's last bytes; null for a sealed one

        Entry(RangeSummary summary, byte[] tail) {
            this.summary = summary;
            this.tail = tail;
        }
    }

    private static final Map<String, Entry> MEMORY = new LinkedHashMap<String, Entry>(1024, 0.75f, true) {
        private static final long serialVersionUID = 1L;

        @Override
        protected boolean removeEldestEntry(Map.Entry<String, Entry> eldest) {
            return size() > CAPACITY;
        }
    };

    private SegmentSummaries() {}

    /** Drop every remembered summary (the next aggregate walks its segments again). */
    public static synchronized void forget() {
        MEMORY.clear();
    }

    /** How many summaries are remembered. */
    public static synchronized int size() {
        return MEMORY.size();
    }

    /** The remembered summary of `key`, its tail (the last segment's) checked against `src`; null if none. */
    static RangeSummary get(String key, SegmentReader.Source src, long fileSize) throws IOException {
        Entry e;
        synchronized (SegmentSummaries.class) {
            e = MEMORY.get(key);
        }
        if (e == null) {
            return null;
        }
        if (e.tail != null && !Arrays.equals(e.tail, tail(src, fileSize))) {
            synchronized (SegmentSummaries.class) {
                MEMORY.remove(key);
            }
            return null;
        }
        return e.summary;
    }

    /** The key a summary is remembered under: a trusted one (no CRC checked) apart from a verified one. */
    static String key(String verifiedKey, boolean trusted) {
        return trusted ? verifiedKey + "|trusted" : verifiedKey;
    }

    /**
     * The remembered summary for a query of this range: the verified one, and for a query that
     * trusts headers also a trusted one (a verified summary is only remembered when every CRC
     * held, so trusting its headers gives the same figures); a trusted summary never answers a
     * query that checks CRCs. Sealed segments only (no file is opened).
     */
    static RangeSummary sealed(String verifiedKey, boolean trusted) {
        RangeSummary s = sealed(verifiedKey);
        return s != null || !trusted ? s : sealed(key(verifiedKey, true));
    }

    /** As {@link #sealed(String, boolean)} for the last segment, its tail checked against `src`. */
    static RangeSummary get(String verifiedKey, boolean trusted, SegmentReader.Source src, long fileSize)
            throws IOException {
        RangeSummary s = get(verifiedKey, src, fileSize);
        return s != null || !trusted ? s : get(key(verifiedKey, true), src, fileSize);
    }

    /** The remembered summary of a sealed segment's `key` (no check: no file is opened), else null. */
    static synchronized RangeSummary sealed(String key) {
        Entry e = MEMORY.get(key);
        return e != null && e.tail == null ? e.summary : null;
    }

    static void put(String key, RangeSummary s, boolean last, SegmentReader.Source src, long fileSize)
            throws IOException {
        if (s.error != null) {
            return; // damage is reported by a read, never remembered
        }
        Entry e = new Entry(s, last ? tail(src, fileSize) : null);
        synchronized (SegmentSummaries.class) {
            MEMORY.put(key, e);
        }
    }

    static byte[] tail(SegmentReader.Source src, long fileSize) throws IOException {
        byte[] b = new byte[(int) Math.min(TAIL, fileSize)];
        src.readFully(fileSize - b.length, b, 0, b.length);
        return b;
    }
}
