"""QQ events in: ``POST /channels/qq/inbound`` (seed 000 "QQ 入站契约").

Every request is signed by the platform: ``X-Signature-Ed25519`` (hex) over
``X-Signature-Timestamp + body``, with the Ed25519 key whose 32-byte seed is the bot
secret repeated to 32 bytes. A missing or wrong signature is refused (401), and so is a
signed timestamp more than ``channels.qq.callback_max_age`` seconds from now (a replay).

- ``op 13`` (callback address validation): answered with ``{"plain_token",
  "signature"}``, the signature over ``event_ts + plain_token``. The platform may send it
  unsigned; its fields are then held to a timestamp of digits and a token of
  ``[A-Za-z0-9_-]`` (no JSON can be both), so answering it cannot sign a forged event.
- ``op 0`` (dispatch): ``C2C_MESSAGE_CREATE``, ``GROUP_AT_MESSAGE_CREATE``,
  ``AT_MESSAGE_CREATE``, ``DIRECT_MESSAGE_CREATE``, or a payload with ``message_type``
  (c2c/private, group, guild/channel, dm/direct) as some bridges send. It is
  acknowledged at once (``{"op": 12, "d": 0}``: the platform wants an answer within
  seconds) and the turn runs in a tracked task; an event id seen before is acknowledged
  and dropped. Seen ids are kept in the database (``inbound_events``), checked before a
  turn starts, so a signed event replayed after a restart runs no second turn; they are
  forgotten once no signature check could pass them any more (twice
  ``channels.qq.callback_max_age``, as a timestamp may be that far either side of now,
  plus a margin). The text goes through the agent as channel ``qq`` in a session per
  conversation, and the reply goes back to the event's own target with its ``msg_id``.
  Only senders listed in ``channels.qq.allowed_users`` are answered: an empty list
  answers nobody (QQ turns may use every tool), and each refusal shows in the state.
  At most ``channels.qq.max_concurrent_turns`` messages are answered at once (one more
  is declined with a short reply), and a turn is stopped after
  ``channels.qq.turn_timeout`` seconds, the sender told so.
"""

from __future__ import annotations

import asyncio
import logging
import re
from collections.abc import Mapping
from datetime import timedelta
from typing import Any

from kernel.agent.agent import Agent, SessionKey, UserInput
from kernel.channels.qq import QQChannel
from kernel.channels.qq_message import InboundMessage
from kernel.core import safejson
from kernel.core.delivery import ChannelRegistry, Target, follow_turn
from kernel.core.errors import ChannelError, KernelError
from kernel.core.events import Completed
from kernel.core.i18n import t
from kernel.core.tasks import TaskSet
from kernel.store.channels import ChannelStore

log = logging.getLogger(__name__)

ACK = {"op": 12, "d": 0}
SEEN_MARGIN = timedelta(minutes=5)  # seen ids outlive the signature window by this much
_SEEN_LONGEST = 10 * 365 * 86400.0  # a window set longer keeps them this long (no overflow)
_TOKEN = re.compile(r"^[A-Za-z0-9_-]{1,128}$")
_DIGITS = re.compile(r"^[0-9]{1,20}$")
_MENTION = re.compile(r"<@!?[0-9A-Za-z]+>")

EVENT_KINDS = {
    "C2C_MESSAGE_CREATE": "c2c",
    "GROUP_AT_MESSAGE_CREATE": "group",
    "AT_MESSAGE_CREATE": "guild",
    "DIRECT_MESSAGE_CREATE": "dm",
}
_ALIASES = {
    "c2c": "c2c",
    "private": "c2c",
    "friend": "c2c",
    "group": "group",
    "group_at": "group",
    "guild": "guild",
    "channel": "guild",
    "guild_channel": "guild",
    "dm": "dm",
    "direct": "dm",
    "direct_message": "dm",
}


