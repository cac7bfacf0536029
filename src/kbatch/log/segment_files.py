"""Where one segment's files are (the `.log` and its `.index`, `.timeindex`, `.txnindex`, by
suffix): SegmentFiles on local disk, RemoteSegmentFiles in object storage (kbatch._fs), read-only
by ranges. kbatch.log.layout adds Aiven's one-object indexes; kbatch.log.partition_files lists a
partition's segments as these."""
from __future__ import annotations

import os

from ..errors import StorageError
from ..record.file_records import FileRecords, SourceFileRecords
from . import files as _files


# ------------------------------------------------------------------------------------ where a segment's files are
class SegmentFiles:
    """Where one segment's files are: `<stem>.log`, `<stem>.index`, `<stem>.timeindex`,
    `<stem>.txnindex` on local disk. Broker directories name the stem by the 20-digit base offset;
    tiered-storage layouts (kbatch.log.layout) name it otherwise and may keep their files remote."""

    remote = False

    def __init__(self, stem: str, base_offset: int | None) -> None:
        self.stem = stem
        self.base_offset = base_offset  # None: a .log named without one (kbatch.log.layout.segment_files_for)

    def path(self, suffix: str) -> str:
        return self.stem + suffix

    def open_log(self, writable: bool = False, create: bool = False) -> FileRecords:
        return FileRecords(self.path(_files.LOG_SUFFIX), writable=writable, create=create)

    def read_index(self, suffix: str) -> bytes:
        """An index file's bytes (FileNotFoundError when there is none)."""
        return _files.read_whole(self.path(suffix))

    def has(self, suffix: str) -> bool:
        return os.path.exists(self.path(suffix))

    def log_replaced(self, log: FileRecords) -> bool:
        """Whether the .log at this path is no longer the file `log` opened (its indexes then
        belong to the new one)."""
        return _files.path_identity(self.path(_files.LOG_SUFFIX)) != log.identity

    def log_mtime_ms(self, log: FileRecords) -> int:
        try:
            return _files.mtime_ms(log.path)
        except FileNotFoundError:  # deleted after this reader opened it: its bytes are still ours
            return os.fstat(log._fd_or_raise()).st_mtime_ns // 1_000_000


class RemoteSegmentFiles(SegmentFiles):
    """A segment's files in object storage (or any kbatch._fs URI): read-only, by ranges. `sizes`
    holds the listing's {suffix: (size, mtime_ns)}, so opening costs no metadata request."""

    remote = True

    def __init__(self, stem: str, base_offset: int | None,
                 sizes: dict[str, tuple[int | None, int | None]] | None = None) -> None:
        super().__init__(stem, base_offset)
        self.sizes = sizes or {}

    def open_log(self, writable: bool = False, create: bool = False) -> FileRecords:
        from .. import _fs

        if writable or create:
            raise StorageError("remote segments are read-only for kbatch", path=self.path(_files.LOG_SUFFIX))
        size, mtime = self.sizes.get(_files.LOG_SUFFIX, (None, None))
        return SourceFileRecords(_fs.RemoteFile(self.path(_files.LOG_SUFFIX), size, mtime))

    def read_index(self, suffix: str) -> bytes:
        from .. import _fs

        if self.sizes and suffix not in self.sizes:
            raise FileNotFoundError(2, "No such file or directory", self.path(suffix))
        size, mtime = self.sizes.get(suffix, (None, None))
        f = _fs.RemoteFile(self.path(suffix), size, mtime)
        try:
            return f.pread(f.size, 0) if f.size else b""
        finally:
            f.close()

    def has(self, suffix: str) -> bool:
        from .. import _fs

        return suffix in self.sizes if self.sizes else _fs.exists(self.path(suffix))

    def log_replaced(self, log: FileRecords) -> bool:
        return False  # objects are immutable: a new copy is a new name

    def log_mtime_ms(self, log: FileRecords) -> int:
        mt = log.source.mtime_ns if isinstance(log, SourceFileRecords) else None
        return 0 if mt is None else int(mt) // 1_000_000


__all__ = ["SegmentFiles", "RemoteSegmentFiles"]
