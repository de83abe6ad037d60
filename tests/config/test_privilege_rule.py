"""The privilege rule's parts that no route reaches alone (issue 33 item 2); the routes
themselves are tried in tests/gateway/test_privilege.py."""

from __future__ import annotations

from kernel.config import MCPServerConfig
from kernel.config.privilege import env_family, server_changes, stored_guarded


def test_headers_filled_from_kernels_environment_are_a_moved_secret() -> None:
    """``${VAR}`` headers (filled from Kernel's environment at load) are values the
    request did not give: a new HTTP server carrying them is privileged; the same
    headers written out by the caller are its own."""
    server = MCPServerConfig(
        name="docs", type="http", url="http://127.0.0.1:9/mcp", headers={"X-Key": "sk-env"}
    )
    [change] = server_changes(None, server, given={"${OPENAI_KEY}"})
    assert (change.field, change.kind, change.key_may) == (
        "mcp.servers.docs.headers",
        "destination",
        True,
    )
    assert server_changes(None, server, given={"sk-env"}) == []
    assert server_changes(server, server) == []
    assert [env_family(n) for n in ("Path", "http_proxy", "MY_SETTING")] == [
        "loader",
        "destination",
        None,
    ]


def test_what_runtime_toml_keeps_is_named_for_the_start_warning() -> None:
    overlay = {
        "envs": {"ld_preload": "/x.so", "GREETING": "hi", "HTTPS_PROXY": "http://h"},
        "providers": {"main": {"api_base": "http://127.0.0.1:9"}, "other": {"models": []}},
        "mcp": {"servers": [{"name": "s", "type": "stdio"}, {"name": "h", "type": "http"}]},
    }
    assert stored_guarded(overlay) == [
        "HTTPS_PROXY",
        "ld_preload",
        "providers.main.api_base",
        "mcp.servers.s",
    ]
    assert stored_guarded({"envs": "broken", "mcp": []}) == []
