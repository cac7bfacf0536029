"""The files a broker keeps beside its segments and the records of its internal topics:
checkpoint files, the leader epoch cache (and Log's use of it), producer snapshots, KRaft
snapshots, and the three dump decoders. Real broker bytes from tests/data/brokers where they exist;
independent byte layouts (struct + the crc32c package) where they do not."""
import io
import json
import lzma
import shutil
import struct
from pathlib import Path

import crc32c
import pytest

import kbatch
from kbatch.log import checkpoints as C
from kbatch.schema.coordinator_records import format_offsets_record, format_transaction_record, group_record_json
from kbatch.cli.dump_log import DumpOptions, dump
from kbatch.errors import CorruptCheckpointError, CorruptSnapshotError
from kbatch.log.leader_epoch import LeaderEpochFileCache
from kbatch.schema.metadata_records import format_metadata_record, metadata_record_json, type_name
from kbatch.log.producer_state import read_snapshot
from kbatch.schema.raft_snapshot import snapshot_id

from support.paths import BROKER_DATA as DATA  # noqa: E402
KRAFT = DATA / "kafka-3.7.0-kraft"


def run_dump(paths, **opts):
    out, err = io.StringIO(), io.StringIO()
    res = dump([str(p) for p in paths], DumpOptions(**opts), out=out, err=err)
    return res, out.getvalue(), err.getvalue()


def metadata_log():
    return lzma.decompress((KRAFT / "__cluster_metadata-0" / "00000000000000000000.log.xz").read_bytes())


# ------------------------------------------------------------------------------------------ checkpoints
def test_real_checkpoint_files_read_as_written():
    assert C.read_leader_epoch_checkpoint(DATA / "kafka-2.1-zk/__consumer_offsets-28/leader-epoch-checkpoint") == \
        [C.EpochEntry(5, 0)]
    rp = C.read_offset_checkpoint(KRAFT / "recovery-point-offset-checkpoint")
    assert len(rp) == 54 and rp[("__consumer_offsets", 22)] == 0
    assert C.read_offset_checkpoint(KRAFT / "log-start-offset-checkpoint") == {}
    assert C.read_offset_checkpoint(KRAFT / "cleaner-offset-checkpoint") == {}  # an empty file: no entries
    cleaner = C.read_offset_checkpoint(DATA / "kafka-2.7.1-zk/cleaner-offset-checkpoint")
    assert cleaner and all(t == "__consumer_offsets" for t, _p in cleaner)
    meta = C.read_partition_metadata(KRAFT / "__consumer_offsets-6/partition.metadata")
    assert meta == C.PartitionMetadata(0, "gSnfpEbtQfSDpxM2lhEn9A")
    # the same topic id the controller recorded in its TopicRecord
    topic_ids = {}
    for b in kbatch.iter_batches(metadata_log()):
        for r in b:
            if not b.is_control:
                j = metadata_record_json(r.value)
                if j["type"] == "TOPIC_RECORD":
                    topic_ids[j["data"]["name"]] = j["data"]["topicId"]
    assert topic_ids["__consumer_offsets"] == meta.topic_id


def test_checkpoint_writes_are_kafka_bytes_and_round_trip(tmp_path):
    p = tmp_path / "replication-offset-checkpoint"
    C.write_offset_checkpoint(p, {("orders", 3): 120, ("__consumer_offsets", 0): 7})
    assert p.read_bytes() == b"0\n2\norders 3 120\n__consumer_offsets 0 7\n"
    assert C.read_offset_checkpoint(p) == {("orders", 3): 120, ("__consumer_offsets", 0): 7}
    e = tmp_path / "leader-epoch-checkpoint"
    C.write_leader_epoch_checkpoint(e, [C.EpochEntry(0, 0), C.EpochEntry(4, 90)])
    assert e.read_bytes() == b"0\n2\n0 0\n4 90\n"
    m = tmp_path / "partition.metadata"
    C.write_partition_metadata(m, "gSnfpEbtQfSDpxM2lhEn9A")
    assert m.read_bytes() == (KRAFT / "__consumer_offsets-6/partition.metadata").read_bytes()


