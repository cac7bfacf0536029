"""kafka-segments with the executors' Python taken from a packed environment (spark.archives).

The recipe of docs/spark.md ("Shipping kbatch to executors") run for real, within a test budget:
a small venv holding only what Python workers import (kbatch and its runtime dependencies, no
pyspark: workers get it from $SPARK_HOME/python/lib, as on a cluster) is packed as tar.gz,
shipped with `spark.archives=<tar.gz>#environment` and run with
`PYSPARK_PYTHON=./environment/bin/python` in a `local-cluster` session, whose executors are
separate JVMs that unpack the archive in their own working directories, as on a real cluster.

The driver runs in a subprocess (this file as a script) with no PYTHONPATH, so a Python worker
can only import kbatch from the archive; the data source reports where its worker ran.
"""
import importlib.util
import json
import os
import shutil
import subprocess
import sys
import tarfile
import time
import venv

import pytest

pytest.importorskip("pyspark.sql.datasource")

pytestmark = pytest.mark.spark

# what executors import: kbatch, pyspark_kbatch (PySpark's discovery hook) and kbatch's runtime
# dependencies ([project] dependencies in pyproject.toml); pandas is not needed by these reads
PACKED = ("kbatch", "pyspark_kbatch", "numpy", "pyarrow", "lz4", "zstandard", "cramjam")
LEFT_OUT_DIRS = {"tests", "include", "__pycache__"}   # ~20 MB that workers never import
LEFT_OUT_SUFFIXES = (".c", ".pyx", ".pxd", ".pxi")      # Cython sources of kbatch; the .so is packed


def _left_out(info: tarfile.TarInfo):
    name = os.path.basename(info.name)
    if name in LEFT_OUT_DIRS or name.endswith(LEFT_OUT_SUFFIXES):
        return None
    return info


def pack_environment(out_dir: str) -> str:
    """A venv of the running interpreter plus PACKED, streamed into a .tar.gz (gzip level 1).

    Files go from this interpreter's site-packages (and kbatch from wherever it is imported,
    e.g. the in-place build under src/) straight into the tarball: no pip, no copies. Plain
    tarfile is enough: venv-pack would produce the same layout (it also leaves bin/python a link
    to the base interpreter, which must exist at the same path on every node) and its script
    rewriting is not needed here. Level 1 packs ~90 MB in ~4 s; level 6 takes ~3x longer.
    """
    env_dir = os.path.join(out_dir, "kbatch_env")
    venv.EnvBuilder(symlinks=True, with_pip=False).create(env_dir)
    site = "lib/python{}.{}/site-packages".format(*sys.version_info[:2])
    assert os.path.isdir(os.path.join(env_dir, site))
    archive = os.path.join(out_dir, "kbatch_env.tar.gz")
    with tarfile.open(archive, "w:gz", compresslevel=1) as tar:
        for entry in sorted(os.listdir(env_dir)):
            tar.add(os.path.join(env_dir, entry), arcname=entry, filter=_left_out)
        for name in PACKED:
            spec = importlib.util.find_spec(name)
            assert spec is not None, f"{name} is not importable here, so it cannot be packed"
            if spec.submodule_search_locations:
                path = list(spec.submodule_search_locations)[0]
                tar.add(path, arcname=f"{site}/{os.path.basename(path)}", filter=_left_out)
                if os.path.isdir(path + ".libs"):  # auditwheel's vendored libraries (numpy.libs)
                    tar.add(path + ".libs", arcname=f"{site}/{os.path.basename(path)}.libs")
            else:
                tar.add(spec.origin, arcname=f"{site}/{os.path.basename(spec.origin)}")
    return archive


def spark_home_in(tmp: str) -> str:
    """A SPARK_HOME of links to the real one, so that the local-cluster worker's `work/` folder
    (always <SPARK_HOME>/work there) is created under tmp, not inside site-packages/pyspark."""
    from pyspark.find_spark_home import _find_spark_home

    real, home = _find_spark_home(), os.path.join(tmp, "spark_home")
    os.makedirs(os.path.join(home, "work"))
    for entry in os.listdir(real):
        if entry != "work":
            os.symlink(os.path.join(real, entry), os.path.join(home, entry))
    return home


