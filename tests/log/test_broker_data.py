"""Index files as brokers of every era wrote them (tests/support/broker_eras.py) and real broker data
(tests/data/brokers/): verify, verify_indexes, dump and lookups agree with a broker; damage is
still caught; the rebuild claim is exact."""
import io
import random
import struct

import pytest

import kbatch
from kbatch.cli.verify import cmd_verify
from kbatch.cli.dump_log import DumpOptions, dump
from kbatch.log.index_rules import NOTE_INDEX_FIRST_OFFSET, NOTE_TIME_RECORD_OFFSET

from support import storage_oracle as oracle
from support.broker_eras import ERAS, BrokerSegment

CT = kbatch.TimestampType.CREATE_TIME
LAT = kbatch.TimestampType.LOG_APPEND_TIME


def make_batch(base, timestamps, *, lat=None, codec=kbatch.Compression.NONE, value_size=200):
    kw = dict(timestamp_type=LAT, log_append_time=lat) if lat is not None else {}
    b = kbatch.BatchBuilder(base_offset=base, compression=codec, partition_leader_epoch=3, **kw)
    for i, ts in enumerate(timestamps):
        b.append(ts, b"k%d" % i, bytes([65 + i % 26]) * value_size)
    return b.build()


def broker_partition(directory, era, seed, *, follower_chunks=True, restarts=True, clean_shutdown=True,
                     n_appends=120):
    """A one-segment partition written by appends as a broker of `era` makes them: multi-record
    batches whose max timestamp sits mid-batch, LogAppendTime and gzip batches, follower chunks,
    restarts. Returns the BrokerSegment."""
    rng = random.Random(seed)
    seg = BrokerSegment(0, era)
    offset, now = 0, 1_700_000_000_000
    for _ in range(n_appends):
        chunk = []
        for _ in range(rng.randint(2, 4) if follower_chunks and rng.random() < 0.2 else 1):
            n = rng.randint(1, 6)
            now += rng.randint(0, 50)
            ts = [now - rng.randint(0, 400) for _ in range(n)]
            kind = rng.random()
            if kind < 0.1:
                data = make_batch(offset, ts, lat=now)
            elif kind < 0.2:
                data = make_batch(offset, ts, codec=kbatch.Compression.GZIP)
            else:
                data = make_batch(offset, ts, value_size=rng.randint(20, 700))
            chunk.append(data)
            offset += n
        seg.append(chunk, leader=len(chunk) == 1)
        if restarts and rng.random() < 0.05:
            seg.restart()
    if clean_shutdown:
        seg.close()
    seg.write(directory)
    return seg


def run_verify(path):
    out = io.StringIO()
    code = cmd_verify(str(path), quiet=True, as_json=False, out=out, err=io.StringIO())
    return code, out.getvalue()


def dump_problems(paths):
    out, err = io.StringIO(), io.StringIO()
    res = dump([str(p) for p in paths], DumpOptions(verify_index_only=True), out=out, err=err)
    return res.problems, err.getvalue()


@pytest.mark.parametrize("era", list(ERAS))
@pytest.mark.parametrize("seed", [1, 2])
def test_every_era_is_valid_and_serves_lookups(backend, tmp_path, era, seed):
    d = tmp_path / "orders-0"
    d.mkdir()
    broker_partition(d, era, seed, clean_shutdown=seed == 1)
    code, text = run_verify(d)
    assert code == 0, text
    rep = kbatch.verify_indexes(d)
    assert rep.ok, rep.lines()
    notes = [m for _f, m in rep.segments[0].notes]
    # the older forms are named, never counted as problems
    assert any(NOTE_TIME_RECORD_OFFSET in m for m in notes) == ERAS[era]["record_offset"]
    assert any(NOTE_INDEX_FIRST_OFFSET in m for m in notes) == ERAS[era]["index_first_offset"]
    problems, err = dump_problems([d / "00000000000000000000.index", d / "00000000000000000000.timeindex"])
    assert problems == 0, err
    # lookups through the broker's own index files agree with decoding every record
    segments = oracle.log_segments(d)
    stamps = sorted({ts for b in segments[0][2] for _o, ts in b.records})
    targets = [stamps[0] - 1] + stamps[::7] + [t + 1 for t in stamps[::11]] + [stamps[-1], stamps[-1] + 1]
    log = kbatch.Log.open(d)
    try:
        assert log.active_segment.index_problem is None  # the broker's files were used, not rebuilt
        got = [None if h is None else (h.offset, h.timestamp, h.leader_epoch) for h in log.offsets_for_times(targets)]
        top = log.offset_for(kbatch.MAX_TIMESTAMP)
        # every form is valid: no entry is called wrong, nothing is answered from a rebuild (issue 28 item 6)
        assert log.problems == [] and log.active_segment.index_problem is None
    finally:
        log.close()
    assert got == [oracle.brute_offset_for_time(segments, t) for t in targets]
    assert (top.timestamp, top.offset) == oracle.brute_max_timestamp(segments)


