"""The test suite, a package so each folder can keep its own conftest.py (fixtures) beside its tests."""
