"""The C that Cython generates from kbatch's .pyx/.pxi compiles without a warning under
`gcc -Wall -Werror` (a lint of the C source, as msgspec's test_cpylint is). A warning there has
been a real flaw in the .pxi before: a pointer's const dropped by a conditional expression, an
output a helper left unset on one path. -O1 is enough for gcc's flow analysis (maybe-uninitialized
after inlining) and keeps this to a few seconds.

Needs a source checkout built in place (python3 dev.py build) and gcc; skipped otherwise (an
installed wheel has no generated C)."""
from __future__ import annotations

import shutil
import subprocess
import sysconfig
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
KBATCH_SRC = ROOT / "src" / "kbatch"
GENERATED = {KBATCH_SRC / "_core.c": [KBATCH_SRC / "_core.pyx", *KBATCH_SRC.glob("*.pxi"), KBATCH_SRC / "_core.pxd"],
             KBATCH_SRC / "compat" / "_speedups.c": [KBATCH_SRC / "compat" / "_speedups.pyx"],
             KBATCH_SRC / "values" / "_avro_kernel.c": [KBATCH_SRC / "values" / "_avro_kernel.pyx"],
             KBATCH_SRC / "values" / "_protobuf_kernel.c": [KBATCH_SRC / "values" / "_protobuf_kernel.pyx"]}


@pytest.mark.parametrize("c_file", list(GENERATED), ids=lambda p: p.name)
def test_generated_c_compiles_without_warnings(c_file: Path, tmp_path):
    gcc = shutil.which("gcc")
    if gcc is None or not c_file.exists():
        pytest.skip("needs gcc and a source checkout built in place (python3 dev.py build)")
    newest = max(p.stat().st_mtime for p in GENERATED[c_file] if p.exists())
    assert c_file.stat().st_mtime >= newest, f"{c_file.name} is older than its sources: python3 dev.py build"
    import numpy

    cmd = [gcc, "-O1", "-fPIC", "-Wall", "-Werror", "-c", str(c_file), "-o", str(tmp_path / "out.o"),
           f"-I{sysconfig.get_paths()['include']}", f"-I{numpy.get_include()}", f"-I{KBATCH_SRC}",
           "-DNPY_NO_DEPRECATED_API=NPY_1_7_API_VERSION"]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-4000:]
