"""Which files make up a partition: the one answer, local or in object storage, any layout.

`PartitionFiles.of(path)` names a partition directory's segments in offset order, each a
SegmentFiles (its `.log`, `.index`, `.timeindex`, `.txnindex`, by suffix), with the directory's
layout (kbatch.log.layout: a broker's `<20 digits>.log` names, Kafka's LocalTieredStorage,
Aiven's tiered storage), its topic and partition, and the tiered copies a listing left out
(`problems`). A local broker directory is listed by its broker names only (LogFileUtils: the
rule of kbatch.log.files); anything else by one listing through kbatch._fs, which also gives each
object's size. `find_partition_files(root)` is the same for every partition under a root. As
pyiceberg's FileIO answers "where are these bytes", this answers "which bytes make a partition":
Log.open, the index tools, the cleaner, the Spark planner and the tables all ask it.

`check_partition_dir` refuses a local directory that is not a partition before anything opens it.
"""
from __future__ import annotations

import os
import re
from typing import TYPE_CHECKING

from .. import _fs
from ..errors import UnknownTopicOrPartitionError
from . import files as _files
from .segment_files import SegmentFiles

if TYPE_CHECKING:
    from .._typing import PathLike


class PartitionFiles:
    """The files of one partition directory (see the module docstring). The segments are listed
    on first use (`relist()` lists again)."""

    def __init__(self, path: str, layout: str | None = None, topic: str | None = None,
                 partition: int | None = None) -> None:
        self.path = path
        self.remote = _fs.is_remote(path)
        self._layout = layout
        self.topic = topic
        self.partition = partition
        self._segments: list[SegmentFiles] | None = None
        self._problems: list[str] = []
        if topic is None and partition is None:  # from the names: a broker's rule first, then the layouts'
            parsed = None if self.remote else _files.parse_partition_dir(path)
            if parsed is not None:
                self.topic, self.partition = parsed
            else:
                from .layout import describe

                part = describe(path, [])
                self.topic, self.partition = part.topic, part.partition

    @classmethod
    def of(cls, path: PathLike) -> PartitionFiles:
        """The partition directory at `path` (a local path or a kbatch._fs URI)."""
        return cls(path if _fs.is_remote(path) else _fs.local_path(path))

    # ---- what the directory is
    @property
    def layout(self) -> str:
        """kbatch.log.layout's BROKER, TIERED, AIVEN (or "mixed"), from the names in the directory."""
        if self._layout is None:
            from .layout import BROKER, _layout_of

            try:
                self._layout = _layout_of(_fs.listdir(self.path))
            except OSError:
                self._layout = BROKER  # the listing reports it when the segments are asked for
        return self._layout

    @property
    def is_local_broker(self) -> bool:
        """A local directory of broker-named segments only: the one kind kbatch writes to."""
        from .layout import BROKER

        return not self.remote and self.layout == BROKER

    # ---- its segments
    def relist(self) -> PartitionFiles:
        """List the segments again (a retention race while opening them); returns self."""
        if self.is_local_broker:
            self._segments = [SegmentFiles(_files.segment_path(self.path, b, ""), b)
                              for b in _files.list_segment_bases(self.path)]
            self._problems = []
        else:
            from . import layout

            listing = layout.list_segments(self.path)
            self._segments, self._problems = listing.segments, list(listing.problems)
            if listing.layout != layout.BROKER or self._layout is None:
                self._layout = listing.layout
        return self

    @property
    def segments(self) -> list[SegmentFiles]:
        """Each segment's SegmentFiles, by base offset."""
        if self._segments is None:
            self.relist()
        assert self._segments is not None
        return self._segments

    @property
    def problems(self) -> list[str]:
        """Tiered copies the listing left out (incomplete uploads), one line each."""
        self.segments
        return list(self._problems)

    @property
    def base_offsets(self) -> list[int]:
        return [f.base_offset for f in self.segments if f.base_offset is not None]

    def log_paths(self) -> list[str]:
        """The segments' `.log` paths (or URIs), in offset order."""
        return [f.path(_files.LOG_SUFFIX) for f in self.segments]

    def file(self, name: str) -> str:
        """A file of the directory by name (a checkpoint, partition.metadata)."""
        return _fs.join(self.path, name)

    def snapshot(self, base_offset: int) -> str:
        """The producer snapshot a broker writes at a roll to `base_offset` (`<20 digits>.snapshot`)."""
        return self.file(_files.filename_prefix(base_offset) + ".snapshot")

    def __repr__(self) -> str:
        return f"PartitionFiles({self.path!r}, layout={self._layout!r})"


def find_partition_files(root: PathLike, require_segments: bool = True) -> list[PartitionFiles]:
    """The partitions under `root` (itself when it holds segments) in any layout, local or remote,
    sorted by (topic, partition): kbatch.log.layout.find_partitions, one listing per level."""
    from .layout import find_partitions

    root_path = root if _fs.is_remote(root) else os.fspath(root)
    return [PartitionFiles(p.path, p.layout, p.topic, p.partition)
            for p in find_partitions(root_path, require_segments=require_segments)]


def segment_log_paths(log_path: PathLike) -> list[str]:
    """A `.log` path as it is, or every broker-named segment's `.log` of a local partition directory."""
    from .layout import BROKER

    p = os.fspath(log_path)
    return PartitionFiles(p, BROKER).log_paths() if os.path.isdir(p) else [p]


_SEGMENT_NAME = re.compile(r"^\d+(-[A-Za-z0-9_-]+)?\.log$")


def check_partition_dir(path: str, writable: bool) -> None:
    """Refuse a local directory that is not a partition (UnknownTopicOrPartitionError): one holding
    partition directories (a broker's log directory), or, for reading, one with no segment that is
    not named <topic>-<partition> either (an empty partition is named so; a copy of one with
    segments may be named anything)."""
    try:
        names = os.listdir(path)
    except OSError:
        return  # the segment listing reports it
    parts = sorted(n for n in names if _files.parse_partition_dir(n) and os.path.isdir(os.path.join(path, n)))
    has_segments = any(_SEGMENT_NAME.match(n) for n in names)  # broker or tiered-storage names
    if parts and not has_segments:
        raise UnknownTopicOrPartitionError(
            "A log directory, not a partition: open one of its partitions", expected="a <topic>-<partition> directory",
            found=f"{path} holding {', '.join(parts[:3])}{', ...' if len(parts) > 3 else ''}")
    if not writable and not has_segments and _files.parse_partition_dir(os.path.basename(path.rstrip(os.sep))) is None:
        raise UnknownTopicOrPartitionError("Not a partition directory: no segments, and not named <topic>-<partition>",
                                           expected="a partition directory", found=path)


__all__ = ["PartitionFiles", "find_partition_files", "segment_log_paths", "check_partition_dir"]
