package kbatch.spark;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertSame;

import java.io.IOException;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;

import org.apache.spark.sql.connector.read.InputPartition;
import org.junit.jupiter.api.Test;

import kbatch.kafka.storage.RangeSummary;
import kbatch.kafka.storage.SegmentReader;

/**
 * Input partitions in whole waves of the cores where maxPartitionBytes caps the split, even ones
 * (runs of the planned order cut at equal shares), Spark's per-core share without a spill partition; and a
 * remembered summary of a last segment is dropped when its tail changed.
 */
class InputPlanTest {
    static final long MB = 1 << 20;

    static List<SegmentSlice> slices(long... sizes) {
        List<SegmentSlice> out = new ArrayList<>();
        for (int i = 0; i < sizes.length; i++) {
            out.add(new SegmentSlice("t", i, "/p/" + i, 0, sizes[i], sizes[i], null, null, null, null));
        }
        return out;
    }

    static long[] weights(InputPartition[] parts) {
        long[] w = new long[parts.length];
        for (int i = 0; i < parts.length; i++) {
            SegmentSlice[] s = parts[i] instanceof SegmentPack ? ((SegmentPack) parts[i]).slices
                    : new SegmentSlice[] {(SegmentSlice) parts[i]};
            for (SegmentSlice x : s) {
                w[i] += x.end - x.start;
            }
        }
        Arrays.sort(w);
        return w;
    }

    @Test
    void aCappedSplitFillsWholeWavesEvenly() {
        // users' key-only scan: 8 partitions of a 268 MB segment and a 46 MB active one (the
        // planned order: a partition's segments in offset order), at a tenth, 4 MiB open cost,
        // 2 cores, 128 MiB cap
        InputPlan rule = new InputPlan(128 * MB, 4 * MB, 2, 2);
        long[] sizes = new long[16];
        for (int p = 0; p < 8; p++) {
            sizes[2 * p] = 268 * MB;
            sizes[2 * p + 1] = 46 * MB;
        }
        List<SegmentSlice> s = slices(sizes);
        long max = rule.maxSplit(s, 0.1);
        InputPartition[] parts = rule.pack(s, 0.1, max);
        assertEquals(4, parts.length); // Spark's next-fit rule gives 3 here: two full, one of the small ones alone
        long[] w = weights(parts);
        assertEquals(w[0], w[3]);
    }

    @Test
    void partitionsAreRunsOfThePlannedOrder() {
        // uneven slices: every input partition holds consecutive slices, and the partitions come
        // in the planned order, so one topic-partition's tasks read it in offset order
        InputPlan rule = new InputPlan(64 * MB, 4 * MB, 2, 2);
        List<SegmentSlice> s = slices(300 * MB, 10 * MB, 120 * MB, 5 * MB, 250 * MB, 80 * MB, 1 * MB, 200 * MB, 60 * MB);
        InputPartition[] parts = rule.pack(s, 1.0, rule.maxSplit(s, 1.0));
        int next = 0;
        for (InputPartition part : parts) {
            SegmentSlice[] in = part instanceof SegmentPack ? ((SegmentPack) part).slices
                    : new SegmentSlice[] {(SegmentSlice) part};
            for (SegmentSlice x : in) {
                assertSame(s.get(next++), x);
            }
        }
        assertEquals(s.size(), next);
    }

    @Test
    void theUncappedShareGivesAsManyPartitionsAsCores() {
        InputPlan rule = new InputPlan(128 * MB, 4 * MB, 2, 2);
        List<SegmentSlice> s = slices(350 * MB, 350 * MB, 351 * MB, 349 * MB, 350 * MB, 350 * MB, 350 * MB, 350 * MB);
        InputPartition[] parts = rule.pack(s, 0.06, rule.maxSplit(s, 0.06));
        assertEquals(2, parts.length);
    }

    @Test
    void aLastSegmentsSummaryIsDroppedWhenItsTailChanged() throws IOException {
        byte[] file = new byte[1000];
        SegmentReader.Source src = source(file);
        RangeSummary s = RangeSummary.walk(src, 0, 0, 0, null, Long.MIN_VALUE, Long.MAX_VALUE, null);
        SegmentSummaries.put("k", s, true, src, file.length);
        assertSame(s, SegmentSummaries.get("k", src, file.length));
        assertNull(SegmentSummaries.sealed("k")); // a last segment's summary is never used unchecked
        file[999] = 1;
        assertNull(SegmentSummaries.get("k", src, file.length));
        assertNull(SegmentSummaries.get("k", src, file.length)); // and forgotten
    }

    @Test
    void aVerifiedSummaryAnswersATrustedQueryNeverTheOtherWay() throws IOException {
        SegmentSummaries.forget();
        byte[] file = new byte[1000];
        SegmentReader.Source src = source(file);
        RangeSummary verified = RangeSummary.walk(src, 0, 0, 0, 5L, Long.MIN_VALUE, Long.MAX_VALUE, null);
        SegmentSummaries.put(SegmentSummaries.key("v", false), verified, false, src, file.length);
        assertSame(verified, SegmentSummaries.sealed("v", true));
        assertSame(verified, SegmentSummaries.sealed("v", false));
        RangeSummary trusted = RangeSummary.walk(src, 0, 0, 0, 5L, Long.MIN_VALUE, Long.MAX_VALUE, null, true);
        SegmentSummaries.put(SegmentSummaries.key("t", true), trusted, false, src, file.length);
        assertSame(trusted, SegmentSummaries.sealed("t", true));
        assertNull(SegmentSummaries.sealed("t", false)); // a query that checks CRCs walks again
        SegmentSummaries.put(SegmentSummaries.key("last", false), verified, true, src, file.length);
        assertSame(verified, SegmentSummaries.get("last", true, src, file.length));
        SegmentSummaries.put(SegmentSummaries.key("lastT", true), trusted, true, src, file.length);
        assertNull(SegmentSummaries.get("lastT", false, src, file.length));
        assertSame(trusted, SegmentSummaries.get("lastT", true, src, file.length));
        SegmentSummaries.forget();
    }

    static SegmentReader.Source source(byte[] bytes) {
        return new SegmentReader.Source() {
            @Override
            public void readFully(long position, byte[] b, int off, int len) {
                System.arraycopy(bytes, (int) position, b, off, len);
            }

            @Override
            public void close() {}
        };
    }
}
