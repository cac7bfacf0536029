"""ListOffsets answers for many targets over one Log (KIP-79; kafka-format.md §5.4):
`lookup_many` is what Log.offsets_for_times does (kbatch.log.unified_log.offsets_for_times does it
over a directory of partitions). Targets are int64 timestamps (negative ones too, KIP-228) or
OffsetSpec members (DESIGN.md decision 3); the lookups themselves are LogSegments'."""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from .. import _wire as W
from .._wire import OffsetSpec
from ..errors import InvalidRequestError
from .log_segments import OffsetAndTimestamp, answers

if TYPE_CHECKING:
    from .partition_log import PartitionLog


def check_target(t: object) -> int:
    """An int64 timestamp target as an int (TypeError / InvalidRequestError otherwise)."""
    if isinstance(t, (bool, np.bool_)) or not isinstance(t, (int, np.integer)):
        raise TypeError(f"a lookup target is an int64 timestamp or an OffsetSpec, not {t!r}")
    t = int(t)
    if not W.INT64_MIN <= t <= W.INT64_MAX:
        raise InvalidRequestError("Target timestamp out of the int64 range", expected="an int64", found=t)
    return t


def lookup_many(log: PartitionLog, targets: Any) -> Any:
    """Log.offsets_for_times: a numpy array -> (offsets, timestamps); one target -> one answer; an
    iterable -> a list, its timestamps through one bulk lookup."""
    segs, start = log.segments, log.log_start_offset
    if isinstance(targets, np.ndarray):
        return segs.stable(segs.offsets_for_times_array, targets, start)[:2]
    if isinstance(targets, (int, np.integer, OffsetSpec)):
        return log.offset_for(targets)
    targets = targets if type(targets) is list else list(targets)
    if all(type(t) is int for t in targets):  # plain timestamps: converted by numpy in one step
        try:
            as_array = np.array(targets, dtype=np.int64)
        except OverflowError:
            pass  # one is out of range: the loop below names it
        else:
            return answers(*segs.stable(segs.offsets_for_times_array, as_array, start))
    out: list[OffsetAndTimestamp | None] = [None] * len(targets)
    times: list[int] = []
    where: list[int] = []
    for i, t in enumerate(targets):
        if isinstance(t, OffsetSpec):
            out[i] = log.offset_for(t)
            continue
        times.append(check_target(t))
        where.append(i)
    if times:  # every timestamp target in one bulk lookup, as for a numpy array
        found = segs.stable(segs.offsets_for_times_array, np.array(times, dtype=np.int64), start)
        for i, hit in zip(where, answers(*found)):
            out[i] = hit
    return out


__all__ = ["OffsetAndTimestamp", "lookup_many", "check_target"]
