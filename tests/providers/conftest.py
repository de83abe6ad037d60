"""Fixtures for the provider tests: adapters pointed at the simulators, closed after."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest

from kernel.providers.sdk import SDKProvider
from tests.providers.wire import Factory, Sim, provider_for


@pytest.fixture
async def make_provider() -> AsyncIterator[Factory]:
    """``make_provider(sim, **fields)``: :func:`provider_for`, closed after the test."""
    made: list[SDKProvider] = []

    def factory(sim: Sim, **fields: Any) -> SDKProvider:
        made.append(provider_for(sim, **fields))
        return made[-1]

    yield factory
    for provider in made:
        await provider.aclose()
