"""kbatch dump --print-data-log decodes keys and values as kafka-dump-log's StringDecoder does
(`new String(bytes, UTF_8)`): the JVM itself is the oracle for malformed UTF-8, where it puts a
different number of U+FFFD than Python's errors="replace"."""
from __future__ import annotations

import random
import shutil
import subprocess
from pathlib import Path

import pytest

from kbatch.cli.dump_log import java_utf8

DECODER = """
import java.nio.charset.StandardCharsets;
import java.nio.file.*;
public class Utf8Oracle {
    public static void main(String[] a) throws Exception {
        StringBuilder out = new StringBuilder();
        for (String line : Files.readAllLines(Paths.get(a[0]))) {
            String s = new String(java.util.HexFormat.of().parseHex(line), StandardCharsets.UTF_8);
            s.codePoints().forEach(c -> out.append(Integer.toHexString(c)).append(' '));
            out.append('\\n');
        }
        Files.write(Paths.get(a[1]), out.toString().getBytes(StandardCharsets.UTF_8));
    }
}
"""


def test_known_differences_from_python() -> None:
    assert java_utf8(b"\xed\xb5V") == "\ufffdV"  # Python: two U+FFFD
    assert java_utf8(b"\xed\xa0\x80x") == "\ufffdx"  # a surrogate: one U+FFFD for three bytes
    assert java_utf8("Zoë 日本語 😀".encode()) == "Zoë 日本語 😀"


def test_equals_the_jvm(tmp_path: Path) -> None:
    if not (shutil.which("javac") and shutil.which("java")):
        pytest.skip("no JDK on PATH: the JVM is this test's oracle")
    (tmp_path / "Utf8Oracle.java").write_text(DECODER)
    subprocess.run(["javac", "-d", str(tmp_path), str(tmp_path / "Utf8Oracle.java")], check=True, timeout=300)
    rng = random.Random(5)
    # lead bytes of every length, continuation bytes at the edges of the ranges the decoder checks
    edges = [0x41, 0x7F, 0x80, 0x8F, 0x90, 0x9F, 0xA0, 0xBF, 0xC0, 0xC1, 0xC2, 0xDF, 0xE0, 0xE1, 0xED, 0xEF,
             0xF0, 0xF1, 0xF4, 0xF5, 0xF7, 0xF8, 0xFF]
    cases = [bytes(rng.choice(edges) for _ in range(rng.randrange(9))) for _ in range(6000)]
    cases += [rng.randbytes(rng.randrange(1, 24)) for _ in range(2000)]
    (tmp_path / "in.txt").write_text("".join(c.hex() + "\n" for c in cases))
    subprocess.run(["java", "-cp", str(tmp_path), "Utf8Oracle", str(tmp_path / "in.txt"), str(tmp_path / "out.txt")],
                   check=True, timeout=300)
    jvm = (tmp_path / "out.txt").read_text().split("\n")
    for case, want in zip(cases, jvm):
        got = "".join(f"{ord(ch):x} " for ch in java_utf8(case))
        assert got == want, f"bytes {case.hex()}: JVM {want!r}, kbatch {got!r}"
