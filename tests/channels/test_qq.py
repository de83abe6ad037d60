"""The QQ channel: callbacks signed like the open platform signs them, each inbound
event type answered at its own target with its msg_id through the QQ API simulator,
the access token cached and renewed, repeated events processed once."""

from __future__ import annotations

import io
import json
import logging
from collections.abc import AsyncIterator
from datetime import datetime
from typing import Any
from zoneinfo import ZoneInfo

import pytest
from aiohttp import web

from kernel.core.i18n import t
from kernel.spend import money
from tests.clock import ManualClock
from tests.conftest import free_port
from tests.gateway.conftest import API_KEY, Sidecar, SidecarFactory
from tests.sim.anthropic_sim import AnthropicSim
from tests.sim.context import owner_texts, recalled_of, system_of, turn_message
from tests.sim.qq_sim import APP_ID, SECRET, QQSim, event, signed_headers
from tests.sim.script import Reply, Text
from tests.waiting import wait_until

NOW = datetime(2025, 6, 1, 10, 0, tzinfo=ZoneInfo("Asia/Shanghai"))
# The senders these tests answer: an empty channels.qq.allowed_users answers nobody.
# A first turn waits for the SDK's import in a thread: seconds on a loaded machine.
SLOW = 60.0
SENDERS = ["user-1", "u-openid", "member-1", "user-9", "u-5", "u1", "m1"]


def qq_config(sim: QQSim, **extra: Any) -> str:
    settings = {
        "enabled": True,
        "app_id": APP_ID,
        "client_secret": SECRET,
        "api_base": sim.base_url,
        "token_url": sim.token_url,
        "bot_prefix": "[Kernel] ",
        "allowed_users": SENDERS,
        **extra,
    }
    lines = ["[channels.qq]"]
    lines += [f"{k} = {json.dumps(v)}" for k, v in settings.items()]
    return "\n" + "\n".join(lines) + "\n"


@pytest.fixture
async def qq() -> AsyncIterator[QQSim]:
    async with QQSim(token_ttl=120) as sim:
        yield sim


@pytest.fixture
async def echo() -> AsyncIterator[AnthropicSim]:
    async with AnthropicSim(fallback="echo") as sim:
        yield sim


async def post(
    sc: Sidecar, payload: dict[str, Any], headers: dict[str, str] | None = None
) -> tuple[int, Any]:
    raw = json.dumps(payload).encode()
    # Signed now, as the Kernel's clock sees it (a test's clock may be set to any day).
    stamp = str(int(sc.kernel.clock.now().timestamp()))
    headers = headers or signed_headers(raw, timestamp=stamp)
    status, data, _ = await sc.call("POST", "/channels/qq/inbound", data=raw, headers=headers)
    return status, data


async def test_callback_validation_uses_the_platform_algorithm(
    sidecar: SidecarFactory, echo: AnthropicSim, qq: QQSim
) -> None:
    # The example from the QQ bot documentation: this secret, this token and timestamp,
    # this signature.
    secret = "DG5g3B4j9X2KOErG"
    sc = await sidecar(echo, extra=qq_config(qq, app_id="11111111", client_secret=secret))
    body = {"d": {"plain_token": "Arq0D5A61EgUu4OxUvOp", "event_ts": "1725442341"}, "op": 13}
    raw = json.dumps(body).encode()
    status, data, _ = await sc.call(
        "POST", "/channels/qq/inbound", data=raw, headers={"User-Agent": "QQBot-Callback"}
    )
    assert status == 200
    assert data == {
        "plain_token": "Arq0D5A61EgUu4OxUvOp",
        "signature": "87befc99c42c651b3aac0278e71ada338433ae26fcb24307bdc5ad38c1adc2d0"
        "1bcfcadc0842edac85e85205028a1132afe09280305f13aa6909ffc2d652c706",
    }
    # Signed the platform's way it is accepted too; signed with another key it is not.
    status, _ = await post(sc, body, signed_headers(raw, secret))
    assert status == 200
    status, data = await post(sc, body, signed_headers(raw, "another-secret"))
    assert status == 401 and data["error"]["code"] == "invalid_signature"
    # Unsigned validation cannot be used to sign an event body.
    forged = {"d": {"plain_token": '{"op":0}', "event_ts": "1725442341"}, "op": 13}
    status, data, _ = await sc.call(
        "POST", "/channels/qq/inbound", data=json.dumps(forged).encode(), headers={}
    )
    assert status == 400


