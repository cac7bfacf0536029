"""cat, reindex and verify over transactions and damage (issue 28 items 1, 3, 4), through the read
path (kbatch.log.fetch) and the .txnindex Log.append, recovery and reindex write."""
from __future__ import annotations

import io
import os

import pytest

from kbatch.cli.cat import cmd_cat
from support import partitions as P

typer_testing = pytest.importorskip("typer.testing")
from kbatch import cli  # noqa: E402


def cat(path, **kw):
    out, err = io.BytesIO(), io.StringIO()
    code = cmd_cat(path, out=out, err=err, quiet=kw.pop("quiet", True), **kw)
    return code, out.getvalue(), err.getvalue()


def run(*args):
    return typer_testing.CliRunner().invoke(cli.make_app(), [str(a) for a in args])


@pytest.fixture(scope="module")
def demo(tmp_path_factory):
    from kbatch.demo import generate

    root = str(tmp_path_factory.mktemp("demo") / "sample-data")
    generate(root, records=600)
    return root


def test_cat_on_the_demo_payments_read_uncommitted_90_read_committed_60(demo, tmp_path):
    part = os.path.join(demo, "payments-0")  # 3 transactions of 30; the second (31-60, marker 61) aborted
    code, out, _ = cat(part, isolation_level="read_uncommitted")
    assert code == 0 and len(out.splitlines()) == 90          # Kafka's console consumer: read_uncommitted
    code, out, _ = cat(part)                                   # kcat's default: read_committed
    assert code == 0 and len(out.splitlines()) == 60
    assert b"pay-2-" not in out
    # without .txnindex the ABORT marker itself says so
    import shutil

    copy = str(tmp_path / "payments-0")
    shutil.copytree(part, copy)
    for n in os.listdir(copy):
        if n.endswith(".txnindex"):
            os.unlink(os.path.join(copy, n))
    code, out, _ = cat(copy, isolation_level="read_committed")
    assert code == 0 and len(out.splitlines()) == 60
    r = run("cat", copy, "--isolation-level", "read_committed", "-q")
    assert r.exit_code == 0 and len(r.stdout.splitlines()) == 60


def test_cat_read_committed_stops_at_the_last_stable_offset(tmp_path):
    built = P.transactional(str(tmp_path / "t-0"), txn_index=False)
    code, out, _ = cat(built.path, fmt="%o ", isolation_level="read_committed")
    assert code == 0 and out.split() == [str(o).encode() for o in built.committed]
    code, out, _ = cat(built.path, fmt="%o ", isolation_level="read_uncommitted")
    assert code == 0 and out.split() == [str(o).encode() for o in built.uncommitted]


def test_cat_names_a_torn_middle_segment_and_exits_1(tmp_path):
    built = P.plain(str(tmp_path / "t-0"))
    target, lost, nxt = P.tear_middle_segment(built.path)
    code, out, err = cat(built.path, fmt="%o\\n", offsets=[str(lost + 1)], count=3)
    assert code == 1
    assert out == b""  # not the first offsets after the hole
    assert target in err and f"..{nxt - 1}" in err, err
    code, out, err = cat(built.path, fmt="%o\\n")  # from the start: what is before the hole, then the error
    assert code == 1 and out.split() == [str(o).encode() for o in range(lost)] and target in err


def test_cat_ignores_a_partial_batch_at_the_end_of_the_active_segment(tmp_path):
    built = P.plain(str(tmp_path / "t-0"))
    last = P.segment_logs(built.path)[-1]
    rows = P.batch_positions(last)
    with open(last, "r+b") as f:
        f.truncate(rows[-1][0] + 30)
    code, out, err = cat(built.path, fmt="%o\\n")
    assert code == 0, err
    assert out.split() == [str(o).encode() for o in range(rows[-1][1])]