def test_a_broker_index_differs_from_a_rebuild_as_information(backend, tmp_path):
    d = tmp_path / "t-0"
    d.mkdir()
    broker_partition(d, "2.0-3.6", 3)
    rep = kbatch.verify_indexes(d)
    assert rep.ok and not rep.matches_rebuild
    assert any("differ from a rebuild (information, not a problem)" in line for line in rep.lines())
    kbatch.rebuild_indexes(d)
    rep = kbatch.verify_indexes(d)
    assert rep.ok and rep.matches_rebuild and not rep.segments[0].notes


def test_rebuild_equals_a_current_broker_that_appended_one_batch_at_a_time(backend, tmp_path):
    """The exact claim: rebuild_indexes writes what a current broker writes for the same .log when
    every append was one batch, the segment was never reopened, and it was closed cleanly (and
    what any broker's recovery writes, always); index.interval.bytes must be the topic's."""
    for interval in (4096, 1000):
        d = tmp_path / f"i{interval}-0"
        d.mkdir()
        seg = BrokerSegment(0, "3.7+", interval)
        rng = random.Random(interval)
        off = 0
        for _ in range(150):
            n = rng.randint(1, 5)
            seg.append([make_batch(off, [1000 + off + rng.randint(-30, 30) for _ in range(n)],
                                   value_size=rng.randint(10, 400))])
            off += n
        seg.close()
        seg.write(d)
        kbatch.rebuild_indexes(d, index_interval_bytes=interval)
        assert (d / "00000000000000000000.index").read_bytes() == seg.index
        assert (d / "00000000000000000000.timeindex").read_bytes() == seg.timeindex
        assert kbatch.verify_indexes(d, index_interval_bytes=interval).matches_rebuild


def _entries(path, fmt):
    raw = path.read_bytes()
    size = struct.calcsize(fmt)
    return raw, [list(struct.unpack_from(fmt, raw, i)) for i in range(0, len(raw), size)]


def _write(path, fmt, entries):
    path.write_bytes(b"".join(struct.pack(fmt, *e) for e in entries))


def test_damage_is_still_caught(backend, tmp_path):
    d = tmp_path / "t-0"
    d.mkdir()
    seg = broker_partition(d, "2.0-3.6", 4, follower_chunks=False, restarts=False)
    tpath, ipath = d / "00000000000000000000.timeindex", d / "00000000000000000000.index"
    batches = oracle.read_segment(d / "00000000000000000000.log")
    traw, tentries = _entries(tpath, ">qi")
    # an in-batch entry: name another record of the same batch, one without the max timestamp
    slot, b = next((i, b) for i, (ts, rel) in enumerate(tentries)
                   for b in batches if b.base_offset <= rel < b.last_offset and len(b.records) > 1)
    other = next(o for o, ts in b.records if ts != tentries[slot][0])
    bad = [list(e) for e in tentries]
    bad[slot][1] = other
    _write(tpath, ">qi", bad)
    code, text = run_verify(d)
    assert code == 1 and "does not hold its max timestamp" in text
    assert not kbatch.verify_indexes(d).ok
    assert dump_problems([tpath])[0] > 0
    # an entry naming a later batch than the one where its timestamp was first reached
    tpath.write_bytes(traw)
    last_batch_after = next(x for x in batches if x.base_offset > tentries[0][1] and x.max_timestamp < tentries[0][0])
    bad = [list(e) for e in tentries]
    bad[0][1] = last_batch_after.last_offset
    if len(bad) > 1 and bad[1][1] < bad[0][1]:
        bad = bad[:1]
    _write(tpath, ">qi", bad)
    code, text = run_verify(d)
    assert code == 1 and "first reached" in text, text
    tpath.write_bytes(traw)
    assert run_verify(d)[0] == 0
    # .index: an offset past the batches the entry covers, and a position inside a batch
    iraw, ientries = _entries(ipath, ">ii")
    bad = [list(e) for e in ientries]
    bad[-1][0] = batches[-1].last_offset + 5
    _write(ipath, ">ii", bad)
    code, text = run_verify(d)
    assert code == 1 and "the batches from that position up to the next entry hold offsets" in text
    assert dump_problems([ipath])[0] > 0
    bad = [list(e) for e in ientries]
    bad[1][1] += 5
    _write(ipath, ">ii", bad)
    code, text = run_verify(d)
    assert code == 1 and "where no batch starts" in text
    ipath.write_bytes(iraw)
    assert run_verify(d)[0] == 0
    del seg


