"""Channel tests use the Telegram bot harness and the sidecar harness of the other suites."""

from tests.gateway.conftest import sidecar as sidecar  # noqa: F401 - the fixture, shared
from tests.telegram.conftest import bot as bot  # noqa: F401 - the fixture, shared
