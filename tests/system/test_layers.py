"""The layers of src/kbatch, from the imports themselves (STYLE.md, "Layout" and "Rooms"):

    base (errors, _wire, _typing, _backend, the kernels, _fs) -> schema -> record -> columns -> log
    (with values) -> scan -> tables -> the edges (cli, server, spark, compat, demo, polars, duckdb, ray)

A module may import its own layer and those below it, never one above, and no import cycle may
exist. Every import counts: at the top of a module, inside a function (a lazy import is still a
dependency) and under `if TYPE_CHECKING:` (an annotation is a dependency too: a cycle is a cycle
even through TYPE_CHECKING). The package's facade (`kbatch/__init__.py`, which binds public names
lazily) is the one module allowed to name every layer.

The doors between packages: a package is used through its public names. A module may not import
a `_private` name (or a `_private` module) of another package (each room is one package; the base
modules are one, the package's own base); PRIVATE_IMPORTS_ALLOWED lists the ones left, and may only
shrink. And a module stays under MAX_MODULE_LINES lines.
"""
from __future__ import annotations

import ast
import fnmatch
import re
from pathlib import Path
from typing import NamedTuple

import pytest

import kbatch

PKG = Path(kbatch.__file__).resolve().parent
FACADE = {"kbatch"}
BASE = {"kbatch.errors", "kbatch._wire", "kbatch._typing", "kbatch._backend", "kbatch._core", "kbatch._core_py",
        "kbatch._fs", "kbatch._files"}
#: layer of each top-level room; a module may import only from its own layer or lower ones
#: values (schema-aware keys and values) and tables (topics as Delta/Iceberg tables) sit with log: the
#: `_schemas` source and the table export read Logs; columns.decode calls a values format it is handed
#: (duck-typed), without importing it
#: scan (the streaming reader of the read path's public API) sits above them and below the tables
#: and the edges; the engine adapters (polars, duckdb, ray) are edges over scan
LAYERS = {"schema": 1, "record": 2, "columns": 3, "log": 4, "values": 4, "scan": 5, "tables": 6, "cli": 7,
          "server": 7, "spark": 7, "compat": 7, "demo": 7, "__main__": 7, "polars": 7, "duckdb": 7, "ray": 7}
EDGE = 7
#: the edges are one layer, but not every edge may lean on every other: only the CLI (which starts
#: a server) may import another edge
EDGE_IMPORTS = {("cli", "server"), ("__main__", "cli"), ("demo", "spark"), ("demo", "cli")}  # the demo ends with `kbatch report`
#: the edges are users of the package: they may import its public facade (`import kbatch`)
EDGES_MAY_IMPORT_FACADE = True

#: imports of another package's private name still to convert, as "importer -> name" (importer: a
#: module name or an fnmatch pattern). This list may only shrink (an entry no import needs any more
#: fails test_the_private_import_allowlist_only_shrinks); the aim is an empty list.
PRIVATE_IMPORTS_ALLOWED: set[str] = set()  # empty: every package is used through its public names
#: TYPE_CHECKING imports that still close a cycle, (importer, imported). Temporary: the log room's
#: split (log-shape) breaks it; then this set is emptied (a stale entry fails the cycle test).
TYPE_CHECKING_EDGES_TO_BREAK: set[tuple[str, str]] = set()  # log-shape broke the last one (kbatch.log.partition_log)

#: a module (.py or .pyx) holds at most this many lines (STYLE.md, "Rooms": a module under ~1,200 lines)
MAX_MODULE_LINES = 1200
#: for good: the generated message tables, and the kernel with its pure twin (one contract in one
#: file each, kept side by side line for line)
LARGE_FOR_GOOD = {"kbatch.schema._tables", "kbatch._core", "kbatch._core_py"}
#: TEMPORARY, to be emptied: modules being split now; a module here that is back under the limit
#: (or gone) fails test_every_module_stays_under_the_line_limit (log-shape split the log room's)
LARGE_UNTIL_SPLIT: set[str] = set()


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
    """Line numbers under `if TYPE_CHECKING:` (their imports are for annotations: they still count)."""
    lines: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and isinstance(node.test, ast.Name) and node.test.id == "TYPE_CHECKING":
            for child in node.body:
                lines.update(range(child.lineno, (child.end_lineno or child.lineno) + 1))
    return lines


class Import(NamedTuple):
    """One imported kbatch module, or one name taken from it (`from target import name`)."""

    line: int
    target: str
    name: str | None  # a name bound from the module itself (not a submodule); None for the module
    type_checking: bool


