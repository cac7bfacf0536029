"""The runtime a native-instrumented kbatch._core needs before it can be imported.

`python3 dev.py build --fuzz` (KBATCH_FUZZ=1) compiles the extensions with clang's
-fsanitize=fuzzer-no-link: every edge of the C kernels gets an 8-bit counter and a PC-table entry,
comparisons call __sanitizer_cov_trace_cmp*, and the module's constructor hands its counters to
libFuzzer (__sanitizer_cov_8bit_counters_init / __sanitizer_cov_pcs_init). Those symbols are left
undefined in the .so; they must already be global when it is dlopen'ed:

- fuzz build:           atheris' own libFuzzer (atheris.core_with_libfuzzer), loaded RTLD_GLOBAL by
                        `load_libfuzzer()` before kbatch is imported; no preload needed;
- fuzz + sanitize:      the ASan/UBSan runtime with libFuzzer linked in, atheris' asan_with_fuzzer.so,
                        LD_PRELOADed (`child_env()`); loading libFuzzer from a shared library next
                        to a separately preloaded sanitizer would send coverage to the sanitizer's
                        weak stubs (atheris' native_extension_fuzzing.md);
- sanitize (gcc):       gcc's libasan + libubsan, LD_PRELOADed; libasan's weak coverage stubs then
                        shadow atheris' libFuzzer, which sees no coverage at all (cov: 0): fine for
                        replay and the test suite, blind for fuzzing (use fuzz + sanitize);
- release / debug:      nothing.

The flavour is read from the built .so itself (the symbols it imports), not from a stamp, so a build
made by `setup.py` directly is recognised too.
"""
from __future__ import annotations

import ctypes
import importlib
import importlib.machinery
import importlib.util
import os
import subprocess
import sys
from pathlib import Path

ASAN_OPTIONS = "detect_leaks=0:allocator_may_return_null=1"  # CPython does not free everything at exit
UBSAN_OPTIONS = "halt_on_error=1:print_stacktrace=1"


def core_path() -> Path | None:
    """kbatch/_core*.so on sys.path, found without importing kbatch (whose backend choice would
    otherwise fall back to the pure twin before libFuzzer is in place)."""
    spec = importlib.util.find_spec("kbatch")
    for d in (spec.submodule_search_locations or []) if spec else []:
        for suffix in importlib.machinery.EXTENSION_SUFFIXES:
            p = Path(d) / f"_core{suffix}"
            if p.exists():
                return p
    return None


def flavour(path: Path | None = None) -> set[str]:
    """{'fuzz'} for libFuzzer instrumentation, {'asan'} for AddressSanitizer, both, or empty."""
    path = path or core_path()
    if path is None:
        return set()
    data = path.read_bytes()
    out = set()
    if b"__sanitizer_cov_8bit_counters_init" in data:
        out.add("fuzz")
    if b"__asan_init" in data:
        out.add("asan")
    return out


def libfuzzer_global() -> bool:
    return hasattr(ctypes.CDLL(None), "LLVMFuzzerRunDriver")


def asan_loaded() -> bool:
    return hasattr(ctypes.CDLL(None), "__asan_init")


def load_libfuzzer() -> bool:
    """Make libFuzzer's coverage callbacks global before kbatch._core loads. Returns True when it
    loaded atheris' built-in libFuzzer (pass internal_libfuzzer=True to atheris.Setup then, so
    atheris drives that same copy)."""
    fl = flavour()
    if "fuzz" not in fl or libfuzzer_global():
        if "asan" in fl and not asan_loaded():
            sys.exit("kbatch._core is built with AddressSanitizer; run it under its runtime: "
                     "`python -m fuzz` / `python3 dev.py fuzz` set LD_PRELOAD (fuzz/README.md)")
        return False
    if "asan" in fl:
        sys.exit("kbatch._core is built with --fuzz --sanitize: it needs atheris' asan_with_fuzzer.so "
                 "preloaded; run it through `python -m fuzz` or `python3 dev.py fuzz` (fuzz/README.md)")
    flags = sys.getdlopenflags()
    sys.setdlopenflags(flags | os.RTLD_GLOBAL)
    try:
        importlib.import_module("atheris.core_with_libfuzzer")
    finally:
        sys.setdlopenflags(flags)
    return True


def child_env(env: dict | None = None) -> dict:
    """The environment for a `python -m fuzz.run` child: LD_PRELOAD and sanitizer options for the
    build on disk. A LD_PRELOAD already set is kept as it is."""
    env = dict(os.environ if env is None else env)
    fl = flavour()
    if "asan" not in fl:
        return env
    if not env.get("LD_PRELOAD"):
        if "fuzz" in fl:
            import atheris

            env["LD_PRELOAD"] = str(Path(atheris.path()) / "asan_with_fuzzer.so")
        else:
            libs = [subprocess.run(["gcc", f"-print-file-name={lib}"], capture_output=True, text=True).stdout.strip()
                    for lib in ("libasan.so", "libubsan.so")]
            env["LD_PRELOAD"] = " ".join(libs)
    env.setdefault("ASAN_OPTIONS", ASAN_OPTIONS)
    env.setdefault("UBSAN_OPTIONS", UBSAN_OPTIONS)
    return env


def describe() -> str:
    fl = flavour()
    if not fl:
        return "kbatch._core: not native-instrumented (Python coverage only)"
    text = f"kbatch._core: {'+'.join(sorted(fl))} build" + (
        f", LD_PRELOAD={child_env().get('LD_PRELOAD')}" if "asan" in fl else "")
    if fl == {"asan"}:
        # gcc's preloaded libasan defines the coverage callbacks as weak stubs, and they win over
        # the libFuzzer inside atheris' core module: libFuzzer then reports cov: 0 ft: 0
        text += ("\nWARNING: gcc sanitizer build: libasan takes libFuzzer's coverage callbacks, so the "
                 "fuzzer runs without feedback (cov: 0); `python3 dev.py fuzz SECONDS --fuzz --sanitize` "
                 "is the coverage-guided sanitizer run")
    return text