async def test_signatures_are_checked_on_every_event(
    sidecar: SidecarFactory, echo: AnthropicSim, qq: QQSim
) -> None:
    sc = await sidecar(echo, extra=qq_config(qq))
    payload = event("c2c", "hi", where="user-1", who="user-1")
    raw = json.dumps(payload).encode()
    good = signed_headers(raw)
    bad = {
        **good,
        "X-Signature-Ed25519": signed_headers(raw, "not-the-secret")["X-Signature-Ed25519"],
    }
    tampered = json.dumps({**payload, "s": 999}).encode()
    for headers, body in (
        (bad, raw),
        ({"Content-Type": "application/json"}, raw),
        ({**good, "X-Signature-Ed25519": "zz"}, raw),
        (good, tampered),
    ):
        status, data, _ = await sc.call("POST", "/channels/qq/inbound", data=body, headers=headers)
        assert status == 401 and data["error"]["code"] == "invalid_signature"
    assert echo.requests == [] and qq.messages == []
    status, data, _ = await sc.call("POST", "/channels/qq/inbound", data=raw, headers=good)
    assert (status, data) == (200, {"op": 12, "d": 0})
    await qq.wait_until(lambda: len(qq.messages) == 1)


SHAPES = {
    "c2c": (
        event("c2c", "你好", where="u-openid", who="u-openid", msg_id="m-c2c"),
        "c2c",
        "u-openid",
    ),
    "group": (
        event("group", " 在吗", where="g-openid", who="member-1", msg_id="m-grp"),
        "group",
        "g-openid",
    ),
    "guild": (
        event("guild", "<@!9988> 早上好", where="chan-7", who="user-9", msg_id="m-gld"),
        "guild",
        "chan-7",
    ),
    "dm": (
        event("dm", "私信", where="dm-guild-3", who="user-9", msg_id="m-dm"),
        "dm",
        "dm-guild-3",
    ),
    "message_type": (
        {
            "message_type": "group",
            "group_id": "g-2",
            "user_id": "u-5",
            "message": "桥接",
            "message_id": "m-mt",
        },
        "group",
        "g-2",
    ),
}


@pytest.mark.parametrize("shape", list(SHAPES))
async def test_each_event_type_is_answered_at_its_own_target(
    sidecar: SidecarFactory, echo: AnthropicSim, qq: QQSim, shape: str
) -> None:
    sc = await sidecar(echo, extra=qq_config(qq))
    payload, kind, target = SHAPES[shape]
    status, data = await post(sc, payload)
    assert (status, data) == (200, {"op": 12, "d": 0})
    await qq.wait_until(lambda: len(qq.messages) == 1)
    [sent] = qq.messages
    text = {"c2c": "你好", "group": "在吗", "guild": "早上好", "dm": "私信", "message_type": "桥接"}
    assert (sent.kind, sent.target) == (kind, target)
    assert sent.body["content"] == f"[Kernel] echo: {text[shape]}"  # mention stripped
    msg_id = payload["d"]["id"] if "d" in payload else payload["message_id"]
    assert sent.body["msg_id"] == msg_id  # a passive reply to that message
    if kind in ("c2c", "group"):
        assert (sent.body["msg_type"], sent.body["msg_seq"]) == (0, 1)
    assert owner_texts(turn_message(echo.requests[0])) == [text[shape]]
    _, chats, _ = await sc.call("GET", "/chats?channel=qq")
    [chat] = chats["chats"]
    assert chat["session_id"].startswith(f"{kind}:{target}")


