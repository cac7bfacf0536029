"""Every reader gives the read path's answer (issue 28): over tests/support/read_path_cases.py's
matrix of damaged and transactional partitions (the one tests/spark/test_spark_read_path.py holds
both Spark readers to), kbatch.log.fetch.read_log is the oracle and

- `Log.read` and `kbatch.read_topic`: the same records, or UnreadableDataError naming the same bytes;
- `kbatch cat` (both isolation levels): the same records, exit 1 and the same bytes named exactly
  where read_log stops;
- `kbatch serve`, read by a real client (confluent-kafka; kafka-python without it) with
  isolation.level read_committed and read_uncommitted: the same records, and nothing past bytes
  the read path cannot read (no silent skip to the next segment);
- `FetchResult.record_batches` (the Arrow rows tables and export write): the same records, a
  prefix of them and the same error (or, with check_first, no row and the error);
- `kbatch stats`: the records a read_uncommitted read that goes on after damage counts, every
  range it met named, exit 1 exactly when it met one;
- `kbatch export --format parquet` (and jsonl): per segment, the records read_log gives for that
  segment's offsets, or no file, the bytes named and exit 1;
- `kbatch offsets --time T` and `kbatch cat -o s@T`: the same answer and the same exit status.
"""
from __future__ import annotations

import base64
import io
import json
import os
import subprocess
import sys

import pytest

import kbatch
from kbatch.cli.cat import cmd_cat
from kbatch.cli.export import cmd_export
from kbatch.cli.offsets import cmd_offsets
from kbatch.cli.stats import cmd_stats
from kbatch.log.fetch import IsolationLevel, UnreadableDataError, read_log

from support import read_path_cases as C

pa = pytest.importorskip("pyarrow")

CASES = sorted(C.CASES)
LEVELS = sorted(C.ISOLATION)


@pytest.fixture(scope="module")
def parts(tmp_path_factory):
    """case -> its partition directory `<root>/<case>-0` (one root: kbatch serve serves them all)."""
    return C.build_all(str(tmp_path_factory.mktemp("read-path")))


def _named(r) -> str:
    return f"{r.path}: {r.size} bytes from byte {r.position} could not be read"


def _kv(rows):
    return [(o, k, v) for o, k, v, _ts in rows]


# ------------------------------------------------------------------------------------ Python API
@pytest.mark.parametrize("isolation", LEVELS)
@pytest.mark.parametrize("case", CASES)
def test_log_read_and_read_topic(parts, case, isolation):
    want, stopped, _met = C.expected(parts[case], C.ISOLATION[isolation], skip=False)
    log = kbatch.Log.open(parts[case])
    try:
        got = []
        with pytest.raises(UnreadableDataError) if stopped else _nothing() as ei:
            for _b, r in log.read(isolation=C.ISOLATION[isolation]).records():
                got.append((r.offset, None if r.key is None else bytes(r.key), None if r.value is None else bytes(r.value),
                            r.timestamp))
        assert got == want
        if stopped:
            assert ei.value.range == stopped
    finally:
        log.close()

    if stopped:
        with pytest.raises(UnreadableDataError) as ei:
            kbatch.read_topic(parts[case], isolation=isolation)
        assert _named(stopped) in str(ei.value)
        return
    t = kbatch.read_topic(parts[case], isolation=isolation)
    ts = t.column("timestamp").cast(pa.timestamp("ms")).cast(pa.int64()).to_pylist()
    rows = list(zip(t.column("offset").to_pylist(), t.column("key").to_pylist(), t.column("value").to_pylist(), ts))
    assert rows == want


class _nothing:
    def __enter__(self):
        return None

    def __exit__(self, *exc):
        return False


# ------------------------------------------------------------------------------------ cat
def _arrow_rows(batches):
    out = []
    for rb in batches:
        d = rb.to_pydict()
        out += [(o, k, v, ts) for o, k, v, ts in zip(d["offset"], d["key"], d["value"], d["timestamp"])]
    return out


@pytest.mark.parametrize("skip", [False, True], ids=["strict", "skip"])
@pytest.mark.parametrize("isolation", LEVELS)
@pytest.mark.parametrize("case", CASES)
def test_record_batches_are_the_records(parts, case, isolation, skip):
    want, stop, _met = C.expected(parts[case], C.ISOLATION[isolation], skip)
    for check_first in (False, True):
        log = kbatch.Log.open(parts[case])
        try:
            res = read_log(log, log.beginning_offset(), isolation=C.ISOLATION[isolation], skip_unreadable=skip)
            got: list = []
            gen = res.record_batches("t", 0, check_first=check_first)
            if stop is None:
                got = _arrow_rows(gen)
                assert [(o, k, v, ts.timestamp() * 1000 if ts is not None else None) for o, k, v, ts in got] \
                    == [(o, k, v, float(t)) for o, k, v, t in want]
            else:
                with pytest.raises(UnreadableDataError) as e:
                    for rb in gen:
                        got += _arrow_rows([rb])
                assert e.value.range == stop
                assert [r[0] for r in got] == ([] if check_first else [r[0] for r in want][:len(got)])
                if not check_first:  # everything before the bytes it stopped at
                    assert len(got) == len(want)
        finally:
            log.close()


