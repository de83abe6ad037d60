"""[mcp] and [[mcp.servers]] keys: defaults, validation, ${ENV} expansion, secrets."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from kernel.config import Config, MCPServerConfig, load_config
from kernel.config.secrets import secrets_of
from kernel.core.errors import ConfigError
from tests.mcp.conftest import MCPKernel, mcp_toml, stdio_server
from tests.sim.anthropic_sim import AnthropicSim

BASE = """
[general]
default_provider = "p"
language = "en"
[providers.p]
type = "openai_compat"
api_key = "sk-provider-key-0123456789"
default_model = "m"
"""


def load(
    tmp_path: Path,
    servers: list[dict[str, Any]],
    settings: dict[str, Any] | None = None,
    env: dict[str, str] | None = None,
) -> Config:
    path = tmp_path / "config.toml"
    path.write_text(BASE + mcp_toml(servers, settings))
    return load_config(path, env=env or {}, require_telegram=False)


def test_server_defaults(tmp_path: Path) -> None:
    config = load(tmp_path, [{"name": "s", "type": "stdio", "command": "srv"}])
    assert config.mcp_servers == [MCPServerConfig(name="s", type="stdio", command="srv")]
    server = config.mcp_servers[0]
    assert (server.enabled, server.connect_timeout, server.timeout) == (True, 10.0, 60.0)
    assert config.mcp.reconnect_attempts == 5 and config.mcp.ping_interval == 30.0


def test_env_and_cwd(tmp_path: Path) -> None:
    table = {
        "name": "s",
        "type": "stdio",
        "command": "srv",
        "cwd": "servers/s",
        "env": {"API_KEY": "${S_KEY}", "MODE": "fast"},
        "headers": {},
    }
    config = load(tmp_path, [table], env={"S_KEY": "s-secret-0123456789"})
    server = config.mcp_servers[0]
    assert server.env == {"API_KEY": "s-secret-0123456789", "MODE": "fast"}
    assert server.cwd == tmp_path / "servers" / "s"
    assert "s-secret-0123456789" in secrets_of(config)


def test_unset_env_variable_skips_the_server(tmp_path: Path) -> None:
    servers = [
        {"name": "s", "type": "stdio", "command": "srv", "env": {"K": "${NOPE}"}},
        {"name": "ok", "type": "stdio", "command": "srv"},
    ]
    config = load(tmp_path, servers)
    assert [s.name for s in config.mcp_servers] == ["ok"]
    assert any("NOPE" in w and "skipped" in w for w in config.warnings)


@pytest.mark.parametrize(
    ("servers", "settings", "key"),
    [
        ([{"name": "h", "type": "http"}], None, "mcp.servers[0].url"),
        ([{"name": "h", "type": "http", "url": "ftp://x"}], None, "mcp.servers[0].url"),
        ([{"name": "s", "type": "stdio"}], None, "mcp.servers[0].command"),
        ([{"name": "s", "type": "sse", "url": "http://x"}], None, "mcp.servers[0].type"),
        (
            [{"name": "s", "type": "stdio", "command": "a"}] * 2,
            None,
            "mcp.servers[1].name",
        ),
        ([{"name": " ", "type": "stdio", "command": "a"}], None, "mcp.servers[0].name"),
        (
            [{"name": "s", "type": "stdio", "command": "a", "connect_timeout": 0}],
            None,
            "mcp.servers[0].connect_timeout",
        ),
        (
            [{"name": "s", "type": "stdio", "command": "a", "timeout": "slow"}],
            None,
            "mcp.servers[0].timeout",
        ),
        (
            [{"name": "s", "type": "stdio", "command": "a", "env": ["x"]}],
            None,
            "mcp.servers[0].env",
        ),
        ([], {"ping_interval": -1}, "mcp.ping_interval"),
        ([], {"reconnect_attempts": 0}, "mcp.reconnect_attempts"),
    ],
)
def test_refusals_name_the_key(
    tmp_path: Path, servers: list[dict[str, Any]], settings: dict[str, Any] | None, key: str
) -> None:
    with pytest.raises(ConfigError) as refused:
        load(tmp_path, servers, settings=settings)
    assert refused.value.key == key
    assert key in str(refused.value) and "\n" not in str(refused.value)


async def test_env_and_cwd_reach_the_server_process(
    model: AnthropicSim, mcp_kernel: MCPKernel, tmp_path: Path
) -> None:
    (tmp_path / "work").mkdir()
    server = stdio_server("test", cwd="work", env={"GREETING": "${HELLO}"})
    kernel = await mcp_kernel(model, [server], env={"HELLO": "bonjour"})

    outcome = await kernel.tools.call("mcp_test__whereami", {"variable": "GREETING"})

    assert outcome.content == f"{tmp_path / 'work'} bonjour"


async def test_the_owners_envs_reach_the_server_and_its_own_env_wins(
    model: AnthropicSim, mcp_kernel: MCPKernel, tmp_path: Path
) -> None:
    server = stdio_server("test", env={"GREETING": "from the server table"})
    kernel = await mcp_kernel(model, [server], start=False)
    # As the sidecar's PUT /envs leaves it: the live config's envs overlay.
    kernel.config.envs.update({"SHARED": "for every child", "GREETING": "overridden?"})
    await kernel.start()

    shared = await kernel.tools.call("mcp_test__whereami", {"variable": "SHARED"})
    own = await kernel.tools.call("mcp_test__whereami", {"variable": "GREETING"})

    assert shared.content.endswith(" for every child")
    assert own.content.endswith(" from the server table")
