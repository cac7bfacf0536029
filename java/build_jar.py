"""Build kbatch's JVM reader (java/kafka-segments) into a jar, without Maven.

The Java sources compile with `javac --release 17` against the jars of an installed pyspark
(Spark ships everything the reader uses: its DataSource V2 API, Hadoop's FileSystem, lz4-java,
zstd-jni, snappy-java, Jackson; gzip and CRC-32C are in the JDK). setup.py calls `build()`:

    KBATCH_JAR=auto (default)  build when javac and Spark's jars are found, else say why and go on
                               (kbatch.spark.register() then says the Python reader is live)
    KBATCH_JAR=1               require the jar (release wheels): fail with the reason instead
    KBATCH_JAR=0               do not build it
    KBATCH_SPARK_JARS=DIR      compile against DIR (a Spark's jars/) instead of pyspark's own

The sdist carries the compiled jar (java/prebuilt/, put there by setup.py's sdist command:
`build_for_sdist`), because a build from it is usually isolated (pip's build environment has no
pyspark) and could not compile it: `build()` then uses that jar when its Source-Digest says it was
built from exactly these sources (the jar is bytecode for Java 17, the same on every platform).

Also runnable by hand: `python java/build_jar.py OUT.jar`.
"""
from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
SOURCES = HERE / "kafka-segments" / "src" / "main"
JAR_NAME = "kbatch-kafka-segments.jar"
# the jar an sdist carries (relative to an sdist's root: java/prebuilt/<JAR_NAME>)
PREBUILT = HERE / "prebuilt" / JAR_NAME
# where dev.py build / editable installs put it (a checkout's jar, reused for an sdist when current)
IN_PLACE = HERE.parent / "src" / "kbatch" / "spark" / "jars" / JAR_NAME
RELEASE = "17"
# fixed entry times: the same sources give the same jar bytes
_EPOCH = (1980, 1, 1, 0, 0, 0)


class JarUnavailable(Exception):
    """Why the jar cannot be built here (no javac, no Spark jars, a compile error)."""


def mode() -> str:
    v = os.environ.get("KBATCH_JAR", "auto").strip().lower()
    return {"1": "require", "true": "require", "require": "require", "0": "skip", "false": "skip",
            "skip": "skip"}.get(v, "auto")


def find_javac() -> str:
    home = os.environ.get("JAVA_HOME")
    if home and (Path(home) / "bin" / "javac").exists():
        return str(Path(home) / "bin" / "javac")
    javac = shutil.which("javac")
    if not javac:
        raise JarUnavailable("no javac (a JDK 17 or newer) on PATH or in JAVA_HOME; on Debian/Ubuntu: "
                             "apt-get install -y openjdk-17-jdk-headless")
    return javac


def find_spark_jars() -> tuple[Path, str]:
    """(directory of Spark's jars, Spark version)."""
    given = os.environ.get("KBATCH_SPARK_JARS")
    if given:
        d = Path(given)
        if not d.is_dir():
            raise JarUnavailable(f"KBATCH_SPARK_JARS={given} is not a directory")
        return d, _version_of(d)
    try:
        import pyspark  # noqa: F401 - only its location is needed
    except ImportError:
        raise JarUnavailable("pyspark is not importable by this build (an isolated build environment: "
                             "install with --no-build-isolation after pyspark, or set KBATCH_SPARK_JARS)") from None
    d = Path(pyspark.__file__).resolve().parent / "jars"
    if not d.is_dir():
        raise JarUnavailable(f"pyspark at {d.parent} has no jars/ folder")
    return d, pyspark.__version__


def _version_of(jars: Path) -> str:
    for j in jars.glob("spark-sql_*.jar"):
        return j.stem.rsplit("-", 1)[-1]
    return "unknown"


def sources() -> list[Path]:
    return sorted(p for p in SOURCES.rglob("*") if p.is_file())


def source_digest() -> str:
    """SHA-256 over the sources' paths and bytes, and this script: names what a jar was built from."""
    h = hashlib.sha256()
    for p in sources() + [Path(__file__)]:
        h.update(p.relative_to(HERE).as_posix().encode() + b"\0" + p.read_bytes() + b"\0")
    return h.hexdigest()[:40]  # a manifest line holds at most 72 bytes


def _manifest(version: str, spark: str) -> str:
    return ("Manifest-Version: 1.0\r\n"
            "Implementation-Title: kbatch kafka-segments JVM reader\r\n"
            f"Implementation-Version: {version}\r\n"
            f"Built-Against-Spark: {spark}\r\n"
            f"Built-With-Release: {RELEASE}\r\n"
            f"Source-Digest: {source_digest()}\r\n\r\n")


def up_to_date(out: Path, version: str, spark: str) -> bool:
    if not out.exists():
        return False
    try:
        with zipfile.ZipFile(out) as z:
            return z.read("META-INF/MANIFEST.MF").decode() == _manifest(version, spark)
    except (OSError, KeyError, zipfile.BadZipFile):
        return False


