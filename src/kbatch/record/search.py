"""Which records of a batch hold a pattern in their key, value or header values (`kbatch grep`).

    search = RecordSearch(b"order-42", key=True, value=True, headers=True)
    for rec in search.matching(batch):   # the batch's records that match, in offset order
        ...

A fixed string in a magic 2 batch is found by the backend's grep_records_v2 kernel: memmem over
the batch's whole records section (decompressed), then, only in the records whose bytes hold an
occurrence, a look inside the selected fields; an occurrence across two fields or inside a length
varint is in no field and does not count. A regular expression (Python's `re` over bytes) runs
field by field over the decoded records (`matches`, also the reference the kernel is tested
against), of every record, or, when every match must hold a run of plain bytes
(`required_literal`: `order-[0-9]+` holds `order-`), only of the records the kernel finds holding it.
A case-insensitive search and legacy magic 0/1 batches are matched field by field too.

Every batch is checked as reading its records checks it: a records section that does not decode
raises the error `Batch.records()` raises (the one `kbatch cat` prints), whether or not the
pattern occurs in it.
"""
from __future__ import annotations

import re
import sys
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from .. import _backend
from .. import _wire as W
from ..errors import KBatchError
from .batch import RecordBatch
from .file_records import batch_at

if TYPE_CHECKING:
    from .._core import Record
    from .batch import Batch
    from .file_records import Window


def required_literal(pattern: bytes, flags: int = 0) -> bytes | None:
    """The longest run of plain bytes every match of the regular expression holds (its top-level
    literals in a row, outside groups, repeats and alternatives), or None: the kernel searches for
    it first, and the expression runs only on the records whose fields hold it. None too for a
    case-insensitive expression, or one this Python cannot parse here (then every record is run)."""
    if flags & re.IGNORECASE:
        return None
    try:
        import importlib

        parser: Any = importlib.import_module("re._parser" if sys.version_info >= (3, 11) else "sre_parse")
        parsed = parser.parse(pattern, flags)
        if parsed.state.flags & re.IGNORECASE:
            return None
        literal = parser.LITERAL
        best, run = b"", bytearray()
        for op, arg in list(parsed) + [(None, None)]:
            if op == literal:
                run.append(arg)
                continue
            if len(run) > len(best):
                best = bytes(run)
            run.clear()
    except Exception:  # noqa: BLE001 - a prefilter only: without it every record is run
        return None
    return best or None


