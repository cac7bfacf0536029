package kbatch.spark;

import org.apache.spark.sql.connector.read.InputPartition;

import kbatch.kafka.storage.AbortedTransactions;

/**
 * One input partition: bytes [start, end) of one segment, rows with offset in
 * [startOffset, endOffset) (null: unbounded), and for read_committed the partition's aborted
 * transactions that overlap those offsets.
 */
final class SegmentSlice implements InputPartition {
    private static final long serialVersionUID = 1L;

    final String topic;
    final int partition;
    final String path;
    final long start;
    final long end;
    final long fileSize;
    final Long startOffset;
    final Long endOffset;
    final AbortedTransactions aborted;
    /**
     * The base offset of the partition's next segment; null when this is the last (active) one,
     * the only segment whose partial last batch is ignored, as Kafka does (kbatch.log.fetch).
     */
    final Long nextBase;

    SegmentSlice(String topic, int partition, String path, long start, long end, long fileSize, Long startOffset,
                 Long endOffset, AbortedTransactions aborted, Long nextBase) {
        this.nextBase = nextBase;
        this.topic = topic;
        this.partition = partition;
        this.path = path;
        this.start = start;
        this.end = end;
        this.fileSize = fileSize;
        this.startOffset = startOffset;
        this.endOffset = endOffset;
        this.aborted = aborted == null ? null : aborted.overlapping(startOffset == null ? Long.MIN_VALUE : startOffset,
                endOffset == null ? Long.MAX_VALUE : endOffset);
    }

    @Override
    public String toString() {
        return "SegmentSlice(" + path + "[" + start + ":" + end + "], offsets [" + startOffset + ", " + endOffset + "))";
    }
}
