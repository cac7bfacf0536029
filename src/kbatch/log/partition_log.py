"""What the rooms beside `Log` (recovery, log_truncation, log_retention, list_offsets, the read
path) use of it, as a Protocol: they name this, not kbatch.log.unified_log, so Log can delegate to
them without an import cycle (STYLE.md, "Rooms": a cycle is a cycle even through TYPE_CHECKING).
kbatch.log.unified_log.Log is the one implementation."""
from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    import numpy as np

    from .._wire import OffsetSpec
    from .leader_epoch import LeaderEpochFileCache
    from .loader import RecoveryReport
    from .log_config import LogConfig
    from .log_segments import LogSegments, OffsetAndTimestamp
    from .producer_state import OngoingTxns
    from .segment import LogSegment, UnreadRange


class PartitionLog(Protocol):
    """A partition's log as its helpers see it (the attributes and methods of kbatch.log.Log)."""

    directory: str
    config: LogConfig
    segments: LogSegments
    log_start_offset: int
    recovery: RecoveryReport
    _next_offset: int | None
    _recovery_point: int | None
    _failed: str | None
    _ongoing: OngoingTxns | None

    @property
    def problems(self) -> list[str]: ...

    @property
    def size(self) -> int: ...

    @property
    def leader_epoch_cache(self) -> LeaderEpochFileCache: ...

    def end_offset(self) -> int: ...

    def offset_for(self, target: int | np.integer[Any] | OffsetSpec) -> OffsetAndTimestamp | None: ...

    def unread_for(self, target: int | np.integer[Any] | OffsetSpec,
                   answer: OffsetAndTimestamp | None) -> list[UnreadRange]: ...

    def roll(self, expected_next_offset: int | None = None, *, now_ms: int | None = None) -> LogSegment: ...

    def _jitter(self) -> int: ...

    def _ongoing_at_start(self) -> OngoingTxns: ...

    def _load_log_start_offset(self) -> None: ...


__all__ = ["PartitionLog"]
