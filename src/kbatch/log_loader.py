"""What a writer does to a partition directory before it writes (Kafka's LogLoader, the file part):
finish or undo an interrupted compaction and remove what interrupted writes left behind.

Only a writer holding the directory's `.lock` calls this (Log opened for writing, compact,
rebuild_indexes), so nothing removed here is still being written. Segment recovery itself (CRC
checks, truncation, index rebuilds) is in `Log._recover`; which segments it covers is decided by
`checkpoints.RecoveryCheckpoint`.
"""
from __future__ import annotations

import logging
import os
import re
import shutil

from . import _files

logger = logging.getLogger("kbatch.log")

SCRATCH_PREFIX = ".kbatch-cleaner-"   # compaction's scratch directories
# written (atomically) once every `.cleaned` file of a compaction is complete: from then on the
# compaction is committed, and a crash is finished rather than undone
COMMIT_MARKER = ".kbatch-compaction-commit"
CLEANED = ".cleaned"
SWAP = ".swap"
DELETED = ".deleted"
_INDEX_RE = re.compile(r"^(\d{20})\.(index|timeindex|txnindex)$")
SWAPPED_SUFFIXES = (_files.INDEX_SUFFIX, _files.TIME_INDEX_SUFFIX)  # compaction replaces these with the .log


def _unlink(path: str) -> None:
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass


def complete_swaps(log_dir: str, checkpoint=None) -> list[str]:
    """Rename every `<base>.<suffix>.swap` over its original, earliest segment first; for each
    segment the old index files go before the new log lands, so no stale index ever describes a
    new log (a missing index is rebuilt by any reader, as a broker does). Returns the files swapped in."""
    swaps: dict[int, list[str]] = {}
    for name in os.listdir(log_dir):
        if name.endswith(SWAP) and len(name) > 20 and name[:20].isdigit():
            swaps.setdefault(int(name[:20]), []).append(name[: -len(SWAP)])
    done = []
    for base in sorted(swaps):
        (checkpoint or _files.crash_point)(f"swap-in:{base}")
        targets = swaps[base]
        log_name = _files.filename_prefix(base) + _files.LOG_SUFFIX
        if log_name in targets:
            for suffix in SWAPPED_SUFFIXES:  # old indexes must not outlive the old log
                _files.crash_point(f"unlink-old:{_files.filename_prefix(base)}{suffix}")
                _unlink(_files.segment_path(log_dir, base, suffix))
        for t in sorted(targets, key=lambda t: t != log_name):  # the log first, then its indexes
            _files.crash_point(f"rename:{t}")
            os.replace(os.path.join(log_dir, t + SWAP), os.path.join(log_dir, t))
            done.append(t)
    if done:
        _files.fsync_dir(log_dir)
    return done


def clean_directory(log_dir, checkpoint=None) -> list[str]:
    """Finish an interrupted compaction and remove leftovers, as a broker's LogLoader does:
    compaction scratch directories, kbatch's temp files and `.deleted` segments go; `.cleaned`
    files go too unless the compaction was committed (COMMIT_MARKER), in which case they become
    `.swap` files; `.swap` files are renamed over their originals; index files whose `.log` is
    gone (a deletion or creation cut short) go. So an interrupted compaction leaves the original
    log or the compacted one, never a mix. Returns the names removed or swapped in (each also
    logged)."""
    log_dir = os.fspath(log_dir)
    committed = os.path.exists(os.path.join(log_dir, COMMIT_MARKER))
    touched = []
    for name in sorted(os.listdir(log_dir)):
        path = os.path.join(log_dir, name)
        if name.startswith(SCRATCH_PREFIX):
            shutil.rmtree(path, ignore_errors=True)
        elif name.endswith(CLEANED) and committed:
            os.replace(path, path[:-len(CLEANED)] + SWAP)
        elif name.endswith((CLEANED, DELETED)) or _files.TEMP_RE.match(name):
            _unlink(path)
        else:
            continue
        touched.append(name)
    touched += complete_swaps(log_dir, checkpoint)
    if committed:
        _unlink(os.path.join(log_dir, COMMIT_MARKER))
        touched.append(COMMIT_MARKER)
    names = set(os.listdir(log_dir))
    for name in sorted(names):
        m = _INDEX_RE.match(name)
        if m and f"{m.group(1)}{_files.LOG_SUFFIX}" not in names:
            _unlink(os.path.join(log_dir, name))
            touched.append(name)
    if touched:
        _files.fsync_dir(log_dir)
        logger.warning("Cleaned up %s: %s", log_dir, ", ".join(sorted(touched)))
    return touched


__all__ = ["clean_directory", "complete_swaps", "COMMIT_MARKER"]
