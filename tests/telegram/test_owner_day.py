"""An owner's day in the chat (issue 34), in Chinese, the catalogue's default.

The real PTB polls the strict Bot API simulator, the real anthropic SDK talks to the model
simulator, SQLite is a file. A `Transcript` reads back what the owner saw — each new
message and whether it made the phone notify, each edit, deletion and button — and each
step asserts it the way the owner would judge it: the lock screen shows the answer,
one 🔁 stands, a picker is tapped not typed, sessions can be told apart, nothing sent
during a busy turn vanishes, /cancel frees the chat and keeps what was written, spend
adds up, /status is short, and after a kill the 🔁 replays in the message's own session.
On failure the transcript is printed for a person to read.
"""

from __future__ import annotations

import asyncio
import json
import re

from tests.sim.anthropic_sim import AnthropicSim
from tests.sim.script import Error, Reply, Text, text_reply, tool_reply
from tests.sim.telegram_sim import OWNER, ChatMessage, TelegramSim
from tests.telegram.conftest import CONV, BotHarness, Factory, asking
from tests.telegram.test_inbox import rows
from tests.telegram.test_inbox_faults import crash
from tests.telegram.transcript import Transcript, buttons_of


def said(h: BotHarness, text: str) -> int:
    """How many times the owner's ``text`` reached the model in its last request."""
    body = json.dumps(h.model.requests[-1].body["messages"], ensure_ascii=False)
    return body.count(text)


def newest(h: BotHarness) -> ChatMessage:
    return h.bot_messages()[-1]


async def command(h: BotHarness, text: str) -> ChatMessage:
    """Send a command; the bot's message that answers it, as the chat shows it."""
    await h.ask(text)
    await h.settle()
    return newest(h)


async def press(
    h: BotHarness, message: ChatMessage, label: str, *, settle: bool = True
) -> ChatMessage:
    """Tap the button labelled ``label`` (or starting so); the message as shown after
    (once the chat is quiet, unless ``settle`` is off: a turn still runs)."""
    data = next(d for text, d in buttons_of(message.reply_markup) if text.startswith(label))
    answered = len(h.tg.calls_to("answerCallbackQuery"))
    h.tg.inject_callback(data, message_id=message.message_id)
    await h.tg.wait_until(lambda: len(h.tg.calls_to("answerCallbackQuery")) > answered)
    if settle:
        await h.settle()
    shown = h.tg.message(OWNER, message.message_id)
    assert shown is not None
    return shown


async def session_recorded(h: BotHarness) -> None:
    """Until the open message's session is on record (the 🔁 after a crash runs there)."""
    async with asyncio.timeout(30):
        while True:
            if any(r.state == "open" and r.session_id for r in await rows(h)):
                return
            await asyncio.sleep(0.05)


def labels(message: ChatMessage) -> list[str]:
    return [label for label, _ in buttons_of(message.reply_markup)]


async def test_morning_chat_answers_notify_pickers_and_sessions(bot: Factory) -> None:
    h = await bot(language="zh")
    seen = Transcript(h.tg)
    try:
        await _morning(h, seen)
    except (AssertionError, TimeoutError):
        print(seen.render())
        raise


