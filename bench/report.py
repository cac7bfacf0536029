"""Writes bench/results-<area>.md and bench/README.md from the benchmarks of one pytest-benchmark
run (called by bench/conftest.py at the end of the session). Every figure in those files comes
from that run; the prose comes from bench/notes/<area>.md and from this module, without figures."""
from __future__ import annotations

import datetime
import glob
import importlib
import os
import platform
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)


# ------------------------------------------------------------------------------------ the machine
def lscpu() -> dict:
    try:
        out = subprocess.run(["lscpu"], capture_output=True, text=True, check=True).stdout
    except (OSError, subprocess.CalledProcessError):
        return {}
    info = {}
    for line in out.splitlines():
        if ":" in line:
            k, v = line.split(":", 1)
            info[k.strip()] = v.strip()
    return info


def machine() -> str:
    """One paragraph on the machine, from lscpu (and the versions that matter)."""
    c = lscpu()
    flags = set(c.get("Flags", "").split())
    isa = ", ".join(f for f in ("sse4_2", "avx2", "avx512f", "sha_ni", "vpclmulqdq") if f in flags)
    parts = [f"{c.get('Model name', platform.processor() or 'unknown CPU')}"
             f" (family {c.get('CPU family', '?')}, model {c.get('Model', '?')})",
             f"{c.get('CPU(s)', '?')} CPUs ({c.get('Thread(s) per core', '?')} thread per core"
             + (f", {c['Hypervisor vendor']} guest" if c.get("Hypervisor vendor") else "") + ")",
             f"L1d {c.get('L1d cache', '?')}, L2 {c.get('L2 cache', '?')}, L3 {c.get('L3 cache', '?')}"]
    if isa:
        parts.append(isa)
    import numpy
    import pyarrow

    try:
        import kbatch
        backend = kbatch.BACKEND
    except ImportError:
        backend = "?"
    return (f"{'; '.join(parts)}. Linux {platform.release()}, CPython {platform.python_version()}, numpy "
            f"{numpy.__version__}, pyarrow {pyarrow.__version__}; kbatch backend {backend}.")


def commit() -> str:
    try:
        return subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True,
                              check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


# ------------------------------------------------------------------------------------ formatting
def _ms(s: float) -> str:
    if s >= 1:
        return f"{s:.2f} s"
    if s >= 1e-3:
        return f"{s * 1e3:.2f} ms"
    return f"{s * 1e6:.1f} µs"


def _rate(b) -> str:
    info, t = b.extra_info, b.stats.min
    out = []
    if info.get("records"):
        out.append(f"{info['records'] / t / 1e6:.2f} M rec/s")
    if info.get("bytes"):
        out.append(f"{info['bytes'] / t / 1e9:.2f} GB/s" if info["bytes"] / t >= 1e9
                   else f"{info['bytes'] / t / 1e6:.0f} MB/s")
    return ", ".join(out)


_SHOWN = {"records", "bytes", "backend"}


def _details(b) -> str:
    info = b.extra_info or {}
    parts = []
    for k, v in info.items():
        if k in _SHOWN:
            continue
        if isinstance(v, float):
            v = f"{v:.3g}"
        parts.append(f"{k.replace('_', ' ')} {v}")
    return "; ".join(parts)


def _area(module: str) -> str:
    return module[len("bench_"):-len(".py")]


def _title(module: str) -> str:
    try:
        mod = sys.modules.get(module[:-3]) or importlib.import_module(module[:-3])
        doc = (mod.__doc__ or "").strip().split("\n\n")[0].replace("\n", " ")
    except Exception:  # noqa: BLE001 - a title is all that is wanted
        doc = ""
    return doc or module


