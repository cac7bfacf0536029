"""`kbatch grep`: planted needles found once each with their topic, partition and offset; the
same records as `kbatch cat` with the same options, filtered in Python; isolation levels, bounds,
every codec and magic; hostile segments (exit 3, cat's messages, never a crash); exit codes."""
from __future__ import annotations

import io
import json
import os
import shutil
import struct

import crc32c as crc32c_pkg
import pytest

import kbatch
from kbatch.cli.cat import cmd_cat
from kbatch.cli.grep import cmd_grep
from support import partitions as P

typer_testing = pytest.importorskip("typer.testing")
from kbatch import cli  # noqa: E402

BROKERS = os.path.join(os.path.dirname(__file__), "..", "data", "brokers")
T0 = 1_714_554_000_000

# needle -> (topic, partition, offset) of the one record that holds it, and where
PLANTED = {
    "NEEDLE-KEY-1": ("orders", 0, 23, "key"),
    "NEEDLE-VAL-2": ("orders", 0, 61, "value"),
    "NEEDLE-HDR-3": ("orders", 0, 88, "trace"),
    "NEEDLE-HDR-4": ("orders", 1, 7, "other"),
    "NEEDLE-VAL-5": ("orders", 1, 140, "value"),
    "NEEDLE-OLD-6": ("old", 0, 5, "value"),
}


