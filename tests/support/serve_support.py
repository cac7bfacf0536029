"""Helpers for the kbatch serve tests: a raw Kafka protocol client over a socket (requests encoded
with kafka-python's schema classes), kio as the second codec, and topic directories with known data."""
from __future__ import annotations

import io
import os
import socket
import struct
import time

import kbatch
from kbatch import _wire as W
from kbatch.log.index import AbortedTxn, TransactionIndex

NOW = int(time.time() * 1000)
TIMEOUT = 10.0


def request_class(api_key: int):
    from kbatch.server.protocol import APIS

    return APIS[api_key].request


class RawClient:
    """One connection; send(request object or raw frame) and read responses, all with timeouts."""

    def __init__(self, bootstrap: str, timeout: float = TIMEOUT):
        host, port = bootstrap.rsplit(":", 1)
        self.sock = socket.create_connection((host, int(port)), timeout=timeout)
        self.correlation_id = 0

    def close(self):
        self.sock.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def send_frame(self, payload: bytes) -> None:
        self.sock.sendall(payload)

    def request_bytes(self, req, version: int, client_id="kbatch-test") -> bytes:
        self.correlation_id += 1
        req.with_header(correlation_id=self.correlation_id, client_id=client_id)
        return bytes(req.encode(version=version, header=True, framed=True))

    def read_frame(self) -> bytes:
        head = self._read_exactly(4)
        (size,) = struct.unpack(">i", head)
        return self._read_exactly(size)

    def _read_exactly(self, n: int) -> bytes:
        buf = bytearray()
        while len(buf) < n:
            chunk = self.sock.recv(n - len(buf))
            if not chunk:
                raise ConnectionError(f"closed after {len(buf)} of {n} bytes")
            buf += chunk
        return bytes(buf)

    def call(self, req, version: int):
        """Send `req` at `version` and decode the answer with kafka-python: (response, raw body)."""
        self.send_frame(self.request_bytes(req, version))
        frame = self.read_frame()
        api = req.API_KEY
        flexible = version >= _first_flexible(api) and api != 18
        (corr,) = struct.unpack_from(">i", frame, 0)
        assert corr == self.correlation_id
        body = frame[5:] if flexible else frame[4:]
        if flexible:
            assert frame[4] == 0, "response header v1 carries no tagged fields"
        resp_cls = _response_class(api)
        return resp_cls.decode(body, version=version), body

    def closed_by_server(self) -> bool:
        """True when the server closed this connection (EOF within the timeout)."""
        try:
            return self.sock.recv(1) == b""
        except (ConnectionResetError, BrokenPipeError):
            return True


def _first_flexible(api_key: int) -> int:
    from kbatch.server.protocol import APIS

    return APIS[api_key].first_flexible


def _response_class(api_key: int):
    from kbatch.server.protocol import APIS

    return APIS[api_key].response


def kio_decode(api_key: int, version: int, kind: str, body: bytes):
    """Decode a body with kio; returns (object, bytes kio writes back for it)."""
    import kio.serial as ks
    from kio.index import load_payload_module
    from kio.static.constants import EntityType

    etype = EntityType.response if kind == "response" else EntityType.request
    mod = load_payload_module(api_key, version, etype)
    cls = next(getattr(mod, n) for n in dir(mod) if getattr(getattr(mod, n), "__type__", None) == etype
               and getattr(getattr(mod, n), "__api_key__", None) == api_key)
    obj, end = ks.entity_reader(cls)(bytes(body), 0)
    assert end == len(body), f"kio read {end} of {len(body)} bytes"
    out = io.BytesIO()
    ks.entity_writer(cls)(out, obj)
    return obj, out.getvalue()


# ------------------------------------------------------------------------------------ data
def write_topic(root, topic="t", partition=0, batches=4, per_batch=5, codecs=None, start_ts=NOW - 3_600_000,
                segment_bytes=None, step_ms=1000):
    """A partition directory written through kbatch.Log: `batches` batches of `per_batch` records,
    codecs cycling, timestamps start_ts + i * step_ms. Returns the records [(offset, ts, key, value)]."""
    path = os.path.join(root, f"{topic}-{partition}")
    cfg = kbatch.LogConfig(segment_bytes=segment_bytes or 1 << 30)
    log = kbatch.Log.create(path, cfg, now_ms=NOW)
    codecs = codecs or [W.Compression.NONE, W.Compression.GZIP, W.Compression.SNAPPY, W.Compression.LZ4,
                        W.Compression.ZSTD]
    records, n = [], 0
    try:
        for b in range(batches):
            bb = kbatch.BatchBuilder(magic=2, compression=codecs[b % len(codecs)], timestamp_extended=False)
            for _ in range(per_batch):
                ts = start_ts + n * step_ms
                key, value = b"k%d" % n, b"value-%d-" % n + bytes(range(n % 50))
                bb.append(ts, key, value, headers=[("h", b"%d" % n)])
                records.append((n, ts, key, value))
                n += 1
            log.append(bb.build(), now_ms=NOW)
    finally:
        log.close()
    return records


