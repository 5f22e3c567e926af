"""The stand-in server's fixtures (tests/standins/conftest.py), and dummy AWS credentials."""

from tests.standins.conftest import _dummy_aws, reference_server, shared_server

__all__ = ["_dummy_aws", "reference_server", "shared_server"]