# ------------------------------------------------------------------------------------ results files
def group_tables(benchmarks, refused, impl, ours, pairs) -> list:
    groups = {}
    for b in benchmarks:
        groups.setdefault(str(b.group), []).append(b)
    lines = []
    for group in sorted(groups):
        items = groups[group]
        lines += [f"### {group}", "", "| implementation | min | median | rounds | rate (min) | details |",
                  "|---|---:|---:|---:|---|---|"]
        for b in items:
            why = refused(b)
            if why:
                lines.append(f"| {impl(b)} | refused: {why} | | | | |")
                continue
            lines.append(f"| {impl(b)} | {_ms(b.stats.min)} | {_ms(b.stats.median)} | {b.stats.rounds} | "
                         f"{_rate(b)} | {_details(b)} |")
        ratios = [(k, p) for k, p in pairs(items) if not refused(k) and not refused(p)]
        if ratios:
            lines += ["", "| kbatch | peer | peer time / kbatch time (min) | (median) |", "|---|---|---:|---:|"]
            for k, p in ratios:
                lines.append(f"| {impl(k)} | {impl(p)} | **{p.stats.min / k.stats.min:.2f}x** | "
                             f"{p.stats.median / k.stats.median:.2f}x |")
        lines.append("")
    return lines


def write(benchmarks, modules, load, refused, impl, ours, pairs) -> list:
    now = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    head = (f"Generated by `python3 dev.py bench` (commit {commit()}, {now}) from one run; every figure "
            f"below is from that run. Machine: {machine()} Load average {load['start'][0]:.1f} at the start, "
            f"{os.getloadavg()[0]:.1f} at the end (the machine is shared: absolute times drift, the ratios "
            f"between implementations timed side by side in one process much less). Each benchmark checks "
            f"its result before it times.")
    written = []
    by_module = {}
    for b in benchmarks:
        by_module.setdefault(os.path.basename(b.fullname.split("::")[0]), []).append(b)
    for module, items in sorted(by_module.items()):
        area = _area(module)
        lines = [f"# {_title(module)}", "", head, "", f"Command: `python3 dev.py bench -k {area}` for this file "
                 f"alone (the whole run: `python3 dev.py bench`).", "", "## Measured", ""]
        lines += group_tables(items, refused, impl, ours, pairs)
        notes = os.path.join(HERE, "notes", f"{area}.md")
        if os.path.exists(notes):
            lines += ["## Notes", "", open(notes, encoding="utf-8").read().strip(), ""]
        lines += separate_run(area)
        path = os.path.join(HERE, f"results-{area}.md")
        with open(path, "w", encoding="utf-8") as f:
            f.write("\n".join(lines).rstrip() + "\n")
        written.append(path)
    every = sorted(os.path.basename(p) for p in glob.glob(os.path.join(HERE, "bench_*.py")))
    if sorted(set(modules)) == every:
        path = os.path.join(HERE, "README.md")
        with open(path, "w", encoding="utf-8") as f:
            f.write(readme(benchmarks, head, refused, impl, sorted(by_module)))
        written.append(path)
    return written


# ------------------------------------------------------------------------------------ targets
def _find(benchmarks, module, group, name):
    for b in benchmarks:
        if os.path.basename(b.fullname.split("::")[0]) == module and str(b.group) == group:
            params = b.params or {}
            label = str(params.get("impl", b.name))
            rest = [str(v) for k, v in params.items() if k != "impl"]
            if name in (label, f"{label} [{', '.join(rest)}]", b.name):
                return b
    return None


def _ratio(benchmarks, refused, module, group, ours, peer, threshold, fmt="{:.2f}x"):
    k, p = _find(benchmarks, module, group, ours), _find(benchmarks, module, group, peer)
    if k is None or p is None:
        return "not run", None
    for b in (k, p):
        if refused(b):
            return f"refused ({refused(b)})", None
    lo, med = p.stats.min / k.stats.min, p.stats.median / k.stats.median
    return f"{fmt.format(lo)} (median {fmt.format(med)})", (lo >= threshold if threshold is not None else None)


