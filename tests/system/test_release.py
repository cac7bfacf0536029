"""What a user meets on day one, installed from a wheel or the sdist: the version, the warning when
the compiled core is missing, the extras (pyarrow optional), and an sdist that carries the suite.

The full release check (build the sdist, a wheel from it, auditwheel repair, strip, install into
fresh venvs without a compiler, run this suite there) is `python3 dev.py wheel` (tools/release.py):
it builds and installs, so it is too slow for the default tier.
"""
from __future__ import annotations

import importlib
import importlib.metadata
import importlib.util
import os
import subprocess
import sys
import tarfile
import textwrap
import types
from pathlib import Path

import pytest

import kbatch
from kbatch import cli

ROOT = Path(__file__).resolve().parents[2]
# the kbatch under test (an installed wheel, or src/ of a checkout) for the child processes
KBATCH_PARENT = str(Path(kbatch.__file__).resolve().parents[1])


def run_python(code: str, env: dict[str, str] | None = None, **kw) -> subprocess.CompletedProcess[str]:
    full_env = {**os.environ, "PYTHONPATH": KBATCH_PARENT, **(env or {})}
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True,
                          env=full_env, timeout=120, **kw)


# ------------------------------------------------------------------------------------ version
def test_version_is_the_distribution_version():
    assert kbatch.__version__ == importlib.metadata.version("kafka-kbatch")


def test_kbatch_version(capsys):
    assert cli.main(["--version"]) == 0
    out = capsys.readouterr().out
    assert out == f"kbatch {kbatch.__version__} (backend: {kbatch.BACKEND}, Python {sys.version.split()[0]})\n"
    assert cli.main(["-V"]) == 0


def test_kbatch_version_without_the_cli_extra(monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, "typer", None)  # import typer -> ImportError
    assert cli.main(["--version"]) == 0
    assert capsys.readouterr().out.startswith(f"kbatch {kbatch.__version__} ")
    assert cli.main(["verify", "."]) == 2  # everything else still needs the extra


@pytest.mark.parametrize("module", ["kbatch", "kbatch.cli"])
def test_python_m_version(module):
    proc = subprocess.run([sys.executable, "-m", module, "--version"], capture_output=True, text=True, timeout=60,
                          env={**os.environ, "PYTHONPATH": KBATCH_PARENT})
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith(f"kbatch {kbatch.__version__} (backend: ")


# ------------------------------------------------------------------------------------ missing compiled core
NO_CORE = """
    import sys, warnings
    warnings.simplefilter("default")
    sys.modules["kbatch._core"] = None   # what a checkout without a build (or a broken wheel) looks like
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        import kbatch
        import kbatch.cli, kbatch.log.validator, kbatch.log   # more imports, still one warning
    print(kbatch.BACKEND)
    for w in caught:
        print(w.category.__name__, "|", w.message)
"""


def test_missing_core_warns_once_and_says_how_to_fix():
    proc = run_python(NO_CORE, env={"KBATCH_BACKEND": "auto"})
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert lines[0] == "python"
    warned = [line for line in lines[1:] if line.startswith("NoCompiledCoreWarning")]
    assert len(warned) == 1
    assert "kbatch._core is not importable" in warned[0]
    assert "KBATCH_BACKEND=python" in warned[0] and "python3 dev.py build" in warned[0]


def test_missing_core_asked_for_python_is_quiet():
    proc = run_python(NO_CORE, env={"KBATCH_BACKEND": "python"})
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines() == ["python"]


def test_missing_core_asked_for_cython_fails():
    proc = run_python(NO_CORE, env={"KBATCH_BACKEND": "cython"})
    assert proc.returncode != 0
    assert "KBATCH_BACKEND=cython but the compiled extension kbatch._core is not importable" in proc.stderr


def test_import_does_not_warn_when_the_core_is_there():
    if kbatch.BACKEND != "cython":
        pytest.skip("this environment has no compiled core")
    proc = run_python("import warnings; warnings.simplefilter('error'); import kbatch; print(kbatch.BACKEND)",
                      env={"KBATCH_BACKEND": "auto"})
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "cython"


