"""/start, /help, ``/help <topic>`` and the command menu, as the owner sees them in the
Telegram simulator (issue 34 item 3): a short welcome with three things to try, help
grouped on one phone screen, details one tap of typing away, and a menu of ten."""

from __future__ import annotations

import re

from tests.sim.script import text_reply
from tests.telegram.conftest import Factory

# Words an owner's first screen must not show: shell commands and internal terms.
INTERNAL = re.compile(
    r"prompt mode|提示词模式|sampling|采样|MCP|provider|config|kernel |uv |\$ |--|\.toml",
    re.IGNORECASE,
)
TEN = [
    "new",
    "cancel",
    "retry",
    "history",
    "resume",
    "remember",
    "model",
    "status",
    "usage",
    "help",
]
ALL = [
    *("new", "cancel", "retry", "undo", "rewind", "branches"),
    *("history", "resume", "retitle", "del_history", "project"),
    *("remember", "memory", "forget"),
    *("model", "provider", "persona", "mode"),
    *("files", "prompts", "mcp", "tasks"),
    *("status", "usage", "audit", "start", "help"),
]


async def test_start_is_a_short_welcome_with_three_things_to_try(bot: Factory) -> None:
    h = await bot(language="zh")
    welcome = await h.ask("/start")
    assert welcome.splitlines() == [
        "👋 你好！我是 Kernel，你的私人助手，直接发消息就能和我聊天。",
        "先试试这三件事：",
        "1. 问个问题，比如：帮我写一条请假消息",
        "2. 让我记住你的偏好：/remember 我喜欢简短的回答",
        "3. 翻翻以前的对话：/history",
        "所有命令：/help",
    ]
    assert not INTERNAL.search(welcome)
    # The three things work: the example is answered, the preference kept, the list shown.
    h.model.enqueue(text_reply("好的，这是请假消息。"))
    assert await h.converse("帮我写一条请假消息") == "好的，这是请假消息。"
    assert await h.ask("/remember 我喜欢简短的回答") == "已记住（/memory 查看全部）"
    assert "#1" in await h.ask("/history")


async def test_the_welcome_in_english_has_no_internal_words(bot: Factory) -> None:
    h = await bot()
    welcome = await h.ask("/start")
    lines = welcome.splitlines()
    assert lines[0] == "👋 Hi! I'm Kernel, your personal assistant. Just write to chat with me."
    assert [line[:3] for line in lines[2:5]] == ["1. ", "2. ", "3. "]
    assert len(lines) == 6 and not INTERNAL.search(welcome)


async def test_help_is_grouped_on_one_screen_and_names_every_command(bot: Factory) -> None:
    h = await bot(language="zh")
    text = await h.ask("/help")
    assert text.splitlines() == [
        "📖 直接发消息就能聊天，文字、图片、文件、语音都可以。命令按类别：",
        "💬 聊天：/new /cancel /retry /undo /rewind /branches",
        "🗂 会话：/history /resume /retitle /del_history /project",
        "🧠 记忆：/remember /memory /forget",
        "🤖 模型：/model /provider /persona /mode",
        "🧰 工具：/files /prompts /mcp /tasks",
        "⚙️ 系统：/status /usage /audit /start /help",
        "看详情：/help 会话，或 /help resume",
        "当前模型：main / model-a",
    ]  # 9 lines: one phone screen
    assert sorted(re.findall(r"(?<![\w/])/(\w+)", text)) == sorted([*ALL, "help", "help"])
    assert "kernel " not in text and "skills list" not in text


async def test_help_in_english_is_grouped_too(bot: Factory) -> None:
    h = await bot()
    lines = (await h.ask("/help")).splitlines()
    groups = [line.split(":")[0] for line in lines[1:7]]
    assert groups == ["💬 Chat", "🗂 Sessions", "🧠 Memory", "🤖 Models", "🧰 Tools", "⚙️ System"]
    assert len(lines) == 9 and max(len(line) for line in lines) <= 80


async def test_help_topic_gives_a_group_or_a_command_and_names_the_topics_otherwise(
    bot: Factory,
) -> None:
    h = await bot(language="zh")
    assert (await h.ask("/help 会话")).splitlines() == [
        "🗂 会话",
        "/history — 列出最近的对话（标题或开头几个字、上次活动、消息数，当前的有标记）；"
        "/history all 也列出终端、HTTP 和定时任务的；/history project:名字 只看某个项目的",
        "/resume — 继续以前的一段对话：/resume 点选，或 /resume 3（编号来自 /history，不会变），"
        "回来时给出上次聊到哪",
        "/retitle — 给对话起标题：/retitle 新标题 手动设置；"
        "只发 /retitle 让标题模型起一个（也可 /retitle #3）",
        "/del_history — 删除对话：/del_history #3，多段用 #3/#5；删除前会用按钮再问一次",
        "/project — 查看或切换项目（每个项目有自己的记忆）：/project 名字，/project off 退出",
    ]
    # The group's key and its English name are topics too; so is a command, slash or not.
    assert await h.ask("/help sessions") == await h.ask("/help Sessions")
    assert (await h.ask("/help sessions")).startswith("🗂 会话\n/history — ")
    resume = (
        "/resume — 继续以前的一段对话：/resume 点选，或 /resume 3（编号来自 /history，不会变），"
        "回来时给出上次聊到哪\n"
    )
    assert await h.ask("/help resume") == resume + "属于「会话」：/help 会话 看同类命令"
    assert await h.ask("/help /resume") == await h.ask("/help resume")
    tools = (await h.ask("/help 工具")).splitlines()
    assert tools[-1] == "在消息里写 /skill/名称，就能用某个技能"
    assert await h.ask("/help 天气") == (
        "没有「天气」这个帮助主题。可以看：聊天、会话、记忆、模型、工具、系统，"
        "或某个命令，例如 /help resume"
    )


async def test_the_menu_holds_the_ten_most_used_and_every_command_still_works_typed(
    bot: Factory,
) -> None:
    h = await bot()
    menu = h.tg.calls_to("setMyCommands")[-1].params["commands"]
    assert [c["command"] for c in menu] == TEN
    assert {"command": "usage", "description": "Usage and spend [today|week|month]"} in menu
    unknown = "Unknown command: send /help for the list"
    for name in ALL:
        answer = await h.ask(f"/{name}")
        assert answer and answer != unknown, name
    assert await h.ask("/frobnicate") == unknown
