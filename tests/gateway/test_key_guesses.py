"""Guessing the sidecar's key is throttled for real (issue 33 item 3), against a real
Kernel and Gateway on 127.0.0.1 with real clients: a console sign-in and a wrong
``X-API-Key`` / ``Authorization: Bearer`` are one guess each, counted before a body is
awaited, per address (a source address of its own per request, anywhere in 127/8) and
overall; over a limit the key is not compared and the answer is 429 with Retry-After (in
the Anthropic / OpenAI shape on /v1). A right key is never counted; under the overall
limit every key waits, while a console already signed in goes on working."""

from __future__ import annotations

import asyncio
import json
from collections import Counter
from collections.abc import AsyncIterator
from typing import Any

import aiohttp
import anthropic

from kernel.config.gateway import GatewayConfig
from kernel.gateway.guesses import MAX_ADDRESSES, WINDOW, KeyGuesses
from tests.gateway.conftest import API_KEY, Sidecar, SidecarFactory
from tests.sim.anthropic_sim import AnthropicSim

Answer = tuple[int, Any, dict[str, str]]
DEFAULTS = GatewayConfig()  # the limits as shipped
PER_ADDRESS, OVERALL = DEFAULTS.max_key_guesses_per_client, DEFAULTS.max_key_guesses


async def send(
    sc: Sidecar,
    method: str,
    path: str,
    *,
    source: str = "127.0.0.1",
    body: Any = None,
    headers: dict[str, str] | None = None,
) -> Answer:
    """(status, parsed body, headers) of one request sent from the address ``source``
    (its own connection, bound there)."""
    connector = aiohttp.TCPConnector(local_addr=(source, 0))
    data = None if body is None else json.dumps(body)
    sent = dict(headers or {})
    if data is not None:
        sent["Content-Type"] = "application/json"
    async with (
        aiohttp.ClientSession(connector=connector) as http,
        http.request(method, sc.url + path, data=data, headers=sent) as response,
    ):
        raw = await response.read()
        return response.status, json.loads(raw) if raw else None, dict(response.headers)


async def sign_in(sc: Sidecar, key: str, source: str = "127.0.0.1") -> Answer:
    return await send(sc, "POST", "/console/login", source=source, body={"api_key": key})


async def sign_ins_at_once(sc: Sidecar, keys: list[str], sources: list[str]) -> list[Answer]:
    """Sign-ins (``keys[n]`` from ``sources[n]``) whose bodies are all held back until
    the sidecar has every one of them in hand (each was answered, or told to go on with
    ``100 Continue``), then let go together: the race a counter must not lose."""
    seen: set[int] = set()
    all_in, gate = asyncio.Event(), asyncio.Event()

    def arrived(n: int) -> None:
        seen.add(n)
        if len(seen) == len(keys):
            all_in.set()

    async def body(n: int) -> AsyncIterator[bytes]:
        arrived(n)
        await gate.wait()
        yield json.dumps({"api_key": keys[n]}).encode()

    async def one(n: int) -> Answer:
        connector = aiohttp.TCPConnector(local_addr=(sources[n], 0))
        async with (
            aiohttp.ClientSession(connector=connector) as http,
            http.post(
                sc.url + "/console/login",
                data=body(n),
                headers={"Content-Type": "application/json"},
                expect100=True,
            ) as response,
        ):
            raw = await response.read()
            arrived(n)
            return response.status, json.loads(raw), dict(response.headers)

    tasks = [asyncio.create_task(one(n)) for n in range(len(keys))]
    async with asyncio.timeout(120):
        await all_in.wait()
    gate.set()
    return await asyncio.gather(*tasks)


def retry_after(answer: Answer) -> int:
    """The Retry-After of a 429: whole seconds, within the window (the body says the
    same where the shape has room for it)."""
    status, data, headers = answer
    assert status == 429, answer
    seconds = int(headers["Retry-After"])
    assert 1 <= seconds <= WINDOW
    if "details" in data.get("error", {}):  # the sidecar's own shape
        assert data["error"]["details"]["retry_after"] == seconds
    return seconds


def codes(answers: list[Answer]) -> Counter[tuple[int, str]]:
    return Counter((status, data["error"]["code"]) for status, data, _ in answers)


