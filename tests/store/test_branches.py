"""A session's branches in the store (issue 38): a switch makes a branch the live
history in one transaction, keeps what was live as a branch, and brings back the
branches a fork lies in, so the live history is always the path it was."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from kernel.store.db import Store
from tests.store.test_store import FakeClock, assistant, user


@pytest.fixture
async def store(tmp_path: Path) -> AsyncIterator[Store]:
    s = Store(tmp_path / "kernel.db", clock=FakeClock())
    await s.start()
    yield s
    await s.close()


async def exchange(store: Store, session_id: int, n: str) -> list[int]:
    return await store.append_messages(session_id, [user(f"q{n}"), assistant(f"a{n}")])


async def live(store: Store, session_id: int) -> list[str]:
    return [m.text for m in await store.load_messages(session_id)]


async def test_a_switch_into_a_branch_forking_inside_another_restores_its_path(
    store: Store,
) -> None:
    sid = (await store.create_session("telegram")).id
    for n in "123":
        await exchange(store, sid, n)
    _, a2 = (await store.load_transcript(sid))[2:4]
    assert await store.cut_after(sid, a2.id, "undo") == (1, 2)  # q3 a3, after a2
    await exchange(store, sid, "4")
    a1 = (await store.load_transcript(sid))[1]
    assert await store.cut_after(sid, a1.id, "rewind") == (2, 4)  # q2 a2 q4 a4, after a1
    await exchange(store, sid, "5")
    assert await live(store, sid) == ["q1", "a1", "q5", "a5"]

    # Branch 1 forks after a2, which lies in branch 2: both come back, in that order.
    switched = await store.switch_branch(sid, 1)
    assert switched is not None
    assert (switched.branch, switched.fork, switched.restored) == (1, a2.id, 6)
    assert switched.left == ((3, 2), (2, 2))  # q5 a5 (new), q4 a4 (the rest of 2)
    assert await live(store, sid) == ["q1", "a1", "q2", "a2", "q3", "a3"]
    listed = await store.list_branches(sid)
    assert listed.active == 1 and listed.total == 2
    assert [(b.branch, b.fork, b.messages, b.first_words, b.how) for b in listed.rows] == [
        (2, a2.id, 2, "q4", "switch"),
        (3, a1.id, 2, "q5", "switch"),
    ]
    assert listed.rows[0].fork_words == "a2"

    # Back to q5: the history left takes the live history's number (1), then on to q4.
    assert (await store.switch_branch(sid, 3)) is not None
    assert await live(store, sid) == ["q1", "a1", "q5", "a5"]
    switched = await store.switch_branch(sid, 2)
    assert switched is not None and switched.left == ((3, 2), (1, 2))
    assert await live(store, sid) == ["q1", "a1", "q2", "a2", "q4", "a4"]
    assert (await store.list_branches(sid)).active == 2

    # Nothing was lost; an unknown branch (or the live one's number) is no switch.
    assert len(await store.load_transcript(sid)) == 10
    assert await store.switch_branch(sid, 2) is None
    assert await store.switch_branch(sid, 99) is None
    # A cut never takes a number a branch (or the live history) has had.
    assert (await store.cut_after(sid, a1.id))[0] == 4