# ------------------------------------------------------------------------------------ pyarrow is optional
WITHOUT_PYARROW = """
    import io, json, sys
    sys.modules["pyarrow"] = None        # pyarrow unimportable, as without the arrow extra
    import kbatch
    from kbatch.cli import main

    T0 = 1_714_554_000_000
    b = kbatch.BatchBuilder(compression=kbatch.Compression.ZSTD)
    for i in range(10):
        b.append(T0 + i, b"k%d" % (i % 3), b"v%d" % i, headers=[("h", b"x")])
    data = b.build()
    assert [bytes(r.value) for batch in kbatch.iter_batches(data) for r in batch] == [b"v%d" % i for i in range(10)]
    kbatch.LogValidator(before_max_ms=3_600_000, after_max_ms=3_600_000).validate(data, now_ms=T0)

    log = kbatch.Log.create(sys.argv[1] + "/orders-0", kbatch.LogConfig(segment_bytes=1 << 20))
    for n in range(3):
        log.append(data, now_ms=T0)
    log.close()
    assert kbatch.Log.open(sys.argv[1] + "/orders-0").end_offset() == 30

    for args in (["dump", sys.argv[1] + "/orders-0/00000000000000000000.log", "--deep-iteration"],
                 ["verify", sys.argv[1], "-q"], ["offsets", sys.argv[1], "--time", str(T0 + 5)],
                 ["validate", sys.argv[1], "--now", str(T0), "-q"], ["reindex", sys.argv[1], "-q"],
                 ["compact", sys.argv[1] + "/orders-0", "--now", str(T0 + 10**9), "-q"]):
        assert main(args) == 0, args
    # export / import write and read Parquet: without pyarrow they say so and exit 2, as without typer
    err = io.StringIO()
    sys.stderr, saved = err, sys.stderr
    try:
        assert main(["export", sys.argv[1], "--to", sys.argv[1] + "/out"]) == 2
        assert main(["import", sys.argv[1] + "/rows.jsonl", "--to", sys.argv[1] + "/in"]) == 2
    finally:
        sys.stderr = saved
    assert err.getvalue().count("needs pyarrow, which is not installed: pip install pyarrow") == 2, err.getvalue()
    try:
        kbatch.decode_columns(data, topic="orders", partition=0)
    except kbatch.MissingDependencyError as e:
        print("columns:", e)
    assert "pyarrow" not in sys.modules or sys.modules["pyarrow"] is None
"""


def test_codec_storage_and_cli_run_without_pyarrow(tmp_path):
    pytest.importorskip("typer")
    proc = subprocess.run([sys.executable, "-c", textwrap.dedent(WITHOUT_PYARROW), str(tmp_path)], capture_output=True,
                          text=True, timeout=120, env={**os.environ, "PYTHONPATH": KBATCH_PARENT})
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert ("columns: kbatch's Arrow columns (kbatch.columns.decode, decode_columns) needs pyarrow, which is not "
            "installed: pip install pyarrow (kafka-kbatch's 'arrow' extra)") in proc.stdout


def test_missing_pyarrow_is_a_kbatch_error_and_an_import_error(monkeypatch):
    monkeypatch.setitem(sys.modules, "pyarrow", None)
    monkeypatch.delitem(sys.modules, "kbatch.columns.decode", raising=False)
    with pytest.raises(ImportError) as info:
        importlib.import_module("kbatch.columns.decode")
    assert isinstance(info.value, kbatch.MissingDependencyError) and isinstance(info.value, kbatch.KBatchError)
    assert info.value.name == "pyarrow"


def _package(name: str, **attrs: object) -> types.ModuleType:
    mod = types.ModuleType(name)
    mod.__path__ = []  # a package, so its submodules may be looked up
    mod.__dict__.update(attrs)
    return mod


