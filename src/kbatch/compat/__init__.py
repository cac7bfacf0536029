"""Drop-in accelerators for the record classes of the Python Kafka clients.

    import kbatch.compat
    kbatch.compat.install("kafka-python")   # or "aiokafka"
    ...                                     # the client's consumer and producer now run on kbatch
    kbatch.compat.uninstall("kafka-python") # the client's own classes are back

`kbatch.compat.kafka_python` and `kbatch.compat.aiokafka` hold classes with the API and behaviour
of `kafka.record` and `aiokafka.record` (same constructors, attributes, methods, constants and the
client's own exception classes), whose hot paths - v2 record decoding, v2 record encoding and the
batch CRC - run on kbatch's kernels (`kbatch._backend.core`, looked up at call time so the
KBATCH_BACKEND switch and the test fixture apply).

Equivalence rule: the fast path decodes a whole batch at once and only accepts bytes on which the
client's own reader would produce the same records without error; any batch it does not accept
(corrupt, non-minimal varints, control batches, undecodable header keys, ...) is handed to the
client's original record-by-record reader, so records, exceptions and their order are the
client's own.

install() patches every module in sys.modules whose attributes are the client's original record
classes (its record package, fetcher, producer accumulator, ...), and uninstall() puts them back.
"""
from __future__ import annotations

import importlib
import struct
import sys
import time
from collections.abc import Sequence
from types import ModuleType
from typing import TYPE_CHECKING, Any

from .. import _backend

if TYPE_CHECKING:
    from .._typing import BytesLike

__all__ = ["install", "uninstall", "installed", "ClientNotInstalledError", "STATS"]


class ClientNotInstalledError(ImportError):
    """The Kafka client named in install() is not importable."""


# name -> (kbatch module, client package used to check it is importable)
_CLIENTS = {
    "kafka-python": ("kbatch.compat.kafka_python", "kafka"),
    "aiokafka": ("kbatch.compat.aiokafka", "aiokafka"),
}
_ALIASES = {"kafka_python": "kafka-python", "kafka": "kafka-python", "kafkapython": "kafka-python"}

# Spy counters: how many batches / records the drop-ins decoded and built through kbatch.
STATS = {"decoded_batches": 0, "decoded_records": 0, "fallback_batches": 0, "built_records": 0,
         "built_batches": 0}

# name -> list of (module, attribute, original object)
_patched: dict[str, list[tuple[ModuleType, str, object]]] = {}


def _canonical(name: str) -> str:
    key = str(name).strip().lower()
    key = _ALIASES.get(key, key)
    if key not in _CLIENTS:
        raise ValueError(f"unknown Kafka client {name!r}; expected one of {', '.join(_CLIENTS)}")
    return key


def _load(key: str) -> ModuleType:
    mod_name, pkg = _CLIENTS[key]
    try:
        importlib.import_module(pkg)
    except ImportError as e:
        raise ClientNotInstalledError(
            f"kbatch.compat.install({key!r}) needs the {key} package, which is not importable ({e}); "
            f"install it with `pip install {key}`") from e
    return importlib.import_module(mod_name)


def installed(name: str) -> bool:
    return _canonical(name) in _patched


def install(name: str) -> None:
    """Replace the client's record classes with kbatch's drop-ins everywhere they are bound."""
    key = _canonical(name)
    if key in _patched:
        return
    mod = _load(key)
    mod.import_client_modules()
    replacements = {id(orig): new for orig, new in mod.replacements()}
    done = []
    prefix = _CLIENTS[key][1]
    for mname, m in list(sys.modules.items()):
        if m is None or not (mname == prefix or mname.startswith(prefix + ".")):
            continue
        for attr, value in list(vars(m).items()):
            new = replacements.get(id(value))
            if new is not None:
                setattr(m, attr, new)
                done.append((m, attr, value))
    _patched[key] = done


def uninstall(name: str) -> None:
    """Put the client's original record classes back where install() replaced them."""
    key = _canonical(name)
    for m, attr, value in reversed(_patched.pop(key, [])):
        setattr(m, attr, value)


# ------------------------------------------------------------------------------ shared fast paths
_MASK64 = (1 << 64) - 1


def _wrap64(v: int) -> int:
    v &= _MASK64
    return v - (1 << 64) if v >> 63 else v


_SPEEDUPS: list[ModuleType | None] = []


def speedups() -> ModuleType | None:
    """kbatch.compat._speedups when the live kbatch backend is the compiled one, else None."""
    if _backend.core.BACKEND != "cython":
        return None
    if not _SPEEDUPS:
        sp: ModuleType | None
        try:
            from . import _speedups as sp
        except ImportError:
            sp = None
        _SPEEDUPS.append(sp)
    return _SPEEDUPS[0]


_BYTES_LIKE = (bytes, bytearray, memoryview)
_CRC_STRUCT = struct.Struct(">I")


