"""Stored messages are parsed once (kernel/store/parsed.py, issue 37): each turn reads its
session's last rounds again, and only the rows it has not seen are parsed. What a read
returns is the caller's own; a row whose text is not what was parsed is parsed again;
the kept parses are bounded."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

import kernel.store.parsed as parsed
from kernel.core.messages import Message, TextBlock, ToolUseBlock
from kernel.store.db import Store
from kernel.store.parsed import ParsedMessages


@pytest.fixture
async def store(tmp_path: Path) -> AsyncIterator[Store]:
    s = Store(tmp_path / "kernel.db")
    await s.start()
    yield s
    await s.close()


@pytest.fixture
def parses(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """One entry per message parsed from its JSON (on the db thread)."""
    seen: list[int] = []
    real = parsed.content_from_json

    def counting(data: list[dict[str, Any]]) -> Any:
        seen.append(1)
        return real(data)

    monkeypatch.setattr(parsed, "content_from_json", counting)
    return seen


def conversation() -> list[Message]:
    return [
        Message("user", [TextBlock("what is on today?", by="owner")]),
        Message("assistant", [ToolUseBlock("t1", "calendar", {"day": "today"})]),
        Message("assistant", [TextBlock("a dentist at 3")]),
    ]


async def test_each_row_is_parsed_once_across_reads(store: Store, parses: list[int]) -> None:
    s = await store.create_session("cli")
    await store.append_messages(s.id, conversation())
    assert await store.load_messages(s.id) == conversation()
    assert len(parses) == 3
    await store.append_messages(s.id, [Message("user", [TextBlock("and tomorrow?")])])
    again = await store.load_messages(s.id)
    assert again == [*conversation(), Message("user", [TextBlock("and tomorrow?")])]
    assert len(parses) == 4  # only the new row


async def test_what_a_read_returns_is_the_callers_own(store: Store) -> None:
    s = await store.create_session("cli")
    await store.append_messages(s.id, conversation())
    first = await store.load_messages(s.id)
    first[0].content.append(TextBlock("added by a caller"))
    first[1].content.clear()
    first[2].role = "user"
    assert await store.load_messages(s.id) == conversation()


async def test_a_row_whose_text_changed_is_parsed_again(store: Store, parses: list[int]) -> None:
    """A database replaced under the store (a restore) may hold other text under an id
    seen before: the text is compared, never trusted by id."""
    s = await store.create_session("cli")
    await store.append_messages(s.id, conversation()[:1])
    await store.load_messages(s.id)
    await store._run(
        "test",
        lambda conn: conn.execute(
            "UPDATE messages SET content = ?", ('[{"type":"text","text":"restored"}]',)
        ),
    )
    assert await store.load_messages(s.id) == [Message("user", [TextBlock("restored")])]
    assert len(parses) == 2


def test_the_kept_parses_are_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(parsed, "LIMIT_CHARS", 200)
    monkeypatch.setattr(parsed, "LONGEST", 100)
    cache = ParsedMessages()
    text = '[{"type":"text","text":"%s"}]'
    for i in range(1, 11):
        cache.message(i, "user", text % ("x" * 30))  # 57 characters each
    assert cache.chars <= 200
    assert len(cache) == 3  # the newest three; the oldest left first
    long = text % ("y" * 100)
    assert cache.message(11, "user", long).content == [TextBlock("y" * 100)]
    assert len(cache) == 3 and cache.chars <= 200  # too long to keep: parsed, not kept


async def test_the_bound_holds_through_the_store(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(parsed, "LIMIT_CHARS", 1_000)
    s = await store.create_session("cli")
    said = [Message("user", [TextBlock(f"message {i:03d} " + "x" * 40)]) for i in range(60)]
    await store.append_messages(s.id, said)
    assert await store.load_messages(s.id) == said
    kept = store._parsed
    assert 0 < len(kept) < 60 and kept.chars <= 1_000
    assert await store.load_messages(s.id) == said  # the rest parsed again, as before


def test_a_row_no_recent_read_returned_goes_at_the_next_sweep(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """What stays is the windows read lately: a row that left its session's window (or
    whose session went quiet) is not kept for good, so the cache is flat once the
    windows are full (memory_soak.py), far below its size bound."""
    monkeypatch.setattr(parsed, "KEEP_READS", 4)
    monkeypatch.setattr(parsed, "SWEEP_EVERY", 3)
    cache = ParsedMessages()
    text = '[{"type":"text","text":"%s"}]'
    window = list(range(1, 4))
    for _ in range(20):  # a window of three rows sliding one row per read
        cache.read()
        for i in window:
            cache.message(i, "user", text % i)
        window = [*window[1:], window[-1] + 1]
    assert len(cache) <= 3 + 4 + 3  # the window, what left it within KEEP_READS, a sweep's slack
    assert cache.chars < 10 * len(text % 20)