async def test_concurrent_wrong_sign_ins_from_one_address_are_judged_at_most_the_limit(
    sidecar: SidecarFactory, anthropic_sim: AnthropicSim
) -> None:
    sc = await sidecar(anthropic_sim, api_key=API_KEY)
    keys = [f"guess-{n}" for n in range(60)]
    answers = await sign_ins_at_once(sc, keys, ["127.0.0.1"] * 60)
    assert codes(answers) == {
        (401, "unauthorized"): PER_ADDRESS,
        (429, "too_many_sign_ins"): 60 - PER_ADDRESS,
    }
    for answer in answers:
        if answer[0] == 429:  # the message names the wait and what to do then
            assert f"sign in again in {retry_after(answer)} s" in answer[1]["error"]["message"]
    # Not even the right key is compared now, from this address.
    answer = await sign_in(sc, API_KEY)
    assert answer[1]["error"]["code"] == "too_many_sign_ins" and retry_after(answer)
    assert "Set-Cookie" not in answer[2]


async def test_rotating_the_source_address_is_judged_at_most_the_overall_limit(
    sidecar: SidecarFactory, anthropic_sim: AnthropicSim
) -> None:
    sc = await sidecar(anthropic_sim, api_key=API_KEY)
    # The owner's console, signed in before the spray.
    status, data, headers = await sign_in(sc, API_KEY)
    assert status == 200
    cookie = headers["Set-Cookie"].split(";", 1)[0]
    console = {"Cookie": cookie, "X-CSRF-Token": data["csrf"]}
    sources = [f"127.0.{n // 250}.{n % 250 + 2}" for n in range(60)]  # 60 addresses
    answers = await sign_ins_at_once(sc, ["guess"] * 60, sources)
    assert codes(answers) == {
        (401, "unauthorized"): OVERALL,
        (429, "too_many_sign_ins"): 60 - OVERALL,
    }
    for answer in answers:
        if answer[0] == 429:
            retry_after(answer)
    # Under the overall limit every key waits, from any address, the right one too (a
    # guesser that rotates addresses must learn nothing): 429, not compared.
    fresh = "127.0.3.1"
    answer = await send(sc, "GET", "/chats", source=fresh, headers={"X-API-Key": API_KEY})
    assert answer[1]["error"]["code"] == "too_many_wrong_keys" and retry_after(answer)
    answer = await sign_in(sc, API_KEY, fresh)
    assert answer[1]["error"]["code"] == "too_many_sign_ins" and retry_after(answer)
    # What guesses no key goes on: the console signed in before, the open health check.
    status, data, _ = await send(sc, "GET", "/chats", source=fresh, headers=console)
    assert status == 200 and "chats" in data
    status, data, _ = await send(sc, "GET", "/healthz", source=fresh)
    assert status == 200 and data["status"] == "ok"


async def test_wrong_api_keys_are_throttled_on_every_route_and_shape(
    sidecar: SidecarFactory, anthropic_sim: AnthropicSim
) -> None:
    sc = await sidecar(anthropic_sim, api_key=API_KEY)
    burst = [
        {"X-API-Key": f"guess-{n}"} if n % 2 else {"Authorization": f"Bearer guess-{n}"}
        for n in range(3 * PER_ADDRESS)
    ]
    answers = await asyncio.gather(
        *(send(sc, "GET", "/chats", headers=headers) for headers in burst)
    )
    assert codes(answers) == {
        (401, "unauthorized"): PER_ADDRESS,
        (429, "too_many_wrong_keys"): 2 * PER_ADDRESS,
    }
    for answer in answers:
        if answer[0] == 429:
            retry_after(answer)
            assert "gateway.api_key" in answer[1]["error"]["message"]
    # The right key is not compared either, on any route.
    answer = await send(sc, "GET", "/chats", headers={"X-API-Key": API_KEY})
    assert answer[1]["error"]["code"] == "too_many_wrong_keys" and retry_after(answer)
    answer = await send(sc, "POST", "/mcp", body={}, headers={"Authorization": "Bearer guess"})
    assert answer[1]["error"]["code"] == "too_many_wrong_keys" and retry_after(answer)
    # /v1 keeps the APIs' own shapes: Anthropic's rate_limit_error, as its SDK reads it.
    client = anthropic.AsyncAnthropic(base_url=sc.url, api_key="guess", max_retries=0)
    try:
        await client.messages.create(
            model="claude-opus-4-8",
            max_tokens=16,
            messages=[{"role": "user", "content": "hi"}],
        )
    except anthropic.RateLimitError as exc:
        body: Any = exc.body
        assert exc.status_code == 429 and body["type"] == "error"
        assert body["error"]["type"] == "rate_limit_error"
        assert "too many wrong API keys" in body["error"]["message"]
        assert 1 <= int(exc.response.headers["retry-after"]) <= WINDOW
    else:
        raise AssertionError("a wrong key was not throttled on /v1/messages")
    finally:
        await client.close()
    answer = await send(
        sc,
        "POST",
        "/v1/chat/completions",
        body={"model": "m", "messages": [{"role": "user", "content": "hi"}]},
        headers={"Authorization": "Bearer guess"},
    )
    assert answer[1]["error"]["type"] == "rate_limit_error" and retry_after(answer)
    assert anthropic_sim.requests == []  # nothing reached a model


