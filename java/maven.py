"""How setup.py gets kbatch.spark's JVM reader jar: Maven builds it (java/kafka-segments/pom.xml).

`mvn package -DskipTests` compiles java/kafka-segments with Java 17 against Spark's and Hadoop's
jars, which Maven fetches from Maven Central itself (they are `provided`): no pyspark is needed, so
pip's isolated build from a checkout builds the jar too. The tests (`mvn test`) run in
`python3 dev.py test`, not here. setup.py calls `build()`:

    KBATCH_JAR=auto (default)  build when a JDK and Maven are found, else say why and go on
                               (kbatch.spark.register() then says the Python reader is live, and why)
    KBATCH_JAR=1               require the jar (release wheels): fail with the reason instead
    KBATCH_JAR=0               do not build it
    KBATCH_MVN=PATH            the mvn executable (default: mvn on PATH)

The sdist carries the compiled jar (java/prebuilt/, put there by setup.py's sdist command:
`build_for_sdist`): a build from the sdist uses it when its Source-Digest says it was built from
exactly the sources beside it (the jar is bytecode for Java 17, the same on every platform), so
installing an sdist needs neither a JDK nor Maven.

When no jar is built, `build()` leaves the reason in the package (jars/NO_JAR.txt), where
kbatch.spark.jvm reads it: pip shows nothing of a build that succeeds, so the session says it.
"""
from __future__ import annotations

import hashlib
import os
import re
import shutil
import subprocess
import zipfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
PROJECT = HERE / "kafka-segments"
JAR_NAME = "kbatch-kafka-segments.jar"
#: kbatch.spark.jvm reads this beside where the jar would be
NO_JAR = "NO_JAR.txt"
# the jar an sdist carries (relative to an sdist's root: java/prebuilt/<JAR_NAME>)
PREBUILT = HERE / "prebuilt" / JAR_NAME
# where dev.py build / editable installs put it (a checkout's jar, reused for an sdist when current)
IN_PLACE = HERE.parent / "src" / "kbatch" / "spark" / "jars" / JAR_NAME
#: what fixes a build without the jar (also in kbatch.spark.jvm's message)
FIX = ("install a JDK 17+ and Maven (Debian/Ubuntu: apt-get install -y openjdk-17-jdk-headless maven; "
       "macOS: brew install openjdk@17 maven) and reinstall kbatch")


class JarUnavailable(Exception):
    """Why the jar cannot be built here (no JDK, no Maven, a failed Maven build)."""


def mode() -> str:
    v = os.environ.get("KBATCH_JAR", "auto").strip().lower()
    return {"1": "require", "true": "require", "require": "require", "0": "skip", "false": "skip",
            "skip": "skip"}.get(v, "auto")


def find_mvn() -> str:
    """mvn, after checking that a JDK (javac) is there for it."""
    home = os.environ.get("JAVA_HOME")
    if not (home and (Path(home) / "bin" / "javac").exists()) and not shutil.which("javac"):
        raise JarUnavailable("no JDK (javac 17 or newer on PATH or in JAVA_HOME)")
    mvn = os.environ.get("KBATCH_MVN", "").strip() or shutil.which("mvn")
    if not mvn:
        raise JarUnavailable("no Maven (mvn on PATH, or KBATCH_MVN)")
    return mvn


def sources() -> list[Path]:
    return [PROJECT / "pom.xml"] + sorted(p for p in (PROJECT / "src" / "main").rglob("*") if p.is_file())


def source_digest() -> str:
    """SHA-256 over the pom's and the main sources' paths and bytes: names what a jar was built from."""
    h = hashlib.sha256()
    for p in sources():
        h.update(p.relative_to(HERE).as_posix().encode() + b"\0" + p.read_bytes() + b"\0")
    return h.hexdigest()[:40]  # a manifest line holds at most 72 bytes


def manifest_of(jar: Path) -> dict[str, str]:
    """The main attributes of a jar's manifest ({} when it has none or is no jar)."""
    try:
        with zipfile.ZipFile(jar) as z:
            text = z.read("META-INF/MANIFEST.MF").decode()
    except (OSError, KeyError, zipfile.BadZipFile):
        return {}
    return dict(ln.split(": ", 1) for ln in text.splitlines() if ": " in ln)


