"""A typed topic for the Parquet writer's tests (tests/tables/test_parquet_options.py and the Spark
reader's check of the same files): `orders-0`, Avro values of ORDER (schema id 1, subject
orders-value, from a `_schemas` partition) whose columns span what kbatch.tables.writer_options
decides on: an enum and a few prices (dictionary), sequential ids and timestamps (delta-packed),
unique strings and random longs (PLAIN), a boolean, an array and a nullable nested record."""
from __future__ import annotations

import decimal
import os
from typing import Any

import kbatch

from .schemas import SchemasTopic, avro_value

NOW = 1_700_000_000_000
ORDER = {"type": "record", "name": "Order", "namespace": "t", "fields": [
    {"name": "id", "type": "long"}, {"name": "customer", "type": "string"},
    {"name": "status", "type": {"type": "enum", "name": "Status", "symbols": ["NEW", "PAID", "SHIPPED"]}},
    {"name": "price", "type": {"type": "bytes", "logicalType": "decimal", "precision": 9, "scale": 2}},
    {"name": "noise", "type": "long"}, {"name": "paid", "type": "boolean"},
    {"name": "ts", "type": {"type": "long", "logicalType": "timestamp-millis"}},
    {"name": "tags", "type": {"type": "array", "items": "string"}},
    {"name": "ship", "type": ["null", {"type": "record", "name": "Address", "fields": [
        {"name": "city", "type": "string"}, {"name": "zip", "type": "string"}]}], "default": None}]}


def order(i: int) -> dict[str, Any]:
    return {"id": i, "customer": f"c-{i:06d}", "status": ("NEW", "PAID", "SHIPPED")[i % 3],
            "price": decimal.Decimal(i % 50) / 4, "noise": (i * 0x9E3779B97F4A7C15) % (1 << 62), "paid": i % 2 == 0,
            "ts": NOW + 7 * i, "tags": [f"t{i % 4}"] * (i % 3),
            "ship": {"city": f"city-{i % 5}", "zip": f"{i:05d}"} if i % 2 else None}


def orders_log(root: str, n: int) -> tuple[str, str]:
    """(log directory holding orders-0 with n records in 500-record batches, its `_schemas` path)."""
    sr = os.path.join(root, "sr", "_schemas-0")
    s = SchemasTopic(sr)
    s.register("orders-value", 1, 1, ORDER)
    s.close()
    logs = os.path.join(root, "logs")
    log = kbatch.Log.create(os.path.join(logs, "orders-0"), kbatch.LogConfig(segment_bytes=1 << 30), now_ms=NOW)
    try:
        for lo in range(0, n, 500):
            b = kbatch.BatchBuilder()
            for i in range(lo, min(n, lo + 500)):
                b.append(NOW + i, b"k%d" % i, avro_value(1, ORDER, order(i)))
            log.append(b.build(), now_ms=NOW, from_client=False)
    finally:
        log.close()
    return logs, sr
