"""Issue 34, items 6 and 10 in the Telegram chat (the Bot API simulator, the Anthropic and
OpenAI simulators): a model failure in the owner's words and language, naming what to do
and no raw provider error; the draft saying Kernel retries; /status short for the
owner (at most six lines, a problem line when something is wrong) and /status full for
the operator (the counters and the last raw error), never contradicting itself."""

from __future__ import annotations

import socket
from dataclasses import dataclass

import pytest

from tests.conftest import SECRET_KEY
from tests.sim.openai_sim import OpenAISim
from tests.sim.script import Error, Reply, Scripted, Stall, Text, text_reply
from tests.telegram.conftest import CONV, BotHarness, Factory


def closed_port() -> int:
    """A port nothing listens on (bound, then released)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def gpt_provider(name: str, base_url: str, timeout: float = 10.0) -> str:
    """An OpenAI-compatible provider beside ``main`` (the owner switches to it)."""
    return (
        f'\n[providers.{name}]\ntype = "openai_compat"\napi_base = "{base_url}"\n'
        f'api_key = "{SECRET_KEY}"\nmodels = ["gpt-4o"]\nretry_base_delay = 0.01\n'
        f"max_retries = 2\ntimeout = {timeout}\n"
    )


@dataclass
class Kind:
    """One failure kind: who fails how, and what the owner reads in each language."""

    provider: str  # "main" (the Anthropic simulator) or an OpenAI-compatible one
    script: list[Scripted]
    raw: list[str]  # the provider's own words, never in the owner's message
    en: str
    zh: str


OVERLOADED = Error(529, "overloaded_error", "Overloaded")
RATE = Error(429, "requests", "Rate limit reached for gpt-4o in organization org-x")
SERVER = Error(500, "server_error", "The server had an error while processing your request")
LONG = "prompt is too long: 250000 tokens > 200000 maximum"
KINDS = {
    "overloaded": Kind(
        "main",
        [OVERLOADED] * 3,
        ["overloaded_error", "529", "Overloaded"],
        "main is overloaded right now (retried 2 times). Tap 🔁 in a while, or pick "
        "another model with /model",
        "main 暂时过载，已重试 2 次。稍后点 🔁，或用 /model 换一个",
    ),
    "rate_limited": Kind(
        "gpt",
        [RATE] * 3,
        ["429", "Rate limit reached", "org-x"],
        "GPT is limiting how often Kernel may ask (retried 2 times). Tap 🔁 in a minute "
        "or two, or pick another model with /model",
        "GPT 请求太频繁，被限流了，已重试 2 次。过一两分钟再点 🔁，或用 /model 换一个",
    ),
    "auth": Kind(
        "main",
        [Error(401, "authentication_error", "invalid x-api-key")],
        ["401", "authentication_error", "invalid x-api-key"],
        "main refused its API key and is not used until its configuration changes. Fix "
        "providers.main.api_key (or its environment variable), or pick another model "
        "with /model",
        "main 拒绝了 API key，已停用，直到配置更改。请修正 providers.main.api_key"
        "（或环境变量），或用 /model 换一个",
    ),
    "too_long": Kind(
        "main",
        [Error(400, "invalid_request_error", LONG)],
        ["400", "invalid_request_error", "250000"],
        "This conversation is too long for main. The message was set aside: start a new "
        "session with /new, or shorten it and send it again",
        "对话太长，超出了 main 能读的长度。这条消息已搁置：用 /new 开始新会话，或缩短后重发",
    ),
    "request": Kind(
        "main",
        [Error(400, "invalid_request_error", "max_tokens: 9999 > 8192")],
        ["400", "invalid_request_error", "max_tokens"],
        "main refused this request (not because of your message). Tap 🔁 to try again; if "
        "it persists, use /new or pick another model with /model. Details: /status full",
        "main 拒绝了这次请求（不是你消息的问题）。点 🔁 再试；仍不行就用 /new 或 /model "
        "换一个，详情见 /status full",
    ),
    "server": Kind(
        "gpt",
        [SERVER] * 3,
        ["500", "server_error", "processing your request"],
        "GPT had a server error (retried 2 times). Tap 🔁 in a while, or pick another "
        "model with /model",
        "GPT 服务端出错，已重试 2 次。稍后点 🔁，或用 /model 换一个",
    ),
    "timeout": Kind(
        "slow",
        [Stall()] * 3,
        ["timed out", "timeout"],
        "GPT did not answer in time (retried 2 times). Tap 🔁 in a while, or pick another "
        "model with /model",
        "GPT 长时间没有响应，已重试 2 次。稍后点 🔁，或用 /model 换一个",
    ),
    "connection": Kind(
        "gone",
        [],
        ["connection failed", "connection_error", "Connection"],
        "Could not reach GPT (retried 2 times). Check the network or "
        "providers.gone.api_base, then tap 🔁, or pick another model with /model",
        "连不上 GPT，已重试 2 次。检查网络或 providers.gone.api_base 后点 🔁，或用 /model 换一个",
    ),
}


async def failing(bot: Factory, openai: OpenAISim, kind: Kind, language: str) -> BotHarness:
    extra = gpt_provider("gpt", openai.base_url) + gpt_provider("slow", openai.base_url, 0.5)
    extra += gpt_provider("gone", f"http://127.0.0.1:{closed_port()}/v1")
    h = await bot(extra=extra, language=language)
    if kind.provider != "main":
        await h.ask(f"/provider {kind.provider}")
    sim = h.model if kind.provider == "main" else openai
    sim.enqueue(*kind.script)
    return h


@pytest.mark.parametrize("language", ["en", "zh"])
@pytest.mark.parametrize("name", list(KINDS))
async def test_a_model_failure_reads_in_the_owners_words(
    bot: Factory, openai_sim: OpenAISim, name: str, language: str
) -> None:
    kind = KINDS[name]
    h = await failing(bot, openai_sim, kind, language)

    shown = await h.converse("what's the weather like?")

    expected = kind.en if language == "en" else kind.zh
    assert shown == f"⚠️ {expected}"
    for raw in [*kind.raw, SECRET_KEY]:
        assert raw not in shown
    # the raw detail is the operator's: /status full names it as it was raised
    full = await h.ask("/status full")
    last = next(line for line in full.splitlines() if line.startswith(("Last error", "最近错误")))
    assert any(raw in last for raw in kind.raw), last
    assert SECRET_KEY not in full


async def test_the_draft_says_kernel_retries_then_the_answer_comes(bot: Factory) -> None:
    h = await bot()
    # The first failure asks to wait 2 s: the chat's rate budget has refilled when the
    # second retry is told (a draft never waits for it, it is tried again instead).
    h.model.enqueue(Error(529, "overloaded_error", "Overloaded", retry_after=2), OVERLOADED)
    h.model.enqueue(text_reply("made it"))

    assert await h.converse("hello") == "made it"

    # The progress surface is the draft (issue 37: no placeholder message).
    drafts = [str(c.params["text"]) for c in h.tg.calls_to("sendMessageDraft")]
    assert "main: overloaded, retrying (2/2)…" in drafts
    assert not any("529" in text or "overloaded_error" in text for text in drafts)


async def test_the_retry_line_in_chinese(bot: Factory) -> None:
    h = await bot(language="zh")
    h.model.enqueue(Error(529, "overloaded_error", "Overloaded", retry_after=2), OVERLOADED)
    h.model.enqueue(text_reply("好了"))

    assert await h.converse("你好") == "好了"

    drafts = [str(c.params["text"]) for c in h.tg.calls_to("sendMessageDraft")]
    assert "main 过载，正在重试 (2/2)…" in drafts


async def test_status_is_six_lines_at_most_when_healthy(bot: Factory) -> None:
    h = await bot()
    h.model.enqueue(text_reply("hi there"))
    await h.converse("hello")

    lines = (await h.ask("/status")).splitlines()

    assert len(lines) <= 6
    assert lines[0] == "Model: main / model-a"
    assert lines[1].startswith("Session: #1 ")  # the same #n as /history
    assert (await h.ask("/history")).splitlines()[1].startswith("#1 ")
    assert lines[2:] == ["State: idle", "Spend: today $0.00 / no limit", "Health: OK"]


async def test_status_in_chinese_when_healthy(bot: Factory) -> None:
    h = await bot(language="zh")
    lines = (await h.ask("/status")).splitlines()
    assert lines == [
        "模型：main / model-a",
        "会话：新会话（尚无消息）",
        "状态：空闲",
        "花费：今日 $0.00 / 不限",
        "健康：正常",
    ]


async def test_status_names_a_problem_and_full_holds_the_operators_view(bot: Factory) -> None:
    h = await bot()
    h.model.enqueue(OVERLOADED, OVERLOADED, OVERLOADED)
    await h.converse("hello")
    h.kernel.agent.health.refused("main")

    lines = (await h.ask("/status")).splitlines()

    assert len(lines) == 6
    assert lines[4] == "Health: down"
    assert lines[5] == "Problems: main: key refused — fix providers.main.api_key (or api_keys)"
    assert not any(word in "\n".join(lines) for word in ("Dropped", "Polling", "FTS5"))

    full = (await h.ask("/status full")).splitlines()
    assert full[:6] == lines
    assert any(line.startswith("Dropped: strangers 0") for line in full)
    assert any(line.startswith("Polling: last update") for line in full)
    assert any(line.startswith("Memory search:") for line in full)
    assert full[-1] == "Last error: main 529 overloaded_error: Overloaded"


async def test_status_never_contradicts_itself_while_a_turn_runs(bot: Factory) -> None:
    h = await bot()
    h.model.enqueue(Reply(Text("long", chunks=["lo", "ng"]), stall_after=3))
    h.tg.inject_text("tell me a long story")
    await h.tg.wait_until(lambda: len(h.model.requests) == 1)  # the reply is streaming

    assert (await h.ask("/status")).splitlines()[2] == "State: replying"
    full = await h.ask("/status full")
    assert "State: replying" in full.splitlines() and "Inbox: 1 in progress" in full

    assert await h.ask("/cancel") == "Cancelled"
    await h.settle()
    assert not h.kernel.agent.sessions.is_busy(CONV)
    full = await h.ask("/status full")
    # idle, and no turn "in progress" beside it (this /status's own row is no turn)
    assert "State: idle" in full.splitlines() and "Inbox: 0 in progress" in full


def test_display_names_follow_the_models_family() -> None:
    from kernel.core.failures import display_name

    assert display_name("anthropic", "claude-sonnet-4-5") == "Claude"
    assert display_name("router", "openai/gpt-4o") == "GPT"
    assert display_name("local", "my-model") == "local"


def test_claude_overloaded_after_four_retries_in_chinese() -> None:
    from kernel.core.errors import RateLimitedError
    from kernel.core.failures import owner_words
    from kernel.core.i18n import get_language, set_language

    exc = RateLimitedError("Overloaded", provider="anthropic", status=529, code="overloaded_error")
    exc.model, exc.retries = "claude-sonnet-4-5", 4
    before = get_language()
    set_language("zh")
    try:
        assert owner_words(exc) == "Claude 暂时过载，已重试 4 次。稍后点 🔁，或用 /model 换一个"
    finally:
        set_language(before)
