"""The summary's cache (kbatch.log.summary, docs/summary.md "CRCs, the cache and
`trust_headers`"): the verified batch headers of sealed segments and the verified prefix of the
active one, and the timestamps walked in them, in a directory outside the log directory, each
entry keyed by the file's identity and checked against its boundary headers' bytes before use."""
from __future__ import annotations

import hashlib
import json
import os
import tempfile
import time
import zlib
from typing import TYPE_CHECKING, Any

import numpy as np

from .. import _wire as W
from ..errors import InvalidConfigurationError, KBatchError

if TYPE_CHECKING:
    from .segment import LogSegment

SUMMARY_CACHE_ENV = "KBATCH_SUMMARY_CACHE"
SUMMARY_CACHE_MAX_ENV = "KBATCH_SUMMARY_CACHE_MAX"
#: the cache directory's budget unless $KBATCH_SUMMARY_CACHE_MAX says otherwise: about 10 M batches'
#: header rows (an entry holds ~100 bytes a batch), far more than one machine's segments need
DEFAULT_MAX_BYTES = 1 << 30
#: a prune brings the directory down to this share of the budget, so that the next stores do not
#: each list the directory again
_PRUNE_TO = 0.75
#: a temporary entry older than this was left by a writer that died before its rename
_STALE_TMP_S = 3600.0
_UNITS = {"": 1, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30, "t": 1 << 40}
_CACHE_VERSION = 3
#: a cache entry: this, the meta's length (4 bytes, big-endian), the meta (JSON: identity, checks,
#: the columns' names, dtypes and lengths, the CRC-32 of the columns' bytes), then those bytes
_ENTRY_MAGIC = b"KBSUMC\x00\x01"
_HEADER_FIELDS = ("position", "size", "magic", "base_offset", "last_offset", "partition_leader_epoch", "crc",
                  "crc_valid", "attributes", "first_timestamp", "max_timestamp", "producer_id", "producer_epoch",
                  "base_sequence", "record_count")


def default_cache_dir() -> str | None:
    """$KBATCH_SUMMARY_CACHE ("" or "off": no cache), else $XDG_CACHE_HOME/kbatch/summaries, else
    ~/.cache/kbatch/summaries."""
    env = os.environ.get(SUMMARY_CACHE_ENV)
    if env is not None:
        return None if env.strip() in ("", "off", "0") else env
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "kbatch", "summaries")


def max_cache_bytes(value: str | None = None) -> int:
    """The cache directory's budget in bytes: `value`, else $KBATCH_SUMMARY_CACHE_MAX, else 1 GiB;
    a count of bytes with an optional K, M, G or T (binary units), e.g. `512M`."""
    raw = os.environ.get(SUMMARY_CACHE_MAX_ENV) if value is None else value
    if raw is None or not raw.strip():
        return DEFAULT_MAX_BYTES
    text = raw.strip().lower().removesuffix("ib").removesuffix("b")
    unit = text[-1:] if text[-1:] in _UNITS and not text[-1:].isdigit() else ""
    number = text[:-1] if unit else text
    if not number.isdigit() or int(number) <= 0:
        raise InvalidConfigurationError(f"{SUMMARY_CACHE_MAX_ENV} is not a size", expected="a positive count of "
                                        "bytes, optionally with K, M, G or T (e.g. 512M)", found=repr(raw))
    return int(number) * _UNITS[unit]


