"""The summary cache's verified prefix of the active segment (kbatch.log.summary, docs/summary.md
"The cache"): after an append only the bytes appended are read, and every change that can be
seen (a truncation, a file replaced, the last batch header of the prefix changed, a torn tail
batch) makes the summary read again; each answer equals a full read's (the summary without a
cache, itself checked against read_log record by record in test_summary.py), on both backends.
An in-place rewrite of the middle of the prefix that keeps the size, the inode and the boundary
headers is what it misses, as documented: tested so."""
from __future__ import annotations

import logging
import os

import pytest

import kbatch
from kbatch.log.fetch import UnreadableDataError
from kbatch.log import summary as S
from kbatch.log.summary import SummaryCache, histogram, summarize

from log.test_compaction import LogGen, write_segments
from support import read_path_cases as C

COUNTERS = ("cached_segments", "scanned_segments", "cached_bytes", "scanned_bytes")


@pytest.fixture(autouse=True)
def _quiet():
    logging.disable(logging.WARNING)
    yield
    logging.disable(logging.NOTSET)


def _answers(d, cache, **kw):
    """(summary dict without its counters, histogram, counters) of the partition now."""
    log = kbatch.Log.open(d)
    try:
        s = summarize(log, cache=cache, skip_unreadable=True, **kw)
        h = histogram(log, 60_000, cache=cache, skip_unreadable=True)[0] if not kw else None
        d_ = s.to_dict()
        return {k: v for k, v in d_.items() if k not in COUNTERS}, h, {k: d_[k] for k in COUNTERS}, log.segments
    finally:
        log.close()


def _same_as_full(d, cache, **kw):
    """The cached answers equal a full read's; returns the counters of the cached summary."""
    got, h, counters, _segs = _answers(d, cache, **kw)
    want, wh, full, _ = _answers(d, False, **kw)
    assert full["cached_bytes"] == 0
    assert got == want and h == wh
    return counters


def _sizes(d):
    names = sorted(n for n in os.listdir(d) if n.endswith(".log"))
    return [os.path.getsize(os.path.join(d, n)) for n in names], os.path.join(d, names[-1])


def _split(gen):
    """The generated batches as three segments, the last (the active one) holding half of them
    (its markers among them: they close the transactions)."""
    every = [b for seg in gen.segments(1) for b in seg]
    n = len(every) // 4
    return [every[:n], every[n:2 * n], every[2 * n:]]


