"""How a delegated run ends, said truly (issue 35): when a time limit, a kill or an error
ends it, the result names the CLI's last known cause (its last retry or API error) and
the real exit — the process's own code, or the signal that ended it, and whether Kernel
sent it — in the tool result, the audit row and the owner's words.

The stand-ins print the lines recorded on 2026-12-05 from claude 2.1.332, codex-cli
0.171.0 and gemini-cli 0.61.0 pointed at a closed 127.0.0.1 port (inside a network
namespace: nothing reached the internet), and end on SIGTERM as those releases do:

- claude: ``{"type":"system","subtype":"api_retry","attempt":1,"max_retries":10,
  "retry_delay_ms":567,"error_status":null,"error":"unknown",…}`` at 0.6 s, then at
  1.3, 2.3, 4.4, 9.2, 17.8, 36.2 s…; on SIGTERM it exits 143.
- codex: ``{"type":"item.completed","item":{"id":"item_0","type":"error","message":"Model
  metadata for `gpt-sim` not found. …"}}`` (a displayable step: the idle limit runs from
  it), ``turn.started``, then ``{"type":"error","message":"Reconnecting... waiting for
  network (Connection failed: error sending request)"}`` at 3.8, 11.9, 24.9 s…; SIGTERM
  kills it (-15).
- gemini (stderr): ``Attempt 1 failed. Retrying with backoff... Error: exception
  TypeError: fetch failed sending request`` (and a stack trace) at 2.1, 8.3, 18.7,
  36.3 s…; on SIGTERM its handler exits 0 — the "killed Gemini run reports exit_code 0".
"""

from __future__ import annotations

import asyncio
import os
import re
import signal
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from kernel.audit import AuditLog
from kernel.audit.words import words
from kernel.store.audit import AuditRow
from kernel.store.db import Store
from kernel.tools.registry import ToolContext
from tests.delegate.conftest import (
    ConfigFactory,
    cli_section,
    delegator_for,
    leap_when_troubled,
    record_of,
)
from tests.waiting import wait_until

pytestmark = pytest.mark.posix  # stand-in CLIs: #!python scripts made executable

SESSION = 7
# The cause each CLI's recorded unreachable-API lines come to.
CAUSES = {
    "claude_code": "Claude Code could not reach its API: no HTTP response (unknown) (retry ",
    "codex": "Codex could not reach its API: Connection failed: error sending request (retry ",
    "gemini": "Gemini CLI could not reach its API: exception TypeError: fetch failed sending "
    "request (retry ",
}
# How each ends on Kernel's SIGTERM: its own exit code (claude 143, gemini 0) or none.
ON_SIGTERM = {
    "claude_code": (143, "exit code 143"),
    "codex": (None, "ended by SIGTERM"),
    "gemini": (0, "exit code 0"),
}


@pytest.fixture
async def store(tmp_path: Path) -> AsyncIterator[Store]:
    store = Store(tmp_path / "kernel.db")
    await store.start()
    try:
        yield store
    finally:
        await store.close()


async def ended_row(audit: AuditLog) -> AuditRow:
    [row] = [r for r in await audit.events(SESSION, limit=100) if r.kind == "delegation.ended"]
    assert row.data is not None
    return row


def context() -> ToolContext:
    return ToolContext(conversation="c", session_id=SESSION)