async def _morning(h: BotHarness, seen: Transcript) -> None:
    # A simple exchange: the first message that notifies holds the answer; the rest of
    # what the turn shows (drafts, typing) is silent and leaves nothing (issue 37: the
    # answer is the turn's one message).
    mark = seen.mark()
    h.model.enqueue(text_reply("早上好！今天十点有个会，记得带上周报。"))
    await h.converse("早上好")
    [loud] = seen.notifying(mark)
    assert loud.text.startswith("早上好！今天十点有个会")
    assert [s.text for s in seen.sent(mark)] == [loud.text]
    assert [m.text for m in seen.live()] == ["早上好！今天十点有个会，记得带上周报。"]

    # A second answer: the 🔁 moves onto it, one live 🔁 in the chat.
    h.model.enqueue(text_reply("好的，我十点前提醒你。"))
    await h.converse("十点前提醒我")
    assert [m.text for m in seen.live_buttons("retry:")] == ["好的，我十点前提醒你。"]

    # The model fails: the owner reads what happened and what to do, not the API's words;
    # 🔁 asks the question once, and the answer comes.
    question = "帮我查一下今天的天气"
    h.model.enqueue(*[Error(529, "overloaded_error", "Overloaded")] * 3)
    await h.converse(question)
    notice = newest(h)
    assert "过载" in notice.text and "🔁" in notice.text and "/model" in notice.text
    assert "overloaded_error" not in notice.text and "529" not in notice.text
    h.model.enqueue(text_reply("今天晴，最高 18 度。"))
    mark = seen.mark()
    await press(h, notice, "🔁")
    await h.tg.wait_until(lambda: "今天晴，最高 18 度。" in h.texts())
    await h.settle()
    assert said(h, question) == 1
    assert seen.notifying(mark)[0].text.startswith("今天晴")
    assert [m.text for m in seen.live_buttons("retry:")] == ["今天晴，最高 18 度。"]

    # Pickers: a bare /model answers with buttons, the current one marked; one tap
    # switches, and the picker message becomes the result.
    picker = await command(h, "/model")
    assert labels(picker)[0].startswith("✅ ")
    other = next(label for label in labels(picker) if not label.startswith("✅"))
    result = await press(h, picker, other)
    assert other in result.text and result.reply_markup is None
    assert h.kernel.agent.selection.model == other

    # Sessions the owner can tell apart: first words before a title, the current one
    # marked, a recap on /resume.
    await command(h, "/new")
    h.model.enqueue(text_reply("周末去杭州可以看西湖。"))
    await h.converse("周末去杭州玩什么")
    listing = (await command(h, "/history")).text.splitlines()
    assert listing[0].startswith("历史会话")
    [now] = [line for line in listing if line.endswith("← 当前")]
    assert now.startswith("#2 “周末去杭州玩什么” · 今天 ") and "2 条消息" in now
    [older] = [line for line in listing if line.startswith("#1 ")]
    assert "“早上好”" in older and "← 当前" not in older
    picker = await command(h, "/resume")
    assert [label[:4] for label in labels(picker)] == ["✅ #2", "#1 “"]
    resumed = await press(h, picker, "#1 ")
    assert resumed.text.startswith("已恢复会话 #1")
    assert "上次聊到：" in resumed.text and "今天晴，最高 18 度。" in resumed.text
    assert h.kernel.agent.sessions.current_session(CONV) == 1

    # Past twenty sessions /history pages with ◀ ▶, edited in place.
    store = h.kernel.store
    for _ in range(20):
        await store.create_session("telegram", user_id=str(OWNER))
    page = await command(h, "/history")
    assert page.text.splitlines()[0] == "历史会话 第 1/2 页（用 /resume #n 继续）："
    assert labels(page) == ["▶"]
    sends = len(h.tg.calls_to("sendMessage"))
    second = await press(h, page, "▶")
    assert second.text.splitlines()[0] == "历史会话 第 2/2 页（用 /resume #n 继续）："
    assert any(line.endswith("← 当前") for line in second.text.splitlines())  # #1, oldest
    assert labels(second) == ["◀"]
    assert len(h.tg.calls_to("sendMessage")) == sends


PRICES = """
[providers.main.prices."model-a"]
input = 3.0
output = 15.0
cache_read = 0.3
cache_write = 3.75
[budget]
daily = 2.0
"""
APPROVAL = "\n[tools.memory_add]\napproval = true\napproval_timeout = 300\n"
BUSY = "正在处理上一条消息"
DOLLARS = re.compile(r"\$(\d+\.\d+)")


async def test_afternoon_busy_cancel_approval_spend_and_status(bot: Factory) -> None:
    h = await bot(language="zh", extra=PRICES + APPROVAL)
    seen = Transcript(h.tg)
    try:
        await _afternoon(h, seen)
    except (AssertionError, TimeoutError):
        print(seen.render())
        raise