def all_imports(path: Path, modules: set[str]) -> list[Import]:
    """Every kbatch import in the file, TYPE_CHECKING blocks included (marked)."""
    me = module_name(path)
    package = me if path.name == "__init__.py" else me.rpartition(".")[0]
    text = path.read_text()
    found: list[Import] = []

    def add(line: int, target: str, names: list[str], tc: bool) -> None:
        """`from target import names`; `import target` when names is empty"""
        rest = [n for n in names if f"{target}.{n}" not in modules]
        found.extend(Import(line, f"{target}.{n}", None, tc) for n in names if f"{target}.{n}" in modules)
        if rest or not names:  # names bound from the module itself (or a plain import of it)
            while target not in modules and "." in target:
                target = target.rpartition(".")[0]
            found.extend(Import(line, target, n, tc) for n in rest)
            if not names:
                found.append(Import(line, target, None, tc))

    def resolve(level: int, module: str | None) -> str:
        base = package.split(".")
        if level > 1:
            base = base[: len(base) - (level - 1)]
        return ".".join(base + ([module] if module else []))

    if path.suffix == ".pyx":  # Cython: plain Python imports only (cimports are C-level)
        for i, line in enumerate(text.splitlines(), 1):
            m = re.match(r"\s*from (\.+)([\w.]*) import ([\w, ]+?)(?: as \w+)?\s*$", line)
            if m:
                add(i, resolve(len(m.group(1)), m.group(2) or None), [n.strip() for n in m.group(3).split(",")], False)
        return found
    tree = ast.parse(text)
    tc_lines = _type_checking_lines(tree)
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            target = resolve(node.level, node.module) if node.level else (node.module or "")
            if target == "kbatch" or target.startswith("kbatch."):
                add(node.lineno, target, [a.name for a in node.names], node.lineno in tc_lines)
        elif isinstance(node, ast.Import):
            for a in node.names:
                if a.name == "kbatch" or a.name.startswith("kbatch."):
                    add(node.lineno, a.name, [], node.lineno in tc_lines)
    return found


def imports_of(path: Path, modules: set[str]) -> list[tuple[int, str]]:
    """(line, imported kbatch module) for every import in the file, TYPE_CHECKING ones included."""
    seen: list[tuple[int, str]] = []
    for imp in all_imports(path, modules):
        if (imp.line, imp.target) not in seen:
            seen.append((imp.line, imp.target))
    return seen


def _sources() -> list[Path]:
    return sorted(PKG.rglob("*.py")) + sorted(PKG.rglob("*.pyx"))


def import_graph() -> dict[str, list[tuple[int, str]]]:
    modules = known_modules()
    graph = {}
    for path in _sources():
        graph[module_name(path)] = [(line, t) for line, t in imports_of(path, modules) if t != module_name(path)]
    return graph


def upward_imports(graph: dict[str, list[tuple[int, str]]]) -> list[str]:
    bad = []
    for mod, edges in graph.items():
        if mod in FACADE:
            continue
        mine, my_room = layer_of(mod)
        for line, target in edges:
            if target in FACADE and mine == EDGE and EDGES_MAY_IMPORT_FACADE:
                continue
            theirs, room = (5, "kbatch") if target in FACADE else layer_of(target)
            if theirs > mine or (theirs == mine == EDGE and room != my_room and (my_room, room) not in EDGE_IMPORTS):
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


def without_edges(graph: dict[str, list[tuple[int, str]]], edges: set[tuple[str, str]]
                  ) -> dict[str, list[tuple[int, str]]]:
    return {m: [(line, t) for line, t in e if (m, t) not in edges] for m, e in graph.items()}


def test_no_import_cycle():
    """No cycle, TYPE_CHECKING imports included (but for the few TYPE_CHECKING_EDGES_TO_BREAK)."""
    graph = import_graph()
    found = cycles(without_edges(graph, TYPE_CHECKING_EDGES_TO_BREAK))
    assert not found, "import cycles (TYPE_CHECKING imports count):\n" + "\n".join(" <-> ".join(c) for c in found)
    cyclic = {m for c in cycles(graph) for m in c}
    stale = sorted(e for e in TYPE_CHECKING_EDGES_TO_BREAK if not (e[0] in cyclic and e[1] in cyclic
                                                                   and any(t == e[1] for _, t in graph.get(e[0], []))))
    assert not stale, f"these edges close no cycle any more: remove them from TYPE_CHECKING_EDGES_TO_BREAK: {stale}"


# ------------------------------------------------------------------------------------ the doors
def package_of(module: str) -> str:
    """The package a module belongs to: its room (kbatch.<room>...), or "base" for the base modules."""
    return "base" if module in BASE or module in FACADE else module.split(".")[1]


def _private(part: str) -> bool:
    return part.startswith("_") and not part.startswith("__")