def manifest_of(jar: Path) -> dict[str, str]:
    """The main attributes of a jar's manifest ({} when it has none or is no jar)."""
    try:
        with zipfile.ZipFile(jar) as z:
            text = z.read("META-INF/MANIFEST.MF").decode()
    except (OSError, KeyError, zipfile.BadZipFile):
        return {}
    return dict(ln.split(": ", 1) for ln in text.splitlines() if ": " in ln)


def built_from_these_sources(jar: Path) -> bool:
    return jar.is_file() and manifest_of(jar).get("Source-Digest") == source_digest()


def compile_jar(out: Path, version: str) -> Path:
    javac = find_javac()
    jars, spark = find_spark_jars()
    if up_to_date(out, version, spark):
        return out
    java_files = [str(p) for p in sources() if p.suffix == ".java"]
    with tempfile.TemporaryDirectory(prefix="kbatch-jar-") as tmp:
        classes = Path(tmp) / "classes"
        classes.mkdir()
        cmd = [javac, "--release", RELEASE, "-encoding", "UTF-8", "-Xlint:all,-path,-serial,-options",
               "-cp", str(jars / "*"), "-d", str(classes), *java_files]
        proc = subprocess.run(cmd, capture_output=True, text=True)
        if proc.returncode != 0:
            out.unlink(missing_ok=True)  # never leave a jar of older sources behind
            raise JarUnavailable("javac failed:\n" + proc.stdout + proc.stderr)
        if proc.stderr.strip():
            print(proc.stderr, file=sys.stderr)
        out.parent.mkdir(parents=True, exist_ok=True)
        part = out.with_suffix(".jar.part")
        with zipfile.ZipFile(part, "w", zipfile.ZIP_DEFLATED) as z:
            z.writestr(zipfile.ZipInfo("META-INF/MANIFEST.MF", _EPOCH), _manifest(version, spark))
            resources = SOURCES / "resources"
            files = [(p, p.relative_to(classes)) for p in sorted(classes.rglob("*.class"))]
            files += [(p, p.relative_to(resources)) for p in sorted(resources.rglob("*")) if p.is_file()]
            for path, rel in files:
                info = zipfile.ZipInfo(rel.as_posix(), _EPOCH)
                info.compress_type = zipfile.ZIP_DEFLATED
                z.writestr(info, path.read_bytes())
        os.replace(part, out)
    return out


def build(out_dir: Path, version: str, log=print) -> Path | None:
    """Build the jar into out_dir per KBATCH_JAR; returns its path, or None when it was not built."""
    m = mode()
    if m == "skip":
        log("kbatch: KBATCH_JAR=0, the JVM reader's jar is not built (the Python reader will serve Spark)")
        return None
    try:
        return compile_jar(Path(out_dir) / JAR_NAME, version)
    except JarUnavailable as e:
        if built_from_these_sources(PREBUILT):  # an sdist's jar, built from exactly these sources
            out = Path(out_dir) / JAR_NAME
            out.parent.mkdir(parents=True, exist_ok=True)
            if out.resolve() != PREBUILT.resolve():
                shutil.copyfile(PREBUILT, out)
            spark = manifest_of(PREBUILT).get("Built-Against-Spark", "?")
            log(f"kbatch: the JVM reader's jar is the one the sdist carries (built from these sources against "
                f"Spark {spark}; compiling here was not possible: {str(e).splitlines()[0]})")
            return out
        if m == "require":
            raise SystemExit(f"kbatch: KBATCH_JAR=1 and the JVM reader's jar cannot be built: {e}") from None
        log(f"kbatch: the JVM reader's jar is not built ({e}); kbatch.spark will use the Python reader")
        return None


def build_for_sdist(release_dir: Path, version: str, log=print) -> Path | None:
    """Put the compiled jar into an sdist's tree (java/prebuilt/), per KBATCH_JAR: the checkout's own
    jar when it was built from these sources, else a fresh compile. Returns its path, or None."""
    out = Path(release_dir) / "java" / "prebuilt" / JAR_NAME
    if mode() == "skip":
        log("kbatch: KBATCH_JAR=0, the sdist carries no JVM reader jar")
        return None
    out.parent.mkdir(parents=True, exist_ok=True)
    if built_from_these_sources(IN_PLACE):
        shutil.copyfile(IN_PLACE, out)
        return out
    try:
        return compile_jar(out, version)
    except JarUnavailable as e:
        if mode() == "require":
            raise SystemExit(f"kbatch: KBATCH_JAR=1 and the sdist's JVM reader jar cannot be built: {e}") from None
        log(f"kbatch: the sdist carries no JVM reader jar ({e}); installs from it that cannot compile it "
            "will use the Python reader")
        return None


if __name__ == "__main__":
    target = Path(sys.argv[1]) if len(sys.argv) > 1 else Path(JAR_NAME)
    try:
        print(compile_jar(target, os.environ.get("KBATCH_VERSION", "dev")))
    except JarUnavailable as e:
        sys.exit(str(e))
