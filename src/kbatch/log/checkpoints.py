"""The text files a broker keeps beside its segments (kafka-format.md §6.1), read and written as
Kafka's CheckpointFile / OffsetCheckpointFile / LeaderEpochCheckpointFile / PartitionMetadataFile do.

- `CheckpointFile` format: a version line, an entry-count line, then one entry per line. An empty
  file reads as no entries; a wrong version, a malformed line or a count that differs from the
  lines is an error (CorruptCheckpointError naming the file, the line and its byte position).
- per partition directory: `leader-epoch-checkpoint` (version 0, "epoch startOffset") and
  `partition.metadata` ("version: 0" and "topic_id: <Kafka Uuid>").
- per log directory: `recovery-point-offset-checkpoint`, `replication-offset-checkpoint`,
  `log-start-offset-checkpoint`, `cleaner-offset-checkpoint` (version 0, "topic partition offset").

- kbatch's own, per partition directory: `.kbatch-recovery-checkpoint` (RecoveryCheckpoint below):
  the recovery point and clean-shutdown flag a kbatch writer keeps, as a broker keeps them per log
  directory (`recovery-point-offset-checkpoint`, `.kafka_cleanshutdown`). The decision of which
  segments a writer's open recovers is made here, in one place.

Writes go through a temporary file and an atomic rename, as Kafka's do.
"""
from __future__ import annotations

import logging
import os
import re
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, NamedTuple, TypeVar

from . import files as _files
from ..errors import CorruptCheckpointError

if TYPE_CHECKING:
    from .._typing import PathLike

_E = TypeVar("_E")
#: an offset checkpoint's entry: ((topic, partition), offset)
OffsetEntry = tuple[tuple[str, int], int]

LEADER_EPOCH_CHECKPOINT = "leader-epoch-checkpoint"
PARTITION_METADATA = "partition.metadata"
RECOVERY_POINT_CHECKPOINT = "recovery-point-offset-checkpoint"
REPLICATION_CHECKPOINT = "replication-offset-checkpoint"
LOG_START_OFFSET_CHECKPOINT = "log-start-offset-checkpoint"
CLEANER_CHECKPOINT = "cleaner-offset-checkpoint"
LOG_DIR_CHECKPOINTS = (RECOVERY_POINT_CHECKPOINT, REPLICATION_CHECKPOINT, LOG_START_OFFSET_CHECKPOINT,
                       CLEANER_CHECKPOINT)
CURRENT_VERSION = 0  # OffsetCheckpointFile / LeaderEpochCheckpointFile / PartitionMetadataFile
_WS = re.compile(r"\s+")


class EpochEntry(NamedTuple):
    """A leader epoch and the first offset written in it."""

    epoch: int
    start_offset: int


class PartitionMetadata(NamedTuple):
    version: int
    topic_id: str  # Kafka's Uuid string (URL-safe base64 of 16 bytes)


def _lines(text: str) -> Iterator[tuple[str, int]]:
    """(line, byte position) pairs, as BufferedReader.readLine splits them."""
    pos = 0
    for line in text.splitlines(keepends=True):
        yield line.rstrip("\r\n"), pos
        pos += len(line.encode("utf-8"))


def _read_text(path: PathLike) -> str:
    """A broker text file's contents. Local files go through open_regular (a FIFO or directory
    named like the file is a StorageError, never a hang); URIs through kbatch._fs."""
    from .. import _fs

    return _fs.read_bytes(path).decode("utf-8", errors="replace")


def _read(path: PathLike, parse_entry: Callable[[str], _E | None]) -> list[_E]:
    path = path if isinstance(path, str) else os.fspath(path)
    lines = list(_lines(_read_text(path)))

    def malformed(line: str, pos: int) -> CorruptCheckpointError:
        return CorruptCheckpointError(f"Malformed line in checkpoint file [{path}]: {line}", position=pos,
                                      found=line)

    if not lines:
        return []
    line, pos = lines[0]
    try:
        version = int(line)
    except ValueError:
        raise malformed(line, pos) from None
    if version != CURRENT_VERSION:
        raise CorruptCheckpointError(f"Unrecognised version:{version}, expected version: {CURRENT_VERSION} in "
                                     f"checkpoint file at: {path}", position=pos, expected=CURRENT_VERSION,
                                     found=version)
    if len(lines) < 2:
        return []
    line, pos = lines[1]
    try:
        expected = int(line)
    except ValueError:
        raise malformed(line, pos) from None
    entries: list[_E] = []
    for line, pos in lines[2:]:
        entry = parse_entry(line)
        if entry is None:
            raise malformed(line, pos)
        entries.append(entry)
    if len(entries) != expected:
        raise CorruptCheckpointError(f"Expected [{expected}] entries in checkpoint file [{path}], but found only "
                                     f"[{len(entries)}]", position=lines[1][1], expected=expected, found=len(entries))
    return entries