def _where(role: str, out_dir: str) -> None:
    """Write which Python this worker is, for the test to check (runs on Python workers)."""
    import numpy
    import pyarrow

    import kbatch
    import kbatch._backend

    report = {"role": role, "executable": sys.executable, "prefix": sys.prefix, "cwd": os.getcwd(),
              "kbatch": kbatch.__file__, "numpy": numpy.__file__, "pyarrow": pyarrow.__file__,
              "backend": kbatch._backend.BACKEND}
    with open(os.path.join(out_dir, f"{role}-{os.getpid()}.json"), "w") as f:
        json.dump(report, f)


def _driver(archive: str, data_dir: str, out_dir: str, kbatch_parent: str) -> None:
    """The Spark driver (run in a subprocess): reads data_dir twice, writes rows and reports."""
    sys.path.insert(0, kbatch_parent)  # the driver's kbatch; its workers get none from here
    import pyarrow as pa
    from pyspark import SparkFiles
    from pyspark.sql import SparkSession

    import kbatch._backend
    import kbatch.spark
    from kbatch.spark.datasource import KafkaSegmentsDataSource, KafkaSegmentsReader

    java_tmp = "-Djava.io.tmpdir=" + os.path.join(out_dir, "java_tmp")
    os.makedirs(os.path.join(out_dir, "java_tmp"))
    spark = (SparkSession.builder.master("local-cluster[1,2,1024]").appName("kbatch-packed-env")
             .config("spark.archives", archive + "#environment")
             .config("spark.local.dir", os.path.join(out_dir, "spark_local"))
             .config("spark.driver.extraJavaOptions", java_tmp).config("spark.executor.extraJavaOptions", java_tmp)
             .config("spark.ui.enabled", "false").config("spark.ui.showConsoleProgress", "false")
             .config("spark.sql.session.timeZone", "UTC").getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    # client mode: the driver's JVM plans Python data sources with a worker started from the same
    # PYSPARK_PYTHON, relative to the driver's working directory; spark.archives is unpacked on the
    # driver too (SparkFiles root), so link that copy in as ./environment
    driver_env = os.path.join(SparkFiles.getRootDirectory(), "environment")
    os.symlink(driver_env, "environment")

    reader = str(kbatch.spark.register(spark))  # the JVM reader, shipped to the executors' JVMs, when built
    t = time.time()
    table = (spark.read.format("kafka-segments").options(includeHeaders="true", includeBatchFields="true")
             .load(data_dir).toArrow())
    with pa.OSFile(os.path.join(out_dir, "rows.arrow"), "wb") as sink, pa.ipc.new_file(sink, table.schema) as w:
        w.write_table(table)
    read_s = time.time() - t

    reports = os.path.join(out_dir, "reports")
    os.makedirs(reports)

    class ReportingReader(KafkaSegmentsReader):
        """The real reader, noting which Python ran partitions() (driver) and read() (executors)."""

        def partitions(self):
            _where("plan", reports)
            return super().partitions()

        def read(self, partition):
            _where("read", reports)
            yield from super().read(partition)

    class ReportingSource(KafkaSegmentsDataSource):
        """Defined here, so cloudpickle ships it by value: workers have only the archive's kbatch."""

        @classmethod
        def name(cls):
            return "kafka-segments-reporting"

        def reader(self, schema):
            return ReportingReader(self.options, schema)

    spark.dataSource.register(ReportingSource)
    rows = spark.read.format("kafka-segments-reporting").load(data_dir).count()
    with open(os.path.join(out_dir, "driver.json"), "w") as f:
        json.dump({"driver_env": os.path.realpath(driver_env), "rows": rows, "read_s": read_s,
                   "backend": kbatch._backend.BACKEND, "kbatch": kbatch.__file__, "reader": reader}, f)
    spark.stop()


def _inside(path: str, root: str) -> bool:
    path, root = os.path.realpath(path), os.path.realpath(root)
    return os.path.commonpath([path, root]) == root


def test_kafka_segments_reads_with_a_packed_environment(tmp_path):
    """Executors (and the driver's planning worker) run kbatch from the unpacked archive, never
    from this interpreter's environment, and the rows equal kbatch.decode_columns."""
    import numpy as np
    import pyarrow as pa

    import kbatch
    from kbatch import demo
    from spark.test_spark import NOW, _same, _sorted, local_table

    data_dir = str(tmp_path / "logs")
    demo.generate(data_dir, records=3000, now_ms=NOW, segment_bytes=24 * 1024)
    t = time.time()
    archive = pack_environment(str(tmp_path))
    pack_s, archive_mb = time.time() - t, os.path.getsize(archive) / 1e6
    home = spark_home_in(str(tmp_path))
    out_dir, cwd = tmp_path / "out", tmp_path / "driver_cwd"
    out_dir.mkdir()
    cwd.mkdir()

    env = {k: v for k, v in os.environ.items()
           if k not in ("PYTHONPATH", "PYSPARK_DRIVER_PYTHON", "PYSPARK_SUBMIT_ARGS", "SPARK_LOCAL_DIRS")}
    env.update(SPARK_HOME=home, PYSPARK_PYTHON="./environment/bin/python")
    env.setdefault("SPARK_LOCAL_IP", "127.0.0.1")  # master, worker and executor talk over loopback
    kbatch_parent = os.path.dirname(os.path.dirname(os.path.abspath(kbatch.__file__)))
    proc = subprocess.run([sys.executable, os.path.abspath(__file__), archive, data_dir, str(out_dir), kbatch_parent],
                          cwd=str(cwd), env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, f"driver failed:\n{proc.stdout[-3000:]}\n{proc.stderr[-6000:]}"
    driver = json.loads((out_dir / "driver.json").read_text())

    reports = [json.loads(p.read_text()) for p in sorted((out_dir / "reports").iterdir())]
    reads = [r for r in reports if r["role"] == "read"]
    plans = [r for r in reports if r["role"] == "plan"]
    assert reads and plans
    for r in reads:  # executor workers: the archive unpacked by the executor in its own work dir
        assert os.path.basename(r["prefix"]) == "environment", r
        assert _inside(r["prefix"], os.path.join(home, "work")) and _inside(r["cwd"], os.path.join(home, "work")), r
    for r in plans:  # planning worker on the driver: the driver's copy, via ./environment
        assert os.path.realpath(r["prefix"]) == driver["driver_env"], r
    for r in reads + plans:
        assert os.path.dirname(os.path.dirname(r["executable"])) == r["prefix"], r
        for module, here in (("kbatch", kbatch), ("numpy", np), ("pyarrow", pa)):
            assert _inside(r[module], r["prefix"]), (module, r)
            assert os.path.realpath(r[module]) != os.path.realpath(here.__file__), (module, r)
        assert r["backend"] == driver["backend"], r  # the compiled core travels in the archive

    expect = local_table(data_dir, include_headers=True, batch_fields=True)
    with pa.OSFile(str(out_dir / "rows.arrow"), "rb") as f:
        rows = pa.ipc.open_file(f).read_all()
    _same(_sorted(rows), expect)  # read by the JVM reader on the executors when the jar is built
    assert driver["rows"] == expect.num_rows  # the Python reader, from the archive
    import kbatch.spark

    assert ("JVM reader" in driver["reader"]) == (kbatch.spark.jar_path() is not None), driver["reader"]
    # pytest keeps the last runs' tmp_path: drop the ~90 MB archive and ~250 MB unpacked copy
    os.remove(archive)
    shutil.rmtree(os.path.join(home, "work"))
    print(f"packed {archive_mb:.0f} MB in {pack_s:.1f}s; driver read {driver['read_s']:.1f}s")


if __name__ == "__main__":
    _driver(*sys.argv[1:5])
