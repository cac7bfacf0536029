#!/usr/bin/env python3
"""Write docs/api.md, the API reference, from the public modules' `__all__`, signatures and docstrings.

    PYTHONPATH=src .venv/bin/python tools/api_docs.py          # rewrite docs/api.md
    PYTHONPATH=src .venv/bin/python tools/api_docs.py --check  # exit 1 if docs/api.md is not up to date

It documents the compiled backend's classes (kbatch.Record, kbatch.ByteView), so it runs with
KBATCH_BACKEND=cython; kbatch.spark needs pyspark importable. tests/system/test_docs.py checks that every
public name is in docs/api.md.
"""
from __future__ import annotations

import enum
import importlib
import inspect
import os
import re
import sys
from pathlib import Path

os.environ["KBATCH_BACKEND"] = "cython"

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "docs" / "api.md"

# module -> what it is for; each is documented through its __all__
MODULES = {
    "kbatch": "The codec, validation, storage and compaction: everything a user imports from `kbatch`.",
    "kbatch.log.summary": "Counts, bounds and producers of a partition from batch headers, exact (docs/summary.md).",
    "kbatch.columns.decode": "Arrow columns with Spark's Kafka-source schema (needs pyarrow: the `arrow` extra).",
    "kbatch.scan": "The streaming Arrow reader of a directory of partitions through the read path: `kbatch.scan(path, "
                   "...)` (docs/engines.md).",
    "kbatch.polars": "Kafka's files as a Polars LazyFrame, over kbatch.scan (the `polars` extra; docs/engines.md).",
    "kbatch.duckdb": "Kafka's files in DuckDB, over kbatch.scan (the `duckdb` extra; docs/engines.md).",
    "kbatch.ray": "Kafka's files as a Ray Dataset, over kbatch.scan (the `ray` extra; docs/engines.md).",
    "kbatch.spark": "The `kafka-segments` PySpark data source and helpers (needs the `spark` extra).",
    "kbatch.compat": "Drop-in acceleration for kafka-python's and aiokafka's record classes.",
    "kbatch.cli": "The `kbatch` command line as functions (the commands themselves: docs/cli.md).",
    "kbatch.server": "A single-node Kafka protocol endpoint over a log directory (`kbatch serve`, docs/serve.md; "
                     "needs the `serve` extra).",
}

INTRO = """# API reference

Generated from the code by `tools/api_docs.py` (signatures and docstrings of every name in each
public module's `__all__`); `tests/system/test_docs.py` checks that every public name is here. Exact types:
the package ships `py.typed` and stubs for its compiled modules, so a type checker shows them too.
Design notes and the Kafka facts behind the names are in the README and the other files of `docs/`.

"""


class _Raw:
    """An annotation shown as written (`from __future__ import annotations` keeps them as strings)."""

    def __init__(self, text: str) -> None:
        self.text = text

    def __repr__(self) -> str:
        return self.text


def _plain(annotation: object) -> object:
    # kbatch's modules name the wire enums through `_wire as W`; a reader knows them as kbatch.*
    return _Raw(re.sub(r"\bW\.", "", annotation)) if isinstance(annotation, str) else annotation


def _default(value: object) -> object:
    if isinstance(value, enum.Enum):
        return _Raw(f"{type(value).__name__}.{value.name}")
    if inspect.isfunction(value):  # a function's repr has its address: the file would change every run
        return _Raw("<lambda>" if value.__name__ == "<lambda>" else value.__qualname__)
    return value


def _signature(obj: object) -> str:
    try:
        sig = inspect.signature(obj)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return "(...)"
    params = [p.replace(annotation=_plain(p.annotation), default=_default(p.default)) for p in sig.parameters.values()]
    text = str(sig.replace(parameters=params, return_annotation=_plain(sig.return_annotation)))
    return text[:-len(" -> None")] if inspect.isclass(obj) and text.endswith(" -> None") else text


def _doc(obj: object) -> str:
    doc = inspect.getdoc(obj) or ""
    return doc.strip()


def _block(text: str) -> list[str]:
    # docstrings keep their own layout (indented examples, tables), so they go in a text block
    return ["```text", *text.replace("```", "'''").splitlines(), "```", ""] if text else []


def _kind(obj: object) -> str:
    if inspect.isclass(obj):
        if issubclass(obj, BaseException):
            return "exception" if not issubclass(obj, Warning) else "warning"
        if issubclass(obj, enum.Enum):
            return "enum"
        return "class"
    if callable(obj):
        return "function"
    return "constant"


def _members(cls: type) -> list[tuple[str, object]]:
    out = []
    for name, value in cls.__dict__.items():
        if name.startswith("_") and name not in ("__init__", "__iter__", "__len__"):
            continue
        if name == "__init__":
            continue
        out.append((name, value))
    return out


def document(modname: str, purpose: str) -> list[str]:
    mod = importlib.import_module(modname)
    lines = [f"## `{modname}`", "", purpose, ""]
    for name in mod.__all__:
        obj = getattr(mod, name)
        kind = _kind(obj)
        full = f"{modname}.{name}"
        if kind in ("class", "exception", "warning"):
            lines += [f"### `{full}{_signature(obj) if kind == 'class' else ''}`", "",
                      f"*{kind}*" + (f", bases: {', '.join(b.__name__ for b in obj.__bases__)}"
                                     if kind != "class" else ""), ""]
            lines += _block(_doc(obj))
            if kind == "class":
                for mname, m in _members(obj):
                    target = m.__func__ if isinstance(m, (classmethod, staticmethod)) else m
                    if isinstance(m, property) or inspect.isdatadescriptor(m) or inspect.isgetsetdescriptor(m):
                        first = (_doc(m).splitlines() or [""])[0]
                        lines.append(f"- `{mname}` (attribute){': ' + first if first else ''}")
                    elif callable(target):
                        first = (_doc(target).splitlines() or [""])[0]
                        lines.append(f"- `{mname}{_signature(target)}`{': ' + first if first else ''}")
                lines.append("")
        elif kind == "enum":
            members = ", ".join(f"`{m.name}` = {m.value!r}" for m in obj)  # type: ignore[attr-defined]
            lines += [f"### `{full}`", "", f"*enum*: {members}", ""]
            lines += _block(_doc(obj) if obj.__doc__ and "An enumeration." not in obj.__doc__ else "")
        elif kind == "function":
            lines += [f"### `{full}{_signature(obj)}`", "", "*function*", ""]
            lines += _block(_doc(obj))
        else:
            value = repr(obj)
            if len(value) > 200:
                value = f"<{type(obj).__module__}.{type(obj).__qualname__}>"
            lines += [f"### `{full}`", "", f"*constant*: `{value}`", ""]
    return lines


def render() -> str:
    lines = [INTRO.rstrip(), ""]
    for modname, purpose in MODULES.items():
        lines += document(modname, purpose)
    return "\n".join(lines).rstrip() + "\n"


def main(argv: list[str]) -> int:
    text = render()
    if "--check" in argv:
        if OUT.read_text() != text:
            print(f"{OUT} is out of date: run python tools/api_docs.py", file=sys.stderr)
            return 1
        return 0
    OUT.write_text(text)
    print(f"wrote {OUT} ({len(text.splitlines())} lines)")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
