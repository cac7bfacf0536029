package kbatch.spark;

import java.lang.reflect.Field;
import java.lang.reflect.Method;
import java.nio.MappedByteBuffer;

/**
 * Unmapping a read-only file mapping as soon as a reader is done with it (the JDK otherwise waits
 * for a GC), through sun.misc.Unsafe.invokeCleaner, which the JDK exports for exactly this. Where
 * it is not available the mapping goes with the next GC.
 */
final class Mappings {
    private Mappings() {}

    private static final Object UNSAFE;
    private static final Method INVOKE_CLEANER;

    static {
        Object unsafe = null;
        Method cleaner = null;
        try {
            Class<?> c = Class.forName("sun.misc.Unsafe");
            Field f = c.getDeclaredField("theUnsafe");
            f.setAccessible(true);
            unsafe = f.get(null);
            cleaner = c.getMethod("invokeCleaner", java.nio.ByteBuffer.class);
        } catch (ReflectiveOperationException | RuntimeException e) {
            unsafe = null;
            cleaner = null;
        }
        UNSAFE = unsafe;
        INVOKE_CLEANER = cleaner;
    }

    static void unmap(MappedByteBuffer b) {
        if (INVOKE_CLEANER == null) {
            return;
        }
        try {
            INVOKE_CLEANER.invoke(UNSAFE, b);
        } catch (ReflectiveOperationException | RuntimeException e) {
            // left to the GC
        }
    }
}
