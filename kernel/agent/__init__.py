"""The agent core: turns, sessions, context. Knows no channel and no SDK."""