@pytest.mark.parametrize("text, message, position", [
    (b"1\n0\n", "Unrecognised version:1, expected version: 0", 0),
    (b"0\n2\n0 0\n", "Expected [2] entries", 2),
    (b"0\n1\n0 0 0\n", "Malformed line in checkpoint file", 4),
    (b"0\nx\n", "Malformed line in checkpoint file", 2),
])
def test_bad_checkpoints_are_kafka_errors_with_positions(tmp_path, text, message, position):
    p = tmp_path / "leader-epoch-checkpoint"
    p.write_bytes(text)
    with pytest.raises(CorruptCheckpointError) as e:
        C.read_leader_epoch_checkpoint(p)
    assert message in str(e.value) and e.value.position == position


def test_bad_partition_metadata(tmp_path):
    p = tmp_path / "partition.metadata"
    p.write_bytes(b"version: 0\ntopic_id: AAAAAAAAAAAAAAAAAAAAAA")
    with pytest.raises(CorruptCheckpointError, match="Invalid topic ID"):
        C.read_partition_metadata(p)
    p.write_bytes(b"version 0\n")
    with pytest.raises(CorruptCheckpointError, match="Malformed line"):
        C.read_partition_metadata(p)


# ------------------------------------------------------------------------------------------ leader epoch cache
def test_epoch_cache_rules():
    c = LeaderEpochFileCache()
    assert c.assign(0, 0) and c.assign(2, 10) and not c.assign(2, 12)  # same epoch, later offset: no change
    assert c.assign(2, 8)                                                # same epoch, earlier offset: replaced
    assert c.entries() == [(0, 0), (2, 8)]
    c.assign(3, 20)
    c.assign(5, 15)  # a start offset below an existing entry removes it (and any epoch >= 5)
    assert c.entries() == [(0, 0), (2, 8), (5, 15)]
    assert c.latest_epoch() == 5 and c.epoch_for_offset(9) == 2 and c.epoch_for_offset(8) == 2
    assert c.epoch_for_offset(100) == 5
    assert c.end_offset_for(5, 40) == (5, 40) and c.end_offset_for(3, 40) == (2, 15)
    assert c.end_offset_for(-1, 40) == (-1, -1) and c.end_offset_for(9, 40) == (-1, -1)
    c.truncate_from_end(15)
    assert c.entries() == [(0, 0), (2, 8)]
    c.truncate_from_start(9)  # keeps the epoch holding offset 9, moved to 9
    assert c.entries() == [(2, 9)]
    with pytest.raises(kbatch.InvalidOffsetError):
        c.assign(-1, 3)


def batch(base, n, epoch, ts=1_700_000_000_000):
    b = kbatch.BatchBuilder(base_offset=base, partition_leader_epoch=epoch)
    for i in range(n):
        b.append(ts + base + i, b"k", b"v")
    return b.build()


def test_log_answers_latest_from_the_epoch_cache(tmp_path):
    d = tmp_path / "orders-0"
    log = kbatch.Log.create(d, kbatch.LogConfig(segment_bytes=400))
    log.assign_epoch_start_offset(1)
    for i in range(6):
        log.append(batch(0, 3, -1), now_ms=1_700_000_000_000 + i)
    assert log.offset_for(kbatch.LATEST) == (18, None, 1)
    # a leader change with no new data: ListOffsets LATEST names the new epoch, no batch carries it
    log.assign_epoch_start_offset(4)
    assert log.offset_for(kbatch.LATEST) == (18, None, 4)
    assert log.end_offset_for_epoch(1) == (1, 18) and log.end_offset_for_epoch(4) == (4, 18)
    assert C.read_leader_epoch_checkpoint(d / "leader-epoch-checkpoint") == [(1, 0), (4, 18)]
    log.append(batch(0, 2, -1), now_ms=1_700_000_000_100)
    # retention moves the log start: the cache is truncated from the start
    deleted = log.delete_old_segments(now_ms=1_700_000_000_000 + 8 * 86_400_000)
    assert deleted and log.offset_for(kbatch.EARLIEST).leader_epoch == 4
    log.close()
    log = kbatch.Log.open(d)  # read-only: the broker's file answers
    assert log.offset_for(kbatch.LATEST) == (20, None, 4)
    log.close()


