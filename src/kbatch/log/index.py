"""Kafka's segment index files: OffsetIndex (.index), TimeIndex (.timeindex), TransactionIndex (.txnindex).

Layouts and rules are in kafka-format.md §5. An index is a sorted array of fixed-size big-endian
entries. Reading copies the file into memory (never mmap: a file truncated under a mapped reader
kills it with SIGBUS) and binary-searches it with the backend's `index_search` kernels. Writing
appends entries to a trimmed file: kbatch never preallocates, so an index on disk always holds
exactly its entries (a broker's preallocated, zero-tailed files are still read correctly). A
failed append is cut back off the file, which then holds exactly what it held before.
"""
from __future__ import annotations

import os
import struct
from collections.abc import Iterable, Iterator
from typing import TYPE_CHECKING, Final, Literal, NamedTuple, TypeVar

import numpy as np
import numpy.typing as npt

from .. import _backend
from . import files as _files
from .. import _wire as W
from ..errors import CorruptIndexError, InvalidOffsetError, LogWriteError

if TYPE_CHECKING:
    from .._typing import Buffer, BytesLike, PathLike

_I = TypeVar("_I", bound="_Index")

_OFFSET_ENTRY = struct.Struct(">ii")      # relative offset, position
_TIME_ENTRY = struct.Struct(">qi")        # timestamp, relative offset
_TXN_ENTRY = struct.Struct(">hqqqq")      # version, producer id, first, last, last stable offset
assert _TXN_ENTRY.size == W.TXN_INDEX_ENTRY_SIZE

KEY_RELATIVE_OFFSET: Final = 0  # index_search key kinds (see _core_py.index_search)
KEY_TIMESTAMP: Final = 1


class OffsetPosition(NamedTuple):
    offset: int
    position: int


class TimestampOffset(NamedTuple):
    timestamp: int
    offset: int


class AbortedTxn(NamedTuple):
    producer_id: int
    first_offset: int
    last_offset: int
    last_stable_offset: int
    version: int = 0


