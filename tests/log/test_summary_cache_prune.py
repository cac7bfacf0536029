"""The summary cache's budget (kbatch.log.summary_cache, docs/summary.md "The cache"): the
directory is kept within $KBATCH_SUMMARY_CACHE_MAX (1 GiB by default) by removing the entries used
longest ago; removal never changes an answer (a summary then reads the segment again); a bad
budget is a usage error that names what was expected."""
from __future__ import annotations

import os
import time

import pytest

import kbatch
from kbatch.errors import InvalidConfigurationError
from kbatch.log.summary import SummaryCache, summarize
from kbatch.log.summary_cache import DEFAULT_MAX_BYTES, max_cache_bytes

from support import partitions as P


def _dir_bytes(d):
    return sum(os.path.getsize(os.path.join(d, n)) for n in os.listdir(d))


def _summary(part, cache):
    log = kbatch.Log.open(part)
    try:
        return summarize(log, cache=cache)
    finally:
        log.close()


def _partitions(tmp_path, n):
    parts = []
    for i in range(n):
        part = str(tmp_path / f"t-{i}")
        P.plain(part)
        parts.append(part)
    return parts


@pytest.mark.parametrize("text, want", [("4096", 4096), ("512M", 512 << 20), ("512MiB", 512 << 20), ("2g", 2 << 30),
                                        ("1K", 1024), ("7b", 7), ("1T", 1 << 40)])
def test_budget_parses(text, want):
    assert max_cache_bytes(text) == want


@pytest.mark.parametrize("text", ["abc", "-5", "0", "1.5G", "12X", "M", "b"])
def test_bad_budget_is_a_clear_error(text):
    with pytest.raises(InvalidConfigurationError) as ei:
        max_cache_bytes(text)
    assert ei.value.found == repr(text) and "512M" in str(ei.value)


def test_budget_default_and_env(monkeypatch):
    monkeypatch.delenv("KBATCH_SUMMARY_CACHE_MAX", raising=False)
    assert max_cache_bytes() == DEFAULT_MAX_BYTES
    monkeypatch.setenv("KBATCH_SUMMARY_CACHE_MAX", "64K")
    assert SummaryCache("/nonexistent").max_bytes == 64 << 10


def test_cli_bad_budget_exits_2_before_any_work(monkeypatch, tmp_path, capsys):
    from kbatch.cli import main

    part = _partitions(tmp_path, 1)[0]
    monkeypatch.setenv("KBATCH_SUMMARY_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("KBATCH_SUMMARY_CACHE_MAX", "lots")
    assert main(["stats", "--json", part]) == 2
    out, err = capsys.readouterr()
    assert out == "" and "KBATCH_SUMMARY_CACHE_MAX is not a size" in err and "'lots'" in err
    assert not os.path.exists(tmp_path / "cache")


def test_directory_stays_within_budget_and_keeps_the_recently_used(tmp_path):
    parts = _partitions(tmp_path, 6)
    probe = SummaryCache(str(tmp_path / "probe"))
    _summary(parts[0], probe)
    one = _dir_bytes(probe.directory)       # what one partition's entries take
    budget = int(one * 3.5)
    cache = SummaryCache(str(tmp_path / "cache"), max_bytes=budget)
    want = {}
    for part in parts:
        want[part] = _summary(part, False).to_dict()
        _summary(part, cache)
        assert _dir_bytes(cache.directory) <= budget
        time.sleep(0.01)                       # distinct mtimes
    # the newest partitions' entries are the ones kept: their summaries read nothing again
    assert _summary(parts[-1], cache).scanned_segments == 0
    first = _summary(parts[0], cache)
    assert first.scanned_segments > 0          # pruned: read again, never a wrong answer
    counters = ("cached_segments", "scanned_segments", "cached_bytes", "scanned_bytes")
    for part in parts:
        got = _summary(part, cache).to_dict()
        assert {k: v for k, v in got.items() if k not in counters} == \
            {k: v for k, v in want[part].items() if k not in counters}
        assert _dir_bytes(cache.directory) <= budget


def test_a_used_entry_outlives_an_unused_newer_one(tmp_path):
    parts = _partitions(tmp_path, 3)
    probe = SummaryCache(str(tmp_path / "probe"))
    _summary(parts[0], probe)
    one = _dir_bytes(probe.directory)
    cache = SummaryCache(str(tmp_path / "cache"), max_bytes=int(one * 2.5))
    _summary(parts[0], cache)
    time.sleep(0.02)
    _summary(parts[1], cache)
    time.sleep(0.02)
    # parts[0] used again (read from disk by a new process: the in-process copy is dropped here)
    from kbatch.log import summary_cache as SC
    SC._LOADED.entries.clear()
    SC._LOADED.bytes = 0
    assert _summary(parts[0], cache).scanned_segments == 0
    time.sleep(0.02)
    _summary(parts[2], cache)                  # over budget: parts[1]'s entries, used longest ago, go
    SC._LOADED.entries.clear()
    SC._LOADED.bytes = 0
    assert _summary(parts[0], cache).cached_segments > 0
    assert _summary(parts[1], cache).cached_segments == 0


def test_stale_temporary_files_are_removed_fresh_ones_kept(tmp_path):
    cache = SummaryCache(str(tmp_path / "cache"), max_bytes=1 << 30)
    os.makedirs(cache.directory)
    stale, fresh = os.path.join(cache.directory, ".tmp-dead"), os.path.join(cache.directory, ".tmp-live")
    for p in (stale, fresh):
        with open(p, "wb") as f:
            f.write(b"x" * 100)
    old = time.time() - 2 * 3600
    os.utime(stale, (old, old))
    assert cache.prune() == 100
    assert not os.path.exists(stale) and os.path.exists(fresh)


def test_prune_of_a_missing_directory_is_nothing(tmp_path):
    assert SummaryCache(str(tmp_path / "none"), max_bytes=1).prune() == 0
