"""The layers of src/kbatch, from the imports themselves (STYLE.md, "Layout"):

    base (errors, _wire, _typing, _backend, the kernels, _fs) -> schema -> record -> columns -> log
    -> the edges (cli, server, spark, compat, demo)

A module may import its own layer and those below it, never one above, and no import cycle may
exist. Every import counts, at the top of a module or inside a function (a lazy import is still a
dependency), except those under `if TYPE_CHECKING:` (annotations only). The package's facade
(`kbatch/__init__.py`, which binds public names lazily, and `_moved.py`, the old module paths) is
the one module allowed to name every layer.
"""
from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

import kbatch

PKG = Path(kbatch.__file__).resolve().parent
FACADE = {"kbatch", "kbatch._moved"}
BASE = {"kbatch.errors", "kbatch._wire", "kbatch._typing", "kbatch._backend", "kbatch._core", "kbatch._core_py",
        "kbatch._fs", "kbatch._files"}
#: layer of each top-level room; a module may import only from its own layer or lower ones
#: values (schema-aware keys and values) and tables (topics as Delta/Iceberg tables) sit with log: the
#: `_schemas` source and the table export read Logs; columns.decode calls a values format it is handed
#: (duck-typed), without importing it
LAYERS = {"schema": 1, "record": 2, "columns": 3, "log": 4, "values": 4, "tables": 4, "cli": 5, "server": 5, "spark": 5,
          "compat": 5,
          "demo": 5, "__main__": 5}
#: the edges are one layer, but not every edge may lean on every other: only the CLI (which starts
#: a server) may import another edge
EDGE_IMPORTS = {("cli", "server"), ("__main__", "cli"), ("demo", "spark")}
#: the edges are users of the package: they may import its public facade (`import kbatch`)
EDGES_MAY_IMPORT_FACADE = True


def layer_of(module: str) -> tuple[int, str]:
    if module in BASE:
        return 0, "base"
    room = module.split(".")[1]
    if room not in LAYERS:
        raise AssertionError(f"{module} is in no layer: give it one in test_layers.LAYERS")
    return LAYERS[room], room


