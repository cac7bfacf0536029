"""Tiered-storage layouts built from a broker partition directory: Kafka's LocalTieredStorage and
Aiven's tiered-storage-for-apache-kafka (untransformed), as kbatch.log.layout reads them."""
from __future__ import annotations

import json
import os
import shutil


def _bases(broker_dir: str) -> list[int]:
    return sorted(int(n[:20]) for n in os.listdir(broker_dir) if n.endswith(".log"))


def _uuid(n: int) -> str:
    import base64

    return base64.urlsafe_b64encode(bytes([n]) * 16).decode().rstrip("=")


def make_local_tiered(broker_dir: str, root: str, topic: str, partition: int, upto: int | None = None) -> str:
    """Kafka's LocalTieredStorage layout of a broker partition's segments (the first `upto` of them:
    called again with a larger `upto`, the remote tier gains the next segments, as uploads add them)."""
    d = os.path.join(root, f"{topic}-{partition}-{_uuid(1)}")
    os.makedirs(d, exist_ok=True)
    for i, base in enumerate(_bases(broker_dir)[:upto]):
        for suffix in (".log", ".index", ".timeindex", ".txnindex"):
            src = os.path.join(broker_dir, f"{base:020d}{suffix}")
            if os.path.exists(src):
                shutil.copy(src, os.path.join(d, f"{base}-{_uuid(10 + i)}{suffix}"))
        open(os.path.join(d, f"{base}-{_uuid(10 + i)}.snapshot"), "wb").close()
        with open(os.path.join(d, f"{base}-{_uuid(10 + i)}.leader_epoch_checkpoint"), "w") as f:
            f.write("0\n0\n")
    return d


def make_aiven(broker_dir: str, root: str, topic: str, partition: int, upto: int | None = None,
               **manifest_extra) -> str:
    """Aiven tiered-storage-for-apache-kafka's layout, segments stored untransformed (the first
    `upto` segments, as make_local_tiered)."""
    d = os.path.join(root, f"{topic}-{_uuid(2)}", str(partition))
    os.makedirs(d, exist_ok=True)
    for i, base in enumerate(_bases(broker_dir)[:upto]):
        stem = os.path.join(d, f"{base:020d}-{_uuid(20 + i)}")
        src = os.path.join(broker_dir, f"{base:020d}")
        shutil.copy(src + ".log", stem + ".log")
        blobs, ranges, pos = [], {}, 0
        for kind, suffix in (("offset", ".index"), ("timestamp", ".timeindex"), ("producerSnapshot", None),
                             ("leaderEpoch", None), ("transaction", ".txnindex")):
            data = open(src + suffix, "rb").read() if suffix and os.path.exists(src + suffix) else b""
            if kind == "leaderEpoch":
                data = b"0\n0\n"
            if kind == "transaction" and not data:
                ranges[kind] = None
                continue
            ranges[kind] = {"position": pos, "size": len(data)}
            blobs.append(data)
            pos += len(data)
        with open(stem + ".indexes", "wb") as f:
            f.write(b"".join(blobs))
        size = os.path.getsize(stem + ".log")
        manifest = {"version": "1", "chunkIndex": {"type": "fixed", "originalChunkSize": 4194304,
                                                   "originalFileSize": size, "transformedChunkSize": 4194304,
                                                   "finalTransformedChunkSize": size % 4194304 or 4194304},
                    "segmentIndexes": ranges, "compression": False, **manifest_extra}
        with open(stem + ".rsm-manifest", "w") as f:
            json.dump(manifest, f)
    return d
