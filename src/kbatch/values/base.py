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
        return decode_column(self, column, offsets, what, on_error)

    def to_json(self, data: "bytes | memoryview", offset: int | None = None, what: str = "value") -> Any:
        """One framed key or value as JSON-able Python objects (what `kbatch cat` prints)."""
        raise NotImplementedError
