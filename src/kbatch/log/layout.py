"""Partition directory layouts: which files make up a partition's segments, on local disk or in
object storage (kbatch._fs).

Three layouts are read (docs/remote.md):

- broker: `<topic>-<partition>/<20-digit base offset>.log` with `.index`, `.timeindex`,
  `.txnindex` beside it (LogFileUtils; also a broker log directory copied to object storage).
- Kafka's LocalTieredStorage (the RemoteStorageManager of Kafka's own tests and examples):
  `<topic>-<partition>-<topic id>/<start offset>-<segment id>.log` with `.index`, `.timeindex`,
  `.txnindex` (optional), `.snapshot` and `.leader_epoch_checkpoint` beside it; the offset is
  not zero-padded, ids are Kafka's 22-character URL-safe base64 Uuids.
- Aiven's tiered-storage-for-apache-kafka: `[prefix]<topic>-<topic id>/<partition>/<20-digit start
  offset>-<segment id>.log`, all indexes in one `.indexes` object (offset, time, producer
  snapshot, leader epoch, transaction, back to back) and a `.rsm-manifest` JSON naming their byte
  ranges. Only segments the plugin stored untransformed are read: a manifest with
  `"compression": true` (zstd chunks) or an `"encryption"` section is refused with
  UnsupportedLayoutError, and so is a chunk index that is not the identity.

A tiered copy is immutable and read-only. kbatch reads the objects present, not the broker's
`__remote_log_metadata` topic: a fileset missing a required file (an upload cut short: Aiven
writes the manifest last) is left out and named in `problems`, and two complete copies of the
same start offset (a copy retried by a new leader) are refused, since only that topic says which
one the broker uses.
"""
from __future__ import annotations

import json
import os
import re
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any, NamedTuple

from . import files as _files
from .. import _fs
from ..errors import StorageError, UnsupportedLayoutError
from .segment_files import RemoteSegmentFiles, SegmentFiles

if TYPE_CHECKING:
    from .._typing import PathLike
    from ..record.file_records import FileRecords

BROKER, TIERED, AIVEN = "broker", "kafka-local-tiered-storage", "aiven-tiered-storage"

_UUID = r"[A-Za-z0-9_-]{22}"
_BROKER_SEGMENT = _files.SEGMENT_FILE_RE  # LogFileUtils' names (kbatch.log.files)
_TIERED_SEGMENT = re.compile(rf"^(\d+)-({_UUID})\.(log|index|timeindex|txnindex|snapshot|leader_epoch_checkpoint)$")
_AIVEN_SEGMENT = re.compile(rf"^(\d{{20}})-({_UUID})\.(log|indexes|rsm-manifest)$")
_BROKER_DIR = re.compile(r"^(.+)-(\d+)$")
_TIERED_DIR = re.compile(rf"^(.+)-(\d+)-({_UUID})$")
_AIVEN_TOPIC_DIR = re.compile(rf"^(.+)-({_UUID})$")
_AIVEN_INDEXES = {".index": "offset", ".timeindex": "timestamp", ".txnindex": "transaction"}


class Partition(NamedTuple):
    """A partition directory: its topic and partition (None when the name does not say), its path
    and its layout."""

    topic: str | None
    partition: int | None
    path: str
    layout: str


class Listing(NamedTuple):
    """A partition directory's segments (SegmentFiles, by base offset) and what was left out."""

    layout: str
    segments: list[SegmentFiles]
    problems: list[str]


def _is_segment_name(name: str) -> bool:
    return name.endswith(".log") and bool(_BROKER_SEGMENT.match(name) or _TIERED_SEGMENT.match(name)
                                          or _AIVEN_SEGMENT.match(name))


def _layout_of(names: Iterable[str]) -> str:
    if any(_AIVEN_SEGMENT.match(n) for n in names):
        return AIVEN
    if any(_TIERED_SEGMENT.match(n) and not _BROKER_SEGMENT.match(n) for n in names):
        return TIERED
    return BROKER


def describe(path: str, names: Iterable[str] | None = None) -> Partition:
    """What a partition directory is: topic and partition from its name (and its parent's, for
    Aiven's `<topic>-<id>/<partition>`), the layout from the names in it."""
    name = _fs.basename(path)
    layout = _layout_of(_fs.listdir(path) if names is None else names)
    m = _TIERED_DIR.match(name)
    if m:
        return Partition(m.group(1), int(m.group(2)), path, layout)
    if name.isdigit():
        parent = _AIVEN_TOPIC_DIR.match(_fs.basename(_fs.dirname(path)))
        if parent:
            return Partition(parent.group(1), int(name), path, layout)
    m = _BROKER_DIR.match(name)
    if m:
        return Partition(m.group(1), int(m.group(2)), path, layout)
    return Partition(None, None, path, layout)


