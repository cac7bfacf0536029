package kbatch.spark;

import java.util.ArrayList;
import java.util.Comparator;
import java.util.List;

import org.apache.spark.SparkContext;
import org.apache.spark.sql.connector.read.InputPartition;
import org.apache.spark.sql.internal.SQLConf;

/**
 * How many input partitions a batch read gets when the read sets no `maxPartitionBytes`: the rule
 * Spark's file sources follow (FilePartition in Spark's docs: `spark.sql.files.maxPartitionBytes`,
 * `spark.sql.files.openCostInBytes`, `spark.sql.files.minPartitionNum`), counted in the bytes the
 * query works on rather than the file's bytes: a key-only or count-only scan walks the framing of
 * every record but not the values, so its slices weigh a tenth of a value scan's (at 200-byte
 * values). The largest split is the smaller of maxPartitionBytes and the weighed bytes per core
 * (at least the open cost); a slice larger than it is cut at `.index` entries, smaller ones are
 * packed together, largest first, each counted with the open cost, into input partitions of at
 * most that size. So a count or a groupBy(key) over eight 290 MB segments runs as a few tasks, as
 * Parquet's over the same rows does, and many small segments are not one task each.
 */
final class InputPlan {
    final long maxPartitionBytes;
    final long openCost;
    final int minPartitions;

    InputPlan(long maxPartitionBytes, long openCost, int minPartitions) {
        this.maxPartitionBytes = Math.max(1, maxPartitionBytes);
        this.openCost = Math.max(0, openCost);
        this.minPartitions = Math.max(1, minPartitions);
    }

    /** The session's settings (the leaf-node parallelism when spark.sql.files.minPartitionNum is unset). */
    static InputPlan fromSession() {
        SQLConf conf = SQLConf.get();
        int min;
        if (conf.filesMinPartitionNum().isDefined()) {
            min = ((Number) conf.filesMinPartitionNum().get()).intValue();
        } else {
            String leaf = "spark.sql.leafNodeDefaultParallelism";
            min = conf.contains(leaf) ? Integer.parseInt(conf.getConfString(leaf).trim())
                    : SparkContext.getOrCreate().defaultParallelism();
        }
        return new InputPlan(conf.filesMaxPartitionBytes(), conf.filesOpenCostInBytes(), min);
    }

    /** Weighed bytes of a slice: its file bytes times the share the query reads. */
    static long weight(SegmentSlice s, double fraction) {
        return (long) Math.ceil((s.end - s.start) * fraction);
    }

    /** The largest input partition, in weighed bytes, for slices of these weights. */
    long maxSplit(List<SegmentSlice> whole, double fraction) {
        long total = 0;
        for (SegmentSlice s : whole) {
            total += weight(s, fraction) + openCost;
        }
        return Math.min(maxPartitionBytes, Math.max(openCost, total / minPartitions));
    }

    /** File bytes at which a slice is cut (at `.index` entries) so its pieces weigh at most maxSplit. */
    static long fileBytes(long maxSplit, double fraction) {
        double b = maxSplit / fraction;
        return b >= Long.MAX_VALUE ? Long.MAX_VALUE : Math.max(1, (long) b);
    }

    /** Slices packed, largest first, into input partitions of at most maxSplit weighed bytes each. */
    InputPartition[] pack(List<SegmentSlice> slices, double fraction, long maxSplit) {
        List<SegmentSlice> sorted = new ArrayList<>(slices);
        sorted.sort(Comparator.comparingLong((SegmentSlice s) -> s.end - s.start).reversed());
        List<InputPartition> out = new ArrayList<>();
        List<SegmentSlice> current = new ArrayList<>();
        long size = 0;
        for (SegmentSlice s : sorted) {
            long w = weight(s, fraction);
            if (!current.isEmpty() && size + w > maxSplit) {
                out.add(close(current, slices));
                current = new ArrayList<>();
                size = 0;
            }
            current.add(s);
            size += w + openCost;
        }
        if (!current.isEmpty()) {
            out.add(close(current, slices));
        }
        return out.toArray(new InputPartition[0]);
    }

    /** One input partition; a pack reads its slices in the planned order (the log's), so errors come in it. */
    private static InputPartition close(List<SegmentSlice> slices, List<SegmentSlice> planned) {
        if (slices.size() == 1) {
            return slices.get(0);
        }
        java.util.Map<SegmentSlice, Integer> at = new java.util.IdentityHashMap<>();
        for (int i = 0; i < planned.size(); i++) {
            at.put(planned.get(i), i);
        }
        slices.sort(Comparator.comparingInt(at::get));
        return new SegmentPack(slices.toArray(new SegmentSlice[0]));
    }
}
