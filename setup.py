"""Build the Cython core (kbatch._core).

Build switches (environment variables, read at build time):
  KBATCH_DEBUG=1     bounds and wraparound checks everywhere, -O0 -g (the debug build)
  KBATCH_SANITIZE=1  AddressSanitizer + UndefinedBehaviorSanitizer (for tests and fuzzing)
  KBATCH_COVERAGE=1  Cython line tracing, for coverage of the .pyx and for coverage-guided fuzzing
"""
import os
import sys

import numpy
from Cython.Build import cythonize
from setuptools import Extension, setup


def flag(name: str) -> bool:
    return os.environ.get(name, "") not in ("", "0")


debug, sanitize, coverage = flag("KBATCH_DEBUG"), flag("KBATCH_SANITIZE"), flag("KBATCH_COVERAGE")

compile_args, link_args, macros = [], [], [("NPY_NO_DEPRECATED_API", "NPY_1_7_API_VERSION")]
if sys.platform != "win32":
    compile_args += ["-O0", "-g"] if (debug or sanitize) else ["-O3"]
if sanitize:
    san = ["-fsanitize=address,undefined", "-fno-omit-frame-pointer", "-fno-sanitize-recover=undefined"]
    compile_args += san
    link_args += san
if coverage:
    macros += [("CYTHON_TRACE_NOGIL", "1"), ("CYTHON_TRACE", "1")]

directives = {
    "language_level": "3",
    "boundscheck": debug,
    "wraparound": debug,
    "initializedcheck": debug,
    "cdivision": True,
    "embedsignature": True,
    "linetrace": coverage,
}

ext = Extension(
    "kbatch._core",
    ["src/kbatch/_core.pyx"],
    include_dirs=[numpy.get_include(), "src/kbatch"],
    define_macros=macros,
    extra_compile_args=compile_args,
    extra_link_args=link_args,
)

# kbatch.compat's compiled fast paths (decode/encode straight into the Kafka clients' objects)
compat_ext = Extension(
    "kbatch.compat._speedups",
    ["src/kbatch/compat/_speedups.pyx"],
    extra_compile_args=compile_args,
    extra_link_args=link_args,
)

setup(ext_modules=cythonize([ext, compat_ext], compiler_directives=directives, annotate=flag("KBATCH_ANNOTATE")))