def _orders(path, partition, n, segment_bytes):
    """`n` records in batches of 10, the codecs in turn, a few segments; the planted needles."""
    log = kbatch.Log.create(path, kbatch.LogConfig(segment_bytes=segment_bytes, index_interval_bytes=256),
                            now_ms=T0)
    try:
        for base in range(0, n, 10):
            b = kbatch.BatchBuilder(compression=kbatch.Compression(base // 10 % 5))
            for off in range(base, base + 10):
                key, value, headers = b"order-%d" % off, b"payload %d of orders needle-free" % off, [("trace", b"t%d" % off)]
                for needle, (t, p, o, where) in PLANTED.items():
                    if (t, p, o) == ("orders", partition, off):
                        if where == "key":
                            key += needle.encode()
                        elif where == "value":
                            value += needle.encode()
                        else:
                            headers.append((where, needle.encode()))
                b.append(T0 + off * 1000, key, value, headers=headers)
            log.append(b.build(), now_ms=T0 + n * 1000)
    finally:
        log.close()


def _legacy(path):
    """Magic 0 and 1 message sets, every legacy codec, written raw (no broker writes these now)."""
    os.makedirs(path)
    data, off = b"", 0
    for magic, codec in ((0, 0), (1, 1), (1, 0), (0, 2), (1, 3)):
        b = kbatch.BatchBuilder(magic=magic, compression=codec, base_offset=off)
        for i in range(2):
            b.append(T0 + off + i if magic else -1, b"k%d" % (off + i),
                     b"legacy %d" % (off + i) + (b"NEEDLE-OLD-6" if off + i == 5 else b""))
        data += b.build()
        off += 2
    with open(os.path.join(path, "00000000000000000000.log"), "wb") as f:
        f.write(data)


@pytest.fixture(scope="module")
def root(tmp_path_factory):
    r = tmp_path_factory.mktemp("grep")
    _orders(str(r / "orders-0"), 0, 100, 1500)
    _orders(str(r / "orders-1"), 1, 150, 2500)
    P.transactional(str(r / "payments-0"))
    _legacy(str(r / "old-0"))
    log = kbatch.Log.create(str(r / "__consumer_offsets-0"), kbatch.LogConfig(), now_ms=T0)
    b = kbatch.BatchBuilder()
    b.append(T0, b"NEEDLE-KEY-1", b"internal")
    log.append(b.build(), now_ms=T0)
    log.close()
    return str(r)


def grep(pattern, *paths, **kw):
    out, err = io.BytesIO(), io.StringIO()
    code = cmd_grep(pattern, [str(p) for p in paths], out=out, err=err, **kw)
    return code, out.getvalue(), err.getvalue()


def cat_json(path, **kw):
    out, err = io.BytesIO(), io.StringIO()
    code = cmd_cat(path, out=out, err=err, quiet=True, as_json=True, **kw)
    return code, [json.loads(line) for line in out.getvalue().splitlines()], err.getvalue()


def where(lines):
    return [(o["topic"], o["partition"], o["offset"]) for o in lines]


def jlines(out):
    return [json.loads(line) for line in out.splitlines()]


# ------------------------------------------------------------------------------------ answers
def test_planted_needles_are_found_once_with_their_place(root):
    for needle, (t, p, o, _where) in PLANTED.items():
        code, out, err = grep(needle, root, as_json=True)
        assert code == 0, err
        assert where(jlines(out)) == [(t, p, o)], needle
        code, out, _ = grep(needle, root)
        assert out.decode().startswith(f"{t} [{p}] at offset {o}: key ") and out.count(b"\n") == 1


def test_fields_restrict_where_it_looks(root):
    assert where(jlines(grep("NEEDLE-KEY-1", root, key=True, as_json=True)[1])) == [("orders", 0, 23)]
    assert grep("NEEDLE-KEY-1", root, value=True, headers=True)[0] == 1
    assert grep("NEEDLE-VAL-2", root, key=True)[0] == 1
    assert grep("NEEDLE-HDR-3", root, header_names=["trace"])[0] == 0
    assert grep("NEEDLE-HDR-3", root, header_names=["other"])[0] == 1
    assert grep("NEEDLE-HDR-3", root, key=True, value=True)[0] == 1
    assert grep("NEEDLE-HDR-4", root, headers=True)[0] == 0
    # a header's key is not searched, nor a field boundary: "order-23" + its value's length varint
    assert grep("other", root, topic=["orders"])[0] == 1
    assert grep("NEEDLE-KEY-1" + "\x3e" + "payload", root)[0] == 1


def test_internal_topics_only_when_named(root):
    assert where(jlines(grep("NEEDLE-KEY-1", root, as_json=True)[1])) == [("orders", 0, 23)]
    got = where(jlines(grep("NEEDLE-KEY-1", root, as_json=True, include_internal=True)[1]))
    assert got == [("__consumer_offsets", 0, 0), ("orders", 0, 23)]
    assert where(jlines(grep("NEEDLE-KEY-1", root, as_json=True, topic=["__consumer_offsets"])[1])) == [
        ("__consumer_offsets", 0, 0)]
    assert grep("NEEDLE-KEY-1", root, exclude_topic=["ord*"])[0] == 1
    assert grep("NEEDLE-HDR-4", root, partition=0)[0] == 1


def _python_filter(lines, needle, regex=None):
    def hit(s):
        return s is not None and (regex.search(s) is not None if regex else needle in s)
    return [o for o in lines if hit(o.get("key")) or hit(o.get("payload"))
            or any(hit(v) for v in (o.get("headers") or [])[1::2])]


@pytest.mark.parametrize("level", ["read_committed", "read_uncommitted"])
@pytest.mark.parametrize("bounds", [{}, {"from_": "37", "until": "122"}, {"from_": f"@{T0 + 50_000}"},
                                    {"from_": "-60", "until": f"@{T0 + 140_500}"}, {"from_": "end"}])
def test_the_same_records_as_cat_filtered_in_python(root, backend, level, bounds):
    """grep -J prints the lines cat -J prints (same bounds, same isolation), filtered by the needle
    in key, payload or a header value; on both backends, for fixed strings and regexes."""
    import re

    o = []
    if "from_" in bounds:
        f = bounds["from_"]
        o.append(f"s{f}" if f.startswith("@") else f)
    if "until" in bounds:
        u = bounds["until"]
        o.append(f"e{u}" if u.startswith("@") else None)
    for d in ("orders-0", "orders-1", "payments-0", "old-0"):
        path = os.path.join(root, d)
        if "until" in bounds and not bounds["until"].startswith("@"):
            code, lines, _ = cat_json(path, offsets=[x for x in o if x], isolation_level=level)
            lines = [x for x in lines if x["offset"] < int(bounds["until"])]
        else:
            code, lines, _ = cat_json(path, offsets=[x for x in o if x], isolation_level=level)
        assert code == 0
        for needle, regex in (("needle", None), ("-v1", None), ("1", None), ("NEEDLE", None),
                              (r"(order|plain)-k?\d*[05]\b", re.compile(r"(order|plain)-k?\d*[05]\b"))):
            want = _python_filter(lines, needle, regex)
            code, out, err = grep(needle, path, as_json=True, isolation_level=level, regex=regex is not None,
                                  **bounds)
            assert code == (0 if want else 1), err
            assert jlines(out) == want, (d, needle)


def test_isolation_levels_on_transactions(root):
    pay = os.path.join(root, "payments-0")
    built_unc = [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 12, 13, 14, 15, 16, 18, 19]
    committed = [0, 1, 2, 3, 4, 7, 8, 12, 13]   # LSO 14: an open transaction
    fmt = "%o\\n"
    assert grep("-v", pay, fmt=fmt, isolation_level="read_uncommitted")[1].split() == [b"%d" % o for o in built_unc]
    assert grep("-v", pay, fmt=fmt)[1].split() == [b"%d" % o for o in committed]   # read_committed: cat's default
    assert grep("x-v", pay)[0] == 1                                    # the aborted transaction's records
    assert grep("x-v", pay, isolation_level="read_uncommitted")[0] == 0


def test_count_list_quiet_and_max_count(root):
    code, out, _ = grep("NEEDLE", root, count=True)
    assert code == 0 and out.decode().splitlines() == [
        "old [0]: 1", "orders [0]: 3", "orders [1]: 2", "payments [0]: 0", "total: 6"]
    code, out, _ = grep("NEEDLE", root, count=True, as_json=True)
    assert jlines(out)[-1] == {"total": 6, "partitions": 4, "failed": 0}
    assert jlines(out)[1] == {"topic": "orders", "partition": 0, "count": 3}
    code, out, _ = grep("NEEDLE-HDR", root, list_partitions=True)
    assert out.decode().split() == [os.path.join(root, "orders-0"), os.path.join(root, "orders-1")]
    assert grep("needle", root, quiet=True)[:2] == (0, b"")
    assert grep("absent", root, quiet=True)[:2] == (1, b"")
    assert len(grep("NEEDLE", root, max_count=2)[1].splitlines()) == 2


def test_time_bounds_go_through_the_time_index(root):
    o0 = os.path.join(root, "orders-0")
    got = grep("order", o0, fmt="%o\\n", from_="2024-05-01T09:00:30Z", until=f"@{T0 + 33_000}")[1].split()
    assert got == [b"%d" % o for o in range(30, 33)]
    assert grep("order", o0, fmt="%o\\n", from_="95")[1].split() == [b"%d" % o for o in range(95, 100)]
    assert grep("order", o0, fmt="%o\\n", from_="-3")[1].split() == [b"97", b"98", b"99"]
    assert grep("order", o0, until="0")[0] == 1


# ------------------------------------------------------------------------------------ damage
def _forge_records(path, offset_in_batch=0):
    """A record length varint of the first batch of the first segment made 5 bytes of 0xFF (a
    huge, overlong varint), the batch's CRC recomputed: only decoding the records sees it."""
    log_path = P.segment_logs(path)[0]
    pos, _base, _last = P.batch_positions(log_path)[0]
    with open(log_path, "r+b") as f:
        f.seek(pos)
        raw = bytearray(f.read(12))
        size = struct.unpack(">i", raw[8:12])[0]
        raw += f.read(size)
        raw[61 + offset_in_batch:61 + offset_in_batch + 5] = b"\xff" * 5
        raw[17:21] = struct.pack(">I", crc32c_pkg.crc32c(bytes(raw[21:])))
        f.seek(pos)
        f.write(raw)
    return log_path


@pytest.mark.parametrize("damage", ["torn middle segment", "bad length field", "crc flip", "forged records"])
def test_damage_is_said_as_cat_says_it_and_exits_3(tmp_path, damage):
    path = str(tmp_path / "t-0")
    P.plain(path)
    if damage == "torn middle segment":
        target = P.tear_middle_segment(path)[0]
    elif damage == "bad length field":
        target = P.bad_length_field(path)[0]
    elif damage == "crc flip":
        target = P.segment_logs(path)[1]
        pos = P.batch_positions(target)[1][0]
        with open(target, "r+b") as f:
            f.seek(pos + 70)
            b = f.read(1)
            f.seek(pos + 70)
            f.write(bytes([b[0] ^ 0x10]))
    else:
        target = _forge_records(path)
    out, err = io.BytesIO(), io.StringIO()
    cat_code = cmd_cat(path, out=out, err=err, quiet=True, as_json=True)
    cat_lines = [json.loads(x) for x in out.getvalue().splitlines()]
    assert cat_code == 1 and (target if damage != "forged records" else path) in err.getvalue()
    for needle in ("p-v", "absent"):
        code, gout, gerr = grep(needle, path, as_json=True)
        assert code == 3, gerr
        assert gerr == err.getvalue().replace("% Reached end of topic t [0] at offset 200: exiting\n", "")
        lines = jlines(gout)
        assert lines[-1]["error"] and lines[-1]["topic"] == "t"
        assert lines[:-1] == _python_filter(cat_lines, needle)
    code, out, _ = grep("p-v", path, count=True)
    assert code == 3 and out.decode().splitlines()[0].endswith(" FAILED")


def test_a_partial_batch_at_the_end_of_the_active_segment_is_ignored_as_by_cat(tmp_path):
    path = str(tmp_path / "t-0")
    P.plain(path)
    last = P.segment_logs(path)[-1]
    rows = P.batch_positions(last)
    with open(last, "r+b") as f:
        f.truncate(rows[-1][0] + 30)
    assert grep("p-v", path, count=True)[0] == 0
    assert grep("absent", path)[0] == 1


@pytest.mark.parametrize("seed", range(6))
def test_hostile_bytes_never_crash(tmp_path, seed):
    """Random bit flips, cuts and forged lengths over a whole segment (CRCs recomputed for half
    of them, so the records decoder meets them): grep exits 0, 1 or 3 with cat's verdict."""
    import random

    rnd = random.Random(seed)
    path = str(tmp_path / "t-0")
    P.plain(path, batches=12)
    log_path = P.segment_logs(path)[0]
    data = bytearray(open(log_path, "rb").read())
    rows = P.batch_positions(log_path)
    for _ in range(3):
        pos = rnd.randrange(len(data))
        data[pos] = rnd.choice([0xFF, 0x80, 0x00, data[pos] ^ (1 << rnd.randrange(8))])
    if seed % 2:
        for p, _b, _l in rows:  # recompute every CRC that still has a sane length
            size = struct.unpack(">i", data[p + 8:p + 12])[0]
            if 49 <= size and p + 12 + size <= len(data):
                data[p + 17:p + 21] = struct.pack(">I", crc32c_pkg.crc32c(bytes(data[p + 21:p + 12 + size])))
    if seed == 4:
        del data[rnd.randrange(len(data)):]
    open(log_path, "wb").write(bytes(data))
    cat_code = cmd_cat(path, out=io.BytesIO(), err=io.StringIO(), quiet=True)
    code, _out, _err = grep("p-v1", path)
    assert code in (0, 1, 3)
    assert (code == 3) == (cat_code == 1)


# ------------------------------------------------------------------------------------ the command line
def run(*args):
    return typer_testing.CliRunner().invoke(cli.make_app(), [str(a) for a in args])


def test_exit_codes_and_usage_errors(root, tmp_path):
    assert run("grep", "NEEDLE-VAL-5", root, "-t", "orders", "-J").exit_code == 0
    r = run("grep", "NEEDLE", root, "-c", "-t", "ord*", "--from", "10", "--until", "@" + str(T0 + 120_000))
    assert r.exit_code == 0 and r.stdout.splitlines() == ["orders [0]: 3", "orders [1]: 0", "total: 3"]
    assert run("grep", "-E", "NEEDLE-(KEY|VAL)-[12]", root, "-q").exit_code == 0
    assert run("grep", "-i", "needle-old-6", root, "--value", "-l").stdout.split() == [os.path.join(root, "old-0")]
    assert run("grep", "absent", root).exit_code == 1
    for bad in (["", root], ["-E", "(", root], ["x", root, "--from", "yesterday"], ["x", str(tmp_path / "none")],
                ["x", root, "-c", "-l"], ["x", root, "--isolation-level", "dirty"], ["x"], ["x", root, "-m", "0"],
                ["x", root, "-t", "nope"]):
        r = run("grep", *bad)
        assert r.exit_code == 2, (bad, r.output)
        assert "Traceback" not in r.output


def test_real_brokers_logs_agree_with_cat(tmp_path):
    """Real brokers' directories (tests/data/brokers: 2.1 to 3.7, consumer offsets, cluster metadata,
    transactions): grep -J prints cat -J's lines that hold the needle."""
    from support.serve_support import BROKER_DATA, broker_data_copy

    seen = 0
    for broker in sorted(os.listdir(BROKER_DATA)):
        if not os.path.isdir(os.path.join(BROKER_DATA, broker)):
            continue
        d = broker_data_copy(broker, str(tmp_path / broker))
        for part in kbatch.cli.partition_dirs(d):
            code, lines, _ = cat_json(part, include_internal=True, isolation_level="read_uncommitted")
            assert code == 0
            for needle in ("a", "test", "\x01"):
                want = _python_filter(lines, needle)
                gcode, out, err = grep(needle, part, as_json=True, include_internal=True,
                                       isolation_level="read_uncommitted")
                assert gcode == (0 if want else 1), (part, err)
                assert jlines(out) == want, (part, needle)
                seen += len(want)
    assert seen > 100


def test_grep_on_a_copy_of_a_log_dir_with_several_roots(root, tmp_path):
    other = tmp_path / "other"
    shutil.copytree(os.path.join(root, "old-0"), other / "old-0")
    code, out, _ = grep("NEEDLE-OLD-6", root, str(other), as_json=True)
    assert code == 0 and where(jlines(out)) == [("old", 0, 5), ("old", 0, 5)]


# ------------------------------------------------------------------------------------ the read-path matrix
@pytest.fixture(scope="module")
def matrix(tmp_path_factory):
    from support import read_path_cases as R

    return R.build_all(str(tmp_path_factory.mktemp("matrix")))


@pytest.mark.parametrize("level", ["read_committed", "read_uncommitted"])
def test_every_read_path_case_greps_as_cat_reads(matrix, level):
    """Every partition of the read path's matrix (transactions, torn, bad lengths, CRC failures,
    forged base offsets, stale .txnindex, damaged indexes; tests/support/read_path_cases.py): grep
    -J prints cat -J's lines that hold the needle, says on stderr what cat says, and exits 3
    exactly where cat exits 1."""
    for name, part in sorted(matrix.items()):
        out, err = io.BytesIO(), io.StringIO()
        cat_code = cmd_cat(part, out=out, err=err, quiet=True, as_json=True, isolation_level=level)
        lines = [json.loads(x) for x in out.getvalue().splitlines()]
        for needle in ("-v1", "k1", "p-v", "CCC"):
            code, gout, gerr = grep(needle, part, as_json=True, isolation_level=level)
            want = _python_filter(lines, needle)
            got = jlines(gout)
            assert [x for x in got if "error" not in x] == want, (name, needle)
            assert code == (3 if cat_code == 1 else 0 if want else 1), (name, needle, cat_code, gerr)
            assert gerr == err.getvalue(), (name, needle)
            assert any("error" in x for x in got) == (code == 3), (name, needle)
