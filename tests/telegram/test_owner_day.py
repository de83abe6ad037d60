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

import json

from tests.sim.script import Error, text_reply
from tests.sim.telegram_sim import OWNER, ChatMessage
from tests.telegram.conftest import CONV, BotHarness, Factory
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


async def press(h: BotHarness, message: ChatMessage, label: str) -> ChatMessage:
    """Tap the button labelled ``label`` (or starting so); the message as shown after."""
    data = next(d for text, d in buttons_of(message.reply_markup) if text.startswith(label))
    answered = len(h.tg.calls_to("answerCallbackQuery"))
    h.tg.inject_callback(data, message_id=message.message_id)
    await h.tg.wait_until(lambda: len(h.tg.calls_to("answerCallbackQuery")) > answered)
    await h.settle()
    shown = h.tg.message(OWNER, message.message_id)
    assert shown is not None
    return shown


def labels(message: ChatMessage) -> list[str]:
    return [label for label, _ in buttons_of(message.reply_markup)]


async def test_morning_chat_answers_notify_pickers_and_sessions(bot: Factory) -> None:
    h = await bot(language="zh")
    seen = Transcript(h.tg)
    try:
        await _morning(h, seen)
    except AssertionError:
        print(seen.render())
        raise


async def _morning(h: BotHarness, seen: Transcript) -> None:
    # A simple exchange: the first message that notifies holds the answer; the rest of
    # what the turn shows (placeholder, drafts, typing) is silent and the placeholder goes.
    mark = seen.mark()
    h.model.enqueue(text_reply("早上好！今天十点有个会，记得带上周报。"))
    await h.converse("早上好")
    [loud] = seen.notifying(mark)
    assert loud.text.startswith("早上好！今天十点有个会")
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
    assert h.kernel.agent.model == other

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
    assert h.kernel.agent.current_session(CONV) == 1

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
