"""One atheris process for one target: python -m fuzz.run TARGET [libFuzzer flags] [corpus dirs]."""
import sys

import atheris

with atheris.instrument_imports(include=["kbatch"]):
    import kbatch  # noqa: F401  (instrumented for coverage)
    from fuzz.targets import TARGETS


def main():
    name = sys.argv[1]
    target = TARGETS[name]
    atheris.Setup([sys.argv[0]] + sys.argv[2:], target)
    atheris.Fuzz()


if __name__ == "__main__":
    main()
