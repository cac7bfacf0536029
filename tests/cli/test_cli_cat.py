"""`kbatch cat` against kcat's documented consumer semantics (kcat's README/usage and format.c:
tokens, delimiters, -Z, -o forms, -c, the -J envelope, -s), and `kbatch stats`.

Each rule is named in a test against kcat's documented behaviour; and where kcat is installed (the
Debian package), `kbatch cat` is compared with the real kcat consuming the same directory through
`kbatch serve` (test_cat_prints_what_kcat_prints_through_kbatch_serve).
"""
from __future__ import annotations

import base64
import io
import json
import os
import shutil
import struct
import subprocess

import pytest

import kbatch
from kbatch.cli.cat import cmd_cat, parse_escapes, parse_format
from kbatch.cli.stats import KeyCardinality, cmd_stats

pytest.importorskip("typer", reason="the CLI needs typer (the cli extra)")

# (timestamp, key, value, headers) at offsets 0..5
RECORDS = [
    (1000, b"k0", b"v0", [("h1", b"a"), ("h2", None)]),
    (1001, None, b"v1", []),
    (1002, b"", b"", []),
    (1003, b"\x00\x01\xff", None, []),
    (2000, b"k4", b"v4", []),
    (3000, b"k5", struct.pack(">i", 42), []),
]


@pytest.fixture(scope="module")
def topic_dir(tmp_path_factory):
    root = tmp_path_factory.mktemp("cat")
    d = str(root / "t-0")
    log = kbatch.Log.create(d, kbatch.LogConfig(segment_bytes=200))  # a segment or two per batch: -o across files
    for ts, k, v, h in RECORDS:
        b = kbatch.BatchBuilder(timestamp_extended=False)
        b.append(ts, k, v, headers=h)
        log.append(b.build(), now_ms=5000)
    # a committed transaction (6, 7; marker 8) and an aborted one (9, 10; marker 11)
    for commit, base in ((True, 6), (False, 9)):
        b = kbatch.BatchBuilder(producer_id=7, producer_epoch=0, base_sequence=base - 6, is_transactional=True)
        b.append(4000 + base, b"tk%d" % base, b"tv%d" % base)
        b.append(4001 + base, b"tk%d" % (base + 1), b"tv%d" % (base + 1))
        log.append(b.build(), now_ms=5000, from_client=False)
        log.append(kbatch.build_end_txn_marker(producer_id=7, producer_epoch=0, commit=commit, coordinator_epoch=0,
                                               timestamp=4100 + base), now_ms=5000, from_client=False)
    log.close()
    # Log.append of the ABORT marker indexed the transaction in the segment holding the marker, as a broker does
    seg = kbatch.Log.open(d).segments[-1]
    assert [tuple(t) for t in seg.txn_index] == [(7, 9, 11, 12, 0)]
    return str(root)


def cat(root, **kw):
    out, err = io.BytesIO(), io.StringIO()
    code = cmd_cat(root, out=out, err=err, quiet=kw.pop("quiet", True), **kw)
    return code, out.getvalue(), err.getvalue()


def test_default_output_is_the_value_and_a_newline(topic_dir):
    code, out, _ = cat(topic_dir, offsets=["0"], count=6)
    # kcat prints key/value only when their length is non-zero: NULL and empty print alike
    assert code == 0 and out == b"v0\nv1\n\n\nv4\n" + struct.pack(">i", 42) + b"\n"


def test_key_delimiter_null_string_and_message_delimiter(topic_dir):
    assert cat(topic_dir, key_delim=":", count=4)[1] == b"k0:v0\n:v1\n:\n\x00\x01\xff:\n"
    assert cat(topic_dir, key_delim=":", null=True, count=4)[1] == b"k0:v0\nNULL:v1\nNULL:NULL\n\x00\x01\xff:NULL\n"
    assert cat(topic_dir, delim="\\x00|", count=2)[1] == b"v0\x00|v1\x00|"


def test_every_format_token(topic_dir):
    fmt = "%t|%p|%o|%T|%k|%K|%s|%S|%h|%%\\n"
    lines = cat(topic_dir, fmt=fmt, count=4)[1].split(b"\n")
    assert lines[0] == b"t|0|0|1000|k0|2|v0|2|h1=a,h2=NULL|%"
    assert lines[1] == b"t|0|1|1001||-1|v1|2||%"       # NULL key: empty, length -1
    assert lines[2] == b"t|0|2|1002||0||0||%"          # empty key and value: lengths 0
    assert lines[3] == b"t|0|3|1003|\x00\x01\xff|3||-1||%"  # NULL value (a tombstone)
    assert cat(topic_dir, fmt="%R", count=4)[1] == struct.pack(">iiii", 2, 2, 0, -1)
    assert parse_escapes(r"\x41\t\102\n\\") == b"A\tf\n\\"
    with pytest.raises(kbatch.cli.UsageProblem, match="unsupported formatter %x"):
        parse_format("%x")