def _write(path: PathLike, entries: list[str]) -> None:
    body = f"{CURRENT_VERSION}\n{len(entries)}\n" + "".join(f"{e}\n" for e in entries)
    _files.atomic_write(os.fspath(path), body.encode("utf-8"))


def _epoch_entry(line: str) -> EpochEntry | None:
    parts = _WS.split(line)
    if len(parts) != 2:
        return None
    try:
        return EpochEntry(int(parts[0]), int(parts[1]))
    except ValueError:
        return None


def _offset_entry(line: str) -> OffsetEntry | None:
    parts = _WS.split(line)
    if len(parts) != 3:
        return None
    try:
        return (parts[0], int(parts[1])), int(parts[2])
    except ValueError:
        return None


def read_leader_epoch_checkpoint(path: PathLike) -> list[EpochEntry]:
    """[EpochEntry] of a `leader-epoch-checkpoint`, in file order."""
    return _read(path, _epoch_entry)


def write_leader_epoch_checkpoint(path: PathLike, entries: Iterable[tuple[int, int]]) -> None:
    _write(path, [f"{int(e[0])} {int(e[1])}" for e in entries])


def read_offset_checkpoint(path: PathLike) -> dict[tuple[str, int], int]:
    """{(topic, partition): offset} of an offset checkpoint file (recovery point, replication, log
    start offset, cleaner)."""
    return dict(_read(path, _offset_entry))


def write_offset_checkpoint(path: PathLike, offsets: Mapping[tuple[str, int], int]) -> None:
    _write(path, [f"{t} {p} {o}" for (t, p), o in offsets.items()])


def read_partition_metadata(path: PathLike) -> PartitionMetadata:
    """`partition.metadata` (PartitionMetadataReadBuffer): "version: N" then "topic_id: <uuid>"."""
    from ..schema import uuid_bytes

    path = path if isinstance(path, str) else os.fspath(path)
    lines = list(_lines(_read_text(path)))

    def malformed(i: int) -> CorruptCheckpointError:
        line, pos = lines[i] if i < len(lines) else ("", sum(len(x.encode()) for x, _ in lines))
        return CorruptCheckpointError(f"Malformed line in checkpoint file [{path}]: {line}", position=pos, found=line)

    if not lines:
        raise malformed(0)
    parts = re.split(r":\s+", lines[0][0])
    if len(parts) != 2:
        raise malformed(0)
    try:
        version = int(parts[1])
    except ValueError:
        raise malformed(0) from None
    if version < CURRENT_VERSION:
        raise CorruptCheckpointError(f"Unrecognized version of partition metadata file + ({path}): {version}",
                                     position=0, expected=f">= {CURRENT_VERSION}", found=version)
    if len(lines) < 2:
        raise malformed(1)
    parts = re.split(r":\s+", lines[1][0])
    if len(parts) != 2:
        raise malformed(1)
    try:
        raw = uuid_bytes(parts[1])
    except ValueError:
        raise malformed(1) from None
    if raw == bytes(16):
        raise CorruptCheckpointError(f"Invalid topic ID in partition metadata file ({path})", position=lines[1][1],
                                     found=parts[1])
    return PartitionMetadata(version, parts[1])


def write_partition_metadata(path: PathLike, topic_id: str) -> None:
    """PartitionMetadata.encode: no newline after the topic id, as Kafka writes it."""
    _files.atomic_write(os.fspath(path), f"version: {CURRENT_VERSION}\ntopic_id: {topic_id}".encode("utf-8"))


