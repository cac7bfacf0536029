"""Shared test setup: the `backend` fixture (every kernel test on both backends) and the
hypothesis profiles.

`backend` returns the kernel module (kbatch._core_py or kbatch._core) and makes it the live one
(kbatch._backend.core) for the test, so code that calls `_backend.core.<fn>` runs on it too.
A missing Cython extension fails the "cython" case, unless KBATCH_ALLOW_NO_CYTHON=1 turns that
into a skip (for pure-Python-only environments).

Hypothesis: HYPOTHESIS_PROFILE=default (100 examples, the default) or ci (500 examples).
"""
import importlib
import os

import pytest
from hypothesis import settings

settings.register_profile("default", max_examples=100, deadline=None)
settings.register_profile("ci", max_examples=500, deadline=None)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "default"))

BACKEND_MODULES = {"python": "kbatch._core_py", "cython": "kbatch._core"}

# the summary cache (kbatch.log.summary) of the tests' logs goes to a temporary directory, never the
# user's ~/.cache (subprocesses inherit it); a test that needs its own passes a SummaryCache
if "KBATCH_SUMMARY_CACHE" not in os.environ:
    import tempfile

    os.environ["KBATCH_SUMMARY_CACHE"] = tempfile.mkdtemp(prefix="kbatch-summary-cache-")

# real Apache Kafka brokers: kafka_version, kafka_dist, kafka_broker, kafka_driver (docs/real-kafka.md)
pytest_plugins = ["support.kafka_plugin"]


def load_backend(name: str):
    """The kernel module called `name`; fails (or skips, if allowed) when cython is missing."""
    try:
        return importlib.import_module(BACKEND_MODULES[name])
    except ImportError as e:
        if name == "cython" and os.environ.get("KBATCH_ALLOW_NO_CYTHON", "") == "1":
            pytest.skip(f"kbatch._core is not built ({e}); KBATCH_ALLOW_NO_CYTHON=1")
        pytest.fail(f"cannot import {BACKEND_MODULES[name]}: {e} (build it with "
                    "`python setup.py build_ext --inplace`, or set KBATCH_ALLOW_NO_CYTHON=1)",
                    pytrace=False)


@pytest.fixture(params=list(BACKEND_MODULES))
def backend(request, monkeypatch):
    """The kernel module of one backend, also installed as kbatch._backend.core for the test."""
    mod = load_backend(request.param)
    import kbatch._backend

    monkeypatch.setattr(kbatch._backend, "core", mod)
    return mod


@pytest.fixture(scope="module")
def s3():
    """A real S3 API on loopback (moto's server mode behind a counting proxy: tests/support/s3server.py),
    with AWS_* in the environment as a user sets them. Skips when moto[server] is missing."""
    pytest.importorskip("moto.server", reason="moto[server] (the S3 test server) is not installed")
    pytest.importorskip("boto3", reason="boto3 (moto's client) is not installed")
    from support.s3server import S3Server, environment

    server = S3Server()
    try:
        with environment(server.env()):
            yield server
    finally:
        server.stop()