async def test_the_token_is_cached_then_renewed_when_it_expires(
    sidecar: SidecarFactory, echo: AnthropicSim, qq: QQSim
) -> None:
    clock = ManualClock(NOW)
    sc = await sidecar(echo, extra=qq_config(qq), clock=clock)
    await post(sc, event("c2c", "one", where="u1", who="u1"))
    await post(sc, event("c2c", "two", where="u1", who="u1"))
    await qq.wait_until(lambda: len(qq.messages) == 2)
    assert len(qq.token_requests) == 1  # cached
    assert qq.token_requests[0] == {"appId": APP_ID, "clientSecret": SECRET}
    _, state, _ = await sc.call("GET", "/channels/qq/state")
    assert state["token"]["state"] == "valid"
    assert state["token"]["expires_at"] == "2025-06-01T10:02:00+08:00"
    assert SECRET not in json.dumps(state) and qq.messages[0].token not in json.dumps(state)

    clock.advance(120)  # expired (the platform said 120 s)
    _, state, _ = await sc.call("GET", "/channels/qq/state")
    assert state["token"]["state"] == "expired"
    await post(sc, event("c2c", "three", where="u1", who="u1"))
    await qq.wait_until(lambda: len(qq.messages) == 3)
    assert len(qq.token_requests) == 2
    assert qq.messages[2].token != qq.messages[0].token

    qq.revoke_tokens()  # the platform dropped it early: a 401, a new token, one retry
    await post(sc, event("c2c", "four", where="u1", who="u1"))
    await qq.wait_until(lambda: len(qq.messages) == 4)
    assert len(qq.token_requests) == 3 and qq.rejected == [(401, "/v2/users/u1/messages")]


async def test_a_repeated_event_is_processed_once(
    sidecar: SidecarFactory, echo: AnthropicSim, qq: QQSim
) -> None:
    sc = await sidecar(echo, extra=qq_config(qq))
    payload = event("group", "once only", where="g1", who="m1")
    assert (await post(sc, payload))[0] == 200
    assert (await post(sc, payload))[0] == 200  # the platform retried: acknowledged again
    await qq.wait_until(lambda: len(qq.messages) == 1)
    await wait_until(lambda: not sc.kernel.qq_inbound._tasks)
    assert len(echo.requests) == 1 and len(qq.messages) == 1
    _, state, _ = await sc.call("GET", "/channels/qq/state")
    assert (state["events"], state["duplicates_ignored"]) == (1, 1)
    assert state["last_inbound"]["event_type"] == "GROUP_AT_MESSAGE_CREATE"
    assert state["last_reply"]["msg_id"] == payload["d"]["id"]


async def test_failures_and_strangers_show_in_the_state(
    sidecar: SidecarFactory, echo: AnthropicSim, qq: QQSim
) -> None:
    sc = await sidecar(echo, extra=qq_config(qq, allowed_users=["friend"]))
    await post(sc, event("c2c", "hi", where="stranger", who="stranger"))
    qq.fail_next(500)
    await post(sc, event("c2c", "hi", where="friend", who="friend"))
    await wait_until(lambda: sc.kernel.qq.last_error is not None)
    _, state, _ = await sc.call("GET", "/channels/qq/state")
    assert state["refused"] == 1 and len(echo.requests) == 1
    assert state["last_error"]["stage"] in ("send", "reply")
    assert "HTTP 500" in state["last_error"]["error"]
    assert qq.messages == []


async def test_an_empty_allowed_users_list_answers_nobody(
    sidecar: SidecarFactory, echo: AnthropicSim, qq: QQSim, caplog: pytest.LogCaptureFixture
) -> None:
    sc = await sidecar(echo, extra=qq_config(qq, allowed_users=[]))
    assert any("allowed_users is empty" in w for w in sc.kernel.config.warnings)
    caplog.set_level(logging.WARNING, logger="kernel.channels.qq_inbound")
    for kind in ("c2c", "group"):
        status, data = await post(sc, event(kind, "rm -rf ~", where="g-9", who="user-1"))
        assert (status, data) == (200, {"op": 12, "d": 0})  # acknowledged, not answered
    _, state, _ = await sc.call("GET", "/channels/qq/state")
    assert (state["events"], state["refused"], state["allowed_users"]) == (2, 2, 0)
    refused = state["last_refused"]
    assert (refused["user_id"], refused["target_type"]) == ("user-1", "group")
    assert "channels.qq.allowed_users is empty" in refused["reason"]
    await wait_until(lambda: not sc.kernel.qq_inbound._tasks)
    assert echo.requests == [] and qq.messages == []
    logged = [r.getMessage() for r in caplog.records]
    assert any("allowed_users is empty" in line for line in logged)
    assert not any("rm -rf" in line for line in logged)


