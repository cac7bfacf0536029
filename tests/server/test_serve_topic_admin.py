"""CreateTopics and DeleteTopics (issue 43: what client test suites need to set up their data):
every advertised version over raw sockets, each answer decoded by kio too; the checks Kafka makes
(name, existence, collisions, partition counts, replication factors, manual assignments, configs,
duplicates, validate_only) with Kafka's error codes and messages; the topics' directories and
`partition.metadata` on disk; deletion while a consumer long-polls the topic and a re-creation under
the same name; and read-only servers refusing both, with nothing on disk changed."""
from __future__ import annotations

import base64
import os
import time
import uuid

import pytest

pytest.importorskip("kafka.protocol.api_message", reason="kbatch serve needs kafka-python >= 3 (the serve extra)")

from kbatch.server import serve  # noqa: E402
from kbatch.server.protocol import APIS  # noqa: E402

from support.serve_support import RawClient, kio_decode, request_class, write_topic  # noqa: E402

try:
    import kio  # noqa: F401
    HAVE_KIO = True
except ImportError:  # kio needs Python >= 3.11
    HAVE_KIO = False

NONE, UNKNOWN_TOPIC_OR_PARTITION, INVALID_TOPIC, TOPIC_AUTHORIZATION_FAILED = 0, 3, 17, 29
TOPIC_ALREADY_EXISTS, INVALID_PARTITIONS, INVALID_REPLICATION_FACTOR = 36, 37, 38
INVALID_REPLICA_ASSIGNMENT, INVALID_CONFIG, INVALID_REQUEST, UNKNOWN_TOPIC_ID = 39, 40, 42, 100


def call(c, req, version):
    resp, body = c.call(req, version)
    if HAVE_KIO:
        _obj, again = kio_decode(req.API_KEY, version, "response", body)
        assert again == bytes(body)
    return resp


def create_req(*topics, validate_only=False):
    R = request_class(19)
    T = R.CreatableTopic
    out = []
    for t in topics:
        name, parts, rf = t[:3]
        configs = t[3] if len(t) > 3 else {}
        assignments = t[4] if len(t) > 4 else []
        out.append(T(name=name, num_partitions=parts, replication_factor=rf,
                     assignments=[T.CreatableReplicaAssignment(partition_index=i, broker_ids=b)
                                  for i, b in assignments],
                     configs=[T.CreatableTopicConfig(name=k, value=v) for k, v in configs.items()]))
    return R(topics=out, timeout_ms=10000, validate_only=validate_only)


def delete_req(names=(), ids=()):
    R = request_class(20)
    topics = [R.DeleteTopicState(name=n, topic_id=uuid.UUID(int=0)) for n in names]
    topics += [R.DeleteTopicState(name=None, topic_id=i) for i in ids]
    return R(topics=topics, topic_names=list(names), timeout_ms=10000)


def metadata(c, topics=None):
    R = request_class(3)
    req = R(topics=None if topics is None else [R.MetadataRequestTopic(name=t, topic_id=uuid.UUID(int=0))
                                                   for t in topics],
            allow_auto_topic_creation=False, include_topic_authorized_operations=False)
    resp, _ = c.call(req, 12)
    return {t.name: (t.error_code, t.topic_id, sorted(p.partition_index for p in t.partitions)) for t in resp.topics}


@pytest.fixture
def writable(tmp_path):
    write_topic(str(tmp_path), "existing", 0, batches=1, per_batch=2)
    with serve(str(tmp_path), listen="127.0.0.1:0", read_only=False) as srv:
        yield srv, tmp_path


def test_advertised():
    assert (APIS[19].min_version, APIS[19].max_version) == (2, 7)
    assert (APIS[20].min_version, APIS[20].max_version) == (1, 6)
    assert (APIS[37].min_version, APIS[37].max_version) == (0, 3)
    assert (APIS[44].min_version, APIS[44].max_version) == (0, 1)