@pytest.mark.parametrize("open_txn", [False, True], ids=["closed", "open-txn"])
def test_active_prefix_append_torn_truncate_replace(tmp_path, backend, open_txn, monkeypatch):
    monkeypatch.setattr(S, "_PREFIX_STEP", 0)   # the prefix moves on at every append
    segs = _split(LogGen(11, n_batches=40, open_txn=open_txn))
    active = segs[-1]
    d = tmp_path / "t-0"
    k = len(active) // 3
    write_segments(d, segs[:-1] + [active[:k]])
    kbatch.rebuild_indexes(d)
    cache = SummaryCache(str(tmp_path / "cache"))
    sizes, path = _sizes(d)

    c = _same_as_full(d, cache)
    assert c["cached_bytes"] == 0 and c["scanned_bytes"] == sum(sizes)
    c = _same_as_full(d, cache)   # nothing changed: nothing read
    assert c["cached_bytes"] == sum(sizes) and c["scanned_bytes"] == 0

    # an append (its markers too: the .txnindex is not rebuilt, the headers give them): only the tail is read
    more = b"".join(active[k:-2])
    with open(path, "ab") as f:
        f.write(more)
    c = _same_as_full(d, cache)
    assert c["cached_bytes"] == sum(sizes) and c["scanned_bytes"] == len(more)
    sizes, _ = _sizes(d)

    # a torn tail batch: never part of the prefix; once completed it is read (and only it)
    nxt = active[-2]
    with open(path, "ab") as f:
        f.write(nxt[:len(nxt) // 2])
    c = _same_as_full(d, cache)
    assert c["cached_bytes"] == sum(sizes) and c["scanned_bytes"] == 0
    with open(path, "ab") as f:
        f.write(nxt[len(nxt) // 2:])
    c = _same_as_full(d, cache)
    assert c["cached_bytes"] == sum(sizes) and c["scanned_bytes"] == len(nxt)
    sizes, _ = _sizes(d)

    # truncated (to a batch boundary inside the prefix): the prefix no longer holds, read again
    keep = sizes[-1] - len(nxt) - len(active[-3])
    os.truncate(path, keep)
    c = _same_as_full(d, cache)
    assert c["cached_bytes"] == sum(sizes[:-1]) and c["scanned_bytes"] == keep
    sizes, _ = _sizes(d)
    assert _same_as_full(d, cache)["scanned_bytes"] == 0

    # replaced by a new file with the same bytes (another inode): read again
    with open(path, "rb") as f:
        data = f.read()
    with open(path + ".new", "wb") as f:
        f.write(data)
    os.replace(path + ".new", path)
    c = _same_as_full(d, cache)
    assert c["cached_bytes"] == sum(sizes[:-1]) and c["scanned_bytes"] == sizes[-1]

    # the last batch header of the prefix changed in place (same size, same inode): read again, and
    # the change (under the CRC) is found as a full read finds it
    last_at = sizes[-1] - len(active[-4])   # the file holds active[:-3] now
    with open(path, "r+b") as f:
        f.seek(last_at + 51)   # its producer epoch's low byte
        b = f.read(1)
        f.seek(last_at + 51)
        f.write(bytes([b[0] ^ 1]))
    c = _same_as_full(d, cache)   # (each level reads up to the damage: counted twice)
    assert c["cached_bytes"] == sum(sizes[:-1]) and c["scanned_bytes"] >= last_at
    got = _answers(d, cache)[0]
    assert got["read_uncommitted"]["unreadable"]


def test_prefix_of_a_rolled_segment_and_what_it_misses(tmp_path, backend, monkeypatch):
    """A segment rolled since its prefix was remembered reads only what was appended to it; an
    in-place rewrite of a record in the middle of the prefix (size, inode and the boundary headers
    kept) is not seen through the cache, as documented, and is seen without it."""
    monkeypatch.setattr(S, "_PREFIX_STEP", 0)
    segs = _split(LogGen(12, n_batches=40, open_txn=False))
    d = tmp_path / "t-0"
    k = len(segs[1]) // 2
    write_segments(d, [segs[0], segs[1][:k]])
    kbatch.rebuild_indexes(d)
    cache = SummaryCache(str(tmp_path / "cache"))
    _same_as_full(d, cache)
    sizes, path = _sizes(d)
    rest = b"".join(segs[1][k:])
    with open(path, "ab") as f:
        f.write(rest)
    write_segments(d, [segs[2]])   # a new active segment: the old one is sealed now
    kbatch.rebuild_indexes(d)
    c = _same_as_full(d, cache)
    new_sizes, _ = _sizes(d)
    assert c["cached_bytes"] == sum(sizes) and c["scanned_bytes"] == len(rest) + new_sizes[-1]
    assert _same_as_full(d, cache)["scanned_bytes"] == 0   # now every segment is remembered

    # the documented miss: a byte inside a record of a middle batch of the active segment's prefix
    _sizes_now, active_path = _sizes(d)
    batches = segs[2]
    at = sum(len(b) for b in batches[:len(batches) // 2])
    mid = batches[len(batches) // 2]
    with open(active_path, "r+b") as f:
        f.seek(at + len(mid) - 2)
        b = f.read(1)
        f.seek(at + len(mid) - 2)
        f.write(bytes([b[0] ^ 0x40]))
    log = kbatch.Log.open(d)
    try:
        s = summarize(log, cache=cache)   # trusted: verified once, not re-read
        assert s.scanned_bytes == 0 and not s.unreadable
        with pytest.raises(UnreadableDataError) as ei:
            summarize(log, cache=False)
        assert ei.value.range.position == at
    finally:
        log.close()



def test_small_appends_are_read_again_until_the_step(tmp_path, monkeypatch):
    """The prefix entry is rewritten only once _PREFIX_STEP bytes follow it: smaller appends are
    read and checked again by each summary (cheaper than the rewrite), the answers unchanged."""
    segs = _split(LogGen(13, n_batches=40, open_txn=False))
    active = segs[-1]
    d = tmp_path / "t-0"
    write_segments(d, segs[:-1] + [active[:2]])
    kbatch.rebuild_indexes(d)
    cache = SummaryCache(str(tmp_path / "cache"))
    _same_as_full(d, cache)
    _sizes0, path = _sizes(d)
    a, b = active[2], active[3]
    monkeypatch.setattr(S, "_PREFIX_STEP", len(a) + len(b))
    with open(path, "ab") as f:
        f.write(a)
    assert _same_as_full(d, cache)["scanned_bytes"] == len(a)
    assert _same_as_full(d, cache)["scanned_bytes"] == len(a)   # not remembered yet
    with open(path, "ab") as f:
        f.write(b)
    assert _same_as_full(d, cache)["scanned_bytes"] == len(a) + len(b)   # the step reached: moved on
    assert _same_as_full(d, cache)["scanned_bytes"] == 0


@pytest.fixture(scope="module")
def parts(tmp_path_factory):
    return C.build_all(str(tmp_path_factory.mktemp("prefix-matrix")))


@pytest.mark.parametrize("case", sorted(C.CASES))
def test_matrix_cached_twice_is_the_full_read(parts, tmp_path, case):
    """Every read-path case (damage, transactions, indexes): the summary made with the cache (the
    first time, then from what it remembered) equals the one made without, or raises the same."""
    cache = SummaryCache(str(tmp_path / "c"))
    for skip in (True, False):
        outcomes = []
        for c in (False, cache, cache):
            log = kbatch.Log.open(parts[case])
            try:
                s = summarize(log, cache=c, skip_unreadable=skip).to_dict()
                outcomes.append({k: v for k, v in s.items() if k not in COUNTERS})
            except UnreadableDataError as e:
                outcomes.append(("raised", str(e.range)))
            finally:
                log.close()
        assert outcomes[1] == outcomes[0] and outcomes[2] == outcomes[0], (case, skip)
