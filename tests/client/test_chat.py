"""``kernel chat`` through the running Kernel (issue 35, item 3): the client's own code
(``run_remote_chat``) against a live sidecar on 127.0.0.1 and the model simulator.
Every channel-neutral command is answered there by the shared command set, as in
Telegram and ``kernel chat --local``, without a model call; its effects are on the
terminal chat's own sessions. ``POST /agent/terminal`` is behind the key and answers
hostile lines with words, never a 5xx."""

from __future__ import annotations

import asyncio
import io

import aiohttp

from kernel.client.chat import run_remote_chat
from kernel.client.http import Sidecar as Client
from kernel.commands.terminal import COMMANDS
from kernel.core.i18n import t
from tests.gateway.conftest import API_KEY, Sidecar, SidecarFactory
from tests.gateway.test_privilege import console_http as console_http  # the fixture
from tests.gateway.test_privilege import sign_in
from tests.sim.anthropic_sim import AnthropicSim
from tests.sim.openai_sim import OpenAISim
from tests.sim.script import Reply, Text, text_reply
from tests.waiting import wait_until


async def chat(sc: Sidecar, lines: str, key: str = API_KEY) -> tuple[int, str, str]:
    """One ``kernel chat`` session (stdin a pipe): exit code, stdout, stderr."""
    out, err = io.StringIO(), io.StringIO()
    client = Client(sc.url, key)
    code = await asyncio.to_thread(run_remote_chat, client, io.StringIO(lines), out, err)
    return code, out.getvalue(), err.getvalue()


WRONG = {"X-API-Key": "not-the-key-0123456789"}


def models(sim: AnthropicSim) -> list[str]:
    return [r.body["model"] for r in sim.requests]


async def test_status_history_and_model_are_answered_without_the_model(
    sidecar: SidecarFactory, anthropic_sim: AnthropicSim
) -> None:
    sc = await sidecar(anthropic_sim, api_key=API_KEY, language="en")

    code, out, err = await chat(sc, "/status\n/history\n/model\n")

    assert (code, err) == (0, "")
    assert anthropic_sim.requests == []  # not one of them reached the model
    lines = out.splitlines()
    assert lines[0] == "Model: main / model-a"
    assert "State: idle" in lines and "Health: OK" in lines
    assert "Sessions (continue one with /resume #n):" in lines
    assert any(line.startswith("#1 ") and line.endswith("← current") for line in lines)
    # /model: Telegram's text; its buttons become the commands to type.
    assert lines[-5:] == [
        "Current model: model-a; choose from: model-a, model-b",
        t("routing.pick_auto"),
        "Type one of these commands to choose:",
        "  1) /model model-a (current)",
        "  2) /model model-b",
    ]


async def test_model_switch_new_and_history_act_on_the_terminal_chat(
    sidecar: SidecarFactory, anthropic_sim: AnthropicSim
) -> None:
    sc = await sidecar(anthropic_sim, api_key=API_KEY, language="en")
    anthropic_sim.enqueue(text_reply("one"), text_reply("two"), text_reply("three"))

    code, out, err = await chat(sc, "hello\n/model model-b\nagain\n/new\nfresh\n/history\n")

    assert (code, err) == (0, "")
    lines = out.splitlines()
    assert lines[:5] == [
        "one",
        "Switched to model model-b",
        "two",
        "Started a new session",
        "three",
    ]
    # The next message went to the model picked, and /new's session is a new one.
    assert models(anthropic_sim) == ["model-a", "model-b", "model-b"]
    assert lines[5] == "Sessions (continue one with /resume #n):"
    listed = [line for line in lines[6:] if line.startswith("#")]
    assert len(listed) == 2, lines
    assert listed[0].startswith("#2 ") and listed[0].endswith("← current")
    assert listed[1].startswith("#1 ") and "4 messages" in listed[1]
    # The terminal chat began in the default chat; "fresh" is in a session of its own.
    _, default, _ = await sc.call("GET", "/chats/chat-default")
    assert default["message_count"] == 4
    _, second, _ = await sc.call("GET", "/chats/chat-2")
    assert (second["channel"], second["message_count"]) == ("console", 2)

    # A later `kernel chat` is the same chat: /resume goes back, the message lands there.
    anthropic_sim.enqueue(text_reply("back"))
    code, out, err = await chat(sc, "/resume #1\nonce more\n")
    assert (code, err) == (0, "")
    assert out.splitlines()[0].startswith("Resumed session #1") and out.endswith("back\n")
    _, default, _ = await sc.call("GET", "/chats/chat-default")
    assert default["message_count"] == 6 and len(anthropic_sim.requests) == 4


