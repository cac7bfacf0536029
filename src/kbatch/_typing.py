"""Type aliases of the public API, for annotations only (they exist while type checking; at run
time this module is empty, so kbatch needs no typing_extensions installed)."""
from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import os

    import numpy as np
    import numpy.typing as npt
    import pyarrow
    from typing_extensions import Buffer, TypeAlias

    #: a file or directory path
    PathLike: TypeAlias = "str | os.PathLike[str]"
    #: what the Kafka clients hand their record builders (sized, sliceable)
    BytesLike: TypeAlias = "bytes | bytearray | memoryview"
    #: a record header as given to a builder: (key, value or None)
    HeaderIn: TypeAlias = "tuple[str, Buffer | None]"
    Headers: TypeAlias = "Iterable[HeaderIn]"
    #: one record for BatchBuilder.extend / build_batch: (timestamp, key, value[, headers[, tombstone[, offset]]])
    #: rows in decode_columns' columns, as encode_columns / Log.append_table take them: a pyarrow
    #: Table, RecordBatch, RecordBatchReader, or an iterable of record batches or tables
    TableLike: TypeAlias = ("pyarrow.Table | pyarrow.RecordBatch | pyarrow.RecordBatchReader"
                            " | Iterable[pyarrow.RecordBatch | pyarrow.Table]")
    RecordTuple: TypeAlias = (
        "tuple[int | None, Buffer | None, Buffer | None]"
        " | tuple[int | None, Buffer | None, Buffer | None, Headers]"
        " | tuple[int | None, Buffer | None, Buffer | None, Headers, bool | None]"
        " | tuple[int | None, Buffer | None, Buffer | None, Headers, bool | None, int | None]")

    # the encode kernels' column arguments (kbatch._core_py.ColumnsEncoderV2 says what each holds); here,
    # below both twins, so that neither names the other's types
    BinaryColumn: TypeAlias = ("tuple[npt.NDArray[Any], npt.NDArray[np.uint8], npt.NDArray[np.uint8] | None, int,"
                               " int]")
    ValueColumn: TypeAlias = "tuple[npt.NDArray[Any], npt.NDArray[np.uint8] | None, int]"
    HeadersColumn: TypeAlias = ("tuple[npt.NDArray[Any], npt.NDArray[np.uint8] | None, int, npt.NDArray[np.uint8]"
                                " | None, int, int, BinaryColumn | None, BinaryColumn | None]")
    #: what OffsetMap.filter_v2 returns (kbatch._core_py)
    FilterResult: TypeAlias = "tuple[bytes | None, int, int, int, int, int, int, int, int | None]"

__all__ = ["Buffer", "BytesLike", "PathLike", "HeaderIn", "Headers", "RecordTuple", "TableLike", "BinaryColumn",
           "ValueColumn", "HeadersColumn", "FilterResult"]
