package kbatch.kafka.storage;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.file.Files;
import java.nio.file.Path;

import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.FileSystem;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * `.index` and `.timeindex` lookups (kafka-format.md 5.1-5.3): relative entries made absolute, a
 * preallocated file's zero tail cut where kbatch cuts it, Kafka's sanity checks (an index that
 * fails them is not used, so a lookup scans the segment), and floor / ceiling slots.
 */
class OffsetIndexTest {
    static final long BASE = 1000;

    @TempDir
    Path dir;

    LogDirectory.Segment segment(byte[] index, byte[] timeIndex) throws IOException {
        Path log = dir.resolve(String.format("%020d.log", BASE));
        Files.write(log, new byte[0]);
        if (index != null) {
            Files.write(dir.resolve(String.format("%020d.index", BASE)), index);
        }
        if (timeIndex != null) {
            Files.write(dir.resolve(String.format("%020d.timeindex", BASE)), timeIndex);
        }
        return new LogDirectory.Segment(log.toString(), BASE, 0, 0);
    }

    FileSystem fs() throws IOException {
        return LogDirectory.fileSystem(dir.toString(), new Configuration());
    }

    /** .index entries (relative offset, position), then `zeros` preallocated empty slots. */
    static byte[] index(int zeros, int... relAndPos) {
        ByteBuffer b = ByteBuffer.allocate(4 * relAndPos.length + 8 * zeros);
        for (int v : relAndPos) {
            b.putInt(v);
        }
        return b.array();
    }

    /** .timeindex entries (timestamp, relative offset), then `zeros` empty slots. */
    static byte[] timeIndex(int zeros, long... tsAndRel) {
        ByteBuffer b = ByteBuffer.allocate(12 * (tsAndRel.length / 2 + zeros));
        for (int i = 0; i < tsAndRel.length; i += 2) {
            b.putLong(tsAndRel[i]).putInt((int) tsAndRel[i + 1]);
        }
        return b.array();
    }

    @Test
    void entriesAreAbsoluteAndThePreallocatedTailIsCut() throws IOException {
        OffsetIndex idx = OffsetIndex.forLookup(fs(), segment(index(3, 5, 4096, 12, 8192), null), false);
        assertTrue(idx.usable);
        assertArrayEquals(new long[] {BASE + 5, BASE + 12}, idx.keys);
        assertArrayEquals(new long[] {4096, 8192}, idx.values);
        assertArrayEquals(idx.keys, OffsetIndex.forPlanning(fs(), segment(index(3, 5, 4096, 12, 8192), null), false).keys);
    }

    @Test
    void floorAndCeilingSlots() throws IOException {
        OffsetIndex idx = OffsetIndex.forLookup(fs(), segment(index(0, 5, 4096, 12, 8192), null), false);
        assertEquals(-1, idx.floor(BASE + 4));
        assertEquals(0, idx.floor(BASE + 5));
        assertEquals(0, idx.floor(BASE + 11));
        assertEquals(1, idx.floor(Long.MAX_VALUE));
        assertEquals(0, idx.ceiling(BASE));
        assertEquals(1, idx.ceiling(BASE + 6));
        assertEquals(2, idx.ceiling(BASE + 13));
    }

    @Test
    void aFileOfZerosIsAnEmptyIndex() throws IOException {
        OffsetIndex idx = OffsetIndex.forLookup(fs(), segment(index(4), null), false);
        assertTrue(idx.usable);
        assertEquals(0, idx.size());
    }

    @Test
    void anIndexThatFailsKafkasSanityChecksIsNotUsed() throws IOException {
        byte[] ragged = java.util.Arrays.copyOf(index(0, 5, 4096), 11); // not a multiple of 8 bytes
        assertFalse(OffsetIndex.forLookup(fs(), segment(ragged, null), false).usable);
        byte[] decreasing = index(0, 12, 4096, 5, 8192);
        assertFalse(OffsetIndex.forLookup(fs(), segment(decreasing, null), false).usable);
        assertFalse(OffsetIndex.forLookup(fs(), segment(null, null), false).usable); // missing
    }

    @Test
    void planningCutsAtTheFirstZeroRelativeOffsetAfterTheFirstSlot() throws IOException {
        // slot 0 may name the base offset itself; a later 0 is the preallocated tail
        OffsetIndex idx = OffsetIndex.forPlanning(fs(), segment(index(0, 0, 0, 7, 512, 0, 0, 9, 900), null), false);
        assertArrayEquals(new long[] {BASE, BASE + 7}, idx.keys);
    }

    @Test
    void timeIndexEntriesMapTimestampsToAbsoluteOffsets() throws IOException {
        // a .timeindex's first slot may hold relative offset 0; its entries end at a later one
        OffsetIndex idx = OffsetIndex.forLookup(fs(), segment(null, timeIndex(2, 100, 0, 250, 9, 400, 17)), true);
        assertTrue(idx.usable);
        assertArrayEquals(new long[] {100, 250, 400}, idx.keys);
        assertArrayEquals(new long[] {BASE, BASE + 9, BASE + 17}, idx.values);
        assertEquals(1, idx.floor(399));
        assertEquals(2, idx.ceiling(251));
    }
}
