"""kbatch's types, as a user's type checker sees them: `py.typed`, the annotations and the stubs of
the compiled modules.

- tests/system/typing/user_ok.py, a user's script over the whole API (codec, validation, Log, LogConfig,
  compact), must pass `mypy --strict`;
- each tests/system/typing/bug_*.py plants one mistake users make, marked `# E: <mypy error code>` on its
  line; mypy must report exactly that code on that line (so a stub or annotation that turns into
  `Any` fails here);
- the stubs of the compiled modules (_core.pyi, compat/_speedups.pyi) are complete and true:
  mypy's stubtest compares them with the built extensions (tests/system/typing/stubtest-allowlist.txt
  names what Cython adds that is not API).

One mypy run checks every script (about 10 s warm, more on a cold cache).
"""
from __future__ import annotations

import importlib.util
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

import kbatch

HERE = Path(__file__).resolve().parent / "typing"
BUGS = sorted(HERE.glob("bug_*.py"))
KBATCH_PARENT = str(Path(kbatch.__file__).resolve().parents[1])
MARK = re.compile(r"#\s*E:\s*([\w-]+)")

MYPY_INI = """\
[mypy]
strict = True
show_error_codes = True
# kbatch's own modules are not what is checked here, only the types they give a user
[mypy-kbatch.*]
ignore_errors = True
[mypy-pyspark.*,pyarrow.*,kafka.*,aiokafka.*,lz4.*,zstandard.*,cramjam.*,snappy.*,typer.*,rich.*]
ignore_missing_imports = True
"""


@pytest.fixture(scope="module")
def mypy_report(tmp_path_factory) -> dict[str, list[tuple[int, str, str]]]:
    """file name -> [(line, code, message)] from one `mypy --strict` run over every script."""
    if importlib.util.find_spec("mypy") is None:
        pytest.fail("mypy is not installed (it is in the test extra)")
    tmp = tmp_path_factory.mktemp("mypy")
    ini = tmp / "mypy.ini"
    ini.write_text(MYPY_INI)
    cache = Path(os.environ.get("KBATCH_MYPY_CACHE", tmp / "cache"))
    files = [HERE / "user_ok.py", *BUGS]
    proc = subprocess.run([sys.executable, "-m", "mypy", "--config-file", str(ini), "--cache-dir", str(cache),
                           "--no-error-summary", "--python-executable", sys.executable, *map(str, files)],
                          capture_output=True, text=True, timeout=600, cwd=tmp,
                          env={**os.environ, "MYPYPATH": ""})
    if proc.returncode not in (0, 1) or proc.stderr.strip():
        pytest.fail(f"mypy did not run: {proc.returncode}\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}")
    report: dict[str, list[tuple[int, str, str]]] = {f.name: [] for f in files}
    for line in proc.stdout.splitlines():
        m = re.match(r"^(.*?):(\d+): error: (.*?)(?:\s+\[([\w-]+)\])?$", line)
        if m:
            report.setdefault(Path(m.group(1)).name, []).append((int(m.group(2)), m.group(4) or "", m.group(3)))
    return report


def test_kbatch_is_typed():
    assert (Path(kbatch.__file__).parent / "py.typed").exists()
    assert (Path(kbatch.__file__).parent / "_core.pyi").exists()
    assert (Path(kbatch.__file__).parent / "compat" / "_speedups.pyi").exists()


def test_lazy_names_are_exported():
    assert set(kbatch._LAZY) <= set(kbatch.__all__)  # type checkers read __all__ literally


def test_user_script_passes_strict(mypy_report):
    assert mypy_report["user_ok.py"] == []


def test_user_script_runs(tmp_path):
    """What the types promise, the script does: it runs as written against this kbatch."""
    proc = subprocess.run([sys.executable, str(HERE / "user_ok.py")], capture_output=True, text=True, timeout=120,
                          cwd=tmp_path, env={**os.environ, "PYTHONPATH": KBATCH_PARENT})
    assert proc.returncode == 0, proc.stderr[-3000:]


def test_there_are_planted_bugs_of_every_kind():
    codes = {MARK.search(f.read_text()).group(1) for f in BUGS}  # type: ignore[union-attr]
    assert len(BUGS) >= 10
    assert {"arg-type", "operator", "union-attr", "comparison-overlap", "attr-defined", "call-arg"} <= codes


@pytest.mark.parametrize("bug", BUGS, ids=[b.name for b in BUGS])
def test_planted_bug_is_caught(bug: Path, mypy_report):
    expected = [(n, MARK.search(line).group(1))  # type: ignore[union-attr]
                for n, line in enumerate(bug.read_text().splitlines(), 1) if MARK.search(line)]
    assert expected, f"{bug.name} marks no line with '# E: <code>'"
    found = [(line, code) for line, code, _ in mypy_report[bug.name]]
    assert found == expected, f"mypy said: {mypy_report[bug.name]}"


# every kbatch module is fully annotated and passes `mypy --strict` (keep it so): the list is the tree
def _all_modules() -> list[str]:
    root = Path(kbatch.__file__).resolve().parent
    names = []
    for f in sorted(root.rglob("*.py")):
        parts = f.relative_to(root.parent).with_suffix("").parts
        names.append(".".join(parts[:-1] if parts[-1] == "__init__" else parts))
    return names


STRICT_MODULES = _all_modules()
# third-party packages without type information (Any to mypy)
UNTYPED = "lz4.*,cramjam.*,zstandard.*,pyarrow.*,typer.*,rich.*,kafka.*,aiokafka.*,py4j.*,pandas.*,fsspec.*,plotly.*"


def _checkable(modules: list[str]) -> list[str]:
    """The modules whose dependencies are installed: without the spark extra (the wheel's test run),
    kbatch.spark and the demo are checked where it is (python3 dev.py test)."""
    if importlib.util.find_spec("pyspark") is not None:
        return modules
    return [m for m in modules if m not in ("kbatch.spark", "kbatch.demo") and not m.startswith("kbatch.spark.")]


def test_annotated_modules_pass_strict(tmp_path):
    ini = tmp_path / "mypy.ini"
    ini.write_text(f"[mypy]\nstrict = True\n[mypy-{UNTYPED}]\nignore_missing_imports = True\n")
    proc = subprocess.run([sys.executable, "-m", "mypy", "--config-file", str(ini), "--follow-imports=silent",
                           "--cache-dir", str(tmp_path / "cache"), "--python-executable", sys.executable,
                           *[arg for m in _checkable(STRICT_MODULES) for arg in ("-m", m)]],
                          capture_output=True, text=True, timeout=600, cwd=tmp_path,
                          env={**os.environ, "MYPYPATH": ""})
    assert proc.returncode == 0, proc.stdout[-5000:] + proc.stderr[-2000:]


def test_stubs_match_the_compiled_modules(tmp_path):
    modules = ["kbatch._core", "kbatch.compat._speedups"]
    for module in modules:
        if importlib.util.find_spec(module) is None:
            pytest.fail(f"{module} is not built")
    ini = tmp_path / "mypy.ini"
    ini.write_text("[mypy]\n")
    proc = subprocess.run([sys.executable, "-m", "mypy.stubtest", *modules, "--allowlist",
                           str(HERE / "stubtest-allowlist.txt"), "--mypy-config-file", str(ini)],
                          capture_output=True, text=True, timeout=300, cwd=tmp_path,
                          env={**os.environ, "MYPYPATH": ""})
    assert proc.returncode == 0, proc.stdout[-5000:] + proc.stderr[-2000:]
