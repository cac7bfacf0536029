"""The read-path matrix (tests/support/read_path_cases.py), built once for every engine's test."""
import pytest

from support import read_path_cases as C


@pytest.fixture(scope="session")
def parts(tmp_path_factory):
    return C.build_all(str(tmp_path_factory.mktemp("scan-read-path")))
