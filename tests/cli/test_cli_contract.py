"""The command line's contract, one table over every command (docs/cli.md, "Exit codes"):

- a usage error or a bad value exits 2 with a message on stderr and never a traceback: a path that
  is not there, a number out of range or not a number, a file of the wrong format, an unknown
  topic config name (refused with the closest valid name, as kafka-configs refuses it);
- every command takes --json and -h;
- a partition directory the command cannot use is named in the message.

Each row runs `kbatch.cli.main` in this process, so an exception escaping it fails the test with
its traceback, which is what the contract forbids.
"""
from __future__ import annotations

import json

import pytest

pytest.importorskip("typer")

import kbatch  # noqa: E402
from kbatch.cli import COMMANDS, main  # noqa: E402

NOW = 1_700_000_100_000
COMMAND_NAMES = [c.rstrip("_") for c in COMMANDS]


@pytest.fixture(scope="module")
def tree(tmp_path_factory):
    """A partition t-0 of 200 records, a Parquet export of it, a CSV file and an empty file."""
    root = tmp_path_factory.mktemp("contract")
    log = kbatch.Log.create(root / "t-0", kbatch.LogConfig(segment_bytes=4096))
    for i in range(20):
        b = kbatch.BatchBuilder(base_offset=0)
        for j in range(10):
            b.append(1_700_000_000_000 + i * 10 + j, b"k%d" % j, b"v" * 30)
        log.append(b.build(), now_ms=NOW)
    log.close()
    assert main(["export", str(root / "t-0"), "--to", str(root / "rows.parquet"), "-q"]) == 0
    (root / "a.csv").write_text("x,y\n1,2\n")
    (root / "empty.jsonl").write_text("")
    return root


def run(argv, capsys):
    code = main([str(a) for a in argv])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


# (command line with {root} for the tree, the text stderr must hold)
USAGE_ERRORS = [
    # paths that are not there
    *[([name, "{root}/nowhere"], "nowhere") for name in ("dump", "verify", "reindex", "validate", "compact",
                                                         "stats", "cat")],
    (["offsets", "{root}/nowhere", "--earliest"], "nowhere"),
    (["export", "{root}/nowhere", "--to", "{root}/x.parquet"], "nowhere"),
    (["import", "{root}/nowhere.parquet", "--to", "{root}/out"], "nowhere.parquet"),
    # numbers out of range, too large for 64 bits, not numbers
    (["compact", "{root}/t-0", "--delete-retention-ms", "-1"], "--delete-retention-ms"),
    (["compact", "{root}/t-0", "--dedupe-buffer-size", "0"], "--dedupe-buffer-size"),
    (["dump", "{root}/t-0/00000000000000000000.log", "--max-bytes", "-5"], "--max-bytes"),
    (["dump", "{root}/t-0/00000000000000000000.log", "--max-message-size", "0"], "--max-message-size"),
    (["reindex", "{root}/t-0", "--index-interval-bytes", "-1"], "--index-interval-bytes"),
    (["reindex", "{root}/t-0", "--index-interval-bytes", str(2**40)], "--index-interval-bytes"),
    (["validate", "{root}/t-0", "--before-max-ms", "-1"], "--before-max-ms"),
    (["validate", "{root}/t-0", "--after-max-ms", str(10**30)], "after"),
    (["stats", "{root}/t-0", "--partition", "-1"], "--partition"),
    (["stats", "{root}/t-0", "--partition", "zero"], "--partition"),
    (["cat", "{root}/t-0", "--count", "many"], "--count"),
    (["grep", "v", "{root}/nowhere"], "nowhere"),
    (["grep", "v", "{root}/t-0", "--from", "yesterday"], "yesterday"),
    (["import", "{root}/rows.parquet", "--to", "{root}/out1", "--partitions", "0"], "--partitions"),
    # files of the wrong format
    (["import", "{root}/a.csv", "--to", "{root}/out2"], "not Parquet"),
    (["import", "{root}/rows.parquet", "--to", "{root}/out3", "--format", "jsonl"], "not JSON lines"),
    (["import", "{root}/rows.parquet", "--to", "{root}/out4", "--format", "csv"], "--format"),
    # unknown topic configs: refused, with the closest valid name
    (["import", "{root}/rows.parquet", "--to", "{root}/out5", "--config", "segment.bites=100"],
     "did you mean segment.bytes?"),
    (["import", "{root}/rows.parquet", "--to", "{root}/out6", "--config", "retention.mss=1"],
     "did you mean retention.ms?"),
    (["import", "{root}/rows.parquet", "--to", "{root}/out7", "--config", "segment.bytes=big"], "segment.bytes"),
    # times that are not times
    (["compact", "{root}/t-0", "--now", "yesterday"], "yesterday"),
    # a log directory given where a partition is needed is fine (every partition of it); a file of
    # no segment is not
    (["verify", "{root}/a.csv"], "a.csv"),
    # audit and report: paths, levels, config files, output directories
    (["audit", "{root}/nowhere"], "nowhere"),
    (["audit", "{root}/t-0", "--fail-on", "fatal"], "--fail-on"),
    (["audit", "{root}/t-0", "--config", "{root}/no.properties"], "no.properties"),
    (["audit", "{root}/t-0", "--after-max-ms", "-1"], "--after-max-ms"),
    (["report", "{root}/nowhere", "-o", "{root}/r.html"], "nowhere"),
    (["report", "{root}/t-0", "-o", "{root}/no/such/dir/r.html"], "does not exist"),
]