class RecordSearch:
    """A pattern and the fields to look in. `pattern`: bytes (or str, as UTF-8), a fixed string
    unless `regex`; `ignore_case`: ASCII letters match either case (bytes regexes' IGNORECASE).
    Fields: `key`, `value`, `headers` (every header's value) and `header_names` (the values of
    the headers with these keys); with none of them given, keys, values and every header's value.
    A null key, value or header value holds nothing."""

    def __init__(self, pattern: bytes | str, *, regex: bool = False, ignore_case: bool = False, key: bool = False,
                 value: bool = False, headers: bool = False, header_names: Sequence[str] = ()) -> None:
        raw = pattern.encode("utf-8") if isinstance(pattern, str) else bytes(pattern)
        if not raw:
            raise ValueError("an empty pattern matches every record (kbatch cat prints them all)")
        self.needle = raw   # what the kernel looks for: the pattern, or a regex's required literal
        self.regex: re.Pattern[bytes] | None = None
        if regex or ignore_case:
            flags = re.IGNORECASE if ignore_case else 0
            try:
                self.regex = re.compile(raw if regex else re.escape(raw), flags)
            except re.error as e:
                raise ValueError(f"regular expression {raw.decode('utf-8', 'replace')!r}: {e}") from None
            self.needle = (required_literal(raw, flags) or b"") if regex else b""
        if not (key or value or headers or header_names):
            key = value = headers = True
        self.names = frozenset(n.encode("utf-8") for n in header_names)
        self.key, self.value, self.headers = key, value, headers
        core = _backend.core  # the kernel's field mask
        self.fields = ((core.GREP_KEY if key else 0) | (core.GREP_VALUE if value else 0)
                       | (core.GREP_HEADERS if headers else 0)
                       | (core.GREP_NAMED_HEADERS if self.names and not headers else 0))

    def _found(self, data: object) -> bool:
        if data is None:
            return False
        b = bytes(data)  # type: ignore[call-overload]
        return self.regex.search(b) is not None if self.regex is not None else self.needle in b

    def matches(self, rec: Record) -> bool:
        """Whether a decoded record holds the pattern in a selected field."""
        if self.key and self._found(rec.key):
            return True
        if self.value and self._found(rec.value):
            return True
        if self.headers or self.names:
            for k, v in rec.headers:
                if (self.headers or k.encode("utf-8") in self.names) and self._found(v):
                    return True
        return False

    def matching(self, batch: Batch) -> list[Record]:
        """The records of `batch` that match, in offset order (control batches: their control
        records, which a reader leaves out before asking). Raises the batch's decoding error."""
        if not isinstance(batch, RecordBatch) or not self.needle:
            return [r for r in batch if self.matches(r)]
        try:
            section = batch.records_bytes()
            rows = _backend.core.grep_records_v2(section, 0, len(section), batch.record_count, batch.base_offset,
                                                 self.needle, self.fields, self.names)
        except KBatchError:
            batch.records()  # the error a reader of this batch meets, with its file position
            raise
        if not rows:
            return []
        records = batch.records()
        return self._confirm([records[i] for i in rows])

    def _confirm(self, candidates: list[Record]) -> list[Record]:
        """The kernel's records, a regex run over them when the kernel looked for its literal only."""
        return candidates if self.regex is None else [r for r in candidates if self.matches(r)]

    def select(self, window: Window, rows: Sequence[int] | np.ndarray) -> Iterator[tuple[Batch, list[Record]]]:
        """(batch, its matching records) for the batches at `rows` of a scan window that hold a
        match, in order (kbatch.log.fetch's records(select)). The window's uncompressed v2 batches
        are searched where they lie in its buffer, all in one kernel call (grep_sections_v2), and
        become batch objects only when they hold a match: the per-batch cost of a search through
        mostly non-matching batches. A batch that does not decode raises after the matches of the
        batches before it, as a reader of every record meets it."""
        idx = np.asarray(rows, dtype=np.intp)
        magic, attrs = window["magic"][idx], window["attributes"][idx]
        fast = ((magic == 2) & (attrs & W.COMPRESSION_CODEC_MASK == 0) if self.needle
                else np.zeros(len(idx), bool))
        hits: dict[int, list[int]] = {}
        if fast.any():
            f = idx[fast]
            at = window["position"][f] - window["origin"]
            try:
                found = _backend.core.grep_sections_v2(window["buf"], at + W.RECORDS_OFFSET, at + window["size"][f],
                                                       window["record_count"][f], window["base_offset"][f],
                                                       self.needle, self.fields, self.names)
            except KBatchError:  # batch by batch: the matches before the bad batch, then its error
                yield from self._one_by_one(window, idx)
                return
            rows_of = f.tolist()
            hits = {rows_of[k]: found_rows for k, found_rows in found}
        for j, quick in zip(idx.tolist(), fast.tolist()):
            if quick and j not in hits:
                continue
            batch = batch_at(window, j)
            if quick:
                records = batch.records()
                confirmed = self._confirm([records[i] for i in hits[j]])
                if confirmed:
                    yield batch, confirmed
            else:
                matched = self.matching(batch)
                if matched:
                    yield batch, matched

    def _one_by_one(self, window: Window, idx: np.ndarray) -> Iterator[tuple[Batch, list[Record]]]:
        for j in idx.tolist():
            batch = batch_at(window, j)
            matched = self.matching(batch)
            if matched:
                yield batch, matched


__all__ = ["RecordSearch"]
