"""kafka-python driver (3.x, and 2.0.2 under the system Python)."""
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _plan import hexb, main, unhex  # noqa: E402

import kafka  # noqa: E402
from kafka import KafkaConsumer, KafkaProducer, TopicPartition  # noqa: E402

V3 = int(kafka.__version__.split(".")[0]) >= 3


def run_step(bootstrap, step):
    op = step["op"]
    if op == "version":
        return {"version": kafka.__version__}
    if op == "produce":
        kw = dict(bootstrap_servers=bootstrap, acks=step.get("acks", "all"), retries=0 if step.get("expect_error") else 3,
                  compression_type=step.get("codec"), request_timeout_ms=10000)
        if V3:
            kw["enable_idempotence"] = step.get("idempotent", False)
        elif step.get("idempotent"):
            return {"error": "kafka-python 2.0.2 has no idempotent producer"}
        p = KafkaProducer(**kw)
        futures = []
        for key, value, ts, headers in step["records"]:
            futures.append(p.send(step["topic"], key=unhex(key), value=unhex(value), partition=step["partition"],
                                  timestamp_ms=ts, headers=[(k, unhex(v)) for k, v in headers]))
        p.flush(timeout=20)
        out = {}
        try:
            out["offsets"] = [f.get(timeout=20).offset for f in futures]
        except Exception as e:
            out["error"] = type(e).__name__
            out["errno"] = getattr(e, "errno", None)
        p.close(timeout=10)
        return out
    if op == "consume":
        kw = {}
        if step.get("isolation"):
            if not V3:
                return {"unsupported": "kafka-python 2.0.2 has no isolation_level"}
            kw["isolation_level"] = step["isolation"]
        c = KafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False, consumer_timeout_ms=8000, **kw)
        tp = TopicPartition(step["topic"], step["partition"])
        c.assign([tp])
        c.seek(tp, step["offset"])
        recs = []
        for m in c:
            recs.append([m.offset, m.timestamp, hexb(m.key), hexb(m.value), [[k, hexb(v)] for k, v in m.headers]])
            if len(recs) >= step["count"]:
                break
        c.close()
        return {"records": recs}
    if op == "times":
        c = KafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False)
        tp = TopicPartition(step["topic"], step["partition"])
        out = []
        for t in step["targets"]:
            r = c.offsets_for_times({tp: t})[tp]
            out.append(None if r is None else [r.offset, r.timestamp])
        c.close()
        return {"answers": out}
    if op == "group":
        c = KafkaConsumer(step["topic"], group_id=step["group"], bootstrap_servers=bootstrap,
                          auto_offset_reset="earliest", enable_auto_commit=False, consumer_timeout_ms=10000,
                          session_timeout_ms=10000, heartbeat_interval_ms=1000)
        offsets = []
        for m in c:
            offsets.append(m.offset)
            if len(offsets) >= step["count"]:
                break
        if offsets:
            c.commit({TopicPartition(step["topic"], 0): _meta(offsets[-1] + 1)})
        committed = c.committed(TopicPartition(step["topic"], 0))
        c.close()
        return {"offsets": offsets, "committed": committed}
    if op == "member":
        # one member of a group, in its own process (kafka-python's consumers are not driven two to a
        # process here): prints its assignment on stderr whenever it changes, leaves when the stop
        # file appears
        import time

        c = KafkaConsumer(step["topic"], group_id=step["group"], bootstrap_servers=bootstrap,
                          auto_offset_reset="earliest", enable_auto_commit=False, session_timeout_ms=10000,
                          heartbeat_interval_ms=500, max_poll_interval_ms=60000)
        seen, end = None, time.time() + 60
        while not os.path.exists(step["stop_file"]) and time.time() < end:
            c.poll(timeout_ms=100)
            parts = sorted(tp.partition for tp in c.assignment())
            if parts != seen:
                seen = parts
                sys.stderr.write("assignment " + json.dumps(parts) + "\n")
                sys.stderr.flush()
        c.close()
        return {"last": seen}
    raise ValueError(op)


def _meta(offset):
    from kafka.structs import OffsetAndMetadata
    try:
        return OffsetAndMetadata(offset, "kbatch-test", -1)
    except TypeError:  # 2.0.2: (offset, metadata)
        return OffsetAndMetadata(offset, "kbatch-test")


if __name__ == "__main__":
    main(run_step)
