"""Records and control records (DefaultRecord, LegacyRecord, EndTransactionMarker).

`Record` is the backend's record class (a cdef class in the Cython core, a slotted class in the
pure twin); both compare equal field by field.
"""
from __future__ import annotations

import struct
from typing import TYPE_CHECKING, NamedTuple

from .. import _wire as W
from ..errors import InvalidRecordError

if TYPE_CHECKING:
    from .._core import Record


class ControlRecord(NamedTuple):
    """A decoded control record: the marker type and, for COMMIT/ABORT, the coordinator epoch."""

    offset: int
    version: int
    type: W.ControlRecordType
    coordinator_epoch: int | None


def parse_control_record(record: Record) -> ControlRecord:
    """Read a control record's key (version, type) and, for transaction markers, its value.

    Kafka's rules: a key shorter than 4 bytes or with a negative version is invalid; an unknown
    type is UNKNOWN (ignored, not an error); a marker value must be >= 6 bytes with version >= 0.
    """
    key = record.key
    if key is None or len(key) < W.CONTROL_KEY_SIZE:
        raise InvalidRecordError("Invalid control record key", expected=f">= {W.CONTROL_KEY_SIZE} bytes",
                                 found=None if key is None else f"{len(key)} bytes")
    version, ctype = struct.unpack_from(">hh", key, 0)
    if version < 0:
        raise InvalidRecordError("Invalid version found for control record", expected=">= 0", found=version)
    try:
        rtype = W.ControlRecordType(ctype)
    except ValueError:
        rtype = W.ControlRecordType.UNKNOWN
    epoch = None
    if rtype in (W.ControlRecordType.ABORT, W.ControlRecordType.COMMIT):
        value = record.value
        if value is None or len(value) < W.END_TXN_MARKER_VALUE_SIZE:
            raise InvalidRecordError("Invalid end transaction marker value",
                                     expected=f">= {W.END_TXN_MARKER_VALUE_SIZE} bytes",
                                     found=None if value is None else f"{len(value)} bytes")
        mversion, epoch = struct.unpack_from(">hi", value, 0)
        if mversion < 0:
            raise InvalidRecordError("Invalid version found for end transaction marker", expected=">= 0",
                                     found=mversion)
    return ControlRecord(record.offset, version, rtype, epoch)


def control_key(rtype: int, version: int = 0) -> bytes:
    return struct.pack(">hh", version, rtype)


def end_txn_marker_value(coordinator_epoch: int, version: int = 0) -> bytes:
    return struct.pack(">hi", version, coordinator_epoch)
