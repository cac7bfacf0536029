"""Fault injection for kbatch's storage: see helper.py and tests/system/test_faults.py."""