TARGETS = [
    # issue, question, target text, module, group, ours, peer, threshold (peer / ours >= it)
    ("40 summary", "`kbatch stats` header figures from the summary, warm, vs a full decode (same numbers)",
     ">= 100x", "bench_summary.py", "summary header figures", "summary, warm", "full decode", 100.0),
    ("40 summary", "header figures, cold (every CRC checked), vs a full decode", "report", "bench_summary.py",
     "summary header figures", "summary, cold (CRC)", "full decode", None),
    ("40 summary", "per-minute histogram of a partition-day, warm, vs `decode_columns`", ">= 10x", "bench_summary.py",
     "summary histogram", "histogram, warm", "decode_columns + numpy", 10.0),
    ("40 summary", "per-minute histogram, cold (CRC, timestamps walk), vs `decode_columns`", "report",
     "bench_summary.py", "summary histogram", "histogram, cold (CRC, timestamps walk)", "decode_columns + numpy",
     None),
    ("2 codec", "decode to objects, touching key/value/timestamp, vs aiokafka", ">= 1.5x", "bench_codec.py",
     "codec decode (records/s)", "kbatch", "aiokafka", 1.5),
    ("2 codec", "encode, `BatchBuilder.append` vs aiokafka", ">= 1.5x", "bench_codec.py",
     "codec encode (records/s)", "kbatch", "aiokafka", 1.5),
    ("2 codec", "encode, `build_batch` vs aiokafka", ">= 1.5x", "bench_codec.py", "codec encode (records/s)",
     "kbatch build_batch", "aiokafka", 1.5),
    ("2 codec", "batch scan + CRC vs aiokafka", ">= 4x", "bench_codec.py", "codec scan+crc (GB/s)", "kbatch",
     "aiokafka", 4.0),
    ("2 codec", "CRC-32C, 64 B per call, vs the `crc32c` package", ">= 1x", "bench_codec.py", "codec crc32c 64B",
     "kbatch.crc32c [64B]", "crc32c package [64B]", 1.0),
    ("2 codec", "CRC-32C, 1 MiB per call, vs the `crc32c` package", ">= 1x", "bench_codec.py", "codec crc32c 1MiB",
     "kbatch.crc32c [1MiB]", "crc32c package [1MiB]", 1.0),
    ("3 validation", "`check_timestamps` kernel vs a numpy mask, 10 M timestamps", ">= 1x", "bench_validate.py",
     "check 10M timestamps", "kbatch check_timestamps", "numpy mask", 1.0),
    ("4, 22 storage", "100,000 `offsets_for_times` targets vs decode-all + searchsorted, 4-record batches",
     ">= 10x", "bench_storage.py", "offsets_for_times 4-record batches", "kbatch offsets_for_times",
     "decode all + searchsorted", 10.0),
    ("22 storage", "100,000 `offsets_for_times` targets vs decode-all + searchsorted, 1000-record batches",
     ">= 10x", "bench_storage.py", "offsets_for_times 1000-record batches", "kbatch offsets_for_times",
     "decode all + searchsorted", 10.0),
    ("5, 22 compaction", "`kbatch.compact` vs the dictionary cleaner it replaced (Python dict of keys, records "
     "as objects, BatchBuilder)", ">= 3x", "bench_compaction.py", "compaction", "kbatch compact",
     "dict cleaner (before issue 22)", 3.0),
    ("18, 42 columns", "`encode_columns` vs aiokafka's builder, uncompressed", ">= 5x", "bench_columns.py",
     "encode none", "kbatch encode_columns", "aiokafka", 5.0),
    ("42 columns", "`encode_columns` vs aiokafka's builder, uncompressed, a 74 MB output", ">= 5x",
     "bench_columns.py", "encode none large", "kbatch encode_columns", "aiokafka", 5.0),
    ("18 columns", "`decode_columns` on one thread (CRC, headers) vs aiokafka objects", ">= 5x", "bench_columns.py", "decode",
     "kbatch decode_columns", "aiokafka objects", 5.0),
    ("7 drop-in", "kafka-python decode with `kbatch.compat`", ">= 10x", "bench_compat.py", "decode kafka-python",
     "kbatch.compat", "kafka-python", 10.0),
    ("7 drop-in", "kafka-python build with `kbatch.compat`", ">= 1.5x", "bench_compat.py", "build kafka-python",
     "kbatch.compat", "kafka-python", 1.5),
    ("7 drop-in", "aiokafka decode with `kbatch.compat`", ">= 1.5x", "bench_compat.py", "decode aiokafka",
     "kbatch.compat", "aiokafka", 1.5),
    ("7 drop-in", "aiokafka build with `kbatch.compat`", ">= 1.5x", "bench_compat.py", "build aiokafka",
     "kbatch.compat", "aiokafka", 1.5),
    *[row for query, what in (("count", "count"), ("filter", "offset + timestamp filter"),
                              ("values", "value aggregate"))
      for row in (("6, 17 Spark", f"`kafka-segments` (JVM reader) {what} vs Spark's Parquet read", ">= 1.2x",
                   "bench_spark.py", f"spark-read {query}", "kbatch JVM reader", "Parquet", 1.2),
                  ("6, 17 Spark", f"`kafka-segments` (JVM reader) {what} vs binaryFile + aiokafka", ">= 5x",
                   "bench_spark.py", f"spark-read {query}", "kbatch JVM reader", "aiokafka binaryFile", 5.0))],
    ("33 values", "Avro values to a typed Arrow column vs fastavro's `schemaless_reader` loop (with resolution)",
     ">= 3x", "bench_values.py", "avro values to columns", "kbatch", "fastavro-schemaless_reader-loop", 3.0),
    ("33 values", "Avro values to a typed Arrow column vs binary-only `decode_columns`", "report", "bench_values.py",
     "avro values to columns", "kbatch", "decode_columns-binary", None),
    ("42 json", "plain JSON values to a typed column vs orjson per value + `pa.array`", "report", "bench_json.py",
     "json-plain values to columns", "kbatch PlainJson(schema)", "orjson", None),
    ("42 json", "plain JSON values to a typed column vs pyarrow's reader alone (the floor)", "report",
     "bench_json.py", "json-plain values to columns", "kbatch PlainJson(schema)", "pyarrow read_json (bound)", None),
    ("42 json", "plain JSON values to a typed column vs Spark's `from_json`, one core", "report", "bench_json.py",
     "json-plain vs Spark from_json", "kbatch PlainJson(schema)", "Spark from_json (local[1])", None),
    ("remote", "a time lookup on a segment in S3: ranged reads vs downloading it and searching", "report",
     "bench_remote.py", "remote time lookup", "kbatch ranged reads", "download + search", None),
    ("serve", "produce through `kbatch serve` vs librdkafka's mock cluster, same client", "report",
     "bench_serve.py", "serve-produce", "kbatch-serve", "librdkafka-mock", None),
]