def find_partitions(root: str, require_segments: bool = True) -> list[Partition]:
    """The partition directories under `root` (itself when it holds segments): broker `<topic>-<p>`
    folders, LocalTieredStorage `<topic>-<p>-<id>` folders and Aiven `<topic>-<id>/<p>` folders,
    sorted by (topic, partition). One listing per directory level."""
    entries = _fs.scandir(root)
    names = [e.name for e in entries]
    if any(_is_segment_name(n) for n in names):
        return [describe(root, names)]
    out: list[Partition] = []
    for e in entries:
        if not e.is_dir:
            continue
        if _TIERED_DIR.match(e.name) or _BROKER_DIR.match(e.name):
            sub = _fs.listdir(e.path)
            if not require_segments or any(_is_segment_name(n) for n in sub):
                out.append(describe(e.path, sub))
        elif _AIVEN_TOPIC_DIR.match(e.name):
            for p in _fs.scandir(e.path):
                if p.is_dir and p.name.isdigit():
                    sub = _fs.listdir(p.path)
                    if not require_segments or any(_is_segment_name(n) for n in sub):
                        out.append(describe(p.path, sub))
    if not out and _BROKER_DIR.match(_fs.basename(root)) and not require_segments:
        return [describe(root, names)]
    out.sort(key=lambda p: (p.topic or "", p.partition if p.partition is not None else -1, p.path))
    return out


def list_segments(directory: str) -> Listing:
    """The segments of one partition directory, any layout, local or remote, from one listing."""
    remote = _fs.is_remote(directory)
    entries = _fs.scandir(directory)
    groups: dict[str, dict[str, tuple[int | None, int | None]]] = {}   # stem -> {suffix: (size, mtime_ns)}
    kinds: dict[str, tuple[str, int, str | None]] = {}                 # stem -> (layout, base offset, segment id)
    for e in entries:  # directories named like segment files stay in: opening them is the error to report
        for layout, rx in ((BROKER, _BROKER_SEGMENT), (AIVEN, _AIVEN_SEGMENT), (TIERED, _TIERED_SEGMENT)):
            m = rx.match(e.name)
            if m:
                suffix = m.group(m.lastindex or 0)  # each pattern ends with the suffix's group
                stem = e.name[:e.name.rindex("." + suffix)]
                groups.setdefault(stem, {})["." + suffix] = (e.size, e.mtime_ns)
                kinds[stem] = (layout, int(m.group(1)), m.group(2) if layout != BROKER else None)
                break
    problems: list[str] = []
    found: dict[int, SegmentFiles] = {}
    layouts: set[str] = set()
    for stem, files in sorted(groups.items()):
        layout, base, seg_id = kinds[stem]
        path = _fs.join(directory, stem)
        if ".log" not in files:
            if layout != BROKER:
                problems.append(f"{path}: an incomplete tiered copy (no .log; files {', '.join(sorted(files))}): left out")
            continue
        if layout == TIERED and not {".index", ".timeindex"} <= set(files):
            problems.append(f"{path}.log: an incomplete tiered copy (missing "
                            f"{', '.join(sorted({'.index', '.timeindex'} - set(files)))}): left out")
            continue
        if layout == AIVEN and not {".indexes", ".rsm-manifest"} <= set(files):
            problems.append(f"{path}.log: an incomplete tiered copy (missing "
                            f"{', '.join(sorted({'.indexes', '.rsm-manifest'} - set(files)))}; the plugin writes the "
                            f"manifest last): left out")
            continue
        layouts.add(layout)
        if base in found:
            other = found[base]
            raise UnsupportedLayoutError(
                f"two copies of the segment starting at offset {base}: {other.stem}.log and {path}.log (a copy retried "
                f"by another leader); kbatch reads the objects, not __remote_log_metadata, so it cannot tell which "
                f"one the broker uses: move the other away", path=directory)
        inner: SegmentFiles = RemoteSegmentFiles(path, base, files) if remote else SegmentFiles(path, base)
        found[base] = AivenSegmentFiles(inner) if layout == AIVEN else inner
    layout = layouts.pop() if len(layouts) == 1 else (BROKER if not layouts else "mixed")
    return Listing(layout, [found[b] for b in sorted(found)], problems)


def segment_files_for(log_path: str) -> SegmentFiles:
    """The SegmentFiles of one `.log` path of any layout, local or remote (base offset None when
    the name carries none)."""
    name = _fs.basename(log_path)
    stem = log_path[:-len(".log")] if log_path.endswith(".log") else log_path
    base = None
    for rx in (_BROKER_SEGMENT, _AIVEN_SEGMENT, _TIERED_SEGMENT):
        m = rx.match(name)
        if m:
            base = int(m.group(1))
            break
    if _fs.is_remote(log_path):
        sizes: dict[str, tuple[int | None, int | None]] = {}
        for e in _fs.scandir(_fs.dirname(log_path)):  # one listing gives every sibling's size
            if e.name.startswith(_fs.basename(stem) + ".") and not e.is_dir:
                sizes[e.name[len(_fs.basename(stem)):]] = (e.size, e.mtime_ns)
        if ".log" not in sizes:
            raise FileNotFoundError(2, "No such file or directory", log_path)
        inner: SegmentFiles = RemoteSegmentFiles(stem, base, sizes)
    else:
        inner = SegmentFiles(stem, base)
    return AivenSegmentFiles(inner) if _AIVEN_SEGMENT.match(name) else inner


