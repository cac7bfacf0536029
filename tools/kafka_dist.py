#!/usr/bin/env python3
"""Apache Kafka broker jars for the real-Kafka tests (docs/real-kafka.md), fetched with Maven.

  python3 dev.py kafka fetch [--version V ...]   resolve each version's broker jars (default: the
                                                 versions the tests run, see below) into the cache
  python3 dev.py kafka list                      the versions the tests run and where their jars are
  python3 dev.py kafka path VERSION              print the lib directory of VERSION (fetching it)

A version is `org.apache.kafka:kafka_2.13:V` and `kafka-tools:V` with their runtime dependencies,
copied by `mvn dependency:copy-dependencies` from a pom generated out of tools/kafka/pom.xml.in,
plus an slf4j binding where the broker's dependencies name none (so the broker logs). They land in
`<cache>/<V>/lib/`, the cache being `~/.cache/kbatch/kafka` or `$KBATCH_KAFKA_CACHE`; a stamp file
(`<cache>/<V>/fetched.json`) makes a second fetch free. Nothing is written into the repository.

Environment:
  KBATCH_KAFKA_VERSIONS   comma-separated versions the tests run (default: PINNED)
  KBATCH_KAFKA_HOME       an unpacked Kafka distribution (its libs/): the tests run that broker
                          only, nothing is fetched
  KBATCH_KAFKA_CACHE      the cache directory
  KBATCH_MVN              the mvn executable (default: mvn on PATH)

Standard library only: dev.py and the test fixture (tests/support/kafka_broker.py) import it.
"""
from __future__ import annotations

import argparse
import contextlib
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import urllib.error
import urllib.request
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterator

HERE = Path(__file__).resolve().parent
POM_TEMPLATE = HERE / "kafka" / "pom.xml.in"

#: the versions the tests run by default: the newest 4.x and the last 3.x (both KRaft)
PINNED = ("4.4.0", "3.9.2")
#: a ZooKeeper-era broker: resolves from Maven Central (kafka_2.13 2.8.2 pulls zookeeper 3.5.9),
#: run only when named in KBATCH_KAFKA_VERSIONS
ZOOKEEPER_ERA = ("2.8.2",)
MAVEN_CENTRAL = "https://repo.maven.apache.org/maven2/"
#: the mvn run's bound: a first fetch downloads ~100 jars (~60 MB)
MVN_TIMEOUT_S = 1200
#: bumped when what a fetch puts into lib/ changes, so older caches are fetched again
RECIPE = 2

_VERSION_RE = re.compile(r"^\d+\.\d+\.\d+(?:[.-][0-9A-Za-z.-]+)?$")
#: jar name prefixes of an slf4j binding: with one of these in lib/ the broker's log goes somewhere
_SLF4J_BINDINGS = ("log4j-slf4j-impl-", "log4j-slf4j2-impl-", "slf4j-reload4j-", "slf4j-log4j12-", "slf4j-simple-")


class KafkaFetchError(RuntimeError):
    """A Kafka version's jars could not be had; the message says why (and what to do)."""


def version_tuple(version: str) -> tuple[int, ...]:
    return tuple(int(p) for p in re.findall(r"\d+", version)[:3])


@dataclass(frozen=True)
class KafkaDist:
    """One Kafka version's jars in one directory (a fetched cache entry or a distribution's libs/)."""

    version: str
    lib: Path
    origin: str  # "maven (<cache dir>)" or "KBATCH_KAFKA_HOME=<dir>"

    @property
    def classpath(self) -> str:
        """For `java -cp`: every jar of lib/ (the JVM expands `dir/*`)."""
        return str(self.lib / "*")

    @property
    def kraft(self) -> bool:
        """KRaft (no ZooKeeper): production-ready from 3.3; older brokers run with ZooKeeper."""
        return version_tuple(self.version) >= (3, 3)

    def jars(self) -> list[Path]:
        return sorted(p for p in self.lib.glob("*.jar"))

    def find_class(self, *names: str) -> str | None:
        """The first of `names` (dotted class names) that some jar of lib/ holds, or None."""
        wanted = {n.replace(".", "/") + ".class": n for n in names}
        found: set[str] = set()
        for jar in self.jars():
            try:
                with zipfile.ZipFile(jar) as z:
                    found.update(e for e in z.namelist() if e in wanted)
            except (zipfile.BadZipFile, OSError):
                continue
        for entry, name in wanted.items():
            if entry in found:
                return name
        return None