def _cat(path, **kw):
    out, err = io.BytesIO(), io.StringIO()
    code = cmd_cat(path, out=out, err=err, quiet=True, **kw)
    return code, out.getvalue(), err.getvalue()


@pytest.mark.parametrize("isolation", LEVELS)
@pytest.mark.parametrize("case", CASES)
def test_cat(parts, case, isolation):
    want, stopped, _met = C.expected(parts[case], C.ISOLATION[isolation], skip=False)
    code, out, err = _cat(parts[case], isolation_level=isolation, as_json=True)
    got = [json.loads(line) for line in out.splitlines()]
    assert [(g["offset"], g["key"], g["payload"]) for g in got] == \
        [(o, None if k is None else k.decode(), None if v is None else v.decode()) for o, k, v, _ts in want]
    assert [g.get("ts") for g in got] == [ts for *_x, ts in want]
    assert code == (1 if stopped else 0), err
    if stopped:
        assert _named(stopped) in err and f"{stopped.offsets()} are in or behind them" in err, err


# ------------------------------------------------------------------------------------ serve
def test_serve_through_a_real_client(parts):
    """One `kbatch serve` (read-only) over every case, one client process reading each partition
    from its start in both isolation levels: the records read_log gives (for a damaged partition,
    those before the bytes it cannot read, and asking for one record more gets Kafka's error 2,
    CORRUPT_MESSAGE, never a record from past the hole)."""
    pytest.importorskip("kafka.protocol.api_message", reason="kbatch serve needs kafka-python >= 3 (the serve extra)")
    from kbatch.server import serve

    drivers = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "support", "serve_clients")
    try:
        import confluent_kafka  # noqa: F401
        driver = os.path.join(drivers, "confluent.py")
    except ImportError:
        driver = os.path.join(drivers, "kafka_python.py")
    plan, wants = [], []
    for case in CASES:
        log = kbatch.Log.open(parts[case])
        start = log.beginning_offset()
        log.close()
        for isolation in LEVELS:
            want, stopped, _met = C.expected(parts[case], C.ISOLATION[isolation], skip=False)
            extra = 1 if stopped is not None else 0  # one record past the hole: the client must be told
            if not want and not extra:
                continue
            plan.append({"op": "consume", "topic": case, "partition": 0, "offset": start, "count": len(want) + extra,
                         "isolation": isolation, "check_crcs": True})  # as Kafka's Java consumer does by default
            wants.append((case, isolation, want))
    root = os.path.dirname(parts[CASES[0]])
    with serve(root, read_only=True) as srv:
        r = subprocess.run([sys.executable, driver, srv.bootstrap], input=json.dumps(plan), capture_output=True,
                           text=True, timeout=600)
    assert r.returncode == 0, r.stderr[-3000:]
    results = json.loads(r.stdout)
    wrong = []
    for (case, isolation, want), step, res in zip(wants, plan, results):
        got = [(o, None if k is None else bytes.fromhex(k), None if v is None else bytes.fromhex(v))
               for o, _ts, k, v, _h in res.get("records", [])]
        if step["count"] > len(want):  # one past the hole: the client is told, as read_log raises
            # an error, never records past the hole: the server's CORRUPT_MESSAGE (librdkafka: INVALID_MSG), or
            # what the client finds in the bytes itself (_BAD_MSG: a CRC; _NOT_IMPLEMENTED: magic 7)
            if res.get("error") is None:
                wrong.append(f"{case} {isolation}: {res.get('error')}, offsets {[o for o, *_x in got]}")
        elif got != _kv(want):
            wrong.append((case, isolation, res))
    assert wrong == [], "\n".join(map(str, wrong))


# ------------------------------------------------------------------------------------ stats
@pytest.mark.parametrize("case", CASES)
def test_stats(parts, case):
    want, _stopped, met = C.expected(parts[case], IsolationLevel.READ_UNCOMMITTED, skip=True)
    out, err = io.StringIO(), io.StringIO()
    code = cmd_stats(parts[case], as_json=True, quiet=True, out=out, err=err)
    [st] = [json.loads(line) for line in out.getvalue().splitlines()]
    assert st["records"] == len(want)
    assert (st["first_offset"] is None) == (not want)
    for r in met:
        assert _named(r) in err.getvalue()
    assert code == (1 if met else 0), err.getvalue()


