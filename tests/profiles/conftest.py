"""Personas and projects end to end: the delegation stand-ins are shared."""

from tests.delegate.conftest import bin_dir as bin_dir  # noqa: F401 - fixtures, shared
from tests.delegate.conftest import workspace as workspace  # noqa: F401
from tests.gateway.conftest import sidecar as sidecar  # noqa: F401 - the fixture, shared
