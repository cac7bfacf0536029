"""Other projects' client test suites against `kbatch serve` (issue 43; docs/serve.md, "Conformance").

KBATCH_CONFORMANCE=1 runs (minutes to an hour; the default suite runs only the matrix check below,
and tests/server/test_serve_librdkafka_subset.py repeats the librdkafka programs' consumer, offset
and group checks with confluent-kafka):

- librdkafka's own test programs (tools/librdkafka_suite.py: its source from crates.io's rdkafka-sys,
  built once into ~/.cache/kbatch), each against its own `kbatch serve --writable` set up as the
  suite's "default" or "noautocreate" scenario;
- Kafka's `org.apache.kafka.tools.ClientCompatibilityTest` (the kafka-tools jar of each pinned
  Kafka version, cached by tools/kafka_dist.py) against a writable serve's bootstrap;
- franz-go's pkg/kgo tests (tools/franz_go_suite.py: the module from the Go module proxy, its test
  binary compiled once into ~/.cache/kbatch) with KGO_SEEDS naming one writable serve.

Each run records its outcomes in bench/results-conformance.json and rewrites docs/serve.md's matrix
from them (tools/conformance_matrix.py). A program that fails is a test failure here: the matrix's
exclusions are the programs that need an API or a broker feature serve does not have, each with
its reason (tools/librdkafka_suite.py EXCLUDED), and none is excluded for flakiness."""
from __future__ import annotations

import datetime
import os
import subprocess
import sys

import pytest

from support.paths import ROOT, SRC, tool_module

CONFORMANCE = os.environ.get("KBATCH_CONFORMANCE", "") == "1"
needs_conformance = pytest.mark.skipif(not CONFORMANCE, reason="KBATCH_CONFORMANCE=1 runs other projects' suites")


def _commit() -> str:
    try:
        return subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True,
                              timeout=30).stdout.strip() or "?"
    except OSError:
        return "?"


def _record(suite: str, version: str, outcomes: list[dict], note: str = "") -> None:
    matrix = tool_module("conformance_matrix")
    matrix.save({"suite": suite, "version": version, "note": note, "commit": _commit(),
                 "ran": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
                 "outcomes": outcomes})
    matrix.rewrite()


def test_docs_matrix_is_generated_from_the_recorded_results():
    """docs/serve.md's matrix is tools/conformance_matrix.py's rendering of the recorded run (never
    edited by hand), and every program not passed says why."""
    try:
        matrix = tool_module("conformance_matrix")
    except FileNotFoundError as e:  # the release check runs the suite against a wheel, without tools/
        pytest.skip(str(e))
    assert matrix.render(matrix.load()) in (ROOT / "docs" / "serve.md").read_text()
    for suite in matrix.load():
        for o in suite["outcomes"]:
            assert o["result"] in matrix.KINDS, o
            assert o["result"] == "passed" or o["reason"], o


@needs_conformance
def test_librdkafka_test_programs():
    suite = tool_module("librdkafka_suite")
    try:
        suite.build()
    except suite.SuiteError as e:
        pytest.skip(f"librdkafka's test-runner cannot be built here: {e}")
    outcomes = suite.run(None, None, python=sys.executable, pythonpath=str(SRC),
                         multiplier=float(os.environ.get("KBATCH_CONFORMANCE_TIMEOUT_MULTIPLIER", "2")), timeout=1800)
    _record("librdkafka", suite.LIBRDKAFKA_VERSION, [o.as_dict() for o in outcomes],
            note=f"test-runner told TEST_KAFKA_VERSION={suite.KAFKA_VERSION}; source: crates.io {suite.CRATE} "
                 f"{suite.CRATE_VERSION}")
    failed = [f"{o.program}: {o.reason}" for o in outcomes if o.result == "failed"]
    assert not failed, "\n".join(failed)


#: ClientCompatibilityTest's feature flags: what serve supports (all but DescribeAcls)
CCT_FLAGS = {"--offsets-for-times-supported": "true", "--cluster-id-supported": "true",
             "--expect-record-too-large-exception": "false",  # KIP-74: the first batch is returned whole
             "--num-cluster-nodes": "1", "--create-topics-supported": "true", "--describe-acls-supported": "false",
             "--describe-configs-supported": "true", "--idempotent-producer-supported": "true"}


@needs_conformance
@pytest.mark.parametrize("version", ["4.4.0", "3.9.2"])
def test_kafka_client_compatibility_test(version, tmp_path):
    from kbatch.server import serve
    from support.kafka_broker import KafkaUnavailable, kafka_dist

    try:
        dist = kafka_dist(version)
    except KafkaUnavailable as e:
        pytest.skip(f"Kafka {version}: {e}")
    (tmp_path / "logs").mkdir()
    with serve(str(tmp_path / "logs"), listen="127.0.0.1:0", read_only=False, auto_create_topics=True,
               group_initial_rebalance_delay_ms=0) as srv:
        cmd = ["java", "-Xmx512m", "-cp", dist.classpath, "org.apache.kafka.tools.ClientCompatibilityTest",
               "--topic", "compat", "--bootstrap-server", srv.bootstrap]
        for flag, value in CCT_FLAGS.items():
            cmd += [flag, value]
        t0 = datetime.datetime.now()
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=600, cwd=tmp_path)
        took = (datetime.datetime.now() - t0).total_seconds()
    ok = proc.returncode == 0 and "SUCCESS" in proc.stdout
    tail = (proc.stdout + proc.stderr).strip().splitlines()[-3:]
    checks = ", ".join(f"{k.strip('-')}={v}" for k, v in CCT_FLAGS.items())
    outcomes = [{"program": "ClientCompatibilityTest", "result": "passed" if ok else "failed",
                 "seconds": round(took, 1), "reason": "" if ok else " / ".join(tail)[:400]},
                {"program": "ClientCompatibilityTest --describe-acls-supported true", "result": "excluded",
                 "seconds": 0.0, "reason": "DescribeAcls (29) is not implemented: serve has no authorizer (ACLs)"}]
    _record("Kafka ClientCompatibilityTest", version, outcomes, note=checks)
    assert ok, "\n".join(tail)


@needs_conformance
def test_franz_go_kgo_tests():
    suite = tool_module("franz_go_suite")
    try:
        suite.build()
    except suite.SuiteError as e:
        pytest.skip(f"franz-go's kgo tests cannot be built here: {e}")
    outcomes = suite.run(None, python=sys.executable, pythonpath=str(SRC))
    _record("franz-go pkg/kgo", suite.VERSION, [o.as_dict() for o in outcomes],
            note="one server for the whole binary, KGO_TEST_RF=1; the tests that need no broker run too")
    failed = [f"{o.program}: {o.reason}" for o in outcomes if o.result == "failed"]
    assert not failed, "\n".join(failed)
