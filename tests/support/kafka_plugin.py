"""pytest fixtures for real Apache Kafka brokers (registered by tests/conftest.py; docs/real-kafka.md).

- `kafka_version`: one session-wide parameter per version the tests run (the pinned ones in
  tools/kafka_dist.py, KBATCH_KAFKA_VERSIONS, or KBATCH_KAFKA_HOME's distribution);
- `kafka_dist`: that version's jars, fetched on first use; the test SKIPS, with the reason, when
  they cannot be had (Maven Central unreachable, no mvn, no JDK);
- `kafka_broker`: one broker per version for the whole session, started once; a test may stop,
  kill and start it again, and the next user gets it as that test left it: call `start()` (a
  no-op while it runs) before using it;
- `kafka_driver`: Kafka's Java clients (tests/support/java/KafkaDriver.java) for that version.

A run that skipped real-Kafka tests says so, with the reason, in the terminal summary; a test
that fails with a session broker in use gets the broker's new WARN and ERROR lines in its report
(what a client's timeout cannot say: a failed log directory, a stuck controller, an OOM).
"""
from __future__ import annotations

import re
from typing import Any

import pytest

from support.kafka_broker import KafkaBroker, KafkaUnavailable, dist_module, kafka_dist as _kafka_dist

SKIP_PREFIX = "real Kafka"

#: version -> why it could not run (filled as fixtures fail)
_UNAVAILABLE: dict[str, str] = {}
#: version -> where its jars came from (filled as brokers start)
_RAN: dict[str, str] = {}
_SKIPPED_TESTS: list[str] = []
#: version -> the session's broker, and how much of its server.log a failure report has shown
_BROKERS: dict[str, KafkaBroker] = {}
_SHOWN: dict[str, int] = {}
_PROBLEM = re.compile(r"\b(WARN|ERROR|FATAL)\b|Exception|^# kbatch test:|^\tat ")


def _versions() -> list[str]:
    try:
        return list(dist_module().test_versions())
    except Exception as e:  # noqa: BLE001 - reported by the kafka_dist fixture as a skip
        _UNAVAILABLE.setdefault("(any)", str(e))
        return ["unavailable"]


@pytest.fixture(scope="session", params=_versions(), ids=lambda v: f"kafka-{v}")
def kafka_version(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture(scope="session")
def kafka_dist(kafka_version: str) -> Any:
    if kafka_version == "unavailable":
        pytest.skip(f"{SKIP_PREFIX}: {_UNAVAILABLE.get('(any)', 'no Kafka versions')}")
    if kafka_version in _UNAVAILABLE:
        pytest.skip(f"{SKIP_PREFIX}: {_UNAVAILABLE[kafka_version]}")
    try:
        return _kafka_dist(kafka_version)
    except KafkaUnavailable as e:
        _UNAVAILABLE[kafka_version] = str(e)
        pytest.skip(f"{SKIP_PREFIX}: {e}")


@pytest.fixture(scope="session")
def kafka_driver(kafka_dist: Any) -> Any:
    from support.kafka_driver import JavaDriver

    try:
        return JavaDriver(kafka_dist)
    except KafkaUnavailable as e:
        _UNAVAILABLE[kafka_dist.version] = str(e)
        pytest.skip(f"{SKIP_PREFIX}: Kafka {kafka_dist.version}: {e}")


@pytest.fixture(scope="session")
def kafka_broker(kafka_dist: Any, tmp_path_factory: pytest.TempPathFactory) -> Any:
    """The session's broker of this version: started, on loopback, over a temporary log dir."""
    broker = KafkaBroker(kafka_dist, tmp_path_factory.mktemp(f"kafka-{kafka_dist.version}-"))
    try:
        _BROKERS[kafka_dist.version] = broker
        broker.start()
        _RAN[kafka_dist.version] = kafka_dist.origin
        yield broker
    finally:
        broker.close()


def broker_problems(broker: KafkaBroker, since: int = 0, limit: int = 80) -> str:
    """The last `limit` WARN/ERROR/exception lines of the broker's server.log after character `since`."""
    lines = [line for line in broker.log_text()[since:].splitlines() if _PROBLEM.search(line)]
    return "\n".join(lines[-limit:])


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[Any]) -> Any:
    outcome = yield
    report = outcome.get_result()
    callspec = getattr(item, "callspec", None)
    version = callspec.params.get("kafka_version") if callspec is not None else None
    if not report.failed or not isinstance(version, str) or version not in _BROKERS:
        return
    broker = _BROKERS[version]
    # each failure shows what the broker logged since the last one shown (one broken fixture
    # fails many tests: its log is printed once)
    text_len = len(broker.log_text())
    since, _SHOWN[version] = _SHOWN.get(version, 0), text_len
    problems = broker_problems(broker, since)
    if problems:
        report.sections.append((f"Kafka {version} broker: WARN and ERROR lines of {broker.log_file}", problems))


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    if report.skipped and isinstance(report.longrepr, tuple) and SKIP_PREFIX in str(report.longrepr[2]):
        _SKIPPED_TESTS.append(report.nodeid)


def pytest_terminal_summary(terminalreporter: Any) -> None:
    tr = terminalreporter
    if _UNAVAILABLE or _SKIPPED_TESTS:
        tr.write_sep("=", f"REAL KAFKA TESTS SKIPPED: {len(_SKIPPED_TESTS)}", yellow=True, bold=True)
        for version, why in sorted(_UNAVAILABLE.items()):
            first = why.strip().splitlines()[0] if why.strip() else "?"
            tr.write_line(first if first.startswith(f"Kafka {version}") else f"Kafka {version}: {first}")
        tr.write_line("These tests check kbatch against a real broker; see docs/real-kafka.md "
                      "(python3 dev.py kafka fetch, KBATCH_KAFKA_HOME).")
    if _RAN:
        tr.write_sep("-", "real Kafka brokers run")
        for version, origin in sorted(_RAN.items()):
            tr.write_line(f"Kafka {version}: {origin}")
