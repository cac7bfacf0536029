"""pytest fixtures for real Apache Kafka brokers (registered by tests/conftest.py; docs/real-kafka.md).

- `kafka_version`: one session-wide parameter per version the tests run (the pinned ones in
  tools/kafka_dist.py, KBATCH_KAFKA_VERSIONS, or KBATCH_KAFKA_HOME's distribution);
- `kafka_dist`: that version's jars, fetched on first use; the test SKIPS, with the reason, when
  they cannot be had (Maven Central unreachable, no mvn, no JDK);
- `kafka_broker`: one broker per version for the whole session, started once; a test may stop,
  kill and start it again, and the next user gets it as that test left it: call `start()` (a
  no-op while it runs) before using it;
- `kafka_driver`: Kafka's Java clients (tests/support/java/KafkaDriver.java) for that version.

A run that skipped real-Kafka tests says so, with the reason, in the terminal summary.
"""
from __future__ import annotations

from typing import Any

import pytest

from support.kafka_broker import KafkaBroker, KafkaUnavailable, dist_module, kafka_dist as _kafka_dist

SKIP_PREFIX = "real Kafka"

#: version -> why it could not run (filled as fixtures fail)
_UNAVAILABLE: dict[str, str] = {}
#: version -> where its jars came from (filled as brokers start)
_RAN: dict[str, str] = {}
_SKIPPED_TESTS: list[str] = []


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
        broker.start()
        _RAN[kafka_dist.version] = kafka_dist.origin
        yield broker
    finally:
        broker.close()


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
