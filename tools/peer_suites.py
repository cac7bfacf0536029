#!/usr/bin/env python3
"""Run kafka-python's and aiokafka's own record test suites with kbatch.compat installed.

The clients' PyPI releases do not ship these suites, so they come from a checkout of each client
at the installed version's tag (git clone --branch 3.0.11 https://github.com/dpkp/kafka-python;
git clone --branch v0.14.0 https://github.com/aio-libs/aiokafka). Each suite is copied to a
temporary directory and run three ways per client: as is (the baseline), and with a root conftest
that calls kbatch.compat.install(...) before any test module imports the client, on each kbatch
backend (and, for aiokafka, with and without its C extension). The conftest asserts that the
client's record classes really are kbatch's before a test runs.

    PYTHONPATH=src .venv/bin/python tools/peer_suites.py --kafka-python ../kafka-python --aiokafka ../aiokafka

Test-only needs of the suites: xxhash (kafka-python's lz4 tests), pytest-asyncio and docker
(aiokafka's conftest imports it); install them wherever the interpreter finds them.
"""
from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

CONFTEST = '''# written by kbatch tools/peer_suites.py: the drop-in goes in before the suite imports the client
import importlib

import kbatch.compat

kbatch.compat.install({client!r})
for _mod, _names in {checks!r}:
    _m = importlib.import_module(_mod)
    for _n in _names:
        assert getattr(_m, _n).__module__.startswith("kbatch."), (_mod, _n, getattr(_m, _n))
'''

SUITES = {
    # client: (suite folder in its checkout, {conftest checks}, extra pytest arguments, variants)
    "kafka-python": ("test/record", [
        ("kafka.record", ["MemoryRecords", "MemoryRecordsBuilder"]),
        ("kafka.record.memory_records", ["MemoryRecords", "MemoryRecordsBuilder"]),
        ("kafka.record.default_records", ["DefaultRecordBatch", "DefaultRecordBatchBuilder"])],
        [], [{}]),
    "aiokafka": ("tests/record", [
        ("aiokafka.record", ["MemoryRecords"]),
        ("aiokafka.record.memory_records", ["MemoryRecords"]),
        ("aiokafka.record.default_records", ["DefaultRecordBatch", "DefaultRecordBatchBuilder"])],
        ["-o", "asyncio_default_fixture_loop_scope=function"],
        [{}, {"AIOKAFKA_NO_EXTENSIONS": "1"}]),
}


def copy_suite(checkout: str, suite: str, dest: str) -> None:
    top = suite.split("/")[0]
    shutil.copytree(os.path.join(checkout, top), os.path.join(dest, top))  # with the suite's own conftest
    for cfg in ("pyproject.toml", "setup.cfg", "pytest.ini", "tox.ini"):
        if os.path.exists(os.path.join(checkout, cfg)):
            shutil.copy(os.path.join(checkout, cfg), dest)


def run_suite(dest: str, suite: str, extra: list, env: dict) -> tuple[int, str]:
    cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", suite, *extra]
    p = subprocess.run(cmd, cwd=dest, env=env, capture_output=True, text=True)
    lines = [ln for ln in p.stdout.splitlines() if re.search(r"\d+ (passed|failed|error)", ln)]
    return p.returncode, lines[-1] if lines else (p.stdout + p.stderr)[-400:]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--kafka-python", metavar="DIR", help="a checkout of dpkp/kafka-python")
    ap.add_argument("--aiokafka", metavar="DIR", help="a checkout of aio-libs/aiokafka")
    args = ap.parse_args(argv)
    checkouts = {"kafka-python": args.kafka_python, "aiokafka": args.aiokafka}
    if not any(checkouts.values()):
        ap.error("give at least one client checkout")
    failed = False
    for client, checkout in checkouts.items():
        if not checkout:
            continue
        suite, checks, extra, variants = SUITES[client]
        with tempfile.TemporaryDirectory(prefix=f"kbatch-peer-{client}-") as tmp:
            plain, dropin = os.path.join(tmp, "plain"), os.path.join(tmp, "dropin")
            for d in (plain, dropin):
                os.makedirs(d)
                copy_suite(checkout, suite, d)
            with open(os.path.join(dropin, "conftest.py"), "w") as f:
                f.write(CONFTEST.format(client=client, checks=checks))
            for variant in variants:
                runs = [("baseline", plain, {})] + [(f"kbatch {b}", dropin, {"KBATCH_BACKEND": b})
                                                    for b in ("cython", "python")]
                for label, where, env_add in runs:
                    env = dict(os.environ, **variant, **env_add)
                    env["PYTHONPATH"] = os.pathsep.join([os.path.join(ROOT, "src"), env.get("PYTHONPATH", "")])
                    rc, summary = run_suite(where, suite, extra, env)
                    failed |= rc != 0
                    tag = " ".join(f"{k}={v}" for k, v in variant.items())
                    print(f"{client:13s} {tag:26s} {label:15s} rc={rc}  {summary}", flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
