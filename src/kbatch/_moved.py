"""Module paths from before the layout of record/, columns/ and log/: `import kbatch.segment` (and
the rest below) still works, gives the module at its new path (the same module object, so
monkeypatching either name patches both) and warns once with DeprecationWarning."""
from __future__ import annotations

import importlib
import importlib.abc
import importlib.util
import sys
import warnings
from types import ModuleType
from typing import Any

#: old path under kbatch -> new path under kbatch
MOVED = {
    "batch": "record.batch", "legacy": "record.legacy", "records": "record.control", "builder": "record.builder",
    "compression": "record.compression",
    "arrow": "columns.decode", "arrow_encode": "columns.encode", "partitioner": "columns.partitioner",
    "segment": "log.segment", "index": "log.index", "index_rules": "log.index_rules", "checkpoints": "log.checkpoints",
    "leader_epoch": "log.leader_epoch", "producer_state": "log.producer_state", "log_loader": "log.loader",
    "validate": "log.validator", "compaction": "log.cleaner", "layout": "log.layout",
    "coordinator_records": "schema.coordinator_records", "metadata_records": "schema.metadata_records",
    "raft_snapshot": "schema.raft_snapshot", "dump": "cli.dump_log",
}

#: names that left an old module for another one: bound on the old path's module when it is imported
_NAMES_MOVED = {"batch": {"iter_batches": "kbatch.record.file_records"}}


class _Alias(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    def find_spec(self, fullname: str, path: Any = None, target: Any = None) -> Any:
        pkg, _, name = fullname.partition(".")
        if pkg != "kbatch" or name not in MOVED:
            return None
        return importlib.util.spec_from_loader(fullname, self)

    def create_module(self, spec: Any) -> ModuleType:
        new = "kbatch." + MOVED[spec.name.partition(".")[2]]
        warnings.warn(f"{spec.name} moved to {new}; import it from there", DeprecationWarning, stacklevel=6)
        module = importlib.import_module(new)
        for name, home in _NAMES_MOVED.get(spec.name.partition(".")[2], {}).items():
            setattr(module, name, getattr(importlib.import_module(home), name))
        self._spec = module.__spec__  # the import system sets __spec__ to the alias's; exec_module puts it back
        return module

    def exec_module(self, module: ModuleType) -> None:
        module.__spec__ = self._spec  # already executed under its new name


def install() -> None:
    if not any(isinstance(f, _Alias) for f in sys.meta_path):
        sys.meta_path.append(_Alias())
