package kbatch.kafka.wire;

import java.nio.ByteBuffer;

/**
 * The header fields of one log entry as a scan reads them (kbatch's scan_batches columns): a magic
 * 2 batch, or a legacy magic 0/1 entry (base = last = the entry's offset, no producer fields).
 */
public final class BatchHeader {
    public long position;   // in the file
    public int size;        // whole entry, LOG_OVERHEAD included
    public int magic;
    public long baseOffset;
    public long lastOffset;
    long crc;               // unsigned
    public int attributes;
    long firstTimestamp;
    public long maxTimestamp;
    public long producerId;
    short producerEpoch;
    int baseSequence;
    public int recordCount;

    /**
     * Read the header at b[p] (file position `position`), the entry's `size` bytes being in b.
     * Framing was checked by the scan.
     */
    public void read(ByteBuffer b, int p, long position, int size) {
        this.position = position;
        this.size = size;
        magic = b.get(p + Wire.MAGIC_OFFSET);
        baseOffset = b.getLong(p);
        if (magic == 2) {
            crc = b.getInt(p + Wire.CRC_OFFSET) & 0xffffffffL;
            attributes = b.getShort(p + Wire.ATTRIBUTES_OFFSET);
            lastOffset = baseOffset + b.getInt(p + Wire.LAST_OFFSET_DELTA_OFFSET);
            firstTimestamp = b.getLong(p + Wire.BASE_TIMESTAMP_OFFSET);
            maxTimestamp = b.getLong(p + Wire.MAX_TIMESTAMP_OFFSET);
            producerId = b.getLong(p + Wire.PRODUCER_ID_OFFSET);
            producerEpoch = b.getShort(p + Wire.PRODUCER_EPOCH_OFFSET);
            baseSequence = b.getInt(p + Wire.BASE_SEQUENCE_OFFSET);
            recordCount = b.getInt(p + Wire.RECORDS_COUNT_OFFSET);
        } else {
            int m = p + Wire.LOG_OVERHEAD;
            crc = b.getInt(m) & 0xffffffffL;
            attributes = b.get(m + Wire.LEGACY_ATTRIBUTES_OFFSET) & 0xff;
            lastOffset = baseOffset;
            firstTimestamp = maxTimestamp = magic == 1 ? b.getLong(m + Wire.LEGACY_TIMESTAMP_OFFSET) : Wire.NO_TIMESTAMP;
            producerId = -1;
            producerEpoch = -1;
            baseSequence = -1;
            recordCount = (attributes & Wire.COMPRESSION_CODEC_MASK) != 0 ? -1 : 1;
        }
    }

    public boolean isControl() {
        return magic == 2 && (attributes & Wire.CONTROL_FLAG_MASK) != 0;
    }

    public boolean isTransactional() {
        return magic == 2 && (attributes & Wire.TRANSACTIONAL_FLAG_MASK) != 0;
    }
}
