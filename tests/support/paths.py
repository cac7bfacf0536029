"""Where things are, for every test: the checkout, its src/ and the shared test data."""
from pathlib import Path

TESTS = Path(__file__).resolve().parents[1]
ROOT = TESTS.parent
SRC = ROOT / "src"
BROKER_DATA = TESTS / "data" / "brokers"
SUPPORT = TESTS / "support"