@pytest.mark.parametrize("version", range(2, 8))
def test_create_topics_every_version(writable, version):
    srv, root = writable
    name = f"new-v{version}"
    with RawClient(srv.bootstrap) as c:
        resp = call(c, create_req((name, 3, -1, {"retention.ms": "12345", "cleanup.policy": "compact"})), version)
        [r] = resp.topics
        assert (r.name, r.error_code, r.error_message) == (name, NONE, None)
        if version >= 5:
            assert (r.num_partitions, r.replication_factor) == (3, 1)
            configs = {e.name: (e.value, e.config_source) for e in r.configs}
            assert configs["retention.ms"] == ("12345", 1) and configs["cleanup.policy"] == ("compact", 1)
            assert configs["segment.bytes"][1] == 5  # DEFAULT_CONFIG
        meta = metadata(c, [name])
        assert meta[name][0] == NONE and meta[name][2] == [0, 1, 2]
        if version >= 7:
            assert r.topic_id == meta[name][1] != uuid.UUID(int=0)
    # each partition directory carries the topic id as a broker writes partition.metadata
    for p in range(3):
        text = (root / f"{name}-{p}" / "partition.metadata").read_text()
        lines = dict(line.split(": ", 1) for line in text.splitlines())
        assert lines["version"] == "0"
        assert len(base64.urlsafe_b64decode(lines["topic_id"] + "==")) == 16


def test_create_topics_refusals_have_kafkas_codes_and_messages(writable):
    srv, root = writable
    before = sorted(os.listdir(root))
    with RawClient(srv.bootstrap) as c:
        resp = call(c, create_req(
            ("existing", 1, 1), ("bad name", 1, 1), ("", 1, 1), ("x" * 250, 1, 1),
            ("zero-parts", 0, 1), ("neg-parts", -2, 1), ("rf3", 1, 3), ("rf0", 1, 0),
            ("assigned", 2, -1, {}, [(0, [0])]), ("elsewhere", -1, -1, {}, [(0, [5])]),
            ("gap", -1, -1, {}, [(0, [0]), (2, [0])]),
            ("unknown-config", 1, 1, {"no.such.config": "1"}), ("bad-value", 1, 1, {"retention.ms": "soon"}),
            ("twice", 1, 1), ("twice", 2, 1), ("__consumer_offsets", 1, 1)), 7)
    got = {r.name: (r.error_code, r.error_message) for r in resp.topics}
    assert got["existing"] == (TOPIC_ALREADY_EXISTS, "Topic 'existing' already exists.")
    assert got["bad name"][0] == INVALID_TOPIC and "illegal" in got["bad name"][1]
    assert got[""] == (INVALID_TOPIC, "Topic name is illegal, it can't be empty")
    assert got["x" * 250][0] == INVALID_TOPIC
    assert got["zero-parts"] == got["neg-parts"] == (
        INVALID_PARTITIONS, "Number of partitions was set to an invalid non-positive value.")
    assert got["rf3"][0] == INVALID_REPLICATION_FACTOR and "only 1 broker(s)" in got["rf3"][1]
    assert got["rf0"][0] == INVALID_REPLICATION_FACTOR
    assert got["assigned"][0] == INVALID_REQUEST
    assert got["elsewhere"][0] == got["gap"][0] == INVALID_REPLICA_ASSIGNMENT
    assert got["unknown-config"][0] == got["bad-value"][0] == INVALID_CONFIG
    assert got["twice"] == (INVALID_REQUEST, "Duplicate topic name.")
    assert [r.name for r in resp.topics].count("twice") == 1
    assert got["__consumer_offsets"][0] == TOPIC_ALREADY_EXISTS
    assert sorted(os.listdir(root)) == before  # nothing was created


def test_create_topics_collision_manual_assignment_and_validate_only(writable):
    srv, root = writable
    with RawClient(srv.bootstrap) as c:
        resp = call(c, create_req(("a.b", 1, 1)), 7)
        assert resp.topics[0].error_code == NONE
        resp = call(c, create_req(("a_b", 1, 1)), 7)
        assert (resp.topics[0].error_code, resp.topics[0].error_message) == (
            INVALID_TOPIC, "Topic 'a_b' collides with existing topic: a.b")
        resp = call(c, create_req(("manual", -1, -1, {}, [(0, [0]), (1, [0])])), 7)
        assert (resp.topics[0].error_code, resp.topics[0].num_partitions) == (NONE, 2)
        resp = call(c, create_req(("dry", 4, 1), validate_only=True), 7)
        assert (resp.topics[0].error_code, resp.topics[0].num_partitions) == (NONE, 4)
        assert "dry" not in metadata(c) and not (root / "dry-0").exists()
        # -1: the server's num.partitions (1)
        resp = call(c, create_req(("default-count", -1, -1)), 7)
        assert resp.topics[0].num_partitions == 1


