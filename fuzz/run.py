"""One atheris process for one target: python -m fuzz.run TARGET [libFuzzer flags] [corpus dirs]."""
import sys

import atheris

from fuzz.native import load_libfuzzer

# a --fuzz build of kbatch._core needs libFuzzer's callbacks global before it loads (fuzz/native.py)
INTERNAL_LIBFUZZER = load_libfuzzer()

with atheris.instrument_imports(include=["kbatch"]):
    import kbatch  # noqa: F401  (instrumented for coverage)
    from fuzz.targets import TARGETS


def main():
    name = sys.argv[1]
    target = TARGETS[name]
    kwargs = {"internal_libfuzzer": True} if INTERNAL_LIBFUZZER else {}
    atheris.Setup([sys.argv[0]] + sys.argv[2:], target, **kwargs)
    atheris.Fuzz()


if __name__ == "__main__":
    main()
