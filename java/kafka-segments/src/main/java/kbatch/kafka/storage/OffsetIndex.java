package kbatch.kafka.storage;

import java.io.IOException;

import org.apache.hadoop.fs.FileSystem;

import kbatch.kafka.wire.Wire;

/**
 * A segment's `.index` (offset -> position) or `.timeindex` (timestamp -> offset) entries as
 * absolute values (kafka-format.md 5.1-5.3). Two readings of a preallocated file's zero tail:
 * {@link #forPlanning} cuts as kbatch.log.segment_plan does (splitting and offset ranges), and
 * {@link #forLookup} as kbatch.log.index does for time lookups (sanity-checked; an index that fails
 * its checks, or is missing, is treated as empty: the lookup then scans from the segment start,
 * which gives the answer a rebuilt index would).
 */
public final class OffsetIndex {
    /** keys: absolute offsets (.index) or timestamps (.timeindex); values: positions or absolute offsets. */
    public final long[] keys;
    public final long[] values;
    /** False when the file was missing or failed the sanity checks. */
    public final boolean usable;

    private OffsetIndex(long[] keys, long[] values, boolean usable) {
        this.keys = keys;
        this.values = values;
        this.usable = usable;
    }

    static final OffsetIndex EMPTY = new OffsetIndex(new long[0], new long[0], false);

    public int size() {
        return keys.length;
    }

    private static OffsetIndex parse(byte[] raw, long base, boolean time, int n) {
        long[] k = new long[n];
        long[] v = new long[n];
        int es = time ? Wire.TIME_INDEX_ENTRY_SIZE : Wire.OFFSET_INDEX_ENTRY_SIZE;
        for (int i = 0; i < n; i++) {
            int p = i * es;
            if (time) {
                k[i] = Wire.i64(raw, p);
                v[i] = base + Wire.i32(raw, p + 8);
            } else {
                k[i] = base + Wire.i32(raw, p);
                v[i] = Wire.i32(raw, p + 4);
            }
        }
        return new OffsetIndex(k, v, true);
    }

    private static int rel(byte[] raw, boolean time, int i) {
        return time ? Wire.i32(raw, i * Wire.TIME_INDEX_ENTRY_SIZE + 8) : Wire.i32(raw, i * Wire.OFFSET_INDEX_ENTRY_SIZE);
    }

    /** _plan._read_index: entries up to the first relative offset 0 after the first slot. */
    public static OffsetIndex forPlanning(FileSystem fs, LogDirectory.Segment seg, boolean time) throws IOException {
        byte[] raw = seg.readIndex(fs, time ? ".timeindex" : ".index");
        if (raw == null) {
            return EMPTY;
        }
        int es = time ? Wire.TIME_INDEX_ENTRY_SIZE : Wire.OFFSET_INDEX_ENTRY_SIZE;
        int n = raw.length / es;
        for (int i = 1; i < n; i++) {
            if (rel(raw, time, i) == 0) {
                n = i;
                break;
            }
        }
        return parse(raw, seg.baseOffset, time, n);
    }

    /**
     * kbatch.log.index: a file whose first two slots are zeros is empty; entries end at the first slot
     * (from slot 0 for .index, slot 1 for .timeindex) naming the base offset; then Kafka's sanity
     * checks (size a multiple of the entry size, last offset >= base, keys increasing, last
     * timestamp >= first).
     */
    public static OffsetIndex forLookup(FileSystem fs, LogDirectory.Segment seg, boolean time) throws IOException {
        byte[] raw = seg.readIndex(fs, time ? ".timeindex" : ".index");
        if (raw == null) {
            return EMPTY;
        }
        int es = time ? Wire.TIME_INDEX_ENTRY_SIZE : Wire.OFFSET_INDEX_ENTRY_SIZE;
        if (raw.length % es != 0) {
            return EMPTY;
        }
        int n = raw.length / es;
        boolean zeros = n >= 2;
        for (int i = 0; zeros && i < 2 * es; i++) {
            zeros = raw[i] == 0;
        }
        if (zeros) {
            return new OffsetIndex(new long[0], new long[0], true);
        }
        for (int i = time ? 1 : 0; i < n; i++) {
            if (rel(raw, time, i) == 0) {
                n = i;
                break;
            }
        }
        OffsetIndex idx = parse(raw, seg.baseOffset, time, n);
        if (n > 0 && rel(raw, time, n - 1) < 0) {
            return EMPTY;
        }
        for (int i = 1; i < n; i++) {
            if (idx.keys[i] <= idx.keys[i - 1]) {
                return EMPTY;
            }
        }
        return idx;
    }

    /** Slot of the largest key <= target, or -1. */
    public int floor(long target) {
        int lo = 0;
        int hi = keys.length - 1;
        int ans = -1;
        while (lo <= hi) {
            int mid = (lo + hi) >>> 1;
            if (keys[mid] <= target) {
                ans = mid;
                lo = mid + 1;
            } else {
                hi = mid - 1;
            }
        }
        return ans;
    }

    /** Slot of the first key >= target (keys.length if none): numpy searchsorted(side="left"). */
    public int ceiling(long target) {
        int lo = 0;
        int hi = keys.length;
        while (lo < hi) {
            int mid = (lo + hi) >>> 1;
            if (keys[mid] < target) {
                lo = mid + 1;
            } else {
                hi = mid;
            }
        }
        return lo;
    }
}
