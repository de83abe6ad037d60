"""Wire-level simulator of the Telegram Bot API, for driving a real bot client end to end.

    async with TelegramSim() as sim:
        bot = telegram.Bot(sim.token, base_url=f"{sim.api_base}/bot",
                           base_file_url=f"{sim.api_base}/file/bot")
        sim.inject_text("hello")                 # the owner writes to the bot
        updates = await bot.get_updates(timeout=5)
        await bot.send_message(OWNER, "<b>hi</b>", parse_mode="HTML")
        assert sim.chat(OWNER, from_bot=True)[-1].text == "hi"

Routes are the real server's: `POST|GET {api_base}/bot<token>/<method>` (JSON, form-urlencoded
or multipart bodies; query parameters too) and `GET {api_base}/file/bot<token>/<file_path>`.
Method names are case-insensitive, like Telegram's. A wrong token answers 401 Unauthorized
(what Telegram says for a revoked token; it says 404 for a malformed one); an unknown method
404 "Not Found: method not found".

Topics in private chats (docs/telegram-topics.md): `enable_topics()`, `user_creates_topic`,
`inject_text(thread=…)`, createForumTopic and friends; a send to a missing or closed topic
fails with Telegram's words.

Strictness: text is parsed like Telegram does (`tests.sim.telegram_html`), trimmed of
surrounding whitespace, and checked against the limits, with Telegram's error descriptions.
Only chats the simulator knows accept messages: the owner's private chat, chats that
injected updates came from, and chats added with `add_chat`.

Faults: `fail(method, status=429, retry_after=...)`, `drop_connections(method)`,
`hang_get_updates(seconds)`, `hold(method)` (answered once released); outages:
`go_down()`/`come_back()` (nothing listens meanwhile: connection refused; everything the
simulator knows is kept, and it comes back on the same port, so give it a `free_port()`),
`fail_everything(502)`/`stop_failing()` (every method answers that status meanwhile).
`inject_unparseable()` queues an update in a shape the client library cannot parse (a
poll as older Bot API servers send it). A second
concurrent getUpdates terminates the first with 409 Conflict, like Telegram.

Run standalone (inject with `POST /_sim/inject {"text": "hi"}`, look with `GET /_sim/calls`
and `GET /_sim/chat/<chat_id>`, or write and read the answer with `--say`):

    uv run python -m tests.sim.telegram_sim --port 8081 [--token 123456:TEST-TOKEN]
    uv run python -m tests.sim.telegram_sim --port 8081 --say "hello"
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import itertools
import json
import mimetypes
import re
import struct
import time
import uuid
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal, Self

from aiohttp import BodyPartReader, web

from tests.sim.script import abort
from tests.sim.telegram_html import (
    MAX_CAPTION_LENGTH,
    MAX_MESSAGE_LENGTH,
    EntityParseError,
    is_valid_url,
    parse_entities,
    utf16_len,
)
from tests.waiting import event_or_tick, wait_until


def words(text: str) -> list[str]:
    return text.split()


DEFAULT_TOKEN = "123456:TEST-TOKEN"
OWNER = 424242
GROUP_CHAT_ID = -4000000001
SUPERGROUP_CHAT_ID = -1001000000001
CHANNEL_CHAT_ID = -1002000000001

MAX_DOWNLOAD_SIZE = 20 * 1024 * 1024  # getFile refuses bigger files
MAX_UPLOAD_SIZE = 50 * 1024 * 1024
MAX_CALLBACK_DATA = 64

THREAD_NOT_FOUND = "Bad Request: message thread not found"
TOPIC_CLOSED = "Bad Request: TOPIC_CLOSED"
NOT_A_FORUM = "Bad Request: the chat is not a forum"
MAX_TOPIC_NAME = 128
TOPIC_COLORS = (0x6FB9F0, 0xFFD67E, 0xCB86DB, 0x8EEE98, 0xFF93B2, 0xFB6F5F)
NOT_MODIFIED = (
    "Bad Request: message is not modified: specified new message content and reply markup "
    "are exactly the same as a current content and reply markup of the message"
)
CONFLICT = (
    "Conflict: terminated by other getUpdates request; "
    "make sure that only one bot instance is running"
)
DEFAULT_DESCRIPTIONS = {
    400: "Bad Request",
    401: "Unauthorized",
    403: "Forbidden: bot was blocked by the user",
    404: "Not Found",
    409: CONFLICT,
    500: "Internal Server Error",
    502: "Bad Gateway",
}
UPDATE_TYPES = tuple(
    words(
        "message edited_message channel_post edited_channel_post business_connection "
        "business_message edited_business_message deleted_business_messages "
        "message_reaction message_reaction_count inline_query chosen_inline_result "
        "callback_query shipping_query pre_checkout_query purchased_paid_media poll "
        "poll_answer my_chat_member chat_member chat_join_request chat_boost "
        "removed_chat_boost"
    )
)
# What getUpdates delivers when allowed_updates was never set (or set to []).
DEFAULT_ALLOWED_UPDATES = frozenset(UPDATE_TYPES) - {
    "chat_member",
    "message_reaction",
    "message_reaction_count",
}
CHAT_ACTIONS = frozenset(
    words(
        "typing upload_photo record_video upload_video record_voice upload_voice "
        "upload_document choose_sticker find_location record_video_note upload_video_note"
    )
)
# Form and multipart values are JSON-encoded except these plain-string parameters.
STRING_PARAMS = frozenset(
    words(
        "text caption parse_mode callback_query_id inline_message_id file_id url "
        "language_code action emoji description short_description name title "
        "business_connection_id message_effect_id custom_emoji_id photo document voice "
        "audio video animation sticker thumbnail secret_token"
    )
)
# Object parameters some clients send JSON-serialized even inside a JSON body.
OBJECT_PARAMS = frozenset(
    words(
        "reply_markup entities caption_entities reply_parameters link_preview_options "
        "allowed_updates commands scope media menu_button reaction message_ids"
    )
)
# send method -> (message field, getFile folder, default extension, default mime type)
MEDIA_METHODS: dict[str, tuple[str, str, str, str]] = {
    "sendPhoto": ("photo", "photos", ".jpg", "image/jpeg"),
    "sendDocument": ("document", "documents", ".bin", "application/octet-stream"),
    "sendVoice": ("voice", "voice", ".oga", "audio/ogg"),
    "sendAudio": ("audio", "music", ".mp3", "audio/mpeg"),
    "sendVideo": ("video", "videos", ".mp4", "video/mp4"),
    "sendAnimation": ("animation", "animations", ".mp4", "video/mp4"),
}
COMMAND_NAME = re.compile(r"[a-z0-9_]{1,32}")
BOT_COMMAND = re.compile(r"/[A-Za-z0-9_]{1,32}(?:@[A-Za-z0-9_]+)?")
WHITESPACE = " \t\n\r"

ChatType = Literal["private", "group", "supergroup", "channel"]
JSON = dict[str, Any]


class ApiError(Exception):
    """A Bot API error answer: `{"ok": false, "error_code": status, "description": ...}`."""

    def __init__(self, status: int, description: str, *, retry_after: int | None = None):
        super().__init__(description)
        self.status = status
        self.description = description
        self.retry_after = retry_after

    def payload(self) -> JSON:
        body: JSON = {"ok": False, "error_code": self.status, "description": self.description}
        if self.retry_after is not None:
            body["parameters"] = {"retry_after": self.retry_after}
        return body


def bad_request(detail: str) -> ApiError:
    return ApiError(400, f"Bad Request: {detail}")


# --------------------------------------------------------------------------------------
# Records
# --------------------------------------------------------------------------------------


@dataclass
class BotCall:
    """One Bot API request: `params` with JSON values decoded, uploaded `files` by field."""

    method: str
    params: JSON
    files: dict[str, bytes]
    at: float  # time.monotonic() when the request arrived
    status: int = 200  # 0 = the connection was dropped without an answer
    error: str | None = None
    result: Any = None

    @property
    def ok(self) -> bool:
        return self.status == 200


@dataclass
class ChatMessage:
    """One message as the chat shows it now (after edits)."""

    message_id: int
    chat: JSON
    sender: JSON | None  # the `from` user; None for channel posts
    date: int
    kind: str  # text, photo, document, voice, audio, video, animation
    text: str  # visible text, or the caption of media
    entities: list[JSON] = field(default_factory=list)
    parse_mode: str | None = None
    reply_markup: JSON | None = None
    media: Any = None  # the message's `photo` list or `document`/`voice`/... object
    reply_to: JSON | None = None
    edit_date: int | None = None
    deleted: bool = False
    thread: int | None = None  # the topic's message_thread_id (None: General, no topics)
    service: JSON | None = None  # a service message's field, e.g. {"forum_topic_created": ...}

    @property
    def chat_id(self) -> int:
        return int(self.chat["id"])

    @property
    def from_bot(self) -> bool:
        return bool(self.sender and self.sender.get("is_bot"))

    @property
    def file_id(self) -> str | None:
        if isinstance(self.media, list):
            return str(self.media[-1]["file_id"]) if self.media else None
        return str(self.media["file_id"]) if isinstance(self.media, dict) else None

    def to_json(self) -> JSON:
        message: JSON = {"message_id": self.message_id}
        if self.sender is not None:
            message["from"] = self.sender
        if self.chat["type"] == "channel":
            message["sender_chat"] = self.chat
        message |= {"chat": self.chat, "date": self.date}
        if self.thread is not None:
            message |= {"message_thread_id": self.thread, "is_topic_message": True}
        if self.service is not None:
            return message | self.service
        if self.edit_date is not None:
            message["edit_date"] = self.edit_date
        if self.reply_to is not None:
            message["reply_to_message"] = self.reply_to
        if self.kind == "text":
            message["text"] = self.text
            if self.entities:
                message["entities"] = self.entities
        else:
            message[self.kind] = self.media
            if self.text:
                message["caption"] = self.text
            if self.entities:
                message["caption_entities"] = self.entities
        if self.reply_markup is not None:
            message["reply_markup"] = self.reply_markup
        return message


@dataclass
class Topic:
    """A topic of a private chat with the bot (or of a forum): its creation message's id
    is its ``message_thread_id``."""

    thread: int
    name: str
    icon_color: int
    closed: bool = False
    deleted: bool = False

    def to_json(self) -> JSON:
        return {"message_thread_id": self.thread, "name": self.name, "icon_color": self.icon_color}


@dataclass
class Draft:
    draft_id: int
    text: str
    entities: list[JSON]
    parse_mode: str | None
    at: float
    thread: int | None = None


@dataclass
class StoredFile:
    file_id: str
    file_unique_id: str
    data: bytes | None  # None: sent by URL, nothing to download
    file_path: str
    file_size: int  # may claim more than len(data)
    mime_type: str | None = None
    file_name: str | None = None
    declared: bool = True  # False: file_size is left out (it is optional in the Bot API)
    generated: int = 0  # > 0: served as that many generated bytes, streamed (not `data`)

    def descriptor(self) -> JSON:
        size = {"file_size": self.file_size} if self.declared else {}
        return {"file_id": self.file_id, "file_unique_id": self.file_unique_id, **size}


@dataclass
class Upload:
    data: bytes
    filename: str | None
    content_type: str | None


@dataclass
class _Fault:
    kind: Literal["error", "drop", "hang", "hold"]
    status: int = 0
    description: str = ""
    retry_after: int | None = None
    seconds: float = 0.0
    after_processing: bool = False
    release: asyncio.Event | None = None


@dataclass
class _Chat:
    info: JSON
    messages: dict[int, ChatMessage] = field(default_factory=dict)
    next_message_id: int = 1
    drafts: list[Draft] = field(default_factory=list)
    topics: dict[int, Topic] = field(default_factory=dict)  # by message_thread_id


class _Params:
    """Request parameters with Telegram-style errors for missing or mistyped ones."""

    def __init__(self, values: JSON, files: dict[str, Upload]) -> None:
        self.values = values
        self.files = files

    def get(self, name: str, default: Any = None) -> Any:
        value = self.values.get(name)
        return default if value is None else value

    def integer(self, name: str, *, default: int | None = None) -> int:
        value = self.values.get(name)
        if value is None:
            if default is not None:
                return default
            raise bad_request(f"{name} is empty")
        if isinstance(value, bool) or not isinstance(value, int | str):
            raise bad_request(f"invalid {name} specified")
        try:
            return int(value)
        except ValueError:
            raise bad_request(f"invalid {name} specified") from None

    def string(self, name: str) -> str | None:
        value = self.values.get(name)
        return None if value is None else str(value)

    def flag(self, name: str) -> bool:
        return self.values.get(name) in (True, "true", "True", 1, "1")


# --------------------------------------------------------------------------------------
# The simulator
# --------------------------------------------------------------------------------------


class TelegramSim:
    """Fake `api.telegram.org`; point a bot at `api_base` (`http://127.0.0.1:PORT`)."""

    def __init__(
        self,
        token: str = DEFAULT_TOKEN,
        *,
        bot_username: str = "kernel_test_bot",
        owner_id: int = OWNER,
        host: str = "127.0.0.1",
        port: int = 0,
    ) -> None:
        self.token = token
        self.bot_username = bot_username
        self.owner_id = owner_id
        self.host = host
        self.port = port
        bot_id = token.split(":", 1)[0]
        self.bot_user: JSON = {
            "id": int(bot_id) if bot_id.isdigit() else 123456,
            "is_bot": True,
            "first_name": "Kernel Test",
            "username": bot_username,
        }
        self.calls: list[BotCall] = []  # every call but getUpdates, in order
        self.downloads: list[str] = []  # file paths served, in order
        # getFile refuses bigger files, as Telegram's cloud API does; None: no limit, as a
        # local Bot API server (telegram-bot-api --local) serves any size.
        self.download_limit: int | None = MAX_DOWNLOAD_SIZE
        self.polls: list[BotCall] = []  # getUpdates calls (result filled in when answered)
        self.get_updates_completed = 0  # getUpdates answered with a result
        self.allowed_updates: frozenset[str] = DEFAULT_ALLOWED_UPDATES
        self.files: dict[str, StoredFile] = {}
        self.webhook_deleted = 0
        # The bot's "threaded mode" (BotFather): private chats with the bot have topics.
        self.topics_enabled = False
        self._updates: deque[JSON] = deque()
        self._update_ids = itertools.count(1)
        self._chats: dict[int, _Chat] = {}
        self._commands: dict[tuple[str, str], list[JSON]] = {}
        self._callbacks: dict[str, bool] = {}  # callback query id -> answered
        self._faults: dict[str, deque[_Fault]] = {}
        self._failing: int | None = None  # fail_everything: every call answers this status
        self._failing_description = ""
        self._hanging: asyncio.Event | None = None  # hang_every_get_updates until released
        self._counter = itertools.count(1)
        self._poll_generation = 0
        self._pulse = asyncio.Event()
        self._stopping = asyncio.Event()
        self._runner: web.AppRunner | None = None
        self._handlers: dict[str, Callable[[_Params], Any]] = {
            "getMe": lambda _: self.get_me_json(),
            "logOut": lambda _: True,
            "close": lambda _: True,
            "deleteWebhook": self._delete_webhook,
            "getWebhookInfo": self._get_webhook_info,
            "setMyCommands": self._set_my_commands,
            "getMyCommands": self._get_my_commands,
            "deleteMyCommands": self._delete_my_commands,
            "sendMessage": self._send_message,
            "editMessageText": self._edit_message_text,
            "editMessageCaption": self._edit_message_caption,
            "editMessageReplyMarkup": self._edit_message_reply_markup,
            "deleteMessage": self._delete_message,
            "deleteMessages": self._delete_messages,
            "sendChatAction": self._send_chat_action,
            "sendMessageDraft": self._send_message_draft,
            "createForumTopic": self._create_forum_topic,
            "editForumTopic": self._edit_forum_topic,
            "closeForumTopic": lambda params: self._close_forum_topic(params, closed=True),
            "reopenForumTopic": lambda params: self._close_forum_topic(params, closed=False),
            "deleteForumTopic": self._delete_forum_topic,
            "getFile": self._get_file,
            "answerCallbackQuery": self._answer_callback_query,
            "setMessageReaction": self._set_message_reaction,
            "setMyDescription": lambda _: True,
            "setMyShortDescription": lambda _: True,
            "setMyName": lambda _: True,
            "setChatMenuButton": lambda _: True,
        }
        for method in MEDIA_METHODS:
            self._handlers[method] = lambda params, method=method: self._send_media(method, params)
        self._method_names = {name.lower(): name for name in [*self._handlers, "getUpdates"]}
        self.add_chat(owner_id)

    # ---- lifecycle ----------------------------------------------------------------------

    @property
    def api_base(self) -> str:
        if self._runner is None:
            raise RuntimeError("simulator not started")
        return f"http://{self.host}:{self.port}"

    async def start(self) -> Self:
        self._stopping = asyncio.Event()
        app = web.Application(client_max_size=MAX_UPLOAD_SIZE + 1024 * 1024)
        app.add_routes(
            [
                web.post("/_sim/inject", self._control_inject),
                web.get("/_sim/calls", self._control_calls),
                web.get("/_sim/chat/{chat_id}", self._control_chat),
                web.route("POST", "/bot{token}/{method}", self._api),
                web.route("GET", "/bot{token}/{method}", self._api),
                web.get("/file/bot{token}/{path:.+}", self._download),
                web.route("*", "/{tail:.*}", self._not_found),
            ]
        )
        runner = web.AppRunner(app, shutdown_timeout=0.5, access_log=None)
        await runner.setup()
        site = web.TCPSite(runner, self.host, self.port)
        await site.start()
        self._runner = runner
        self.port = runner.addresses[0][1]
        return self

    async def stop(self) -> None:
        """Stop quickly: pending long polls and hangs are cut off, connections closed."""
        runner, self._runner = self._runner, None
        if runner is None:
            return
        self._stopping.set()
        self._notify()
        await runner.cleanup()

    async def __aenter__(self) -> Self:
        return await self.start()

    async def __aexit__(self, *exc_info: object) -> None:
        await self.stop()

    # ---- faults ---------------------------------------------------------------------------

    def fail(
        self,
        method: str,
        *,
        status: int = 429,
        retry_after: int | None = None,
        description: str | None = None,
        times: int = 1,
    ) -> None:
        """Answer the next `times` calls of `method` with an error (429: "retry after N")."""
        if status == 429 and retry_after is None:
            retry_after = 1
        if description is None:
            if status == 429:
                description = f"Too Many Requests: retry after {retry_after}"
            else:
                description = DEFAULT_DESCRIPTIONS.get(status, f"Error {status}")
        fault = _Fault("error", status=status, description=description, retry_after=retry_after)
        self._add_fault(method, fault, times)

    def drop_connections(
        self, method: str = "getUpdates", *, times: int = 1, after_processing: bool = False
    ) -> None:
        """Close the connection of the next `times` calls of `method` without an answer.

        `after_processing=True` performs the call first (the message is sent, the update
        offset confirmed), so only the answer is lost.
        """
        fault = _Fault("drop", after_processing=after_processing)
        self._add_fault(method, fault, times)

    def hang_get_updates(self, seconds: float, *, times: int = 1) -> None:
        """The next `times` getUpdates get no answer at all for `seconds`, then are dropped."""
        self._add_fault("getUpdates", _Fault("hang", seconds=seconds), times)

    async def go_down(self) -> None:
        """The Bot API is unreachable: the server stops (long polls cut off), so every
        connection is refused until `come_back()`; queued updates and chats are kept."""
        await self.stop()

    async def come_back(self) -> None:
        """Serve again on the same port, with everything it knew before `go_down()`."""
        await self.start()

    def fail_everything(self, status: int = 502, description: str | None = None) -> None:
        """Answer every call (getUpdates included) with `status` until `stop_failing()`."""
        self._failing = status
        self._failing_description = description or DEFAULT_DESCRIPTIONS.get(
            status, f"Error {status}"
        )

    def hang_every_get_updates(self) -> None:
        """Every getUpdates gets no answer (and delivers nothing) until `stop_failing()`;
        then the hung ones are dropped, as a stuck proxy would finally do."""
        if self._hanging is None:
            self._hanging = asyncio.Event()

    def stop_failing(self) -> None:
        """End `fail_everything` and `hang_every_get_updates`."""
        self._failing = None
        hanging, self._hanging = self._hanging, None
        if hanging is not None:
            hanging.set()

    def clear_faults(self) -> None:
        """Forget the faults queued with `fail`, `drop_connections` and `hang_get_updates`
        that no call consumed yet."""
        self._faults.clear()

    @property
    def serving(self) -> bool:
        """Listening (started and not gone down)."""
        return self._runner is not None

    def hold(self, method: str, *, times: int = 1) -> asyncio.Event:
        """The next `times` calls of `method` wait until the returned event is set (or
        the simulator stops), then are answered as usual (the client may have given up)."""
        release = asyncio.Event()
        self._add_fault(method, _Fault("hold", release=release), times)
        return release

    def _add_fault(self, method: str, fault: _Fault, times: int) -> None:
        self._faults.setdefault(method.lower(), deque()).extend([fault] * times)

    # ---- chats and injection ------------------------------------------------------------

    def add_chat(
        self, chat_id: int, chat_type: ChatType = "private", *, title: str | None = None
    ) -> JSON:
        """Make a chat known (messages to unknown chats fail with "chat not found")."""
        if chat_id in self._chats:
            return self._chats[chat_id].info
        info: JSON = {"id": chat_id, "type": chat_type}
        if chat_type == "private":
            user = self.user_json(chat_id)
            info |= {key: user[key] for key in ("first_name", "username") if key in user}
        else:
            info["title"] = title or f"Test {chat_type.title()}"
        self._chats[chat_id] = _Chat(info)
        return info

    def user_json(self, user_id: int) -> JSON:
        user: JSON = {"id": user_id, "is_bot": False, "language_code": "en"}
        if user_id == self.owner_id:
            return user | {"first_name": "Owner", "username": "owner"}
        return user | {"first_name": f"User{user_id}"}

    def inject_update(self, body: JSON) -> JSON:
        """Queue a raw update (`{"message": {...}}`); it gets the next update_id."""
        update = {"update_id": next(self._update_ids), **body}
        self._updates.append(update)
        self._notify()
        return update

    def inject_text(
        self,
        text: str,
        *,
        user_id: int | None = None,
        chat_id: int | None = None,
        chat_type: ChatType = "private",
        reply_to_message_id: int | None = None,
        thread: int | None = None,
    ) -> JSON:
        """A user's text message; a leading /command gets a `bot_command` entity.
        ``thread``: written in that topic (it must exist and be open)."""
        entities: list[JSON] = []
        if match := BOT_COMMAND.match(text):
            entities.append({"type": "bot_command", "offset": 0, "length": utf16_len(match[0])})
        message = self._user_message(user_id, chat_id, chat_type, "text", text, entities)
        if thread is not None:
            topic = self._chats[message.chat_id].topics.get(thread)
            if topic is None or topic.deleted or topic.closed:
                raise LookupError(f"no open topic {thread} in chat {message.chat_id}")
            message.thread = thread
        if reply_to_message_id is not None:
            target = self._live_message(message.chat_id, reply_to_message_id)
            if target is None:
                raise LookupError(f"no message {reply_to_message_id} in chat {message.chat_id}")
            message.reply_to = target.to_json()
        return self.inject_update({"message": message.to_json()})

    def inject_edited_text(
        self,
        text: str,
        *,
        message_id: int | None = None,
        user_id: int | None = None,
        chat_id: int | None = None,
    ) -> JSON:
        """The user edits their message `message_id` (default: their latest one)."""
        user_id = self.owner_id if user_id is None else user_id
        chat_id = user_id if chat_id is None else chat_id
        mine = [m for m in self.chat(chat_id) if m.sender and m.sender["id"] == user_id]
        found = [m for m in mine if message_id in (None, m.message_id) and m.kind == "text"]
        if not found:
            raise LookupError(f"no text message {message_id} of user {user_id} in {chat_id}")
        message = found[-1]
        message.text, message.edit_date = text, int(time.time())
        return self.inject_update({"edited_message": message.to_json()})

    def inject_photo(
        self,
        image: bytes,
        *,
        sizes: int = 3,
        caption: str | None = None,
        width: int = 1280,
        height: int = 960,
        user_id: int | None = None,
        chat_id: int | None = None,
        chat_type: ChatType = "private",
        declare_size: bool = True,
        size_on_get_file: bool | None = None,
        generated: int = 0,
    ) -> JSON:
        """A photo with `sizes` PhotoSizes, smallest first; the largest downloads as `image`,
        the smaller ones as shorter prefixes of it. `declare_size=False`: no `file_size`
        in the message, nor in getFile's answer unless `size_on_get_file`. `generated`:
        the largest is that many generated bytes instead, streamed without a length."""
        photo: list[JSON] = []
        for index in range(sizes):
            scale = 2 ** (sizes - 1 - index)
            data = image if index == sizes - 1 else image[: len(image) * (index + 1) // sizes]
            stored = self.store_file(data, "photos", ".jpg", mime_type="image/jpeg")
            if generated and index == sizes - 1:
                stored.generated = stored.file_size = generated
            stored.declared = declare_size
            photo.append(
                stored.descriptor()
                | {"width": max(1, width // scale), "height": max(1, height // scale)}
            )
            stored.declared = declare_size if size_on_get_file is None else size_on_get_file
        message = self._user_message(user_id, chat_id, chat_type, "photo", caption or "", [])
        message.media = photo
        return self.inject_update({"message": message.to_json()})

    def inject_document(
        self,
        data: bytes,
        file_name: str,
        *,
        mime_type: str | None = None,
        caption: str | None = None,
        file_size: int | None = None,
        user_id: int | None = None,
        chat_id: int | None = None,
        chat_type: ChatType = "private",
        declare_size: bool = True,
        generated: int = 0,
    ) -> JSON:
        """A document; `file_size` may claim more than `len(data)` (e.g. 25 MB).
        `declare_size=False`: no `file_size` anywhere; `generated`: it is that many
        generated bytes instead of `data`, streamed without a length."""
        mime_type = mime_type or mimetypes.guess_type(file_name)[0] or "application/octet-stream"
        stored = self.store_file(
            data, "documents", file_name, mime_type=mime_type, file_size=file_size
        )
        stored.declared = declare_size
        if generated:
            stored.generated = stored.file_size = generated
        stored.file_name = file_name
        media = {"file_name": file_name, "mime_type": mime_type, **stored.descriptor()}
        message = self._user_message(user_id, chat_id, chat_type, "document", caption or "", [])
        message.media = media
        return self.inject_update({"message": message.to_json()})

    def inject_voice(
        self,
        data: bytes,
        *,
        duration: int = 2,
        mime_type: str = "audio/ogg",
        caption: str | None = None,
        file_size: int | None = None,
        user_id: int | None = None,
        chat_id: int | None = None,
        chat_type: ChatType = "private",
        declare_size: bool = True,
        generated: int = 0,
    ) -> JSON:
        """A voice note. `declare_size=False`: no `file_size` anywhere; `generated`: it is
        that many generated bytes instead of `data`, streamed without a length."""
        stored = self.store_file(data, "voice", ".oga", mime_type=mime_type, file_size=file_size)
        stored.declared = declare_size
        if generated:
            stored.generated = stored.file_size = generated
        media = {"duration": duration, "mime_type": mime_type, **stored.descriptor()}
        message = self._user_message(user_id, chat_id, chat_type, "voice", caption or "", [])
        message.media = media
        return self.inject_update({"message": message.to_json()})

    def inject_audio(
        self,
        data: bytes,
        file_name: str,
        *,
        duration: int = 2,
        mime_type: str = "audio/mpeg",
        caption: str | None = None,
        file_size: int | None = None,
    ) -> JSON:
        """An audio file (a music player's track rather than a voice note) from the owner."""
        stored = self.store_file(data, "music", file_name, mime_type=mime_type, file_size=file_size)
        stored.file_name = file_name
        media = {
            "duration": duration,
            "mime_type": mime_type,
            "file_name": file_name,
            **stored.descriptor(),
        }
        message = self._user_message(None, None, "private", "audio", caption or "", [])
        message.media = media
        return self.inject_update({"message": message.to_json()})

    def inject_callback(
        self,
        data: str,
        *,
        message_id: int,
        user_id: int | None = None,
        chat_id: int | None = None,
    ) -> JSON:
        """The user presses an inline button with callback `data` under `message_id`."""
        user_id = self.owner_id if user_id is None else user_id
        chat_id = user_id if chat_id is None else chat_id
        info = self.add_chat(chat_id)
        target = self._live_message(chat_id, message_id)
        # A message the bot cannot see any more arrives as an InaccessibleMessage (date 0).
        message = (
            target.to_json() if target else {"chat": info, "message_id": message_id, "date": 0}
        )
        query_id = str(next(self._counter) * 1000003)
        self._callbacks[query_id] = False
        return self.inject_update(
            {
                "callback_query": {
                    "id": query_id,
                    "from": self.user_json(user_id),
                    "message": message,
                    "chat_instance": str(abs(chat_id) * 7 + 1),
                    "data": data,
                }
            }
        )

    def inject_unparseable(self, *, user_id: int = 777001) -> JSON:
        """A stranger's poll in the shape an older Bot API server sends (no
        `persistent_id`, options without `voter_count`): python-telegram-bot cannot parse
        it (`Update.de_json` raises TypeError), so one such update spoils the whole batch."""
        message = self._user_message(user_id, None, "private", "text", "", [])
        body = {k: v for k, v in message.to_json().items() if k != "text"}
        body["poll"] = {
            "id": str(next(self._counter)),
            "question": "lunch?",
            "options": [{"text": "yes"}, {"text": "no"}],
            "is_closed": False,
        }
        return self.inject_update({"message": body})

    def history(self, chat_id: int) -> list[ChatMessage]:
        """Every message the chat ever showed, deleted ones included, oldest first."""
        chat = self._chats.get(chat_id)
        return list(chat.messages.values()) if chat else []

    def inject_channel_post(
        self, text: str, *, chat_id: int = CHANNEL_CHAT_ID, title: str = "Test Channel"
    ) -> JSON:
        self.add_chat(chat_id, "channel", title=title)
        message = self._new_message(chat_id, None, "text", text, [])
        return self.inject_update({"channel_post": message.to_json()})

    def _user_message(
        self,
        user_id: int | None,
        chat_id: int | None,
        chat_type: ChatType,
        kind: str,
        text: str,
        entities: list[JSON],
    ) -> ChatMessage:
        user_id = self.owner_id if user_id is None else user_id
        if chat_id is None:
            chat_id = {
                "private": user_id,
                "group": GROUP_CHAT_ID,
                "supergroup": SUPERGROUP_CHAT_ID,
                "channel": CHANNEL_CHAT_ID,
            }[chat_type]
        self.add_chat(chat_id, chat_type)
        return self._new_message(chat_id, self.user_json(user_id), kind, text, entities)

    def _new_message(
        self, chat_id: int, sender: JSON | None, kind: str, text: str, entities: list[JSON]
    ) -> ChatMessage:
        chat = self._chats[chat_id]
        message = ChatMessage(
            message_id=chat.next_message_id,
            chat=chat.info,
            sender=sender,
            date=int(time.time()),
            kind=kind,
            text=text,
            entities=entities,
        )
        chat.next_message_id += 1
        chat.messages[message.message_id] = message
        return message

    def store_file(
        self,
        data: bytes | None,
        folder: str,
        name_or_extension: str,
        *,
        mime_type: str | None = None,
        file_size: int | None = None,
    ) -> StoredFile:
        """Keep `data` downloadable; return its descriptor (file_id, path, size)."""
        number = next(self._counter)
        extension = "." + name_or_extension.rsplit(".", 1)[-1] if "." in name_or_extension else ""
        stored = StoredFile(
            file_id=f"sim-{folder}-{number}-{uuid.uuid4().hex[:12]}",
            file_unique_id=f"u{number}",
            data=data,
            file_path=f"{folder}/file_{number}{extension}",
            file_size=len(data or b"") if file_size is None else file_size,
            mime_type=mime_type,
        )
        self.files[stored.file_id] = stored
        return stored

    # ---- observation --------------------------------------------------------------------

    def chat(
        self, chat_id: int, *, from_bot: bool | None = None, thread: int | None | bool = True
    ) -> list[ChatMessage]:
        """The chat's live (not deleted) messages, oldest first, service messages left
        out; filter by sender side, and by topic: ``thread`` a topic's id, None the
        General topic (no thread), True (the default) every topic."""
        chat = self._chats.get(chat_id)
        if chat is None:
            return []
        return [
            message
            for message in chat.messages.values()
            if not message.deleted
            and message.service is None
            and from_bot in (None, message.from_bot)
            and (thread is True or message.thread == thread)
        ]

    # ---- topics (private chats with the bot, Bot API 9.3+) -------------------------------

    def enable_topics(self) -> None:
        """The bot's owner turns topics on for it (BotFather's threaded mode): getMe says
        ``has_topics_enabled``, and createForumTopic works in private chats."""
        self.topics_enabled = True

    def topic(self, chat_id: int, thread: int) -> Topic | None:
        chat = self._chats.get(chat_id)
        return chat.topics.get(thread) if chat else None

    def topics(self, chat_id: int) -> list[Topic]:
        chat = self._chats.get(chat_id)
        return [t for t in chat.topics.values() if not t.deleted] if chat else []

    def user_creates_topic(self, name: str, *, chat_id: int | None = None) -> int:
        """The user opens a topic in their chat with the bot: the bot gets the
        ``forum_topic_created`` service message, in the topic; returns its thread id."""
        chat_id = self.owner_id if chat_id is None else chat_id
        if not self.topics_enabled:
            raise LookupError("topics are not enabled for the bot")
        message = self._user_message(None, chat_id, "private", "text", "", [])
        topic = self._open_topic(chat_id, message, name)
        return topic.thread

    def user_deletes_topic(self, thread: int, *, chat_id: int | None = None) -> None:
        """The user deletes a topic: its messages go, and the bot is not told (no update)."""
        self._drop_topic(self._chats[self.owner_id if chat_id is None else chat_id], thread)

    def user_closes_topic(self, thread: int, *, chat_id: int | None = None) -> None:
        topic = self._chats[self.owner_id if chat_id is None else chat_id].topics[thread]
        topic.closed = True

    def _open_topic(self, chat_id: int, message: ChatMessage, name: str) -> Topic:
        chat = self._chats[chat_id]
        color = TOPIC_COLORS[len(chat.topics) % len(TOPIC_COLORS)]
        topic = Topic(message.message_id, name, color)
        chat.topics[topic.thread] = topic
        message.kind, message.thread = "service", topic.thread
        message.service = {"forum_topic_created": {"name": name, "icon_color": color}}
        if not message.from_bot:  # the bot is not sent its own service messages
            self.inject_update({"message": message.to_json()})
        return topic

    def _drop_topic(self, chat: _Chat, thread: int) -> None:
        topic = chat.topics.get(thread)
        if topic is None or topic.deleted:
            raise bad_request("message thread not found")
        topic.deleted = True
        for message in chat.messages.values():
            if message.thread == thread:
                message.deleted = True

    def message(self, chat_id: int, message_id: int) -> ChatMessage | None:
        return self._live_message(chat_id, message_id)

    def drafts(self, chat_id: int, *, thread: int | None | bool = True) -> list[Draft]:
        chat = self._chats.get(chat_id)
        drafts = list(chat.drafts) if chat else []
        return [d for d in drafts if thread is True or d.thread == thread]

    def calls_to(self, method: str) -> list[BotCall]:
        return [call for call in self.calls if call.method.lower() == method.lower()]

    @property
    def commands(self) -> list[JSON]:
        """The default-scope command list set with setMyCommands."""
        return list(self._commands.get(("default", ""), []))

    @property
    def pending_updates(self) -> list[JSON]:
        """Updates queued and not confirmed yet."""
        return list(self._updates)

    async def wait_for(
        self,
        predicate: Callable[[BotCall], bool],
        timeout: float = 30,  # noqa: ASYNC109 (the documented API)
    ) -> BotCall:
        """The first call (already made or still to come) that satisfies `predicate`."""
        seen = 0
        try:
            async with asyncio.timeout(timeout):
                while True:
                    pulse = self._pulse
                    seen = min(seen, len(self.calls))
                    for call in self.calls[seen:]:
                        if predicate(call):
                            return call
                    seen = len(self.calls)
                    await pulse.wait()
        except TimeoutError:
            made = ", ".join(call.method for call in self.calls[-20:]) or "none"
            raise TimeoutError(f"no matching call within {timeout}s (last calls: {made})") from None

    async def wait_until(
        self,
        condition: Callable[[], bool],
        timeout: float = 30,  # noqa: ASYNC109 (the documented API)
    ) -> None:
        """``tests.waiting.wait_until``, rechecked on every Bot API event."""
        await wait_until(condition, timeout=timeout, pause=lambda: event_or_tick(self._pulse))

    def get_me_json(self) -> JSON:
        me = self.bot_user | {
            "can_join_groups": True,
            "can_read_all_group_messages": False,
            "supports_inline_queries": False,
            "can_connect_to_business": False,
            "has_main_web_app": False,
        }
        if self.topics_enabled:
            me |= {"has_topics_enabled": True, "allows_users_to_create_topics": True}
        return me

    def _notify(self) -> None:
        self._pulse.set()
        self._pulse = asyncio.Event()

    def _live_message(self, chat_id: int, message_id: int) -> ChatMessage | None:
        chat = self._chats.get(chat_id)
        message = chat.messages.get(message_id) if chat else None
        return None if message is None or message.deleted else message

    # ---- HTTP ---------------------------------------------------------------------------

    async def _api(self, request: web.Request) -> web.StreamResponse:
        requested = request.match_info["method"]
        method = self._method_names.get(requested.lower(), requested)
        call = BotCall(method, {}, {}, time.monotonic())
        if method == "getUpdates":
            self.polls.append(call)
        try:
            return await self._answer(request, call)
        finally:
            if method != "getUpdates":
                self.calls.append(call)  # once complete, so wait_for sees the outcome
            self._notify()

    async def _answer(self, request: web.Request, call: BotCall) -> web.StreamResponse:
        try:
            if request.match_info["token"] != self.token:
                raise ApiError(401, "Unauthorized")
            if call.method.lower() not in self._method_names:
                raise ApiError(404, "Not Found: method not found")
            params = await read_params(request)
            call.params = params.values
            call.files = {name: upload.data for name, upload in params.files.items()}
            if self._failing is not None:
                raise ApiError(self._failing, self._failing_description)
            if call.method == "getUpdates" and self._hanging is not None:
                return await self._hang_until_released(request, call, self._hanging)
            faults = self._faults.get(call.method.lower())
            fault = faults.popleft() if faults else None
            if fault is not None and fault.kind == "error":
                raise ApiError(fault.status, fault.description, retry_after=fault.retry_after)
            if fault is not None and fault.kind == "hold":
                assert fault.release is not None
                waits = {asyncio.ensure_future(e.wait()) for e in (fault.release, self._stopping)}
                _, pending = await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
                for wait in pending:
                    wait.cancel()
                fault = None
            if fault is not None and not fault.after_processing:
                return await self._cut_off(request, call, fault)
            if call.method == "getUpdates":
                result = await self._get_updates(request, params)
            else:
                result = self._handlers[call.method](params)
            if fault is not None:
                return await self._cut_off(request, call, fault)
        except ApiError as error:
            call.status, call.error = error.status, error.description
            return web.json_response(error.payload(), status=error.status)
        except Exception as bug:  # a simulator bug: answer, and name it, in the API's format
            error = ApiError(500, f"Internal Server Error: simulator failed: {bug!r}")
            call.status, call.error = error.status, error.description
            return web.json_response(error.payload(), status=error.status)
        call.result = result
        if call.method == "getUpdates":
            self.get_updates_completed += 1
        return web.json_response({"ok": True, "result": result})

    async def _hang_until_released(
        self, request: web.Request, call: BotCall, released: asyncio.Event
    ) -> web.Response:
        stopping = asyncio.ensure_future(self._stopping.wait())
        release = asyncio.ensure_future(released.wait())
        await asyncio.wait({stopping, release}, return_when=asyncio.FIRST_COMPLETED)
        for waiter in (stopping, release):
            waiter.cancel()
        call.status, call.error = 0, "connection dropped (hang)"
        abort(request)
        return web.Response(status=503)

    async def _cut_off(self, request: web.Request, call: BotCall, fault: _Fault) -> web.Response:
        if fault.kind == "hang":
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(fault.seconds):
                    await self._stopping.wait()
        call.status, call.error = 0, f"connection dropped ({fault.kind})"
        abort(request)
        return web.Response(status=503)

    async def _download(self, request: web.Request) -> web.StreamResponse:
        if request.match_info["token"] != self.token:
            return web.json_response(ApiError(401, "Unauthorized").payload(), status=401)
        path = request.match_info["path"]
        for stored in self.files.values():
            if stored.file_path == path and stored.generated:
                self.downloads.append(path)
                return await _stream_generated(request, stored)
            if stored.file_path == path and stored.data is not None:
                self.downloads.append(path)
                content_type = stored.mime_type or "application/octet-stream"
                return web.Response(body=stored.data, content_type=content_type)
        return web.json_response(ApiError(404, "Not Found").payload(), status=404)

    async def _not_found(self, request: web.Request) -> web.Response:
        return web.json_response(ApiError(404, "Not Found").payload(), status=404)

    async def _control_inject(self, request: web.Request) -> web.Response:
        body = await request.json()
        update = self.inject_text(
            str(body["text"]),
            user_id=int(body.get("user_id", self.owner_id)),
            chat_id=body.get("chat_id"),
            chat_type=body.get("chat_type", "private"),
        )
        return web.json_response(update)

    async def _control_calls(self, request: web.Request) -> web.Response:
        calls = [
            {
                "method": call.method,
                "params": call.params,
                "files": {name: len(data) for name, data in call.files.items()},
                "status": call.status,
                "error": call.error,
                "at": call.at,
            }
            for call in self.calls
        ]
        return web.json_response(calls)

    async def _control_chat(self, request: web.Request) -> web.Response:
        chat_id = int(request.match_info["chat_id"])
        return web.json_response([message.to_json() for message in self.chat(chat_id)])

    # ---- getUpdates ---------------------------------------------------------------------

    async def _get_updates(self, request: web.Request, params: _Params) -> list[JSON]:
        limit = min(max(params.integer("limit", default=100), 1), 100)
        timeout = max(float(params.get("timeout", 0)), 0.0)
        allowed = params.get("allowed_updates")
        if isinstance(allowed, list):
            self.allowed_updates = frozenset(allowed) if allowed else DEFAULT_ALLOWED_UPDATES
        if "offset" in params.values:
            self._confirm(params.integer("offset"))
        self._poll_generation += 1
        generation = self._poll_generation
        self._notify()  # an older long poll still waiting ends with 409 Conflict
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while True:
            pulse = self._pulse
            if self._stopping.is_set() or request.transport is None:
                abort(request)
                raise ApiError(503, "simulator stopping")
            if generation != self._poll_generation:
                raise ApiError(409, CONFLICT)
            updates = self._deliverable(limit)
            remaining = deadline - loop.time()
            if updates or remaining <= 0:
                return updates
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(remaining):
                    await pulse.wait()

    def _confirm(self, offset: int) -> None:
        if offset < 0:
            while len(self._updates) > -offset:
                self._updates.popleft()
            return
        while self._updates and self._updates[0]["update_id"] < offset:
            self._updates.popleft()

    def _deliverable(self, limit: int) -> list[JSON]:
        """Up to `limit` queued updates; ones of types not allowed are discarded."""
        self._updates = deque(u for u in self._updates if update_type(u) in self.allowed_updates)
        return list(itertools.islice(self._updates, limit))

    # ---- methods ------------------------------------------------------------------------

    def _delete_webhook(self, params: _Params) -> bool:
        self.webhook_deleted += 1
        if params.flag("drop_pending_updates"):
            self._updates.clear()
        return True

    def _get_webhook_info(self, params: _Params) -> JSON:
        return {
            "url": "",
            "has_custom_certificate": False,
            "pending_update_count": len(self._updates),
        }

    def _commands_key(self, params: _Params) -> tuple[str, str]:
        scope = params.get("scope") or {"type": "default"}
        key = "default" if scope == {"type": "default"} else json.dumps(scope, sort_keys=True)
        return key, str(params.get("language_code", ""))

    def _set_my_commands(self, params: _Params) -> bool:
        commands = params.get("commands")
        if not isinstance(commands, list) or len(commands) > 100:
            raise bad_request("commands must be an array of at most 100 BotCommand")
        for command in commands:
            if not isinstance(command, dict) or not COMMAND_NAME.fullmatch(
                str(command.get("command", ""))
            ):
                raise bad_request("BOT_COMMAND_INVALID")
            if not 1 <= len(str(command.get("description", ""))) <= 256:
                raise bad_request("BOT_COMMAND_DESCRIPTION_INVALID")
        self._commands[self._commands_key(params)] = [
            {"command": c["command"], "description": c["description"]} for c in commands
        ]
        return True

    def _get_my_commands(self, params: _Params) -> list[JSON]:
        return list(self._commands.get(self._commands_key(params), []))

    def _delete_my_commands(self, params: _Params) -> bool:
        self._commands.pop(self._commands_key(params), None)
        return True

    def _chat(self, params: _Params) -> _Chat:
        value = params.get("chat_id")
        if value is None or value == "":
            raise bad_request("chat_id is empty")
        if isinstance(value, str) and value.startswith("@"):
            for chat in self._chats.values():
                if chat.info.get("username") == value[1:]:
                    return chat
            raise bad_request("chat not found")
        try:
            chat_id = int(value)
        except (TypeError, ValueError):
            raise bad_request("chat not found") from None
        if chat_id not in self._chats:
            raise bad_request("chat not found")
        return self._chats[chat_id]

    def _formatted(
        self, params: _Params, text_name: str, limit: int, *, trim: bool = True
    ) -> tuple[str, list[JSON]]:
        """Visible text and entities of a text/caption parameter, or the API's error."""
        raw = params.string(text_name) or ""
        mode = params.string("parse_mode")
        try:
            text, entities = parse_entities(raw, mode)
        except EntityParseError as error:
            raise ApiError(400, str(error)) from None
        except ValueError:
            raise bad_request("unsupported parse_mode") from None
        if not mode:
            given = params.get("entities" if text_name == "text" else "caption_entities")
            entities = [dict(e) for e in given] if isinstance(given, list) else []
        if trim:
            text, entities = trimmed(text, entities)
        if utf16_len(text) > limit:
            raise bad_request(
                "message is too long" if text_name == "text" else "message caption is too long"
            )
        return text, entities

    def _message_text(self, params: _Params) -> tuple[str, list[JSON]]:
        text, entities = self._formatted(params, "text", MAX_MESSAGE_LENGTH)
        if not text:
            raise bad_request("message text is empty")
        return text, entities

    def _send(self, params: _Params, kind: str, text: str, entities: list[JSON]) -> ChatMessage:
        chat = self._chat(params)
        markup = inline_markup(params.get("reply_markup"))
        thread = self._thread(chat, params)
        reply_to = self._reply_target(chat, params)
        if thread is None and reply_to is not None:  # a reply goes to its message's topic
            thread = reply_to.get("message_thread_id")
        message = self._new_message(int(chat.info["id"]), self.bot_user, kind, text, entities)
        message.parse_mode = params.string("parse_mode")
        message.reply_markup = markup
        message.reply_to = reply_to
        message.thread = thread
        return message

    def _thread(self, chat: _Chat, params: _Params) -> int | None:
        """The topic a send names with ``message_thread_id``: it must exist (a deleted
        one, or one in a chat without topics, is "not found") and be open."""
        if params.get("message_thread_id") is None:
            return None
        thread = params.integer("message_thread_id")
        topic = chat.topics.get(thread)
        if topic is None or topic.deleted:
            raise ApiError(400, THREAD_NOT_FOUND)
        if topic.closed:
            raise ApiError(400, TOPIC_CLOSED)
        return thread

    def _reply_target(self, chat: _Chat, params: _Params) -> JSON | None:
        """The replied-to message (reply_parameters, or the older reply_to_message_id)."""
        reply = params.get("reply_parameters")
        if not isinstance(reply, dict):
            reply = {
                "message_id": params.get("reply_to_message_id"),
                "allow_sending_without_reply": params.flag("allow_sending_without_reply"),
            }
        message_id, lenient = reply.get("message_id"), reply.get("allow_sending_without_reply")
        if message_id is None:
            return None
        target = self._live_message(int(chat.info["id"]), int(message_id))
        if target is None:
            if lenient:
                return None
            raise bad_request("message to be replied not found")
        return {k: v for k, v in target.to_json().items() if k != "reply_to_message"}

    def _send_message(self, params: _Params) -> JSON:
        self._chat(params)
        text, entities = self._message_text(params)
        return self._send(params, "text", text, entities).to_json()

    def _send_media(self, method: str, params: _Params) -> JSON:
        kind, folder, extension, default_mime = MEDIA_METHODS[method]
        self._chat(params)
        caption, entities = self._formatted(params, "caption", MAX_CAPTION_LENGTH)
        stored = self._input_file(params, kind, folder, extension, default_mime)
        if kind == "photo":
            width, height = image_size(stored.data) if stored.data else (512, 512)
            media: Any = [stored.descriptor() | {"width": width, "height": height}]
        else:
            media = stored.descriptor() | {"mime_type": stored.mime_type or default_mime}
            if kind in ("document", "audio", "video", "animation") and stored.file_name:
                media["file_name"] = stored.file_name
            if kind in ("voice", "audio", "video", "animation"):
                media["duration"] = params.integer("duration", default=1)
        message = self._send(params, kind, caption, entities)
        message.media = media
        return message.to_json()

    def _input_file(
        self, params: _Params, kind: str, folder: str, extension: str, default_mime: str
    ) -> StoredFile:
        value: Any = params.files.get(kind) or params.get(kind)
        if isinstance(value, str) and value.startswith("attach://"):
            value = params.files.get(value.removeprefix("attach://"))
        if value is None or value == "":
            raise bad_request(f"there is no {kind} in the request")
        if isinstance(value, Upload):
            if kind == "photo" and image_size(value.data) is None:
                raise bad_request("IMAGE_PROCESS_FAILED")
            name = value.filename or extension
            mime = value.content_type or mimetypes.guess_type(name)[0] or default_mime
            stored = self.store_file(value.data, folder, name, mime_type=mime)
            stored.file_name = value.filename
            return stored
        value = str(value)
        if value in self.files:
            return self.files[value]
        if value.startswith(("http://", "https://")) and is_valid_url(value):
            stored = self.store_file(None, folder, extension, mime_type=default_mime)
            stored.file_name = value.rsplit("/", 1)[-1] or None
            return stored
        raise bad_request("wrong file identifier/HTTP URL specified")

    def _message_to_edit(self, params: _Params) -> ChatMessage:
        if params.get("inline_message_id") is not None:
            raise bad_request("MESSAGE_ID_INVALID")
        chat = self._chat(params)
        message = self._live_message(int(chat.info["id"]), params.integer("message_id"))
        if message is None:
            raise bad_request("message to edit not found")
        if not message.from_bot:
            raise bad_request("message can't be edited")
        return message

    def _apply_edit(
        self, message: ChatMessage, params: _Params, text: str, entities: list[JSON]
    ) -> JSON:
        markup = inline_markup(params.get("reply_markup"))
        if (text, entities, markup) == (message.text, message.entities, message.reply_markup):
            raise ApiError(400, NOT_MODIFIED)
        message.text, message.entities, message.reply_markup = text, entities, markup
        message.parse_mode = params.string("parse_mode")
        message.edit_date = int(time.time())
        return message.to_json()

    def _edit_message_text(self, params: _Params) -> JSON:
        self._chat(params)
        text, entities = self._message_text(params)
        message = self._message_to_edit(params)
        if message.kind != "text":
            raise bad_request("there is no text in the message to edit")
        return self._apply_edit(message, params, text, entities)

    def _edit_message_caption(self, params: _Params) -> JSON:
        self._chat(params)
        caption, entities = self._formatted(params, "caption", MAX_CAPTION_LENGTH)
        message = self._message_to_edit(params)
        if message.kind == "text":
            raise bad_request("there is no caption in the message to edit")
        return self._apply_edit(message, params, caption, entities)

    def _edit_message_reply_markup(self, params: _Params) -> JSON:
        message = self._message_to_edit(params)
        return self._apply_edit(message, params, message.text, message.entities)

    def _delete_message(self, params: _Params) -> bool:
        chat = self._chat(params)
        message = self._live_message(int(chat.info["id"]), params.integer("message_id"))
        if message is None:
            raise bad_request("message to delete not found")
        message.deleted = True
        return True

    def _delete_messages(self, params: _Params) -> bool:
        chat = self._chat(params)
        ids = params.get("message_ids")
        if not isinstance(ids, list) or not 1 <= len(ids) <= 100:
            raise bad_request("message_ids must be an array of 1-100 message identifiers")
        for message_id in ids:
            if message := self._live_message(int(chat.info["id"]), int(message_id)):
                message.deleted = True
        return True

    def _send_chat_action(self, params: _Params) -> bool:
        self._thread(self._chat(params), params)
        if params.string("action") not in CHAT_ACTIONS:
            raise bad_request("wrong parameter action in request")
        return True

    def _send_message_draft(self, params: _Params) -> bool:
        chat = self._chat(params)
        if chat.info["type"] != "private":
            raise bad_request("TEXTDRAFT_PEER_INVALID")
        draft_id = params.integer("draft_id")
        if draft_id == 0:
            raise bad_request("draft_id must be non-zero")
        thread = self._thread(chat, params)
        text, entities = self._formatted(params, "text", MAX_MESSAGE_LENGTH, trim=False)
        draft = Draft(draft_id, text, entities, params.string("parse_mode"), time.monotonic())
        draft.thread = thread
        chat.drafts.append(draft)
        return True

    def _forum(self, params: _Params) -> _Chat:
        """A chat that has topics: a private chat once the bot's topics are enabled."""
        chat = self._chat(params)
        if chat.info["type"] != "private" or not self.topics_enabled:
            raise ApiError(400, NOT_A_FORUM)
        return chat

    def _topic_name(self, params: _Params) -> str:
        name = params.string("name") or ""
        if not name.strip():
            raise bad_request("TOPIC_TITLE_EMPTY")
        if len(name) > MAX_TOPIC_NAME:
            raise bad_request("TOPIC_TITLE_TOO_LONG")  # the simulator's words (unrecorded)
        return name

    def _live_topic(self, chat: _Chat, params: _Params) -> Topic:
        topic = chat.topics.get(params.integer("message_thread_id"))
        if topic is None or topic.deleted:
            raise ApiError(400, THREAD_NOT_FOUND)
        return topic

    def _create_forum_topic(self, params: _Params) -> JSON:
        chat = self._forum(params)
        name = self._topic_name(params)
        message = self._new_message(int(chat.info["id"]), self.bot_user, "service", "", [])
        topic = self._open_topic(int(chat.info["id"]), message, name)
        if (color := params.get("icon_color")) is not None:
            topic.icon_color = int(color)
        return topic.to_json()

    def _edit_forum_topic(self, params: _Params) -> bool:
        topic = self._live_topic(self._forum(params), params)
        if params.get("name") is not None:
            topic.name = self._topic_name(params)
        return True

    def _close_forum_topic(self, params: _Params, *, closed: bool) -> bool:
        topic = self._live_topic(self._forum(params), params)
        if topic.closed == closed:
            raise bad_request("TOPIC_NOT_MODIFIED")
        topic.closed = closed
        return True

    def _delete_forum_topic(self, params: _Params) -> bool:
        chat = self._forum(params)
        self._drop_topic(chat, self._live_topic(chat, params).thread)
        return True

    def _get_file(self, params: _Params) -> JSON:
        stored = self.files.get(params.string("file_id") or "")
        if stored is None:
            raise bad_request("invalid file_id")
        if self.download_limit is not None and stored.file_size > self.download_limit:
            raise bad_request("file is too big")
        return stored.descriptor() | {"file_path": stored.file_path}

    def _answer_callback_query(self, params: _Params) -> bool:
        query_id = params.string("callback_query_id") or ""
        if self._callbacks.get(query_id) is not False:
            raise bad_request(
                "query is too old and response timeout expired or query ID is invalid"
            )
        self._callbacks[query_id] = True
        return True

    def _set_message_reaction(self, params: _Params) -> bool:
        chat = self._chat(params)
        if self._live_message(int(chat.info["id"]), params.integer("message_id")) is None:
            raise bad_request("message to react not found")
        return True


# --------------------------------------------------------------------------------------
# Helpers
# --------------------------------------------------------------------------------------


GENERATED_CHUNK = 64 * 1024


async def _stream_generated(request: web.Request, stored: StoredFile) -> web.StreamResponse:
    """`stored.generated` bytes, written a chunk at a time as the client reads them (never
    held whole), chunked without a Content-Length: only counting tells the size. A client
    that stops reading and hangs up ends it."""
    response = web.StreamResponse(
        headers={"Content-Type": stored.mime_type or "application/octet-stream"}
    )
    response.enable_chunked_encoding()
    await response.prepare(request)
    chunk = bytes(range(256)) * (GENERATED_CHUNK // 256)
    left = stored.generated
    with contextlib.suppress(ConnectionError):
        while left > 0:
            piece = chunk if left >= len(chunk) else chunk[:left]
            await response.write(piece)
            left -= len(piece)
        await response.write_eof()
    return response


def update_type(update: JSON) -> str:
    return next((key for key in update if key != "update_id"), "")


def coerce(name: str, value: str) -> Any:
    """A form/multipart value: JSON-decoded unless the parameter is a plain string."""
    if name in STRING_PARAMS:
        return value
    try:
        return json.loads(value)
    except ValueError:
        return value


async def read_params(request: web.Request) -> _Params:
    """Query string plus a JSON, form-urlencoded or multipart body."""
    values: JSON = {name: coerce(name, value) for name, value in request.query.items()}
    files: dict[str, Upload] = {}
    if request.content_type == "application/json":
        raw = await request.read()
        try:
            body = json.loads(raw) if raw.strip() else {}
        except ValueError:
            raise bad_request("can't parse JSON object") from None
        if not isinstance(body, dict):
            raise bad_request("can't parse JSON object")
        for name, value in body.items():
            if name in OBJECT_PARAMS and isinstance(value, str):
                value = coerce(name, value)
            values[name] = value
    elif request.content_type == "multipart/form-data":
        reader = await request.multipart()
        while (part := await reader.next()) is not None:
            if not isinstance(part, BodyPartReader) or part.name is None:
                continue
            if part.filename is not None:
                data = bytes(await part.read(decode=True))
                files[part.name] = Upload(data, part.filename, part.headers.get("Content-Type"))
            else:
                values[part.name] = coerce(part.name, await part.text())
    elif request.content_type == "application/x-www-form-urlencoded":
        form = await request.post()
        for name, value in form.items():
            if isinstance(value, str):
                values[name] = coerce(name, value)
    return _Params(values, files)


def trimmed(text: str, entities: list[JSON]) -> tuple[str, list[JSON]]:
    """Telegram strips surrounding whitespace from messages; entities follow the text."""
    stripped = text.strip(WHITESPACE)
    if stripped == text:
        return text, entities
    shift = len(text) - len(text.lstrip(WHITESPACE))  # ASCII: UTF-16 units == characters
    length = utf16_len(stripped)
    kept: list[JSON] = []
    for entity in entities:
        start = max(int(entity["offset"]) - shift, 0)
        end = min(int(entity["offset"]) + int(entity["length"]) - shift, length)
        if end > start:
            kept.append(entity | {"offset": start, "length": end - start})
    return stripped, kept


def inline_markup(markup: Any) -> JSON | None:
    """Validate `reply_markup`; return it if it is an inline keyboard (what messages keep)."""
    if markup is None:
        return None
    if not isinstance(markup, dict):
        raise bad_request("can't parse reply keyboard markup JSON object")
    if "inline_keyboard" not in markup:
        return None  # reply keyboards, keyboard removal and force reply are not kept
    rows = markup["inline_keyboard"]
    if not isinstance(rows, list) or not all(isinstance(row, list) for row in rows):
        raise bad_request('field "inline_keyboard" of the InlineKeyboardMarkup must be an Array')
    for row in rows:
        for button in row:
            check_button(button)
    return {"inline_keyboard": rows}


def check_button(button: Any) -> None:
    if not isinstance(button, dict) or not isinstance(button.get("text"), str):
        raise bad_request(
            'can\'t parse inline keyboard button: Field "text" must be of type String'
        )
    actions = set(button) - {"text", "style", "icon_custom_emoji_id"}
    if not actions:
        raise bad_request(
            "can't parse inline keyboard button: Text buttons are unallowed in the inline keyboard"
        )
    if "callback_data" in button:
        data = button["callback_data"]
        if not isinstance(data, str) or not 1 <= len(data.encode("utf-8")) <= MAX_CALLBACK_DATA:
            raise bad_request("BUTTON_DATA_INVALID")
    if "url" in button and not is_valid_url(str(button["url"])):
        raise bad_request(
            f"inline keyboard button URL '{button['url']}' is invalid: Wrong HTTP URL"
        )


def image_size(data: bytes) -> tuple[int, int] | None:
    """(width, height) of a PNG, GIF, BMP, JPEG or WebP image; None if it is not one."""
    if data.startswith(b"\x89PNG\r\n\x1a\n") and data[12:16] == b"IHDR" and len(data) >= 24:
        width, height = struct.unpack(">II", data[16:24])
        return int(width), int(height)
    if data[:6] in (b"GIF87a", b"GIF89a") and len(data) >= 10:
        width, height = struct.unpack("<HH", data[6:10])
        return int(width), int(height)
    if data.startswith(b"BM") and len(data) >= 26:
        width, height = struct.unpack("<ii", data[18:26])
        return abs(int(width)), abs(int(height))
    if data.startswith(b"RIFF") and data[8:12] == b"WEBP":
        return 512, 512
    if data.startswith(b"\xff\xd8"):
        return jpeg_size(data) or (512, 512)
    return None


def jpeg_size(data: bytes) -> tuple[int, int] | None:
    pos = 2
    while pos + 9 <= len(data) and data[pos] == 0xFF:
        marker = data[pos + 1]
        (length,) = struct.unpack(">H", data[pos + 2 : pos + 4])
        if 0xC0 <= marker <= 0xCF and marker not in (0xC4, 0xC8, 0xCC):
            height, width = struct.unpack(">HH", data[pos + 5 : pos + 9])
            return int(width), int(height)
        pos += 2 + length
    return None


async def say(base: str, owner: int, text: str, *, settle: float = 2.0, limit: float = 60.0) -> int:
    """The owner writes `text` to the bot of the simulator running at `base`; prints the
    bot's answers once they stop changing for `settle` seconds (a reply is first a
    placeholder or a draft, then edited, then final): a placeholder alone is no answer
    yet, however long the model takes. 1 when none came within `limit`."""
    import aiohttp  # the client side only; the server above is aiohttp.web

    from kernel.core.i18n import CATALOG

    waiting = {words["tg.placeholder"] for words in CATALOG.values()}

    async with aiohttp.ClientSession(base) as http:
        async with http.post("/_sim/inject", json={"text": text, "user_id": owner}) as sent:
            sent.raise_for_status()
            asked = (await sent.json())["message"]["message_id"]
        loop = asyncio.get_running_loop()
        started, seen, since = loop.time(), None, loop.time()
        while loop.time() - started < limit:
            async with http.get(f"/_sim/chat/{owner}") as got:
                chat = await got.json()
            answers = [
                m.get("text") or m.get("caption") or f"[{next(iter(set(m) - _SHELL), '?')}]"
                for m in chat
                if m["message_id"] > asked and m.get("from", {}).get("is_bot")
            ]
            if answers != seen:
                seen, since = answers, loop.time()
            elif set(answers) - waiting and loop.time() - since >= settle:
                for answer in answers:
                    print(answer, flush=True)
                return 0
            await asyncio.sleep(0.25)
    print(f"no answer within {limit:.0f} s: is Kernel running against {base}?", flush=True)
    return 1


# Fields of a message that are not its content (for naming a reply that has no text).
_SHELL = {"message_id", "from", "chat", "date", "edit_date", "reply_to_message", "reply_markup"}


def main() -> None:
    parser = argparse.ArgumentParser(
        description="Telegram Bot API simulator; with --say, a client of a running one"
    )
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0, help="0 = any free port")
    parser.add_argument("--token", default=DEFAULT_TOKEN)
    parser.add_argument("--username", default="kernel_test_bot")
    parser.add_argument("--owner", type=int, default=OWNER)
    parser.add_argument(
        "--say", metavar="TEXT", help="write TEXT as the owner and print the bot's answer"
    )
    args = parser.parse_args()
    if args.say is not None:
        raise SystemExit(asyncio.run(say(f"http://{args.host}:{args.port}", args.owner, args.say)))

    async def serve() -> None:
        sim = TelegramSim(
            args.token,
            bot_username=args.username,
            owner_id=args.owner,
            host=args.host,
            port=args.port,
        )
        async with sim:
            print(sim.api_base, flush=True)
            await asyncio.Event().wait()

    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(serve())


if __name__ == "__main__":
    main()
