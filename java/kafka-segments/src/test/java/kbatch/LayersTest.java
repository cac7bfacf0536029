package kbatch;

import static org.junit.jupiter.api.Assertions.assertEquals;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.stream.Stream;

import org.junit.jupiter.api.Test;

/**
 * The packages are layers, each using only those below it: kbatch.kafka.wire (Kafka's bytes),
 * kbatch.kafka.storage (a partition's files, through Hadoop's FileSystem), kbatch.spark.columns
 * (Spark's column vectors and schema), kbatch.spark (the DataSource V2). Nothing under kbatch.kafka
 * knows Spark.
 */
class LayersTest {
    static final Path MAIN = Path.of("src", "main", "java", "kbatch");

    /** The imports in a package's sources that name kbatch, Spark or Hadoop and are not `allowed`. */
    static List<String> importsOf(String pkgDir, String... allowed) throws IOException {
        List<String> bad = new ArrayList<>();
        try (Stream<Path> files = Files.walk(MAIN.resolve(pkgDir))) {
            for (Path f : files.filter(p -> p.toString().endsWith(".java")).toList()) {
                for (String line : Files.readAllLines(f)) {
                    String name = line.startsWith("import ") ? line.substring(7) : "";
                    boolean layered = name.startsWith("kbatch.") || name.startsWith("org.apache.spark")
                            || name.startsWith("org.apache.hadoop");
                    if (layered && Stream.of(allowed).noneMatch(name::startsWith)) {
                        bad.add(MAIN.relativize(f) + ": " + line);
                    }
                }
            }
        }
        return bad;
    }

    @Test
    void wireUsesNoOtherLayer() throws IOException {
        assertEquals(List.of(), importsOf("kafka/wire"));
    }

    @Test
    void storageUsesWireAndHadoop() throws IOException {
        assertEquals(List.of(), importsOf("kafka/storage", "kbatch.kafka.wire.", "org.apache.hadoop."));
    }

    @Test
    void columnsUseWireAndSparkTypes() throws IOException {
        assertEquals(List.of(), importsOf("spark/columns", "kbatch.kafka.wire.", "org.apache.spark.sql.types.",
                "org.apache.spark.sql.vectorized.", "org.apache.spark.unsafe.types."));
    }
}
