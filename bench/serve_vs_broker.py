"""kbatch serve against a real Kafka broker (4.4.0 by default), same client (confluent-kafka), same
data, same machine: consume (records/s, MB/s of keys+values), produce (acks=all, idempotent) and
offsetsForTimes latency (p50), with the CPU seconds of the server and of the client beside the
wall time.

The data is produced into the broker (RECORDS records over 4 partitions), the broker is stopped
cleanly and its log directory copied; `kbatch serve --read-only` serves the copy, the broker is
started again on its own: both serve the same bytes. Each measurement checks its answer before it
is timed: every record read once per partition with the same CRC of the values from both, every
offsetsForTimes answer of kbatch serve equal to the broker's for the same target, every produced
record acknowledged. Rounds alternate between the two servers (the machine is shared: the ratio of
two figures taken side by side drifts much less than either figure).

Run: .venv/bin/python bench/serve_vs_broker.py [--records 2000000] [--produce 500000] [--rounds 3]
     [--profile serve.prof]   (kbatch serve under cProfile for the consume rounds; top entries printed)
Prints a markdown table (bench/results-serve.md, "Against a real broker").
"""
from __future__ import annotations

import argparse
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
import zlib
from pathlib import Path

import confluent_kafka as ck
from confluent_kafka.admin import AdminClient, NewTopic

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))
os.environ.setdefault("KBATCH_KAFKA_HEAP", "1g")  # Kafka's own default heap (kafka-server-start.sh)

from support.kafka_broker import KafkaBroker, kafka_dist  # noqa: E402

PARTITIONS = 4
T0 = 1_700_000_000_000
VALUE = 100
PRODUCER = {"linger.ms": 5, "batch.size": 1_000_000, "acks": "all", "enable.idempotence": True,
            "compression.type": "none", "queue.buffering.max.messages": 1_000_000}