def append_v2(builder: Any, offset: int, timestamp: int | None, key: BytesLike | None, value: BytesLike | None,
              headers: Sequence[tuple[str, BytesLike | None]]) -> Any:
    """DefaultRecordBatchBuilder.append of both clients' pure builders (same checks, messages and
    batch state), with the record encoded by kbatch: write one record (magic 2); returns the
    client's DefaultRecordMetadata, or None when the batch is full. Installed as the method itself
    (no extra frame per record); the builder class names its metadata maker: _METADATA, and
    _compiled_metadata (or _bind_compiled_metadata(sp) to make it) on the compiled backend."""
    if type(offset) is not int:
        raise TypeError(offset)
    if timestamp is None:
        timestamp = int(time.time() * 1000)
    elif type(timestamp) is not int:
        raise TypeError(timestamp)
    if not (key is None or type(key) in _BYTES_LIKE):
        raise TypeError(f"Not supported type for key: {type(key)}")
    if not (value is None or type(value) in _BYTES_LIKE):
        raise TypeError(f"Not supported type for value: {type(value)}")
    first = builder._first_timestamp is None
    if first:
        builder._first_timestamp = timestamp
        builder._max_timestamp = timestamp
    sp = speedups()
    if sp is not None:
        size = sp.append_v2(builder._buffer, offset, timestamp - builder._first_timestamp, key, value, headers,
                            builder._batch_size, first)
        if size < 0:
            return None
    else:
        rec = encode_v2_record(offset, timestamp - builder._first_timestamp, key, value, headers)
        size = len(rec)
        buf = builder._buffer
        if size + len(buf) > builder._batch_size and not first:
            return None
        buf += rec
    if builder._max_timestamp < timestamp:
        builder._max_timestamp = timestamp
    builder._num_records += 1
    builder._last_offset = offset
    STATS["built_records"] += 1
    if sp is None:
        return builder._METADATA(offset, size, timestamp)
    return (builder._compiled_metadata or builder._bind_compiled_metadata(sp))(offset, size, timestamp)


def write_v2_header(builder: Any, partition_leader_epoch: int, use_compression_type: bool) -> None:
    """Both clients' DefaultRecordBatchBuilder header write, with kbatch's CRC-32C."""
    buf = builder._buffer
    builder.HEADER_STRUCT.pack_into(
        buf, 0, 0, len(buf) - builder.AFTER_LEN_OFFSET, partition_leader_epoch, builder._magic, 0,
        builder._get_attributes(use_compression_type), builder._last_offset, builder._first_timestamp or 0,
        builder._max_timestamp or 0, builder._producer_id, builder._producer_epoch, builder._base_sequence,
        builder._num_records)
    crc = _backend.core.crc32c(memoryview(buf)[builder.ATTRIBUTES_OFFSET:])
    _CRC_STRUCT.pack_into(buf, builder.CRC_OFFSET, crc)
    STATS["built_batches"] += 1


def decode_v2_tuples(buf: BytesLike, pos: int, count: int, base_offset: int, first_ts: int, max_ts: int,
                     log_append: bool) -> list[tuple[Any, ...]] | None:
    """Decode the records of an uncompressed v2 records section buf[pos:] with the clients' rules.

    Returns a list of (length, offset, timestamp, key, value, headers) with key/value bytes or
    None and headers a list of (str, bytes | None) - or None when the bytes are not ones every
    client reads the same way (then the caller uses the client's own reader, which also raises
    the client's own exception at the right record).
    """
    core = _backend.core
    try:
        recs = core.decode_records_v2(buf, pos, len(buf), count, base_offset, first_ts, None, 0, False)
    except Exception:  # noqa: BLE001 - the client's reader decides what the error is
        return None
    sv = core.sizeof_varint
    svl = core.sizeof_varlong
    out = []
    consumed = 0
    for r in recs:
        if r.attributes & 0x80:  # the clients read the attributes byte as a varint
            return None
        ts = -1 if r.timestamp is None else r.timestamp
        delta = _wrap64(ts - first_ts)
        dsize = svl(delta)
        if dsize >= 10:  # a 10-byte varlong may carry bits kbatch drops; let the client decide
            return None
        off_delta = _wrap64(r.offset - base_offset)
        key = None if r.key is None else bytes(r.key)
        value = None if r.value is None else bytes(r.value)
        size = 1 + dsize + sv(off_delta)
        size += 1 if key is None else sv(len(key)) + len(key)
        size += 1 if value is None else sv(len(value)) + len(value)
        headers: list[tuple[str, bytes | None]] = []
        size += sv(len(r.headers))
        for hk, hview in r.headers:
            if "\ufffd" in hk:  # maybe undecodable UTF-8: the client raises, let it
                return None
            n = len(hk.encode("utf-8"))
            size += sv(n) + n
            hv = None if hview is None else bytes(hview)
            size += 1 if hv is None else sv(len(hv)) + len(hv)
            headers.append((hk, hv))
        consumed += sv(size) + size
        out.append((size, base_offset + off_delta, max_ts if log_append else first_ts + delta, key,
                    value, headers))
    # every varint minimal <=> the bytes consumed equal the minimal encoding of what was read
    if consumed != len(buf) - pos:
        return None
    return out


def encode_v2_record(offset_delta: int, timestamp_delta: int, key: BytesLike | None, value: BytesLike | None,
                     headers: Sequence[tuple[str, BytesLike | None]]) -> bytes:
    """One v2 record (length prefix included) as the clients' builders write it."""
    core = _backend.core
    wv = core.write_varlong  # the clients zigzag every varint as int64
    parts: list[BytesLike] = [b"\x00", wv(timestamp_delta), wv(offset_delta)]
    if key is None:
        parts.append(b"\x01")
    else:
        parts.append(wv(len(key)))
        parts.append(key)
    if value is None:
        parts.append(b"\x01")
    else:
        parts.append(wv(len(value)))
        parts.append(value)
    parts.append(wv(len(headers)))
    for name, hv in headers:
        hk = name.encode("utf-8")
        parts.append(wv(len(hk)))
        parts.append(hk)
        if hv is None:
            parts.append(b"\x01")
        else:
            parts.append(wv(len(hv)))
            parts.append(hv)
    body = b"".join(parts)
    return wv(len(body)) + body
