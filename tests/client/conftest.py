"""Dummy AWS credentials for the tests that sign (the stand-in server: tests/standins/fixtures.py)."""

from tests.standins.conftest import _dummy_aws

__all__ = ["_dummy_aws"]
