"""The sub-agent tests' fixture (:func:`tests.agents.kit.make_agents`)."""

from tests.agents.kit import make_agents

__all__ = ["make_agents"]