class _Loaded:
    """Cache entries already read by this process, keyed by the entry file's path and identity
    (a rewritten or damaged file is another key), least recently used dropped past `limit` bytes:
    a second query over the same segments reads no entry again (its content checks, the
    segment's boundary header bytes, are made on every use all the same)."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.entries: dict[tuple[str, int, int, int], tuple[dict[str, np.ndarray], Any, int]] = {}
        self.bytes = 0

    @staticmethod
    def _key(entry: str) -> tuple[str, int, int, int] | None:
        try:
            st = os.stat(entry)
        except OSError:
            return None
        return entry, st.st_size, st.st_mtime_ns, st.st_ino

    def get(self, entry: str) -> tuple[dict[str, np.ndarray], Any] | None:
        key = self._key(entry)
        hit = None if key is None else self.entries.pop(key, None)
        if key is None or hit is None:
            return None
        self.entries[key] = hit  # most recently used last
        return hit[0], hit[1]

    def put(self, entry: str, value: tuple[dict[str, np.ndarray], Any]) -> None:
        key = self._key(entry)
        size = sum(int(v.nbytes) for v in value[0].values())
        if key is None or size > self.limit:
            return
        for v in value[0].values():
            v.setflags(write=False)  # shared by every reader of the entry
        self.entries[key] = (value[0], value[1], size)
        self.bytes += size
        while self.bytes > self.limit:
            self.bytes -= self.entries.pop(next(iter(self.entries)))[2]


#: the entries this process read (bounded: 256 MiB)
_LOADED = _Loaded(256 << 20)


class SummaryCache:
    """Verified batch headers of sealed segments, one file per segment in `directory` (never the
    log directory): what a CRC-checked scan of the whole .log found, so that a later summary of the
    same unchanged file reads none of it. An entry is used only when the file's path, size,
    mtime_ns, device and inode are those it was made from and the bytes of its last batch header
    are still the same; an entry that does not read (damaged, another version) is ignored. The
    active segment, which grows, has a prefix entry instead (load_prefix: docs/summary.md)."""

    def __init__(self, directory: str, max_bytes: int | None = None) -> None:
        self.directory = directory
        #: the directory's budget: past it, a store removes the entries used longest ago (an entry's
        #: mtime is moved on each use from disk), down to three quarters of it
        self.max_bytes = max_cache_bytes() if max_bytes is None else max_bytes

    @staticmethod
    def _identity(path: str, prefix: bool = False) -> tuple[Any, ...] | None:
        """A sealed file's identity: path, size, mtime_ns, device, inode; an active segment's
        prefix entry's: path, device, inode (it grows, so its size and mtime move)."""
        try:
            st = os.stat(path)
        except OSError:
            return None
        if prefix:
            return "prefix", os.path.realpath(path), st.st_dev, st.st_ino
        return os.path.realpath(path), st.st_size, st.st_mtime_ns, st.st_dev, st.st_ino

    def _file(self, ident: tuple[Any, ...], kind: str = "") -> str:
        h = hashlib.sha256(json.dumps(ident).encode()).hexdigest()[:40]
        return os.path.join(self.directory, f"{h}{kind}.bin")

    def _load(self, seg: LogSegment, kind: str, names: tuple[str, ...], prefix: bool = False
              ) -> tuple[dict[str, np.ndarray], Any] | None:
        path = seg.path(".log")
        ident = self._identity(path, prefix)
        if ident is None or (not prefix and ident[1] != seg.size):
            return None
        try:
            entry = self._file(ident, kind)
            hit = _LOADED.get(entry)
            if hit is None:
                meta, got = _read_entry(entry)
                if meta.get("version") != _CACHE_VERSION or tuple(meta["identity"]) != ident:
                    return None
                _touch(entry)
                cols = {k: got[k] for k in names}
                _LOADED.put(entry, (cols, meta))
            else:
                cols, meta = hit
            # the content check: the last batch's header bytes (its CRC among them) are still those;
            # a prefix entry also needs the file to still hold the prefix, and its first header
            checks = [(int(meta["last_at"]), int(meta["last_size"]), meta["last_header"])]
            if prefix:
                if seg.size < int(meta["end"]):
                    return None   # truncated
                checks.append((0, int(meta["first_size"]), meta["first_header"]))
            for at, size, want in checks:
                if size and bytes(seg.log.read(at, size, read_ahead=False)).hex() != want:
                    return None
            return cols, meta
        except (OSError, ValueError, KeyError, TypeError, IndexError, KBatchError):
            return None  # a damaged or foreign entry is not trusted

    def _store(self, seg: LogSegment, kind: str, arrays: dict[str, np.ndarray], last_at: int, last_size: int,
               prefix: bool = False, **extra: Any) -> None:
        path = seg.path(".log")
        ident = self._identity(path, prefix)
        if ident is None or (not prefix and ident[1] != seg.size):
            return
        last = bytes(seg.log.read(last_at, last_size, read_ahead=False)).hex() if last_size else ""
        if prefix:
            extra["first_header"] = bytes(seg.log.read(0, extra["first_size"], read_ahead=False)).hex()
        meta = dict(version=_CACHE_VERSION, identity=list(ident), last_at=last_at, last_size=last_size,
                    last_header=last, **extra)
        try:
            os.makedirs(self.directory, exist_ok=True)
            fd, tmp = tempfile.mkstemp(prefix=".tmp-", dir=self.directory)
            try:
                with os.fdopen(fd, "wb") as f:
                    _write_entry(f, meta, arrays)
                os.replace(tmp, self._file(ident, kind))  # atomic: a reader sees the old entry or the new one
            except BaseException:
                try:
                    os.unlink(tmp)
                except OSError:
                    pass
                raise
            self.prune()
        except OSError:
            pass  # a cache that cannot be written costs speed, never an answer

    def prune(self) -> int:
        """Keep the directory within its budget: when its entries pass `max_bytes`, remove those
        used longest ago until three quarters of it remain (entries of segments deleted since are
        never used again, so they go first); temporary files a dead writer left are removed too.
        Returns the bytes removed. Safe beside other processes: an entry removed under a reader
        was already open or is simply not found, and a summary then reads the segment again."""
        entries: list[tuple[int, int, str]] = []
        total = removed = 0
        now = time.time()
        try:
            listing = list(os.scandir(self.directory))
        except OSError:
            return 0
        for e in listing:
            try:
                st = e.stat(follow_symlinks=False)
            except OSError:
                continue
            if e.name.startswith(".tmp-"):
                if now - st.st_mtime > _STALE_TMP_S and _unlink(e.path):
                    removed += st.st_size
            elif e.name.endswith(".bin") and e.is_file(follow_symlinks=False):
                entries.append((st.st_mtime_ns, st.st_size, e.path))
                total += st.st_size
        if total <= self.max_bytes:
            return removed
        entries.sort()
        goal = int(self.max_bytes * _PRUNE_TO)
        for _, size, path in entries:
            if total <= goal:
                break
            if _unlink(path):
                total -= size
                removed += size
        return removed

    def load(self, seg: LogSegment) -> tuple[dict[str, np.ndarray], int] | None:
        """(header columns of the whole segment, where its batches end), or None."""
        got = self._load(seg, "", _HEADER_FIELDS)
        if got is None:
            return None
        cols, meta = got
        n = len(cols["position"])
        if any(len(v) != n for v in cols.values()) or int(meta["end"]) != seg.size:
            return None
        return cols, int(meta["end"])

    def store(self, seg: LogSegment, cols: dict[str, np.ndarray], end: int) -> None:
        if end != seg.size:
            return
        n = len(cols["position"])
        at, size = (int(cols["position"][-1]), int(min(cols["size"][-1], W.RECORD_BATCH_OVERHEAD))) if n else (0, 0)
        self._store(seg, "", cols, at, size, end=end)

    def load_prefix(self, seg: LogSegment) -> tuple[dict[str, np.ndarray], int] | None:
        """(header columns of a verified prefix [0, end) of a segment that grows, end), or None:
        the same file (path, device, inode) still at least `end` bytes long, with its first and
        last batch headers of the prefix unchanged."""
        got = self._load(seg, ".prefix", _HEADER_FIELDS, prefix=True)
        if got is None:
            return None
        cols, meta = got
        n, end = len(cols["position"]), int(meta["end"])
        if not n or any(len(v) != n for v in cols.values()) or int(cols["position"][-1] + cols["size"][-1]) != end:
            return None
        return cols, end

    def store_prefix(self, seg: LogSegment, cols: dict[str, np.ndarray]) -> int:
        """Remember the rows up to the first whose CRC is not good (each a whole batch, checked
        now or before) as the verified prefix of a segment that grows; returns where it ends."""
        bad = np.flatnonzero(~cols["crc_valid"].astype(bool))
        n = int(bad[0]) if len(bad) else len(cols["position"])
        if not n:
            return 0
        cols = {k: v[:n] for k, v in cols.items()}
        end = int(cols["position"][-1] + cols["size"][-1])
        self._store(seg, ".prefix", cols, int(cols["position"][-1]), _header_size(cols, -1), prefix=True, end=end,
                    first_size=min(W.RECORD_BATCH_OVERHEAD, end))
        return end

    def load_times(self, seg: LogSegment, prefix: bool = False) -> dict[int, tuple[np.ndarray, np.ndarray]] | None:
        """{batch position: (its records' timestamps, which have one)} of a verified sealed segment's
        batches whose timestamps a header does not give (prefix: those walked inside the verified
        prefix of a segment that grows), or None."""
        got = self.load_time_arrays(seg, prefix)
        if got is None:
            return None
        pos, start, ts, has = got
        bounds = start.tolist()
        return {p: (ts[bounds[k]:bounds[k + 1]], has[bounds[k]:bounds[k + 1]]) for k, p in enumerate(pos.tolist())}

    def load_time_arrays(self, seg: LogSegment, prefix: bool = False
                         ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray] | None:
        """load_times' entry as arrays: (batch positions, ascending; where each one's records start
        in the next two, and where the last ends; timestamps; which have one), or None."""
        got = self._load(seg, ".prefix.ts" if prefix else ".ts", ("position", "start", "ts", "has"), prefix)
        if got is None:
            return None
        c = got[0]
        pos, start, ts, has = c["position"], c["start"], c["ts"], c["has"]
        if len(start) != len(pos) + 1 or len(ts) != len(has) or (len(start) and int(start[-1]) != len(ts)):
            return None
        return pos, start, ts, has

    def store_times(self, seg: LogSegment, times: dict[int, tuple[np.ndarray, np.ndarray]], last_at: int,
                    last_size: int, prefix_end: int | None = None) -> None:
        """Remember the timestamps walked of a sealed segment's batches (or, with `prefix_end`, of
        batches inside the verified prefix [0, prefix_end) of a segment that grows)."""
        order = sorted(times)
        lens = [len(times[p][0]) for p in order]
        start = np.zeros(len(order) + 1, np.int64)
        np.cumsum(lens, out=start[1:])
        arrays = dict(position=np.array(order, np.int64), start=start,
                      ts=np.concatenate([times[p][0] for p in order]) if order else np.zeros(0, np.int64),
                      has=np.concatenate([times[p][1] for p in order]) if order else np.zeros(0, bool))
        if prefix_end is None:
            self._store(seg, ".ts", arrays, last_at, last_size)
        else:
            self._store(seg, ".prefix.ts", arrays, last_at, last_size, prefix=True, end=prefix_end,
                        first_size=min(W.RECORD_BATCH_OVERHEAD, prefix_end))