def private_imports(path: Path, modules: set[str]) -> list[str]:
    """'importer -> name' for each import of another package's private name or private module (a
    base module's own `_name` is the package's base: anyone may import it, but not a `_name` in it)."""
    me = module_name(path)
    if me in FACADE:
        return []
    mine = package_of(me)
    out = []
    for imp in all_imports(path, modules):
        theirs = package_of(imp.target)
        if theirs == mine:
            continue
        inside = imp.target.split(".")[1 if theirs == "base" else 2:]  # the module path within its package
        if theirs == "base":
            inside = inside[1:]
        if any(_private(p) for p in inside) or (imp.name is not None and _private(imp.name)):
            out.append(f"{me} -> {imp.target}" + (f".{imp.name}" if imp.name else ""))
    return out


def _allowed(found: str) -> str | None:
    importer, _, name = found.partition(" -> ")
    for entry in sorted(PRIVATE_IMPORTS_ALLOWED):
        pattern, _, allowed = entry.partition(" -> ")
        if allowed == name and fnmatch.fnmatchcase(importer, pattern):
            return entry
    return None


def _all_private_imports() -> list[str]:
    modules = known_modules()
    return [f for path in _sources() for f in private_imports(path, modules)]


def test_no_module_imports_another_packages_private_names():
    bad = sorted({f for f in _all_private_imports() if _allowed(f) is None})
    assert not bad, ("imports of another package's private names (use its public names; add a public one "
                     "where none fits):\n" + "\n".join(bad))


def test_the_private_import_allowlist_only_shrinks():
    """Each PRIVATE_IMPORTS_ALLOWED entry is still needed by some import: a converted one goes."""
    used = {_allowed(f) for f in _all_private_imports()}
    stale = sorted(PRIVATE_IMPORTS_ALLOWED - used)
    assert not stale, f"no import needs these any more: remove them from PRIVATE_IMPORTS_ALLOWED: {stale}"


def module_lines() -> dict[str, int]:
    return {module_name(p): len(p.read_text().splitlines()) for p in _sources()}


def oversized(lines: dict[str, int]) -> list[str]:
    return [f"{m}: {n} lines (at most {MAX_MODULE_LINES})" for m, n in sorted(lines.items())
            if n > MAX_MODULE_LINES and m not in LARGE_FOR_GOOD | LARGE_UNTIL_SPLIT]


def test_every_module_stays_under_the_line_limit():
    lines = module_lines()
    bad = oversized(lines)
    assert not bad, "modules over the line limit (split them into rooms):\n" + "\n".join(bad)
    done = sorted(m for m in LARGE_UNTIL_SPLIT if lines.get(m, 0) <= MAX_MODULE_LINES)
    assert not done, f"split (or gone): remove them from LARGE_UNTIL_SPLIT: {done}"


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
    assert any({"kbatch.record.batch", "kbatch.record.probe"} <= set(c) for c in cycles(graph))


def test_type_checking_imports_count(tmp_path):
    """A cycle through TYPE_CHECKING is a cycle: the import under TYPE_CHECKING is an edge."""
    f = tmp_path / "kbatch" / "record" / "probe.py"
    f.parent.mkdir(parents=True)
    f.write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from ..log import Log\n")
    assert imports_of_at(f, tmp_path) == [(3, "kbatch.log")]
    graph = import_graph()
    graph["kbatch.record.probe"] = imports_of_at(f, tmp_path)
    graph["kbatch.log"] = graph["kbatch.log"] + [(1, "kbatch.record.probe")]
    assert any({"kbatch.record.probe", "kbatch.log"} <= set(c) for c in cycles(graph))


@pytest.mark.parametrize("source, expected", [
    ("from ..record.file_records import _batch_at\n", "kbatch.cli.probe -> kbatch.record.file_records._batch_at"),
    ("def f():\n    from ..tables import _parquet\n", "kbatch.cli.probe -> kbatch.tables._parquet"),
    ("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from .._core import _FilterResult\n",
     "kbatch.cli.probe -> kbatch._core._FilterResult"),
])
def test_the_walk_catches_a_private_import(tmp_path, monkeypatch, source, expected):
    """A planted import of another package's private name (a name, a module, under TYPE_CHECKING)
    is found, and no allowlist entry lets it through."""
    f = tmp_path / "kbatch" / "cli" / "probe.py"
    f.parent.mkdir(parents=True)
    f.write_text(source)
    monkeypatch.setattr(Path, "relative_to", _relative_to_either(tmp_path))
    found = private_imports(f, known_modules() | {"kbatch.cli.probe"})
    assert found == [expected]
    assert _allowed(expected) is None


