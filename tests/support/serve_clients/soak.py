"""Soak driver for tests/test_serve_soak.py: one client (confluent-kafka, kafka-python or aiokafka)
reads every partition of one topic from offset 0 to the given end offsets by assignment and prints,
as one JSON object, per partition the record count, the sum and the sum of squares of the offsets
(a cheap checksum: a missing, repeated or foreign offset changes it) and how many offsets did not
follow the one before; plus what the client itself reported going wrong (error callbacks, errors
logged), and the time taken.

    python soak.py CLIENT BOOTSTRAP TOPIC '{"0": end0, "1": end1, ...}' DEADLINE_S

Every loop is bounded: by the deadline, and by a count of polls that brought nothing."""
import json
import logging
import sys
import time

MAX_IDLE_POLLS = 200  # consecutive empty polls (0.1-0.25 s each) before giving up


class Tally:
    def __init__(self, ends):
        self.ends = ends
        self.stats = {p: [0, 0, 0, 0] for p in ends}  # count, sum, sum of squares, out of order
        self.next = {p: 0 for p in ends}
        self.done = set(p for p, end in ends.items() if end == 0)

    def add(self, p, offset):
        s = self.stats[p]
        s[0] += 1
        s[1] += offset
        s[2] += offset * offset
        if offset != self.next[p]:
            s[3] += 1
        self.next[p] = offset + 1
        if offset + 1 >= self.ends[p]:
            self.done.add(p)

    def add_many(self, p, offsets):
        for o in offsets:
            self.add(p, o)

    def finished(self):
        return len(self.done) == len(self.ends)


class Errors(logging.Handler):
    """Collects what a client library logs at ERROR and above."""

    def __init__(self):
        super().__init__(logging.ERROR)
        self.messages = []

    def emit(self, record):
        if len(self.messages) < 50:
            self.messages.append(f"{record.name}: {record.getMessage()}"[:300])


def confluent(bootstrap, topic, tally, deadline):
    from confluent_kafka import Consumer, KafkaError, TopicPartition

    errors = []
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "kbatch-soak", "enable.auto.commit": False,
                  "enable.partition.eof": False, "error_cb": lambda e: errors.append(str(e)[:300])})
    c.assign([TopicPartition(topic, p, 0) for p in tally.ends])
    idle = 0
    try:
        while not tally.finished() and time.monotonic() < deadline and idle < MAX_IDLE_POLLS:
            msgs = c.consume(num_messages=10000, timeout=0.25)
            if not msgs:
                idle += 1
                continue
            idle = 0
            for m in msgs:
                err = m.error()
                if err is not None:
                    if err.code() != KafkaError._PARTITION_EOF:
                        errors.append(str(err)[:300])
                    continue
                tally.add(m.partition(), m.offset())
    finally:
        c.close()
    return errors


def kafka_python(bootstrap, topic, tally, deadline):
    from kafka import KafkaConsumer, TopicPartition

    handler = Errors()
    logging.getLogger("kafka").addHandler(handler)
    c = KafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False, group_id=None,
                      max_poll_records=10000)
    tps = [TopicPartition(topic, p) for p in tally.ends]
    c.assign(tps)
    c.seek_to_beginning(*tps)
    idle = 0
    try:
        while not tally.finished() and time.monotonic() < deadline and idle < MAX_IDLE_POLLS:
            got = c.poll(timeout_ms=250)
            if not got:
                idle += 1
                continue
            idle = 0
            for tp, records in got.items():
                tally.add_many(tp.partition, [r.offset for r in records])
    finally:
        c.close()
    return handler.messages


def aiokafka(bootstrap, topic, tally, deadline):
    import asyncio

    from aiokafka import AIOKafkaConsumer, TopicPartition

    handler = Errors()
    logging.getLogger("aiokafka").addHandler(handler)

    async def run():
        c = AIOKafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False, group_id=None,
                             auto_offset_reset="earliest")
        await c.start()
        try:
            tps = [TopicPartition(topic, p) for p in tally.ends]
            c.assign(tps)
            await c.seek_to_beginning(*tps)
            idle = 0
            while not tally.finished() and time.monotonic() < deadline and idle < MAX_IDLE_POLLS:
                got = await c.getmany(timeout_ms=250, max_records=10000)
                if not got:
                    idle += 1
                    continue
                idle = 0
                for tp, records in got.items():
                    tally.add_many(tp.partition, [r.offset for r in records])
        finally:
            await c.stop()

    asyncio.run(run())
    return handler.messages


CLIENTS = {"confluent-kafka": confluent, "kafka-python": kafka_python, "aiokafka": aiokafka}


def main():
    client, bootstrap, topic, ends, seconds = sys.argv[1:6]
    ends = {int(p): int(e) for p, e in json.loads(ends).items()}
    tally = Tally(ends)
    start = time.monotonic()
    try:
        errors = CLIENTS[client](bootstrap, topic, tally, start + float(seconds))
    except Exception as e:  # reported, not raised: the test decides
        errors = [f"{type(e).__name__}: {e}"]
    out = {"partitions": {str(p): s for p, s in tally.stats.items()}, "errors": errors,
           "finished": tally.finished(), "seconds": round(time.monotonic() - start, 3)}
    sys.stdout.write(json.dumps(out))
    sys.stdout.flush()


if __name__ == "__main__":
    main()
