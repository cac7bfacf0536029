"""aiokafka driver."""
import asyncio
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _plan import hexb, main, unhex  # noqa: E402

import aiokafka  # noqa: E402
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition  # noqa: E402


async def step_async(bootstrap, step):
    op = step["op"]
    if op == "version":
        return {"version": aiokafka.__version__}
    if op == "produce":
        p = AIOKafkaProducer(bootstrap_servers=bootstrap, acks=step.get("acks", "all"),
                             enable_idempotence=step.get("idempotent", False), compression_type=step.get("codec"),
                             request_timeout_ms=10000)
        await p.start()
        try:
            futs = [await p.send(step["topic"], key=unhex(k), value=unhex(v), partition=step["partition"],
                                 timestamp_ms=ts, headers=[(hk, unhex(hv)) for hk, hv in h])
                    for k, v, ts, h in step["records"]]
            try:
                return {"offsets": [(await f).offset for f in futs]}
            except Exception as e:
                return {"error": type(e).__name__, "errno": getattr(e, "errno", None)}
        finally:
            await p.stop()
    if op == "consume":
        c = AIOKafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False,
                             isolation_level=step.get("isolation", "read_uncommitted"))
        await c.start()
        try:
            tp = TopicPartition(step["topic"], step["partition"])
            c.assign([tp])
            c.seek(tp, step["offset"])
            recs = []
            while len(recs) < step["count"]:
                batch = await c.getmany(tp, timeout_ms=8000)
                if not batch:
                    break
                for m in batch[tp]:
                    recs.append([m.offset, m.timestamp, hexb(m.key), hexb(m.value),
                                 [[k, hexb(v)] for k, v in m.headers]])
            return {"records": recs[:step["count"]]}
        finally:
            await c.stop()
    if op == "times":
        c = AIOKafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False)
        await c.start()
        try:
            tp = TopicPartition(step["topic"], step["partition"])
            out = []
            for t in step["targets"]:
                r = (await c.offsets_for_times({tp: t}))[tp]
                out.append(None if r is None else [r.offset, r.timestamp])
            return {"answers": out}
        finally:
            await c.stop()
    if op == "group":
        c = AIOKafkaConsumer(step["topic"], group_id=step["group"], bootstrap_servers=bootstrap,
                             auto_offset_reset="earliest", enable_auto_commit=False, session_timeout_ms=10000,
                             heartbeat_interval_ms=1000)
        await c.start()
        try:
            offsets = []
            while len(offsets) < step["count"]:
                m = await asyncio.wait_for(c.getone(), 10)
                offsets.append(m.offset)
            tp = TopicPartition(step["topic"], 0)
            if offsets:
                await c.commit({tp: offsets[-1] + 1})
            return {"offsets": offsets, "committed": await c.committed(tp)}
        finally:
            await c.stop()
    raise ValueError(op)


def run_step(bootstrap, step):
    return asyncio.run(step_async(bootstrap, step))


if __name__ == "__main__":
    main(run_step)