async def _afternoon(h: BotHarness, seen: Transcript) -> None:
    # Three texts during a slow turn: one notice, edited to count them, with ▶ and 🗑;
    # none is closed unseen; ▶ runs them in order once the answer is in.
    gate = asyncio.Event()
    h.model.enqueue(Reply(Text("写好了：周报的三个要点。"), gate=gate))
    h.model.enqueue(*(text_reply(f"第 {n} 条的回答") for n in (2, 3, 4)))
    mark = seen.mark()
    h.tg.inject_text("帮我写周报")
    await h.under_way()
    for text in ("加上预算", "再加上风险", "最后写个总结"):
        h.tg.inject_text(text)
    await h.tg.wait_until(lambda: any("收到 3 条新消息" in x for x in h.texts()))
    notices = [s for s in seen.sent(mark) if s.text.startswith(BUSY)]
    assert len(notices) == 1  # one notice, edited as more came
    [notice] = [m for m in h.bot_messages() if m.text.startswith(BUSY)]
    assert labels(notice) == ["▶ 答完后处理", "🗑 丢弃"]
    assert "failed" not in [r.state for r in await rows(h)]
    await press(h, notice, "▶", settle=False)
    choice = "答完后按顺序处理这 3 条消息"
    await h.tg.wait_until(lambda: h.texts()[-1].endswith(choice))  # the notice, edited
    assert not labels(h.bot_messages()[-1])
    assert len(h.model.requests) == 1  # nothing runs before the answer is in
    gate.set()
    await h.tg.wait_until(lambda: "第 4 条的回答" in h.texts())
    await h.settle()
    asked = [json.dumps(r.body["messages"][-1], ensure_ascii=False) for r in h.model.requests]
    for n, text in enumerate(("帮我写周报", "加上预算", "再加上风险", "最后写个总结")):
        assert text in asked[n]
    assert [r.state for r in await rows(h) if r.kind == "text"] == ["answered"] * 4
    assert len(seen.live_buttons("retry:")) == 1

    # /cancel while the answer streams: what was written stays, marked; a message sent
    # right after is answered, with no busy notice.
    words = [f"从前有座山{n}，" for n in range(12)]
    h.model.enqueue(Reply(Text("", words), stall_after=14, chunk_delay=0.3, usage=(20_000, 4_000)))
    h.tg.inject_text("讲个长故事")
    drafts = h.tg.calls_to
    await h.tg.wait_until(
        lambda: any("从前有座山3" in str(c.params["text"]) for c in drafts("sendMessageDraft"))
    )
    mark = seen.mark()
    assert await h.ask("/cancel") == "已取消"
    h.model.enqueue(text_reply("好，短的：山里有座庙。"))
    h.tg.inject_text("那讲个短的")
    await h.tg.wait_until(lambda: "好，短的：山里有座庙。" in h.texts())
    await h.settle()
    [kept] = [m.text for m in h.bot_messages() if m.text.startswith("从前有座山0")]
    assert kept.endswith("\n\n⏹ 已取消：回复只写到这里")
    assert not [s for s in seen.sent(mark) if s.text.startswith(BUSY)]

    # Spend adds up after the cancel: the cancelled call is priced from what it reported,
    # one figure for today in both lines, no "unknown price".
    usage = (await command(h, "/usage")).text
    assert "价格未知" not in usage and "prices]" not in usage and "估算" not in usage
    today = next(line for line in usage.splitlines() if line.startswith("今日："))
    budget = next(line for line in usage.splitlines() if line.startswith("预算："))
    assert DOLLARS.findall(today)[0] == DOLLARS.findall(budget)[0]
    assert float(DOLLARS.findall(today)[0]) >= 0.06  # the cancelled call's 20K in

    # An approval reads as what will happen; a new message while it waits declines it,
    # says so, and runs.
    h.model.enqueue(tool_reply("memory_add", {"text": "喜欢喝茶"}), text_reply("好的，不记了。"))
    h.tg.inject_text("记住我喜欢喝茶")
    await h.tg.wait_until(lambda: any(asking(m) for m in h.bot_messages()))
    [question] = [m for m in h.bot_messages() if asking(m)]
    head = question.text.splitlines()[:2]
    assert head == ["🔐 需要你的批准：记住一件事", "text=喜欢喝茶"]
    assert '{"text"' not in "\n".join(head)
    mark = seen.mark()
    h.tg.inject_text("算了，别记")
    await h.tg.wait_until(lambda: "好的，不记了。" in h.texts())
    await h.settle()
    assert "已拒绝等待批准的操作并停止上一轮，现在处理你的新消息" in h.texts()
    assert not [s for s in seen.sent(mark) if s.text.startswith(BUSY)]
    assert await h.kernel.store.list_memories() == []

    # /status: at most six lines when healthy, the session as /history names it.
    status = (await command(h, "/status")).text.splitlines()
    assert len(status) <= 6 and not any(line.startswith("问题：") for line in status)
    session = h.kernel.agent.sessions.current_session(CONV)
    assert any(line.startswith(f"会话：#{session}「帮我写周报」") for line in status)
    assert any(line == "状态：空闲" for line in status)
    assert any(line.startswith("健康：正常") for line in status)