def _special(benchmarks, refused):
    """Targets that are not one ratio of two benchmarks: (issue, question, measured, target, met)."""
    rows = []

    def get(module, group, name):
        b = _find(benchmarks, module, group, name)
        return None if b is None or refused(b) else b

    b = get("bench_codec.py", "codec scan+crc (GB/s)", "kbatch")
    if b is not None:
        gbs = b.extra_info["bytes"] / b.stats.min / 1e9
        rows.append(("2 codec", "batch scan + CRC throughput", f"{gbs:.1f} GB/s", ">= 7 GB/s", gbs >= 7))
    d, v = get("bench_validate.py", "validate segment", "decode"), get("bench_validate.py", "validate segment",
                                                                        "kbatch validate")
    if d is not None and v is not None:
        r = v.stats.min / d.stats.min
        rows.append(("3 validation", "full `validate()` of a segment vs decoding it to objects alone",
                     f"{r:.2f}x of decode (median {v.stats.median / d.stats.median:.2f}x)", "<= 1.2x", r <= 1.2))
    for batch in (4, 1000):
        s = get("bench_storage.py", f"single lookup {batch}-record batches", "kbatch offset_for")
        one = get("bench_storage.py", f"single lookup {batch}-record batches", "decode one batch")
        if s is not None and one is not None:
            r = s.stats.median / one.stats.median
            probes = s.extra_info.get("index entries read", "?")
            rows.append(("4, 22 storage", f"one `offset_for(t)` on {batch}-record batches vs decoding one batch",
                         f"{_ms(s.stats.median)} = {r:.2f}x one batch's decode ({_ms(one.stats.median)}); index "
                         f"entries read {probes}", "about one batch's decode + the probes (O(log n))", None))
        lst = get("bench_storage.py", f"target list {batch}-record batches", "kbatch list")
        arr = get("bench_storage.py", f"target list {batch}-record batches", "kbatch numpy array")
        if lst is not None and arr is not None:
            r = lst.stats.min / arr.stats.min
            rows.append(("22 storage", f"a Python list of targets vs a numpy array, {batch}-record batches",
                         f"{r:.2f}x the numpy time per target", "<= 2x", r <= 2))
    c = get("bench_compaction.py", "compaction", "kbatch compact")
    ref = get("bench_compaction.py", "compaction", "dict cleaner (before issue 22)")
    if c is not None and ref is not None:
        mem, ref_mem = c.extra_info.get("peak RSS MB"), ref.extra_info.get("peak RSS MB")
        if mem is not None and ref_mem is not None:
            rows.append(("22 compaction", "peak memory of `kbatch.compact` vs the dictionary cleaner",
                         f"{mem:.0f} MB vs {ref_mem:.0f} MB peak RSS", "equal or lower", mem <= ref_mem * 1.05))
    for ours, how in (("kbatch decode_columns", "on one thread"), ("kbatch decode_columns (threads)", "on its threads")):
        dc = get("bench_columns.py", "decode", ours)
        if dc is not None and "threads" in dc.extra_info:
            how += f" ({dc.extra_info['threads']})"
        for peer in ("memcpy into a buffer", "memcpy into a new buffer"):
            m = get("bench_columns.py", "decode", peer)
            if dc is not None and m is not None:
                share = m.stats.min / dc.stats.min
                rows.append(("18 columns", f"`decode_columns` {how} vs a single-thread memory copy {peer[7:]}",
                             f"{share * 100:.0f} % of its speed (median {m.stats.median / dc.stats.median * 100:.0f} %)",
                             ">= 50 %", share >= 0.5))
    for codec in ("none", "lz4"):
        ref = get("bench_tables.py", "tables", f"parquet [{codec}]")
        for sink in ("delta", "iceberg"):
            t = get("bench_tables.py", "tables", f"{sink} [{codec}]")
            if t is not None and t.extra_info.get("cpu s"):
                mib = t.extra_info["record bytes"] / 2**20 / t.extra_info["cpu s"]
                rows.append(("31 tables", f"segments ({codec}) -> {sink}: record bytes per second per core (CPU "
                             f"time of the last round)", f"{mib:.0f} MiB/s = {mib / 5:.0f}x Redpanda's ~5 MiB/s",
                             ">= 100 MiB/s (20x)", mib >= 100))
                if ref is not None and ref.extra_info.get("parquet bytes"):
                    a, b_ = t.extra_info["parquet bytes"], ref.extra_info["parquet bytes"]
                    rows.append(("31 tables", f"{sink}'s Parquet vs `kbatch export --format parquet` ({codec})",
                                 f"{a / 2**20:.0f} MiB vs {b_ / 2**20:.0f} MiB", "no larger", a <= b_))
    for sink in ("delta", "iceberg", "parquet"):
        t = get("bench_tables.py", "tables-typed", sink)
        if t is not None and t.extra_info.get("cpu s"):
            c = t.extra_info["cpu s"]
            rows.append(("31, 33 tables", f"segments -> {sink} with Avro values as typed columns: records and record "
                         f"bytes per second per core (CPU time of the last round)",
                         f"{t.extra_info['records'] / c:,.0f} records/s = {t.extra_info['record bytes'] / 2**20 / c:.0f} "
                         f"MiB/s", "report", None))
    ours = get("bench_tables.py", "tables-typed", "delta")
    peer = get("bench_tables.py", "tables-typed", "fastavro loop + write_deltalake")
    if ours is not None and peer is not None:
        rows.append(("31, 33 tables", "typed Delta table: kbatch.export_table vs fastavro loop + write_deltalake",
                     f"{peer.stats.min / ours.stats.min:.2f}x (median {peer.stats.median / ours.stats.median:.2f}x)",
                     "report", None))
    return rows