def test_recovery_truncates_the_epoch_cache(tmp_path):
    d = tmp_path / "t-0"
    log = kbatch.Log.create(d)
    log.assign_epoch_start_offset(2)
    log.append(batch(0, 3, -1), now_ms=1_700_000_000_000)
    log.close()
    C.write_leader_epoch_checkpoint(d / "leader-epoch-checkpoint", [(2, 0), (7, 50)])  # stale: 50 > log end
    log = kbatch.Log.open(d, kbatch.LogConfig(), writable=True)
    assert log.leader_epoch_cache.entries() == [(2, 0)]
    log.close()
    assert C.read_leader_epoch_checkpoint(d / "leader-epoch-checkpoint") == [(2, 0)]


def test_a_log_without_a_checkpoint_gets_the_recovery_assignments(tmp_path):
    d = tmp_path / "t-0"
    d.mkdir()
    (d / "00000000000000000000.log").write_bytes(batch(0, 2, 3) + batch(2, 2, 3) + batch(4, 1, 6) + batch(5, 1, 6))
    log = kbatch.Log.open(d)
    assert log.offset_for(kbatch.LATEST) == (6, None, 6) and log.offset_for(kbatch.EARLIEST) == (0, None, 3)
    assert log.leader_epoch_cache.entries() == [(3, 0), (6, 4)]  # what LogSegment.recover assigns
    assert log.offset_for(kbatch.LATEST) == (6, None, 6) and log.offset_for(kbatch.EARLIEST) == (0, None, 3)
    log.close()
    assert not (d / "leader-epoch-checkpoint").exists()  # read-only: nothing written


def test_without_a_checkpoint_latest_reads_the_last_batch_only(tmp_path, monkeypatch):
    """LATEST and EARLIEST on a read-only log without a leader-epoch-checkpoint read the last (first)
    batch carrying an epoch, not every batch header of the log (the cache is built only when the
    whole of it is asked for)."""
    from kbatch.log import segment

    d = tmp_path / "t-0"
    d.mkdir()
    for k in range(3):  # three segments of 40 batches
        (d / f"{40 * k:020d}.log").write_bytes(b"".join(batch(40 * k + i, 1, 2 + k) for i in range(40)))
    kbatch.rebuild_indexes(d, index_interval_bytes=256)
    read = []
    from kbatch.record import file_records
    real = file_records._WindowReader.read

    def counting(self, position, size):
        read.append((self.records.path, size))
        return real(self, position, size)

    monkeypatch.setattr(file_records._WindowReader, "read", counting)
    log = kbatch.Log.open(d)
    assert log.offset_for(kbatch.LATEST) == (120, None, 4)
    assert {p.rsplit("/", 1)[1] for p, _ in read} == {f"{80:020d}.log"} and sum(n for _, n in read) < 1000
    read.clear()
    assert log.offset_for(kbatch.EARLIEST) == (0, None, 2)
    assert {p.rsplit("/", 1)[1] for p, _ in read} == {f"{0:020d}.log"}
    assert log.leader_epoch_cache.entries() == [(2, 0), (3, 40), (4, 80)]
    log.close()
    # no batch carries an epoch (ple -1): both answers None, from the same few bytes
    e = tmp_path / "u-0"
    e.mkdir()
    for k in range(3):
        (e / f"{40 * k:020d}.log").write_bytes(b"".join(batch(40 * k + i, 1, -1) for i in range(40)))
    kbatch.rebuild_indexes(e, index_interval_bytes=256)
    log = kbatch.Log.open(e)
    read.clear()
    assert log.offset_for(kbatch.LATEST) == (120, None, None)
    assert log.offset_for(kbatch.EARLIEST) == (0, None, None)
    assert sum(n for _, n in read) < 20_000  # the last segment's tail, the first segment's first window
    log.close()


