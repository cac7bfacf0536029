"""One partition directory (Kafka's `storage/.../internals/log`): file names and locks (files),
which files make a partition (partition_files, layout, segment_files), indexes (index,
index_rules, index_build, index_tools), checkpoints, leader epochs, producer state, segments
(segment, log_segments), the loader and recovery, the validator, the configuration (log_config),
the log itself (unified_log: `Log` and AppendGroup, with recovery, log_truncation, log_retention;
partition_log: what they use of it), offset lookups (list_offsets), the read path (fetch,
fetch_data, and summary: its answers from batch headers), topic selection (topics) and the cleaner (cleaner, cleaned_batches,
cleaner_transactions).

`kbatch.log` keeps the names it always had: everything public of `kbatch.log.unified_log`.
"""
from .index_tools import IndexVerification, SegmentIndexReport, rebuild_indexes, rebuild_segment_indexes, verify_indexes
from .log_config import LogConfig
from .log_retention import DeletedSegment
from .log_segments import OffsetAndTimestamp
from .loader import RecoveryReport
from .unified_log import Log, offsets_for_times

__all__ = ["Log", "LogConfig", "OffsetAndTimestamp", "offsets_for_times", "rebuild_indexes", "verify_indexes",
           "rebuild_segment_indexes", "IndexVerification", "SegmentIndexReport", "RecoveryReport", "DeletedSegment"]