def cache_root() -> Path:
    env = os.environ.get("KBATCH_KAFKA_CACHE", "").strip()
    return Path(env).expanduser() if env else Path.home() / ".cache" / "kbatch" / "kafka"


def versions() -> list[str]:
    """The versions the tests run: KBATCH_KAFKA_VERSIONS, else PINNED."""
    env = os.environ.get("KBATCH_KAFKA_VERSIONS", "").strip()
    if not env:
        return list(PINNED)
    out = [v.strip() for v in env.split(",") if v.strip()]
    for v in out:
        check_version(v)
    return out


def check_version(version: str) -> None:
    if not _VERSION_RE.match(version):
        raise KafkaFetchError(f"{version!r} is not a Kafka version (expected e.g. 4.4.0)")


def home_dist() -> KafkaDist | None:
    """The distribution KBATCH_KAFKA_HOME names (its libs/ and the version of its kafka_2.x jar)."""
    env = os.environ.get("KBATCH_KAFKA_HOME", "").strip()
    if not env:
        return None
    home = Path(env).expanduser()
    lib = home / "libs" if (home / "libs").is_dir() else home
    version = None
    for jar in sorted(lib.glob("kafka_2.*-*.jar")):
        m = re.match(r"kafka_2\.\d+-(.+)\.jar$", jar.name)
        if m and not m.group(1).endswith(("-sources", "-javadoc", "-test", "-test-sources")):
            version = m.group(1)
    if version is None:
        raise KafkaFetchError(f"KBATCH_KAFKA_HOME={env}: no kafka_2.*-<version>.jar in {lib} "
                              "(expected an unpacked Kafka distribution, e.g. kafka_2.13-4.4.0/)")
    return KafkaDist(version, lib, f"KBATCH_KAFKA_HOME={env}")


def _stamp(version: str) -> Path:
    return cache_root() / version / "fetched.json"


def installed(version: str) -> KafkaDist | None:
    """The cached jars of `version` when a complete fetch of the current recipe put them there."""
    stamp = _stamp(version)
    try:
        info = json.loads(stamp.read_text())
    except (OSError, ValueError):
        return None
    lib = stamp.parent / "lib"
    if info.get("recipe") != RECIPE or info.get("version") != version or not lib.is_dir():
        return None
    return KafkaDist(version, lib, f"maven ({stamp.parent})")


def dependencies(version: str) -> list[tuple[str, str, str]]:
    """(groupId, artifactId, version) the generated pom names for a broker of `version`."""
    deps = [("org.apache.kafka", "kafka_2.13", version), ("org.apache.kafka", "kafka-tools", version)]
    return deps


def render_pom(version: str) -> str:
    lines = [f"    <dependency><groupId>{g}</groupId><artifactId>{a}</artifactId><version>{v}</version></dependency>"
             for g, a, v in dependencies(version)]
    return POM_TEMPLATE.read_text().replace("@KAFKA_VERSION@", version).replace("@DEPENDENCIES@", "\n".join(lines))


def _jar_version(lib: Path, artifact: str) -> str | None:
    for jar in lib.glob(f"{artifact}-*.jar"):
        m = re.match(re.escape(artifact) + r"-(\d[^-]*(?:-\w+)*)\.jar$", jar.name)
        if m:
            return m.group(1)
    return None