# ------------------------------------------------------------------------------------ export
def _per_segment(part):
    """segment base -> (records read_log gives for its offsets, or the UnreadableRange it stops at)."""
    log = kbatch.Log.open(part)
    try:
        bases = [s.base_offset for s in log.segments]
        out = {}
        for k, base in enumerate(bases):
            res = read_log(log, base, bases[k + 1] if k + 1 < len(bases) else None)
            try:
                out[base] = [(r.offset, bytes(r.key) if r.key is not None else None,
                              bytes(r.value) if r.value is not None else None) for _b, r in res.records()]
            except UnreadableDataError as e:
                out[base] = e.range
        return out
    finally:
        log.close()


@pytest.mark.parametrize("case", CASES)
def test_export_parquet(parts, case, tmp_path):
    import pyarrow.parquet as pq

    want = _per_segment(parts[case])
    out, err = io.StringIO(), io.StringIO()
    to = str(tmp_path / "out")
    code = cmd_export(parts[case], to=to, fmt="parquet", quiet=True, out=out, err=err)
    folder = os.path.join(to, f"topic={case}", "partition=0")
    have = {int(n[:20]) for n in os.listdir(folder)} if os.path.isdir(folder) else set()
    assert have == {b for b, w in want.items() if isinstance(w, list)}
    for base, w in want.items():
        if isinstance(w, list):
            t = pq.read_table(os.path.join(folder, f"{base:020d}.parquet"))
            assert list(zip(t.column("offset").to_pylist(), t.column("key").to_pylist(),
                            t.column("value").to_pylist())) == w
        else:
            assert _named(w) in err.getvalue()
    assert code == (0 if all(isinstance(w, list) for w in want.values()) else 1), err.getvalue()


def test_export_jsonl_is_the_same_read(parts, tmp_path):
    case = "torn-active"  # the partial batch at the end of the active segment is ignored, as Kafka does
    want = _per_segment(parts[case])
    err = io.StringIO()
    to = str(tmp_path / "all.jsonl")
    assert cmd_export(parts[case], to=to, fmt="jsonl", quiet=True, out=io.StringIO(), err=err) == 0, err.getvalue()
    with open(to) as f:
        rows = [json.loads(line) for line in f]
    assert [(r["offset"], base64.b64decode(r["key"]), base64.b64decode(r["value"])) for r in rows] == \
        [x for base in sorted(want) for x in want[base]]


# ------------------------------------------------------------------------------------ offsets vs cat s@T
@pytest.mark.parametrize("case", CASES)
def test_offsets_and_cat_by_time_agree(parts, case):
    want, _stopped, _met = C.expected(parts[case], IsolationLevel.READ_UNCOMMITTED, skip=True)
    stamps = sorted(ts for *_x, ts in want if ts is not None)
    target = stamps[len(stamps) // 2]
    out, err = io.StringIO(), io.StringIO()
    code = cmd_offsets(parts[case], times=[str(target)], as_json=True, quiet=True, out=out, err=err)
    [answer] = [json.loads(line) for line in out.getvalue().splitlines()]
    code_cat, printed, err_cat = _cat(parts[case], offsets=[f"s@{target}"], count=1, fmt="%o",
                                      isolation_level="read_uncommitted")
    assert answer["offset"] is not None
    assert printed.decode() == str(answer["offset"]), (err.getvalue(), err_cat)
    assert code == code_cat, (err.getvalue(), err_cat)


# ------------------------------------------------------------------------------------ a start inside the damage
@pytest.mark.parametrize("case", sorted(C.FAILING))
def test_a_start_inside_unreadable_bytes_is_an_error_not_a_skip(parts, case):
    """Reading from the first offset the damage hides: read_log
    raises, naming the same file; cat prints nothing and exits 1; serve's Fetch gives
    CORRUPT_MESSAGE (test_serve_through_a_real_client asks past the hole). Never a silent start at
    the next readable batch, even once a lookup has read around the damage (in-memory indexes)."""
    _want, stopped, _met = C.expected(parts[case], IsolationLevel.READ_UNCOMMITTED, skip=False)
    # the first offset the damage hides: the one after the last read before it, or the segment's base
    lost = stopped.after_offset + 1 if stopped.after_offset is not None else int(os.path.basename(stopped.path)[:20])
    for warm in (False, True):
        log = kbatch.Log.open(parts[case])
        try:
            if warm:  # a full lookup pass first: the damaged segment's indexes are then built around the damage
                log.offsets_for_times([C.D.TS0 + 10 ** 9])
            with pytest.raises(UnreadableDataError) as ei:
                for _b, r in read_log(log, lost).records():
                    raise AssertionError(f"{case}: offset {r.offset} read from a start at {lost}")
            assert ei.value.range.path == stopped.path
        finally:
            log.close()
    code, out, err = _cat(parts[case], offsets=[str(lost)], count=1, fmt="%o", isolation_level="read_uncommitted")
    assert (code, out) == (1, b"") and stopped.path in err, (case, lost, out, err)
