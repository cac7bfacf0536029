#!/usr/bin/env python3
"""Spark-side jars from Maven Central that tests and benchmarks read through (docs/spark.md).

  python3 dev.py spark-jars fetch [--jars-dir D]   resolve both sets below into the cache
  python3 dev.py spark-jars path kafka|s3a         print one set's jars (comma-separated, for spark.jars)

Two sets, each at the versions of the installed pyspark (or of the Spark `jars/` folder given):
  kafka  org.apache.spark:spark-sql-kafka-0-10_2.13 at pyspark's Spark version: Spark's own Kafka
         source, with the runtime dependencies pyspark lacks (kafka-clients, commons-pool2,
         spark-token-provider-kafka-0-10, ...)
  s3a    org.apache.hadoop:hadoop-aws at the Hadoop version of pyspark's hadoop-client-api jar, with
         the AWS SDK it calls

Each set is `mvn dependency:copy-dependencies` (runtime scope) of a generated pom, then every jar
whose artifact pyspark already ships is dropped (two versions of one library on a class path is
the classic source of NoSuchMethodError; pyspark's wins). They land in
`<cache>/<artifact>-<version>/lib/`, the cache being `~/.cache/kbatch/spark-jars` or
`$KBATCH_SPARK_JARS_CACHE`; a stamp file makes a second fetch free. Nothing goes into the
repository. Maven and the reachability check are tools/kafka_dist.py's.

Standard library only: dev.py, the tests and the benchmarks import it.
"""
from __future__ import annotations

import argparse
import hashlib
import importlib.util
import json
import os
import re
import shutil
import sys
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

sys.path.insert(0, str(Path(__file__).resolve().parent))
try:
    import kafka_dist as _kd
finally:
    sys.path.pop(0)

#: bumped when what a fetch puts into lib/ changes, so older caches are fetched again
RECIPE = 1
SETS = ("kafka", "s3a")


class SparkJarsError(RuntimeError):
    """A set of jars could not be had; the message says why."""


@dataclass(frozen=True)
class JarSet:
    name: str          # "kafka" / "s3a"
    coordinate: str    # group:artifact:version of the root artifact
    lib: Path

    def jars(self) -> list[Path]:
        return sorted(self.lib.glob("*.jar"))

    @property
    def spark_jars(self) -> str:
        """For the `spark.jars` setting (comma-separated paths)."""
        return ",".join(str(p) for p in self.jars())


def cache_root() -> Path:
    env = os.environ.get("KBATCH_SPARK_JARS_CACHE", "").strip()
    return Path(env).expanduser() if env else Path.home() / ".cache" / "kbatch" / "spark-jars"


def pyspark_jars_dir() -> Path:
    """The `jars/` folder of the pyspark importable here (found without importing pyspark)."""
    env = os.environ.get("KBATCH_SPARK_JARS", "").strip()
    if env:
        return Path(env).expanduser()
    spec = importlib.util.find_spec("pyspark")
    if spec is None or not spec.submodule_search_locations:
        raise SparkJarsError("pyspark is not installed here (install the `spark` extra), "
                             "or set KBATCH_SPARK_JARS to a Spark jars/ folder")
    d = Path(list(spec.submodule_search_locations)[0]) / "jars"
    if not d.is_dir():
        raise SparkJarsError(f"pyspark has no jars/ folder at {d}")
    return d


_JAR_RE = re.compile(r"^(?P<artifact>.+?)-(?P<version>\d[^-]*(?:-[A-Za-z0-9.]+)*)\.jar$")


def _artifacts(jars_dir: Path) -> dict[str, str]:
    """artifactId -> version of every jar in a folder, read from the jar names."""
    out = {}
    for p in jars_dir.glob("*.jar"):
        m = _JAR_RE.match(p.name)
        if m:
            out[m.group("artifact")] = m.group("version")
    return out