def module_name(path: Path) -> str:
    parts = path.relative_to(PKG.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def known_modules() -> set[str]:
    found = {module_name(p) for p in PKG.rglob("*.py")}
    found |= {module_name(p) for p in PKG.rglob("*.pyx")}
    return found


def _type_checking_lines(tree: ast.AST) -> set[int]:
    """Line numbers under `if TYPE_CHECKING:` (their imports are for annotations only)."""
    lines: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and isinstance(node.test, ast.Name) and node.test.id == "TYPE_CHECKING":
            for child in node.body:
                lines.update(range(child.lineno, (child.end_lineno or child.lineno) + 1))
    return lines


def imports_of(path: Path, modules: set[str]) -> list[tuple[int, str]]:
    """(line, imported kbatch module) for every import in the file, TYPE_CHECKING blocks left out."""
    me = module_name(path)
    package = me if path.name == "__init__.py" else me.rpartition(".")[0]
    text = path.read_text()
    found: list[tuple[int, str]] = []

    def add(line: int, target: str, names: list[str]) -> None:
        """`from target import names`; `import target` when names is empty"""
        rest = [n for n in names if f"{target}.{n}" not in modules]
        found.extend((line, f"{target}.{n}") for n in names if f"{target}.{n}" in modules)
        if rest or not names:  # names bound from the module itself (or a plain import of it)
            while target not in modules and "." in target:
                target = target.rpartition(".")[0]
            found.append((line, target))

    def resolve(level: int, module: str | None) -> str:
        base = package.split(".")
        if level > 1:
            base = base[: len(base) - (level - 1)]
        return ".".join(base + ([module] if module else []))

    if path.suffix == ".pyx":  # Cython: plain Python imports only (cimports are C-level)
        for i, line in enumerate(text.splitlines(), 1):
            m = re.match(r"\s*from (\.+)([\w.]*) import ([\w, ]+?)(?: as \w+)?\s*$", line)
            if m:
                add(i, resolve(len(m.group(1)), m.group(2) or None), [n.strip() for n in m.group(3).split(",")])
        return found
    tree = ast.parse(text)
    skip = _type_checking_lines(tree)
    for node in ast.walk(tree):
        if getattr(node, "lineno", None) in skip:
            continue
        if isinstance(node, ast.ImportFrom):
            target = resolve(node.level, node.module) if node.level else (node.module or "")
            if target == "kbatch" or target.startswith("kbatch."):
                add(node.lineno, target, [a.name for a in node.names])
        elif isinstance(node, ast.Import):
            for a in node.names:
                if a.name == "kbatch" or a.name.startswith("kbatch."):
                    add(node.lineno, a.name, [])
    return found


def import_graph() -> dict[str, list[tuple[int, str]]]:
    modules = known_modules()
    graph = {}
    for path in sorted(PKG.rglob("*.py")) + sorted(PKG.rglob("*.pyx")):
        graph[module_name(path)] = [(line, t) for line, t in imports_of(path, modules) if t != module_name(path)]
    return graph


def upward_imports(graph: dict[str, list[tuple[int, str]]]) -> list[str]:
    bad = []
    for mod, edges in graph.items():
        if mod in FACADE:
            continue
        mine, my_room = layer_of(mod)
        for line, target in edges:
            if target in FACADE and mine == 5 and EDGES_MAY_IMPORT_FACADE:
                continue
            theirs, room = (5, "kbatch") if target in FACADE else layer_of(target)
            if theirs > mine or (theirs == mine == 5 and room != my_room and (my_room, room) not in EDGE_IMPORTS):
                bad.append(f"{mod} (line {line}) imports {target}: {my_room} may not import {room}")
    return bad


def cycles(graph: dict[str, list[tuple[int, str]]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan), the facade left out (it is
    imported by nothing inside the package but for `from .. import _x`, resolved to _x itself)."""
    edges = {m: sorted({t for _, t in e if t not in FACADE}) for m, e in graph.items() if m not in FACADE}
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in edges.get(v, []):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted(edges):
        if v not in index:
            visit(v)
    return out


def test_no_module_imports_from_a_higher_layer():
    bad = upward_imports(import_graph())
    assert not bad, "\n".join(bad)


def test_no_import_cycle():
    found = cycles(import_graph())
    assert not found, "\n".join(" <-> ".join(c) for c in found)


def test_every_module_has_a_layer():
    for mod in known_modules() - FACADE:
        layer_of(mod)


def test_the_top_of_the_package_stays_small():
    """At most a dozen plain modules beside the packages (the issue's bound)."""
    plain = sorted(p.name for p in PKG.glob("*.py"))
    assert len(plain) <= 12, plain


@pytest.mark.parametrize("source, room, expected", [
    ("from ..log import Log\n", "record/probe.py", "kbatch.record.probe (line 1) imports kbatch.log: record may not import log"),
    ("def f():\n    from ..cli import main\n", "log/probe.py", "kbatch.log.probe (line 2) imports kbatch.cli: log may not import cli"),
    ("from ..server import serve\n", "spark/probe.py", "kbatch.spark.probe (line 1) imports kbatch.server: spark may not import server"),
])
def test_the_walk_catches_an_upward_import(tmp_path, monkeypatch, source, room, expected):
    """The test itself: a planted upward import (at the top, or lazy inside a function) is found."""
    probe = PKG / room
    assert not probe.exists()
    graph = import_graph()
    modules = known_modules() | {module_name(probe)}
    tree_path = tmp_path / "kbatch" / room
    tree_path.parent.mkdir(parents=True)
    tree_path.write_text(source)
    monkeypatch.setattr(Path, "relative_to", _relative_to_either(tmp_path))
    graph[module_name(probe)] = imports_of(tree_path, modules)
    assert expected in upward_imports(graph)


def test_the_walk_catches_a_cycle():
    graph = import_graph()
    graph["kbatch.record.batch"] = graph["kbatch.record.batch"] + [(1, "kbatch.record.probe")]
    graph["kbatch.record.probe"] = [(1, "kbatch.record.batch")]
    assert ["kbatch.record.batch", "kbatch.record.probe"] in cycles(graph)


def test_type_checking_imports_do_not_count(tmp_path):
    f = tmp_path / "kbatch" / "record" / "probe.py"
    f.parent.mkdir(parents=True)
    f.write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from ..log import Log\n")
    orig = PKG.parent
    assert imports_of_at(f, tmp_path) == []


def imports_of_at(path: Path, root: Path) -> list[tuple[int, str]]:
    global PKG
    saved = PKG
    PKG = root / "kbatch"
    try:
        return imports_of(path, known_modules_at(saved))
    finally:
        PKG = saved


def known_modules_at(pkg: Path) -> set[str]:
    global PKG
    saved = PKG
    PKG = pkg
    try:
        return known_modules()
    finally:
        PKG = saved


def _relative_to_either(tmp_path: Path):
    real = Path.relative_to

    def relative_to(self: Path, *other: Path) -> Path:
        try:
            return real(self, *other)
        except ValueError:
            return real(self, tmp_path)
    return relative_to


OLD_PATHS = ["batch", "legacy", "records", "builder", "compression", "arrow", "arrow_encode", "partitioner", "segment",
             "index", "index_rules", "checkpoints", "leader_epoch", "producer_state", "log_loader", "validate",
             "compaction", "layout", "coordinator_records", "metadata_records", "raft_snapshot", "dump"]


@pytest.mark.parametrize("old", OLD_PATHS)
def test_old_module_paths_still_import(old):
    """`import kbatch.segment` and the rest still work (a subprocess: a fresh import system), give the
    module at its new path itself, and say where it went with a DeprecationWarning."""
    import subprocess
    import sys

    code = (f"import warnings, importlib, sys\nwarnings.simplefilter('error', DeprecationWarning)\n"
            f"import kbatch\nfrom kbatch._moved import MOVED\n"
            f"try:\n    importlib.import_module('kbatch.{old}')\n    raise SystemExit('no warning')\n"
            f"except DeprecationWarning as w:\n    assert 'kbatch.' + MOVED['{old}'] in str(w), w\n"
            f"warnings.simplefilter('ignore')\nm = importlib.import_module('kbatch.{old}')\n"
            f"assert m is importlib.import_module('kbatch.' + MOVED['{old}'])\n"
            f"assert m.__spec__.name == 'kbatch.' + MOVED['{old}'], m.__spec__.name\n")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-3000:]


def test_public_names_and_documented_paths_import():
    import importlib

    for name in kbatch.__all__:
        assert getattr(kbatch, name) is not None, name
    for path in ("kbatch.log", "kbatch.spark", "kbatch.cli", "kbatch.schema", "kbatch.demo", "kbatch.compat",
                 "kbatch.server", "kbatch.record", "kbatch.columns"):
        importlib.import_module(path)
    from kbatch.log import Log, LogConfig, OffsetAndTimestamp, offsets_for_times, rebuild_indexes, verify_indexes  # noqa: F401
    import warnings
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        from kbatch.batch import iter_batches  # a name that left its old module keeps its old path
    assert iter_batches is kbatch.iter_batches