# ------------------------------------------------------------------------------------ kbatch's recovery checkpoint
# A broker keeps, per log directory, `.kafka_cleanshutdown` (written on a clean shutdown, deleted
# on start) and `recovery-point-offset-checkpoint` (per partition, the offset below which
# everything was flushed). After an unclean shutdown it recovers (re-reads, CRC-checks and
# re-indexes) every segment holding offsets at or above the recovery point; after a clean one,
# none (LogLoader). kbatch writes partition directories on their own, so it records the same two
# facts per partition directory, in one file written atomically:
#
#     <partition dir>/.kbatch-recovery-checkpoint
#         kbatch-recovery-checkpoint 0
#         recovery-point 1234
#         clean-shutdown false
#
# - a writer's open reads it (missing or unreadable: unclean, recovery point 0, so everything is
#   checked, as a broker does without its checkpoint), recovers, then writes clean-shutdown false
#   with the recovery point it has proved;
# - Log.flush() fsyncs and moves the recovery point to the log end offset;
# - Log.close() fsyncs and writes clean-shutdown true with the log end offset.
RECOVERY_CHECKPOINT_FILE = ".kbatch-recovery-checkpoint"
_RECOVERY_VERSION = 0
logger = logging.getLogger("kbatch.log")


@dataclass(frozen=True)
class RecoveryCheckpoint:
    """A partition directory's recovery point and clean-shutdown flag."""

    recovery_point: int = 0
    clean_shutdown: bool = False

    @staticmethod
    def path(directory: PathLike) -> str:
        return os.path.join(os.fspath(directory), RECOVERY_CHECKPOINT_FILE)

    @classmethod
    def read(cls, directory: PathLike) -> "RecoveryCheckpoint":
        """The directory's checkpoint; a missing or unreadable one means "unclean, from offset 0"."""
        p = cls.path(directory)
        try:
            text = _files.read_whole(p).decode("ascii")
        except FileNotFoundError:
            return cls()
        except (OSError, UnicodeDecodeError) as e:
            logger.warning("Ignoring unreadable recovery checkpoint %s (%s): recovering every segment", p, e)
            return cls()
        fields: dict[str, str] = {}
        for line in text.splitlines():
            parts = line.split()
            if len(parts) == 2:
                fields[parts[0]] = parts[1]
        try:
            if int(fields["kbatch-recovery-checkpoint"]) != _RECOVERY_VERSION:
                raise ValueError(f"version {fields['kbatch-recovery-checkpoint']}")
            rp = int(fields["recovery-point"])
            clean = {"true": True, "false": False}[fields["clean-shutdown"]]
            if rp < 0:
                raise ValueError(f"recovery point {rp}")
        except (KeyError, ValueError) as e:
            logger.warning("Ignoring malformed recovery checkpoint %s (%s): recovering every segment", p, e)
            return cls()
        return cls(rp, clean)

    def write(self, directory: PathLike) -> None:
        _files.atomic_write(self.path(directory),
                            (f"kbatch-recovery-checkpoint {_RECOVERY_VERSION}\nrecovery-point {self.recovery_point}\n"
                             f"clean-shutdown {'true' if self.clean_shutdown else 'false'}\n").encode("ascii"))

    def segments_to_recover(self, bases: list[int]) -> list[int]:
        """Base offsets of the segments a writer's open must recover: none after a clean shutdown
        (the active segment is re-read anyway, to resume appending), else every segment holding
        offsets at or above the recovery point (LogLoader.recoverLog)."""
        if self.clean_shutdown:
            return []
        out = []
        for i, base in enumerate(bases):
            nxt = bases[i + 1] if i + 1 < len(bases) else None
            if nxt is None or nxt > self.recovery_point:
                out.append(base)
        return out


__all__ = ["EpochEntry", "PartitionMetadata", "read_leader_epoch_checkpoint", "write_leader_epoch_checkpoint",
           "read_offset_checkpoint", "write_offset_checkpoint", "read_partition_metadata", "write_partition_metadata",
           "LEADER_EPOCH_CHECKPOINT", "PARTITION_METADATA", "RECOVERY_POINT_CHECKPOINT", "REPLICATION_CHECKPOINT",
           "LOG_START_OFFSET_CHECKPOINT", "CLEANER_CHECKPOINT", "LOG_DIR_CHECKPOINTS", "RecoveryCheckpoint",
           "RECOVERY_CHECKPOINT_FILE"]
