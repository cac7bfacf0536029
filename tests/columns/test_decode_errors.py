"""A path given where the bytes of record batches are expected is a clear error, not memoryview's."""
from __future__ import annotations

import pathlib

import pytest

import kbatch


@pytest.mark.parametrize("path", ["logs/orders-0/00000000000000000000.log",
                                  pathlib.Path("logs/orders-0/00000000000000000000.log")])
def test_a_path_instead_of_bytes_says_what_to_do(path):
    with pytest.raises(TypeError) as ei:
        kbatch.decode_columns(path)
    msg = str(ei.value)
    assert "expected the bytes of record batches" in msg and "00000000000000000000.log" in msg
    assert "kbatch.Log.open" in msg
