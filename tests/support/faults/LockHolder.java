import java.nio.channels.FileChannel;
import java.nio.channels.FileLock;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;

/**
 * Locks a file the way a Kafka broker locks <log.dir>/.lock (FileChannel.tryLock on a channel
 * opened CREATE, READ, WRITE), prints "locked" (or "refused" when another process holds it), and
 * holds the lock until stdin closes. Run as a single-file program: java LockHolder.java PATH
 */
public class LockHolder {
    public static void main(String[] args) throws Exception {
        try (FileChannel ch = FileChannel.open(Path.of(args[0]), StandardOpenOption.CREATE,
                StandardOpenOption.READ, StandardOpenOption.WRITE)) {
            FileLock lock = ch.tryLock();
            System.out.println(lock == null ? "refused" : "locked");
            System.out.flush();
            while (System.in.read() != -1) { }
            if (lock != null) lock.release();
        }
    }
}
