"""The APIs the Java client adds to what serve answers, over raw sockets at every advertised version,
each answer decoded by kio too (a second codec): OffsetForLeaderEpoch against `Log.end_offset_for_epoch`
(and the fencing of a stale or future current epoch), DescribeConfigs (sources of per-topic and
server-wide values, errors for an unknown topic, another broker, a resource type serve has no configs
for, the keys filter), DescribeCluster (endpoint types), ListOffsets v8-10 (-4 EARLIEST_LOCAL,
-5 LATEST_TIERED, and each refused below its version). tests/server/test_serve_java.py compares these
answers with a real broker's."""
from __future__ import annotations

import pytest

pytest.importorskip("kafka.protocol.api_message", reason="kbatch serve needs kafka-python >= 3 (the serve extra)")

from kbatch.server import serve  # noqa: E402
from kbatch.server.protocol import APIS  # noqa: E402

from support.serve_support import RawClient, kio_decode, request_class, write_broker_dir, write_topic  # noqa: E402

try:
    import kio  # noqa: F401
    HAVE_KIO = True
except ImportError:  # kio needs Python >= 3.11
    HAVE_KIO = False

NONE, UNKNOWN_TOPIC_OR_PARTITION, UNSUPPORTED_VERSION, INVALID_REQUEST = 0, 3, 35, 42
FENCED_LEADER_EPOCH, UNKNOWN_LEADER_EPOCH = 74, 75


@pytest.fixture
def server(tmp_path):
    write_broker_dir(str(tmp_path))  # topic "b": epochs 0 (offsets 0-9) and 4 (from 10), node 3
    write_topic(str(tmp_path), "plain", 0, batches=2, per_batch=3)  # no epochs in its batches
    with serve(str(tmp_path), listen="127.0.0.1:0", read_only=True,
               topic_config={"message.timestamp.after.max.ms": "3600000"},
               topic_configs={"plain": {"retention.ms": "1000", "cleanup.policy": "compact"}}) as srv:
        yield srv


def call(c, req, version):
    resp, body = c.call(req, version)
    if HAVE_KIO:
        _obj, again = kio_decode(req.API_KEY, version, "response", body)
        assert again == bytes(body)
    return resp


def test_advertised():
    got = {k: (APIS[k].min_version, APIS[k].max_version) for k in (2, 23, 32, 60)}
    assert got == {2: (1, 10), 23: (2, 4), 32: (1, 4), 60: (0, 2)}


# ------------------------------------------------------------------------------------ OffsetForLeaderEpoch
def epochs_req(parts):
    R = request_class(23)
    T = R.OffsetForLeaderTopic
    topics: dict[str, list] = {}
    for topic, p, current, epoch in parts:
        topics.setdefault(topic, []).append(T.OffsetForLeaderPartition(partition=p, current_leader_epoch=current,
                                                                       leader_epoch=epoch))
    return R(replica_id=-1, topics=[T(topic=t, partitions=ps) for t, ps in topics.items()])


@pytest.mark.parametrize("version", [2, 3, 4])
def test_offset_for_leader_epoch(server, version):
    import kbatch

    log = kbatch.Log.open(str(server.broker.directory) + "/b-0")
    try:
        end = log.end_offset()
        want = {e: log.end_offset_for_epoch(e) for e in (0, 2, 4)}
    finally:
        log.close()
    assert want == {0: (0, 10), 2: (0, 10), 4: (4, end)}  # the checkpoint: epoch 0 at 0, epoch 4 at 10
    asks = [("b", 0, -1, 0), ("b", 0, -1, 2), ("b", 0, 4, 4), ("b", 0, -1, 9), ("b", 0, 3, 4), ("b", 0, 5, 4),
            ("b", 1, -1, 0), ("nope", 0, -1, 0), ("plain", 0, -1, 0), ("plain", 0, -1, 1)]
    with RawClient(server.bootstrap) as c:
        resp = call(c, epochs_req(asks), version)
    got = [(t.topic, p.partition, p.error_code, p.leader_epoch, p.end_offset) for t in resp.topics for p in t.partitions]
    assert got == [
        ("b", 0, NONE, 0, 10), ("b", 0, NONE, 0, 10), ("b", 0, NONE, 4, end),
        ("b", 0, NONE, -1, -1),                              # newer than any epoch: undefined, as Kafka
        ("b", 0, FENCED_LEADER_EPOCH, -1, -1), ("b", 0, UNKNOWN_LEADER_EPOCH, -1, -1),
        ("b", 1, UNKNOWN_TOPIC_OR_PARTITION, -1, -1), ("nope", 0, UNKNOWN_TOPIC_OR_PARTITION, -1, -1),
        # no epoch in the batches: the node's epoch (0, as Metadata says) has led since the start
        ("plain", 0, NONE, 0, 6), ("plain", 0, NONE, -1, -1)]


# ------------------------------------------------------------------------------------ DescribeConfigs
def configs_req(resources, synonyms=True):
    R = request_class(32)
    return R(resources=[R.DescribeConfigsResource(resource_type=t, resource_name=n, configuration_keys=keys)
                        for t, n, keys in resources], include_synonyms=synonyms, include_documentation=False)