def built_from_these_sources(jar: Path, version: str | None = None) -> bool:
    m = manifest_of(jar) if jar.is_file() else {}
    return m.get("Source-Digest") == source_digest() and version in (None, m.get("Implementation-Version"))


def compile_jar(out: Path, version: str, log=print) -> Path:
    """`mvn package` (no tests) into java/kafka-segments/target, copied to `out`; nothing to do when
    `out` was built from these sources for this version."""
    if built_from_these_sources(out, version):
        return out
    mvn = find_mvn()
    digest = source_digest()
    log(f"kbatch: building the JVM reader's jar with Maven ({mvn}; the first build fetches Spark's jars)")
    cmd = [mvn, "-q", "-B", "-Dstyle.color=never", "-f", str(PROJECT / "pom.xml"), "package", "-DskipTests",
           f"-Drevision={version}", f"-Dkbatch.sourceDigest={digest}"]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        out.unlink(missing_ok=True)  # never leave a jar of older sources behind
        text = re.sub(r"\x1b\[[0-9;]*m", "", proc.stdout + proc.stderr)  # mvn colours some lines even with -B
        raise JarUnavailable("mvn package failed:\n" + "\n".join(text.strip().splitlines()[-40:]))
    built = PROJECT / "target" / JAR_NAME
    out.parent.mkdir(parents=True, exist_ok=True)
    part = out.with_suffix(".jar.part")
    shutil.copyfile(built, part)
    os.replace(part, out)
    return out


def _say_why(out_dir: Path, why: str) -> None:
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / NO_JAR).write_text(why + "\n")


def build(out_dir, version: str, log=print) -> Path | None:
    """Build the jar into out_dir per KBATCH_JAR; returns its path, or None when it was not built."""
    out_dir = Path(out_dir)
    out = out_dir / JAR_NAME
    (out_dir / NO_JAR).unlink(missing_ok=True)
    m = mode()
    if m == "skip":
        log("kbatch: KBATCH_JAR=0, the JVM reader's jar is not built (the Python reader will serve Spark)")
        _say_why(out_dir, "it was built with KBATCH_JAR=0")
        return None
    if built_from_these_sources(PREBUILT):  # an sdist's jar, built from exactly these sources
        out_dir.mkdir(parents=True, exist_ok=True)
        if out.resolve() != PREBUILT.resolve():
            shutil.copyfile(PREBUILT, out)
        log(f"kbatch: the JVM reader's jar is the one the sdist carries (built from these sources against "
            f"Spark {manifest_of(PREBUILT).get('Built-Against-Spark', '?')})")
        return out
    try:
        return compile_jar(out, version, log)
    except JarUnavailable as e:
        # a jar of older sources (package data copied from src/, an earlier build) must not ship
        out.unlink(missing_ok=True)
        if m == "require":
            raise SystemExit(f"kbatch: KBATCH_JAR=1 and the JVM reader's jar cannot be built: {e}") from None
        first = str(e).splitlines()[0]
        log(f"kbatch: WARNING: the JVM reader's jar is not built ({first}); kbatch.spark will use the Python "
            f"reader. To build it: {FIX}")
        _say_why(out_dir, f"{first}, when it was built")
        return None


def build_for_sdist(release_dir, version: str, log=print) -> Path | None:
    """Put the compiled jar into an sdist's tree (java/prebuilt/), per KBATCH_JAR: the checkout's own
    jar when it was built from these sources, else a fresh Maven build. Returns its path, or None."""
    out = Path(release_dir) / "java" / "prebuilt" / JAR_NAME
    if mode() == "skip":
        log("kbatch: KBATCH_JAR=0, the sdist carries no JVM reader jar")
        return None
    out.parent.mkdir(parents=True, exist_ok=True)
    if built_from_these_sources(IN_PLACE, version):
        shutil.copyfile(IN_PLACE, out)
        return out
    try:
        return compile_jar(out, version, log)
    except JarUnavailable as e:
        if mode() == "require":
            raise SystemExit(f"kbatch: KBATCH_JAR=1 and the sdist's JVM reader jar cannot be built: {e}") from None
        log(f"kbatch: the sdist carries no JVM reader jar ({str(e).splitlines()[0]}); installs from it build "
            "it with Maven where they can")
        return None
