"""kbatch.export_table / `kbatch export --format delta|iceberg` (issue 31): rows read back with the
formats' own readers (deltalake, pyiceberg) equal the read path's records of the same partitions;
reruns append only what is new; a run SIGKILLed at any point and run again leaves every record
exactly once; a second exporter is serialised by the table's commit protocol; retention that
removed offsets the table never held is reported; --compacted is the cleaner's view."""
from __future__ import annotations

import os
import select
import signal
import subprocess
import sys
import time

import pytest

import kbatch
from support import partitions as P

pa = pytest.importorskip("pyarrow")
pytest.importorskip("deltalake")
pytest.importorskip("pyiceberg")

from kbatch.tables import DataLossError  # noqa: E402

FORMATS = ["delta", "iceberg"]


class Table:
    """One table of either format under tmp_path, exported into and read back with its own reader."""

    def __init__(self, fmt: str, tmp_path) -> None:
        self.fmt = fmt
        self.warehouse = str(tmp_path / "warehouse")
        self.name = str(tmp_path / "delta_table") if fmt == "delta" else "kafka.events"

    def kwargs(self) -> dict:
        return {} if self.fmt == "delta" else {"warehouse": self.warehouse}

    def export(self, logs, **kw):
        return kbatch.export_table(logs, self.name, format=self.fmt, **self.kwargs(), **kw)

    def rows(self) -> pa.Table:
        if self.fmt == "delta":
            from deltalake import DeltaTable

            # one thread: to_pyarrow_table()'s threaded scan can abort the process at its exit
            # (deltalake 1.6 with pyarrow 26: 'terminate called without an active exception')
            t = DeltaTable(self.name).to_pyarrow_dataset().to_table(use_threads=False)
        else:
            t = self.iceberg().scan().to_arrow()
        return t.sort_by([("topic", "ascending"), ("partition", "ascending"), ("offset", "ascending")])

    def iceberg(self):
        from kbatch.tables._iceberg import open_catalog

        return open_catalog(None, self.warehouse).load_table(self.name)

    def offsets(self) -> dict[tuple[str, int], list[int]]:
        t = self.rows()
        out: dict[tuple[str, int], list[int]] = {}
        for topic, part, off in zip(t["topic"].to_pylist(), t["partition"].to_pylist(), t["offset"].to_pylist()):
            out.setdefault((topic, part), []).append(off)
        return out

    def commits(self) -> list[dict]:
        """kbatch's recorded offsets per commit, newest first."""
        if self.fmt == "delta":
            from kbatch.tables._delta import history_offsets

            return history_offsets(self.name)
        from kbatch.tables._iceberg import open_catalog, snapshot_offsets

        return snapshot_offsets(open_catalog(None, self.warehouse).load_table(self.name))


@pytest.fixture(params=FORMATS)
def table(request, tmp_path):
    return Table(request.param, tmp_path)


def read_path_rows(path: str, isolation: int = 1, start: int | None = None, end: int | None = None) -> list[tuple]:
    """(offset, key, value, timestamp ms) of what a consumer gets: the read path, record by record."""
    log = kbatch.Log.open(path)
    return [(r.offset, None if r.key is None else bytes(r.key), None if r.value is None else bytes(r.value),
             r.timestamp) for _b, r in log.read(start, end, isolation=isolation).records()]