async def test_a_disabled_channel_refuses_callbacks(
    sidecar: SidecarFactory, echo: AnthropicSim, qq: QQSim
) -> None:
    sc = await sidecar(echo, extra=qq_config(qq, enabled=False))
    status, data = await post(sc, event("c2c", "hi", where="u", who="u"))
    assert status == 400 and data["error"]["code"] == "channel_disabled"


async def test_a_callback_signed_too_long_ago_is_refused(
    sidecar: SidecarFactory, echo: AnthropicSim, qq: QQSim
) -> None:
    clock = ManualClock(NOW)
    sc = await sidecar(echo, extra=qq_config(qq), clock=clock)
    now = int(NOW.timestamp())
    payload = event("c2c", "replayed", where="u1", who="u1")
    raw = json.dumps(payload).encode()
    for offset in (-301, 301):  # correctly signed, but 5 minutes and a second away
        status, data = await post(sc, payload, signed_headers(raw, timestamp=str(now + offset)))
        assert status == 401 and data["error"]["code"] == "stale_signature"
        assert "channels.qq.callback_max_age" in data["error"]["message"]
    assert echo.requests == []
    status, _ = await post(sc, payload, signed_headers(raw, timestamp=str(now - 299)))
    assert status == 200
    await qq.wait_until(lambda: len(qq.messages) == 1)


async def test_turns_beyond_the_cap_are_declined_politely(
    sidecar: SidecarFactory, echo: AnthropicSim, qq: QQSim
) -> None:
    sc = await sidecar(echo, extra=qq_config(qq, max_concurrent_turns=1))
    echo.enqueue(Reply(Text("thinking hard", chunks=["thinking ", "hard"]), stall_after=1))
    assert (await post(sc, event("c2c", "a long one", where="u1", who="u1")))[0] == 200
    await echo.wait_for_requests(1)  # that turn runs (and stays)
    second = event("group", "me too", where="g1", who="m1", msg_id="m-second")
    assert (await post(sc, second)) == (200, {"op": 12, "d": 0})  # acknowledged
    await qq.wait_until(lambda: len(qq.messages) == 1)
    [busy] = qq.messages
    assert (busy.kind, busy.target, busy.body["msg_id"]) == ("group", "g1", "m-second")
    assert "busy" in busy.body["content"] and len(echo.requests) == 1
    _, state, _ = await sc.call("GET", "/channels/qq/state")
    assert (state["declined_busy"], state["turns_running"]) == (1, 1)


async def test_a_turn_that_takes_too_long_is_stopped_and_the_sender_told(
    sidecar: SidecarFactory, echo: AnthropicSim, qq: QQSim
) -> None:
    sc = await sidecar(echo, extra=qq_config(qq, turn_timeout=0.3))
    echo.enqueue(Reply(Text("never done", chunks=["never ", "done"]), stall_after=1))
    await post(sc, event("c2c", "take forever", where="u1", who="u1", msg_id="m-slow"))
    await qq.wait_until(lambda: len(qq.messages) == 1)
    [told] = qq.messages
    assert told.body["msg_id"] == "m-slow" and "channels.qq.turn_timeout" in told.body["content"]

    async def idle() -> bool:  # the reply goes out before the turn's count drops
        return (await sc.call("GET", "/channels/qq/state"))[1]["turns_running"] == 0

    await wait_until(idle, what="the stopped turn counted out")
    _, state, _ = await sc.call("GET", "/channels/qq/state")
    assert state["last_error"]["stage"] == "turn" and state["turns_running"] == 0
    # The session is free again: the next message is answered (with a timeout a loaded
    # machine cannot miss: the 0.3 s above bounded the stalled turn only).
    qq_cfg = sc.kernel.config.channels.qq
    sc.kernel.config.channels.qq = qq_cfg.model_copy(update={"turn_timeout": 60.0})
    await post(sc, event("c2c", "short one", where="u1", who="u1"))
    await qq.wait_until(lambda: len(qq.messages) == 2)
    assert "echo:" in qq.messages[1].body["content"]


