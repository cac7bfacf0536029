"""One partition directory (Kafka's `storage/.../internals/log`): file names and locks (files),
indexes (index, index_rules), checkpoints, leader epochs, producer state, segments (segment), the
loader, the validator, the log itself (unified_log: `Log`), the cleaner and directory layouts.

`kbatch.log` keeps the names it always had: everything public of `kbatch.log.unified_log`.
"""
from .unified_log import (DeletedSegment, IndexVerification, Log, LogConfig, OffsetAndTimestamp, RecoveryReport,
                          SegmentIndexReport, offsets_for_times, rebuild_indexes, rebuild_segment_indexes,
                          verify_indexes)

__all__ = ["Log", "LogConfig", "OffsetAndTimestamp", "offsets_for_times", "rebuild_indexes", "verify_indexes",
           "rebuild_segment_indexes", "IndexVerification", "SegmentIndexReport", "RecoveryReport", "DeletedSegment"]
