"""Cron tests use the Telegram bot harness and the sidecar harness of the other suites,
a webhook receiver (``hook``) and a model that echoes every prompt (``echo``)."""

from collections.abc import AsyncIterator

import pytest

from tests.gateway.conftest import sidecar as sidecar  # noqa: F401 - the fixture, shared
from tests.sim.anthropic_sim import AnthropicSim
from tests.sim.webhook_sim import WebhookSim
from tests.telegram.conftest import bot as bot  # noqa: F401 - the fixture, shared


@pytest.fixture
async def hook() -> AsyncIterator[WebhookSim]:
    async with WebhookSim() as sim:
        yield sim


@pytest.fixture
async def echo() -> AsyncIterator[AnthropicSim]:
    async with AnthropicSim(fallback="echo") as sim:
        yield sim
