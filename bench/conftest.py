"""Shared bench plumbing.

Backend. The figures are the compiled core's. KBATCH_BACKEND=cython is set before kbatch loads, so
this process, the `kbatch serve` subprocess and Spark's Python workers (which inherit it) fail
loudly instead of falling back to the pure twin; every benchmark records the backend that was live
while it ran (bench_spark and bench_columns' Spark benchmarks also record their workers'), and the
report refuses a figure measured on another backend instead of printing it.

Raw tables. With KBATCH_BENCH_RESULTS=<file.md> (`python3 dev.py bench` sets bench/results/latest.md),
every group's table is written there too (pytest-benchmark's own JSON beside it, latest.json);
bench/pytest.ini makes `pytest bench` collect bench_*.py.

Report. At the end of a run every benchmark group with kbatch entries gets a ratio table on the
terminal (peer time / kbatch time from the min and the median; > 1: kbatch is faster), and
bench/results-<area>.md is written for each bench module that ran: the machine (from lscpu), this
run's tables and ratios, and the notes in bench/notes/<area>.md (what is measured and what bounds
it; no figures there). When every module ran, bench/README.md is written too, with the targets of
the issues measured in this run. KBATCH_BENCH_WRITE=0 writes nothing.

The benchmarks time one thread. numpy's OpenBLAS pool (idle, but its threads poll) would compete
with that thread on a 2-core machine, so it is cut to one thread before numpy loads; it serves
kbatch and the peers alike (none of them calls BLAS).
"""
import datetime
import os
import platform
import time
from pathlib import Path

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
os.environ["KBATCH_BACKEND"] = "cython"  # figures are the compiled core's: never the pure twin's

import pytest  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
EXPECTED_BACKEND = "cython"
_LOAD = {}


# ------------------------------------------------------------------------------------ backend
def pytest_sessionstart(session):
    import kbatch

    if kbatch.BACKEND != EXPECTED_BACKEND:
        pytest.exit(f"benchmarks report the compiled core; kbatch.BACKEND is {kbatch.BACKEND!r}", returncode=2)
    _LOAD["start"] = os.getloadavg()
    _LOAD["t0"] = time.time()


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_call(item):
    """Record the backend live while the benchmark runs (its fixtures are set up by now)."""
    from kbatch import _backend

    bm = item.funcargs.get("benchmark") if hasattr(item, "funcargs") else None
    before = _backend.core.BACKEND
    yield
    if bm is not None and hasattr(bm, "extra_info"):
        after = _backend.core.BACKEND
        bm.extra_info.setdefault("backend", before if before == after else f"{before}->{after}")


def worker_backend(spark) -> str:
    """The kbatch backend Spark's Python workers run, from a small job over every core."""
    n = max(1, spark.sparkContext.defaultParallelism)
    found = set(spark.sparkContext.parallelize(range(n), n).map(lambda _: __import__("kbatch").BACKEND).collect())
    return "/".join(sorted(found))


def refused(b) -> str | None:
    """Why a benchmark's figure must not be reported (None: it may)."""
    info = b.extra_info or {}
    for key in ("backend", "worker_backend"):
        v = info.get(key)
        if v is not None and v != EXPECTED_BACKEND:
            return f"{key.replace('_', ' ')} was {v}, not {EXPECTED_BACKEND}"
    return None


# ------------------------------------------------------------------------------------ terminal ratios
def _impl(bench) -> str:
    params = bench.params or {}
    if "impl" in params:
        rest = [str(v) for k, v in params.items() if k != "impl"]
        return str(params["impl"]) + (f" [{', '.join(rest)}]" if rest else "")
    return str(bench.name)


def _ours(bench) -> bool:
    return _impl(bench).startswith("kbatch")


def _rate(bench) -> str:
    info, t = bench.extra_info, bench.stats.min
    if info.get("rows"):
        return f"{info['rows'] / t / 1e6:8.2f} M rows/s"
    if info.get("records"):
        return f"{info['records'] / t / 1e6:.2f} M records/s"
    if info.get("bytes"):
        return f"{info['bytes'] / t / 1e9:.2f} GB/s"
    mb = info.get("MB") or info.get("input_mb")
    if mb:
        return f"{mb / t:8.1f} MB/s"
    return ""


def _pairs(items):
    """(ours, peer) pairs of a group: with parameters besides impl, only those sharing them."""
    def key(b):
        return tuple(sorted((k, str(v)) for k, v in (b.params or {}).items() if k != "impl"))

    ours = [b for b in items if _ours(b)]
    peers = [b for b in items if not _ours(b)]
    return [(k, p) for k in ours for p in peers if key(k) == key(p)]