async def test_one_address_throttled_leaves_the_right_key_working_elsewhere(
    sidecar: SidecarFactory, anthropic_sim: AnthropicSim
) -> None:
    sc = await sidecar(anthropic_sim, api_key=API_KEY)
    guesser, owner = "127.0.0.2", "127.0.0.3"
    # Sign-ins and API keys spend one budget: they guess the same key.
    half = PER_ADDRESS // 2
    for n in range(half):
        assert (await sign_in(sc, f"guess-{n}", guesser))[0] == 401
    for n in range(PER_ADDRESS - half):
        answer = await send(sc, "GET", "/chats", source=guesser, headers={"X-API-Key": f"g{n}"})
        assert answer[0] == 401
    answer = await send(sc, "GET", "/chats", source=guesser, headers={"X-API-Key": API_KEY})
    assert answer[1]["error"]["code"] == "too_many_wrong_keys" and retry_after(answer)
    # Another address: the right key works, and a right key is never counted.
    for _ in range(OVERALL + 5):
        status, data, _ = await send(
            sc, "GET", "/chats", source=owner, headers={"X-API-Key": API_KEY}
        )
        assert status == 200 and "chats" in data
    assert (await sign_in(sc, API_KEY, owner))[0] == 200
    answer = await send(sc, "GET", "/chats", source=owner, headers={"X-API-Key": "typo"})
    assert answer[0] == 401 and answer[1]["error"]["code"] == "unauthorized"
    # No key sent is no guess: still 401, not 429, from the throttled address.
    answer = await send(sc, "GET", "/chats", source=guesser)
    assert answer[0] == 401 and answer[1]["error"]["code"] == "unauthorized"


async def test_the_limits_are_the_configured_ones(
    sidecar: SidecarFactory, anthropic_sim: AnthropicSim
) -> None:
    limits = {"max_key_guesses_per_client": 2, "max_key_guesses": 3}
    sc = await sidecar(anthropic_sim, api_key=API_KEY, gateway=limits)
    wrong = {"X-API-Key": "guess"}
    for source in ("127.0.0.2", "127.0.0.2", "127.0.0.3"):
        assert (await send(sc, "GET", "/chats", source=source, headers=wrong))[0] == 401
    answer = await send(sc, "GET", "/chats", source="127.0.0.3", headers=wrong)
    assert answer[1]["error"]["code"] == "too_many_wrong_keys"  # overall: 3 in the minute
    answer = await send(sc, "GET", "/chats", source="127.0.0.2", headers={"X-API-Key": API_KEY})
    assert answer[1]["error"]["code"] == "too_many_wrong_keys" and retry_after(answer)