def test_without_a_checkpoint_earliest_reads_up_to_the_log_start(tmp_path):
    root = tmp_path / "logs"
    d = root / "t-0"
    d.mkdir(parents=True)
    (d / "00000000000000000000.log").write_bytes(batch(0, 4, -1) + batch(4, 4, 7) + batch(8, 4, 9))
    for start, epoch in ((0, None), (3, None), (4, 7), (6, 7), (9, 7)):
        C.write_offset_checkpoint(root / "log-start-offset-checkpoint", {("t", 0): start})
        log = kbatch.Log.open(d)
        assert log.offset_for(kbatch.EARLIEST) == (start, None, epoch)
        # the same as the cache a full recovery of these batches builds
        first = log.leader_epoch_cache.earliest_entry()
        assert epoch == (first.epoch if first.start_offset <= start else None)
        log.close()


def test_without_a_checkpoint_latest_is_the_last_batchs_epoch_where_epochs_go_down(tmp_path):
    """The one case where LATEST's epoch differs from the cache a full recovery would build: epochs
    that go down along the log, which no leader writes (a leader's epoch only grows, and a
    follower truncates what diverges). LATEST reads the last batch, as it did before kbatch kept a
    cache; the cache (LogSegment.recover's rule) keeps the largest."""
    d = tmp_path / "t-0"
    d.mkdir()
    (d / "00000000000000000000.log").write_bytes(batch(0, 2, 3) + batch(2, 2, 3) + batch(4, 1, 6) + batch(5, 1, 5))
    log = kbatch.Log.open(d)
    assert log.offset_for(kbatch.LATEST) == (6, None, 5)
    assert log.leader_epoch_cache.entries() == [(3, 0), (6, 4)]  # 5 < 6: not assigned (LogSegment.recover)
    assert log.leader_epoch_cache.latest_epoch() == 6
    assert log.offset_for(kbatch.LATEST) == (6, None, 5)  # the same answer once the cache is built
    log.close()


def test_log_start_offset_checkpoint_moves_earliest(tmp_path):
    root = tmp_path / "logs"
    d = root / "t-0"
    d.mkdir(parents=True)
    (d / "00000000000000000000.log").write_bytes(batch(0, 4, 1) + batch(4, 4, 1))
    C.write_offset_checkpoint(root / "log-start-offset-checkpoint", {("t", 0): 5})
    log = kbatch.Log.open(d)
    assert log.beginning_offset() == 5 and log.offset_for(kbatch.EARLIEST) == (5, None, 1)
    log.close()


def test_real_broker_epochs(tmp_path):
    shutil.copytree(DATA / "kafka-2.1-zk/debug_topic-0", tmp_path / "debug_topic-0")
    log = kbatch.Log.open(tmp_path / "debug_topic-0")
    assert log.offset_for(kbatch.LATEST) == (40, None, 0)
    log.close()


# ------------------------------------------------------------------------------------------ producer snapshots
def snapshot_bytes(entries):
    body = struct.pack(">i", len(entries)) + b"".join(struct.pack(">qhiqiqiq", *e) for e in entries)
    return struct.pack(">hI", 1, crc32c.crc32c(body)) + body