async def test_help_unknown_and_telegram_only_commands(
    sidecar: SidecarFactory, anthropic_sim: AnthropicSim
) -> None:
    sc = await sidecar(anthropic_sim, api_key=API_KEY, language="en")

    code, out, err = await chat(sc, "/help\n/frobnicate\n/files\n/help resume\n")

    assert (code, err) == (0, "")
    lines = out.splitlines()
    assert lines[0] == "📖 Just type to chat (text only in a terminal). Commands by kind:"
    assert "🗂 Sessions: /history /resume /retitle /del_history /project" in lines
    assert "🧰 Tools: /prompts /mcp /tasks" in lines  # no /files here
    assert lines[lines.index("✗ Unknown command: send /help for the list") + 1].startswith(
        "✗ /files works in Telegram only: it sends this session's files"
    )
    assert lines[-2].startswith("/resume — ")
    assert anthropic_sim.requests == []


async def test_who_may_use_the_terminal_route(
    sidecar: SidecarFactory, anthropic_sim: AnthropicSim, console_http: aiohttp.ClientSession
) -> None:
    """The sidecar's rule, as for /agent/process: the key, a console session, a keyless
    Kernel (gateway.auth = "none") may; no key or a wrong one where a key is set may not."""
    sc = await sidecar(anthropic_sim, api_key=API_KEY, language="en")
    keyless = await sidecar(anthropic_sim, gateway={"auth": "none"}, language="en")
    console = await sign_in(sc, console_http)
    body = {"text": "/status"}
    table = [
        ("the key", await sc.call("POST", "/agent/terminal", body), 200),
        ("no key", await sc.call("POST", "/agent/terminal", body, headers={}), 401),
        ("wrong key", await sc.call("POST", "/agent/terminal", body, headers=WRONG), 401),
        ("console", (*await console.call("POST", "/agent/terminal", body), None), 200),
        ("keyless", await keyless.call("POST", "/agent/terminal", body, headers={}), 200),
    ]
    for who, (status, data, _), wanted in table:
        assert status == wanted, (who, data)
        if wanted == 401:
            assert data["error"]["code"] == "unauthorized", who
        else:
            assert data["command"]["text"].startswith("Model: main / model-a"), who
    code, out, err = await chat(sc, "/status\n", key="")  # the client without the key
    assert code == 1 and out == "" and "(unauthorized)" in err
    assert anthropic_sim.requests == []


async def test_hostile_lines_get_words_never_a_5xx(
    sidecar: SidecarFactory, anthropic_sim: AnthropicSim
) -> None:
    sc = await sidecar(anthropic_sim, api_key=API_KEY, language="en")

    async def command(text: str) -> dict[str, object]:
        status, data, _ = await sc.call("POST", "/agent/terminal", {"text": text})
        assert status == 200, (text[:80], data)
        reply: dict[str, object] = data["command"]
        return reply

    too_long = await command("/model " + "x" * 100_000)
    assert too_long["error"] is True
    assert too_long["text"] == (
        "The command is too long (over 4096 characters): shorten it and send it again"
    )
    for text in ("/model \x1b[31mred", "/history\x00", "/resume #1\r\n#2", "/status\x7f"):
        reply = await command(text)
        assert reply["error"] is True and str(reply["text"]).startswith(
            "The command holds control characters"
        ), text
    for text in ("/frobnicate", "/", "//", "/FILES", "/help_me please", "/start@bot"):
        reply = await command(text)
        assert reply == {
            "text": "Unknown command: send /help for the list",
            "error": True,
            "choices": [],
            "buttons": [],
        }, text
    # Every command of the terminal with arguments it cannot take: refused in words.
    hostile = ("#" + "9" * 40, "all project:" + "界" * 300, "-1 yes", "‮evil")
    for name in COMMANDS:
        for arg in hostile:
            await command(f"/{name} {arg}")
    for body in ({}, {"text": 5}, {"text": "   "}, {"text": ["/status"]}, []):
        status, data, _ = await sc.call("POST", "/agent/terminal", body)
        assert (status, data["error"]["code"]) == (400, "invalid_request"), body
    headers = sc.headers(**{"Content-Type": "application/json"})
    status, data, _ = await sc.call("POST", "/agent/terminal", data=b"{not", headers=headers)
    assert (status, data["error"]["code"]) == (400, "invalid_request")
    assert anthropic_sim.requests == []  # none of it reached the model


