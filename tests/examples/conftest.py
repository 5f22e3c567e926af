"""The probe's fixtures: a reference server in another process, and dummy AWS credentials."""

from tests.standins.conftest import _dummy_aws, reference_server, shared_server

__all__ = ["_dummy_aws", "reference_server", "shared_server"]