def test_producer_snapshot(backend, tmp_path):
    for f in DATA.rglob("*.snapshot"):  # every real one is empty (idle producers expire)
        assert read_snapshot(f.read_bytes()) == []
    raw = snapshot_bytes([(1000, 3, 9, 120, 4, 1700, 2, -1), (7, 0, -1, -1, 0, 55, -1, 40)])
    p = tmp_path / "00000000000000000121.snapshot"
    p.write_bytes(raw)
    res, out, _err = run_dump([p])
    assert res.problems == 0
    assert out.splitlines()[1:] == [
        "producerId: 1000 producerEpoch: 3 coordinatorEpoch: 2 currentTxnFirstOffset: OptionalLong.empty "
        "lastTimestamp: 1700 firstSequence: 5 lastSequence: 9 lastOffset: 120 offsetDelta: 4 timestamp: 1700",
        "producerId: 7 producerEpoch: 0 coordinatorEpoch: -1 currentTxnFirstOffset: OptionalLong[40] lastTimestamp: 55"]
    bad = bytearray(raw)
    bad[-1] ^= 1
    with pytest.raises(CorruptSnapshotError, match="CRC is no longer valid") as e:
        read_snapshot(bytes(bad))
    assert e.value.position == 2
    with pytest.raises(CorruptSnapshotError, match="unknown file version 2"):
        read_snapshot(b"\x00\x02" + raw[2:])
    p.write_bytes(bytes(bad))
    assert run_dump([p])[0].problems == 1


# ------------------------------------------------------------------------------------------ KRaft snapshots
def test_kraft_snapshot_files(tmp_path):
    res, out, _ = run_dump([KRAFT / "bootstrap.checkpoint"], deep_iteration=True)
    lines = out.splitlines()
    assert res.problems == 0 and lines[1] == "KRaft bootstrap snapshot"
    assert lines[3].endswith('SnapshotHeader {"version":0,"lastContainedLogTimestamp":0}')
    assert lines[-1].endswith('SnapshotFooter {"version":0}')
    snap = tmp_path / "00000000000000004929-0000000001.checkpoint"
    shutil.copy(KRAFT / "bootstrap.checkpoint", snap)
    assert snapshot_id(snap) == (4929, 1, False)
    res, out, _ = run_dump([snap], decoder="cluster-metadata")
    assert out.splitlines()[1] == "Snapshot end offset: 4929, epoch: 1"
    assert ('payload: {"type":"FEATURE_LEVEL_RECORD","version":0,"data":{"name":"metadata.version",'
            '"featureLevel":19}}') in out
    res, out, _ = run_dump([snap], json=True, deep_iteration=True)
    objs = [json.loads(x) for x in out.splitlines()]
    assert objs[0]["kind"] == "snapshot" and objs[0]["end_offset"] == 4929
    assert objs[2]["control"]["data"] == {"version": 0, "lastContainedLogTimestamp": 0}


# ------------------------------------------------------------------------------------------ decoders
def test_cluster_metadata_decoder_on_a_real_kraft_log():
    seen, errors = {}, 0
    for b in kbatch.iter_batches(metadata_log()):
        if b.is_control:
            continue
        for r in b:
            text = format_metadata_record(r.value, r.offset)
            errors += text.startswith("Error")
            seen.setdefault(json.loads(text)["type"], json.loads(text))
    assert errors == 0
    assert set(seen) >= {"TOPIC_RECORD", "PARTITION_RECORD", "CONFIG_RECORD", "REGISTER_BROKER_RECORD",
                         "FEATURE_LEVEL_RECORD", "PRODUCER_IDS_RECORD", "NO_OP_RECORD", "REGISTER_CONTROLLER_RECORD"}
    # the broker's log directory id (meta.properties) is in its PartitionRecords
    assert seen["PARTITION_RECORD"]["data"]["directories"] == ["XHhkr4tkSsD900pOQ8pPfg"]
    assert "directory.id=XHhkr4tkSsD900pOQ8pPfg" in (KRAFT / "meta.properties").read_text()
    assert type_name("ZkMigrationStateRecord") == "ZK_MIGRATION_STATE_RECORD"
    assert format_metadata_record(b"\x00\x02\x00", 7).startswith("Error at 7, skipping. Could not deserialize "
                                                                "metadata record with frame version 0")
    # a null value (a record no controller writes) is reported like other bad records; it raised TypeError
    assert format_metadata_record(None, 8) == "Error at 8, skipping. Metadata record has a null value: expected a " \
        "record value, found null (at byte 0)"


