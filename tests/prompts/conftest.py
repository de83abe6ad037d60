"""The Telegram harness and the live sidecar, shared from their folders."""

from tests.gateway.conftest import sidecar as sidecar  # noqa: F401 - the fixture, shared
from tests.telegram.conftest import bot as bot  # noqa: F401 - the fixture, shared

# Seed 000's two prompt flags are off by default (issue 38): the tests of what they
# switch turn them on in the configuration they write.
FLAGS_ON = "\n[features]\nprompt_templates = true\nprompt_context_introspect = true\n"
