"""Client tests talk to a live sidecar: the gateway suite's harness."""

from tests.gateway.conftest import sidecar as sidecar  # noqa: F401 - the fixture, shared
