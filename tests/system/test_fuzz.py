"""The fuzz targets in CI: every seed replays on both backends, then each target runs briefly.

The long runs (python3 dev.py fuzz SECONDS) and their numbers are in fuzz/README.md.
"""
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from fuzz.targets import CYTHON, TARGETS  # noqa: E402

CORPUS = ROOT / "fuzz" / "corpus"


def seeds():
    for name in TARGETS:
        for f in sorted((CORPUS / name).glob("*")):
            yield pytest.param(name, f, id=f"{name}/{f.name}")


def test_both_backends_present():
    if CYTHON is None and os.environ.get("KBATCH_ALLOW_NO_CYTHON") != "1":
        pytest.fail("the Cython extension is not built: fuzz targets would compare nothing")


def test_every_target_has_seeds():
    assert all(list((CORPUS / name).glob("*")) for name in TARGETS)


@pytest.mark.parametrize("name,path", list(seeds()))
def test_seed_replays(name, path):
    TARGETS[name](path.read_bytes())


@pytest.mark.parametrize("name", list(TARGETS))
def test_brief_fuzz_run(name, tmp_path):
    pytest.importorskip("atheris")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT), str(ROOT / "src"), os.environ.get("PYTHONPATH", "")]))
    p = subprocess.run([sys.executable, "-m", "fuzz.run", name, "-max_total_time=4", "-timeout=10",
                        "-rss_limit_mb=2048", f"-artifact_prefix={tmp_path}/", str(tmp_path),
                        str(CORPUS / name)], capture_output=True, text=True, cwd=ROOT, env=env, timeout=120)
    assert p.returncode == 0, p.stdout[-2000:] + p.stderr[-4000:]


@pytest.mark.skipif(shutil.which("clang") is None, reason="the --fuzz build flavour needs clang (CI has gcc only)")
@pytest.mark.skipif(not (ROOT / "src" / "kbatch").is_dir(),
                    reason="builds kbatch from source: no source tree beside the tests (an installed package is tested)")
def test_fuzz_flavour_feeds_native_coverage(tmp_path):
    """KBATCH_FUZZ=1 (python3 dev.py build --fuzz): built with clang in a copy of the tree (never the
    in-place extension), kbatch._core hands libFuzzer its 8-bit counters, fuzz.run loads atheris'
    libFuzzer globally before importing it, and a short run drives both backends with no preload."""
    pytest.importorskip("atheris")
    shutil.copytree(ROOT / "src", tmp_path / "src",
                    ignore=shutil.ignore_patterns("*.so", "*.pyd", "*.c", "*.html", "__pycache__"))
    for f in ("setup.py", "pyproject.toml", "README.md"):  # pyproject maps the package to src/
        shutil.copy(ROOT / f, tmp_path)
    env = {k: v for k, v in os.environ.items() if k not in ("LD_PRELOAD", "KBATCH_SANITIZE", "KBATCH_DEBUG",
                                                             "KBATCH_COVERAGE")}
    b = subprocess.run([sys.executable, "setup.py", "-q", "build_ext", "--inplace"], cwd=tmp_path,
                       env=dict(env, KBATCH_FUZZ="1"), capture_output=True, text=True, timeout=900)
    assert b.returncode == 0, b.stderr[-4000:]
    env["PYTHONPATH"] = os.pathsep.join([str(tmp_path / "src"), str(ROOT)])
    new = tmp_path / "new"  # libFuzzer writes new inputs to its first corpus directory
    new.mkdir()
    p = subprocess.run([sys.executable, "-m", "fuzz.run", "varints", "-runs=2000", "-seed=1", "-timeout=10",
                        f"-artifact_prefix={tmp_path}/", str(new), str(CORPUS / "varints")],
                       capture_output=True, text=True, cwd=ROOT, env=env, timeout=300)
    log = p.stdout + p.stderr
    assert p.returncode == 0, log[-4000:]
    counters = [int(n) for n in re.findall(r"Loaded 1 modules\s+\((\d+) inline 8-bit counters", log)]
    assert counters and counters[0] > 1000, log[-4000:]  # the extension's edges, not just Python's
