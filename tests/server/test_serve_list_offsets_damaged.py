"""serve's ListOffsets on damaged logs and old brokers' index files gives `Log.offsets_for_times`'s
answers (issue 28 items 5 and 6): the answer Kafka would give over the batches that can be read,
never one from a batch whose CRC fails, the same whatever else the request asks."""
from __future__ import annotations

import pytest

pytest.importorskip("kafka.protocol.api_message", reason="kbatch serve needs kafka-python >= 3 (the serve extra)")

import kbatch  # noqa: E402
from kbatch.server import serve  # noqa: E402

from support import damaged_logs as D  # noqa: E402
from support.serve_support import RawClient, request_class  # noqa: E402

ListOffsetsRequest = request_class(2)
ts = D.ts_of


def list_offsets(client, pairs, version=7):
    R = ListOffsetsRequest
    topics = {}
    for (topic, partition), t in pairs:
        topics.setdefault(topic, []).append(R.ListOffsetsTopic.ListOffsetsPartition(
            partition_index=partition, current_leader_epoch=-1, timestamp=t, max_num_offsets=1))
    req = R(replica_id=-1, isolation_level=0, topics=[R.ListOffsetsTopic(name=n, partitions=ps) for n, ps in topics.items()])
    r, _ = client.call(req, version)
    return {(t.name, p.partition_index): (p.error_code, p.offset) for t in r.topics for p in t.partitions}


def test_items5_6_list_offsets_answers_as_the_log_does(backend, tmp_path):
    logdir = tmp_path / "logs"
    length = D.build_partition(logdir, name="len-0")
    D.bad_length(length, 50, past_end=False)
    crc = D.build_partition(logdir, name="crc-0")
    D.crc_flip(crc, 50, ts(950))
    old = D.old_broker_partition(logdir, name="old-0")
    cases = {("len", 0): (length, [ts(200), ts(505), ts(700), ts(999) + 1]),
             ("crc", 0): (crc, [ts(200), ts(502), ts(949)]),
             ("old", 0): (old, [ts(100), ts(200), ts(300)])}
    want = {}
    for tp, (part, targets) in cases.items():
        log = kbatch.Log.open(part.path)
        try:
            want[tp] = [-1 if h is None else h.offset for h in log.offsets_for_times(targets)]
        finally:
            log.close()
        assert want[tp] == [-1 if (a := part.readable_answer(t)) is None else a[0] for t in targets]
    with serve(str(logdir), read_only=True) as srv, RawClient(srv.bootstrap) as c:
        # one partition per request (a partition named twice is refused), every target in turn,
        # and all three partitions in one request
        for i in range(4):
            pairs = [(tp, targets[i]) for tp, (_p, targets) in cases.items() if i < len(targets)]
            got = list_offsets(c, pairs)
            for tp, _t in pairs:
                assert got[tp] == (0, want[tp][i]), (tp, i)
                assert list_offsets(c, [(tp, cases[tp][1][i])])[tp] == (0, want[tp][i])