async def test_a_cron_job_delivers_to_qq_as_a_proactive_message(
    sidecar: SidecarFactory, echo: AnthropicSim, qq: QQSim
) -> None:
    extra = qq_config(qq, target_type="group", target_id="g-default")
    sc = await sidecar(echo, extra=extra, clock=ManualClock(NOW))
    jobs = [
        {"channel": "qq", "target": {"target_type": "c2c", "user_id": "u-openid"}},
        {"channel": "qq"},  # no target: channels.qq.target_type / target_id
    ]
    for n, dispatch in enumerate(jobs):
        body = {"name": f"q{n}", "schedule": "every 1d", "text": f"news {n}", "dispatch": dispatch}
        status, job, _ = await sc.call("POST", "/cron/jobs", body)
        assert status == 201, job
        await sc.call("POST", f"/cron/jobs/{job['id']}/run")
        await qq.wait_until(lambda n=n: len(qq.messages) == n + 1)
    first, second = qq.messages
    assert (first.kind, first.target) == ("c2c", "u-openid")
    assert (second.kind, second.target) == ("group", "g-default")
    for n, sent in enumerate(qq.messages):
        assert sent.body["content"] == f"[Kernel] echo: news {n}"
        # Nothing is being answered: a proactive message, no msg_id or msg_seq.
        assert "msg_id" not in sent.body and "msg_seq" not in sent.body
    _, state, _ = await sc.call("GET", "/channels/qq/state")
    assert state["last_reply"]["msg_id"] is None and state["replies_sent"] == 2


async def test_a_guest_gets_no_owner_memories_nor_tools_and_the_owner_does(
    sidecar: SidecarFactory, echo: AnthropicSim, qq: QQSim
) -> None:
    extra = qq_config(qq, owner_users=["u-openid"], guest_tools=["ask_user"])
    sc = await sidecar(echo, extra=extra)
    await sc.kernel.memories.add("The owner's PIN hint is Alice")

    guest = event("c2c", "Alice?", where="user-1", who="user-1", msg_id="m-g")
    assert (await post(sc, guest))[0] == 200
    await qq.wait_until(lambda: len(qq.messages) == 1)
    asked = echo.requests[0].body
    # The memory is recalled neither into the system prompt nor into the context block.
    assert "Alice" not in system_of(asked) and recalled_of(asked) == ""
    assert [t["name"] for t in asked["tools"]] == ["ask_user"]

    owner = event("c2c", "Alice?", where="u-openid", who="u-openid", msg_id="m-o")
    assert (await post(sc, owner))[0] == 200
    await qq.wait_until(lambda: len(qq.messages) == 2)
    mine = echo.requests[1].body
    assert "The owner's PIN hint is Alice" in recalled_of(mine)
    assert "memory_add" in [t["name"] for t in mine["tools"]]


async def test_with_an_api_key_callbacks_pass_by_their_signature_alone(
    sidecar: SidecarFactory, echo: AnthropicSim, qq: QQSim
) -> None:
    sc = await sidecar(echo, api_key=API_KEY, extra=qq_config(qq))
    # The platform sends no key: its address validation is answered all the same.
    validation = {"d": {"plain_token": "Arq0D5A61EgUu4OxUvOp", "event_ts": "1725442341"}, "op": 13}
    status, data = await post(sc, validation, {"User-Agent": "QQBot-Callback"})
    assert status == 200 and data["plain_token"] == "Arq0D5A61EgUu4OxUvOp"
    assert len(data["signature"]) == 128
    # A signed event is acknowledged and answered.
    status, data = await post(sc, event("c2c", "hi", where="user-1", who="user-1"))
    assert (status, data) == (200, {"op": 12, "d": 0})
    await qq.wait_until(lambda: len(qq.messages) == 1, SLOW)
    # Unsigned, badly signed or tampered: refused with QQ's code, and no turn runs.
    payload = event("c2c", "forged", where="user-1", who="user-1")
    raw = json.dumps(payload).encode()
    other = signed_headers(raw, "not-the-secret")
    tampered = json.dumps({**payload, "s": 7}).encode()
    for body, headers in (
        (raw, {"Content-Type": "application/json"}),
        (raw, other),
        (tampered, signed_headers(raw)),
    ):
        status, data, _ = await sc.call("POST", "/channels/qq/inbound", data=body, headers=headers)
        assert status == 401 and data["error"]["code"] == "invalid_signature", data
    # The exemption is this route's alone, and the browser checks still apply to it.
    status, data, _ = await sc.call("GET", "/channels/qq/state", headers={})
    assert status == 401 and data["error"]["code"] == "unauthorized"
    foreign = {**signed_headers(raw), "Origin": "https://evil.example"}
    status, data, _ = await sc.call("POST", "/channels/qq/inbound", data=raw, headers=foreign)
    assert status == 403 and data["error"]["code"] == "forbidden_origin"
    await wait_until(lambda: not sc.kernel.qq_inbound._tasks, timeout=SLOW)
    assert len(echo.requests) == 1 and len(qq.messages) == 1


