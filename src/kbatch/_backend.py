"""Choose the kernel backend: KBATCH_BACKEND=auto|cython|python (default auto).

`cython` fails loudly when the extension is missing; `auto` falls back to the pure twin.
"""
import importlib
import os

_CHOICES = ("auto", "cython", "python")


def load(choice: str | None = None):
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
        return importlib.import_module("kbatch._core_py")


core = load()
BACKEND = core.BACKEND