# ------------------------------------------------------------------------------------------ real bytes
from support.paths import BROKER_DATA as DATA  # noqa: E402
BROKER_DIRS = sorted(p.name for p in DATA.iterdir() if p.is_dir())


def broker_copy(name, tmp_path):
    """A copy of tests/data/brokers/<name> with its .xz files decompressed."""
    import lzma
    import shutil

    dst = tmp_path / name
    shutil.copytree(DATA / name, dst)
    for xz in dst.rglob("*.xz"):
        xz.with_suffix("").write_bytes(lzma.decompress(xz.read_bytes()))
        xz.unlink()
    return dst


def partitions(root):
    return sorted(p for p in root.iterdir() if p.is_dir() and any(p.glob("*.log")))


@pytest.mark.parametrize("name", BROKER_DIRS)
def test_real_broker_directories_verify_and_serve_lookups(backend, tmp_path, name):
    root = broker_copy(name, tmp_path)
    code, text = run_verify(root)
    assert code == 0, text
    for d in partitions(root):
        rep = kbatch.verify_indexes(d)
        assert rep.ok, rep.lines()
        files = sorted(p for p in d.iterdir() if p.suffix in (".log", ".index", ".timeindex"))
        problems, err = dump_problems(files)
        assert problems == 0, err
        segments = oracle.log_segments(d)
        stamps = sorted({ts for _b, _p, batches in segments for b in batches for _o, ts in b.records
                         if ts is not None})
        targets = [stamps[0] - 1] + stamps[::max(1, len(stamps) // 40)] + [stamps[-1] + 1]
        log = kbatch.Log.open(d)
        try:
            got = [None if h is None else (h.offset, h.timestamp, h.leader_epoch)
                   for h in log.offsets_for_times(targets)]
        finally:
            log.close()
        assert got == [oracle.brute_offset_for_time(segments, t) for t in targets]


def test_real_spacing_after_restarts_is_information(tmp_path):
    """Kafka 2.1's own __consumer_offsets index: valid, spaced differently from a rebuild."""
    d = broker_copy("kafka-2.1-zk", tmp_path) / "__consumer_offsets-28"
    rep = kbatch.verify_indexes(d)
    assert rep.ok and not rep.matches_rebuild
    assert rep.segments[0].rebuild_difference == ".index entry 4 differs (byte 32)"
    before = (d / "00000000000000000000.index").read_bytes()
    kbatch.rebuild_indexes(d)
    assert (d / "00000000000000000000.index").read_bytes() != before
    assert kbatch.verify_indexes(d).matches_rebuild


def test_real_clean_shutdown_indexes_equal_a_rebuild(tmp_path):
    """Kafka 3.7.0's __consumer_offsets-6: one batch per append, closed cleanly: byte-identical."""
    d = broker_copy("kafka-3.7.0-kraft", tmp_path) / "__consumer_offsets-6"
    idx, tidx = (d / "00000000000000000000.index").read_bytes(), (d / "00000000000000000000.timeindex").read_bytes()
    assert kbatch.verify_indexes(d).matches_rebuild
    kbatch.rebuild_indexes(d)
    assert (d / "00000000000000000000.index").read_bytes() == idx
    assert (d / "00000000000000000000.timeindex").read_bytes() == tidx