def test_same_package_and_base_imports_are_not_private_imports(tmp_path, monkeypatch):
    f = tmp_path / "kbatch" / "record" / "probe.py"
    f.parent.mkdir(parents=True)
    f.write_text("from .batch import _is_file_object\nfrom .. import _wire as W\nfrom .._backend import core\n")
    monkeypatch.setattr(Path, "relative_to", _relative_to_either(tmp_path))
    assert private_imports(f, known_modules() | {"kbatch.record.probe"}) == []


def test_the_line_limit_catches_a_long_module():
    lines = module_lines()
    lines["kbatch.record.probe"] = MAX_MODULE_LINES + 1
    lines["kbatch.record.batch"] = MAX_MODULE_LINES
    found = oversized(lines)
    assert f"kbatch.record.probe: {MAX_MODULE_LINES + 1} lines (at most {MAX_MODULE_LINES})" in found
    assert not any(f.startswith("kbatch.record.batch:") for f in found)


def test_the_line_limit_exempts_only_the_generated_tables_and_the_kernel_pair():
    assert LARGE_FOR_GOOD == {"kbatch.schema._tables", "kbatch._core", "kbatch._core_py"}
    assert LARGE_UNTIL_SPLIT <= {"kbatch.log.unified_log", "kbatch.log.cleaner", "kbatch.log.segment"}


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


REPO = Path(__file__).resolve().parents[2]
#: `kbatch.<word>` in the docs that is not a Python path: the tables' commit metadata keys, the JVM reader's class
NOT_PYTHON_PATHS = {"kbatch.offsets", "kbatch.ends", "kbatch.valueReader", "kbatch.spark.KafkaSegmentsSource",
                    # the JVM reader's session conf (spark.kbatch.pushDownAggregates) and a JVM class's method
                    "kbatch.pushDownAggregates", "kbatch.spark.SegmentSummaries.forget"}


def documented_paths() -> dict[str, str]:
    """Every `kbatch.x.y` and `from kbatch.x import y` in README.md and docs/*.md -> the first file naming it."""
    found: dict[str, str] = {}
    for doc in [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]:
        text = doc.read_text()
        for m in re.finditer(r"\bkbatch(?:\.[A-Za-z_]\w*)+", text):
            found.setdefault(m.group(0), doc.name)
        for m in re.finditer(r"from (kbatch(?:\.[A-Za-z_]\w*)*) import \(?([\w, ]+)", text):
            for name in m.group(2).split(","):
                name = name.strip().split(" as ")[0].strip()
                if name:
                    found.setdefault(f"{m.group(1)}.{name}", doc.name)
    return {p: f for p, f in found.items() if p not in NOT_PYTHON_PATHS}


def resolve(path: str) -> object:
    """The module or attribute a dotted kbatch path names (the longest importable module, then attributes)."""
    import importlib

    parts = path.split(".")
    for i in range(len(parts), 0, -1):
        module = ".".join(parts[:i])
        try:
            obj: object = importlib.import_module(module)
        except ModuleNotFoundError as e:
            if e.name is not None and (module == e.name or module.startswith(e.name + ".")):
                continue  # not a module: the rest is attributes
            raise
        for attr in parts[i:]:
            obj = getattr(obj, attr)
        return obj
    raise AssertionError(path)


def _needs_spark(path: str) -> bool:
    return path == "kbatch.spark" or path.startswith("kbatch.spark.")


def test_the_docs_name_paths():
    paths = documented_paths()
    assert {"kbatch.columns.decode.iter_record_batches", "kbatch.log.fetch.read_log", "kbatch.values.Avro",
            "kbatch.server.serve", "kbatch.spark.register"} <= set(paths)


def test_public_names_and_documented_paths_import():
    """Every name in kbatch.__all__ and every module path the docs name imports. Without pyspark
    (the wheel's own test run: the test and cli extras) kbatch.spark raises MissingDependencyError
    naming the `spark` extra, and so does every path under it; with pyspark they import."""
    import importlib.util

    from kbatch.errors import MissingDependencyError

    for name in kbatch.__all__:
        assert getattr(kbatch, name) is not None, name
    from kbatch.log import Log, LogConfig, OffsetAndTimestamp, offsets_for_times, rebuild_indexes, verify_indexes  # noqa: F401
    have_spark = importlib.util.find_spec("pyspark") is not None
    failed = []
    for path, doc in sorted(documented_paths().items()):
        if _needs_spark(path) and not have_spark:
            with pytest.raises(MissingDependencyError, match=r"'spark' extra"):
                resolve(path)
            continue
        try:
            resolve(path)
        except (ImportError, AttributeError) as e:
            failed.append(f"{path} (named in {doc}): {type(e).__name__}: {e}")
    assert not failed, "\n".join(failed)
