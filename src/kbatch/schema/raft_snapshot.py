"""KRaft snapshots: `<20-digit end offset>-<10-digit epoch>.checkpoint` files of `__cluster_metadata`
(raft's Snapshots / SnapshotPath) and `bootstrap.checkpoint`, and the raft control records in them.

A snapshot file holds ordinary v2 record batches: a control batch with a SNAPSHOT_HEADER record,
batches of metadata records (kbatch.schema.metadata_records), and a control batch with a SNAPSHOT_FOOTER.
Control record values are Kafka messages (SnapshotHeaderRecord, SnapshotFooterRecord,
KRaftVersionRecord, VotersRecord) read at version 0 as ControlRecordUtils does; DumpLogSegments
prints them as `SnapshotHeader {json}`, `SnapshotFooter {json}`, `KRaftVersion {json}`,
`KRaftVoters {json}`.
"""
from __future__ import annotations

import json
import os
import re
from typing import TYPE_CHECKING, NamedTuple

from .. import _wire as W
from ..errors import KBatchError
from . import Message, read_message, to_json

if TYPE_CHECKING:
    from .._typing import Buffer, PathLike

SUFFIX = ".checkpoint"                      # Snapshots.SUFFIX
BOOTSTRAP_FILENAME = "bootstrap.checkpoint"  # BootstrapDirectory.BINARY_BOOTSTRAP_FILENAME
_NAME = re.compile(r"^(\d{20})-(\d{10})\.checkpoint(\.part|\.deleted)?$")

# control record type -> (schema, DumpLogSegments label)
CONTROL_MESSAGES = {
    W.ControlRecordType.SNAPSHOT_HEADER: ("SnapshotHeaderRecord", "SnapshotHeader"),
    W.ControlRecordType.SNAPSHOT_FOOTER: ("SnapshotFooterRecord", "SnapshotFooter"),
    W.ControlRecordType.KRAFT_VERSION: ("KRaftVersionRecord", "KRaftVersion"),
    W.ControlRecordType.KRAFT_VOTERS: ("VotersRecord", "KRaftVoters"),
}
CONTROL_RECORD_VERSION = 0  # ControlRecordUtils.*_CURRENT_VERSION


class SnapshotId(NamedTuple):
    end_offset: int
    epoch: int
    bootstrap: bool = False


def snapshot_id(path: PathLike) -> SnapshotId:
    """The end offset and epoch a snapshot file is named after (Snapshots.parse), or the bootstrap
    snapshot (offset 0, epoch 0)."""
    name = os.path.basename(os.fspath(path))
    if name == BOOTSTRAP_FILENAME:
        return SnapshotId(0, 0, True)
    m = _NAME.match(name)
    if not m:
        from ..errors import FileNameError
        raise FileNameError(f"{path}: a KRaft snapshot is named <20-digit end offset>-<10-digit epoch>.checkpoint")
    return SnapshotId(int(m.group(1)), int(m.group(2)))


def snapshot_filename(end_offset: int, epoch: int) -> str:
    """Snapshots.filenameFromSnapshotId + SUFFIX."""
    return f"{end_offset:020d}-{epoch:010d}{SUFFIX}"


def control_record_json(control_type: W.ControlRecordType, value: Buffer | None) -> Message | None:
    """The decoded value of a raft control record as Kafka's JSON converter writes it (written at
    the version its own `version` field names), or None for other control types."""
    spec = CONTROL_MESSAGES.get(control_type)
    if spec is None or value is None:
        return None
    name = spec[0]
    try:
        data, _ = read_message(name, CONTROL_RECORD_VERSION, bytes(value), exact=False)
        return to_json(name, int(data.get("version", CONTROL_RECORD_VERSION)), data)
    except (KBatchError, KeyError) as e:
        return {"error": str(e)}


def control_record_text(control_type: W.ControlRecordType, value: Buffer | None) -> str | None:
    """` SnapshotHeader {...}` style text (without the leading space), or None."""
    body = control_record_json(control_type, value)
    if body is None:
        return None
    return f"{CONTROL_MESSAGES[control_type][1]} {json.dumps(body, separators=(',', ':'), ensure_ascii=False)}"


__all__ = ["SUFFIX", "BOOTSTRAP_FILENAME", "SnapshotId", "snapshot_id", "snapshot_filename", "control_record_json",
           "control_record_text", "CONTROL_MESSAGES"]