def _touch(path: str) -> None:
    """Mark an entry as used now (the prune removes those used longest ago first)."""
    try:
        os.utime(path)
    except OSError:
        pass


def _unlink(path: str) -> bool:
    try:
        os.unlink(path)
        return True
    except OSError:
        return False


def _write_entry(f: Any, meta: dict[str, Any], arrays: dict[str, np.ndarray]) -> None:
    cols = {k: np.ascontiguousarray(v) for k, v in arrays.items()}
    raw = [v.tobytes() for v in cols.values()]
    crc = 0
    for b in raw:
        crc = zlib.crc32(b, crc)
    meta = dict(meta, columns=[[k, v.dtype.str, int(v.shape[0])] for k, v in cols.items()], crc=crc)
    head = json.dumps(meta).encode()
    f.write(_ENTRY_MAGIC + len(head).to_bytes(4, "big") + head)
    for b in raw:
        f.write(b)


def _read_entry(path: str) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
    """(meta, columns) of a cache entry, or ValueError when it is not one whole and intact."""
    with open(path, "rb") as f:
        data = bytearray(f.read())   # writable: the columns are views of it
    m = len(_ENTRY_MAGIC)
    if data[:m] != _ENTRY_MAGIC or len(data) < m + 4:
        raise ValueError("not a summary cache entry")
    n = int.from_bytes(data[m:m + 4], "big")
    meta = json.loads(bytes(data[m + 4:m + 4 + n]).decode())
    if not isinstance(meta, dict):
        raise ValueError("meta")
    body = memoryview(data)[m + 4 + n:]
    if zlib.crc32(body) != meta["crc"]:
        raise ValueError("the entry's bytes are not those written")
    cols: dict[str, np.ndarray] = {}
    at = 0
    for name, dt, length in meta["columns"]:
        dtype = np.dtype(str(dt))
        if dtype.kind not in "biuf" or int(length) < 0:
            raise ValueError(f"column {name}: {dt}")
        cols[str(name)] = np.frombuffer(body, dtype, int(length), at) if length else np.zeros(0, dtype)
        at += dtype.itemsize * int(length)
    if at != len(body):
        raise ValueError("the entry's length")
    return meta, cols


def _header_size(cols: dict[str, np.ndarray], r: int) -> int:
    """The bytes of row r's batch header checked against a cache entry (61, or a smaller entry)."""
    return int(min(cols["size"][r], W.RECORD_BATCH_OVERHEAD))


__all__ = ["DEFAULT_MAX_BYTES", "SUMMARY_CACHE_ENV", "SUMMARY_CACHE_MAX_ENV", "SummaryCache", "default_cache_dir",
           "max_cache_bytes"]
