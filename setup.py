"""Build the Cython core (kbatch._core).

Build switches (environment variables, read at build time):
  KBATCH_DEBUG=1     bounds and wraparound checks everywhere, -O0 -g (the debug build)
  KBATCH_SANITIZE=1  AddressSanitizer + UndefinedBehaviorSanitizer (for tests and fuzzing)
  KBATCH_COVERAGE=1  Cython line tracing, for coverage of the .pyx and for coverage-guided fuzzing
  KBATCH_FUZZ=1      clang with libFuzzer coverage instrumentation (-fsanitize=fuzzer-no-link): the C
                     kernels' edges and comparisons guide atheris (fuzz/README.md); with
                     KBATCH_SANITIZE=1 as well, AddressSanitizer + UBSan on top (run under atheris'
                     asan_with_fuzzer.so preload)
"""
import os
import shlex
import shutil
import sys
import sysconfig

import numpy
from Cython.Build import cythonize
from setuptools import Extension, setup


def flag(name: str) -> bool:
    return os.environ.get(name, "") not in ("", "0")


debug, sanitize, coverage = flag("KBATCH_DEBUG"), flag("KBATCH_SANITIZE"), flag("KBATCH_COVERAGE")
fuzz = flag("KBATCH_FUZZ")


def use_clang() -> None:
    """Compile and link with clang (libFuzzer's instrumentation is clang-only): CC / LDSHARED for
    distutils, keeping Python's own link flags (rpath, -L) and swapping only the compiler."""
    cc = os.environ.get("KBATCH_CLANG") or shutil.which("clang")
    if not cc:
        sys.exit("KBATCH_FUZZ=1 needs clang (libFuzzer's -fsanitize=fuzzer-no-link is clang-only); install it:\n"
                 "  Debian/Ubuntu: sudo apt-get install -y clang    Fedora: sudo dnf install clang\n"
                 "  macOS: brew install llvm (Apple clang has no libFuzzer)\n"
                 "or point KBATCH_CLANG at a clang binary.")
    ldshared = shlex.split(sysconfig.get_config_var("LDSHARED") or "cc -shared")
    os.environ["CC"] = cc
    os.environ["LDSHARED"] = shlex.join([cc] + ldshared[1:])


compile_args, link_args, macros = [], [], [("NPY_NO_DEPRECATED_API", "NPY_1_7_API_VERSION")]
if sys.platform != "win32":
    # a CPython function a new version stops declaring must not compile to a call returning int
    compile_args += ["-Werror=implicit-function-declaration"]
    if fuzz:  # what OSS-Fuzz builds with: -O1 keeps the branches the counters measure
        compile_args += ["-O1", "-gline-tables-only"]
    else:
        compile_args += ["-O0", "-g"] if (debug or sanitize) else ["-O3"]
if fuzz:
    use_clang()
    # inline 8-bit counters + PC table + comparison tracing; the libFuzzer runtime is atheris' own
    # (its core, or asan_with_fuzzer.so when preloaded), so nothing is linked in here
    san = ["-fsanitize=fuzzer-no-link" + (",address,undefined" if sanitize else "")]
    if sanitize:
        # UBSan aborts on its first report, as in the gcc flavour; both runtimes come from the preload
        san += ["-fno-omit-frame-pointer", "-fno-sanitize-recover=undefined"]
    compile_args += san
    link_args += san
elif sanitize:
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

# kbatch.values' Avro -> Arrow kernel (without it, Avro columns come from fastavro, slower)
values_ext = Extension(
    "kbatch.values._avro_kernel",
    ["src/kbatch/values/_avro_kernel.pyx"],
    extra_compile_args=compile_args,
    extra_link_args=link_args,
)

# kbatch.values' Protobuf -> Arrow kernel (without it, Protobuf columns come from upb a message at a time,
# or from the plan's pure twin)
protobuf_ext = Extension(
    "kbatch.values._protobuf_kernel",
    ["src/kbatch/values/_protobuf_kernel.pyx"],
    extra_compile_args=compile_args,
    extra_link_args=link_args,
)

# kbatch.spark's JVM reader: java/kafka-segments built by Maven (`mvn package`, java/maven.py) into
# kbatch/spark/jars/; KBATCH_JAR=1 requires it, KBATCH_JAR=0 skips it
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "java"))
from maven import build as build_jar, build_for_sdist  # noqa: E402

from setuptools.command.build_ext import build_ext  # noqa: E402
from setuptools.command.build_py import build_py  # noqa: E402
from setuptools.command.sdist import sdist  # noqa: E402


class BuildPyWithJar(build_py):
    def run(self):
        super().run()
        if not self.editable_mode:
            build_jar(os.path.join(self.build_lib, "kbatch", "spark", "jars"), self.distribution.get_version())


class BuildExtWithJar(build_ext):
    def run(self):
        super().run()
        if self.inplace:  # dev.py build / editable installs read package data from src/
            build_jar(os.path.join("src", "kbatch", "spark", "jars"), self.distribution.get_version())


class SdistWithJar(sdist):
    """The sdist carries the compiled jar (java/prebuilt/): an install from the sdist then needs no
    JDK or Maven (java/maven.py)."""

    def make_release_tree(self, base_dir, files):
        super().make_release_tree(base_dir, files)
        build_for_sdist(base_dir, self.distribution.get_version())


setup(ext_modules=cythonize([ext, compat_ext, values_ext, protobuf_ext], compiler_directives=directives,
                            annotate=flag("KBATCH_ANNOTATE")),
      cmdclass={"build_py": BuildPyWithJar, "build_ext": BuildExtWithJar, "sdist": SdistWithJar})
