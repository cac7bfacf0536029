"""`kbatch audit` and `kbatch report` on the command line: exit codes by --fail-on, the --json
document's schema (docs/cli.md), --config files, text output, the report page's self-containment,
and the report in a real headless browser (Debian's chromium + chromium-driver through Selenium)."""
from __future__ import annotations

import json
import os
import re
import shutil
import sys
from pathlib import Path

import pytest

pytest.importorskip("typer")

from kbatch.cli import main  # noqa: E402
from support.audit_logs import PLANTS, clean, planted  # noqa: E402

#: docs/cli.md, "kbatch audit --json": the document's keys, a finding's keys, a partition's keys
DOC_KEYS = {"version", "tool", "clock", "config", "fail_on", "ok", "counts", "totals", "partitions", "findings"}
FINDING_KEYS = ["check", "severity", "topic", "partition", "first_offset", "last_offset", "segment", "position",
                "message", "details"]
PARTITION_KEYS = {"topic", "partition", "path", "segments", "batches", "bytes", "unread_bytes", "records",
                  "first_offset", "end_offset", "last_stable_offset", "open_transactions"}
#: where the browser test keeps its screenshot (and the page) when set; else under pytest's tmp dir
ARTIFACTS = os.environ.get("KBATCH_TEST_ARTIFACTS")