def test_offsets_decoder_on_real_consumer_offsets(tmp_path):
    data = (DATA / "kafka-3.1.0-zk/__consumer_offsets-0/00000000000000000000.log").read_bytes()
    recs = [r for b in kbatch.iter_batches(data) for r in b]
    k, v = format_offsets_record(recs[0].key, recs[0].value, 0)
    assert k == '{"type":"2","data":{"group":"console-consumer-14897"}}'
    value = json.loads(v)
    assert value["version"] == "3" and value["data"]["protocolType"] == "consumer"
    member = value["data"]["members"][0]
    assert member["clientId"] == "console-consumer" and member["subscription"]["topics"] == ["cities"]
    assert member["assignment"]["assignedPartitions"] == [{"topic": "cities", "partitions": [0]}]
    data = (DATA / "kafka-2.7.1-zk/__consumer_offsets-39/00000000000000000000.log").read_bytes()
    r = next(iter(next(kbatch.iter_batches(data))))
    assert format_offsets_record(r.key, r.value, r.offset) == (  # a tombstone the cleaner has kept
        '{"type":"2","data":{"group":"console-consumer-52588"}}', "<DELETE>")
    commits = 0
    for b in kbatch.iter_batches(lzma.decompress(
            (DATA / "kafka-2.1-zk/__consumer_offsets-28/00000000000000000000.log.xz").read_bytes())):
        for r in b:
            key, value = group_record_json(r.key, r.value)
            if key["type"] == "1":
                commits += 1
                # Kafka 2.1 writes OffsetCommitValue v2 (KIP-211: no expireTimestamp, no leaderEpoch yet)
                assert value["version"] == "2" and list(value["data"]) == ["offset", "metadata", "commitTimestamp"]
    assert commits == 8201
    assert format_offsets_record(b"\x00\x63\x00\x00", None, 4) == ("Unknown record type 99 at offset 4, skipping.",
                                                                 None)
    assert format_offsets_record(b"\x00\x01\x00", b"", 9)[0].startswith("Error at offset 9, skipping.")


def txn_key(txn_id: str) -> bytes:
    return struct.pack(">hh", 0, len(txn_id)) + txn_id.encode()


def txn_value_v0(pid, epoch, timeout, status, partitions, last_update, start) -> bytes:
    out = struct.pack(">hqhib", 0, pid, epoch, timeout, status) + struct.pack(">i", len(partitions))
    for topic, ids in partitions:
        out += struct.pack(">h", len(topic)) + topic.encode() + struct.pack(">i", len(ids))
        out += b"".join(struct.pack(">i", i) for i in ids)
    return out + struct.pack(">qq", last_update, start)


