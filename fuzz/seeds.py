"""The seed corpus: small batches of every kind, built with kbatch (itself tested against real-broker
vectors and the peers), so the fuzzer starts from valid structure."""
from __future__ import annotations

import struct
from pathlib import Path

import kbatch
from kbatch import Compression as C, TimestampType as T


def _batches() -> dict[str, bytes]:
    out = {}
    for magic in (0, 1, 2):
        for codec in C:
            if codec == C.ZSTD and magic < 2:
                continue
            for lat in (False, True) if magic else (False,):
                b = kbatch.BatchBuilder(magic=magic, compression=codec, base_offset=5,
                                        timestamp_type=T.LOG_APPEND_TIME if lat else T.CREATE_TIME,
                                        log_append_time=1_700_000_000_000 if lat else None)
                for i in range(3):
                    b.append(1_600_000_000_000 - i * 1000, b"k%d" % i, None if i == 1 else b"v" * (i + 1),
                             headers=[("h", b"x"), ("n", None)] if magic == 2 else ())
                out[f"m{magic}-{codec.name.lower()}{'-lat' if lat else ''}"] = b.build()
    ext = kbatch.BatchBuilder(timestamp_extended=True)
    ext.append(-1, b"a", b"neg-one")
    ext.append(None, b"b", b"none")
    ext.append(-2**62, b"c", b"ancient", tombstone=True)
    out["v2-extended"] = ext.build()
    txn = kbatch.BatchBuilder(producer_id=7, producer_epoch=1, base_sequence=0, is_transactional=True)
    txn.append(1, b"k", b"v")
    out["v2-txn"] = txn.build() + kbatch.build_end_txn_marker(producer_id=7, producer_epoch=1, commit=False,
                                                              coordinator_epoch=3, base_offset=1)
    out["mixed"] = out["m0-none"] + out["m1-gzip"] + out["m2-lz4"]
    out["truncated"] = out["m2-none"][:-5]
    return out


def write_seeds(corpus: Path) -> None:
    batches = _batches()
    (corpus / "batches").mkdir(parents=True, exist_ok=True)
    for name, data in batches.items():
        (corpus / "batches" / name).write_bytes(data)
    (corpus / "records").mkdir(parents=True, exist_ok=True)
    for name in ("m2-none", "v2-extended"):
        data = batches[name]
        count = struct.unpack_from(">i", data, 57)[0]
        base_ts = struct.unpack_from(">q", data, 27)[0]
        flags = 2 if name == "v2-extended" else 0
        (corpus / "records" / name).write_bytes(struct.pack(">hqh", count, base_ts, flags) + data[61:])
    (corpus / "varints").mkdir(parents=True, exist_ok=True)
    (corpus / "varints" / "mix").write_bytes(
        b"\x00\x01\x01\x02\x80\x01\x01\xff\xff\xff\xff\x0f\x00\x80\x80\x80\x80\x08")
    (corpus / "columns").mkdir(parents=True, exist_ok=True)
    (corpus / "validate").mkdir(parents=True, exist_ok=True)
    for name in ("mixed", "m2-zstd", "v2-extended", "v2-txn", "m1-snappy-lat"):
        (corpus / "columns" / name).write_bytes(batches[name])
        (corpus / "validate" / name).write_bytes(struct.pack(">qqh", 1_600_000_000_000, 10**9, 4) + batches[name])
    (corpus / "index_search").mkdir(parents=True, exist_ok=True)
    off = b"".join(struct.pack(">ii", i * 10, i * 4096) for i in range(8))
    tim = b"".join(struct.pack(">qi", 1_000 + i * 7, i * 10) for i in range(8))
    (corpus / "index_search" / "offset").write_bytes(b"\x00" + struct.pack(">q", 35) + off)
    (corpus / "index_search" / "time").write_bytes(b"\x01" + struct.pack(">q", 1_020) + tim)
    (corpus / "index_file").mkdir(parents=True, exist_ok=True)
    (corpus / "index_file" / "offset").write_bytes(b"\x00" + struct.pack(">q", 1035) + off + bytes(16))
    (corpus / "index_file" / "time").write_bytes(b"\x01" + struct.pack(">q", 1_020) + tim)
    (corpus / "grep").mkdir(parents=True, exist_ok=True)
    for name, needle, fields in (("m2-none", b"v", 0xF), ("v2-extended", b"neg", 0x2)):
        data = batches[name]
        count = struct.unpack_from(">i", data, 57)[0]
        (corpus / "grep" / name).write_bytes(bytes([len(needle) - 1, fields]) + struct.pack(">h", count) + needle
                                             + data[61:])