# what is importable -> (the package named, the message); None stands for "not installed"
SPARK_MISSING = {
    "no pyspark": ({"pyspark": None}, "pyspark",
                   "kbatch's Spark data source (kbatch.spark) needs pyspark>=4.1, which is not installed: "
                   "pip install 'pyspark>=4.1' (kafka-kbatch's 'spark' extra)"),
    "pyspark 3": ({"pyspark": _package("pyspark", __version__="3.5.1"), "pyspark.sql": _package("pyspark.sql"),
                   "pyspark.sql.datasource": None}, "pyspark",
                  "kbatch's Spark data source (kbatch.spark) needs pyspark>=4.1, but pyspark 3.5.1 is installed: "
                  "pip install 'pyspark>=4.1' (kafka-kbatch's 'spark' extra)"),
    "no pyarrow": ({"pyspark": _package("pyspark", __version__="4.1.0"), "pyspark.sql": _package("pyspark.sql"),
                    "pyspark.sql.datasource": _package("pyspark.sql.datasource"), "pyarrow": None}, "pyarrow",
                   "kbatch's Spark data source (kbatch.spark) needs pyarrow, which is not installed: "
                   "pip install pyarrow (kafka-kbatch's 'spark' extra)"),
}


@pytest.mark.parametrize("case", SPARK_MISSING)
def test_missing_spark_extra_is_a_kbatch_error_naming_the_extra(case, monkeypatch):
    """`import kbatch.spark` without the spark extra says which package and which extra, as
    kbatch.columns.decode does for pyarrow; still an ImportError (what `except ImportError` expects)."""
    modules, package, message = SPARK_MISSING[case]
    for name in [m for m in sys.modules if m == "kbatch.spark" or m.startswith("kbatch.spark.")]:
        monkeypatch.delitem(sys.modules, name)
    for name, mod in modules.items():
        monkeypatch.setitem(sys.modules, name, mod)
    with pytest.raises(ImportError) as info:
        importlib.import_module("kbatch.spark")
    assert isinstance(info.value, kbatch.MissingDependencyError) and isinstance(info.value, kbatch.KBatchError)
    assert info.value.name == package
    assert str(info.value) == message