def test_transaction_log_decoder(tmp_path):
    key = txn_key("payments-tx")
    value = txn_value_v0(4242, 7, 60000, 1, [("orders", [0, 3]), ("audit", [1])], 1714554000123, 1714554000000)
    assert format_transaction_record(key, value) == (
        "transaction_metadata::transactionalId=payments-tx",
        "producerId:4242,producerEpoch:7,state=Ongoing,partitions=[orders-0,orders-3,audit-1],"
        "txnLastUpdateTimestamp=1714554000123,txnTimeoutMs=60000")
    empty = txn_value_v0(4242, 8, 60000, 0, [("orders", [0])], 1, 1)
    assert format_transaction_record(key, empty)[1].startswith("producerId:4242,producerEpoch:8,state=Empty,"
                                                               "partitions=[],")
    assert format_transaction_record(key, None)[1] == "<DELETE>"
    assert format_transaction_record(struct.pack(">h", 5) + b"x", None) == ("unknown::version=5", None)
    # in a segment, through kbatch dump
    b = kbatch.BatchBuilder()
    b.append(1, key, value)
    b.append(2, key, None)
    seg = tmp_path / "00000000000000000000.log"
    seg.write_bytes(b.build())
    res, out, _ = run_dump([seg], decoder="transaction-log")
    assert res.problems == 0
    assert out.splitlines()[3].endswith("key: transaction_metadata::transactionalId=payments-tx payload: "
                                        "producerId:4242,producerEpoch:7,state=Ongoing,partitions=[orders-0,orders-3,"
                                        "audit-1],txnLastUpdateTimestamp=1714554000123,txnTimeoutMs=60000")
    assert out.splitlines()[4].endswith("key: transaction_metadata::transactionalId=payments-tx payload: <DELETE>")
    res, out, _ = run_dump([seg], decoder="transaction-log", json=True)
    rec = [json.loads(x) for x in out.splitlines()][2]
    assert rec["decoded"]["key"] == "transaction_metadata::transactionalId=payments-tx"


def test_decoders_on_a_record_without_a_key(tmp_path):
    """A keyless record in a coordinator topic is an error on that record's line; the dump goes on
    (the transaction decoder and --offsets-decoder --json raised TypeError, ending the dump)."""
    b = kbatch.BatchBuilder()
    b.append(1, None, b"v")
    b.append(2, txn_key("tx"), None)
    seg = tmp_path / "00000000000000000000.log"
    seg.write_bytes(b.build())
    res, out, _ = run_dump([seg], decoder="transaction-log")
    lines = out.splitlines()
    assert lines[3].endswith("key: Error at offset 0, skipping. Failed to decode message using transaction log "
                             "decoder (message had a missing key): expected a key, found null"), lines[3]
    assert lines[4].endswith("key: transaction_metadata::transactionalId=tx payload: <DELETE>")
    res, out, _ = run_dump([seg], decoder="offsets", json=True)
    recs = [json.loads(x) for x in out.splitlines() if '"record"' in x]
    assert recs[0]["decoded"]["error"].startswith("Failed to decode message using offset topic decoder (message had "
                                                  "a missing key)")
    assert len(recs) == 2


def test_dump_cli_decoders_and_broker_files(tmp_path):
    from typer.testing import CliRunner

    from kbatch.cli import make_app

    runner = CliRunner()
    app = make_app()
    d = KRAFT / "__consumer_offsets-6"
    r = runner.invoke(app, ["dump", str(d / "00000000000000000000.log"), "--offsets-decoder", "--json"])
    assert r.exit_code == 0, r.output
    decoded = [json.loads(x)["decoded"] for x in r.stdout.splitlines() if '"record"' in x]
    assert decoded[1]["key"] == {"type": "1", "data": {"group": "DEVSmileCDR", "topic":
                                                       "batch2.work.notification.SHR_PROD.persistence", "partition": 0}}
    assert decoded[1]["value"]["data"]["commitTimestamp"] == 1769791663122
    r = runner.invoke(app, ["dump", str(KRAFT / "__cluster_metadata-0" / "leader-epoch-checkpoint"),
                            str(d / "partition.metadata"), str(KRAFT / "recovery-point-offset-checkpoint")])
    assert r.exit_code == 0
    lines = r.stdout.splitlines()
    assert lines[1] == "epoch: 1 startOffset: 0" and lines[3] == "version: 0 topicId: gSnfpEbtQfSDpxM2lhEn9A"
    assert "topic: __consumer_offsets partition: 22 offset: 0" in lines
    r = runner.invoke(app, ["dump", "x.log", "--offsets-decoder", "--transaction-log-decoder"])
    assert r.exit_code == 2
