"""The live sidecar, shared from tests/gateway."""

from tests.gateway.conftest import sidecar as sidecar  # noqa: F401 - the fixture, shared