def table_rows(t: pa.Table, topic: str, partition: int) -> list[tuple]:
    import pyarrow.compute as pc

    part = t.filter(pc.and_(pc.equal(t["topic"], topic), pc.equal(t["partition"], partition)))
    ts = part["timestamp"].cast(pa.int64()).to_pylist()
    return [(o, k, v, None if s is None else s // 1000) for o, k, v, s in
            zip(part["offset"].to_pylist(), part["key"].to_pylist(), part["value"].to_pylist(), ts)]


def grow(path: str, n_batches: int, per_batch: int = 5, tag: str = "g") -> None:
    log = kbatch.Log.open(path, kbatch.LogConfig(segment_bytes=1200), writable=True)
    try:
        for _ in range(n_batches):
            b = kbatch.BatchBuilder()
            for i in range(per_batch):
                b.append(P.NOW + 1000 + i, f"{tag}-k{i}".encode(), f"{tag}-v{log.end_offset() + i}".encode())
            log.append(b.build(), now_ms=P.NOW, from_client=False)
    finally:
        log.close()


# ------------------------------------------------------------------------------------ rows
@pytest.mark.parametrize("txn_index", [True, False])
def test_read_committed_rows_equal_the_read_path_and_never_hold_aborted_or_control_records(table, tmp_path, txn_index):
    logs = tmp_path / "logs"
    built = P.transactional(str(logs / "orders-0"), txn_index=txn_index)
    P.plain(str(logs / "orders-1"))
    result = table.export(str(logs))
    assert result.commits == 1
    t = table.rows()
    assert t.schema.names[:7] == ["key", "value", "topic", "partition", "offset", "timestamp", "timestampType"]
    assert table_rows(t, "orders", 0) == read_path_rows(built.path)
    assert [r[0] for r in table_rows(t, "orders", 0)] == built.committed
    assert table_rows(t, "orders", 1) == read_path_rows(str(logs / "orders-1"))
    # the open transaction: read_committed stopped at the last stable offset, recorded as the end
    ends = table.commits()[0]["ends"]
    assert ends["orders-0"] == kbatch.Log.open(built.path).read(0, isolation=1).last_stable_offset


def test_rows_equal_decode_columns_of_the_same_partition(table, tmp_path):
    """A partition without transactions: every column equals decode_columns of its segments."""
    logs = tmp_path / "logs"
    P.plain(str(logs / "plain-0"), batches=30)
    table.export(str(logs))
    got = table.rows()
    parts = []
    for name in sorted(os.listdir(logs / "plain-0")):
        if name.endswith(".log"):
            with open(logs / "plain-0" / name, "rb") as f:
                parts.append(kbatch.decode_columns(f.read(), "plain", 0))
    want = pa.concat_tables(parts)
    for col in ("key", "value", "topic", "partition", "offset", "timestamp", "timestampType", "headers"):
        have = got[col].to_pylist()
        if col == "headers" and table.fmt == "iceberg":
            # pyiceberg's reader gives [] for a null list; the files hold the nulls (pyarrow reads them)
            have = [None if h == [] else h for h in have]
            files = [f.file.file_path for f in table.iceberg().scan().plan_files()]
            import pyarrow.parquet as pq

            assert sum(pq.read_table(f.removeprefix("file://"), columns=["headers"])["headers"].null_count
                       for f in files) == want[col].null_count
        assert have == want[col].to_pylist(), col


def test_read_uncommitted_takes_every_data_record_and_the_table_keeps_its_level(table, tmp_path):
    logs = tmp_path / "logs"
    built = P.transactional(str(logs / "t-0"))
    table.export(str(logs), isolation="read_uncommitted")
    assert table.offsets()[("t", 0)] == built.uncommitted
    with pytest.raises(kbatch.KBatchError, match="isolation level"):
        table.export(str(logs))  # read_committed into a read_uncommitted table: refused


# ------------------------------------------------------------------------------------ resume
def test_a_rerun_appends_only_what_is_new(table, tmp_path):
    logs = tmp_path / "logs"
    P.plain(str(logs / "a-0"), batches=10)
    P.plain(str(logs / "a-1"), batches=4)
    first = table.export(str(logs))
    assert first.rows == 70 and first.commits == 1
    again = table.export(str(logs))
    assert again.rows == 0 and again.commits == 0
    grow(str(logs / "a-0"), 3)
    third = table.export(str(logs))
    assert third.rows == 15 and third.commits == 1
    assert [(p.topic, p.partition, p.start, p.end) for p in third.partitions] == [("a", 0, 50, 65), ("a", 1, 20, 20)]
    offsets = table.offsets()
    assert offsets[("a", 0)] == list(range(65)) and offsets[("a", 1)] == list(range(20))
    commits = table.commits()
    assert commits[0]["offsets"] == {"a-0": [50, 65]}
    assert commits[0]["ends"] == {"a-0": 65, "a-1": 20}
    assert table_rows(table.rows(), "a", 0) == read_path_rows(str(logs / "a-0"))


def test_offset_and_time_bounds_and_a_resume_past_them(table, tmp_path):
    logs = tmp_path / "logs"
    path = str(logs / "b-0")
    P.plain(path, batches=10)   # timestamps NOW + offset
    r = table.export(str(logs), from_offset=7, until_offset=20)
    assert table.offsets()[("b", 0)] == list(range(7, 20))
    assert (r.partitions[0].start, r.partitions[0].end) == (7, 20)
    # from-time below what the table holds: the table's end wins (no offset twice)
    r = table.export(str(logs), from_time=P.NOW, until_time=P.NOW + 30)
    assert table.offsets()[("b", 0)] == list(range(7, 30))
    # KIP-79: until-time T stops before the first offset whose timestamp >= T
    log = kbatch.Log.open(path)
    assert log.offsets_for_times(P.NOW + 30).offset == 30
    r = table.export(str(logs))
    assert table.offsets()[("b", 0)] == list(range(7, 50))


def test_the_version_holding_exactly_the_records_before_a_time(table, tmp_path):
    """--until-time T, then a plain rerun: the first commit's ends are offsets_for_times(T)."""
    logs = tmp_path / "logs"
    P.plain(str(logs / "c-0"), batches=10)
    P.plain(str(logs / "c-1"), batches=6)
    T = P.NOW + 12
    table.export(str(logs), until_time=T)
    table.export(str(logs))
    commits = table.commits()
    assert len(commits) == 2
    oldest = commits[-1]
    for part in ("c-0", "c-1"):
        assert oldest["ends"][part] == kbatch.Log.open(str(logs / part)).offsets_for_times(T).offset


# ------------------------------------------------------------------------------------ data loss
def test_retention_past_the_tables_end_is_reported_and_fail_on_data_loss_fails(table, tmp_path):
    logs = tmp_path / "logs"
    path = str(logs / "d-0")
    P.plain(path, batches=40)
    table.export(str(logs), until_offset=10)
    log = kbatch.Log.open(path, kbatch.LogConfig(segment_bytes=1200, retention_ms=1), writable=True)
    try:
        deleted = log.delete_old_segments(now_ms=P.NOW + 10**9)
        start = log.log_start_offset
    finally:
        log.close()
    assert deleted and start > 10
    with pytest.raises(DataLossError, match=f"offsets 10..{start - 1}"):
        table.export(str(logs), fail_on_data_loss=True)
    assert table.offsets()[("d", 0)] == list(range(10))  # nothing written
    r = table.export(str(logs))
    assert r.lost[0].lost == (10, start)
    assert table.offsets()[("d", 0)] == list(range(10)) + list(range(start, 200))


# ------------------------------------------------------------------------------------ kill and rerun
CHILD = """
import sys, kbatch
kbatch.export_table(sys.argv[1], sys.argv[2], format=sys.argv[3], warehouse=sys.argv[4] or None,
                    commit_bytes=1, target_file_size=4096)
"""


def _child(table: Table, logs: str, pause: str | None) -> subprocess.Popen:
    env = dict(os.environ)
    env.pop("KBATCH_TABLES_TEST_PAUSE", None)
    if pause:
        env["KBATCH_TABLES_TEST_PAUSE"] = pause
    return subprocess.Popen([sys.executable, "-c", CHILD, logs, table.name, table.fmt,
                             table.warehouse if table.fmt == "iceberg" else ""],
                            env=env, stderr=subprocess.PIPE, text=True)


def _wait_for_pause(proc: subprocess.Popen, timeout: float = 120) -> str:
    """Read the child's stderr until it says it paused (bounded)."""
    deadline = time.monotonic() + timeout
    seen = ""
    while time.monotonic() < deadline:
        ready, _, _ = select.select([proc.stderr], [], [], 0.5)
        if ready:
            line = proc.stderr.readline()
            if not line and proc.poll() is not None:
                break
            seen += line
            if "test pause at" in line:
                return line
    proc.kill()
    proc.wait(10)
    raise AssertionError(f"the child never paused: {seen!r}")


def _kill(proc: subprocess.Popen) -> None:
    proc.send_signal(signal.SIGKILL)
    proc.wait(30)


def _logs(tmp_path) -> str:
    logs = tmp_path / "logs"
    for p in range(3):
        P.plain(str(logs / f"k-{p}"), batches=20 + 5 * p)
    P.transactional(str(logs / "k-3"))
    return str(logs)


def _assert_exactly_once(table: Table, logs: str) -> None:
    t = table.rows()
    for name in sorted(os.listdir(logs)):
        topic, _, part = name.rpartition("-")
        assert table_rows(t, topic, int(part)) == read_path_rows(os.path.join(logs, name)), name


@pytest.mark.parametrize("point", ["files", "commit1", "commit2", "commit4"])
def test_sigkill_at_a_pause_point_then_rerun_leaves_every_record_exactly_once(table, tmp_path, point):
    logs = _logs(tmp_path)
    never = str(tmp_path / "never")
    proc = _child(table, logs, f"{point}:@{never}")
    _wait_for_pause(proc)
    _kill(proc)
    table.export(logs)
    _assert_exactly_once(table, logs)
    grow(os.path.join(logs, "k-0"), 2)
    table.export(logs)
    _assert_exactly_once(table, logs)


@pytest.mark.parametrize("delay", [0.3, 0.8, 1.5])
def test_sigkill_at_any_moment_then_rerun_leaves_every_record_exactly_once(table, tmp_path, delay):
    logs = _logs(tmp_path)
    proc = _child(table, logs, None)
    time.sleep(delay)  # where the child is by then does not matter: every moment must be safe
    _kill(proc)
    table.export(logs)
    _assert_exactly_once(table, logs)


def test_a_second_exporter_is_serialised_by_the_commit_protocol(table, tmp_path):
    logs = _logs(tmp_path)
    table.export(logs, until_offset=3)   # the table exists; both exporters start from the same state
    go = str(tmp_path / "go")
    proc = _child(table, logs, f"commit1:@{go}")
    _wait_for_pause(proc)                # the child wrote its first commit's files and waits
    table.export(logs)                   # the other exporter commits everything first
    open(go, "w").close()
    _out, err = proc.communicate(timeout=300)
    assert proc.returncode == 0, err
    _assert_exactly_once(table, logs)


# ------------------------------------------------------------------------------------ compacted
def test_compacted_is_the_latest_record_per_key_without_tombstones_as_one_version(table, tmp_path):
    logs = tmp_path / "logs"
    path = str(logs / "cmp-0")
    log = kbatch.Log.create(path, kbatch.LogConfig(), now_ms=P.NOW)
    b = kbatch.BatchBuilder()
    for i in range(30):
        b.append(P.NOW + i, f"k{i % 5}".encode(), f"v{i}".encode())
    b.append(P.NOW + 30, b"k1", None)                       # a tombstone
    b.append(P.NOW + 31, b"k2", b"gone", tombstone=True)    # KIP-87: a tombstone with a value
    log.append(b.build(), now_ms=P.NOW, from_client=False)
    log.close()
    P.transactional(str(logs / "cmp-1"))
    r = table.export(str(logs), compacted=True)
    assert r.commits == 1
    t = table.rows()
    def kv(part: int) -> set:
        return {(k, v) for k, v, tp in zip(t["key"].to_pylist(), t["value"].to_pylist(), t["partition"].to_pylist())
                if tp == part}

    assert kv(0) == {(b"k0", b"v25"), (b"k3", b"v28"), (b"k4", b"v29")}
    # partition 1: committed records only (aborted ones never count), the latest per key
    latest = {k: v for _off, k, v, _ts in read_path_rows(str(logs / "cmp-1"))}
    assert kv(1) == set(latest.items())
    # a rerun replaces the version: still one row per key
    r = table.export(str(logs), compacted=True)
    assert table.rows().num_rows == t.num_rows
    with pytest.raises(kbatch.KBatchError, match="compacted"):
        table.export(str(logs))


# ------------------------------------------------------------------------------------ CLI
def test_cli_export_delta_and_iceberg(tmp_path):
    pytest.importorskip("typer")
    from kbatch.cli import main  # noqa: F401

    logs = tmp_path / "logs"
    P.transactional(str(logs / "t-0"))
    kb = [sys.executable, "-m", "kbatch"]
    out = subprocess.run(kb + ["export", str(logs), "--format", "delta", "--to", str(tmp_path / "d")],
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    assert "t-0: offsets 0..13: 9 rows" in out.stdout
    out = subprocess.run(kb + ["export", str(logs), "--format", "iceberg", "--to", "ns.t", "--warehouse",
                               str(tmp_path / "wh"), "--json"], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    assert '"rows": 9' in out.stdout
    out = subprocess.run(kb + ["export", str(logs), "--to", str(tmp_path / "p"), "--from-offset", "3"],
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 2 and "--format delta|iceberg" in out.stderr


def test_unreadable_bytes_stop_that_partition_only_and_are_named(table, tmp_path):
    logs = tmp_path / "logs"
    bad = str(logs / "e-0")
    P.plain(bad, batches=40)
    P.plain(str(logs / "e-1"), batches=5)
    seg, first_lost, _nxt = P.tear_middle_segment(bad)
    r = table.export(str(logs))
    assert len(r.problems) == 1 and "e-0" in r.problems[0] and os.path.basename(seg) in r.problems[0]
    offsets = table.offsets()
    assert ("e", 0) not in offsets and offsets[("e", 1)] == list(range(25))
    assert {(p.topic, p.partition): p.end for p in r.partitions}[("e", 0)] == 0  # not advanced


def test_runs_over_some_topics_keep_the_others_ends(table, tmp_path):
    logs = tmp_path / "logs"
    P.plain(str(logs / "x-0"), batches=4)
    P.plain(str(logs / "y-0"), batches=6)
    table.export(str(logs), topics=["x"])
    table.export(str(logs), topics=["y"])
    assert table.commits()[0]["ends"] == {"x-0": 20, "y-0": 30}
    grow(str(logs / "x-0"), 1)
    r = table.export(str(logs))
    assert r.rows == 5
    assert table.offsets() == {("x", 0): list(range(25)), ("y", 0): list(range(30))}


def test_cli_catalog_uri_time_options_and_data_loss_exit_code(tmp_path):
    pytest.importorskip("typer")
    logs = tmp_path / "logs"
    path = str(logs / "z-0")
    P.plain(path, batches=40)
    kb = [sys.executable, "-m", "kbatch", "export", str(logs)]
    db = tmp_path / "cat.db"
    ice = ["--format", "iceberg", "--to", "ns.z", "--catalog", f"sqlite:///{db}", "--warehouse", str(tmp_path / "wh")]
    # KIP-79 bounds given as ISO 8601: P.NOW + offset is each record's timestamp
    import datetime as dt

    iso = dt.datetime.fromtimestamp((P.NOW + 10) / 1000, dt.timezone.utc).isoformat()
    out = subprocess.run(kb + ice + ["--until-time", iso], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    assert "z-0: offsets 0..9: 10 rows" in out.stdout and db.exists()
    log = kbatch.Log.open(path, kbatch.LogConfig(segment_bytes=1200, retention_ms=1), writable=True)
    try:
        log.delete_old_segments(now_ms=P.NOW + 10**9)
        start = log.log_start_offset
    finally:
        log.close()
    out = subprocess.run(kb + ice + ["--fail-on-data-loss"], capture_output=True, text=True, timeout=300)
    assert out.returncode == 1 and f"offsets 10..{start - 1}" in out.stderr and "nothing written" in out.stderr
    out = subprocess.run(kb + ice, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0 and f"offsets 10..{start - 1} were deleted" in out.stderr
    out = subprocess.run(kb + ice + ["--isolation-level", "read_uncommitted"], capture_output=True, text=True,
                         timeout=300)
    assert out.returncode == 1 and "isolation level" in out.stderr


def test_a_run_that_would_change_the_tables_columns_is_refused(table, tmp_path):
    logs = tmp_path / "logs"
    P.plain(str(logs / "h-0"), batches=4)
    table.export(str(logs), until_offset=10)
    with pytest.raises(kbatch.KBatchError, match="columns"):
        table.export(str(logs), include_headers=False)
    table.export(str(logs))
    assert table.offsets()[("h", 0)] == list(range(20))


def test_two_exporters_creating_the_table_at_once_leave_every_record_once(table, tmp_path, monkeypatch):
    """The other writer creates the table (and fills it) between this one's look and its creation."""
    logs = str(tmp_path / "logs")
    P.plain(os.path.join(logs, "r-0"), batches=6)
    P.transactional(os.path.join(logs, "r-1"))
    if table.fmt == "delta":
        from kbatch.tables._delta import DeltaTarget as cls
        name = "commit"
    else:
        from kbatch.tables._iceberg import IcebergTarget as cls
        name = "_create"
    original = getattr(cls, name)
    calls = []

    def racing(self, *a, **k):
        if not calls:
            calls.append(1)
            monkeypatch.setattr(cls, name, original)
            table.export(logs)               # the other exporter, start to end
        return original(self, *a, **k)

    monkeypatch.setattr(cls, name, racing)
    r = table.export(logs)
    assert calls and r.rows == 0
    _assert_exactly_once(table, logs)


def test_iceberg_resumes_after_its_snapshots_were_expired(tmp_path):
    """Another engine's snapshot on top, kbatch's snapshots expired: the rerun still appends only
    what is new (the ends are also a table property, set in each kbatch commit)."""
    table = Table("iceberg", tmp_path)
    logs = str(tmp_path / "logs")
    P.plain(os.path.join(logs, "s-0"), batches=6)
    table.export(logs)
    ice = table.iceberg()
    ice.append(ice.scan(limit=0).to_arrow())            # an empty append by someone else
    ice = table.iceberg()
    current = ice.current_snapshot().snapshot_id
    old = [s.snapshot_id for s in ice.metadata.snapshots if s.snapshot_id != current]
    ice.maintenance.expire_snapshots().by_ids(old).commit()
    assert [s.snapshot_id for s in table.iceberg().metadata.snapshots] == [current]
    grow(os.path.join(logs, "s-0"), 1)
    r = table.export(logs)
    assert r.rows == 5
    assert table.offsets()[("s", 0)] == list(range(35))


@pytest.mark.parametrize("module, package", [("kbatch.tables._delta", "deltalake"),
                                             ("kbatch.tables._iceberg", "pyiceberg")])
def test_without_the_tables_extra_the_error_names_it(monkeypatch, module, package):
    import importlib

    for name in [m for m in sys.modules if m == package or m.startswith(package + ".")] + [package]:
        monkeypatch.setitem(sys.modules, name, None)   # as if not installed, its submodules too
    monkeypatch.delitem(sys.modules, module, raising=False)
    with pytest.raises(kbatch.MissingDependencyError, match=f"{package}.*'tables' extra"):
        importlib.import_module(module)
