"""confluent-kafka (librdkafka) driver."""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _plan import hexb, main, unhex  # noqa: E402

import confluent_kafka  # noqa: E402
from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition  # noqa: E402


def run_step(bootstrap, step):
    op = step["op"]
    if op == "version":
        return {"version": confluent_kafka.version()[0], "librdkafka": confluent_kafka.libversion()[0]}
    if op == "produce":
        conf = {"bootstrap.servers": bootstrap, "acks": str(step.get("acks", "all")),
                "enable.idempotence": step.get("idempotent", False), "compression.type": step.get("codec") or "none",
                "message.timeout.ms": 15000, "linger.ms": 5}
        if step.get("expect_error"):
            conf["retries"] = 0
        p = Producer(conf)
        results = [None] * len(step["records"])

        def cb(i):
            def done(err, msg):
                results[i] = {"error": err.name(), "code": err.code()} if err else msg.offset()
            return done

        for i, (key, value, ts, headers) in enumerate(step["records"]):
            p.produce(step["topic"], key=unhex(key), value=unhex(value), partition=step["partition"], timestamp=ts,
                      headers=[(k, unhex(v)) for k, v in headers], on_delivery=cb(i))
        p.flush(20)
        errors = [r for r in results if isinstance(r, dict) or r is None]
        if errors:
            return {"error": errors[0]["error"] if errors[0] else "undelivered",
                    "code": errors[0]["code"] if errors[0] else None}
        return {"offsets": results}
    if op == "consume":
        c = Consumer({"bootstrap.servers": bootstrap, "group.id": "unused-assign", "enable.auto.commit": False,
                      "isolation.level": step.get("isolation", "read_uncommitted"),
                      "check.crcs": bool(step.get("check_crcs", False))})  # librdkafka's default: off
        c.assign([TopicPartition(step["topic"], step["partition"], step["offset"])])
        recs, idle = [], 0
        while len(recs) < step["count"] and idle < 40:
            m = c.poll(0.25)
            if m is None:
                idle += 1
                continue
            if m.error():
                if m.error().code() == KafkaError._PARTITION_EOF:
                    continue
                return {"error": m.error().name()}
            recs.append([m.offset(), m.timestamp()[1], hexb(m.key()), hexb(m.value()),
                         [[k, hexb(v)] for k, v in (m.headers() or [])]])
        c.close()
        return {"records": recs}
    if op == "times":
        c = Consumer({"bootstrap.servers": bootstrap, "group.id": "unused-times"})
        out = []
        for t in step["targets"]:
            [r] = c.offsets_for_times([TopicPartition(step["topic"], step["partition"], t)], timeout=10)
            out.append(None if r.offset < 0 else [r.offset, t])
        c.close()
        return {"answers": out}
    if op == "group":
        c = Consumer({"bootstrap.servers": bootstrap, "group.id": step["group"], "auto.offset.reset": "earliest",
                      "enable.auto.commit": False, "session.timeout.ms": 10000})
        c.subscribe([step["topic"]])
        offsets, idle = [], 0
        while len(offsets) < step["count"] and idle < 60:
            m = c.poll(0.25)
            if m is None or m.error():
                idle += 1
                continue
            offsets.append(m.offset())
        if offsets:
            c.commit(offsets=[TopicPartition(step["topic"], 0, offsets[-1] + 1)], asynchronous=False)
        [committed] = c.committed([TopicPartition(step["topic"], 0)], timeout=10)
        c.close()
        return {"offsets": offsets, "committed": committed.offset}
    if op == "rebalance":
        import time

        def member():
            c = Consumer({"bootstrap.servers": bootstrap, "group.id": step["group"], "auto.offset.reset": "earliest",
                          "enable.auto.commit": False, "session.timeout.ms": 10000, "heartbeat.interval.ms": 500,
                          "partition.assignment.strategy": step.get("strategy") or "range"})
            c.subscribe([step["topic"]])
            return c

        def poll_until(cs, done, seconds=30):
            end = time.time() + seconds
            while time.time() < end:
                for c in cs:
                    c.poll(0.1)
                if done():
                    return True
            return False

        a, b = member(), member()
        both = poll_until([a, b], lambda: len(a.assignment()) == 1 and len(b.assignment()) == 1)
        split = sorted([[tp.partition for tp in a.assignment()], [tp.partition for tp in b.assignment()]])
        b.close()
        alone = poll_until([a], lambda: len(a.assignment()) == 2)
        out = {"split": split, "after_leave": sorted(tp.partition for tp in a.assignment()), "ok": [both, alone]}
        a.close()
        return out
    raise ValueError(op)


if __name__ == "__main__":
    main(run_step)