class _Index:
    """Shared machinery: a buffer of `entry_size` entries, the first `entries` of them valid."""

    entry_size: int
    key_kind: Literal[0, 1]
    suffix: str
    _first_tail_slot: int       # the first slot at which an entry naming the base offset ends the entries
    _relative_offset_word: int  # which int32 word of an entry holds its relative offset

    def __init__(self, base_offset: int, data: bytes | bytearray = b"", *, path: PathLike | None = None,
                 max_index_size: int = W.DEFAULT_SEGMENT_INDEX_BYTES) -> None:
        self.base_offset = base_offset
        self.path = os.fspath(path) if path is not None else None
        self.max_entries = max_index_size // self.entry_size
        self.file_length = len(data)
        self._buf = data  # a bytearray while the index is writable
        self._fd: int | None = None  # append handle, only for writable indexes
        self.entries = self._valid_entries(data)

    # ---- construction
    @classmethod
    def open(cls: type[_I], path: PathLike, base_offset: int | None = None, *,
             max_index_size: int = W.DEFAULT_SEGMENT_INDEX_BYTES) -> _I:
        """Read an existing index file. The base offset defaults to the file name's."""
        from .. import _fs

        path = path if isinstance(path, str) else os.fspath(path)
        if base_offset is None:
            base_offset = _files.offset_from_file_name(_fs.basename(path))
        return cls(base_offset, _fs.read_bytes(path), path=path, max_index_size=max_index_size)

    @classmethod
    def writable(cls: type[_I], path: PathLike, base_offset: int, *,
                 max_index_size: int = W.DEFAULT_SEGMENT_INDEX_BYTES, entries: Buffer = b"") -> _I:
        """An index kept in memory and appended to `path` entry by entry. The file must hold
        `entries` (valid entries only) first: a new file is created empty, a file holding anything
        else is replaced atomically (its mode kept). A crash mid-append leaves a file that fails
        the sanity check or differs from a rebuild, and recovery rebuilds it."""
        path = os.fspath(path)
        entries = bytes(entries)
        have: bytes | None
        if not entries and not os.path.lexists(path):
            _files.crash_point(f"create:{os.path.basename(path)}")
            fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_EXCL | _files.O_CLOEXEC, 0o666)
        else:
            try:
                have = _files.read_whole(path)
            except FileNotFoundError:
                have = None
            if have != entries:
                _files.atomic_write(path, entries)
            fd = _files.open_regular(path, writable=True)
        idx = cls(base_offset, bytearray(entries), path=path, max_index_size=max_index_size)
        idx._fd = fd
        return idx

    @staticmethod
    def _relative_offset_at(data: Buffer, i: int) -> int:
        """The relative offset of entry i."""
        raise NotImplementedError

    def _valid_entries(self, data: BytesLike) -> int:
        """Number of real entries: a broker's preallocated or crashed file has a zero-filled tail;
        stop at the first entry at slot > 0 naming the base offset, as DumpLogSegments does. A file
        whose first two slots are all zeros is an empty preallocated file."""
        n = len(data) // self.entry_size
        es = self.entry_size
        if n >= 2 and not any(bytes(data[:2 * es])):
            return 0
        if n <= self._first_tail_slot:
            return n
        # every entry's relative offset at once (a 68,000-entry index is read on a segment's first lookup)
        words = np.frombuffer(data, dtype=">i4", count=n * es // 4).reshape(n, es // 4)
        zero = np.flatnonzero(words[self._first_tail_slot:, self._relative_offset_word] == 0)
        return self._first_tail_slot + int(zero[0]) if len(zero) else n

    # ---- entries
    def __len__(self) -> int:
        return self.entries

    def raw(self) -> bytes:
        """The valid entries' bytes (what a trimmed file holds)."""
        return bytes(self._buf[:self.entries * self.entry_size])

    def is_full(self) -> bool:
        return self.entries >= self.max_entries

    def sanity_check(self) -> None:
        """Kafka's sanityCheck: size a multiple of the entry size and the last offset >= base offset;
        kbatch also requires sorted keys, which Kafka's binary search silently assumes."""
        if self.file_length % self.entry_size:
            raise CorruptIndexError(
                f"Index file {self.path} is corrupt, its size is not a multiple of {self.entry_size}",
                expected=f"a multiple of {self.entry_size} bytes", found=f"{self.file_length} bytes",
                position=self.file_length - self.file_length % self.entry_size)
        if self.entries == 0:
            return
        last = self._relative_offset_at(self._buf, self.entries - 1)
        if last < 0:
            raise CorruptIndexError(
                f"Corrupt index found, index file ({self.path}) has non-zero size but the last offset is "
                f"{self.base_offset + last} which is less than the base offset {self.base_offset}",
                expected=f">= {self.base_offset}", found=self.base_offset + last,
                position=(self.entries - 1) * self.entry_size)
        keys = self._keys()
        bad = np.flatnonzero(np.diff(keys) <= 0)
        if len(bad):
            i = int(bad[0]) + 1
            raise CorruptIndexError(
                f"Corrupt index file {self.path}: entries are not strictly increasing",
                expected=f"key > {int(keys[i - 1])}", found=int(keys[i]), position=i * self.entry_size)

    def _keys(self) -> npt.NDArray[np.int64]:
        dt = ">i4" if self.key_kind == KEY_RELATIVE_OFFSET else ">i8"
        rec = np.frombuffer(self._buf, dtype=np.uint8, count=self.entries * self.entry_size)
        return rec.reshape(-1, self.entry_size)[:, :np.dtype(dt).itemsize].copy().view(dt).ravel().astype(np.int64)

    def _search(self, key: int) -> int:
        """Slot of the largest entry with key <= `key`, or -1."""
        n = self.entries
        if n == 0:
            return -1
        return _backend.core.index_search(self._buf, self.entry_size, self.key_kind, key, n)

    def _search_many(self, keys: npt.ArrayLike) -> npt.NDArray[np.int64]:
        n = self.entries
        key_array = np.asarray(keys, dtype=np.int64)
        if n == 0:
            return np.full(len(key_array), -1, dtype=np.int64)
        return np.asarray(_backend.core.index_search_many(self._buf, self.entry_size, self.key_kind, key_array, n))

    # ---- writing
    def _append_raw(self, entry: bytes) -> None:
        """Write one entry at the end of the file, then count it; a failed write is cut back off."""
        if self._fd is None:
            raise InvalidOffsetError(f"Index {self.path} is read-only", expected="a writable index",
                                     found="a read-only index")
        at = self.entries * self.entry_size
        try:
            _files.write_all(self._fd, entry, at)
        except OSError as e:
            try:
                _files.truncate_back(self._fd, at, self.path)
            except OSError as e2:
                raise LogWriteError(f"a failed index append could not be cut back ({e2})", path=self.path,
                                    errno=e2.errno) from e
            raise _files.write_error(e, self.path, f"appending an index entry at byte {at}") from e
        assert isinstance(self._buf, bytearray)  # a writable index's buffer
        del self._buf[at:]
        self._buf += entry
        self.entries += 1
        self.file_length = at + len(entry)

    def truncate_entries(self, n: int, *, durable: bool = False) -> None:
        """Keep the first n entries (in memory; also on disk for a writable index)."""
        if n > self.entries:
            raise ValueError(f"cannot grow an index by truncating ({n} > {self.entries})")
        if self._fd is not None:
            size = n * self.entry_size
            if durable or os.fstat(self._fd).st_size != size:
                _files.truncate_back(self._fd, size, self.path)
            assert isinstance(self._buf, bytearray)  # a writable index's buffer
            del self._buf[size:]
            self.file_length = size
        self.entries = n

    def flush(self) -> None:
        if self._fd is not None:
            os.fsync(self._fd)

    def close_file(self) -> None:
        """Flush and close the append handle; the entries stay readable in memory."""
        if self._fd is not None:
            try:
                self.flush()
            finally:
                os.close(self._fd)
                self._fd = None
                self._buf = bytes(self._buf)

    def close(self) -> None:
        self.close_file()
        self._buf = b""
        self.entries = 0

    def close_quietly(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None


class OffsetIndex(_Index):
    """`.index`: (relative offset int32, position int32) entries; an entry names the last offset of
    the batch (or append) starting at `position` (kafka-format.md §5.1)."""

    entry_size = W.OFFSET_INDEX_ENTRY_SIZE
    key_kind = KEY_RELATIVE_OFFSET
    suffix = ".index"
    # no real entry names the base offset (the first batch is never indexed), so slot 0 can end it too
    _first_tail_slot = 0
    _relative_offset_word = 0  # (relative offset, position): the first of its two int32 words

    @staticmethod
    def _relative_offset_at(data: Buffer, i: int) -> int:
        rel: int = _OFFSET_ENTRY.unpack_from(data, i * W.OFFSET_INDEX_ENTRY_SIZE)[0]
        return rel

    def entry(self, i: int) -> OffsetPosition:
        rel, pos = _OFFSET_ENTRY.unpack_from(self._buf, i * self.entry_size)
        return OffsetPosition(self.base_offset + rel, pos)

    def __iter__(self) -> Iterator[OffsetPosition]:
        return (self.entry(i) for i in range(self.entries))

    @property
    def last_offset(self) -> int:
        return self.entry(self.entries - 1).offset if self.entries else self.base_offset

    def lookup(self, target_offset: int) -> OffsetPosition:
        """The largest entry with offset <= target, or (base offset, 0) when there is none."""
        rel = target_offset - self.base_offset
        if rel < 0:
            return OffsetPosition(self.base_offset, 0)
        slot = self._search(min(rel, W.INT32_MAX))
        return OffsetPosition(self.base_offset, 0) if slot < 0 else self.entry(slot)

    def lookup_positions(self, target_offsets: npt.ArrayLike) -> npt.NDArray[np.int64]:
        """Vectorised lookup(): the start position for each target offset."""
        t = np.asarray(target_offsets, dtype=np.int64) - self.base_offset
        slots = self._search_many(np.clip(t, -1, W.INT32_MAX))
        if self.entries == 0:
            return np.zeros(len(t), dtype=np.int64)
        positions = np.frombuffer(self._buf, dtype=">i4", count=self.entries * 2)[1::2].astype(np.int64)
        return np.where(slots < 0, 0, positions[np.maximum(slots, 0)])

    def append(self, offset: int, position: int) -> None:
        """Add (offset, position); offsets must grow and fit in an int32 relative offset."""
        if self.entries and offset <= self.last_offset:
            raise InvalidOffsetError(
                f"Attempt to append an offset ({offset}) to position {self.entries} no larger than the last "
                f"offset appended ({self.last_offset}) to {self.path}", expected=f"> {self.last_offset}", found=offset)
        rel = offset - self.base_offset
        if not 0 <= rel <= W.INT32_MAX:
            raise InvalidOffsetError("Offset does not fit in the index's int32 relative offset",
                                     expected=f"{self.base_offset} <= offset <= {self.base_offset + W.INT32_MAX}",
                                     found=offset)
        if not 0 <= position <= W.INT32_MAX:
            from ..errors import SegmentTooLargeError
            raise SegmentTooLargeError("Position does not fit in the index's int32 position",
                                       expected=f"0 <= position <= {W.INT32_MAX}", found=position)
        if self.is_full():
            raise InvalidOffsetError(f"Attempt to append to a full index (size = {self.entries})",
                                     expected=f"< {self.max_entries} entries", found=self.entries)
        self._append_raw(_OFFSET_ENTRY.pack(rel, position))


class TimeIndex(_Index):
    """`.timeindex`: (timestamp int64, relative offset int32) entries with strictly increasing
    timestamps; (T, O) says every record with timestamp > T comes after offset O (§5.2)."""

    entry_size = W.TIME_INDEX_ENTRY_SIZE
    key_kind = KEY_TIMESTAMP
    suffix = ".timeindex"
    _first_tail_slot = 1  # (T, base offset) is a real first entry when the first batch reached T
    _relative_offset_word = 2  # (timestamp int64, relative offset int32): the third int32 word

    @staticmethod
    def _relative_offset_at(data: Buffer, i: int) -> int:
        rel: int = _TIME_ENTRY.unpack_from(data, i * W.TIME_INDEX_ENTRY_SIZE)[1]
        return rel

    def entry(self, i: int) -> TimestampOffset:
        ts, rel = _TIME_ENTRY.unpack_from(self._buf, i * self.entry_size)
        return TimestampOffset(ts, self.base_offset + rel)

    def __iter__(self) -> Iterator[TimestampOffset]:
        return (self.entry(i) for i in range(self.entries))

    def is_full(self) -> bool:
        # the last slot is kept for the entry written when the segment is rolled or closed
        return self.entries >= self.max_entries - 1

    @property
    def last_entry(self) -> TimestampOffset | None:
        return self.entry(self.entries - 1) if self.entries else None

    def sanity_check(self) -> None:
        super().sanity_check()
        if self.entries and self.entry(self.entries - 1).timestamp < self.entry(0).timestamp:
            raise CorruptIndexError(
                f"Corrupt time index found, time index file ({self.path}) has non-zero size but the last "
                f"timestamp is less than the first timestamp", expected=f">= {self.entry(0).timestamp}",
                found=self.entry(self.entries - 1).timestamp, position=(self.entries - 1) * self.entry_size)

    def lookup(self, target_timestamp: int) -> TimestampOffset:
        """The largest entry with timestamp <= target, or (NO_TIMESTAMP, base offset) when none."""
        slot = self._search(target_timestamp)
        return TimestampOffset(W.NO_TIMESTAMP, self.base_offset) if slot < 0 else self.entry(slot)

    def lookup_offsets(self, targets: npt.ArrayLike) -> npt.NDArray[np.int64]:
        """Vectorised lookup(): the entry offset for each target timestamp."""
        slots = self._search_many(targets)
        if self.entries == 0:
            return np.full(len(slots), self.base_offset, dtype=np.int64)
        raw = np.frombuffer(self._buf, dtype=np.uint8, count=self.entries * 12).reshape(-1, 12)[:, 8:12]
        rel = raw.copy().view(">i4").ravel().astype(np.int64)
        return np.where(slots < 0, self.base_offset, self.base_offset + rel[np.maximum(slots, 0)])

    def maybe_append(self, timestamp: int, offset: int, skip_full_check: bool = False) -> bool:
        """Append (timestamp, offset) when the timestamp is larger than the last entry's; returns
        whether it did. Offsets and timestamps may not go backwards."""
        last = self.last_entry
        if last is not None:
            if offset < last.offset:
                raise InvalidOffsetError(
                    f"Attempt to append an offset ({offset}) to slot {self.entries} no larger than the last "
                    f"offset appended ({last.offset}) to {self.path}", expected=f">= {last.offset}", found=offset)
            if timestamp <= last.timestamp:
                return False
        if not skip_full_check and self.is_full():
            raise InvalidOffsetError(f"Attempt to append to a full time index (size = {self.entries})",
                                     expected=f"< {self.max_entries - 1} entries", found=self.entries)
        rel = offset - self.base_offset
        if not 0 <= rel <= W.INT32_MAX:
            raise InvalidOffsetError("Offset does not fit in the index's int32 relative offset",
                                     expected=f">= {self.base_offset}", found=offset)
        self._append_raw(_TIME_ENTRY.pack(timestamp, rel))
        return True


class TransactionIndex:
    """`.txnindex`: one 34-byte AbortedTxn per aborted transaction (kafka-format.md §5.5)."""

    suffix = ".txnindex"

    def __init__(self, base_offset: int, entries: Iterable[AbortedTxn] = (), *, path: PathLike | None = None) -> None:
        self.base_offset = base_offset
        self.path = os.fspath(path) if path is not None else None
        self.entries = list(entries)

    @classmethod
    def open(cls, path: PathLike, base_offset: int | None = None) -> TransactionIndex:
        from .. import _fs

        path = path if isinstance(path, str) else os.fspath(path)
        if base_offset is None:
            base_offset = _files.offset_from_file_name(_fs.basename(path))
        return cls(base_offset, cls.parse(_fs.read_bytes(path), path), path=path)

    @staticmethod
    def parse(data: BytesLike, path: PathLike | None = None) -> list[AbortedTxn]:
        es = W.TXN_INDEX_ENTRY_SIZE
        if len(data) % es:
            raise CorruptIndexError(f"Transaction index {path} is corrupt, its size is not a multiple of {es}",
                                    expected=f"a multiple of {es} bytes", found=f"{len(data)} bytes",
                                    position=len(data) - len(data) % es)
        out: list[AbortedTxn] = []
        for pos in range(0, len(data), es):
            version, pid, first, last, lso = _TXN_ENTRY.unpack_from(data, pos)
            if version != 0:
                raise CorruptIndexError("Unexpected aborted transaction version", expected=0, found=version,
                                        position=pos)
            out.append(AbortedTxn(pid, first, last, lso, version))
        return out

    def raw(self) -> bytes:
        return b"".join(_TXN_ENTRY.pack(t.version, t.producer_id, t.first_offset, t.last_offset,
                                        t.last_stable_offset) for t in self.entries)

    def append(self, txn: AbortedTxn) -> None:
        if self.entries and txn.last_offset <= self.entries[-1].last_offset:
            raise InvalidOffsetError("The last offset of appended transactions must increase sequentially",
                                     expected=f"> {self.entries[-1].last_offset}", found=txn.last_offset)
        if self.path is not None:
            entry = _TXN_ENTRY.pack(txn.version, txn.producer_id, txn.first_offset, txn.last_offset,
                                    txn.last_stable_offset)
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT | _files.O_CLOEXEC, 0o666)
            try:
                at = len(self.entries) * W.TXN_INDEX_ENTRY_SIZE
                try:
                    _files.write_all(fd, entry, at)
                except OSError as e:
                    _files.truncate_back(fd, at, self.path)
                    raise _files.write_error(e, self.path, "appending an aborted transaction") from e
            finally:
                os.close(fd)
        self.entries.append(txn)

    def truncate_entries(self, n: int) -> None:
        """Keep the first n entries (the file too): undoes appends after a failed write."""
        if n >= len(self.entries):
            return
        if self.path is not None and os.path.exists(self.path):
            fd = os.open(self.path, os.O_RDWR | _files.O_CLOEXEC)
            try:
                _files.truncate_back(fd, n * W.TXN_INDEX_ENTRY_SIZE, self.path)
            finally:
                os.close(fd)
        del self.entries[n:]

    def collect_aborted_txns(self, fetch_offset: int, upper_bound_offset: int) -> list[AbortedTxn]:
        """Aborted transactions overlapping [fetch_offset, upper_bound_offset) (TransactionIndex.collectAbortedTxns)."""
        return [t for t in self.entries if t.last_offset >= fetch_offset and t.first_offset < upper_bound_offset]

    def __len__(self) -> int:
        return len(self.entries)

    def __iter__(self) -> Iterator[AbortedTxn]:
        return iter(self.entries)