#: results of runs outside pytest-benchmark (too long for `dev.py bench`), kept beside the area's
#: file by the run itself and carried into results-<area>.md and README.md by every report
SEPARATE_RUNS = {"spark": ("results-spark-scale.md", "bench/bench_spark.py scale"),
                 "values": ("results-avro-anchor.md", "bench/avro_anchor.py --write"),
                 "summary": ("results-summary-scale.md", "KBATCH_BENCH_SUMMARY_RECORDS=10000000 bench/bench_summary.py")}


def separate_run(area: str) -> list[str]:
    """The section of a separate run's results for an area (its own header says when and where)."""
    if area not in SEPARATE_RUNS:
        return []
    name, command = SEPARATE_RUNS[area]
    path = os.path.join(HERE, name)
    if not os.path.exists(path):
        return []
    body = open(path, encoding="utf-8").read().strip().split("\n", 1)[1].strip()  # without its title
    return [f"## At scale: `{command}` (a separate run, [{name}]({name}))", "", body, ""]


def readme(benchmarks, head, refused, impl, modules) -> str:
    rows = []
    for issue, question, target, module, group, ours, peer, threshold in TARGETS:
        measured, met = _ratio(benchmarks, refused, module, group, ours, peer, threshold)
        rows.append((issue, question, measured, target, met))
    rows += _special(benchmarks, refused)
    def issue(r):
        first = r[0].split(",")[0].split()[0]
        return int(first) if first.isdigit() else 999

    order = {id(r): i for i, r in enumerate(rows)}
    rows.sort(key=lambda r: (issue(r), order[id(r)]))
    lines = [
        "# Benchmarks", "",
        "`python3 dev.py bench` runs every benchmark (pytest-benchmark) and writes this file and the "
        "per-area results files from that one run. Each benchmark checks its result against a reference "
        "(the pure backend, a peer library or an oracle) before it times anything, and peers run side by "
        "side in the same process, so the figures to read are the **ratios** (peer time / kbatch time, "
        "> 1: kbatch is faster; min of the rounds, median in brackets). The run refuses any figure not "
        "measured on the compiled core (`KBATCH_BACKEND=cython` for the run, its subprocesses and Spark's "
        "Python workers; each benchmark records the backend it ran on). No test anywhere asserts a time.",
        "", head, "",
        "Per area: " + " · ".join(f"[{_area(m)}](results-{_area(m)}.md)" for m in modules) + ".",
        "", "## Targets from the issues, as measured in this run", "",
        "| issue | question | measured | target | met |", "|---|---|---|---|---|",
    ]
    for issue, question, measured, target, met in rows:
        mark = "—" if met is None else ("yes" if met else "**no**")
        lines.append(f"| {issue} | {question} | {measured} | {target} | {mark} |")
    missed = [r for r in rows if r[4] is False]
    lines += ["", "A target marked **no** is discussed, with what bounds it, in its area's results file "
              "(section Notes)." if missed else "Every target with a threshold is met in this run.", ""]
    for area in SEPARATE_RUNS:
        lines += separate_run(area)
    return "\n".join(lines)