def test_offsets_beginning_end_absolute_tail_and_times(topic_dir):
    fmt = "%o "
    ru = dict(isolation_level="read_uncommitted")
    assert cat(topic_dir, fmt=fmt)[1] == b"0 1 2 3 4 5 6 7 "  # 9, 10: an aborted transaction (read_committed)
    assert cat(topic_dir, fmt=fmt, offsets=["end"])[1] == b""
    assert cat(topic_dir, fmt=fmt, offsets=["4"])[1] == b"4 5 6 7 "
    assert cat(topic_dir, fmt=fmt, offsets=["-5"])[1] == b"7 "  # the last five offsets: 7..11 (9, 10 aborted)
    assert cat(topic_dir, fmt=fmt, offsets=["-5"], **ru)[1] == b"7 9 10 "
    assert cat(topic_dir, fmt=fmt, offsets=["-100"])[1] == b"0 1 2 3 4 5 6 7 "  # no further back than the start
    # s@T: the first record with timestamp >= T; e@T: stop before the first with timestamp >= T
    assert cat(topic_dir, fmt=fmt, offsets=["s@1002", "e@2500"])[1] == b"2 3 4 "
    assert cat(topic_dir, fmt=fmt, offsets=["s@999999"])[1] == b""
    code, out, err = cat(topic_dir, fmt=fmt, offsets=["99"])
    assert (code, out) == (0, b"") and "out of range" in err and "auto.offset.reset=latest" in err
    assert cat(topic_dir, fmt=fmt, count=3)[1] == b"0 1 2 "


def test_isolation_levels(topic_dir):
    # the default is librdkafka's and so kcat's, read_committed: the aborted transaction is left out;
    # read_uncommitted (--isolation-level, or kcat's -X) shows it, as Kafka's console consumer; control
    # records are never shown to consumers
    assert cat(topic_dir, fmt="%o ", offsets=["6"])[1] == b"6 7 "
    assert cat(topic_dir, fmt="%o ", offsets=["6"], isolation_level="read_uncommitted")[1] == b"6 7 9 10 "
    assert cat(topic_dir, fmt="%o ", offsets=["6"], isolation_level="read_committed")[1] == b"6 7 "
    got = cat(topic_dir, fmt="%o ", offsets=["6"], properties=["isolation.level=read_committed"])[1]
    assert got == b"6 7 "
    got = cat(topic_dir, fmt="%o ", offsets=["6"], properties=["isolation.level=read_uncommitted"])[1]
    assert got == b"6 7 9 10 "
    with pytest.raises(kbatch.cli.UsageProblem):
        cat(topic_dir, isolation_level="read_comitted")
    with pytest.raises(kbatch.cli.UsageProblem):
        cat(topic_dir, properties=["fetch.max.bytes=1"])


def test_json_envelope(topic_dir):
    rows = [json.loads(x) for x in cat(topic_dir, as_json=True, count=4)[1].splitlines()]
    assert list(rows[0]) == ["topic", "partition", "offset", "tstype", "ts", "broker", "headers", "key", "payload"]
    assert rows[0] == {"topic": "t", "partition": 0, "offset": 0, "tstype": "create", "ts": 1000, "broker": -1,
                       "headers": ["h1", "a", "h2", None], "key": "k0", "payload": "v0"}
    assert "headers" not in rows[1] and rows[1]["key"] is None and rows[3]["payload"] is None
    rows = [json.loads(x) for x in cat(topic_dir, as_json=True, count=6, serdes=["key=hex", "value=base64"])[1]
            .splitlines()]
    assert rows[3]["key"] == "0001ff" and rows[0]["payload"] == base64.b64encode(b"v0").decode()


def test_deserializers(topic_dir):
    assert cat(topic_dir, fmt="%s", offsets=["5"], count=1, serdes=["value=>i"])[1] == b"42"
    assert cat(topic_dir, fmt="%k", offsets=["3"], count=1, serdes=["hex"])[1] == b"0001ff"
    code, out, err = cat(topic_dir, fmt="%s;", offsets=["4"], count=1, serdes=["value=>q"])
    assert code == 1 and "truncated" in err  # kcat: "Failed to format message ... truncated"
    with pytest.raises(kbatch.cli.UsageProblem):
        cat(topic_dir, serdes=["value=zz"])


def test_filters_and_cli_entry(topic_dir, capfdbinary):
    from kbatch.cli import main

    assert main(["cat", topic_dir, "-t", "t", "-p", "0", "-c", "1", "-f", "%k\\n", "-q"]) == 0
    assert capfdbinary.readouterr().out == b"k0\n"
    assert main(["cat", topic_dir, "-t", "nope"]) == 2
    assert main(["cat", topic_dir, "-f", "%x"]) == 2