def logging_binding(lib: Path) -> list[tuple[str, str, str]]:
    """What to add so the broker's slf4j logging reaches a backend: nothing when lib/ has a
    binding (3.x brings slf4j-reload4j through kafka-tools); log4j 2's binding for the slf4j API
    present when lib/ has log4j-core (4.x); reload4j with its binding otherwise (2.x, which calls
    log4j 1's API directly and brings none)."""
    names = [p.name for p in lib.glob("*.jar")]
    if any(n.startswith(_SLF4J_BINDINGS) for n in names):
        return []
    slf4j = _jar_version(lib, "slf4j-api") or "1.7.36"
    log4j2 = _jar_version(lib, "log4j-core")
    if log4j2:
        artifact = "log4j-slf4j-impl" if slf4j.startswith("1.") else "log4j-slf4j2-impl"
        return [("org.apache.logging.log4j", artifact, log4j2)]
    binding = slf4j if version_tuple(slf4j) >= (1, 7, 33) else "1.7.36"  # slf4j-reload4j starts at 1.7.33
    out = [("org.slf4j", "slf4j-reload4j", binding)]
    if not _jar_version(lib, "reload4j") and not _jar_version(lib, "log4j"):
        out.append(("ch.qos.reload4j", "reload4j", "1.2.25"))
    return out


def central_reachable(timeout: float = 10.0) -> str | None:
    """None when Maven Central answers, else why not (one line)."""
    try:
        with urllib.request.urlopen(urllib.request.Request(MAVEN_CENTRAL, method="HEAD"), timeout=timeout):
            return None
    except urllib.error.HTTPError:
        return None  # it answered
    except Exception as e:  # noqa: BLE001 - any failure is the answer
        return f"{type(e).__name__}: {getattr(e, 'reason', e)}"


