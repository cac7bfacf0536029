"""Shared bench plumbing: at the end of a run, every benchmark group with kbatch entries gets a
ratio table: for each kbatch variant against each peer, peer time / kbatch time from the min and
the median (> 1: kbatch is faster). Throughputs come from extra_info["records"] or ["bytes"].

The benchmarks time one thread. numpy's OpenBLAS pool (idle, but its threads poll) would compete
with that thread on a 2-core machine, so it is cut to one thread before numpy loads; it serves
kbatch and the peers alike (none of them calls BLAS).
"""
import os

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")


def _impl(bench) -> str:
    return str((bench.params or {}).get("impl", bench.name))


def _rate(bench) -> str:
    info, t = bench.extra_info, bench.stats.min
    if info.get("records"):
        return f"{info['records'] / t / 1e6:8.2f} M records/s"
    if info.get("bytes"):
        return f"{info['bytes'] / t / 1e9:8.2f} GB/s"
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


def pytest_terminal_summary(terminalreporter, config):
    session = getattr(config, "_benchmarksession", None)
    if session is None or not getattr(session, "benchmarks", None):
        return
    for name in ("bench_codec", "bench_columns", "bench_serve"):
        lines = ratio_lines([b for b in session.benchmarks if name in b.fullname])
        if lines:
            terminalreporter.write_sep("-", f"{name}: peer time / kbatch time (> 1: kbatch is faster)")
            for line in lines:
                terminalreporter.write_line(line)