# ------------------------------------------------------------------------------------ stats
def test_stats(topic_dir):
    out, err = io.StringIO(), io.StringIO()
    assert cmd_stats(topic_dir, as_json=True, out=out, err=err) == 0
    st = json.loads(out.getvalue())
    log = kbatch.Log.open(os.path.join(topic_dir, "t-0"))
    batches = list(log.batches())
    data = [b for b in batches if not b.is_control]
    recs = [r for b in data for r in b]
    assert st["records"] == len(recs) == 10 and st["batches"] == len(batches)
    assert (st["first_offset"], st["last_offset"], st["end_offset"]) == (0, 11, 12)
    assert (st["min_timestamp"], st["max_timestamp"]) == (1000, 4010)  # data records (markers left out)
    assert st["tombstones"] == 1 and st["null_keys"] == 1
    assert (st["commits"], st["aborts"], st["transactional_batches"], st["producers"]) == (1, 1, 2, 1)
    assert st["codecs"] == {"none": len(batches)} and st["bytes"] == log.size
    assert st["key_cardinality_estimate"] == len({bytes(r.key) for r in recs if r.key is not None})
    assert cmd_stats(topic_dir, out=io.StringIO(), err=err) == 0


def test_key_cardinality_estimate_is_close():
    import pyarrow as pa

    h = KeyCardinality()
    for start in range(0, 200_000, 50_000):
        h.add(pa.array([b"customer-%d" % i for i in range(start, start + 50_000)] + [None], pa.binary()))
    h.add(pa.array([b"customer-%d" % i for i in range(1000)], pa.binary()))  # repeats change nothing
    assert abs(h.estimate() - 200_000) / 200_000 < 0.03


# ------------------------------------------------------------------------------------ the real kcat
KCAT_CASES = [
    ["-f", "%t|%p|%o|%T|%k|%K|%s|%S|%h|%%\\n"],
    ["-o", "3", "-f", "%o:%k:%s\\n"],
    ["-o", "-4", "-f", "%o %T\\n"],
    ["-o", "s@1002", "-o", "e@2500", "-f", "%o %T %s\\n"],
    ["-c", "3", "-K", ":"],
    ["-Z", "-K", "=", "-c", "4"],
    ["-o", "5", "-c", "1", "-s", "value=>i", "-f", "%s\\n"],
    ["-X", "isolation.level=read_uncommitted", "-f", "%o "],
]


def test_cat_prints_what_kcat_prints_through_kbatch_serve(topic_dir, tmp_path):
    kcat = shutil.which("kcat")
    if kcat is None:
        pytest.skip("kcat is not installed (Debian package kcat)")
    pytest.importorskip("kafka", reason="kbatch serve needs kafka-python (the serve extra)")
    from kbatch.server import serve

    root = str(tmp_path / "served")
    shutil.copytree(topic_dir, root)
    with serve(root, group_initial_rebalance_delay_ms=0) as srv:
        for args in KCAT_CASES + [["-J"]]:
            r = subprocess.run([kcat, "-C", "-b", srv.bootstrap, "-t", "t", "-p", "0", "-e", "-q", *args],
                               capture_output=True, timeout=60)
            assert r.returncode == 0, r.stderr
            code, out, _err = cat(topic_dir, topic="t", partition=0, **_cat_args(args))
            assert code == 0
            if args == ["-J"]:
                # kcat names the broker that served it (kbatch cat has none: -1), and writes bytes that
                # are not UTF-8 into its JSON strings as they are (invalid JSON); kbatch writes U+FFFD
                # there, valid JSON (-s key=base64 keeps every byte), which is what reading kcat's
                # line with errors="replace" gives
                got = [json.loads(x) for x in out.splitlines()]
                want = [json.loads(x.decode("utf-8", "replace")) for x in r.stdout.splitlines()]
                assert [{k: v for k, v in d.items() if k != "broker"} for d in got] == [
                    {k: v for k, v in d.items() if k != "broker"} for d in want]
            else:
                assert out == r.stdout, args


def _cat_args(args) -> dict:
    """kcat's command line -> cmd_cat's keywords (kcat, as librdkafka, reads read_committed by
    default; kbatch cat reads read_uncommitted, as Kafka's console consumer: say it)."""
    kw, i = {"offsets": [], "serdes": [], "properties": ["isolation.level=read_committed"]}, 0
    while i < len(args):
        a = args[i]
        if a in ("-f", "-K", "-o", "-c", "-s", "-X"):
            v = args[i + 1]
            i += 2
            if a == "-f":
                kw["fmt"] = v
            elif a == "-K":
                kw["key_delim"] = v
            elif a == "-o":
                kw["offsets"].append(v)
            elif a == "-c":
                kw["count"] = int(v)
            elif a == "-s":
                kw["serdes"].append(v)
            else:
                kw["properties"].append(v)
            continue
        if a == "-Z":
            kw["null"] = True
        elif a == "-J":
            kw["as_json"] = True
        i += 1
    return kw
