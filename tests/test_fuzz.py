"""The fuzz targets in CI: every seed replays on both backends, then each target runs briefly.

The long runs (python3 dev.py fuzz SECONDS) and their numbers are in fuzz/README.md.
"""
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
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
