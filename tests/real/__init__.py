"""The opt-in real-client suite: real software installed from the registries today
(Claude Code, Codex, Gemini CLI, MCP servers from npm and PyPI) pointed at the loopback
simulators, one module per area.

    scripts/install-real-clients && KERNEL_TEST_REAL_CLIENTS=1 uv run pytest tests/real -v

Every module here starts with

    pytestmark = [
        pytest.mark.slow,
        pytest.mark.skipif(not os.environ.get("KERNEL_TEST_REAL_CLIENTS"), reason=SKIP_REASON),
    ]

and finds its executables through the ``real_bin`` fixture (``conftest.py``).
"""

ENV = "KERNEL_TEST_REAL_CLIENTS"
SKIP_REASON = (
    "opt-in real-client suite: run scripts/install-real-clients, then set "
    "KERNEL_TEST_REAL_CLIENTS=1"
)
