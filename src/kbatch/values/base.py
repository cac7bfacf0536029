"""What the three formats share: a binary Arrow column in, a typed Arrow column out."""
from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import pyarrow as pa


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
                      what: str = "value") -> "pa.Array":
        """A binary column of framed keys or values (decode_columns' `key` or `value`) -> one typed
        Arrow array; `offsets` (the `offset` column) names the record in errors."""
        import pyarrow as pa

        if isinstance(column, pa.ChunkedArray):
            column = column.combine_chunks() if column.num_chunks != 1 else column.chunk(0)
        if isinstance(offsets, pa.ChunkedArray):
            offsets = offsets.combine_chunks() if offsets.num_chunks != 1 else offsets.chunk(0)
        got = self.decode_arrow(column, offsets, what)
        if got is not None:
            return got
        values: list[Any] = column.to_pylist()
        return self.to_arrow(values, None if offsets is None else offsets.to_pylist(), what)

    def to_json(self, data: "bytes | memoryview", offset: int | None = None, what: str = "value") -> Any:
        """One framed key or value as JSON-able Python objects (what `kbatch cat` prints)."""
        raise NotImplementedError
