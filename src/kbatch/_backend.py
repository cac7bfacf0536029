"""Choose the kernel backend: KBATCH_BACKEND=auto|cython|python (default auto).

`cython` fails loudly when the extension is missing; `auto` falls back to the pure twin and says so
once (a RuntimeWarning naming the import error and the fix), because the pure twin is two to three
orders of magnitude slower on the hot loops; `python` asks for the twin and stays quiet.
"""
from __future__ import annotations

import importlib
import os
import warnings
from types import ModuleType
from typing import TYPE_CHECKING

from .errors import NoCompiledCoreWarning

_CHOICES = ("auto", "cython", "python")

NO_CORE_HINT = (
    "install a kbatch wheel built for this platform and Python, or build the extension from a source "
    "checkout (`python3 dev.py build`, or `pip install .` with a C compiler); set KBATCH_BACKEND=python "
    "to choose the pure-Python backend and silence this warning")


def load(choice: str | None = None) -> ModuleType:
    choice = (choice or os.environ.get("KBATCH_BACKEND", "auto")).strip().lower() or "auto"
    if choice not in _CHOICES:
        raise ImportError(f"KBATCH_BACKEND must be one of {', '.join(_CHOICES)}, not {choice!r}")
    if choice == "python":
        return importlib.import_module("kbatch._core_py")
    try:
        return importlib.import_module("kbatch._core")
    except ImportError as e:
        if choice == "cython":
            raise ImportError(
                "KBATCH_BACKEND=cython but the compiled extension kbatch._core is not importable "
                f"({e}); build it with `pip install -e .` or use KBATCH_BACKEND=python") from e
        # stacklevel 2 points at load(); the message itself carries what a user needs
        warnings.warn(f"kbatch is using its pure-Python backend (decoding is up to ~400x slower) because "
                      f"the compiled core kbatch._core is not importable ({e}); {NO_CORE_HINT}",
                      NoCompiledCoreWarning, stacklevel=2)
        return importlib.import_module("kbatch._core_py")


if TYPE_CHECKING:  # both backends have the contract that _core.pyi states
    from . import _core as core
else:
    core = load()
BACKEND: str = core.BACKEND

__all__ = ["BACKEND", "NO_CORE_HINT", "core", "load"]