def ratio_lines(benchmarks):
    groups = {}
    for b in benchmarks:
        groups.setdefault(str(b.group), []).append(b)
    lines = []
    for group in sorted(groups):
        items = groups[group]
        if not any(_ours(b) for b in items):
            continue
        lines.append(group)
        for b in items:
            lines.append(f"  {_impl(b):<34} min {b.stats.min * 1e3:10.4f} ms  median {b.stats.median * 1e3:10.4f} ms"
                         f"  {_rate(b)}")
        for k, p in _pairs(items):
            lines.append(f"    {_impl(k)} vs {_impl(p)}: x{p.stats.min / k.stats.min:.2f} (min), "
                         f"x{p.stats.median / k.stats.median:.2f} (median)")
    return lines


def pytest_terminal_summary(terminalreporter, config):
    session = getattr(config, "_benchmarksession", None)
    if session is None or not getattr(session, "benchmarks", None):
        return
    target = os.environ.get("KBATCH_BENCH_RESULTS")
    if target:
        Path(target).parent.mkdir(parents=True, exist_ok=True)
        Path(target).write_text(results_markdown(session.benchmarks))
        terminalreporter.write_line(f"results tables written to {target}")
    terminalreporter.write_sep("-", "peer time / kbatch time (> 1: kbatch is faster)")
    for line in ratio_lines(session.benchmarks):
        terminalreporter.write_line(line)
    bad = [(b.fullname, refused(b)) for b in session.benchmarks if refused(b)]
    for name, why in bad:
        terminalreporter.write_line(f"REFUSED {name}: {why}")
    written = getattr(config, "_kbatch_written", [])
    if written:
        terminalreporter.write_line("written: " + ", ".join(os.path.relpath(p, os.path.dirname(HERE)) for p in written))


def _cpu() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def results_markdown(benchmarks) -> str:
    """Every group's table and the kbatch/peer ratios of one run, as markdown."""
    import kbatch

    knobs = " ".join(f"{k}={v}" for k, v in sorted(os.environ.items()) if k.startswith("KBATCH_BENCH_") and k != "KBATCH_BENCH_RESULTS")
    out = ["# Benchmark results (latest run)", "",
           f"Written by `python3 dev.py bench` on {datetime.datetime.now(datetime.timezone.utc):%Y-%m-%d %H:%M} UTC: "
           f"kbatch {kbatch.__version__}, backend {kbatch.BACKEND}, Python {platform.python_version()}, "
           f"{platform.machine()} ({_cpu()}, {os.cpu_count()} CPUs)" + (f", {knobs}" if knobs else "") + ". "
           "Absolute times drift on a shared machine; read the ratios. The curated numbers and targets "
           "are in bench/README.md and the results-*.md files.", ""]
    groups = {}
    for b in benchmarks:  # groups per file (two files may name a group alike); ungrouped: under its own name
        module = b.fullname.split("::")[0].split("/")[-1]
        groups.setdefault(f"{module}: {b.group}" if b.group else b.fullname.split("/")[-1], []).append(b)
    for group in sorted(groups):
        items = sorted(groups[group], key=lambda b: b.stats.median)
        fastest = items[0].stats.median
        out += [f"## {group}", "", "| benchmark | min (µs) | median (µs) | rounds | throughput | median / fastest |",
                "|---|---:|---:|---:|---|---:|"]
        for b in items:
            out.append(f"| `{b.fullname.split('/')[-1]}` | {b.stats.min * 1e6:,.2f} | {b.stats.median * 1e6:,.2f} | "
                       f"{b.stats.rounds} | {_rate(b).strip()} | {b.stats.median / fastest:.2f} |")
        ratios = [line.strip() for line in ratio_lines(items) if line.startswith("    ")]
        if ratios:
            out += ["", "kbatch against its peers (peer time / kbatch time; > 1: kbatch is faster):", ""]
            out += [f"- {r}" for r in ratios]
        out.append("")
    return "\n".join(out)


# ------------------------------------------------------------------------------------ the report
def pytest_sessionfinish(session, exitstatus):
    bsession = getattr(session.config, "_benchmarksession", None)
    if bsession is None or not getattr(bsession, "benchmarks", None) or os.environ.get("KBATCH_BENCH_WRITE") == "0":
        return
    import report

    modules = sorted({os.path.basename(str(item.fspath)) for item in session.items})
    session.config._kbatch_written = report.write(bsession.benchmarks, modules, _LOAD, refused, _impl, _ours, _pairs)
