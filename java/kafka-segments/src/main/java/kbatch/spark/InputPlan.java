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
 * (at least the open cost), lowered to fill whole waves of the cores; a slice larger than it is
 * cut at `.index` entries, and the slices are spread, largest first, each counted with the open
 * cost, over as many input partitions as that size needs, each into the lightest. So a count or a groupBy(key) over eight 290 MB segments runs as a few tasks, as
 * Parquet's over the same rows does, and many small segments are not one task each.
 */
final class InputPlan {
    final long maxPartitionBytes;
    final long openCost;
    final int minPartitions;
    /** The session's cores (default parallelism): tasks run in waves of this many. */
    final int cores;

    InputPlan(long maxPartitionBytes, long openCost, int minPartitions, int cores) {
        this.maxPartitionBytes = Math.max(1, maxPartitionBytes);
        this.openCost = Math.max(0, openCost);
        this.minPartitions = Math.max(1, minPartitions);
        this.cores = Math.max(1, cores);
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
        return new InputPlan(conf.filesMaxPartitionBytes(), conf.filesOpenCostInBytes(), min,
                SparkContext.getOrCreate().defaultParallelism());
    }

    /** Weighed bytes of a slice: its file bytes times the share the query reads. */
    static long weight(SegmentSlice s, double fraction) {
        return (long) Math.ceil((s.end - s.start) * fraction);
    }

    /**
     * The largest input partition, in weighed bytes, for slices of these weights: Spark's rule,
     * then lowered so the partitions fill whole waves of the cores (three equal tasks on two cores
     * take two task times, four half-size ones take two half times).
     */
    long maxSplit(List<SegmentSlice> whole, double fraction) {
        long total = 0;
        for (SegmentSlice s : whole) {
            total += weight(s, fraction) + openCost;
        }
        // Spark's per-core share, rounded up so that it gives as many partitions as it asks for
        long split = Math.min(maxPartitionBytes, Math.max(openCost, (total + minPartitions - 1) / minPartitions));
        if (split < maxPartitionBytes) {
            return split;
        }
        long n = waves(total, split);
        return Math.max(openCost, (total + n - 1) / n);
    }

    /**
     * How many input partitions `total` weighed bytes take at `split` each; where maxPartitionBytes
     * caps the split (more partitions than cores), rounded up to whole waves of the cores.
     */
    long waves(long total, long split) {
        long n = Math.max(1, (total + split - 1) / split);
        if (n > 1 && (n - 1) * split + split / 4 >= total) {
            n--; // a spill of under a quarter of a split (open costs of cut pieces): spread over the others
        }
        boolean capped = split >= maxPartitionBytes || n > Math.max(minPartitions, cores) + 1;
        return capped && n > cores && n % cores != 0 ? (n / cores + 1) * cores : n;
    }

    /** File bytes at which a slice is cut (at `.index` entries) so its pieces weigh at most maxSplit. */
    static long fileBytes(long maxSplit, double fraction) {
        double b = maxSplit / fraction;
        return b >= Long.MAX_VALUE ? Long.MAX_VALUE : Math.max(1, (long) b);
    }

    /**
     * Slices cut into as many input partitions as their weight needs at maxSplit each (whole
     * waves of the cores, {@link #waves}), each partition a run of consecutive slices in the
     * planned order (the log's): a slice goes to the partition its weight's midpoint falls in,
     * so the partitions come out even where Spark's next-fit packing leaves the small slices (the
     * active segments) in one more, smaller partition that runs alone after the others. Runs keep
     * the tasks in offset order within a topic-partition (the writer's round trip relies on it);
     * packing largest-first into the lightest partition interleaved them.
     */
    InputPartition[] pack(List<SegmentSlice> slices, double fraction, long maxSplit) {
        long total = 0;
        for (SegmentSlice s : slices) {
            total += weight(s, fraction) + openCost;
        }
        int bins = (int) Math.max(1, Math.min(slices.size(), waves(total, Math.max(1, maxSplit))));
        List<List<SegmentSlice>> packs = new ArrayList<>();
        for (int i = 0; i < bins; i++) {
            packs.add(new ArrayList<>());
        }
        double share = (double) total / bins;
        long before = 0;
        for (SegmentSlice s : slices) {
            long w = weight(s, fraction) + openCost;
            int bin = (int) Math.min(bins - 1, (long) ((before + w / 2.0) / share));
            packs.get(bin).add(s);
            before += w;
        }
        List<InputPartition> out = new ArrayList<>();
        for (List<SegmentSlice> p : packs) {
            if (!p.isEmpty()) {
                out.add(close(p, slices));
            }
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
