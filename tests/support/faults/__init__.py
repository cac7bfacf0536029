"""Fault injection for kbatch's storage: see helper.py and tests/test_faults.py."""