async def test_the_terminal_words_in_chinese(
    sidecar: SidecarFactory, anthropic_sim: AnthropicSim
) -> None:
    sc = await sidecar(anthropic_sim, api_key=API_KEY, language="zh")

    code, out, err = await chat(sc, "/model\n/frobnicate\n/files\n/model " + "x" * 5000 + "\n")

    assert (code, err) == (0, "")
    print(out)  # the terminal as the owner sees it (pytest -s)
    assert out.splitlines() == [
        "当前模型：model-a；可选：model-a, model-b",
        t("routing.pick_auto"),
        "输入下面的命令即可选择：",
        "  1) /model model-a（当前）",
        "  2) /model model-b",
        "✗ 未知命令：发送 /help 查看可用命令",
        "✗ /files 只在 Telegram 里可用：它把本会话的文件作为 Telegram 文件发给你。"
        "终端里可通过边车的 GET /agent/artifacts 列出并下载",
        "✗ 命令太长（超过 4096 个字符）：请缩短后重新输入",
    ]
    assert anthropic_sim.requests == []


async def test_retry_and_undo_run_as_in_telegram(
    sidecar: SidecarFactory, anthropic_sim: AnthropicSim
) -> None:
    sc = await sidecar(anthropic_sim, api_key=API_KEY, language="en")
    anthropic_sim.enqueue(text_reply("first"), text_reply("second"))

    code, out, err = await chat(sc, "hello\n/retry\n/undo\n/undo\n")

    assert (code, err) == (0, "")
    lines = out.splitlines()
    assert lines[:2] == ["first", "second"]  # /retry's turn streamed like a message's
    assert len(anthropic_sim.requests) == 2
    asked = [r.body["messages"][-1]["content"][0]["text"] for r in anthropic_sim.requests]
    assert asked == ["hello", "hello"]  # the same message, answered again
    assert lines[2:] == [t("conv.undone", count=2), "✗ " + t("conv.nothing_to_undo")]
    # Both exchanges are cut from what the model sees (kept in the history, marked).
    _, chat_default, _ = await sc.call("GET", "/chats/chat-default")
    messages = chat_default["messages"]
    assert len(messages) == 4 and all(m.get("cut") for m in messages), messages

    # Without stream: the command's answer, or the message's turn, as JSON.
    anthropic_sim.enqueue(text_reply("plain"))
    status, data, _ = await sc.call("POST", "/agent/terminal", {"text": "/usage week"})
    assert status == 200 and data["command"]["text"].startswith("📊 Usage and spend")
    status, data, _ = await sc.call("POST", "/agent/terminal", {"text": "hi", "stream": False})
    assert status == 200 and data["reply"] == "plain" and data["turn_id"]


async def test_retitle_waits_for_the_titles_model(
    sidecar: SidecarFactory, anthropic_sim: AnthropicSim, openai_sim: OpenAISim
) -> None:
    titles = (
        f'\n[titles]\ntype = "openai_compat"\napi_base = "{openai_sim.base_url}"\n'
        'api_key = "sk-titles-0123456789"\nmodel = "tiny"\n'
    )
    sc = await sidecar(anthropic_sim, api_key=API_KEY, language="en", extra=titles)
    anthropic_sim.enqueue(text_reply("Let's plan."))
    openai_sim.enqueue(text_reply("Trip to Kyoto"), text_reply("Kyoto in spring"))
    await chat(sc, "plan a trip to Kyoto\n")
    await wait_until(lambda: len(openai_sim.requests) == 1 and not sc.kernel.agent.background)

    code, out, err = await chat(sc, "/retitle\n/retitle Cherry blossoms\n")

    assert (code, err) == (0, "")
    assert out.splitlines() == [
        t("tg.retitled", title="Kyoto in spring"),  # the follow-up, once it came
        t("tg.retitled", title="Cherry blossoms"),
    ]
    _, default, _ = await sc.call("GET", "/chats/chat-default")
    assert default["name"] == "Cherry blossoms" and len(anthropic_sim.requests) == 1


async def test_cancel_from_another_terminal_stops_the_turn(
    sidecar: SidecarFactory, anthropic_sim: AnthropicSim
) -> None:
    sc = await sidecar(anthropic_sim, api_key=API_KEY, language="en")
    anthropic_sim.enqueue(Reply(Text("slow", chunks=["sl", "ow"]), stall_after=3))
    first = asyncio.create_task(chat(sc, "tell me slowly\n"))
    await anthropic_sim.wait_for_requests(1)

    status, data, _ = await sc.call("POST", "/agent/terminal", {"text": "/status"})
    assert status == 200 and "State: replying" in data["command"]["text"].splitlines()
    status, data, _ = await sc.call("POST", "/agent/terminal", {"text": "/cancel"})
    assert (status, data["command"]["text"]) == (200, t("turn.cancelled"))

    code, out, err = await first
    assert (code, err) == (0, "") and out.endswith(f"[{t('turn.cancelled')}]\n")
    status, data, _ = await sc.call("POST", "/agent/terminal", {"text": "/cancel"})
    assert data["command"]["text"] == "Nothing is running"
