package kbatch.spark;

import org.apache.spark.sql.connector.read.InputPartition;

/** One input partition of several {@link SegmentSlice}s, read one after the other (see {@link InputPlan}). */
final class SegmentPack implements InputPartition {
    private static final long serialVersionUID = 1L;

    final SegmentSlice[] slices;

    SegmentPack(SegmentSlice[] slices) {
        this.slices = slices;
    }

    @Override
    public String toString() {
        return "SegmentPack" + java.util.Arrays.toString(slices);
    }
}