async def test_with_an_api_key_a_disabled_qq_channel_has_no_keyless_route(
    sidecar: SidecarFactory, echo: AnthropicSim, qq: QQSim
) -> None:
    sc = await sidecar(echo, api_key=API_KEY, extra=qq_config(qq, enabled=False))
    payload = event("c2c", "hi", where="user-1", who="user-1")
    raw = json.dumps(payload).encode()
    stamp = str(int(sc.kernel.clock.now().timestamp()))
    status, data, _ = await sc.call(
        "POST", "/channels/qq/inbound", data=raw, headers=signed_headers(raw, timestamp=stamp)
    )
    assert status == 401 and data["error"]["code"] == "unauthorized"
    # With the key, the route says why it does nothing.
    headers = {**signed_headers(raw, timestamp=stamp), "X-API-Key": API_KEY}
    status, data, _ = await sc.call("POST", "/channels/qq/inbound", data=raw, headers=headers)
    assert status == 400 and data["error"]["code"] == "channel_disabled"
    assert echo.requests == [] and qq.messages == []


async def test_an_event_replayed_after_a_restart_runs_no_second_turn(
    sidecar: SidecarFactory, echo: AnthropicSim, qq: QQSim
) -> None:
    clock = ManualClock(NOW)
    sc = await sidecar(echo, api_key=API_KEY, extra=qq_config(qq), clock=clock)
    payload = event("c2c", "pay the rent", where="user-1", who="user-1")
    raw = json.dumps(payload).encode()
    headers = signed_headers(raw, timestamp=str(int(NOW.timestamp())))
    status, _, _ = await sc.call("POST", "/channels/qq/inbound", data=raw, headers=headers)
    assert status == 200
    await qq.wait_until(lambda: len(qq.messages) == 1, SLOW)
    await wait_until(lambda: not sc.kernel.qq_inbound._tasks, timeout=SLOW)
    await sc.stop()

    # A new Kernel on the same data directory, still within the signature window.
    clock.advance(60)
    sc = await sidecar(echo, api_key=API_KEY, keep_config=True, clock=clock)
    status, data, _ = await sc.call("POST", "/channels/qq/inbound", data=raw, headers=headers)
    assert (status, data) == (200, {"op": 12, "d": 0})  # acknowledged, so QQ stops retrying
    assert not sc.kernel.qq_inbound._tasks  # and no turn started
    _, state, _ = await sc.call("GET", "/channels/qq/state")
    assert (state["events"], state["duplicates_ignored"]) == (0, 1)
    assert len(echo.requests) == 1 and len(qq.messages) == 1
    # A new event is answered as usual.
    fresh = event("c2c", "and the bills", where="user-1", who="user-1")
    raw = json.dumps(fresh).encode()
    headers = signed_headers(raw, timestamp=str(int(clock.now().timestamp())))
    status, _, _ = await sc.call("POST", "/channels/qq/inbound", data=raw, headers=headers)
    assert status == 200
    await qq.wait_until(lambda: len(qq.messages) == 2, SLOW)