def versions(jars_dir: Path) -> tuple[str, str]:
    """(Spark version, Hadoop version) of a Spark jars/ folder."""
    arts = _artifacts(jars_dir)
    spark = arts.get("spark-core_2.13")
    hadoop = arts.get("hadoop-client-api")
    if not spark or not hadoop:
        raise SparkJarsError(f"{jars_dir}: no spark-core_2.13-*.jar or hadoop-client-api-*.jar "
                             "(not a Spark 4 jars/ folder)")
    return spark, hadoop


def published(group: str, artifact: str) -> list[str] | None:
    """The versions Maven Central lists for an artifact, or None when it cannot be asked."""
    url = f"{_kd.MAVEN_CENTRAL}{group.replace('.', '/')}/{artifact}/maven-metadata.xml"
    try:
        with urllib.request.urlopen(url, timeout=30) as resp:
            return re.findall(r"<version>([^<]+)</version>", resp.read().decode())
    except OSError:
        return None


def release_for(wanted: str, versions_published: list[str] | None) -> str:
    """`wanted` when Central has it, else the newest release of the same major version below it (a
    pyspark can reach PyPI before Spark's Maven artifacts reach Central: the Kafka source of the
    previous minor runs on it, and the tests say which one they used)."""
    if versions_published is None or wanted in versions_published:
        return wanted
    key = _kd.version_tuple
    older = [v for v in versions_published if re.fullmatch(r"\d+\.\d+\.\d+", v)
             and v.split(".")[0] == wanted.split(".")[0] and key(v) <= key(wanted)]
    return max(older, key=key) if older else wanted


def coordinate(name: str, jars_dir: Path) -> str:
    spark, hadoop = versions(jars_dir)
    if name == "kafka":
        installed_before = [p for p in cache_root().glob(f"spark-sql-kafka-0-10_2.13-*/fetched.json")]
        for stamp in installed_before:  # decided once, while Central answered: no network on later runs
            try:
                info = json.loads(stamp.read_text())
            except (OSError, ValueError):
                continue
            if info.get("for_spark") == spark and info.get("recipe") == RECIPE:
                return str(info["coordinate"])
        version = release_for(spark, published("org.apache.spark", "spark-sql-kafka-0-10_2.13"))
        return f"org.apache.spark:spark-sql-kafka-0-10_2.13:{version}"
    if name == "s3a":
        return f"org.apache.hadoop:hadoop-aws:{hadoop}"
    raise SparkJarsError(f"unknown jar set {name!r} (one of {', '.join(SETS)})")


def _entry(coord: str) -> Path:
    _g, a, v = coord.split(":")
    return cache_root() / f"{a}-{v}"


def installed(name: str, jars_dir: Path) -> JarSet | None:
    coord = coordinate(name, jars_dir)
    root = _entry(coord)
    try:
        info = json.loads((root / "fetched.json").read_text())
    except (OSError, ValueError):
        return None
    if info.get("recipe") != RECIPE or info.get("coordinate") != coord or not (root / "lib").is_dir():
        return None
    return JarSet(name, coord, root / "lib")


def _pom(coord: str) -> str:
    g, a, v = coord.split(":")
    return f"""<?xml version="1.0" encoding="UTF-8"?>
<!-- generated by tools/spark_jars.py into its cache: {coord} and its runtime dependencies -->
<project xmlns="http://maven.apache.org/POM/4.0.0">
  <modelVersion>4.0.0</modelVersion>
  <groupId>kbatch.tests</groupId>
  <artifactId>spark-jars</artifactId>
  <version>1</version>
  <packaging>pom</packaging>
  <dependencies>
    <dependency><groupId>{g}</groupId><artifactId>{a}</artifactId><version>{v}</version></dependency>
  </dependencies>
</project>
"""


