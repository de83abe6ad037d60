"""The sub-agent tests' fixtures: :func:`tests.agents.kit.make_agents`, and the
Telegram harness of ``tests/telegram``."""

from tests.agents.kit import make_agents
from tests.telegram.conftest import bot

__all__ = ["bot", "make_agents"]
