"""``/healthz``, ``/version``, ``/runtime-config``, and the sidecar beside the Telegram
channel in one process."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import aiohttp

from kernel import __version__
from kernel.core.status import ChannelState
from kernel.gateway.routes import ROUTERS
from kernel.gateway.server import Gateway
from tests.conftest import SECRET_KEY
from tests.gateway.conftest import API_KEY, SidecarFactory, message
from tests.mcp.conftest import free_port, mcp_toml, stdio_server
from tests.sim.anthropic_sim import AnthropicSim
from tests.sim.script import Reply, Text, text_reply
from tests.sim.telegram_sim import OWNER
from tests.telegram.conftest import CONV, Factory
from tests.telegram.conftest import bot as bot  # noqa: F401 - the fixture, shared


@dataclass
class StubChannel:
    """A channel registering itself the way the Telegram channel does."""

    name: str
    state: str

    async def status(self) -> ChannelState:
        return ChannelState(self.name, self.state, {"polling": self.state == "running"})


async def test_version_and_healthz_ok(sidecar: SidecarFactory, anthropic_sim: AnthropicSim) -> None:
    sc = await sidecar(anthropic_sim, api_key=API_KEY)
    status, data, _ = await sc.call("GET", "/version", headers={})
    assert (status, data) == (200, {"name": "kernel", "version": __version__})
    status, data, _ = await sc.call("GET", "/healthz", headers={})
    assert status == 200
    assert data["status"] == "ok" and data["database"] == {"writable": True}
    assert data["channels"] == {} and data["mcp"] == {"servers": []}  # no kernel.mcp yet


async def test_healthz_reports_channels_and_mcp_servers(
    sidecar: SidecarFactory, anthropic_sim: AnthropicSim
) -> None:
    # Real MCP servers: the tests' stdio server, and an HTTP one where nothing listens.
    servers = [
        stdio_server("tools"),
        {
            "name": "docs",
            "type": "http",
            "url": f"http://127.0.0.1:{free_port()}/mcp",
            "connect_timeout": 2.0,
        },
    ]
    sc = await sidecar(anthropic_sim, extra=mcp_toml(servers, {"reconnect_attempts": 1}))
    sc.kernel.status_board.add(StubChannel("telegram", "running"))
    status, data, _ = await sc.call("GET", "/healthz")
    assert status == 200 and data["status"] == "degraded"
    assert data["channels"]["telegram"]["state"] == "running"
    tools, docs = data["mcp"]["servers"]
    assert (tools["name"], tools["type"], tools["state"]) == ("tools", "stdio", "connected")
    assert tools["tools"] == len(sc.kernel.mcp.tool_names("tools")) > 0
    assert (docs["name"], docs["type"], docs["state"], docs["tools"]) == (
        "docs",
        "http",
        "failed",
        0,
    )
    assert docs["last_error"]
    sc.kernel.status_board.add(StubChannel("telegram", "degraded"))
    _, data, _ = await sc.call("GET", "/healthz")
    assert data["status"] == "degraded" and data["channels"]["telegram"]["state"] == "degraded"


async def test_healthz_is_503_when_the_database_cannot_be_written(
    sidecar: SidecarFactory, anthropic_sim: AnthropicSim
) -> None:
    sc = await sidecar(anthropic_sim)
    await sc.kernel.store.close()
    status, data, _ = await sc.call("GET", "/healthz")
    assert status == 503
    assert data["status"] == "unavailable" and data["database"]["writable"] is False
    assert "closed" in data["database"]["error"]


async def test_runtime_config_has_flags_and_no_secrets(
    sidecar: SidecarFactory, anthropic_sim: AnthropicSim
) -> None:
    sc = await sidecar(anthropic_sim, api_key=API_KEY)
    status, data, response = await sc.call("GET", "/runtime-config")
    assert status == 200
    assert all(isinstance(v, bool) for v in data["features"].values())
    assert data["features"]["api_key_required"] is True
    assert data["features"]["prompt_templates"] is False  # seed 000's default (issue 38)
    text = await response.text()
    assert API_KEY not in text and SECRET_KEY not in text


async def test_runtime_config_reports_voice_from_the_real_sections(
    sidecar: SidecarFactory, anthropic_sim: AnthropicSim
) -> None:
    stt_key = "stt-key-0123456789abcdef"
    voice = f'\n[stt]\napi_key = "{stt_key}"\n\n[tts]\ntype = "edge"\n'
    sc = await sidecar(anthropic_sim, extra=voice)
    status, data, response = await sc.call("GET", "/runtime-config")
    assert status == 200
    assert data["features"]["stt"] is True and data["features"]["tts"] is True
    assert stt_key not in await response.text()
    await sc.stop()
    # Without the sections (or an [stt] without a key) both are off.
    plain = await sidecar(anthropic_sim, extra='\n[stt]\nmodel = "whisper-1"\n')
    _, data, _ = await plain.call("GET", "/runtime-config")
    assert data["features"]["stt"] is False and data["features"]["tts"] is False


async def test_system_layers(sidecar: SidecarFactory, anthropic_sim: AnthropicSim) -> None:
    sc = await sidecar(anthropic_sim, extra="\n[features]\nprompt_context_introspect = true\n")
    soul = sc.config_path.parent / "SOUL.md"
    soul.write_text("You are Kernel.\nBe   brief.  \n", encoding="utf-8")
    await sc.kernel.store.add_memory("likes green tea", "user")
    status, data, _ = await sc.call("GET", "/agent/system-layers?query=tea")
    assert status == 200
    names = [layer["name"] for layer in data["layers"]]
    assert names == ["soul", "tools", "memories", "time"]
    first = data["layers"][0]
    assert first["source"] == "SOUL.md" and first["role"] == "system"
    assert first["content_preview"] == "You are Kernel.\nBe   brief."
    assert "likes green tea" in data["layers"][2]["content_preview"]
    # memories and the time ride in the turn's own message, outside the cached prefix
    assert [x["role"] for x in data["layers"]] == ["system", "system", "user", "user"]
    assert data["estimated_tokens_total"] == sum(x["estimated_tokens"] for x in data["layers"])
    # The hash ignores formatting, not content.
    soul.write_text("You are Kernel.\r\nBe brief.\n", encoding="utf-8")
    _, same, _ = await sc.call("GET", "/agent/system-layers")
    assert same["layers"][0]["layer_hash"] == first["layer_hash"]
    soul.write_text("You are Kernel.\nBe verbose.\n", encoding="utf-8")
    _, changed, _ = await sc.call("GET", "/agent/system-layers")
    assert changed["layers"][0]["layer_hash"] != first["layer_hash"]
    status, data, _ = await sc.call("GET", "/agent/system-layers?prompt_mode=codex-max")
    assert status == 400 and data["error"]["message"].startswith("invalid prompt_mode")


async def test_telegram_and_http_turns_in_flight_at_once(bot: Factory) -> None:
    h = await bot()
    gateway = Gateway(h.kernel.gateway_deps(), ROUTERS)
    await gateway.start()
    try:
        async with aiohttp.ClientSession(headers={"X-API-Key": gateway.api_key}) as http:
            _, health = await _get(http, gateway.url + "/healthz")
            assert health["channels"]["telegram"]["state"] == "running"
            assert health["channels"]["telegram"]["polling"] is True

            h.model.enqueue(
                Reply(Text("telegram reply", chunks=["telegram ", "reply"]), stall_after=3),
                text_reply("http reply"),
            )
            h.tg.inject_text("hello from telegram")
            await h.model.wait_for_requests(1)
            assert h.kernel.agent.sessions.is_busy(CONV)  # the Telegram turn is at the model

            body = {"input": [message("hello over http")], "session_id": "web-1"}
            async with http.post(gateway.url + "/agent/process", json=body) as response:
                data = await response.json()
            assert data["reply"] == "http reply"
            assert h.kernel.agent.sessions.is_busy(CONV)  # still running alongside

            _, chats = await _get(http, gateway.url + "/chats")
            by_channel = {c["channel"]: c for c in chats["chats"] if c["id"] != "chat-default"}
            assert by_channel["telegram"]["user_id"] == str(OWNER)
            assert by_channel["console"]["session_id"] == "web-1"

            turn = h.kernel.agent.sessions.conversation(CONV).turn
            assert turn is not None
            async with http.post(f"{gateway.url}/agent/turns/{turn.id}/cancel") as response:
                assert (await response.json())["cancelled"] is True
            await h.settle()
        assert "Working on a reply…" not in h.texts()  # Telegram shows the cancel
        tg_row = by_channel["telegram"]["id"].removeprefix("chat-")
        stored = await h.kernel.store.load_messages(int(tg_row))
        assert [m.text for m in stored][0] == "hello from telegram"
        assert stored[-1].role == "assistant" and stored[-1].text.startswith("telegram ")
    finally:
        await gateway.stop()


async def _get(http: aiohttp.ClientSession, url: str) -> tuple[int, Any]:
    async with http.get(url) as response:
        return response.status, await response.json()


async def test_public_healthz_keeps_error_details_for_the_key_holder(
    sidecar: SidecarFactory, anthropic_sim: AnthropicSim
) -> None:
    docs = {"name": "docs", "type": "http", "url": f"http://127.0.0.1:{free_port()}/mcp"}
    docs["connect_timeout"] = 2.0  # type: ignore[assignment]
    sc = await sidecar(anthropic_sim, api_key=API_KEY, extra=mcp_toml([docs]))
    _, anonymous, _ = await sc.call("GET", "/healthz", headers={})
    _, owner, _ = await sc.call("GET", "/healthz")
    assert anonymous["mcp"]["servers"][0]["state"] == "failed"
    assert anonymous["mcp"]["servers"][0]["last_error"] == ""  # no commands, no paths
    assert owner["mcp"]["servers"][0]["last_error"] != ""