@pytest.mark.parametrize("version", [1, 2, 3, 4])
def test_describe_configs(server, version):
    node = str(server.broker.node_id)
    with RawClient(server.bootstrap) as c:
        resp = call(c, configs_req([(2, "plain", None), (2, "b", ["retention.ms", "message.timestamp.after.max.ms",
                                                                   "not.a.config"]),
                                    (2, "nope", None), (4, node, None), (4, "", ["num.partitions"]),
                                    (4, "17", None), (8, node, None)]), version)
    res = {(r.resource_type, r.resource_name): r for r in resp.results}
    plain = {e.name: (e.value, e.config_source, [(s.name, s.value, s.source) for s in e.synonyms])
             for e in res[(2, "plain")].configs}
    # per-topic (DYNAMIC_TOPIC_CONFIG 1), server-wide (STATIC_BROKER_CONFIG 4), default (DEFAULT_CONFIG 5)
    assert plain["retention.ms"] == ("1000", 1, [("retention.ms", "1000", 1), ("log.retention.ms", "604800000", 5)])
    assert plain["cleanup.policy"] == ("compact", 1, [("cleanup.policy", "compact", 1),
                                                      ("log.cleanup.policy", "delete", 5)])
    assert plain["message.timestamp.after.max.ms"] == ("3600000", 4, [
        ("log.message.timestamp.after.max.ms", "3600000", 4),
        ("log.message.timestamp.after.max.ms", "9223372036854775807", 5)])
    assert plain["segment.bytes"] == ("1073741824", 5, [("log.segment.bytes", "1073741824", 5)])
    b = res[(2, "b")]
    assert (b.error_code, sorted(e.name for e in b.configs)) == (NONE, ["message.timestamp.after.max.ms",
                                                                         "retention.ms"])
    assert [e.value for e in b.configs if e.name == "retention.ms"] == ["604800000"]
    nope = res[(2, "nope")]
    assert (nope.error_code, nope.error_message, nope.configs) == (
        UNKNOWN_TOPIC_OR_PARTITION, "The topic 'nope' does not exist.", [])
    brk = {e.name: (e.value, e.config_source, e.read_only) for e in res[(4, node)].configs}
    assert brk["node.id"] == (node, 4, True)
    assert brk["log.message.timestamp.after.max.ms"] == ("3600000", 4, True)
    assert brk["log.retention.ms"] == ("604800000", 5, True)
    assert {e.name for e in res[(4, "")].configs} == {"num.partitions"}
    assert (res[(4, "17")].error_code, res[(4, "17")].error_message) == (
        INVALID_REQUEST, f"Unexpected broker id, expected {node} or empty string, but received 17")
    assert res[(8, node)].error_code == INVALID_REQUEST
    if version >= 3:
        types = {e.name: e.config_type for e in res[(2, "plain")].configs}
        assert (types["segment.bytes"], types["retention.ms"], types["cleanup.policy"]) == (3, 5, 7)


def test_describe_configs_without_synonyms(server):
    with RawClient(server.bootstrap) as c:
        resp = call(c, configs_req([(2, "plain", ["retention.ms"])], synonyms=False), 4)
    [e] = resp.results[0].configs
    assert (e.name, e.value, e.config_source, e.synonyms) == ("retention.ms", "1000", 1, [])


# ------------------------------------------------------------------------------------ DescribeCluster
@pytest.mark.parametrize("version", [0, 1, 2])
def test_describe_cluster(server, version):
    R = request_class(60)
    broker = server.broker
    with RawClient(server.bootstrap) as c:
        resp = call(c, R(include_cluster_authorized_operations=False, endpoint_type=1, include_fenced_brokers=False),
                    version)
        assert (resp.error_code, resp.cluster_id, resp.controller_id) == (NONE, broker.cluster_id, broker.node_id)
        assert broker.cluster_id == "Kb4tchTestClusterId0001"  # meta.properties
        assert [(b.broker_id, b.host, b.port) for b in resp.brokers] == [(3, broker.host, broker.port)]
        if version >= 1:
            ctl = call(c, R(include_cluster_authorized_operations=False, endpoint_type=2,
                            include_fenced_brokers=False), version)
            assert (ctl.error_code, ctl.brokers) == (119, [])  # UNSUPPORTED_ENDPOINT_TYPE, as a broker


# ------------------------------------------------------------------------------------ ListOffsets v8-10
def list_req(target, topic="b"):
    R = request_class(2)
    return R(replica_id=-1, isolation_level=0, timeout_ms=1000, topics=[R.ListOffsetsTopic(
        name=topic, partitions=[R.ListOffsetsTopic.ListOffsetsPartition(
            partition_index=0, current_leader_epoch=-1, timestamp=target, max_num_offsets=1)])])


@pytest.mark.parametrize("version", [7, 8, 9, 10])
def test_list_offsets_tiered_targets(server, version):
    with RawClient(server.bootstrap) as c:
        def ask(target):
            p = call(c, list_req(target), version).topics[0].partitions[0]
            return p.error_code, p.timestamp, p.offset, p.leader_epoch

        earliest = ask(-2)
        assert earliest == (NONE, -1, 0, 0)
        assert ask(-4) == (earliest if version >= 8 else (UNSUPPORTED_VERSION, -1, -1, -1))
        assert ask(-5) == ((NONE, -1, -1, -1) if version >= 9 else (UNSUPPORTED_VERSION, -1, -1, -1))
        assert ask(-6)[0] == UNSUPPORTED_VERSION