async def test_evening_a_kill_then_the_replay_runs_in_its_own_session(bot: Factory) -> None:
    tg, model = await TelegramSim().start(), await AnthropicSim().start()
    first = await bot(language="zh", tg=tg, model=model)
    seen = Transcript(tg)
    try:
        await _evening(bot, first, seen)
    except (AssertionError, TimeoutError):
        print(seen.render())
        raise


async def _evening(bot: Factory, first: BotHarness, seen: Transcript) -> None:
    tg, model = first.tg, first.model
    model.enqueue(text_reply("记下了：明早八点的航班。"))
    await first.converse("我明早八点的航班")
    session = first.kernel.agent.sessions.current_session(CONV)
    # The process is killed while it answers.
    model.enqueue(Reply(Text("你的航班是", chunks=["你的", "航班是"]), stall_after=3))
    cut = tg.inject_text("航班是几点？")
    await first.under_way(requests=2)
    await session_recorded(first)
    await crash(first)

    # At the next start the owner is told, with 🔁; a new message starts a new
    # conversation, and its answer says so once, with /resume.
    second = await bot(language="zh", tg=tg, model=model)
    told = "Kernel 重启了，这条消息没有答完"
    await tg.wait_until(lambda: any(m.text.startswith(f"⚠️ {told}") for m in second.bot_messages()))
    [notice] = [m for m in second.bot_messages() if told in m.text]
    assert "航班是几点？" in notice.text and labels(notice) == ["🔁 重新处理"]
    [sent] = [s for s in seen.sent() if s.text.startswith(f"⚠️ {told}")]
    assert sent.notify  # a new message: the owner's phone says it
    await second.settle()  # nothing of the cut turn stands: it showed drafts only
    assert second.texts() == ["记下了：明早八点的航班。", notice.text]
    model.enqueue(text_reply("晚上好！"))
    hello = await second.converse("晚上好")
    assert hello == "晚上好！\n\n🆕 Kernel 重启过，这是新对话 · /resume 回到之前的对话"
    assert second.kernel.agent.sessions.current_session(CONV) != session

    # 🔁 on the notice replays the question in the session it belonged to, as a reply to it.
    model.enqueue(text_reply("明早八点。"))
    mark = seen.mark()
    await press(second, notice, "🔁")
    await tg.wait_until(lambda: any(t.startswith("明早八点。") for t in second.texts()))
    await second.settle()
    history = json.dumps(model.requests[-1].body["messages"], ensure_ascii=False)
    assert "我明早八点的航班" in history and "晚上好" not in history
    assert said(second, "航班是几点？") == 1
    [answer] = [s for s in seen.sent(mark) if s.text.startswith("明早八点。")]
    assert answer.notify and answer.reply_to == cut["message"]["message_id"]
    assert second.kernel.agent.sessions.current_session(CONV) == session
    assert len(seen.live_buttons("retry:")) == 1