class AivenSegmentFiles(SegmentFiles):
    """An Aiven tiered-storage segment: `.log` as uploaded, indexes as byte ranges of `.indexes`
    named by `.rsm-manifest`. Refuses manifests of transformed (compressed, encrypted) segments."""

    def __init__(self, inner: SegmentFiles) -> None:
        super().__init__(inner.stem, inner.base_offset)
        self.inner = inner
        self.remote = inner.remote
        manifest_path = inner.path(".rsm-manifest")
        try:
            self.manifest: Any = json.loads(_read(inner, ".rsm-manifest", None))  # checked below
        except ValueError as e:
            raise UnsupportedLayoutError(f"not a segment manifest ({e})", path=manifest_path) from None
        m = self.manifest
        if not isinstance(m, dict) or str(m.get("version")) != "1" or "segmentIndexes" not in m:
            raise UnsupportedLayoutError("not a version 1 segment manifest (version, chunkIndex, segmentIndexes)",
                                         path=manifest_path)
        if m.get("encryption"):
            raise UnsupportedLayoutError("the segment is encrypted by the tiered-storage plugin (the manifest has an "
                                         "encryption section); kbatch reads only segments stored as plain Kafka bytes",
                                         path=manifest_path)
        if m.get("compression"):
            raise UnsupportedLayoutError("the segment is stored as compressed chunks (\"compression\": true in the "
                                         "manifest); kbatch reads only segments stored as plain Kafka bytes",
                                         path=manifest_path)
        ci = m.get("chunkIndex") or {}
        if ci.get("type") != "fixed" or ci.get("transformedChunkSize") != ci.get("originalChunkSize"):
            raise UnsupportedLayoutError(f"the segment's chunks are transformed (chunk index {ci.get('type')!r}, "
                                         f"{ci.get('originalChunkSize')} -> {ci.get('transformedChunkSize')} bytes); "
                                         f"kbatch reads only untransformed chunks", path=manifest_path)
        self.original_size: int | None = ci.get("originalFileSize")

    def path(self, suffix: str) -> str:
        return self.inner.path(suffix)

    def open_log(self, writable: bool = False, create: bool = False) -> FileRecords:
        if writable or create:
            raise StorageError("tiered-storage segments are read-only for kbatch", path=self.path(".log"))
        log = self.inner.open_log()
        if self.original_size is not None and log.size_in_bytes != self.original_size:
            log.close()
            raise UnsupportedLayoutError(f"the manifest says the segment holds {self.original_size} bytes, the .log "
                                         f"object {log.size_in_bytes}", path=self.path(".log"))
        return log

    def _range(self, suffix: str) -> tuple[int, int] | None:
        entry = (self.manifest.get("segmentIndexes") or {}).get(_AIVEN_INDEXES[suffix])
        if not entry or not entry.get("size"):
            return None
        return int(entry["position"]), int(entry["size"])

    def read_index(self, suffix: str) -> bytes:
        r = self._range(suffix)
        if r is None:
            raise FileNotFoundError(2, f"no {suffix} in the segment's .indexes", self.path(suffix))
        return _read(self.inner, ".indexes", r)

    def has(self, suffix: str) -> bool:
        return self._range(suffix) is not None

    def log_replaced(self, log: FileRecords) -> bool:
        return False

    def log_mtime_ms(self, log: FileRecords) -> int:
        return self.inner.log_mtime_ms(log)


def _read(files: SegmentFiles, suffix: str, rng: tuple[int, int] | None) -> bytes:
    """A whole file of a segment, or (position, size) of it, local or remote."""
    path = files.path(suffix)
    if not files.remote:
        if rng is None:
            return _files.read_whole(path)
        fd = _files.open_regular(path)
        try:
            return _files.pread_exact(fd, rng[1], rng[0], path)
        finally:
            os.close(fd)
    size: int | None
    mtime: int | None
    size, mtime = getattr(files, "sizes", {}).get(suffix, (None, None))
    f = _fs.RemoteFile(path, size, mtime)
    try:
        if rng is None:
            return f.pread(f.size, 0) if f.size else b""
        return f.pread(rng[1], rng[0])
    finally:
        f.close()


__all__ = ["BROKER", "TIERED", "AIVEN", "Partition", "Listing", "describe", "find_partitions", "list_segments",
           "AivenSegmentFiles", "segment_files_for"]