@pytest.mark.parametrize("version", range(1, 7))
def test_delete_topics_every_version(writable, version):
    srv, root = writable
    with RawClient(srv.bootstrap) as c:
        call(c, create_req(("doomed", 2, 1)), 7)
        tid = metadata(c, ["doomed"])["doomed"][1]
        req = delete_req(ids=[tid]) if version >= 6 else delete_req(names=["doomed"])
        resp = call(c, req, version)
        [r] = resp.responses
        assert (r.error_code, r.error_message) == (NONE, None)
        if version >= 6:
            assert (r.name, r.topic_id) == ("doomed", tid)
        assert metadata(c, ["doomed"])["doomed"][0] == UNKNOWN_TOPIC_OR_PARTITION
        resp = call(c, delete_req(names=["doomed", "never"]), version)
        assert {r.name: r.error_code for r in resp.responses} == {"doomed": UNKNOWN_TOPIC_OR_PARTITION,
                                                                  "never": UNKNOWN_TOPIC_OR_PARTITION}
        if version >= 6:
            resp = call(c, delete_req(ids=[uuid.uuid4()]), version)
            assert resp.responses[0].error_code == UNKNOWN_TOPIC_ID
    # the directories are renamed at once and removed a little later (answers in flight are done)
    assert not (root / "doomed-0").exists() and not (root / "doomed-1").exists()


def test_deleted_topic_directories_go_and_the_name_can_be_used_again(writable, monkeypatch):
    srv, root = writable
    from kbatch.server import broker

    monkeypatch.setattr(broker, "DELETE_DELAY_S", 0.5)  # the server runs in this process (a thread)

    with RawClient(srv.bootstrap) as c:
        call(c, create_req(("again", 1, 1)), 7)
        old_id = metadata(c, ["again"])["again"][1]
        call(c, delete_req(names=["again"]), 6)
        assert any(n.startswith("again-0.") and n.endswith("-delete") for n in os.listdir(root))
        call(c, create_req(("again", 2, 1)), 7)
        err, new_id, parts = metadata(c, ["again"])["again"]
        assert err == NONE and parts == [0, 1] and new_id != old_id
        deadline = time.monotonic() + 10
        while any(n.endswith("-delete") for n in os.listdir(root)) and time.monotonic() < deadline:
            time.sleep(0.2)
        assert not any(n.endswith("-delete") for n in os.listdir(root))
        assert {"again-0", "again-1"} <= set(os.listdir(root))


def test_delete_topics_refusals(writable):
    srv, _ = writable
    with RawClient(srv.bootstrap) as c:
        resp = call(c, delete_req(names=["__consumer_offsets"]), 6)
        assert resp.responses[0].error_code == INVALID_REQUEST
        resp = call(c, delete_req(names=["existing", "existing"]), 6)
        assert [(r.name, r.error_code) for r in resp.responses] == [("existing", INVALID_REQUEST)]
        assert metadata(c, ["existing"])["existing"][0] == NONE


def test_delete_answers_a_long_poll_on_the_topic(writable):
    """A Fetch waiting on the deleted topic's partition is answered at once, UNKNOWN_TOPIC_OR_PARTITION."""
    import threading

    srv, _ = writable
    R = request_class(1)
    fetch = R(replica_id=-1, max_wait_ms=20000, min_bytes=1, max_bytes=1 << 20, isolation_level=0,
              session_id=0, session_epoch=-1,
              topics=[R.FetchTopic(topic="existing", partitions=[R.FetchTopic.FetchPartition(
                  partition=0, current_leader_epoch=-1, fetch_offset=2, log_start_offset=-1,
                  partition_max_bytes=1 << 20)])], forgotten_topics_data=[], rack_id="")
    out = {}

    def poll():
        with RawClient(srv.bootstrap, timeout=30) as c:
            t0 = time.monotonic()
            resp, _ = c.call(fetch, 12)
            out["took"] = time.monotonic() - t0
            out["error"] = resp.responses[0].partitions[0].error_code

    th = threading.Thread(target=poll)
    th.start()
    time.sleep(0.5)
    with RawClient(srv.bootstrap) as c:
        call(c, delete_req(names=["existing"]), 6)
    th.join(30)
    assert out["error"] == UNKNOWN_TOPIC_OR_PARTITION and out["took"] < 15