class InboundError(KernelError):
    """A callback refused: ``status`` and ``code`` for the HTTP answer."""

    def __init__(self, status: int, code: str, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.code = code


def _signing_key(secret: str) -> Any:
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

    raw = secret.encode()
    seed = (raw * (32 // len(raw) + 1))[:32]
    return Ed25519PrivateKey.from_private_bytes(seed)


def sign(secret: str, message: bytes) -> str:
    """Hex Ed25519 signature with the key derived from the bot secret (QQ's algorithm)."""
    return str(_signing_key(secret).sign(message).hex())


def verify(secret: str, message: bytes, signature_hex: str) -> bool:
    from cryptography.exceptions import InvalidSignature

    try:
        signature = bytes.fromhex(signature_hex)
    except ValueError:
        return False
    if len(signature) != 64:
        return False
    try:
        _signing_key(secret).public_key().verify(signature, message)
    except InvalidSignature:
        return False
    return True


def _text(value: Any) -> str:
    return value.strip() if isinstance(value, str) else str(value) if isinstance(value, int) else ""


def _first(*values: Any) -> str:
    return next((v for v in (_text(x) for x in values) if v), "")


def parse_event(payload: dict[str, Any]) -> InboundMessage | None:
    """The message in a callback payload; None for events that are not messages Kernel
    answers. ValueError when a message event lacks where it came from."""
    data: dict[str, Any] = payload
    for key in ("d", "data"):
        nested = payload.get(key)
        if isinstance(nested, dict):
            data = nested
            break
    event_type = _first(
        payload.get("t"), payload.get("event"), payload.get("event_type"), payload.get("type")
    ).upper()
    kind = EVENT_KINDS.get(event_type) or _ALIASES.get(
        _first(data.get("message_type"), data.get("target_type")).lower()
    )
    if kind is None:
        return None
    author: dict[str, Any] = data["author"] if isinstance(data.get("author"), dict) else {}
    sender: dict[str, Any] = data["sender"] if isinstance(data.get("sender"), dict) else {}
    if kind == "c2c":
        target = _first(
            author.get("user_openid"),
            author.get("id"),
            sender.get("user_id"),
            data.get("user_id"),
            data.get("target_id"),
        )
        user = target
    elif kind == "group":
        target = _first(data.get("group_openid"), data.get("group_id"), data.get("target_id"))
        user = _first(
            author.get("member_openid"),
            author.get("id"),
            sender.get("user_id"),
            data.get("user_id"),
        )
    elif kind == "guild":
        target = _first(data.get("channel_id"), data.get("target_id"))
        user = _first(author.get("id"), sender.get("user_id"), data.get("user_id"))
    else:
        target = _first(data.get("guild_id"), data.get("target_id"))
        user = _first(author.get("id"), sender.get("user_id"), data.get("user_id"))
    if not target:
        raise ValueError(t("qq.event_no_target", kind=kind))
    raw = data.get("content")
    if not isinstance(raw, str):
        raw = data.get("message") if isinstance(data.get("message"), str) else data.get("text")
    text = _MENTION.sub(" ", raw if isinstance(raw, str) else "").strip()
    msg_id = _first(data.get("id"), data.get("message_id"), data.get("msg_id"))
    return InboundMessage(event_type or kind, kind, target, user or target, msg_id, text)


class QQInbound:
    """Checks and answers callbacks; runs each message's turn in a tracked task."""

    def __init__(
        self, channel: QQChannel, agent: Agent, registry: ChannelRegistry, records: ChannelStore
    ) -> None:
        self.channel = channel
        self.agent = agent
        self.registry = registry
        self.records = records
        self._tasks = TaskSet("qq inbound")
        self._turns: set[asyncio.Task[None]] = set()  # of _tasks: messages being answered
        channel.turns_running = self.turns_running

    async def handle(self, body: bytes, headers: Mapping[str, str]) -> dict[str, Any]:
        """The JSON answer to one callback, or InboundError."""
        cfg = self.channel.cfg
        reason = self.channel.unavailable()
        if reason:
            raise InboundError(400, ChannelError.DISABLED, reason)
        try:
            payload = safejson.loads(body)  # too deep, huge numbers, NaN: refused too
        except safejson.LoneSurrogateError as exc:  # its words mended, a name refused
            raise InboundError(400, "invalid_request", str(exc)) from None
        except ValueError:
            raise InboundError(400, "invalid_request", t("qq.bad_body")) from None
        if not isinstance(payload, dict):
            raise InboundError(400, "invalid_request", t("qq.bad_body"))
        signature = headers.get("X-Signature-Ed25519", "")
        stamp = headers.get("X-Signature-Timestamp", "")
        signed = bool(signature or stamp)
        if signed or payload.get("op") != 13:
            if not (_DIGITS.match(stamp) and signature):
                raise InboundError(401, "invalid_signature", t("qq.unsigned"))
            if not await asyncio.to_thread(
                verify, cfg.client_secret, stamp.encode() + body, signature
            ):
                log.warning("qq callback with a bad signature refused")
                raise InboundError(401, "invalid_signature", t("qq.bad_signature"))
            age = self.channel.clock.now().timestamp() - int(stamp)
            if abs(age) > cfg.callback_max_age:
                log.warning("qq callback signed %.0f s from now refused (a replay?)", age)
                limit = f"{cfg.callback_max_age:g}"
                raise InboundError(
                    401, "stale_signature", t("qq.stale_signature", age=f"{age:.0f}", max=limit)
                )
        op = payload.get("op", 0)
        if op == 13:
            return await self._validate(payload)
        if op != 0:
            raise InboundError(400, "invalid_request", t("qq.bad_op", op=str(op)[:16]))
        await self._dispatch(payload)
        return ACK

    async def _validate(self, payload: dict[str, Any]) -> dict[str, Any]:
        data = payload.get("d")
        data = data if isinstance(data, dict) else {}
        token = data.get("plain_token")
        stamp = data.get("event_ts")
        stamp = str(stamp) if isinstance(stamp, int) and not isinstance(stamp, bool) else stamp
        if not (isinstance(token, str) and _TOKEN.match(token)):
            raise InboundError(400, "invalid_request", t("qq.bad_validation"))
        if not (isinstance(stamp, str) and _DIGITS.match(stamp)):
            raise InboundError(400, "invalid_request", t("qq.bad_validation"))
        secret = self.channel.cfg.client_secret
        signature = await asyncio.to_thread(sign, secret, (stamp + token).encode())
        log.info("qq callback address validated")
        return {"plain_token": token, "signature": signature}

    async def _dispatch(self, payload: dict[str, Any]) -> None:
        channel = self.channel
        try:
            message = parse_event(payload)
        except ValueError as exc:
            raise InboundError(400, "invalid_request", str(exc)) from None
        if message is None:
            channel.ignored += 1
            return
        event_id = _first(payload.get("id")) or message.msg_id
        if event_id and not await self._first_time(event_id[:256]):
            channel.duplicates += 1
            log.info("qq event repeated; ignored")
            return
        channel.events += 1
        channel.last_inbound = {
            "at": channel.clock.now().isoformat(timespec="seconds"),
            "event_type": message.event_type,
            "target_type": message.kind,
            "target_id": message.target_id,
            "user_id": message.user_id,
        }
        allowed = channel.cfg.allowed_users
        if message.user_id not in allowed:
            # QQ turns may use every tool (the shell through delegate_to_cli, memory,
            # cron): nobody is answered until the owner lists who may talk to the bot.
            reason = "qq.refused_nobody" if not allowed else "qq.refused_sender"
            channel.note_refusal(message.user_id, message.kind, t(reason))
            if allowed:
                log.info("qq message from a sender not in channels.qq.allowed_users refused")
            else:
                log.warning(
                    "qq message refused: channels.qq.allowed_users is empty, so nobody is "
                    "answered; add the sender's id shown at GET /channels/qq/state"
                )
            return
        limit = channel.cfg.max_concurrent_turns
        if len(self._turns) >= limit:
            channel.declined += 1
            log.warning(
                "qq message declined: %d turns running (channels.qq.max_concurrent_turns)", limit
            )
            self._tasks.spawn(self._reply(message, t("qq.busy")), "qq-busy")
            return
        task = self._tasks.spawn(self._answer(message), f"qq-{message.kind}")
        self._turns.add(task)
        task.add_done_callback(self._turns.discard)

    async def _first_time(self, event_id: str) -> bool:
        now = self.channel.clock.now()
        seconds = min(2 * self.channel.cfg.callback_max_age, _SEEN_LONGEST)
        window = timedelta(seconds=seconds) + SEEN_MARGIN
        return await self.records.claim_event("qq", event_id, now, forget_before=now - window)

    def turns_running(self) -> int:
        return len(self._turns)

    async def _answer(self, message: InboundMessage) -> None:
        seconds = self.channel.cfg.turn_timeout
        try:
            if not message.text:
                text = t("qq.text_only")
            else:
                async with asyncio.timeout(seconds):
                    text = await self._turn(message)
        except TimeoutError:
            # The turn is cancelled (its history kept); the sender hears why.
            log.warning("qq turn stopped after %.0f s (channels.qq.turn_timeout)", seconds)
            self.channel.note_error("turn", t("qq.turn_timeout", seconds=f"{seconds:g}"))
            text = t("qq.turn_timeout", seconds=f"{seconds:g}")
        except KernelError as exc:
            self.channel.note_error("turn", type(exc).__name__)
            return
        except Exception as exc:
            log.exception("answering a qq message failed")
            self.channel.note_error("turn", type(exc).__name__)
            return
        if text:
            await self._reply(message, text)

    async def _reply(self, message: InboundMessage, text: str) -> None:
        """A passive reply at the message's own target; a failure shows in the state."""
        target = Target(
            user_id=message.target_id,
            session_id=message.session_id,
            kind=message.kind,
            reply_to=message.msg_id,
            origin="qq",
        )
        timeout = self.agent.config.cron.delivery_timeout
        try:
            await self.registry.send("qq", target, text, timeout=timeout)
        except ChannelError as exc:
            self.channel.note_error("reply", str(exc))

    async def _turn(self, message: InboundMessage) -> str:
        agent = self.agent
        key = SessionKey("qq", message.user_id, message.session_id)
        opened = await agent.sessions.open_session(key)
        assert opened is not None
        await agent.sessions.wait_idle(opened.conversation, agent.config.gateway.queue_timeout)
        asker = self.registry.asker
        cfg = agent.config.channels.qq
        user_input = UserInput(
            message.text,
            channel="qq",
            user_id=message.user_id,
            interactive=asker is not None,
            # Not the owner: their turn sees none of the owner's memories and tools.
            guest=message.user_id not in cfg.owner_users,
            guest_tools=tuple(cfg.guest_tools),
        )
        turn = agent.start_turn(opened.conversation, user_input)
        final = await follow_turn(turn, asker, t("qq.ask_label"))
        if isinstance(final, Completed):
            return "" if final.cancelled else final.reply
        return t("qq.turn_failed", message=final.message)

    async def stop(self) -> None:
        await self._tasks.close(self.agent.config.general.shutdown_timeout)