@contextlib.contextmanager
def _locked(path: Path) -> Iterator[None]:
    """An exclusive lock on `path` (two test runs fetching the same version wait for each other)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a") as f:
        try:
            import fcntl
        except ImportError:  # not POSIX: no lock
            yield
            return
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


def _mvn() -> str:
    mvn = os.environ.get("KBATCH_MVN", "").strip() or shutil.which("mvn")
    if not mvn:
        raise KafkaFetchError("Maven (mvn) is not installed: the real-Kafka tests fetch the broker's jars with it "
                              "(Debian/Ubuntu: apt-get install maven), or set KBATCH_KAFKA_HOME to an unpacked "
                              "Kafka distribution")
    return mvn


def _run_mvn(args: list[str], cwd: Path, what: str) -> None:
    cmd = [_mvn(), "-B", "-q", "-Dstyle.color=never", *args]
    try:
        proc = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, timeout=MVN_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        raise KafkaFetchError(f"{what}: mvn did not finish within {MVN_TIMEOUT_S} s") from None
    if proc.returncode == 0:
        return
    text = re.sub(r"\x1b\[[0-9;]*m", "", proc.stdout + proc.stderr)  # mvn colours even with -B
    tail = "\n".join(text.strip().splitlines()[-15:])
    why = central_reachable()
    if why is not None:
        raise KafkaFetchError(f"{what}: Maven Central ({MAVEN_CENTRAL}) cannot be reached ({why}); "
                              f"mvn exited {proc.returncode}:\n{tail}")
    raise KafkaFetchError(f"{what}: mvn exited {proc.returncode}:\n{tail}")


def fetch(version: str, say: Callable[[str], object] = lambda msg: None) -> KafkaDist:
    """The jars of `version`, from the cache or fetched into it now (idempotent; concurrent
    fetches of one version wait for each other). Raises KafkaFetchError saying why it could not."""
    check_version(version)
    done = installed(version)
    if done is not None:
        return done
    root = cache_root() / version
    with _locked(cache_root() / f".{version}.lock"):
        done = installed(version)
        if done is not None:
            return done
        mvn = _mvn()
        why = central_reachable()
        if why is not None and not (Path.home() / ".m2" / "repository" / "org" / "apache" / "kafka" / "kafka_2.13"
                                    / version).is_dir():
            raise KafkaFetchError(f"Kafka {version}: Maven Central ({MAVEN_CENTRAL}) cannot be reached ({why}), "
                                  "so its jars cannot be fetched")
        say(f"fetching Apache Kafka {version}'s broker jars with {mvn} into {root / 'lib'} "
            "(the first time takes a minute)")
        work = root / f"work-{os.getpid()}"
        shutil.rmtree(work, ignore_errors=True)
        work.mkdir(parents=True)
        try:
            (work / "pom.xml").write_text(render_pom(version))
            lib = work / "lib"
            _run_mvn(["dependency:copy-dependencies", f"-DoutputDirectory={lib}", "-DincludeScope=runtime"],
                     work, f"Kafka {version}")
            if not _jar_version(lib, "kafka_2.13"):
                raise KafkaFetchError(f"Kafka {version}: mvn copied no kafka_2.13 jar into {lib}")
            for g, a, v in logging_binding(lib):
                _run_mvn(["dependency:copy", f"-Dartifact={g}:{a}:{v}", f"-DoutputDirectory={lib}"],
                         work, f"Kafka {version} (logging binding {g}:{a}:{v})")
            final = root / "lib"
            shutil.rmtree(final, ignore_errors=True)
            lib.rename(final)
            shutil.copy(work / "pom.xml", root / "pom.xml")
            jars = sorted(p.name for p in final.glob("*.jar"))
            digest = hashlib.sha256("\n".join(jars).encode()).hexdigest()[:16]
            tmp = _stamp(version).with_suffix(".tmp")
            tmp.write_text(json.dumps({"version": version, "recipe": RECIPE, "jars": len(jars), "digest": digest},
                                      indent=1) + "\n")
            tmp.replace(_stamp(version))
        finally:
            shutil.rmtree(work, ignore_errors=True)
            with contextlib.suppress(OSError):
                root.rmdir()  # only when a failed first fetch left it empty
    done = installed(version)
    assert done is not None
    say(f"Kafka {version}: {len(done.jars())} jars in {done.lib}")
    return done


def dist(version: str | None = None, say: Callable[[str], object] = lambda msg: None) -> KafkaDist:
    """KBATCH_KAFKA_HOME's distribution when set (and `version` is None or its version), else the
    fetched jars of `version`."""
    home = home_dist()
    if home is not None and (version is None or version == home.version):
        return home
    if version is None:
        raise KafkaFetchError("no version given and KBATCH_KAFKA_HOME is not set")
    return fetch(version, say)


def test_versions() -> list[str]:
    """What the tests run: KBATCH_KAFKA_HOME's version alone when it is set, else versions()."""
    try:
        home = home_dist()
    except KafkaFetchError:
        return versions()
    return [home.version] if home is not None else versions()


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(prog="dev.py kafka", description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    f = sub.add_parser("fetch", help="fetch the broker jars (default: the versions the tests run)")
    f.add_argument("--version", action="append", help="a Kafka version (repeatable, or comma-separated)")
    sub.add_parser("list", help="the versions the tests run and their jars")
    p = sub.add_parser("path", help="print the lib directory of a version (fetching it)")
    p.add_argument("version")
    args = ap.parse_args(argv)

    def say(msg: str) -> None:
        print(f"[kafka] {msg}", flush=True)

    try:
        if args.cmd == "path":
            print(dist(args.version, say).lib)
            return 0
        if args.cmd == "list":
            for v in test_versions():
                d = home_dist() if home_dist() is not None else installed(v)
                print(f"{v}\t{d.lib if d else '(not fetched)'}")
            return 0
        wanted = [v.strip() for arg in (args.version or []) for v in arg.split(",") if v.strip()] or test_versions()
        failed = 0
        for v in wanted:
            try:
                d = dist(v, say)
                say(f"Kafka {v}: ready, {len(d.jars())} jars from {d.origin}")
            except KafkaFetchError as e:
                print(f"[kafka] {e}", file=sys.stderr, flush=True)
                failed += 1
        return 1 if failed else 0
    except KafkaFetchError as e:
        print(f"[kafka] {e}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