def test_read_only_refuses_create_and_delete(tmp_path):
    write_topic(str(tmp_path), "existing", 0, batches=1, per_batch=2)
    before = {p: os.stat(os.path.join(dp, p)).st_mtime_ns for dp, _, fs in os.walk(tmp_path) for p in fs}
    with serve(str(tmp_path), listen="127.0.0.1:0", read_only=True) as srv:
        with RawClient(srv.bootstrap) as c:
            resp = call(c, create_req(("new", 1, 1)), 7)
            assert resp.topics[0].error_code == TOPIC_AUTHORIZATION_FAILED
            assert "--writable" in resp.topics[0].error_message
            resp = call(c, delete_req(names=["existing"]), 6)
            assert resp.responses[0].error_code == TOPIC_AUTHORIZATION_FAILED
            assert metadata(c, ["existing"])["existing"][0] == NONE
    after = {p: os.stat(os.path.join(dp, p)).st_mtime_ns for dp, _, fs in os.walk(tmp_path) for p in fs}
    assert after == before


def test_confluent_admin_creates_and_deletes(writable):
    ck = pytest.importorskip("confluent_kafka")
    from confluent_kafka.admin import AdminClient, NewTopic

    srv, _ = writable
    admin = AdminClient({"bootstrap.servers": srv.bootstrap})
    admin.create_topics([NewTopic("via-admin", 2, 1, config={"retention.ms": "60000"})])["via-admin"].result(10)
    assert sorted(admin.list_topics(timeout=10).topics["via-admin"].partitions) == [0, 1]
    with pytest.raises(ck.KafkaException) as e:
        admin.create_topics([NewTopic("via-admin", 1, 1)])["via-admin"].result(10)
    assert e.value.args[0].code() == ck.KafkaError.TOPIC_ALREADY_EXISTS
    admin.delete_topics(["via-admin"])["via-admin"].result(10)
    assert "via-admin" not in admin.list_topics(timeout=10).topics


# ------------------------------------------------------------------------------------ CreatePartitions
def partitions_req(*topics, validate_only=False):
    R = request_class(37)
    T = R.CreatePartitionsTopic
    return R(topics=[T(name=n, count=c, assignments=None if a is None else [
        T.CreatePartitionsAssignment(broker_ids=b) for b in a]) for n, c, a in topics],
        timeout_ms=10000, validate_only=validate_only)


@pytest.mark.parametrize("version", range(0, 4))
def test_create_partitions_every_version(writable, version):
    srv, root = writable
    with RawClient(srv.bootstrap) as c:
        call(c, create_req(("grows", 2, 1)), 7)
        tid = metadata(c, ["grows"])["grows"][1]
        resp = call(c, partitions_req(("grows", 4, None), ("dry", 9, None)), version)
        got = {r.name: (r.error_code, r.error_message) for r in resp.results}
        assert got == {"grows": (NONE, None), "dry": (UNKNOWN_TOPIC_OR_PARTITION, "The topic 'dry' does not exist.")}
        assert metadata(c, ["grows"])["grows"] == (NONE, tid, [0, 1, 2, 3])
        resp = call(c, partitions_req(("grows", 6, [[0], [0]])), version)
        assert resp.results[0].error_code == NONE
        resp = call(c, partitions_req(("grows", 3, None), ("existing", 1, None), ("__consumer_offsets", 9, None),
                                      ("grows", 9, None)), version)
        got = {r.name: (r.error_code, r.error_message) for r in resp.results}
        assert got["grows"] == (INVALID_REQUEST, "Duplicate topic name.")
        assert got["existing"] == (INVALID_PARTITIONS, "Topic already has 1 partitions.")
        resp = call(c, partitions_req(("grows", 3, None)), version)
        assert (resp.results[0].error_code, resp.results[0].error_message) == (
            INVALID_PARTITIONS, "Topic currently has 6 partitions, which is higher than the requested 3.")
        resp = call(c, partitions_req(("grows", 8, [[0]]), ("existing", 2, [[7]])), version)
        assert [r.error_code for r in resp.results] == [INVALID_REPLICA_ASSIGNMENT] * 2
        resp = call(c, partitions_req(("grows", 8, None), validate_only=True), version)
        assert resp.results[0].error_code == NONE and metadata(c, ["grows"])["grows"][2] == list(range(6))
    # the new partitions carry the topic's id
    assert (root / "grows-5" / "partition.metadata").read_text() == (root / "grows-0" / "partition.metadata").read_text()