def test_reindex_refuses_a_segment_it_cannot_read_in_full_and_changes_nothing(tmp_path):
    built = P.plain(str(tmp_path / "t-0"))
    rows = P.batch_positions(P.segment_logs(built.path)[0])
    target, pos, _base = P.bad_length_field(built.path)
    after = rows[len(rows) // 2 + 3][1]  # an intact batch after the damaged one, an .index entry before it
    before = P.snapshot(built.path)
    r = run("reindex", built.path)
    assert r.exit_code == 1, r.output
    assert target in r.output and "no index file of this partition was changed" in r.output
    assert P.snapshot(built.path) == before
    # the .index still reaches the intact batches after the damage
    code, out, err = cat(built.path, fmt="%o\\n", offsets=[str(after)], count=2)
    assert (code, out.split()) == (0, [str(after).encode(), str(after + 1).encode()]), err


def test_verify_reports_a_missing_or_wrong_txnindex_and_reindex_writes_it(tmp_path):
    built = P.transactional(str(tmp_path / "t-0"), txn_index=False)
    r = run("verify", built.path)
    assert r.exit_code == 1 and "txnindex" in r.stdout and "file is missing" in r.stdout, r.stdout
    r = run("reindex", built.path)
    assert r.exit_code == 0, r.output
    have = {int(n[:20]): open(os.path.join(built.path, n), "rb").read()
            for n in os.listdir(built.path) if n.endswith(".txnindex")}
    assert have == built.txnindex
    assert run("verify", built.path).exit_code == 0
    base = min(built.txnindex)
    with open(os.path.join(built.path, f"{base:020d}.txnindex"), "r+b") as f:
        f.seek(33)
        f.write(b"\x00")  # the first entry's last stable offset: 12 -> 0
    r = run("verify", built.path)
    assert r.exit_code == 1 and "entry 0 is (producer 1001" in r.stdout, r.stdout


def test_verify_accepts_the_txnindex_compaction_leaves_and_readers_still_leave_aborts_out(tmp_path):
    """Compaction removes an aborted transaction's first batches (the entry keeps its original
    first offset) and markers whose transaction is gone: not a .txnindex problem."""
    import kbatch

    built = P.transactional(str(tmp_path / "t-0"), open_txn=False)
    kbatch.compact(built.path, now_ms=P.NOW + 10 ** 10, delete_retention_ms=0)
    r = run("verify", built.path)
    assert r.exit_code == 0, r.stdout
    code, out, _ = cat(built.path, fmt="%o ", isolation_level="read_committed")
    code_u, out_u, _ = cat(built.path, fmt="%o ")
    assert code == code_u == 0
    aborted = {5, 6, 9, 14, 15}  # (what compaction left of them is still left out)
    assert [int(o) for o in out.split()] == [int(o) for o in out_u.split() if int(o) not in aborted]


# ------------------------------------------------------------------------------------ counting (issue 28)
def test_stats_verify_and_validate_count_records_the_same_way(tmp_path):
    """A consumer's records: control records (the transaction markers) and batches whose CRC fails
    are not records in any of the three; verify still checks them."""
    import json

    from kbatch.cli.stats import cmd_stats
    from kbatch.cli.validate import cmd_validate
    from kbatch.cli.verify import cmd_verify

    built = P.transactional(str(tmp_path / "t-0"), open_txn=False)
    counts = {}
    for name, cmd in (("stats", cmd_stats), ("verify", cmd_verify), ("validate", cmd_validate)):
        out = io.StringIO()
        code = cmd(built.path, as_json=True, quiet=True, out=out, err=io.StringIO())
        assert code == 0, name
        lines = [json.loads(line) for line in out.getvalue().splitlines()]
        counts[name] = [x for x in lines if x.get("type", "summary") == "summary"][-1]["records"]
    assert counts == {"stats": len(built.uncommitted), "verify": len(built.uncommitted),
                      "validate": len(built.uncommitted)}, counts


# ------------------------------------------------------------------------------------ progress (issue 28)
@pytest.mark.parametrize("command", ["cat", "offsets"])
def test_cat_and_offsets_draw_a_progress_bar_on_a_terminal_only(tmp_path, monkeypatch, command):
    """A partition over the progress threshold: on a terminal (stderr a tty, the one-second wait set
    to 0) the bar is drawn with the command's name; on a pipe (a real process, stderr piped) stderr
    holds nothing of it."""
    import subprocess
    import sys

    import rich.console

    from kbatch.cli import _common
    from kbatch.cli.offsets import cmd_offsets

    import kbatch

    path = str(tmp_path / "t-0")
    log = kbatch.Log.create(path, kbatch.LogConfig(), now_ms=P.NOW)
    try:
        for k in range(50):  # 50 batches of 100 KiB: over the progress threshold
            b = kbatch.BatchBuilder()
            b.append(P.NOW + k, b"k%d" % k, bytes([65 + k % 26]) * (100 * 1024))
            log.append(b.build(), now_ms=P.NOW, from_client=False)
    finally:
        log.close()
    built = P.Built(path, [], [], {})
    assert sum(os.path.getsize(p) for p in P.segment_logs(built.path)) > _common.PROGRESS_MIN_BYTES

    def run_it():
        if command == "cat":
            return cat(built.path, fmt="%o\\n", quiet=False)[0]
        return cmd_offsets(built.path, latest=True, out=io.StringIO(), err=io.StringIO())

    buf = io.StringIO()
    real = rich.console.Console
    monkeypatch.setattr(rich.console, "Console", lambda **kw: real(file=buf, force_terminal=True, width=80))
    monkeypatch.setattr(_common, "stderr_is_terminal", lambda: True)
    monkeypatch.setattr(_common, "PROGRESS_AFTER_S", 0.0)
    assert run_it() == 0
    assert command in buf.getvalue()
    monkeypatch.undo()

    src = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))), "src")
    args = ["cat", built.path] if command == "cat" else ["offsets", built.path, "--latest"]
    p = subprocess.run([sys.executable, "-m", "kbatch.cli", *args], capture_output=True, timeout=300,
                       env=dict(os.environ, PYTHONPATH=src))
    assert p.returncode == 0, p.stderr[-2000:]
    # (cat's one line is kcat's end-of-partition message, not a bar)
    assert [line for line in p.stderr.decode().splitlines() if not line.startswith("% Reached end")] == []


