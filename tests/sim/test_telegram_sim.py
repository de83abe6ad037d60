"""The Telegram Bot API simulator, driven by the real python-telegram-bot client."""

from __future__ import annotations

import asyncio
import datetime as dtm
import struct
import time
import zlib
from collections.abc import AsyncIterator

import aiohttp
import pytest
from telegram import (
    Bot,
    BotCommand,
    InlineKeyboardButton,
    InlineKeyboardMarkup,
    Message,
    ReplyParameters,
    Update,
)
from telegram.constants import ChatAction, ParseMode
from telegram.error import BadRequest, Conflict, InvalidToken, NetworkError, RetryAfter, TimedOut
from telegram.ext import ApplicationBuilder, ContextTypes, MessageHandler, filters

from tests.sim.telegram_html import (
    MAX_MESSAGE_LENGTH,
    EntityParseError,
    parse_html,
    parse_markdown_v2,
    utf16_len,
)
from tests.sim.telegram_sim import (
    NOT_MODIFIED,
    OWNER,
    THREAD_NOT_FOUND,
    TOPIC_CLOSED,
    TelegramSim,
)


def tiny_png() -> bytes:
    """A valid 2x1 PNG."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        body = kind + data
        return struct.pack(">I", len(data)) + body + struct.pack(">I", zlib.crc32(body))

    header = struct.pack(">IIBBBBB", 2, 1, 8, 2, 0, 0, 0)
    pixels = zlib.compress(b"\x00" + b"\xff\x00\x00" * 2)
    return (
        b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", pixels) + chunk(b"IEND", b"")
    )


def make_bot(sim: TelegramSim, token: str | None = None) -> Bot:
    return Bot(
        token or sim.token,
        base_url=f"{sim.api_base}/bot",
        base_file_url=f"{sim.api_base}/file/bot",
    )


@pytest.fixture(autouse=True)
def ptb_timedelta(monkeypatch: pytest.MonkeyPatch) -> None:
    """PTB 22 warns on reading int durations (retry_after, duration) unless opted in."""
    monkeypatch.setenv("PTB_TIMEDELTA", "true")


@pytest.fixture
async def sim() -> AsyncIterator[TelegramSim]:
    async with TelegramSim() as simulator:
        yield simulator


@pytest.fixture
async def bot(sim: TelegramSim) -> AsyncIterator[Bot]:
    async with make_bot(sim) as client:  # initialize() calls getMe
        yield client


# ---- parse_html ---------------------------------------------------------------------------


def test_parse_html_nested_tags_and_entities() -> None:
    text, entities = parse_html(
        "😀 <b>bold <i>both</i></b> &lt;tag&gt; &amp; &quot;q&quot; &#65;&#x42; "
        '<a href="https://example.com/?a=1&amp;b=2">link</a> '
        '<span class="tg-spoiler">s</span><tg-spoiler>t</tg-spoiler> '
        "<u>u</u><ins>i</ins><s>s</s><strike>k</strike><del>d</del><em>e</em><strong>g</strong>"
        "<blockquote expandable>quote</blockquote><code>x</code>"
    )
    assert text == '😀 bold both <tag> & "q" AB link st uiskdeg' + "quotex"
    assert entities[:3] == [
        {"type": "bold", "offset": 3, "length": 9},
        {"type": "italic", "offset": 8, "length": 4},
        {"type": "text_link", "offset": 28, "length": 4, "url": "https://example.com/?a=1&b=2"},
    ]
    types = [entity["type"] for entity in entities[3:]]
    assert types == [
        "spoiler",
        "spoiler",
        "underline",
        "underline",
        "strikethrough",
        "strikethrough",
        "strikethrough",
        "italic",
        "bold",
        "expandable_blockquote",
        "code",
    ]


def test_parse_html_pre_with_language_and_attribute_quoting() -> None:
    text, entities = parse_html("<pre><code class='language-python'>x = 1 &lt; 2\n</code></pre>")
    assert text == "x = 1 < 2\n"
    assert entities == [{"type": "pre", "offset": 0, "length": 10, "language": "python"}]
    assert parse_html("<pre>plain</pre>")[1] == [{"type": "pre", "offset": 0, "length": 5}]
    assert parse_html("<b class=x>y</b>") == ("y", [{"type": "bold", "offset": 0, "length": 1}])
    assert parse_html("a > b\nline two") == ("a > b\nline two", [])
    assert parse_html("<b></b>") == ("", [])


@pytest.mark.parametrize(
    ("html", "detail"),
    [
        ("<h1>Title</h1>", 'Unsupported start tag "h1" at byte offset 0'),
        ("x<br>y", 'Unsupported start tag "br" at byte offset 1'),
        ("<b>bold", 'Can\'t find end tag corresponding to start tag "b"'),
        ("text</b>", "Unexpected end tag at byte offset 4"),
        (
            "<b><i>x</b></i>",
            'Unmatched end tag at byte offset 7, expected "</i>", found "</b>"',
        ),
        ("a < b", 'Unsupported start tag "" at byte offset 2'),
        ("é <", "Unclosed start tag at byte offset 3"),
        ("AT&T", 'Unsupported HTML entity "&T" at byte offset 2'),
        ("fish & chips", 'Character "&" must be escaped as "&amp;" at byte offset 5'),
        ("&nbsp;", 'Unsupported HTML entity "&nbsp;" at byte offset 0'),
        (
            '<code class="language-py">x</code>',
            'Tag "code" with a language class must be inside "pre" at byte offset 0',
        ),
        ("<pre><b>x</b></pre>", 'Tag "b" can\'t be nested in "pre" at byte offset 5'),
        ("<code><i>x</i></code>", 'Tag "i" can\'t be nested in "code" at byte offset 6'),
        ('<a href="a.io"><a href="b.io">x</a></a>', 'Tag "a" can\'t be nested in "a"'),
        ('<span class="x">s</span>', 'Tag "span" must have class "tg-spoiler" at byte offset 0'),
        ('<a href="x', "Unclosed start tag at byte offset 0"),
    ],
)
def test_parse_html_rejects(html: str, detail: str) -> None:
    with pytest.raises(EntityParseError) as caught:
        parse_html(html)
    assert str(caught.value).startswith("Bad Request: can't parse entities: ")
    assert detail in caught.value.detail


def test_utf16_length() -> None:
    assert utf16_len("😀") == 2
    assert utf16_len("aé中") == 3
    assert parse_html("😀<b>x</b>")[1] == [{"type": "bold", "offset": 2, "length": 1}]


def test_parse_markdown_v2() -> None:
    text, entities = parse_markdown_v2(r"*bold* _it_ `co\`de` [l](https://x.io) 1\.5")
    assert text == "bold it co`de l 1.5"
    assert [entity["type"] for entity in entities] == ["bold", "italic", "code", "text_link"]
    with pytest.raises(EntityParseError, match="Character '.' is reserved"):
        parse_markdown_v2("1.5")
    with pytest.raises(EntityParseError, match="Can't find end of Bold entity at byte offset 0"):
        parse_markdown_v2("*open")


# ---- through the real Bot -----------------------------------------------------------------


async def test_get_me(sim: TelegramSim, bot: Bot) -> None:
    me = await bot.get_me()
    assert (me.id, me.is_bot, me.username) == (123456, True, "kernel_test_bot")
    assert me.can_join_groups is True
    assert sim.calls[0].method == "getMe"


async def test_wrong_token_is_unauthorized(sim: TelegramSim) -> None:
    with pytest.raises(InvalidToken, match="rejected by the server"):
        async with make_bot(sim, "999:WRONG"):  # initialize() calls getMe
            pass
    assert sim.calls[-1].status == 401


async def test_send_message_html(sim: TelegramSim, bot: Bot) -> None:
    first = await bot.send_message(OWNER, "<b>Hello</b> &amp; welcome", parse_mode=ParseMode.HTML)
    second = await bot.send_message(OWNER, "  plain  ")
    assert first.text == "Hello & welcome"
    assert [(e.type, e.offset, e.length) for e in first.entities] == [("bold", 0, 5)]
    assert first.from_user is not None and first.from_user.is_bot
    assert first.chat.id == OWNER and first.chat.type == "private"
    assert second.message_id == first.message_id + 1
    assert second.text == "plain"  # Telegram trims surrounding whitespace
    shown = sim.chat(OWNER)
    assert [(m.text, m.parse_mode, m.kind) for m in shown] == [
        ("Hello & welcome", "HTML", "text"),
        ("plain", None, "text"),
    ]
    call = sim.calls_to("sendMessage")[0]
    assert call.params["chat_id"] == OWNER and call.params["parse_mode"] == "HTML"


async def test_send_message_rejections(bot: Bot) -> None:
    with pytest.raises(BadRequest, match="Message is too long"):
        await bot.send_message(OWNER, "x" * (MAX_MESSAGE_LENGTH + 1))
    with pytest.raises(BadRequest, match="Message is too long"):
        await bot.send_message(OWNER, "😀" * (MAX_MESSAGE_LENGTH // 2 + 1))
    with pytest.raises(BadRequest, match='unsupported start tag "h1" at byte offset 0'):
        await bot.send_message(OWNER, "<h1>x</h1>", parse_mode=ParseMode.HTML)
    with pytest.raises(BadRequest, match="Message text is empty"):
        await bot.send_message(OWNER, "<b> </b>", parse_mode=ParseMode.HTML)
    with pytest.raises(BadRequest, match="Chat not found"):
        await bot.send_message(777, "who?")
    with pytest.raises(BadRequest, match="character '!' is reserved"):
        await bot.send_message(OWNER, "Hi!", parse_mode=ParseMode.MARKDOWN_V2)
    exact = await bot.send_message(OWNER, "😀" * (MAX_MESSAGE_LENGTH // 2))
    assert exact.text is not None and utf16_len(exact.text) == MAX_MESSAGE_LENGTH


async def test_edit_delete_and_reply(sim: TelegramSim, bot: Bot) -> None:
    sent = await bot.send_message(OWNER, "draft")
    edited = await bot.edit_message_text("<i>final</i>", OWNER, sent.message_id, parse_mode="HTML")
    assert edited.text == "final" and edited.edit_date is not None
    with pytest.raises(BadRequest, match="Message is not modified") as caught:
        await bot.edit_message_text("<i>final</i>", OWNER, sent.message_id, parse_mode="HTML")
    assert sim.calls[-1].error == NOT_MODIFIED
    assert "exactly the same" in caught.value.message
    reply = await bot.send_message(
        OWNER, "re", reply_parameters=ReplyParameters(message_id=sent.message_id)
    )
    assert reply.reply_to_message is not None
    assert reply.reply_to_message.message_id == sent.message_id
    assert await bot.delete_message(OWNER, sent.message_id)
    assert [m.text for m in sim.chat(OWNER)] == ["re"]
    with pytest.raises(BadRequest, match="Message to delete not found"):
        await bot.delete_message(OWNER, sent.message_id)
    with pytest.raises(BadRequest, match="Message to edit not found"):
        await bot.edit_message_text("again", OWNER, sent.message_id)
    with pytest.raises(BadRequest, match="Message to be replied not found"):
        await bot.send_message(OWNER, "x", reply_to_message_id=sent.message_id)


async def test_inline_keyboard_and_callback(sim: TelegramSim, bot: Bot) -> None:
    keyboard = InlineKeyboardMarkup([[InlineKeyboardButton("Yes", callback_data="yes")]])
    sent = await bot.send_message(OWNER, "Sure?", reply_markup=keyboard)
    shown = sim.message(OWNER, sent.message_id)
    assert shown is not None
    assert shown.reply_markup == {"inline_keyboard": [[{"text": "Yes", "callback_data": "yes"}]]}
    sim.inject_callback("yes", message_id=sent.message_id)
    (update,) = await bot.get_updates(timeout=1)
    query = update.callback_query
    assert query is not None and query.data == "yes"
    assert query.message is not None and query.message.message_id == sent.message_id
    assert await bot.answer_callback_query(query.id, text="ok")
    with pytest.raises(BadRequest, match="Query is too old"):
        await bot.answer_callback_query(query.id)
    edited = await bot.edit_message_reply_markup(OWNER, sent.message_id, reply_markup=None)
    assert isinstance(edited, Message) and edited.reply_markup is None
    assert shown.reply_markup is None
    with pytest.raises(BadRequest, match="Message is not modified"):
        await bot.edit_message_reply_markup(OWNER, sent.message_id, reply_markup=None)
    too_long = InlineKeyboardMarkup([[InlineKeyboardButton("x", callback_data="d" * 65)]])
    with pytest.raises(BadRequest, match="Button_data_invalid"):
        await bot.send_message(OWNER, "x", reply_markup=too_long)


async def test_retry_after(sim: TelegramSim, bot: Bot) -> None:
    sim.fail("sendMessage", status=429, retry_after=3)
    with pytest.raises(RetryAfter) as caught:
        await bot.send_message(OWNER, "hi")
    assert caught.value.retry_after == dtm.timedelta(seconds=3)
    assert sim.calls[-1].error == "Too Many Requests: retry after 3"
    assert (await bot.send_message(OWNER, "hi")).text == "hi"  # only once


async def test_long_poll_delivers_injected_update_and_honours_offset(
    sim: TelegramSim, bot: Bot
) -> None:
    poll = asyncio.create_task(bot.get_updates(timeout=50, read_timeout=60))
    await sim.wait_until(lambda: len(sim.polls) == 1)
    await asyncio.sleep(0.05)  # the poll is now waiting
    assert not poll.done()
    injected = sim.inject_text("/start hello")
    started = time.monotonic()
    (update,) = await poll
    # Answered by the injection, not by the 50 s long-poll ending (margin for a busy machine).
    assert time.monotonic() - started < 25
    assert update.update_id == injected["update_id"]
    message = update.message
    assert message is not None and message.text == "/start hello"
    assert message.from_user is not None and message.from_user.id == OWNER
    assert [(e.type, e.offset, e.length) for e in message.entities] == [("bot_command", 0, 6)]

    again = await bot.get_updates(timeout=0)  # not confirmed yet: delivered again
    assert [u.update_id for u in again] == [update.update_id]
    sim.inject_text("second")
    rest = await bot.get_updates(offset=update.update_id + 1, timeout=0)
    assert [u.message.text for u in rest if u.message] == ["second"]
    assert await bot.get_updates(offset=rest[-1].update_id + 1, timeout=0) == ()
    assert sim.pending_updates == []
    assert sim.get_updates_completed == 4
    assert sim.calls_to("getUpdates") == []  # polls are kept apart
    assert [m.text for m in sim.chat(OWNER, from_bot=False)] == ["/start hello", "second"]


async def test_allowed_updates_filter(sim: TelegramSim, bot: Bot) -> None:
    sent = await bot.send_message(OWNER, "pick")
    sim.inject_text("ignored")
    sim.inject_callback("a", message_id=sent.message_id)
    updates = await bot.get_updates(timeout=0, allowed_updates=["callback_query"])
    assert [u.callback_query.data for u in updates if u.callback_query] == ["a"]
    assert len(updates) == 1
    assert sim.allowed_updates == {"callback_query"}


async def test_group_and_channel_updates(sim: TelegramSim, bot: Bot) -> None:
    sim.inject_text("hi all", user_id=5, chat_type="supergroup")
    sim.inject_channel_post("news")
    sim.inject_edited_text("hi everyone", user_id=5, chat_id=-1001000000001)
    updates = await bot.get_updates(timeout=0)
    group, channel, edited = updates
    assert group.message is not None and group.message.chat.type == "supergroup"
    assert group.message.from_user is not None and group.message.from_user.first_name == "User5"
    assert channel.channel_post is not None and channel.channel_post.text == "news"
    assert edited.edited_message is not None and edited.edited_message.text == "hi everyone"
    assert (await bot.send_message(group.message.chat.id, "hello group")).chat.type == "supergroup"


async def test_file_round_trip(sim: TelegramSim, bot: Bot) -> None:
    data = b"%PDF-1.4 fake document bytes"
    sim.inject_document(data, "report.pdf", caption="see attached")
    image = tiny_png() * 3
    sim.inject_photo(image, sizes=3)
    document_update, photo_update = await bot.get_updates(timeout=0)
    assert document_update.message is not None and photo_update.message is not None
    document = document_update.message.document
    assert document is not None and document.file_name == "report.pdf"
    assert document.mime_type == "application/pdf" and document.file_size == len(data)
    assert document_update.message.caption == "see attached"
    file = await bot.get_file(document.file_id)
    assert file.file_path is not None and file.file_path.startswith(f"{sim.api_base}/file/bot")
    assert bytes(await file.download_as_bytearray()) == data
    photos = photo_update.message.photo
    assert [p.width for p in photos] == [320, 640, 1280]
    assert [p.file_size for p in photos] == sorted(p.file_size or 0 for p in photos)
    largest = await bot.get_file(photos[-1].file_id)
    assert bytes(await largest.download_as_bytearray()) == image


async def test_huge_file_is_too_big(sim: TelegramSim, bot: Bot) -> None:
    sim.inject_document(b"tiny", "big.zip", file_size=25 * 1024 * 1024)
    (update,) = await bot.get_updates(timeout=0)
    assert update.message is not None
    document = update.message.document
    assert document is not None and document.file_size == 25 * 1024 * 1024
    with pytest.raises(BadRequest, match="File is too big"):
        await bot.get_file(document.file_id)


async def test_uploads_are_stored(sim: TelegramSim, bot: Bot) -> None:
    png = tiny_png()
    photo = await bot.send_photo(OWNER, png, caption="<b>chart</b>", parse_mode="HTML")
    voice = await bot.send_voice(OWNER, b"OggS fake opus", duration=3)
    document = await bot.send_document(OWNER, b"a,b\n1,2\n", filename="table.csv")
    assert photo.caption == "chart" and (photo.photo[-1].width, photo.photo[-1].height) == (2, 1)
    assert voice.voice is not None and voice.voice.duration == dtm.timedelta(seconds=3)
    assert document.document is not None and document.document.file_name == "table.csv"
    assert sim.calls_to("sendPhoto")[0].files == {"photo": png}
    assert sim.calls_to("sendVoice")[0].files == {"voice": b"OggS fake opus"}
    assert [m.kind for m in sim.chat(OWNER)] == ["photo", "voice", "document"]
    stored = await bot.get_file(photo.photo[-1].file_id)
    assert bytes(await stored.download_as_bytearray()) == png
    again = await bot.send_photo(OWNER, photo.photo[-1].file_id)  # by file_id
    assert again.photo[-1].file_id == photo.photo[-1].file_id
    with pytest.raises(BadRequest, match="Image_process_failed"):
        await bot.send_photo(OWNER, b"not an image")
    with pytest.raises(BadRequest, match="Wrong file identifier"):
        await bot.send_document(OWNER, "no-such-file-id")


async def test_drafts_actions_and_commands(sim: TelegramSim, bot: Bot) -> None:
    assert await bot.send_message_draft(OWNER, 7, "Thinking <i>hard</i>", parse_mode="HTML")
    assert await bot.send_message_draft(OWNER, 7, "")
    assert [(d.draft_id, d.text) for d in sim.drafts(OWNER)] == [(7, "Thinking hard"), (7, "")]
    assert await bot.send_chat_action(OWNER, ChatAction.TYPING)
    with pytest.raises(BadRequest, match="Wrong parameter action"):
        await bot.send_chat_action(OWNER, "dancing")
    assert await bot.set_my_commands([BotCommand("new", "Start over"), ("help", "Help")])
    assert sim.commands == [
        {"command": "new", "description": "Start over"},
        {"command": "help", "description": "Help"},
    ]
    assert [c.command for c in await bot.get_my_commands()] == ["new", "help"]
    with pytest.raises(BadRequest, match="Bot_command_invalid"):
        await bot.set_my_commands([("Bad-Name", "x")])


async def test_dropped_connection_raises_network_error(sim: TelegramSim, bot: Bot) -> None:
    sim.drop_connections("getUpdates")
    with pytest.raises(NetworkError):
        await bot.get_updates(timeout=0)
    assert sim.polls[-1].status == 0
    sim.inject_text("after")
    (update,) = await bot.get_updates(timeout=0)
    assert update.message is not None and update.message.text == "after"


async def test_dropped_answer_after_processing(sim: TelegramSim, bot: Bot) -> None:
    sim.drop_connections("sendMessage", after_processing=True)
    with pytest.raises(NetworkError):
        await bot.send_message(OWNER, "delivered anyway")
    assert [m.text for m in sim.chat(OWNER)] == ["delivered anyway"]


async def test_hanging_poll_times_out_and_stop_is_fast(sim: TelegramSim, bot: Bot) -> None:
    sim.hang_get_updates(30)
    with pytest.raises(TimedOut):
        await bot.get_updates(timeout=0, read_timeout=0.2)
    poll = asyncio.create_task(bot.get_updates(timeout=50, read_timeout=60))
    await sim.wait_until(lambda: len(sim.polls) == 2)
    started = time.monotonic()
    await sim.stop()
    assert time.monotonic() - started < 25  # stop ends the 50 s poll, it does not wait it out
    with pytest.raises(NetworkError):
        await poll


async def test_going_down_refuses_connections_and_coming_back_keeps_everything() -> None:
    from tests.conftest import free_port

    async with TelegramSim(port=free_port()) as sim, make_bot(sim) as bot:
        await bot.send_message(OWNER, "before")
        await sim.go_down()
        assert not sim.serving
        sim.inject_text("while down")
        with pytest.raises(NetworkError):
            await bot.send_message(OWNER, "refused")
        await sim.come_back()
        (update,) = await bot.get_updates(timeout=0)
        assert update.message is not None and update.message.text == "while down"
        await bot.send_message(OWNER, "after")
        assert [m.text for m in sim.chat(OWNER, from_bot=True)] == ["before", "after"]


async def test_failing_everything_until_stopped(sim: TelegramSim, bot: Bot) -> None:
    sim.fail_everything(502)
    sim.inject_text("held")
    for call in (bot.get_updates(timeout=0), bot.send_message(OWNER, "no")):
        with pytest.raises(NetworkError, match="Bad Gateway"):
            await call
    sim.stop_failing()
    (update,) = await bot.get_updates(timeout=0)
    assert update.message is not None and update.message.text == "held"
    await bot.send_message(OWNER, "yes")
    assert [m.text for m in sim.chat(OWNER, from_bot=True)] == ["yes"]


async def test_every_poll_hangs_until_released(sim: TelegramSim, bot: Bot) -> None:
    sim.hang_every_get_updates()
    sim.inject_text("held")
    with pytest.raises(TimedOut):
        await bot.get_updates(timeout=0, read_timeout=0.2)
    poll = asyncio.create_task(bot.get_updates(timeout=0, read_timeout=30))
    await sim.wait_until(lambda: len(sim.polls) == 2)
    await bot.send_message(OWNER, "sends still work")
    sim.stop_failing()
    with pytest.raises(NetworkError):
        await poll  # the hung poll is dropped, delivering nothing
    (update,) = await bot.get_updates(timeout=0)
    assert update.message is not None and update.message.text == "held"


async def test_an_unparseable_update_breaks_the_library_parse(sim: TelegramSim, bot: Bot) -> None:
    sim.inject_unparseable()
    sim.inject_text("next")
    with pytest.raises(TypeError):
        await bot.get_updates(timeout=0)
    assert len(sim.pending_updates) == 2  # the real library cannot move past it by itself


def test_history_keeps_deleted_messages(sim: TelegramSim) -> None:
    sim.inject_text("one")
    (message,) = sim.chat(OWNER)
    message.deleted = True
    assert sim.chat(OWNER) == [] and sim.history(OWNER) == [message]


async def test_second_poll_terminates_the_first(sim: TelegramSim) -> None:
    async with make_bot(sim) as first, make_bot(sim) as second:
        waiting = asyncio.create_task(first.get_updates(timeout=5))
        await sim.wait_until(lambda: len(sim.polls) == 1)
        await asyncio.sleep(0.05)
        assert await second.get_updates(timeout=0) == ()
        with pytest.raises(Conflict, match="terminated by other getUpdates request"):
            await waiting


async def test_raw_http_forms_and_errors(sim: TelegramSim) -> None:
    base = f"{sim.api_base}/bot{sim.token}"
    async with aiohttp.ClientSession() as http:
        async with http.post(f"{base}/sendMessage", json={"chat_id": OWNER, "text": "j"}) as r:
            assert (await r.json())["result"]["text"] == "j"
        form = {"chat_id": str(OWNER), "text": "123"}
        async with http.post(f"{base}/SENDMESSAGE", data=form) as r:
            assert (await r.json())["result"]["text"] == "123"  # stays a string
        async with http.get(f"{base}/getMe") as r:
            assert (await r.json())["result"]["username"] == "kernel_test_bot"
        async with http.post(f"{base}/noSuchMethod") as r:
            assert r.status == 404
            assert await r.json() == {
                "ok": False,
                "error_code": 404,
                "description": "Not Found: method not found",
            }
        async with http.post(f"{sim.api_base}/botWRONG/getMe") as r:
            assert r.status == 401
            assert (await r.json())["description"] == "Unauthorized"
        started = time.monotonic()
        async with http.post(f"{base}/getUpdates", json={"timeout": 0.2}) as r:
            assert (await r.json()) == {"ok": True, "result": []}
        assert time.monotonic() - started > 0.15  # the long poll waited its 0.2 s
        async with http.post(f"{sim.api_base}/_sim/inject", json={"text": "ctl"}) as r:
            assert (await r.json())["message"]["text"] == "ctl"
        async with http.get(f"{sim.api_base}/_sim/calls") as r:
            assert [c["method"] for c in await r.json()] == [
                "sendMessage",
                "sendMessage",
                "getMe",
                "noSuchMethod",
                "getMe",
            ]
    assert sim.calls_to("sendMessage")[1].params == {"chat_id": OWNER, "text": "123"}


async def test_wait_for_sees_past_and_future_calls(sim: TelegramSim, bot: Bot) -> None:
    await bot.send_message(OWNER, "one")
    past = await sim.wait_for(lambda c: c.params.get("text") == "one")
    assert past.result["text"] == "one"
    later = asyncio.create_task(sim.wait_for(lambda c: c.params.get("text") == "two"))
    await asyncio.sleep(0)
    await bot.send_message(OWNER, "two")
    assert (await later).ok
    with pytest.raises(TimeoutError, match="no matching call"):
        await sim.wait_for(lambda c: c.method == "sendPhoto", timeout=0.1)


async def test_application_polls_and_replies(sim: TelegramSim) -> None:
    seen: list[str] = []

    async def echo(update: Update, context: ContextTypes.DEFAULT_TYPE) -> None:
        assert update.message is not None and update.message.text is not None
        seen.append(update.message.text)
        await update.message.reply_text(f"echo: {update.message.text}")

    app = (
        ApplicationBuilder()
        .token(sim.token)
        .base_url(f"{sim.api_base}/bot")
        .base_file_url(f"{sim.api_base}/file/bot")
        .build()
    )
    app.add_handler(MessageHandler(filters.TEXT & ~filters.COMMAND, echo))
    sim.inject_text("stale, from before the restart")
    await app.initialize()
    assert app.updater is not None
    await app.updater.start_polling(
        drop_pending_updates=True, allowed_updates=["message", "callback_query"]
    )
    await app.start()
    try:
        sim.inject_text("hello")
        reply = await sim.wait_for(lambda c: c.method == "sendMessage", timeout=30)
    finally:
        await app.updater.stop()
        await app.stop()
        await app.shutdown()
    assert reply.ok and reply.params["text"] == "echo: hello"
    assert seen == ["hello"]
    assert sim.webhook_deleted == 1
    assert sim.allowed_updates == {"message", "callback_query"}
    assert sim.pending_updates == []  # the shutdown poll confirmed "hello"
    assert [m.text for m in sim.chat(OWNER)] == [
        "stale, from before the restart",
        "hello",
        "echo: hello",
    ]


# ---- topics in the bot's private chat (docs/telegram-topics.md) --------------------------


async def test_topics_off_refuse_creation_and_threads(sim: TelegramSim, bot: Bot) -> None:
    me = await bot.get_me()
    assert me.has_topics_enabled is None
    with pytest.raises(BadRequest, match="(?i)the chat is not a forum"):
        await bot.create_forum_topic(OWNER, "Trip")
    with pytest.raises(BadRequest, match="(?i)message thread not found"):
        await bot.send_message(OWNER, "hi", message_thread_id=5)
    assert [m.text for m in sim.chat(OWNER)] == []


async def test_bot_creates_topic_and_every_send_names_it(sim: TelegramSim, bot: Bot) -> None:
    sim.enable_topics()
    me = await bot.get_me()
    assert (me.has_topics_enabled, me.allows_users_to_create_topics) == (True, True)
    topic = await bot.create_forum_topic(OWNER, "Trip to Lisbon")
    assert topic.name == "Trip to Lisbon" and topic.message_thread_id > 0
    thread = topic.message_thread_id
    sent = await bot.send_message(OWNER, "in the topic", message_thread_id=thread)
    assert (sent.message_thread_id, sent.is_topic_message) == (thread, True)
    general = await bot.send_message(OWNER, "in General")
    assert general.message_thread_id is None and not general.is_topic_message
    assert await bot.send_message_draft(OWNER, 3, "forming", message_thread_id=thread)
    assert await bot.send_chat_action(OWNER, "typing", message_thread_id=thread)
    # An edit names the message only; it stays in its topic.
    edited = await bot.edit_message_text("edited", OWNER, sent.message_id)
    assert isinstance(edited, object) and sim.chat(OWNER, thread=thread)[0].text == "edited"
    # A reply without message_thread_id lands in its message's topic.
    reply = await bot.send_message(
        OWNER, "a reply", reply_parameters=ReplyParameters(sent.message_id)
    )
    assert reply.message_thread_id == thread
    assert [m.text for m in sim.chat(OWNER, thread=thread)] == ["edited", "a reply"]
    assert [m.text for m in sim.chat(OWNER, thread=None)] == ["in General"]
    assert [d.thread for d in sim.drafts(OWNER)] == [thread]


async def test_owner_topic_arrives_as_service_message_then_messages(
    sim: TelegramSim, bot: Bot
) -> None:
    sim.enable_topics()
    thread = sim.user_creates_topic("Recipes")
    sim.inject_text("pasta?", thread=thread)
    updates = await bot.get_updates(timeout=0)
    created, asked = (Update.de_json(u.to_dict(), bot).message for u in updates)
    assert created is not None and asked is not None
    assert created.forum_topic_created is not None
    assert created.forum_topic_created.name == "Recipes"
    assert (created.message_thread_id, created.is_topic_message) == (thread, True)
    assert created.message_id == thread
    assert (asked.text, asked.message_thread_id, asked.is_topic_message) == (
        "pasta?",
        thread,
        True,
    )


async def test_closed_and_deleted_topics_refuse_sends(sim: TelegramSim, bot: Bot) -> None:
    sim.enable_topics()
    thread = (await bot.create_forum_topic(OWNER, "Work")).message_thread_id
    await bot.send_message(OWNER, "kept?", message_thread_id=thread)
    assert await bot.close_forum_topic(OWNER, thread)
    for send in (
        bot.send_message(OWNER, "x", message_thread_id=thread),
        bot.send_message_draft(OWNER, 1, "x", message_thread_id=thread),
        bot.send_chat_action(OWNER, "typing", message_thread_id=thread),
    ):
        with pytest.raises(BadRequest, match="(?i)topic_closed"):
            await send
    assert [c.error for c in sim.calls[-3:]] == [TOPIC_CLOSED] * 3
    assert await bot.reopen_forum_topic(OWNER, thread)
    sim.user_deletes_topic(thread)
    with pytest.raises(BadRequest, match="(?i)message thread not found"):
        await bot.send_message(OWNER, "x", message_thread_id=thread)
    assert sim.calls[-1].error == THREAD_NOT_FOUND
    with pytest.raises(BadRequest, match="(?i)message thread not found"):
        await bot.delete_forum_topic(OWNER, thread)
    assert sim.chat(OWNER) == [] and sim.topics(OWNER) == []