# ------------------------------------------------------------------------------------ IncrementalAlterConfigs
def alter_req(*resources, validate_only=False):
    R = request_class(44)
    A = R.AlterConfigsResource
    return R(resources=[A(resource_type=rt, resource_name=name, configs=[
        A.AlterableConfig(name=k, config_operation=op, value=v) for k, op, v in ops]) for rt, name, ops in resources],
        validate_only=validate_only)


def described(c, topic):
    R = request_class(32)
    resp, _ = c.call(R(resources=[R.DescribeConfigsResource(resource_type=2, resource_name=topic,
                                                             configuration_keys=None)],
                       include_synonyms=False, include_documentation=False), 4)
    return {e.name: (e.value, e.config_source) for e in resp.results[0].configs}


@pytest.mark.parametrize("version", [0, 1])
def test_incremental_alter_configs(writable, version):
    srv, _ = writable
    SET, DELETE, APPEND, SUBTRACT = 0, 1, 2, 3
    with RawClient(srv.bootstrap) as c:
        call(c, create_req(("cfg", 1, 1, {"retention.ms": "1000"})), 7)
        resp = call(c, alter_req((2, "cfg", [("cleanup.policy", APPEND, "compact"), ("retention.ms", DELETE, None),
                                             ("segment.ms", SET, "60000")])), version)
        assert [(r.error_code, r.resource_name) for r in resp.responses] == [(NONE, "cfg")]
        d = described(c, "cfg")
        assert d["cleanup.policy"] == ("delete,compact", 1) and d["segment.ms"] == ("60000", 1)
        assert d["retention.ms"][1] == 5  # back to the default
        call(c, alter_req((2, "cfg", [("cleanup.policy", SUBTRACT, "delete")])), version)
        assert described(c, "cfg")["cleanup.policy"] == ("compact", 1)
        resp = call(c, alter_req((2, "cfg", [("retention.ms", APPEND, "5")]), (2, "cfg", [("no.such", SET, "1")]),
                                 (2, "cfg", [("retention.ms", SET, "soon")]), (2, "nope", [("retention.ms", SET, "1")]),
                                 (2, "cfg", [("segment.ms", SET, "1"), ("segment.ms", DELETE, None)]),
                                 (4, "", [("num.partitions", SET, "3")]), (8, "x", [])), version)
        assert [r.error_code for r in resp.responses] == [INVALID_CONFIG, INVALID_CONFIG, INVALID_CONFIG,
                                                          UNKNOWN_TOPIC_OR_PARTITION, INVALID_REQUEST,
                                                          INVALID_CONFIG, INVALID_REQUEST]
        resp = call(c, alter_req((2, "cfg", [("segment.ms", SET, "120000")]), validate_only=True), version)
        assert resp.responses[0].error_code == NONE and described(c, "cfg")["segment.ms"] == ("60000", 1)


def test_altered_cleanup_policy_applies_to_the_next_produce(writable):
    """librdkafka's 0011_produce_batch: a topic made compacted refuses a record without a key, with
    RecordErrors naming it, and accepts keyed ones."""
    ck = pytest.importorskip("confluent_kafka")
    srv, _ = writable
    with RawClient(srv.bootstrap) as c:
        call(c, create_req(("compacting", 1, 1)), 7)
        call(c, alter_req((2, "compacting", [("cleanup.policy", 0, "compact")])), 1)
    p = ck.Producer({"bootstrap.servers": srv.bootstrap, "linger.ms": 0})
    errors = []
    p.produce("compacting", b"no key", partition=0, on_delivery=lambda e, m: errors.append(e))
    p.flush(10)
    p.produce("compacting", b"v", key=b"k", partition=0, on_delivery=lambda e, m: errors.append(e))
    p.flush(10)
    assert errors[0] is not None and errors[0].code() == ck.KafkaError.INVALID_RECORD
    assert errors[1] is None
