"""The operations' audit rows on the bad paths (issue 23): a delegation cancelled by the
owner or failing still has its end recorded; a permission prompt cut short by the run's
end or the caller's going away is recorded as answered by Kernel; an audit that cannot
write never stops the work it records."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from kernel.audit import AuditLog
from kernel.core.asks import Answer, AskRegistry
from kernel.core.delivery import ChannelRegistry
from kernel.delegate.approvals import Approvals
from kernel.delegate.permission import PermissionRequest
from kernel.store.audit import AuditRow
from kernel.store.db import Store
from kernel.tools.registry import ToolContext
from tests.delegate.conftest import (
    ConfigFactory,
    cli_section,
    delegator_for,
)
from tests.delegate.conftest import bin_dir as bin_dir  # noqa: F401 - the fixtures, shared
from tests.delegate.conftest import make_config as make_config  # noqa: F401
from tests.delegate.conftest import workspace as workspace  # noqa: F401
from tests.waiting import wait_until

SESSION = 7


@pytest.fixture
async def store(tmp_path: Path) -> AsyncIterator[Store]:
    store = Store(tmp_path / "kernel.db")
    await store.start()
    try:
        yield store
    finally:
        await store.close()


async def ops(audit: AuditLog, session: int | None = SESSION) -> list[AuditRow]:
    return [r for r in await audit.events(session, limit=1000) if r.kind != "audit.pruned"]


def context() -> ToolContext:
    return ToolContext(conversation="telegram:1", session_id=SESSION)


@pytest.mark.posix  # a stand-in CLI: a #! script made executable
async def test_a_cancelled_delegation_is_recorded_as_ended_by_the_cancel(
    bin_dir: dict[str, Path],  # noqa: F811
    make_config: ConfigFactory,  # noqa: F811
    store: Store,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("STANDIN_MODE", "step_then_hang")
    config = make_config(cli_section("claude_code", command=str(bin_dir["claude_code"])))
    delegator = delegator_for(config, kill_grace=0.2)
    delegator.audit = audit = AuditLog(store)
    task = asyncio.create_task(
        delegator.delegate("the secret plan", conversation="c", context=context())
    )
    await wait_until(lambda: delegator.running is not None and bool(delegator.running.step))
    task.cancel()  # the owner's /cancel
    with pytest.raises(asyncio.CancelledError):
        await task

    started, ended = await ops(audit)
    assert (started.kind, ended.kind) == ("delegation.started", "delegation.ended")
    assert ended.data is not None and started.data is not None
    assert ended.data["delegation"] == started.data["delegation"]
    assert (ended.data["ok"], ended.data["reason"]) == (False, "cancelled")
    # The real exit (issue 35): Kernel's SIGTERM, and the code Claude Code exits with on it
    assert (ended.data["exit_code"], ended.data["signal"]) == (143, "SIGTERM")
    assert ended.data["kernel_signals"] == ["SIGTERM"]
    assert "the secret plan" not in str(started.data)
    assert (await audit.verify(SESSION)).ok


@pytest.mark.posix  # a stand-in CLI: a #! script made executable
async def test_a_failing_delegation_records_its_exit_and_no_session_goes_global(
    bin_dir: dict[str, Path],  # noqa: F811
    make_config: ConfigFactory,  # noqa: F811
    store: Store,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("STANDIN_MODE", "fail")
    config = make_config(cli_section("gemini", command=str(bin_dir["gemini"])))
    delegator = delegator_for(config)
    delegator.audit = audit = AuditLog(store)
    result = await delegator.delegate("x", cli="gemini")  # no turn's context: global
    assert result["ok"] is False

    started, ended = await ops(audit, None)
    assert started.session_id is None and ended.session_id is None
    assert started.data is not None and started.data["argv"][-1].startswith("--prompt=<task")
    assert ended.data is not None
    assert (ended.data["ok"], ended.data["exit_code"], ended.data["reason"]) == (False, 3, "exit")
    assert ended.data["outcome"] == "failed"


@pytest.mark.posix  # a stand-in CLI: a #! script made executable
async def test_a_delegation_runs_when_its_audit_cannot_be_written(
    bin_dir: dict[str, Path],  # noqa: F811
    make_config: ConfigFactory,  # noqa: F811
    tmp_path: Path,
) -> None:
    closed = Store(tmp_path / "closed.db")
    await closed.start()
    await closed.close()  # the database is gone: every record fails
    config = make_config(cli_section("claude_code", command=str(bin_dir["claude_code"])))
    delegator = delegator_for(config)
    delegator.audit = audit = AuditLog(closed)
    result = await delegator.delegate("x", conversation="c", context=context())
    assert result["ok"] is True and result["output"] == "Done: x"
    assert audit.failures == 2  # started and ended, each logged, neither raised


class Owner:
    """A turn's ``ask`` that never answers."""

    def __init__(self) -> None:
        self.asked = 0

    async def ask(self, question: str, options: list[str], **kw: object) -> Answer:
        self.asked += 1
        return await asyncio.get_running_loop().create_future()


def bash(command: str) -> PermissionRequest:
    return PermissionRequest("Bash", {"command": command}, "toolu_1")


async def test_prompts_cut_short_are_answered_by_kernel(store: Store) -> None:
    audit = AuditLog(store)
    approvals = Approvals(store, AskRegistry(), ChannelRegistry(), timeout=30, audit=audit)
    owner = Owner()
    grant = approvals.open(
        "20261126-101500-abc123",
        "claude_code",
        ToolContext(conversation="telegram:1", session_id=SESSION, ask=owner.ask),
        timeout=45,
    )
    waiting = asyncio.ensure_future(approvals.decide(grant, bash("rm -rf /srv/private")))
    await wait_until(lambda: owner.asked == 1)
    approvals.close(grant)  # the run ended (/cancel, the CLI done, Kernel stopping)
    assert (await waiting).by == "cancelled"

    second = approvals.open(
        "20261126-101600-def456",
        "claude_code",
        ToolContext(conversation="telegram:1", session_id=SESSION, ask=owner.ask),
        timeout=45,
    )
    going = asyncio.ensure_future(approvals.decide(second, bash("make deploy")))
    await wait_until(lambda: owner.asked == 2)
    going.cancel()  # the CLI's request went away
    with pytest.raises(asyncio.CancelledError):
        await going

    rows = await ops(audit)
    assert [(r.kind, r.actor) for r in rows] == [
        ("approval.asked", "model"),
        ("approval.answered", "kernel"),
        ("approval.asked", "model"),
        ("approval.answered", "kernel"),
    ]
    records = {r.id: r for r in await approvals.recent()}
    for asked, answered in (rows[0:2], rows[2:4]):
        assert asked.data is not None and answered.data is not None
        assert answered.data["delegation"] == asked.data["delegation"]
        assert (answered.data["decision"], answered.data["by"]) == ("deny", "cancelled")
        assert records[answered.data["record"]].delegation_id == asked.data["delegation"]
    assert "/srv/private" not in str([r.data for r in rows])
    assert (await audit.verify(SESSION)).ok and (await audit.verify()).ok