# ------------------------------------------------------------------------------------ the sdist
def test_sdist_carries_what_the_suite_needs(tmp_path):
    """`setup.py sdist` (what `python -m build --sdist` runs) packs the build inputs, LICENSE,
    py.typed and stubs, and every file of tests/ and the other folders the suite reads."""
    if not (ROOT / "setup.py").exists() or not (ROOT / ".git").exists():
        pytest.skip("not a source checkout (this suite runs from an sdist or a copy)")
    proc = subprocess.run([sys.executable, "setup.py", "-q", "sdist", "-d", str(tmp_path)], cwd=ROOT,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    (sdist,) = tmp_path.glob("kafka_kbatch-*.tar.gz")
    with tarfile.open(sdist) as tar:
        names = {n.split("/", 1)[1] for n in tar.getnames() if "/" in n}
    tracked = subprocess.run(["git", "ls-files", "tests", "fuzz", "docs", "tools", "src"], cwd=ROOT,
                             capture_output=True, text=True, check=True).stdout.split()
    need = {f for f in tracked if not f.endswith((".c", ".so"))}
    need |= {"LICENSE", "README.md", "pyproject.toml", "setup.py", "dev.py", "src/kbatch/py.typed",
             "src/kbatch/_core.pyi", "tests/conftest.py", "tests/support/vectors.py"}
    assert sorted(need - names) == []
    assert not [n for n in names if n.endswith((".so", ".pyc"))]


def _maven_module(root: Path = ROOT):
    """java/maven.py of a tree (setup.py's way to the JVM reader's jar)."""
    spec = importlib.util.spec_from_file_location(f"kbatch_java_maven_{abs(hash(str(root)))}", root / "java" / "maven.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _checkout_only():
    if not (ROOT / "setup.py").exists() or not (ROOT / ".git").exists():
        pytest.skip("not a source checkout (this suite runs from an sdist or a copy)")


def _sdist_with_jar(tmp_path) -> Path:
    _checkout_only()
    mv = _maven_module()
    if not mv.built_from_these_sources(mv.IN_PLACE):
        try:
            mv.find_mvn()
        except mv.JarUnavailable as e:
            pytest.skip(f"the JVM reader's jar cannot be built here: {e}")
    proc = subprocess.run([sys.executable, "setup.py", "-q", "sdist", "-d", str(tmp_path)], cwd=ROOT,
                          capture_output=True, text=True, timeout=600, env={**os.environ, "KBATCH_JAR": "1"})
    assert proc.returncode == 0, proc.stderr[-3000:]
    (sdist,) = tmp_path.glob("kafka_kbatch-*.tar.gz")
    return sdist


def test_sdist_carries_the_jvm_reader_jar(tmp_path):
    """The sdist holds the compiled jar, built from the sources it holds (the Maven project and its
    tests included): a build from the sdist ships the JVM reader with no JDK or Maven."""
    sdist = _sdist_with_jar(tmp_path)
    with tarfile.open(sdist) as tar:
        names = tar.getnames()
        (member,) = [n for n in names if n.endswith("/java/prebuilt/kbatch-kafka-segments.jar")]
        tar.extractall(tmp_path / "x", filter="data")
    assert any(n.endswith("/java/kafka-segments/pom.xml") for n in names)
    assert any("/java/kafka-segments/src/test/java/" in n for n in names)
    assert not any("/java/kafka-segments/target/" in n for n in names)
    (root,) = (tmp_path / "x").iterdir()
    sdist_mv = _maven_module(root)
    assert sdist_mv.built_from_these_sources(sdist_mv.PREBUILT)  # the digest of the sdist's own sources
    assert sdist_mv.source_digest() == _maven_module().source_digest()
    # with no way to compile (no Maven), build() uses the carried jar
    out = tmp_path / "out"
    env = {**os.environ, "KBATCH_JAR": "1", "KBATCH_MVN": str(tmp_path / "no-mvn")}
    proc = subprocess.run([sys.executable, "-c", "import sys; sys.path.insert(0, 'java'); import maven; "
                           f"print(maven.build({str(out)!r}, '0'))"], cwd=root, env=env,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert "the one the sdist carries" in proc.stdout
    assert (out / "kbatch-kafka-segments.jar").read_bytes() == (root / member.split("/", 1)[1]).read_bytes()


def test_a_build_without_maven_says_why_and_how_to_fix_it(tmp_path):
    """No JDK or no Maven: the build goes on without the jar, prints why and the fix, and leaves the
    reason in the package (jars/NO_JAR.txt) for kbatch.spark.register() to repeat."""
    _checkout_only()
    out = tmp_path / "jars"
    out.mkdir()
    (out / "kbatch-kafka-segments.jar").write_bytes(b"PK\x05\x06" + bytes(18))  # of other sources
    env = {**os.environ, "KBATCH_JAR": "auto", "KBATCH_MVN": "", "PATH": str(tmp_path / "empty"),
           "JAVA_HOME": str(tmp_path / "no-jdk")}
    proc = subprocess.run([sys.executable, "-c", "import sys; sys.path.insert(0, 'java'); import maven; "
                           f"print(maven.build({str(out)!r}, '0'))"], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert "WARNING: the JVM reader's jar is not built (no JDK" in proc.stdout
    assert "apt-get install -y openjdk-17-jdk-headless maven" in proc.stdout
    assert proc.stdout.rstrip().endswith("None")
    assert (out / "NO_JAR.txt").read_text().startswith("no JDK (javac 17 or newer on PATH or in JAVA_HOME), when it was built")
    assert not (out / "kbatch-kafka-segments.jar").exists()
    # KBATCH_JAR=1: the same is an error
    proc = subprocess.run([sys.executable, "-c", "import sys; sys.path.insert(0, 'java'); import maven; "
                           f"maven.build({str(out)!r}, '0')"], cwd=ROOT, env={**env, "KBATCH_JAR": "1"},
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode != 0 and "KBATCH_JAR=1 and the JVM reader's jar cannot be built: no JDK" in proc.stderr


def _jvm_reader_after_pip_install(tmp_path, target: str) -> str:
    """`pip install --no-deps <target>` (pip's isolated build: no pyspark in it) into a fresh venv;
    returns what kbatch.spark.register() says there."""
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=300)
    vpy = venv / "bin" / "python"
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV", "KBATCH_JAR", "KBATCH_MVN")}
    proc = subprocess.run([str(vpy), "-m", "pip", "install", "-q", "--no-deps", target], env=env,
                          capture_output=True, text=True, timeout=1800)
    assert proc.returncode == 0, proc.stderr[-3000:]
    # kbatch from the fresh venv; pyspark, pyarrow and numpy from this interpreter's site-packages
    # (after the venv's own), so no second copy of pyspark is downloaded
    import sysconfig

    site = subprocess.run([str(vpy), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                          capture_output=True, text=True, check=True).stdout.strip()
    Path(site, "zz_kbatch_test_deps.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    code = textwrap.dedent("""
        import kbatch, kbatch.spark
        from pyspark.sql import SparkSession
        assert kbatch.__file__.startswith(%r), kbatch.__file__
        spark = SparkSession.builder.master("local[1]").config("spark.ui.enabled", "false").getOrCreate()
        reader = kbatch.spark.register(spark)
        print(reader.is_jvm, reader)
        spark.stop()
    """ % str(venv))
    proc = subprocess.run([str(vpy), "-c", code], env=env, capture_output=True, text=True, timeout=600,
                          cwd=str(tmp_path))
    assert proc.returncode == 0, proc.stderr[-3000:]
    return proc.stdout


@pytest.mark.skipif(os.environ.get("KBATCH_RELEASE") != "1",
                    reason="the release tier (KBATCH_RELEASE=1): an isolated build of the sdist, minutes")
def test_sdist_install_in_a_fresh_venv_gets_the_jvm_reader(tmp_path):
    """An sdist install gets the JVM reader (the jar it carries), not the Python fallback."""
    pytest.importorskip("pyspark")
    out = _jvm_reader_after_pip_install(tmp_path, str(_sdist_with_jar(tmp_path)))
    assert out.startswith("True kafka-segments: JVM reader"), out


@pytest.mark.skipif(os.environ.get("KBATCH_RELEASE") != "1",
                    reason="the release tier (KBATCH_RELEASE=1): an isolated build of the checkout, minutes")
def test_checkout_install_in_a_fresh_venv_gets_the_jvm_reader(tmp_path):
    """`pip install .` from a checkout (isolated: no pyspark in the build) compiles the jar with Maven,
    which fetches Spark's jars itself: the JVM reader, where a JDK and Maven are present."""
    pytest.importorskip("pyspark")
    _checkout_only()
    mv = _maven_module()
    try:
        mv.find_mvn()
    except mv.JarUnavailable as e:
        pytest.skip(f"the JVM reader's jar cannot be built here: {e}")
    out = _jvm_reader_after_pip_install(tmp_path, str(ROOT))
    assert out.startswith("True kafka-segments: JVM reader"), out


def test_license_is_apache_2():
    path = ROOT / "LICENSE"
    if not path.exists():  # an installed wheel: the license travels in the dist-info
        dist = importlib.metadata.distribution("kafka-kbatch")
        files = [f for f in dist.files or () if f.name == "LICENSE"]
        assert files, "no LICENSE in the installed distribution"
        text = files[0].read_text()
    else:
        text = path.read_text()
    assert "Apache License" in text and "Version 2.0, January 2004" in text
    assert importlib.metadata.metadata("kafka-kbatch")["License-Expression"] == "Apache-2.0"