def fetch(name: str, jars_dir: Path | None = None, say: Callable[[str], object] = lambda m: None) -> JarSet:
    """One set's jars, from the cache or fetched now (idempotent; concurrent fetches wait for each
    other). Raises SparkJarsError saying why it could not."""
    jars_dir = jars_dir or pyspark_jars_dir()
    done = installed(name, jars_dir)
    if done is not None:
        return done
    coord = coordinate(name, jars_dir)
    root = _entry(coord)
    with _kd._locked(cache_root() / f".{root.name}.lock"):
        done = installed(name, jars_dir)
        if done is not None:
            return done
        why = _kd.central_reachable()
        if why is not None:
            raise SparkJarsError(f"{coord}: Maven Central ({_kd.MAVEN_CENTRAL}) cannot be reached ({why})")
        say(f"fetching {coord} with its runtime dependencies into {root / 'lib'}")
        work = root / f"work-{os.getpid()}"
        shutil.rmtree(work, ignore_errors=True)
        work.mkdir(parents=True)
        try:
            (work / "pom.xml").write_text(_pom(coord))
            lib = work / "lib"
            try:
                _kd._run_mvn(["dependency:copy-dependencies", f"-DoutputDirectory={lib}", "-DincludeScope=runtime"],
                             work, coord)
            except _kd.KafkaFetchError as e:
                raise SparkJarsError(str(e)) from None
            spark_has = _artifacts(jars_dir)
            dropped = []
            for p in sorted(lib.glob("*.jar")):
                m = _JAR_RE.match(p.name)
                if m and m.group("artifact") in spark_has:
                    dropped.append(p.name)
                    p.unlink()
            root_artifact = coord.split(":")[1]
            if not any(p.name.startswith(root_artifact + "-") for p in lib.glob("*.jar")):
                raise SparkJarsError(f"{coord}: mvn copied no {root_artifact} jar into {lib}")
            final = root / "lib"
            shutil.rmtree(final, ignore_errors=True)
            lib.rename(final)
            jars = sorted(p.name for p in final.glob("*.jar"))
            tmp = root / "fetched.tmp"
            tmp.write_text(json.dumps({"coordinate": coord, "recipe": RECIPE, "jars": jars,
                                       "for_spark": versions(jars_dir)[0], "for_hadoop": versions(jars_dir)[1],
                                       "dropped_as_in_pyspark": dropped,
                                       "digest": hashlib.sha256("\n".join(jars).encode()).hexdigest()[:16]},
                                      indent=1) + "\n")
            tmp.replace(root / "fetched.json")
        finally:
            shutil.rmtree(work, ignore_errors=True)
    done = installed(name, jars_dir)
    assert done is not None
    say(f"{coord}: {len(done.jars())} jars in {done.lib}")
    return done


def spark_kafka_jars(jars_dir: Path | None = None, say: Callable[[str], object] = lambda m: None) -> list[Path]:
    """Spark's Kafka source (`format("kafka")`) for the installed pyspark, with what it needs
    beyond pyspark's own jars."""
    return fetch("kafka", jars_dir, say).jars()


def hadoop_aws_jars(jars_dir: Path | None = None, say: Callable[[str], object] = lambda m: None) -> list[Path]:
    """Hadoop's S3A connector (`s3a://`) at pyspark's Hadoop version, with its AWS SDK."""
    return fetch("s3a", jars_dir, say).jars()


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(prog="dev.py spark-jars", description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--jars-dir", help="a Spark jars/ folder (default: the installed pyspark's)")
    sub = ap.add_subparsers(dest="cmd", required=True)
    f = sub.add_parser("fetch", help="fetch the sets (default: all)")
    f.add_argument("sets", nargs="*", metavar="SET", help="kafka, s3a (default: both)")
    p = sub.add_parser("path", help="print a set's jars, comma-separated (fetching it)")
    p.add_argument("set", choices=SETS)
    args = ap.parse_args(argv)

    def say(msg: str) -> None:
        print(f"[spark-jars] {msg}", flush=True)

    try:
        jars_dir = Path(args.jars_dir) if args.jars_dir else pyspark_jars_dir()
        if args.cmd == "path":
            print(fetch(args.set, jars_dir, say).spark_jars)
            return 0
        wanted = args.sets or list(SETS)
        for w in wanted:
            if w not in SETS:
                ap.error(f"unknown jar set {w!r} (one of {', '.join(SETS)})")
        for w in wanted:
            s = fetch(w, jars_dir, say)
            say(f"{w}: ready, {len(s.jars())} jars ({s.coordinate}) in {s.lib}")
        return 0
    except SparkJarsError as e:
        print(f"[spark-jars] {e}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