async def test_a_keyless_callback_body_is_kept_small(
    sidecar: SidecarFactory, echo: AnthropicSim, qq: QQSim
) -> None:
    sc = await sidecar(echo, api_key=API_KEY, extra=qq_config(qq))
    payload = event("c2c", "x" * (1024 * 1024), where="user-1", who="user-1")
    raw = json.dumps(payload).encode()
    headers = signed_headers(raw, timestamp=str(int(sc.kernel.clock.now().timestamp())))
    # Signed, but a body is read before its signature can be checked.
    status, data, _ = await sc.call(
        "POST", "/channels/qq/inbound", data=io.BytesIO(raw), headers=headers
    )
    assert status == 413 and data["error"]["code"] == "request_too_large"
    assert "1048576" in data["error"]["message"]

    async def chunks() -> AsyncIterator[bytes]:  # no Content-Length: counted as read
        for _ in range(3):
            yield b" " * (512 * 1024)

    status, data, _ = await sc.call(
        "POST", "/channels/qq/inbound", data=chunks(), headers={"User-Agent": "QQBot"}
    )
    assert status == 413 and data["error"]["code"] == "request_too_large"
    assert echo.requests == [] and qq.messages == []


async def test_a_guest_over_the_budget_is_not_told_the_owners_spend(
    sidecar: SidecarFactory, echo: AnthropicSim, qq: QQSim
) -> None:
    prices = "\n[providers.main.prices.model-a]\ninput = 3.0\noutput = 15.0\n"
    budget = prices + "[budget]\ndaily = 0.001\n"
    extra = qq_config(qq, owner_users=["u-openid"], guest_tools=["ask_user"]) + budget
    sc = await sidecar(echo, extra=extra)

    guest = event("c2c", "hello?", where="user-1", who="user-1", msg_id="m-g")
    assert (await post(sc, guest))[0] == 200
    owner = event("c2c", "hello?", where="u-openid", who="u-openid", msg_id="m-o")
    assert (await post(sc, owner))[0] == 200
    await qq.wait_until(lambda: len(qq.messages) == 2)
    assert echo.requests == []  # neither call was made
    texts = {m.body["msg_id"]: m.body["content"] for m in qq.messages}
    assert texts["m-g"] == "[Kernel] " + t("qq.turn_failed", message=t("budget.guest"))
    assert "$" not in texts["m-g"]
    # the owner is told what was spent and the limit, and how to change it
    assert money(0.001, "USD") == "$0.0010" and "$0.0010" in texts["m-o"]
    assert "[budget]" in texts["m-o"]


async def test_a_redirect_from_the_api_is_not_followed_with_the_token(
    sidecar: SidecarFactory, echo: AnthropicSim, qq: QQSim
) -> None:
    # An api_base that answers 307 to another server: the message and its token stay
    # with the configured API, and the owner sees the redirect as the API's answer.
    hits: list[tuple[str, str | None]] = []

    async def elsewhere(request: web.Request) -> web.Response:
        hits.append((request.path, request.headers.get("Authorization")))
        return web.json_response({"id": "m-1"})

    async def moved(request: web.Request) -> web.Response:
        raise web.HTTPTemporaryRedirect(f"http://127.0.0.1:{port}{request.path[5:]}")

    app = web.Application()
    app.router.add_route("*", "/away/{tail:.*}", moved)
    app.router.add_route("*", "/{tail:.*}", elsewhere)
    runner = web.AppRunner(app)
    await runner.setup()
    port = free_port()
    await web.TCPSite(runner, "127.0.0.1", port).start()
    try:
        extra = qq_config(qq, api_base=f"http://127.0.0.1:{port}/away")
        sc = await sidecar(echo, extra=extra, clock=ManualClock(NOW))
        body = {
            "name": "moved",
            "schedule": "every 1d",
            "text": "news",
            "dispatch": {"channel": "qq", "target": {"target_type": "c2c", "user_id": "u1"}},
        }
        status, job, _ = await sc.call("POST", "/cron/jobs", body)
        assert status == 201, job
        await sc.call("POST", f"/cron/jobs/{job['id']}/run")

        await wait_until(lambda: bool(sc.kernel.qq.last_error), timeout=SLOW)
        _, state, _ = await sc.call("GET", "/channels/qq/state")
        assert state["last_error"]["error"] == "HTTP 307" and state["replies_sent"] == 0
        assert hits == [] and qq.messages == []
    finally:
        await runner.cleanup()
