"""`kbatch report LOGDIR... -o report.html`: one self-contained HTML page about log directories.

The figures come from the audit's header walk (kbatch.log.audit: one pass, CRCs checked), summed
per time bucket or sampled to a bounded number of points, so the page's size and the time to make
it do not grow with the records: records and bytes over time per partition, timestamps by offset
with the timestamp findings, producer and transaction timelines, the codec and compaction
breakdown, the findings by check and a segment map with the damage on it, and the findings table.

Plots are Plotly's (the `report` extra: pip install plotly); plotly.js is inlined once, so the
page opens offline and loads nothing from the network.
"""

import html
import json
import os
import sys
from collections.abc import Sequence
from typing import IO, TYPE_CHECKING, Any

import numpy as np

from .. import _wire as W
from ._common import EXIT_OK, EXIT_PROBLEMS, UsageProblem, format_time, run, time_value

if TYPE_CHECKING:
    import typer

    from .._typing import PathLike
    from ..log.audit import AuditResult, PartitionFacts

#: time buckets of the over-time plots; points of a sampled scatter per partition; partitions drawn
#: one by one (the rest are summed as "other"); producers and transactions on the timelines;
#: findings in the table (the page says how many were left out)
BUCKETS = 240
POINTS_PER_PARTITION = 4000
MAX_SERIES = 24
MAX_PRODUCERS = 40
MAX_TRANSACTIONS = 2000
MAX_TABLE_ROWS = 2000
SEVERITY_COLORS = {"info": "#4c78a8", "warning": "#f58518", "error": "#e45756"}


def _label(pf: "PartitionFacts") -> str:
    if pf.topic is not None:
        return f"{pf.topic}-{pf.partition}"
    return os.path.basename(os.path.normpath(pf.path))


def _plausible(pf: "PartitionFacts") -> Any:
    """Rows whose max timestamp is a millisecond time a chart can place (CRC good, not a marker)."""
    from ..log.audit import MICROS_FROM

    c = pf.cols
    ctl = (c["magic"] == 2) & ((c["attributes"] & W.CONTROL_FLAG_MASK) != 0)
    ts = c["max_timestamp"]
    return c["crc_valid"] & ~ctl & (c["magic"] >= 1) & (ts >= 0) & (ts < MICROS_FROM)


def _time_range(result: "AuditResult") -> tuple[int, int] | None:
    """The span the over-time plots cover: plausible timestamps up to clock + after.max.ms (a far
    future outlier would squeeze everything else into one bucket; the timestamp plot shows it)."""
    lo: int | None = None
    hi: int | None = None
    cap = None if result.clock is None else result.clock + min(result.config.after_max_ms, 86_400_000)
    for pf in result.partitions:
        if not pf.rows:
            continue
        ts = pf.cols["max_timestamp"][_plausible(pf)]
        if cap is not None:
            ts = ts[ts <= cap]
        if len(ts):
            a, b = int(ts.min()), int(ts.max())
            lo = a if lo is None else min(lo, a)
            hi = b if hi is None else max(hi, b)
    return None if lo is None or hi is None else (lo, hi)


def _dates(ms: Any) -> Any:
    return np.asarray(ms, dtype="int64").astype("datetime64[ms]")


