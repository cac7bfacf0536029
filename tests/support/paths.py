"""Where things are, for every test: the checkout, its src/ and the shared test data."""
import importlib.util
import sys
from pathlib import Path
from types import ModuleType

TESTS = Path(__file__).resolve().parents[1]
ROOT = TESTS.parent
SRC = ROOT / "src"
BROKER_DATA = TESTS / "data" / "brokers"
SUPPORT = TESTS / "support"


def tool_module(name: str) -> ModuleType:
    """tools/<name>.py of this checkout (the jar fetchers: standard library only), loaded once.
    FileNotFoundError when the tests run outside a source checkout."""
    path = ROOT / "tools" / f"{name}.py"
    if not path.exists():
        raise FileNotFoundError(f"{path} is not here (the tests run outside a source checkout)")
    key = f"kbatch_tools_{name}"
    mod = sys.modules.get(key)
    if mod is None:
        spec = importlib.util.spec_from_file_location(key, path)
        assert spec is not None and spec.loader is not None
        mod = importlib.util.module_from_spec(spec)
        sys.modules[key] = mod
        spec.loader.exec_module(mod)
    return mod
