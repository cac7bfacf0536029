"""What the three formats share: a binary Arrow column in, a typed Arrow column out."""
from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import pyarrow as pa

    from .rules import OnError


class Format:
    """Subclasses give `to_arrow(values, offsets, what)` (Python bytes in) and may give
    `decode_arrow(column, offsets, what)` (an Arrow binary array in; None: not this column)."""

    kind = ""
    #: values carry the registry's header (magic byte, schema id); False: plain values, one schema
    framed = True
    #: inside decode_column: the items that take no bytes (kbatch.values.limits.MAX_EMPTY_ITEMS) the
    #: parts of the column decoded so far hold, each part adding its own once it decodes (a part that
    #: fails adds nothing: on_error's halving then finds the value that broke the bound); None
    #: outside: each to_arrow / decode_arrow call counts alone. (A format decodes one column at a time.)
    _column_empty: "list[int] | None" = None

    def to_arrow(self, values: Sequence["bytes | memoryview | None"], offsets: Sequence[int] | None = None,
                 what: str = "value") -> "pa.Array":
        raise NotImplementedError

    def decode_arrow(self, column: "pa.Array", offsets: "pa.Array | None", what: str) -> "pa.Array | None":
        return None

    def decode_column(self, column: "pa.Array | pa.ChunkedArray", offsets: "pa.Array | pa.ChunkedArray | None" = None,
                      what: str = "value", on_error: "OnError | None" = None) -> "pa.Array":
        """A binary column of framed keys or values (decode_columns' `key` or `value`) -> one typed
        Arrow array; `offsets` (the `offset` column) names the record in errors. Which schema each
        value is read with, and on_error (called with (row, error) for a value that does not
        decode, which is then null; None: raise): kbatch.values.rules."""
        import pyarrow as pa

        from .rules import decode_column

        if isinstance(column, pa.ChunkedArray):
            column = column.combine_chunks() if column.num_chunks != 1 else column.chunk(0)
        if isinstance(offsets, pa.ChunkedArray):
            offsets = offsets.combine_chunks() if offsets.num_chunks != 1 else offsets.chunk(0)
        self._column_empty = [0]
        try:
            return decode_column(self, column, offsets, what, on_error)
        finally:
            self._column_empty = None

    def _empty_before(self) -> int:
        """The items that take no bytes the column's parts decoded so far hold (see _column_empty)."""
        return 0 if self._column_empty is None else self._column_empty[0]

    def _empty_done(self, count: int) -> None:
        """A part decoded: its values' items that take no bytes count against the column's bound."""
        if self._column_empty is not None:
            self._column_empty[0] = count

    def to_json(self, data: "bytes | memoryview", offset: int | None = None, what: str = "value") -> Any:
        """One framed key or value as JSON-able Python objects (what `kbatch cat` prints)."""
        raise NotImplementedError
