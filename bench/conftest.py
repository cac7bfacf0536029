"""Shared bench plumbing: at the end of a run, every benchmark group with kbatch entries gets a
ratio table: for each kbatch variant against each peer, peer time / kbatch time from the min and
the median (> 1: kbatch is faster). Throughputs come from extra_info["records"] or ["bytes"].

With KBATCH_BENCH_RESULTS=<file.md> (`python3 dev.py bench` sets bench/results/latest.md), the run's
tables are written there too: every group, every benchmark with min / median / rounds / throughput
and its time relative to the group's fastest, then the kbatch-vs-peer ratios; pytest-benchmark's
own JSON goes beside it (latest.json). bench/pytest.ini makes `pytest bench` collect bench_*.py.

The benchmarks time one thread. numpy's OpenBLAS pool (idle, but its threads poll) would compete
with that thread on a 2-core machine, so it is cut to one thread before numpy loads; it serves
kbatch and the peers alike (none of them calls BLAS).
"""
import datetime
import os
import platform
from pathlib import Path

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")


def _impl(bench) -> str:
    return str((bench.params or {}).get("impl", bench.name))


def _rate(bench) -> str:
    info, t = bench.extra_info, bench.stats.min
    if info.get("records"):
        return f"{info['records'] / t / 1e6:8.2f} M records/s"
    if info.get("rows"):
        return f"{info['rows'] / t / 1e6:8.2f} M rows/s"
    if info.get("bytes"):
        return f"{info['bytes'] / t / 1e9:8.2f} GB/s"
    mb = info.get("MB") or info.get("input_mb")
    if mb:
        return f"{mb / t:8.1f} MB/s"
    return ""


def ratio_lines(benchmarks):
    groups = {}
    for b in benchmarks:
        groups.setdefault(str(b.group), []).append(b)
    lines = []
    for group in sorted(groups):
        items = groups[group]
        ours = [b for b in items if _impl(b).startswith("kbatch")]
        peers = [b for b in items if not _impl(b).startswith("kbatch")]
        if not ours:
            continue
        lines.append(group)
        for b in items:
            lines.append(f"  {_impl(b):<22} min {b.stats.min * 1e3:10.4f} ms  median {b.stats.median * 1e3:10.4f} ms"
                         f"  {_rate(b)}")
        for k in ours:
            for p in peers:
                lines.append(f"    {_impl(k)} vs {_impl(p)}: x{p.stats.min / k.stats.min:.2f} (min), "
                             f"x{p.stats.median / k.stats.median:.2f} (median)")
    return lines


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


def pytest_terminal_summary(terminalreporter, config):
    session = getattr(config, "_benchmarksession", None)
    if session is None or not getattr(session, "benchmarks", None):
        return
    target = os.environ.get("KBATCH_BENCH_RESULTS")
    if target:
        Path(target).parent.mkdir(parents=True, exist_ok=True)
        Path(target).write_text(results_markdown(session.benchmarks))
        terminalreporter.write_line(f"results tables written to {target}")
    for name in ("bench_codec", "bench_columns", "bench_serve"):
        lines = ratio_lines([b for b in session.benchmarks if name in b.fullname])
        if lines:
            terminalreporter.write_sep("-", f"{name}: peer time / kbatch time (> 1: kbatch is faster)")
            for line in lines:
                terminalreporter.write_line(line)
