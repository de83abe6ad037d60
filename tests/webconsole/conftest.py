"""The web console's tests share the running sidecar of tests/gateway."""

from tests.gateway.conftest import sidecar as sidecar  # noqa: F401 - the fixture, shared
