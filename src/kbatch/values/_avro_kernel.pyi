"""Stubs of the compiled Avro -> Arrow kernel (see _avro_kernel.pyx)."""
from typing import Any

import numpy as np
import numpy.typing as npt

KINDS: dict[str, int]
OPS: dict[str, int]


class Col:
    kind: int
    width: int
    children: list[Col]
    default: Any
    length: int
    nulls: int

    def __init__(self, kind: str, width: int = 0, children: list[Col] | None = None, default: Any = None) -> None: ...
    def finish(self, typ: Any) -> Any: ...


class Op:
    op: int
    col: Col | None
    children: tuple[Op, ...]
    defaults: list[tuple[Col, int, bytes | None]]
    symbols: list[bytes | None] | None
    width: int
    size: int
    minw: int

    def __init__(self, op: str, col: Col | None = None, children: list[Op] | None = None,
                 defaults: list[tuple[Col, int, bytes | None]] | None = None, symbols: list[bytes | None] | None = None,
                 size: int = 0) -> None: ...


class AvroDecodeError(ValueError):
    row: int
    position: int
    reason: str
    code: int
    found: int

    def __init__(self, row: int, position: int, reason: str, code: int = 0, found: int = 0) -> None: ...


def decode_rows(root: Col, programs: dict[int, Op], data: npt.NDArray[np.uint8], offsets: npt.NDArray[np.int32],
                valid: npt.NDArray[np.uint8] | None, first: int, n: int, empty: int = 0) -> int: ...