def test_the_guess_table_counts_per_address_and_overall_on_its_clock() -> None:
    now = [1000.0]
    guesses = KeyGuesses(PER_ADDRESS, OVERALL, clock=lambda: now[0])
    for _ in range(PER_ADDRESS):
        assert guesses.wait("10.0.0.9") == 0
        guesses.count("10.0.0.9")
    assert guesses.wait("10.0.0.9") == WINDOW and guesses.wait("10.0.0.8") == 0
    now[0] += 0.5
    assert guesses.wait("10.0.0.9") == WINDOW  # whole seconds, rounded up
    now[0] += WINDOW
    assert guesses.wait("10.0.0.9") == 0
    # A guess given back (a right key, a refused body) was none.
    at = guesses.count("10.0.0.9")
    guesses.give_back("10.0.0.9", at)
    for _ in range(PER_ADDRESS - 1):
        guesses.count("10.0.0.9")
    assert guesses.wait("10.0.0.9") == 0
    # One IPv6 /64 is one address; an IPv4-mapped address is the IPv4 one.
    for n in range(PER_ADDRESS):
        guesses.count(f"2001:db8::{n + 1:x}")
    assert guesses.wait("2001:db8::ffff") > 0 and guesses.wait("2001:db8:0:1::1") == 0
    for _ in range(PER_ADDRESS):
        guesses.count("::ffff:127.0.0.5")
    assert guesses.wait("127.0.0.5") > 0
    # Overall: the 31st address waits too, until the oldest guess leaves the window.
    now[0] += WINDOW
    for n in range(OVERALL):
        guesses.count(f"127.0.1.{n}")
    assert guesses.wait("127.0.2.1") == WINDOW
    now[0] += WINDOW
    assert guesses.wait("127.0.2.1") == 0
    # A bounded table, however many addresses come.
    for n in range(4 * MAX_ADDRESSES):
        if guesses.wait(f"10.1.{n // 250}.{n % 250}"):
            now[0] += WINDOW
        guesses.count(f"10.1.{n // 250}.{n % 250}")
    assert len(guesses) <= MAX_ADDRESSES


async def test_a_flood_of_wrong_keys_never_locks_out_the_generated_key(
    sidecar: SidecarFactory, anthropic_sim: AnthropicSim
) -> None:
    """Anyone on the machine can send wrong keys from 127.0.0.1, the owner's own
    address: with the generated key (too long to guess) the flood gets 429, while the
    owner's key, a delegation's run token and a ``kernel console`` link still work."""
    from tests.mcp.test_endpoint import open_grant
    from tests.mcp.test_endpoint_refusals import ACCEPT, INITIALIZE

    sc = await sidecar(anthropic_sim)  # no key set: the generated one (43 characters)
    own = sc.api_key
    assert len(own) >= 32
    sources = [f"127.0.{n // 250}.{n % 250 + 2}" for n in range(OVERALL + 10)]
    answers = await asyncio.gather(
        *(
            send(sc, "GET", "/healthz" if n % 3 else "/chats", source=source, headers=wrong)
            for n, source in enumerate(sources)
            for wrong in ({"X-API-Key": f"guess-{n}"},)
        )
    )
    assert sum(a[0] == 401 for a in answers) <= OVERALL
    answer = await send(sc, "GET", "/chats", headers={"X-API-Key": "guess-again"})
    assert answer[1]["error"]["code"] == "too_many_wrong_keys" and retry_after(answer)
    # The owner, from the flooded address itself: the key, a run token, a sign-in link.
    status, data, _ = await send(sc, "GET", "/chats", headers={"X-API-Key": own})
    assert status == 200 and "chats" in data
    grant = open_grant(sc)
    mcp = {**ACCEPT, "Authorization": f"Bearer {grant.token}"}
    async with (  # an SSE answer: read, not parsed
        aiohttp.ClientSession() as http,
        http.post(sc.url + "/mcp", json=INITIALIZE, headers=mcp) as response,
    ):
        assert response.status == 200, await response.text()
    status, data, _ = await send(sc, "POST", "/console/link", headers={"X-API-Key": own})
    assert status == 200
    status, signed, _ = await send(sc, "POST", "/console/login", body={"link": data["link"]})
    assert status == 200 and signed["csrf"]
    answer = await sign_in(sc, "guess-in-a-body")
    assert answer[1]["error"]["code"] == "too_many_sign_ins" and retry_after(answer)
