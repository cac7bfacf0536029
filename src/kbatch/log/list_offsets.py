"""ListOffsets answers (KIP-79; kafka-format.md §5.4): many targets over one Log
(`lookup_many`, what Log.offsets_for_times does), and `offsets_for_times` over a directory of
`<topic>-<partition>` folders with the request-level errors (42, 43, 3). Targets are int64
timestamps (negative ones too, KIP-228) or OffsetSpec members (DESIGN.md decision 3); the lookups
themselves are LogSegments'."""
from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

import numpy as np

from .. import _fs
from .. import _wire as W
from .._wire import OffsetSpec
from ..errors import InvalidRequestError, KBatchError, UnsupportedForMessageFormatError
from .log_segments import OffsetAndTimestamp, answers

if TYPE_CHECKING:
    from .._typing import PathLike
    from .unified_log import Log

    #: an offsets_for_times target: an int64 timestamp or EARLIEST / LATEST / MAX_TIMESTAMP
    Target = int | np.integer[Any] | OffsetSpec


def check_target(t: object) -> int:
    """An int64 timestamp target as an int (TypeError / InvalidRequestError otherwise)."""
    if isinstance(t, (bool, np.bool_)) or not isinstance(t, (int, np.integer)):
        raise TypeError(f"a lookup target is an int64 timestamp or an OffsetSpec, not {t!r}")
    t = int(t)
    if not W.INT64_MIN <= t <= W.INT64_MAX:
        raise InvalidRequestError("Target timestamp out of the int64 range", expected="an int64", found=t)
    return t


def lookup_many(log: Log, targets: Any) -> Any:
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


def offsets_for_times(targets: Mapping[tuple[str, int], Target] | Iterable[tuple[tuple[str, int], Target]],
                      log_dir: PathLike) -> dict[tuple[str, int], OffsetAndTimestamp | KBatchError | None]:
    """ListOffsets over a directory of `<topic>-<partition>` folders.

    targets: {(topic, partition): target} or a list of ((topic, partition), target) pairs (so one
    partition can be named twice). A target is an int64 timestamp or EARLIEST / LATEST /
    MAX_TIMESTAMP. Returns {(topic, partition): OffsetAndTimestamp | None | KBatchError}:
    InvalidRequestError (42) for a partition named twice with different targets,
    UnsupportedForMessageFormatError (43) for a timestamp target on magic 0 data,
    UnknownTopicOrPartitionError (3) for a partition without a directory.
    """
    from .unified_log import Log

    pairs = list(targets.items()) if isinstance(targets, Mapping) else list(targets)
    wanted: dict[tuple[str, int], Target] = {}
    dupes: set[tuple[str, int]] = set()
    for named, target in pairs:
        tp = (str(named[0]), int(named[1]))
        if tp in wanted and not _same_target(wanted[tp], target):
            dupes.add(tp)
        wanted.setdefault(tp, target)
    out: dict[tuple[str, int], OffsetAndTimestamp | KBatchError | None] = {}
    for tp, target in wanted.items():
        if tp in dupes:
            out[tp] = InvalidRequestError("Partition is named more than once with different targets",
                                          expected="one target per partition", found=f"{tp[0]}-{tp[1]}")
            continue
        path = _fs.join(log_dir if _fs.is_remote(log_dir) else os.fspath(log_dir), f"{tp[0]}-{tp[1]}")
        try:
            log = Log.open(path)
            try:
                if not isinstance(target, OffsetSpec) and log.magic() == W.MAGIC_VALUE_V0:
                    raise UnsupportedForMessageFormatError(
                        f"Cannot search offsets based on timestamp because message format version for "
                        f"partition {tp[0]}-{tp[1]} is 0 which is smaller than 1",
                        expected="magic >= 1", found="magic 0")
                out[tp] = log.offset_for(target)
            finally:
                log.close()
        except KBatchError as e:
            out[tp] = e
    return out


def _same_target(a: Target, b: Target) -> bool:
    if isinstance(a, OffsetSpec) or isinstance(b, OffsetSpec):
        return a is b
    return int(a) == int(b)


__all__ = ["OffsetAndTimestamp", "offsets_for_times", "lookup_many", "check_target"]