@pytest.mark.parametrize("cli", ["claude_code", "codex", "gemini"])
async def test_a_timeout_after_unreachable_api_warnings_names_that_cause_and_the_signal(
    cli: str,
    bin_dir: dict[str, Path],
    make_config: ConfigFactory,
    store: Store,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("STANDIN_MODE", "unreachable")  # retries until it is stopped
    monkeypatch.setenv("STANDIN_DELAY", "0.2")
    # The tester's short timeout: the time limit ends the run before the no-progress one.
    section = cli_section(cli, command=str(bin_dir[cli]), timeout=300, no_progress_timeout=5000)
    delegator = delegator_for(make_config(section))
    delegator.clock = leap_when_troubled(delegator)
    delegator.audit = audit = AuditLog(store)

    result = await delegator.delegate("say hello", cli=cli, conversation="c", context=context())

    latest = delegator.latest("c")
    assert latest is not None and latest.outcome == "timeout"
    code, exit_said = ON_SIGTERM[cli]
    assert result["ok"] is False
    assert (result["exit_code"], result["signal"]) == (code, "SIGTERM")  # never a bare 0
    assert result["kernel_signals"] == ["SIGTERM"]
    assert result["cause"].startswith(CAUSES[cli])
    reason = result["reason"]
    assert reason.startswith(f"{cli} did not finish within 300 s; its whole process group")
    assert re.search(rf"Exit status: Kernel sent SIGTERM after [0-9.]+ s; {exit_said}\.", reason)
    assert f"Last known cause: {CAUSES[cli]}" in reason
    assert result["output"].startswith(f"[Kernel] {reason}")
    ended = await ended_row(audit)
    row = ended.data
    assert row is not None
    assert (row["reason"], row.get("exit_code"), row["signal"]) == ("timeout", code, "SIGTERM")
    assert row["cause"] == result["cause"]
    said = words(ended)  # the audit's words, as the console, TUI and trajectory show them
    shown_exit = "" if code is None else f" exit {code}"
    assert said.startswith(f"🤖 delegation #{row['delegation']} ended ✗{shown_exit} signal ")
    assert f"signal SIGTERM timeout last known cause: {CAUSES[cli]}" in said


async def test_codex_gone_silent_after_its_retries_names_them(
    bin_dir: dict[str, Path], make_config: ConfigFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Codex's first line is a displayable warning, then only retries: the idle limit
    ends it ("went silent"), and the retries it printed meanwhile are the cause."""
    monkeypatch.setenv("STANDIN_MODE", "unreachable")
    monkeypatch.setenv("STANDIN_DELAY", "0.2")
    section = cli_section(
        "codex",
        command=str(bin_dir["codex"]),
        timeout=5000,
        idle_timeout=300,
        no_progress_timeout=5000,
    )
    delegator = delegator_for(make_config(section))
    delegator.clock = leap_when_troubled(delegator)

    result = await delegator.delegate("say hello", cli="codex", conversation="c")

    latest = delegator.latest("c")
    assert latest is not None and latest.outcome == "idle"
    assert result["reason"].startswith("codex printed nothing new for 300 s")
    assert f"Last known cause: {CAUSES['codex']}" in result["reason"]
    assert (result["exit_code"], result["signal"]) == (None, "SIGTERM")


@pytest.mark.parametrize(
    ("cli", "name", "code"),  # names: signal.SIGKILL is not there to collect on Windows
    [("gemini", "SIGKILL", None), ("codex", "SIGTERM", None)],
)
async def test_a_child_killed_from_outside_reports_its_signal_not_exit_0(
    cli: str,
    name: str,
    code: int | None,
    bin_dir: dict[str, Path],
    make_config: ConfigFactory,
    store: Store,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    sig = signal.Signals[name]
    record = tmp_path / "record.json"
    monkeypatch.setenv("STANDIN_MODE", "hang")
    monkeypatch.setenv("STANDIN_RECORD", str(record))
    delegator = delegator_for(make_config(cli_section(cli, command=str(bin_dir[cli]))))
    delegator.audit = audit = AuditLog(store)
    task = asyncio.create_task(
        delegator.delegate("say hello", cli=cli, conversation="c", context=context())
    )
    await wait_until(record.exists)
    os.kill(record_of(record)["pid"], sig)  # not Kernel: someone else ended it

    result = await task

    assert result["ok"] is False
    assert (result["exit_code"], result["signal"]) == (code, sig.name)
    assert result["kernel_signals"] == []
    assert result["reason"] == (
        f"{cli} was killed by {sig.name}, which Kernel did not send (it was killed from outside)"
    )
    row = (await ended_row(audit)).data
    assert row is not None
    assert (row.get("exit_code"), row["signal"], row["kernel_signals"]) == (code, sig.name, [])


async def test_a_normal_non_zero_exit_reports_that_code_and_no_signal(
    bin_dir: dict[str, Path], make_config: ConfigFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("STANDIN_MODE", "fail")  # an error on stderr, exit 3
    config = make_config(cli_section("claude_code", command=str(bin_dir["claude_code"])))

    result = await delegator_for(config).delegate("say hello", conversation="c")

    assert (result["exit_code"], result["signal"], result["kernel_signals"]) == (3, None, [])
    assert result["reason"] == "claude_code exited with code 3"  # no signal, no cause to add
    assert result["cause"] is None


async def test_cancel_records_kernels_signal_and_the_cause_so_far(
    bin_dir: dict[str, Path],
    make_config: ConfigFactory,
    store: Store,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("STANDIN_MODE", "unreachable")
    monkeypatch.setenv("STANDIN_DELAY", "0.2")
    config = make_config(cli_section("gemini", command=str(bin_dir["gemini"])))
    delegator = delegator_for(config, kill_grace=5.0)
    delegator.audit = audit = AuditLog(store)
    task = asyncio.create_task(
        delegator.delegate("say hello", cli="gemini", conversation="c", context=context())
    )
    await wait_until(
        lambda: delegator.running is not None and delegator.running.trouble is not None
    )
    task.cancel()  # the owner's /cancel
    with pytest.raises(asyncio.CancelledError):
        await task

    row = (await ended_row(audit)).data
    assert row is not None
    assert (row["reason"], row["exit_code"], row["signal"]) == ("cancelled", 0, "SIGTERM")
    assert row["kernel_signals"] == ["SIGTERM"]
    assert row["cause"].startswith(CAUSES["gemini"])
    latest = delegator.latest("c")
    assert latest is not None and latest.outcome == "cancelled"