def figures(result: "AuditResult") -> list[tuple[str, str, Any]]:
    """(id, title, plotly Figure) of every chart, from the audit's facts."""
    import plotly.graph_objects as go
    from plotly.subplots import make_subplots

    out: list[tuple[str, str, Any]] = []
    parts = [pf for pf in result.partitions if pf.rows]
    parts_by_size = sorted(parts, key=lambda p: -p.bytes)
    shown = parts_by_size[:MAX_SERIES]
    rest = parts_by_size[MAX_SERIES:]
    # one color per partition in every chart
    from plotly.colors import qualitative

    palette = qualitative.Plotly + qualitative.D3 + qualitative.Set2
    color = {_label(p): palette[i % len(palette)] for i, p in enumerate(sorted(shown, key=_label))}
    color["other"] = "#999999"

    # records and bytes over time, per partition
    span = _time_range(result)
    fig = make_subplots(rows=2, cols=1, shared_xaxes=True, vertical_spacing=0.08,
                        subplot_titles=("records per bucket", "bytes per bucket"))
    if span is not None:
        lo, hi = span
        edges = np.linspace(lo, hi + 1, BUCKETS + 1)
        mids = _dates((edges[:-1] + edges[1:]) / 2)
        groups = [(_label(p), [p]) for p in shown] + ([("other", rest)] if rest else [])
        for name, ps in groups:
            recs = np.zeros(BUCKETS)
            byts = np.zeros(BUCKETS)
            for pf in ps:
                ok = _plausible(pf)
                ts = pf.cols["max_timestamp"][ok]
                recs += np.histogram(ts, edges, weights=np.maximum(pf.cols["record_count"][ok], 0))[0]
                byts += np.histogram(ts, edges, weights=pf.cols["size"][ok])[0]
            line = dict(color=color[name])
            fig.add_trace(go.Scatter(x=mids, y=recs, name=name, legendgroup=name, mode="lines", line=line),
                          row=1, col=1)
            fig.add_trace(go.Scatter(x=mids, y=byts, name=name, legendgroup=name, mode="lines", line=line,
                                     showlegend=False), row=2, col=1)
    fig.update_layout(height=560, margin=dict(t=40, b=30))
    out.append(("over-time", "Records and bytes over time, per partition", fig))

    # timestamps by offset, with the timestamp findings
    fig = go.Figure()
    for pf in shown:
        ok = np.flatnonzero(_plausible(pf))
        step = max(1, len(ok) // POINTS_PER_PARTITION)
        rows = ok[::step]
        fig.add_trace(go.Scatter(x=pf.cols["base_offset"][rows], y=_dates(pf.cols["max_timestamp"][rows]),
                                 mode="markers", marker=dict(size=3, color=color[_label(pf)]), name=_label(pf)))
    anomalies = [f for f in result.findings if f.check.startswith("timestamp.") and f.first_offset is not None]
    if anomalies:
        # drawn at their timestamp, clipped to the plotted span (the hover text says the real value)
        lo_t, hi_t = span if span is not None else (0, 10**14 - 1)
        pad = max((hi_t - lo_t) // 20, 1000)
        fig.add_trace(go.Scatter(
            x=[f.first_offset for f in anomalies],
            y=[_dates([min(max(int(f.details.get("timestamp", lo_t)), lo_t - pad), hi_t + pad)])[0]
               for f in anomalies],
            mode="markers", marker=dict(size=10, symbol="x", color=SEVERITY_COLORS["error"]),
            name="timestamp findings", text=[f"{f.topic}-{f.partition} {f.check}: {f.message}" for f in anomalies],
            hoverinfo="text"))
    fig.update_layout(height=420, xaxis_title="offset", yaxis_title="batch max timestamp", margin=dict(t=30))
    out.append(("timestamps", "Timestamps by offset: skew and anomalies (x: timestamp findings, drawn at the edge when off the chart)", fig))

    # skew: each batch's max timestamp against the log clock
    fig = go.Figure()
    if result.clock is not None:
        for pf in shown:
            ok = _plausible(pf)
            skew = (pf.cols["max_timestamp"][ok] - result.clock) / 1000.0
            if len(skew):
                fig.add_trace(go.Histogram(x=np.clip(skew, -86_400 * 30, 86_400 * 30), name=_label(pf), nbinsx=120,
                                           opacity=0.7, marker_color=color[_label(pf)]))
    fig.update_layout(barmode="overlay", height=360, xaxis_title="seconds from the log clock (clipped to ±30 days)",
                      yaxis_title="batches", margin=dict(t=30))
    out.append(("skew", f"Timestamp skew against the log clock ({format_time(result.clock)})", fig))

    # producers and transactions over time
    fig = make_subplots(rows=1, cols=2, column_widths=[0.5, 0.5], horizontal_spacing=0.1,
                        subplot_titles=("producers (first to last batch)", "transactions (first batch to marker)"))
    spans: dict[int, list[int]] = {}
    for pf in parts:
        c = pf.cols
        ok = c["crc_valid"] & (c["magic"] == 2) & (c["producer_id"] >= 0)
        ok &= (c["max_timestamp"] >= 0) & (c["max_timestamp"] < 10**14)
        pids, ts = c["producer_id"][ok], c["max_timestamp"][ok]
        if not len(pids):
            continue
        uniq, inv = np.unique(pids, return_inverse=True)
        first = np.full(len(uniq), np.iinfo(np.int64).max)
        last = np.full(len(uniq), np.iinfo(np.int64).min)
        np.minimum.at(first, inv, ts)
        np.maximum.at(last, inv, ts)
        counts = np.bincount(inv)
        for p, a, b, n in zip(uniq.tolist(), first.tolist(), last.tolist(), counts.tolist()):
            s = spans.setdefault(p, [a, b, 0])
            s[0], s[1], s[2] = min(s[0], a), max(s[1], b), s[2] + n
    top = sorted(spans.items(), key=lambda kv: -kv[1][2])[:MAX_PRODUCERS]
    for pid, (a, b, n) in top:
        fig.add_trace(go.Scatter(x=_dates([a, b]), y=[str(pid), str(pid)], mode="lines+markers",
                                 line=dict(width=6), showlegend=False, text=f"producer {pid}: {n} batches",
                                 hoverinfo="text+x"), row=1, col=1)
    txns = _transaction_spans(parts, result.clock)
    for kind, shade in (("COMMIT", "#54a24b"), ("ABORT", "#e45756"), ("open", "#f58518")):
        xs: list[Any] = []
        ys: list[Any] = []
        for pid, a, b, k in txns:
            if k == kind:
                xs += [a, b, None]
                ys += [str(pid), str(pid), None]
        if xs:
            xd = [None if v is None else _dates([v])[0] for v in xs]
            fig.add_trace(go.Scatter(x=xd, y=ys, mode="lines", line=dict(width=5, color=shade), name=kind),
                          row=1, col=2)
    fig.update_yaxes(type="category", title_text="producer id", row=1, col=1)
    fig.update_yaxes(type="category", row=1, col=2)
    fig.update_layout(height=max(360, 14 * min(len(top), MAX_PRODUCERS) + 120), margin=dict(t=40))
    out.append(("producers", "Producer and transaction timelines", fig))

    # codecs and compaction
    codec_bytes: dict[str, int] = {}
    codec_batches: dict[str, int] = {}
    removed = empty = horizon = 0
    for pf in parts:
        c = pf.cols
        ok = c["crc_valid"]
        magic, attrs = c["magic"][ok], c["attributes"][ok]
        codec = np.where(magic == 2, attrs & W.COMPRESSION_CODEC_MASK, attrs & W.LEGACY_COMPRESSION_CODEC_MASK)
        for cc in np.unique(codec).tolist():
            name = W.Compression(int(cc)).name.lower() if cc in (0, 1, 2, 3, 4) else f"codec {cc}"
            sel = codec == cc
            codec_bytes[name] = codec_bytes.get(name, 0) + int(c["size"][ok][sel].sum())
            codec_batches[name] = codec_batches.get(name, 0) + int(sel.sum())
        base, last = c["base_offset"][ok], c["last_offset"][ok]
        if len(base) > 1:
            removed += int(np.clip(base[1:] - last[:-1] - 1, 0, None).sum())
        v2 = magic == 2
        empty += int(np.count_nonzero(v2 & (c["record_count"][ok] == 0)))
        horizon += int(np.count_nonzero(v2 & ((attrs & W.DELETE_HORIZON_FLAG_MASK) != 0)))
    fig = make_subplots(rows=1, cols=2, subplot_titles=("bytes by codec", "compaction traces"),
                        specs=[[{"type": "domain"}, {"type": "xy"}]])
    fig.add_trace(go.Pie(labels=list(codec_bytes), values=list(codec_bytes.values()),
                         text=[f"{codec_batches[k]} batches" for k in codec_bytes], hole=0.35), row=1, col=1)
    fig.add_trace(go.Bar(x=["offsets removed", "empty batches", "batches with delete horizon"],
                         y=[removed, empty, horizon], marker_color="#72b7b2", showlegend=False), row=1, col=2)
    fig.update_layout(height=380, margin=dict(t=40))
    out.append(("codecs", "Codec and compaction breakdown", fig))

    # findings by check and severity
    fig = go.Figure()
    by: dict[tuple[str, str], int] = {}
    for f in result.findings:
        by[(f.check, f.severity.label)] = by.get((f.check, f.severity.label), 0) + 1 + int(f.details.get("more", 0))
    for sev, shade in SEVERITY_COLORS.items():
        checks = [k[0] for k in by if k[1] == sev]
        fig.add_trace(go.Bar(y=checks, x=[by[(c, sev)] for c in checks], orientation="h", name=sev,
                             marker_color=shade))
    fig.update_layout(barmode="stack", height=max(260, 26 * len({k[0] for k in by}) + 120), margin=dict(t=30, l=220),
                      xaxis_title="findings")
    out.append(("findings-chart", f"Findings by check ({len(result.findings)} in all)", fig))

    # segment map: segments by offset range per partition, findings on them
    fig = go.Figure()
    seg_x: list[Any] = []
    seg_y: list[Any] = []
    seg_text: list[str] = []
    for pf in shown:
        c = pf.cols
        seg = c["segment"]
        label = _label(pf)
        if not len(seg):
            continue
        bounds = np.flatnonzero(np.diff(seg)) + 1
        for a, b in zip(np.concatenate(([0], bounds)).tolist(), np.concatenate((bounds, [len(seg)])).tolist()):
            lo, hi = int(c["base_offset"][a:b].min()), int(c["last_offset"][a:b].max())
            seg_x += [lo, hi, None]
            seg_y += [label, label, None]
            seg_text.append(f"{os.path.basename(pf.segments[int(seg[a])])}: offsets {lo}..{hi}")
    fig.add_trace(go.Scatter(x=seg_x, y=seg_y, mode="lines+markers", line=dict(width=14, color="#bab0ac"),
                             marker=dict(symbol="line-ns", size=18, line=dict(width=2, color="#555")),
                             name="segments", hoverinfo="skip"))
    labels = {_label(p) for p in shown}
    for sev, shade in SEVERITY_COLORS.items():
        fs = [f for f in result.findings if f.severity.label == sev and f"{f.topic}-{f.partition}" in labels]
        if fs:
            fig.add_trace(go.Scatter(x=[_offset_of(f, result) for f in fs], y=[f"{f.topic}-{f.partition}" for f in fs],
                                     mode="markers", marker=dict(size=11, color=shade, symbol="diamond"), name=sev,
                                     text=[f"{f.check}: {f.message}" for f in fs], hoverinfo="text"))
    fig.update_yaxes(type="category")
    fig.update_layout(height=max(260, 40 * len(shown) + 120), xaxis_title="offset", margin=dict(t=30, l=160))
    out.append(("segment-map", "Segment map with findings and damage", fig))
    return out


def _offset_of(f: Any, result: "AuditResult") -> int:
    """Where a finding sits on the segment map: its offset, else its segment's base offset."""
    if f.first_offset is not None:
        return int(f.first_offset)
    name = os.path.basename(f.segment or "")
    digits = name.split(".")[0].split("-")[0]
    return int(digits) if digits.isdigit() else 0


def _transaction_spans(parts: "list[PartitionFacts]", clock: int | None) -> list[tuple[int, int, int, str]]:
    """(producer id, first batch time, marker time or the clock, COMMIT/ABORT/open), newest last."""
    out: list[tuple[int, int, int, str]] = []
    for pf in parts:
        c = pf.cols
        for pid, first, end in pf.transactions[-MAX_TRANSACTIONS:]:
            a = int(c["max_timestamp"][first])
            if end is None:
                b, kind = (clock if clock is not None else a), "open"
            else:
                b = int(c["max_timestamp"][end])
                k = pf.markers.get(end)
                kind = "COMMIT" if k == W.ControlRecordType.COMMIT else "ABORT" if k == W.ControlRecordType.ABORT \
                    else "open"
            if 0 <= a < 10**14 and 0 <= b < 10**14:
                out.append((pid, a, max(a, b), kind))
    return out[-MAX_TRANSACTIONS:]


_STYLE = """
body{font-family:system-ui,-apple-system,Segoe UI,Roboto,sans-serif;margin:24px;color:#222;max-width:1400px}
h1{font-size:1.5em;margin-bottom:4px} h2{font-size:1.15em;margin-top:28px;border-bottom:1px solid #ddd}
.meta{color:#555} table{border-collapse:collapse;font-size:12px;width:100%}
th,td{border:1px solid #ddd;padding:3px 6px;text-align:left;vertical-align:top} th{background:#f4f4f4}
.sev-error{color:#b00020;font-weight:600}.sev-warning{color:#b35900}.sev-info{color:#2b5797}
.chart{min-height:240px} .kv td:first-child{color:#555}
"""


def render_html(result: "AuditResult", title: str, fail_on: str = "error") -> str:
    """The whole page: summary, charts, findings table; plotly.js inlined once."""
    from plotly.offline import get_plotlyjs

    from ..log.findings import counts

    figs = figures(result)
    n = counts(result.findings)
    totals = dict(partitions=len(result.partitions), segments=sum(len(p.segments) for p in result.partitions),
                  batches=sum(p.rows for p in result.partitions),
                  records=sum(p.summary.get("records", 0) for p in result.partitions),
                  bytes=sum(p.bytes for p in result.partitions))
    parts = ["<!DOCTYPE html>", "<html lang='en'><head><meta charset='utf-8'>",
             "<link rel='icon' href='data:,'>",  # no favicon request: nothing is fetched
             f"<title>{html.escape(title)}</title><style>{_STYLE}</style>",
             f"<script type='text/javascript'>{get_plotlyjs()}</script></head><body>",
             f"<h1>{html.escape(title)}</h1>",
             f"<p class='meta'>log clock {html.escape(format_time(result.clock))} ({result.clock_source}); "
             f"{totals['partitions']} partition(s), {totals['segments']} segment(s), {totals['batches']} batches, "
             f"{totals['records']} records, {totals['bytes']} bytes; findings: {n['error']} error, "
             f"{n['warning']} warning, {n['info']} info</p>",
             "<h2>Partitions</h2>", _partition_table(result)]
    for i, (fid, ftitle, fig) in enumerate(figs):
        div = fig.to_html(full_html=False, include_plotlyjs=False, div_id=f"chart-{fid}",
                          config={"displaylogo": False, "responsive": True}, default_height=f"{fig.layout.height}px")
        parts.append(f"<h2>{html.escape(ftitle)}</h2><div class='chart' data-chart='{fid}'>{div}</div>")
    parts += ["<h2>Findings</h2>", _findings_table(result), "</body></html>"]
    return "\n".join(parts)


def _partition_table(result: "AuditResult") -> str:
    cols = ("topic", "partition", "segments", "batches", "records", "bytes", "unread_bytes", "first_offset",
            "end_offset", "last_stable_offset", "open_transactions")
    rows = ["<table class='kv'><tr>" + "".join(f"<th>{c}</th>" for c in cols) + "</tr>"]
    for p in result.partitions:
        rows.append("<tr>" + "".join(f"<td>{html.escape(str(p.summary.get(c, '')))}</td>" for c in cols) + "</tr>")
    return "".join(rows) + "</table>"


def _findings_table(result: "AuditResult") -> str:
    fs = result.findings
    head = ("severity", "check", "partition", "offsets", "segment", "position", "message")
    rows = ["<table id='findings'><tr>" + "".join(f"<th>{h}</th>" for h in head) + "</tr>"]
    for f in fs[:MAX_TABLE_ROWS]:
        offs = "" if f.first_offset is None else (str(f.first_offset) if f.last_offset in (None, f.first_offset)
                                                  else f"{f.first_offset}..{f.last_offset}")
        cells = (f"<span class='sev-{f.severity.label}'>{f.severity.label}</span>", html.escape(f.check),
                 html.escape(f"{f.topic}-{f.partition}" if f.topic is not None else ""), offs,
                 html.escape(os.path.basename(f.segment or "")), "" if f.position is None else str(f.position),
                 html.escape(f.message))
        rows.append("<tr>" + "".join(f"<td>{c}</td>" for c in cells) + "</tr>")
    rows.append("</table>")
    if not fs:
        rows = ["<p>No findings.</p>"]
    elif len(fs) > MAX_TABLE_ROWS:
        rows.append(f"<p>{len(fs) - MAX_TABLE_ROWS} more finding(s): <code>kbatch audit --json</code> lists all.</p>")
    return "".join(rows)


def write_report(paths: "Sequence[PathLike]", output: "PathLike", *, config: Any = None, quiet: bool = True,
                 title: str | None = None) -> "AuditResult":
    """Audit the paths and write the page to `output` (atomically: a temporary file, then a rename)."""
    import plotly  # noqa: F401  (the report extra; its absence is named before any work)

    from ..log.audit import AuditConfig
    from .audit import run_audit

    result = run_audit(list(paths), config or AuditConfig(), quiet, label="report")
    page = render_html(result, title or "kbatch report: " + ", ".join(os.fspath(p) for p in paths))
    out = os.fspath(output)
    tmp = f"{out}.tmp{os.getpid()}"
    with open(tmp, "w", encoding="utf-8") as f:
        f.write(page)
    os.replace(tmp, out)
    return result


def cmd_report(paths: "Sequence[PathLike]", *, output: "PathLike", config_file: str | None = None,
               now: int | None = None, title: str | None = None, fail_on: str | None = None, quiet: bool = False,
               record_timestamps: bool = False,
               as_json: bool = False, out: IO[str] | None = None, err: IO[str] | None = None) -> int:
    from ..log.findings import Severity, at_or_above
    from .audit import audit_config

    out = out or sys.stdout
    level = None
    if fail_on is not None:
        try:
            level = Severity.parse(fail_on)
        except ValueError as e:
            raise UsageProblem(f"--fail-on: {e}") from None
    target = os.fspath(output)
    parent = os.path.dirname(os.path.abspath(target))
    if not os.path.isdir(parent):
        raise UsageProblem(f"{target}: the directory {parent} does not exist")
    config = audit_config(config_file, now=now, record_timestamps=record_timestamps)
    result = write_report(paths, target, config=config, quiet=quiet, title=title)
    failing = at_or_above(result.findings, level) if level is not None else []
    if as_json:
        out.write(json.dumps({"report": os.path.abspath(target), "findings": len(result.findings),
                              "failing": len(failing)}) + "\n")
    elif not quiet:
        out.write(f"report: {os.path.abspath(target)} ({len(result.findings)} finding(s))\n")
    return EXIT_PROBLEMS if failing else EXIT_OK


def register(app: "typer.Typer") -> None:
    from typing import Annotated, List, Optional

    import typer

    @app.command(help="Write one self-contained HTML page (opens offline) with plots of log directories: records "
                      "and bytes over time per partition, timestamp skew and anomalies, producer and transaction "
                      "timelines, codecs and compaction, the audit's findings and a segment map with the damage. "
                      "Needs the 'report' extra (plotly).")
    def report(paths: Annotated[List[str], typer.Argument(help="Log directories, partition directories or segment .log files.")],
               output: Annotated[str, typer.Option("--output", "-o", help="The HTML file to write.")] = "report.html",
               config_file: Annotated[Optional[str], typer.Option("--config", help="Broker or topic properties for the audit's checks (as kbatch audit --config).")] = None,
               now: Annotated[Optional[str], typer.Option("--now", help="The clock to judge by (epoch ms or ISO-8601); default: the log's own.")] = None,
               title: Annotated[Optional[str], typer.Option("--title", help="The page's title.")] = None,
               fail_on: Annotated[Optional[str], typer.Option("--fail-on", help="Also exit 1 when a finding is at or above this level (default: the page is the answer, exit 0).")] = None,
               record_timestamps: Annotated[bool, typer.Option("--record-timestamps", help="As kbatch audit --record-timestamps.")] = False,
               as_json: Annotated[bool, typer.Option("--json", help="Print {report, findings, failing} as JSON.")] = False,
               quiet: Annotated[bool, typer.Option("--quiet", "-q", help="No progress bar and no report line.")] = False) -> None:
        run(cmd_report, paths, output=output, config_file=config_file, now=time_value(now), title=title,
            fail_on=fail_on, record_timestamps=record_timestamps, as_json=as_json, quiet=quiet)
