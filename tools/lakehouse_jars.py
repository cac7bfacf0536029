#!/usr/bin/env python3
"""Spark's Delta and Iceberg writers (and spark-avro) for a pyspark version, fetched with Maven.

  python3 tools/lakehouse_jars.py delta [--spark V]     print the jars (comma-separated, for spark.jars)
  python3 tools/lakehouse_jars.py iceberg [--spark V]
  python3 tools/lakehouse_jars.py spark-avro [--spark V]

Which release goes with which Spark (each project publishes one build per Spark minor version):
Delta's `io.delta:delta-spark_2.13` (with `delta-storage`) and Iceberg's
`org.apache.iceberg:iceberg-spark-runtime-<spark major.minor>_2.13`, from the tables below; a Spark
newer than any of them gets the newest one (built for an older Spark: it may not load, the caller
finds out). spark-avro is Spark's own module, published with each Spark release: the pyspark
version's, else the newest of the same major version at or below it. `mvn dependency:copy` puts
each jar into `<cache>/<groupId>/<artifactId>-<version>.jar`, the cache being
`~/.cache/kbatch/lakehouse` or `$KBATCH_LAKEHOUSE_CACHE`; nothing is written into the repository.
Standard library only (the tests import it). Errors: LakehouseFetchError, saying why.
"""
from __future__ import annotations

import argparse
import importlib.util
import os
import re
import subprocess
import sys
import urllib.request
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
MAVEN_CENTRAL = "https://repo.maven.apache.org/maven2/"
#: a jar or two of tens of MB: minutes at most
MVN_TIMEOUT_S = 900

#: Spark major.minor -> delta-spark release built for it (its pom's spark-sql dependency)
DELTA_FOR_SPARK = {"4.0": "4.0.1", "4.1": "4.3.1", "4.2": "4.4.0"}
#: Spark major.minor -> iceberg-spark-runtime release of that Spark's artifact
ICEBERG_FOR_SPARK = {"4.0": "1.11.0", "4.1": "1.12.0"}


class LakehouseFetchError(RuntimeError):
    """The jars could not be had; the message says why."""


def cache_root() -> Path:
    env = os.environ.get("KBATCH_LAKEHOUSE_CACHE", "").strip()
    return Path(env).expanduser() if env else Path.home() / ".cache" / "kbatch" / "lakehouse"


def _key(v: str) -> tuple[int, ...]:
    return tuple(int(x) for x in re.findall(r"\d+", v)[:3])


def _minor(v: str) -> str:
    return ".".join(v.split(".")[:2])


def _pick(table: dict[str, str], spark: str) -> tuple[str, str]:
    """(the Spark minor the release was built for, the release) for `spark`."""
    m = _minor(spark)
    if m in table:
        return m, table[m]
    older = [k for k in table if _key(k) <= _key(m)]
    best = max(older or table, key=_key)
    return best, table[best]


def kafka_dist_module() -> Any:
    """tools/kafka_dist.py (its mvn, lock and Maven Central helpers), under the name the tests give it."""
    name = "kbatch_tools_kafka_dist"
    mod = sys.modules.get(name)
    if mod is None:
        spec = importlib.util.spec_from_file_location(name, HERE / "kafka_dist.py")
        assert spec is not None and spec.loader is not None
        mod = importlib.util.module_from_spec(spec)
        sys.modules[name] = mod  # its dataclasses look their module up there
        spec.loader.exec_module(mod)
    return mod


def published(group: str, artifact: str) -> list[str]:
    """The versions Maven Central lists for an artifact ([] when it cannot be reached)."""
    url = f"{MAVEN_CENTRAL}{group.replace('.', '/')}/{artifact}/maven-metadata.xml"
    try:
        with urllib.request.urlopen(url, timeout=30) as resp:
            return re.findall(r"<version>([^<]+)</version>", resp.read().decode())
    except OSError:
        return []


def coordinates(what: str, spark: str) -> tuple[list[tuple[str, str, str]], str]:
    """([(groupId, artifactId, version)], a note on which Spark they were built for)."""
    if what == "delta":
        built, v = _pick(DELTA_FOR_SPARK, spark)
        return [("io.delta", "delta-spark_2.13", v), ("io.delta", "delta-storage", v)], f"Delta {v} (for Spark {built})"
    if what == "iceberg":
        built, v = _pick(ICEBERG_FOR_SPARK, spark)
        return ([("org.apache.iceberg", f"iceberg-spark-runtime-{built}_2.13", v)],
                f"Iceberg {v} (iceberg-spark-runtime-{built})")
    if what == "spark-avro":
        versions = [x for x in published("org.apache.spark", "spark-avro_2.13")
                    if "preview" not in x and x.split(".")[0] == spark.split(".")[0] and _key(x) <= _key(spark)]
        if spark in versions:
            v = spark
        elif versions:
            v = max(versions, key=_key)
        else:
            raise LakehouseFetchError(f"no spark-avro_2.13 for Spark {spark} on Maven Central (or it cannot be reached)")
        return [("org.apache.spark", "spark-avro_2.13", v)], f"spark-avro {v}"
    raise LakehouseFetchError(f"{what!r}: one of delta, iceberg, spark-avro")


def fetch(what: str, spark: str) -> tuple[list[Path], str]:
    """The jars of `what` for Spark `spark` (from the cache, else fetched now) and the note."""
    kd = kafka_dist_module()
    coords, note = coordinates(what, spark)
    out = []
    for g, a, v in coords:
        dest = cache_root() / g
        jar = dest / f"{a}-{v}.jar"
        if not jar.exists():
            with kd._locked(cache_root() / f".{a}-{v}.lock"):
                if not jar.exists():
                    why = kd.central_reachable()
                    if why is not None:
                        raise LakehouseFetchError(f"{g}:{a}:{v}: Maven Central cannot be reached ({why})")
                    dest.mkdir(parents=True, exist_ok=True)
                    cmd = [kd._mvn(), "-B", "-q", "dependency:copy", f"-Dartifact={g}:{a}:{v}",
                           f"-DoutputDirectory={dest}"]
                    try:
                        proc = subprocess.run(cmd, cwd=dest, capture_output=True, text=True, timeout=MVN_TIMEOUT_S)
                    except subprocess.TimeoutExpired:
                        raise LakehouseFetchError(f"{g}:{a}:{v}: mvn did not finish in {MVN_TIMEOUT_S} s") from None
                    if proc.returncode != 0 or not jar.exists():
                        tail = "\n".join((proc.stdout + proc.stderr).strip().splitlines()[-10:])
                        raise LakehouseFetchError(f"{g}:{a}:{v}: mvn exited {proc.returncode}:\n{tail}")
        out.append(jar)
    return out, note


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(prog="lakehouse_jars.py", description=__doc__.split("\n\n")[0])
    ap.add_argument("what", choices=["delta", "iceberg", "spark-avro"])
    ap.add_argument("--spark", help="the Spark version (default: the installed pyspark's)")
    args = ap.parse_args(argv)
    spark = args.spark
    if spark is None:
        import pyspark

        spark = pyspark.__version__
    try:
        jars, note = fetch(args.what, spark)
    except LakehouseFetchError as e:
        print(f"[lakehouse] {e}", file=sys.stderr)
        return 1
    print(f"[lakehouse] {note} for Spark {spark}", file=sys.stderr)
    print(",".join(str(j) for j in jars))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