# ------------------------------------------------------------------------------------ messages (issue 28)
def test_a_bad_length_field_is_not_called_a_partial_batch_by_any_command(tmp_path):
    """A length field in the middle of a segment that runs past its end, with intact batches
    behind it: every command says what was found (the length, the byte, the valid batch behind
    it), none calls it a truncated or partial batch; a torn middle segment is called a partial batch."""
    bad = P.plain(str(tmp_path / "bad" / "t-0"))
    target, pos, _base = P.bad_length_field(bad.path, 0)
    size = os.path.getsize(target)
    torn = P.plain(str(tmp_path / "torn" / "t-0"))
    torn_target, _lost, _nxt = P.tear_middle_segment(torn.path, 1)
    for command in (["cat", "-q"], ["stats"], ["verify"], ["validate"], ["reindex"], ["export", "--to",
                                                                                         str(tmp_path / "x")]):
        r = run(command[0], bad.path, *command[1:])
        text = r.output
        assert r.exit_code == 1, (command, text)
        assert (f"at byte {pos} of the segment runs past its end ({size} bytes), but a valid batch starts at byte"
                in text), (command, text)
        assert "a bad length field, not a partial batch" in text, (command, text)
        assert "partial batch at the end" not in text and "Truncated batch" not in text, (command, text)
        r = run(command[0], torn.path, *command[1:])
        assert r.exit_code == 1, (command, r.output)
        assert "a partial batch at the end of the segment: batch length" in r.output, (command, r.output)
