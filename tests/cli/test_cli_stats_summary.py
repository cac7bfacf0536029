"""`kbatch stats` from the summary (issue 40): --fast gives the header figures of the full stats,
the record figures named as omitted (never guessed); --histogram counts the records' own
timestamps exactly as a full decode does, at each isolation level; --trust-headers misses a
flipped byte inside a record, the default does not; a bad --histogram is a usage error."""
from __future__ import annotations

import io
import json
import logging

import pytest

import kbatch
from kbatch.cli.stats import cmd_stats
from kbatch.log.fetch import read_log

from support import partitions as P
from support import read_path_cases as C

HEADER_FIGURES = ("segments", "bytes", "batches", "records", "log_start_offset", "first_offset", "last_offset",
                  "end_offset", "max_timestamp", "codecs", "magic", "batch_bytes_min", "batch_bytes_max",
                  "batch_bytes_mean", "records_per_batch_mean", "producers", "idempotent_batches",
                  "transactional_batches", "transactional_records", "commits", "aborts", "control_batches",
                  "empty_batches", "last_stable_offset", "read_committed", "per_producer", "problems")


@pytest.fixture(scope="module")
def parts(tmp_path_factory):
    logging.disable(logging.WARNING)
    yield C.build_all(str(tmp_path_factory.mktemp("stats")), ["txn-open", "txn-closed", "crc-middle",
                                                              "dl-old-broker"])
    logging.disable(logging.NOTSET)


def stats(path, **kw):
    out, err = io.StringIO(), io.StringIO()
    code = cmd_stats(path, as_json=True, quiet=True, out=out, err=err, **kw)
    return code, [json.loads(line) for line in out.getvalue().splitlines()], err.getvalue()


@pytest.mark.parametrize("case", ["txn-open", "txn-closed", "crc-middle", "dl-old-broker"])
def test_fast_gives_the_same_header_figures(parts, case):
    code, [full], err = stats(parts[case])
    fcode, [fast], ferr = stats(parts[case], fast=True)
    assert (code, err) == (fcode, ferr)
    for k in HEADER_FIGURES:
        if k == "read_committed" and "min_timestamp" in fast["omitted"]:
            assert fast[k]["min_timestamp"] is None
            fast[k]["min_timestamp"] = full[k]["min_timestamp"]
        assert fast[k] == full[k], k
    for k in ("tombstones", "null_keys", "key_cardinality_estimate"):
        assert fast[k] is None and k in fast["omitted"]
        assert full[k] is not None and k not in full["omitted"]
    if fast["min_timestamp"] is None:
        assert "min_timestamp" in fast["omitted"] or full["min_timestamp"] is None
    else:
        assert fast["min_timestamp"] == full["min_timestamp"]


@pytest.mark.parametrize("isolation", sorted(C.ISOLATION))
@pytest.mark.parametrize("case", ["txn-open", "txn-closed", "dl-old-broker"])
def test_histogram_is_the_decoded_records(parts, case, isolation):
    log = kbatch.Log.open(parts[case])
    try:
        want: dict[int, int] = {}
        for _b, r in read_log(log, log.log_start_offset, isolation=C.ISOLATION[isolation]).records():
            if r.timestamp is not None:
                k = r.timestamp - r.timestamp % 60_000
                want[k] = want.get(k, 0) + 1
    finally:
        log.close()
    code, [h], _err = stats(parts[case], histogram="1m", isolation=isolation)
    assert code == 0 and h["bucket_ms"] == 60_000
    assert {k: v for k, v in h["histogram"]} == want
    out = io.StringIO()
    assert cmd_stats(parts[case], histogram="1m", isolation=isolation, quiet=True, out=out, err=io.StringIO()) == 0
    assert len(out.getvalue().splitlines()) == 1 + len(want)


def test_bad_histogram_is_a_usage_error(parts):
    err = io.StringIO()
    assert cmd_stats(parts["txn-open"], histogram="5x", out=io.StringIO(), err=err) == 2
    assert "--histogram" in err.getvalue()
    assert cmd_stats(parts["txn-open"], histogram="1m", isolation="dirty", out=io.StringIO(), err=err) == 2


def test_trust_headers_misses_a_flipped_record_byte(tmp_path):
    part = str(tmp_path / "t-0")
    P.plain(part)
    seg = P.segment_logs(part)[0]
    rows = P.batch_positions(seg)
    nxt = rows[2][0]
    with open(seg, "r+b") as f:
        f.seek(nxt - 3)
        b = f.read(1)
        f.seek(nxt - 3)
        f.write(bytes([b[0] ^ 0x01]))
    code, [st], err = stats(part, fast=True)
    assert code == 1 and "crc" in err.lower()
    tcode, [tst], terr = stats(part, fast=True, trust_headers=True)
    assert tcode == 0 and not terr and tst["crc"] == "trusted"
    assert tst["records"] > st["records"]