def write_transactions(root, topic="tx", partition=0):
    """committed txn (offsets 0-1 + marker 2), aborted txn (3-4 + marker 5), plain 6, open txn from 7.
    The abort is listed in .txnindex as a broker writes it (by Log.append). Returns the offsets a read_committed
    consumer sees below the last stable offset (7)."""
    path = os.path.join(root, f"{topic}-{partition}")
    log = kbatch.Log.create(path, kbatch.LogConfig(), now_ms=NOW)
    pid_a, pid_b, pid_c = 1000, 1001, 1002

    def txn_batch(pid, seq, n, transactional=True):
        b = kbatch.BatchBuilder(magic=2, producer_id=pid, producer_epoch=0, base_sequence=seq,
                                is_transactional=transactional)
        for i in range(n):
            b.append(NOW, b"k", b"p%d-%d" % (pid, seq + i))
        return b.build()

    try:
        log.append(txn_batch(pid_a, 0, 2), now_ms=NOW, from_client=False)
        log.append(kbatch.build_end_txn_marker(producer_id=pid_a, producer_epoch=0, commit=True, coordinator_epoch=0,
                                               timestamp=NOW), now_ms=NOW, from_client=False)
        log.append(txn_batch(pid_b, 0, 2), now_ms=NOW, from_client=False)
        log.append(kbatch.build_end_txn_marker(producer_id=pid_b, producer_epoch=0, commit=False, coordinator_epoch=0,
                                               timestamp=NOW), now_ms=NOW, from_client=False)
        plain = kbatch.BatchBuilder(magic=2)
        plain.append(NOW, b"k", b"plain")
        log.append(plain.build(), now_ms=NOW, from_client=False)
        log.append(txn_batch(pid_c, 0, 2), now_ms=NOW, from_client=False)
    finally:
        log.close()
    # Log.append of the ABORT marker wrote the .txnindex entry, as a broker does (last stable offset
    # 6: no other transaction was open at the marker)
    assert TransactionIndex.open(os.path.join(path, "00000000000000000000.txnindex")).entries == [
        AbortedTxn(pid_b, 3, 5, 6)]
    return [0, 1, 6]


def log_records(path):
    """[(offset, timestamp, key, value, headers)] of every data record in a partition directory."""
    out = []
    log = kbatch.Log.open(path)
    try:
        for b in log.batches():
            if b.is_control:
                continue
            for r in b:
                out.append((r.offset, r.timestamp, None if r.key is None else bytes(r.key),
                            None if r.value is None else bytes(r.value),
                            [(k, None if v is None else bytes(v)) for k, v in r.headers]))
    finally:
        log.close()
    return out


def write_broker_dir(root):
    """What a broker leaves: meta.properties, partition.metadata with a topic id, batches stamped
    with leader epoch 4 and a leader-epoch-checkpoint."""
    import base64
    import pathlib
    import uuid

    root = pathlib.Path(root)

    (root / "meta.properties").write_text("version=1\nnode.id=3\ncluster.id=Kb4tchTestClusterId0001\n")
    write_topic(str(root), "b", 0, batches=2, codecs=[W.Compression.NONE, W.Compression.GZIP])
    path = root / "b-0"
    log = kbatch.Log.open(str(path), kbatch.LogConfig(), writable=True)
    try:
        log.partition_leader_epoch = 4
        b = kbatch.BatchBuilder(magic=2, timestamp_extended=False)
        b.append(NOW, b"k", b"epoch-4")
        log.append(b.build(), now_ms=NOW)
    finally:
        log.close()
    tid = uuid.UUID("6ba7b810-9dad-11d1-80b4-00c04fd430c8")
    (path / "partition.metadata").write_text(
        f"version: 0\ntopic_id: {base64.urlsafe_b64encode(tid.bytes).decode().rstrip('=')}\n")
    (path / "leader-epoch-checkpoint").write_text("0\n2\n0 0\n4 10\n")
    return tid


def write_legacy(root, topic="legacy", partition=0, magic=1):
    """A partition of legacy message sets as an old broker wrote them (magic 0 or 1, plain and gzip),
    indexed by kbatch.rebuild_indexes. Returns [(offset, timestamp or None, key, value)]."""
    path = os.path.join(root, f"{topic}-{partition}")
    os.makedirs(path)
    out, data, offset = [], b"", 0
    for codec in (W.Compression.NONE, W.Compression.GZIP, W.Compression.NONE):
        b = kbatch.BatchBuilder(magic=magic, compression=codec, base_offset=offset)
        for _ in range(3):
            ts = NOW - 10_000 + offset
            b.append(ts, b"lk%d" % offset, b"legacy-%d" % offset)
            out.append((offset, ts if magic else None, b"lk%d" % offset, b"legacy-%d" % offset))
            offset += 1
        data += b.build()
    with open(os.path.join(path, "00000000000000000000.log"), "wb") as f:
        f.write(data)
    kbatch.rebuild_indexes(path)
    return out


BROKER_DATA = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "data", "brokers")


def broker_data_copy(name, dst):
    """A copy of tests/data/brokers/<name> (real broker data directories) with its .xz files
    decompressed, as tests/log/test_broker_data.py uses them."""
    import lzma
    import shutil

    shutil.copytree(os.path.join(BROKER_DATA, name), dst)
    for dirpath, _dirs, files in os.walk(dst):
        for f in files:
            if f.endswith(".xz"):
                src = os.path.join(dirpath, f)
                with open(src, "rb") as fh:
                    data = lzma.decompress(fh.read())
                with open(src[:-3], "wb") as fh:
                    fh.write(data)
                os.unlink(src)
    return dst