def key_value(i: int) -> tuple[bytes, bytes]:
    return b"key-%010d" % i, (b"%010d" % i) * (VALUE // 10)


def cpu_of(pid: int) -> float:
    """User + system CPU seconds of a process (all its threads)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def self_cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)  # this process: the client and librdkafka's threads
    return r.ru_utime + r.ru_stime


class Serve:
    """`kbatch serve DIR` in a subprocess (optionally under cProfile)."""

    def __init__(self, directory: Path, *args: str, profile: str | None = None) -> None:
        cmd = [sys.executable]
        if profile:
            cmd += ["-m", "cProfile", "-o", profile]
            cmd += [str(Path(sys.executable).parent / "kbatch")]
        else:
            cmd += ["-m", "kbatch.cli"]
        cmd += ["serve", str(directory), "--listen", "127.0.0.1:0", *args]
        self.proc = subprocess.Popen(cmd, stderr=subprocess.PIPE, text=True)
        self.bootstrap = None
        end = time.time() + 120
        import re

        while time.time() < end and self.bootstrap is None:
            m = re.search(r" on (127\.0\.0\.1:\d+)", self.proc.stderr.readline())
            self.bootstrap = m.group(1) if m else None
        assert self.bootstrap, "kbatch serve did not start"
        import threading

        # its log goes on being read, so a full pipe never blocks the server
        threading.Thread(target=self.proc.stderr.read, daemon=True).start()

    @property
    def pid(self) -> int:
        return self.proc.pid

    def stop(self) -> None:
        self.proc.terminate()
        self.proc.wait(120)


def produce(bootstrap: str, topic: str, n: int, start: int = 0) -> dict[str, float]:
    p = ck.Producer(dict(PRODUCER, **{"bootstrap.servers": bootstrap}))
    state = {"acked": 0, "errors": 0}

    def done(err, msg):
        if err:
            state["errors"] += 1
        else:
            state["acked"] += 1

    for i in range(start, start + n):
        k, v = key_value(i)
        while True:
            try:
                p.produce(topic, key=k, value=v, partition=i % PARTITIONS, timestamp=T0 + i, on_delivery=done)
                break
            except BufferError:
                p.poll(0.01)
    assert p.flush(300) == 0
    return state


def consume(bootstrap: str, topic: str, total: int, check: bool = False) -> dict[str, object]:
    c = ck.Consumer({"bootstrap.servers": bootstrap, "group.id": f"bench-{uuid.uuid4()}", "enable.auto.commit": False})
    c.assign([ck.TopicPartition(topic, p, 0) for p in range(PARTITIONS)])
    n, counts, crc = 0, [0] * PARTITIONS, [0] * PARTITIONS
    end = time.time() + 600
    while n < total and time.time() < end:
        msgs = c.consume(10000, 5.0)
        for m in msgs:
            if m.error():
                raise RuntimeError(str(m.error()))
            if check:
                p = m.partition()
                counts[p] += 1
                crc[p] = zlib.crc32(m.value(), crc[p])
        n += len(msgs)
    c.close()
    return {"n": n, "counts": counts, "crc": crc}


def consume_kafka_python(bootstrap: str, topic: str, total: int) -> dict[str, object]:
    """The same read with kafka-python 3 (records decoded in Python): counts per partition."""
    from kafka import KafkaConsumer, TopicPartition

    c = KafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False, group_id=None,
                      max_partition_fetch_bytes=1 << 20, fetch_max_bytes=50 << 20)
    c.assign([TopicPartition(topic, p) for p in range(PARTITIONS)])
    for p in range(PARTITIONS):
        c.seek(TopicPartition(topic, p), 0)
    n, counts = 0, [0] * PARTITIONS
    end = time.time() + 900
    while n < total and time.time() < end:
        for tp, records in c.poll(timeout_ms=5000, max_records=100000).items():
            counts[tp.partition] += len(records)
            n += len(records)
    c.close()
    return {"n": n, "counts": counts}


def timed(fn, server_pid: int, *args):
    w0, c0, s0 = time.perf_counter(), self_cpu(), cpu_of(server_pid)
    out = fn(*args)
    return out, time.perf_counter() - w0, self_cpu() - c0, cpu_of(server_pid) - s0


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--records", type=int, default=2_000_000)
    ap.add_argument("--produce", type=int, default=500_000)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--lookups", type=int, default=200)
    ap.add_argument("--version", default="4.4.0")
    ap.add_argument("--profile", default=None)
    ap.add_argument("--kafka-python", type=int, default=0, dest="kafka_python",
                    help="rounds of the same read with kafka-python 3 (0: none)")
    ap.add_argument("--py-spy", default=None, dest="py_spy",
                    help="sample kbatch serve with py-spy during the consume and produce rounds (collapsed stacks)")
    args = ap.parse_args()
    work = Path(tempfile.mkdtemp(prefix="serve-vs-broker-"))
    dist = kafka_dist(args.version)
    broker = KafkaBroker(dist, work / "broker", config={"num.partitions": str(PARTITIONS),
                                                         "auto.create.topics.enable": "true"})
    rows = []
    try:
        broker.start()
        admin = AdminClient({"bootstrap.servers": broker.bootstrap})
        for f in admin.create_topics([NewTopic("data", PARTITIONS, 1)]).values():
            f.result(60)
        t = time.perf_counter()
        state = produce(broker.bootstrap, "data", args.records)
        assert state == {"acked": args.records, "errors": 0}, state
        print(f"loaded {args.records} records into Kafka {dist.version} in {time.perf_counter() - t:.1f} s",
              file=sys.stderr)
        broker.stop()
        served = work / "served"
        served.mkdir()
        for p in range(PARTITIONS):
            shutil.copytree(broker.partition_dir("data", p), served / f"data-{p}")
        shutil.copy(broker.log_dir / "meta.properties", served / "meta.properties")
        broker.start()
        serve = Serve(served, "--read-only", profile=args.profile)
        writable_dir = work / "writable"
        writable_dir.mkdir()
        wserve = Serve(writable_dir, "--writable", "--auto-create-topics", "--num-partitions", str(PARTITIONS),
                       "--group-initial-rebalance-delay-ms", "0")
        targets = {"kbatch serve": (serve.bootstrap, serve.pid), f"Kafka {dist.version}": (broker.bootstrap,
                                                                                          broker.proc.pid)}
        # check: both give every record once, with the same values
        checked = {name: consume(b, "data", args.records, check=True) for name, (b, _) in targets.items()}
        expected = [args.records // PARTITIONS + (1 if p < args.records % PARTITIONS else 0) for p in range(PARTITIONS)]
        for name, got in checked.items():
            assert got["n"] == args.records and got["counts"] == expected, (name, got)
        assert len({tuple(g["crc"]) for g in checked.values()}) == 1, "the two servers gave different values"
        bytes_total = sum(len(k) + len(v) for k, v in (key_value(i) for i in range(args.records)))
        results: dict[str, dict[str, list[tuple[float, float, float]]]] = {n: {} for n in targets}
        spies = []
        if args.py_spy:
            import signal

            for pid, suffix in ((serve.pid, "consume"), (wserve.pid, "produce")):
                spies.append(subprocess.Popen(["py-spy", "record", "--pid", str(pid), "--nonblocking", "--idle",
                                               "--format", "raw", "--rate", "250", "-o", f"{args.py_spy}.{suffix}.txt"],
                                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
        for r in range(args.rounds):
            for name, (b, pid) in targets.items():
                out, wall, ccpu, scpu = timed(consume, pid, b, "data", args.records)
                assert out["n"] == args.records
                results[name].setdefault("consume", []).append((wall, ccpu, scpu))
        for r in range(args.kafka_python):
            for name, (b, pid) in targets.items():
                out, wall, ccpu, scpu = timed(consume_kafka_python, pid, b, "data", args.records)
                assert out["n"] == args.records and out["counts"] == expected, (name, out)
                results[name].setdefault("consume (kafka-python)", []).append((wall, ccpu, scpu))
        # offsetsForTimes: the same targets, the same answers, latency per call
        import random

        rng = random.Random(7)
        queries = [(rng.randrange(PARTITIONS), T0 + rng.randrange(args.records)) for _ in range(args.lookups)]
        lat: dict[str, list[float]] = {n: [] for n in targets}
        answers: dict[str, list[int]] = {n: [] for n in targets}
        consumers = {n: ck.Consumer({"bootstrap.servers": b, "group.id": "times"}) for n, (b, _) in targets.items()}
        for name, c in consumers.items():
            c.offsets_for_times([ck.TopicPartition("data", 0, T0)], timeout=30)  # connected, metadata known
        for p, ts in queries:
            for name, c in consumers.items():
                w = time.perf_counter()
                got = c.offsets_for_times([ck.TopicPartition("data", p, ts)], timeout=30)[0]
                lat[name].append(time.perf_counter() - w)
                assert not got.error, got.error
                answers[name].append(got.offset)
        for c in consumers.values():
            c.close()
        first, second = answers.values()
        assert first == second, "offsetsForTimes answers differ between kbatch serve and the broker"
        # produce: acks=all, idempotent, into a new 4-partition topic each round
        ptargets = {"kbatch serve": (wserve.bootstrap, wserve.pid), f"Kafka {dist.version}": (broker.bootstrap,
                                                                                             broker.proc.pid)}
        for r in range(args.rounds):
            for name, (b, pid) in ptargets.items():
                topic = f"produce-{r}"
                if name.startswith("Kafka"):
                    for f in admin.create_topics([NewTopic(topic, PARTITIONS, 1)]).values():
                        f.result(60)
                else:
                    m = AdminClient({"bootstrap.servers": b}).list_topics(topic, timeout=30)  # auto-created
                    assert len(m.topics[topic].partitions) == PARTITIONS
                out, wall, ccpu, scpu = timed(produce, pid, b, topic, args.produce)
                assert out == {"acked": args.produce, "errors": 0}, out
                results[name].setdefault("produce", []).append((wall, ccpu, scpu))
        for spy in spies:
            spy.send_signal(signal.SIGINT)
            spy.wait(60)
        serve.stop()
        wserve.stop()
        pbytes = sum(len(k) + len(v) for k, v in (key_value(i) for i in range(args.produce)))
        names = list(targets)
        print(f"\n### Against a real broker: confluent-kafka {ck.__version__} (librdkafka {ck.libversion()[0]}), Python client loop, "
              f"{args.records:,} records of {VALUE + 14} bytes over {PARTITIONS} partitions, best of "
              f"{args.rounds} rounds\n")
        print("| measure | server | wall (best) | wall (median) | rate (best) | server CPU s | client CPU s |")
        print("|---|---|---:|---:|---|---:|---:|")
        best = {}
        measures = [("consume", args.records, bytes_total), ("produce", args.produce, pbytes)]
        if args.kafka_python:
            measures.insert(1, ("consume (kafka-python)", args.records, bytes_total))
        for what, n_rec, nbytes in measures:
            for name in names:
                runs = results[name][what]
                b = min(runs)
                best[(what, name)] = b[0]
                med = statistics.median(r[0] for r in runs)
                print(f"| {what} | {name} | {b[0]:.2f} s | {med:.2f} s | {n_rec / b[0] / 1e6:.2f} M rec/s, "
                      f"{nbytes / b[0] / 1e6:.0f} MB/s | {b[2]:.2f} | {b[1]:.2f} |")
        for name in names:
            xs = sorted(lat[name])
            print(f"| offsetsForTimes | {name} | p50 {xs[len(xs) // 2] * 1e6:.0f} µs | p90 "
                  f"{xs[int(len(xs) * 0.9)] * 1e6:.0f} µs | {len(xs)} lookups, answers equal | | |")
        k, b = names
        print("\n| measure | kbatch serve vs the broker (broker time / serve time; > 1: serve is faster) | target |")
        print("|---|---:|---|")
        print(f"| consume | **{best[('consume', b)] / best[('consume', k)]:.2f}x** | >= 1.0x |")
        if args.kafka_python:
            kp = "consume (kafka-python)"
            print(f"| {kp} | **{best[(kp, b)] / best[(kp, k)]:.2f}x** | >= 1.0x |")
        print(f"| produce | **{best[('produce', b)] / best[('produce', k)]:.2f}x** | >= 0.8x |")
        p50 = {n: sorted(lat[n])[len(lat[n]) // 2] for n in names}
        print(f"| offsetsForTimes p50 | **{p50[b] / p50[k]:.2f}x** | >= 1.0x (p50 <= the broker's) |")
        if args.profile:
            import pstats

            pstats.Stats(args.profile).sort_stats("cumulative").print_stats(40)
    finally:
        broker.close()
        for s in ("serve", "wserve"):
            obj = locals().get(s)
            if obj is not None and obj.proc.poll() is None:
                obj.proc.kill()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