@pytest.mark.parametrize("argv, says", USAGE_ERRORS, ids=[" ".join(a[:1] + a[2:]) for a, _ in USAGE_ERRORS])
def test_usage_errors_exit_2_with_a_message_and_no_traceback(tree, capsys, argv, says):
    code, out, err = run([a.format(root=tree) for a in argv], capsys)
    assert code == 2, (code, out, err)
    assert says in err, err
    assert "Traceback" not in err + out


def test_a_refused_import_writes_nothing(tree, capsys):
    """The bad config is refused before the output directory is made."""
    code, _, err = run(["import", tree / "rows.parquet", "--to", tree / "refused", "--config", "segment.bites=1"],
                       capsys)
    assert code == 2 and "did you mean segment.bytes?" in err
    assert not (tree / "refused").exists()


def test_kafkas_own_topic_configs_are_accepted(tree, capsys):
    """Names Kafka knows but kbatch has no use for are kept (LogConfig.extra), not refused."""
    code, out, err = run(["import", tree / "rows.parquet", "--to", tree / "accepted", "--config",
                          "min.insync.replicas=2", "--config", "unclean.leader.election.enable=false", "-q"], capsys)
    assert code == 0, err
    cfg = kbatch.LogConfig.from_properties({"min.insync.replicas": "2", "segment.bytes": "1024"})
    assert cfg.extra == {"min.insync.replicas": "2"} and cfg.segment_bytes == 1024


@pytest.mark.parametrize("name", COMMAND_NAMES)
def test_every_command_takes_json_and_h(name, capsys):
    code, out, err = run([name, "-h"], capsys)
    assert code == 0, err
    assert "--json" in out, f"kbatch {name} has no --json"


@pytest.mark.parametrize("argv", [["stats", "{root}/t-0"], ["verify", "{root}/t-0"], ["validate", "{root}/t-0"],
                                  ["offsets", "{root}/t-0", "--earliest"], ["cat", "{root}/t-0", "-c", "2"],
                                  ["compact", "{root}/t-0", "--dry-run", "--now", str(NOW)],
                                  ["reindex", "{root}/t-0"], ["dump", "{root}/t-0/00000000000000000000.log"],
                                  ["audit", "{root}/t-0"]])
def test_json_output_is_one_object_a_line(tree, capsys, argv):
    code, out, err = run([a.format(root=tree) for a in argv] + ["--json"], capsys)
    assert code == 0, err
    lines = [line for line in out.splitlines() if line.strip()]
    assert lines, out
    for line in lines:
        assert isinstance(json.loads(line), dict), line


def test_stats_verify_and_validate_count_records_the_same_way(tree, capsys):
    """One partition, three commands, one record count (200 records, every one valid)."""
    counts = {}
    for name in ("stats", "verify", "validate"):
        code, out, err = run([name, tree / "t-0", "--json"], capsys)
        assert code == 0, err
        rows = [json.loads(line) for line in out.splitlines() if line.strip()]
        found = [r[k] for r in rows for k in ("records", "record_count", "records_checked") if k in r]
        assert found, (name, rows)
        counts[name] = sum(found)
    assert set(counts.values()) == {200}, counts


def test_log_open_refuses_a_directory_that_is_not_a_partition(tree):
    with pytest.raises(kbatch.UnknownTopicOrPartitionError, match="log directory, not a partition"):
        kbatch.Log.open(tree)
    (tree / "plain").mkdir(exist_ok=True)
    with pytest.raises(kbatch.UnknownTopicOrPartitionError, match="Not a partition directory"):
        kbatch.Log.open(tree / "plain")
    (tree / "orders-3").mkdir(exist_ok=True)
    assert kbatch.Log.open(tree / "orders-3").end_offset() == 0  # an empty partition is a partition


@pytest.mark.parametrize("name", COMMAND_NAMES)
def test_t_means_topic_in_every_command(name, capsys):
    """`-t` is kcat's topic flag: where a command has it, it is --topic (offsets' --time has no -t)."""
    code, out, _ = run([name, "-h"], capsys)
    assert code == 0
    for line in out.splitlines():
        if " -t " in f" {line} ":
            assert "--topic" in line, f"kbatch {name}: {line.strip()}"


def test_offsets_selects_partitions_by_topic(tree, capsys):
    code, out, err = run(["offsets", tree, "-t", "t", "-p", "0", "--earliest", "--json"], capsys)
    assert code == 0, err
    assert [json.loads(line)["offset"] for line in out.splitlines()] == [0]
    code, _, err = run(["offsets", tree, "-t", "nosuch", "--earliest"], capsys)
    assert code == 2 and "no partition of topic nosuch" in err
