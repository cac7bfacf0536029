"""Stubs of the compiled Avro -> Arrow kernel (see _avro_kernel.pyx)."""
from typing import Any

import numpy as np
import numpy.typing as npt

KINDS: dict[str, int]
OPS: dict[str, int]


class Columns:
    n: int
    specs: list[tuple[str, int, list[int]]]
    length: int

    def __init__(self, specs: list[tuple[str, int, list[int]]]) -> None: ...
    def reserve(self, rows: int) -> None: ...
    def reserve_like(self, done: int, total: int) -> None: ...
    def finish(self, typ: Any) -> Any: ...


class Program:
    nops: int
    listing: list[tuple[str, int, int, int, int]]

    def __init__(self, ops: list[tuple[str, int, int, int, int]], branches: list[tuple[int, int]],
                 symbols: list[bytes | None], defaults: bytes) -> None: ...


class AvroDecodeError(ValueError):
    row: int
    position: int
    reason: str
    code: int
    found: int

    def __init__(self, row: int, position: int, reason: str, code: int = 0, found: int = 0) -> None: ...


def decode_rows(root: Columns, programs: dict[int, Program], data: npt.NDArray[np.uint8],
                offsets: npt.NDArray[np.int32], valid: npt.NDArray[np.uint8] | None, first: int, n: int,
                empty: int = 0) -> int: ...


def schema_ids(data: npt.NDArray[np.uint8], offsets: npt.NDArray[np.int32], valid: npt.NDArray[np.uint8] | None,
               n: int) -> dict[int, int] | None: ...