@pytest.fixture(autouse=True)
def _summary_cache(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> None:
    """The header cache (kbatch.log.summary) of these tests is theirs, never the user's."""
    monkeypatch.setenv("KBATCH_SUMMARY_CACHE", str(tmp_path_factory.mktemp("summary-cache")))

def run(argv: list[object], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    code = main([str(a) for a in argv])
    c = capsys.readouterr()
    return code, c.out, c.err


@pytest.fixture(scope="module")
def logdir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A log directory: a clean partition, and one partition per planted anomaly."""
    root = tmp_path_factory.mktemp("audit")
    clean(str(root / "clean-0")).write()
    for i, name in enumerate(sorted(PLANTS)):
        planted(str(root / f"planted-{i}"), name)
    return root


def test_clean_exits_0_and_says_ok(logdir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(["audit", logdir / "clean-0", "--fail-on", "info"], capsys)
    assert code == 0, err
    assert out.startswith("OK: 0 error(s), 0 warning(s), 0 info; 1 partition(s), 2 segment(s)")


@pytest.mark.parametrize("level, expect", [("error", 1), ("warning", 1), ("info", 1)])
def test_fail_on_levels(tmp_path: Path, capsys: pytest.CaptureFixture[str], level: str, expect: int) -> None:
    planted(str(tmp_path / "t-0"), "open-transaction")  # one info finding
    code, out, _ = run(["audit", tmp_path, "--fail-on", level], capsys)
    assert code == (1 if level == "info" else 0)
    assert "transaction.open" in out
    planted(str(tmp_path / "u-0"), "negative")  # one warning
    code, _, _ = run(["audit", tmp_path, "--fail-on", level, "-q"], capsys)
    assert code == (0 if level == "error" else 1)


def test_json_document(logdir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(["audit", logdir, "--json"], capsys)
    assert code == 1, err
    assert len(out.splitlines()) == 1
    doc = json.loads(out)
    assert set(doc) == DOC_KEYS and doc["version"] == 1 and doc["tool"] == "kbatch audit"
    assert doc["ok"] is False and doc["fail_on"] == "error"
    assert doc["clock"]["source"] == "log" and isinstance(doc["clock"]["value"], int)
    assert set(doc["counts"]) == {"info", "warning", "error"}
    assert sum(doc["counts"].values()) == len(doc["findings"])
    assert doc["totals"]["partitions"] == len(PLANTS) + 1 == len(doc["partitions"])
    for p in doc["partitions"]:
        assert PARTITION_KEYS <= set(p)
    checks = {f["check"] for f in doc["findings"]}
    # one clock for the whole log: the hanging-transaction partition's is 20 minutes ahead, so the
    # open-transaction partition's transaction hangs by it too
    assert checks == {"producer.sequence-gap", "producer.duplicate-sequence", "producer.fenced-epoch",
                      "producer.epoch-back", "transaction.hanging",
                      "transaction.marker-without-data", "timestamp.future", "timestamp.negative",
                      "timestamp.unit", "timestamp.backwards", "storage.empty-batch", "storage.leader-epoch-back",
                      "storage.crc", "storage.truncated", "storage.corrupt", "storage.index"}
    for f in doc["findings"]:
        assert list(f) == FINDING_KEYS
        assert f["severity"] in ("info", "warning", "error")
        assert f["topic"] == "planted" and f["segment"] and os.path.exists(f["segment"])


def test_config_file_sets_the_bounds(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    planted(str(tmp_path / "t-0"), "too-old")
    code, out, _ = run(["audit", tmp_path, "--fail-on", "warning"], capsys)
    assert code == 0, out  # Kafka's default before.max.ms: no bound
    props = tmp_path / "server.properties"
    props.write_text("log.message.timestamp.before.max.ms=3600000\n")
    code, out, _ = run(["audit", tmp_path, "--config", props, "--fail-on", "warning"], capsys)
    assert code == 1 and "timestamp.too-old" in out
    props.write_text("log.message.timestamp.before.max.ms=an hour\n")
    code, _, err = run(["audit", tmp_path, "--config", props], capsys)
    assert code == 2 and "log.message.timestamp.before.max.ms" in err


def test_unreadable_input_is_an_error_not_silence(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    planted(str(tmp_path / "t-0"), "forged-length")
    code, out, _ = run(["audit", tmp_path, "--json"], capsys)
    doc = json.loads(out)
    assert code == 1 and doc["totals"]["unread_bytes"] > 0
    assert [f["check"] for f in doc["findings"]] == ["storage.corrupt"]


def test_trust_headers_says_what_it_misses(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    planted(str(tmp_path / "t-0"), "crc")
    code, out, _ = run(["audit", tmp_path, "--trust-headers"], capsys)
    assert code == 0 and "CRCs were not checked" in out


# ------------------------------------------------------------------------------------ report
def test_report_is_one_self_contained_page(logdir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    pytest.importorskip("plotly")
    out_file = tmp_path / "r.html"
    code, out, err = run(["report", logdir, "-o", out_file, "--json"], capsys)
    assert code == 0, err
    assert json.loads(out)["report"] == str(out_file)
    page = out_file.read_text()
    assert not re.search(r"<script[^>]*\bsrc\s*=", page, re.I), "a script loaded from elsewhere"
    assert not re.search(r"<(link|img|iframe)[^>]*\b(href|src)\s*=\s*['\"]?(https?:)?//", page, re.I)
    assert page.count("Plotly.newPlot(") == 7
    assert "storage.crc" in page and "producer.sequence-gap" in page
    code, _, _ = run(["report", logdir, "-o", out_file, "--fail-on", "error", "-q"], capsys)
    assert code == 1


def test_report_without_plotly_names_the_extra(logdir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "plotly", None)
    code, _, err = run(["report", logdir / "clean-0", "-o", tmp_path / "r.html"], capsys)
    assert code == 2 and "plotly" in err and "'report' extra" in err
    assert not (tmp_path / "r.html").exists()


def _chromium() -> tuple[str, str] | None:
    browser = shutil.which("chromium") or shutil.which("chromium-browser")
    driver = shutil.which("chromedriver")
    return (browser, driver) if browser and driver else None


@pytest.mark.skipif(_chromium() is None, reason="no chromium + chromedriver: `python3 dev.py test` installs Debian's "
                    "chromium and chromium-driver with apt-get (as root); elsewhere apt-get install -y chromium "
                    "chromium-driver")
def test_report_renders_in_headless_chromium(logdir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The page loads from a file with no console error, every chart draws its SVG with content,
    and a full-page screenshot is kept (KBATCH_TEST_ARTIFACTS, else the test's tmp dir)."""
    pytest.importorskip("plotly")
    webdriver = pytest.importorskip("selenium.webdriver")
    from selenium.webdriver.chrome.service import Service

    out_dir = Path(ARTIFACTS) if ARTIFACTS else tmp_path
    out_dir.mkdir(parents=True, exist_ok=True)
    page = out_dir / "audit-report.html"
    code, _, err = run(["report", logdir, "-o", page, "-q"], capsys)
    assert code == 0, err
    browser, driver = _chromium()  # type: ignore[misc]
    opts = webdriver.ChromeOptions()
    opts.binary_location = browser
    for a in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu", "--window-size=1400,1000",
              "--disable-background-networking", "--no-first-run"):
        opts.add_argument(a)
    opts.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    d = webdriver.Chrome(service=Service(driver), options=opts)
    try:
        d.set_page_load_timeout(60)
        d.get(page.as_uri())
        charts = d.execute_script(
            "return Array.from(document.querySelectorAll('.chart')).map(c => ({id: c.dataset.chart,"
            " svgs: c.querySelectorAll('svg.main-svg').length,"
            " marks: c.querySelectorAll('.scatterlayer .trace, .barlayer .point, .pielayer .slice, .point').length,"
            " w: (c.querySelector('svg.main-svg') || {clientWidth: 0}).clientWidth,"
            " h: (c.querySelector('svg.main-svg') || {clientHeight: 0}).clientHeight}))")
        assert [c["id"] for c in charts] == ["over-time", "timestamps", "skew", "producers", "codecs",
                                             "findings-chart", "segment-map"]
        for c in charts:
            assert c["svgs"] >= 1 and c["w"] > 100 and c["h"] > 100 and c["marks"] > 0, c
        rows = d.execute_script("return document.querySelectorAll('#findings tr').length")
        assert rows > len(PLANTS) - 4  # a header row and a row per finding (too-old and oversized need options)
        logs = d.get_log("browser")
        assert [e for e in logs if e.get("level") == "SEVERE"] == [], logs
        # a full-page screenshot, kept
        height = d.execute_script("return document.documentElement.scrollHeight")
        d.set_window_size(1400, min(int(height) + 100, 16000))
        shot = out_dir / "audit-report.png"
        assert d.save_screenshot(str(shot))
        assert shot.stat().st_size > 20_000
    finally:
        d.quit()


def test_verify_and_validate_find_through_the_same_model(tmp_path: Path) -> None:
    """verify's problems/notes and validate's exit code come from Findings (kbatch.log.findings);
    their printed shapes are their own, as before."""
    from kbatch.cli.validate import timestamp_report, validate_findings
    from kbatch.cli.verify import _Verifier
    from kbatch.cli._common import resolve_segments
    from kbatch.log.findings import Finding, Severity

    planted(str(tmp_path / "t-0"), "crc")
    v = _Verifier(lambda n: None)
    for d, segs in resolve_segments(str(tmp_path)):
        v.partition(d, segs)
    # the background's aborted transaction has its .txnindex, as a broker writes it
    assert [(f.check, f.severity) for f in v.findings] == [("verify.crc", Severity.ERROR)]
    crc = v.findings[0]
    assert v.problems[0] == dict(file=crc.segment, position=crc.position, message=crc.message, kind="crc")
    (d, segs), = resolve_segments(str(tmp_path))
    rep = timestamp_report(segs, 0, 2**63 - 1, 1000)
    found = validate_findings(d, rep)
    assert all(isinstance(f, Finding) for f in found)
    assert sorted(f.check for f in found) == ["storage.unreadable", "timestamp.future"]
    (future,) = [f for f in found if f.check == "timestamp.future"]
    assert (future.topic, future.partition, future.first_offset) == ("t", 0, rep["first_too_new_offset"])


def test_demo_ends_with_the_report_path(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    pytest.importorskip("plotly")
    from kbatch import demo

    assert demo.main(["--dir", str(tmp_path / "sample"), "--records", "600", "--no-spark", "--report"]) == 0
    last = capsys.readouterr().out.strip().splitlines()[-1]
    assert last == f"[kbatch.demo] report: {tmp_path / 'sample' / 'report.html'}"
    assert (tmp_path / "sample" / "report.html").stat().st_size > 1_000_000  # plotly.js inlined
