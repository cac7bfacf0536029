"""Stubs of the compiled Protobuf -> Arrow kernel (see _protobuf_kernel.pyx)."""
from typing import Any

import numpy as np
import numpy.typing as npt


class Program:
    prefix: bytes

    def __init__(self, cols: list[tuple[str, list[int]]], msgs: list[tuple[str, int, list[tuple[int, ...]], int]],
                 enums: list[tuple[list[int], list[bytes], bool]], pool: bytes, indexes: list[int]) -> None: ...


def decode(prog: Program, typ: Any, data: npt.NDArray[np.uint8], offsets: npt.NDArray[np.int32],
           valid: npt.NDArray[np.uint8] | None, n: int, schema_id: int) -> Any: ...
