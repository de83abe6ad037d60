"""The Telegram harness and the live sidecar, shared from their folders."""

from tests.gateway.conftest import sidecar as sidecar  # noqa: F401 - the fixture, shared
from tests.telegram.conftest import bot as bot  # noqa: F401 - the fixture, shared
