"""A delegation that asks the owner: Claude Code's flags, the run's token file, its end."""

from __future__ import annotations

import asyncio
import json
import stat
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from kernel.config import load_config
from kernel.core.asks import Answer, AskOutcome, AskRegistry
from kernel.core.delivery import ChannelRegistry
from kernel.core.errors import ConfigError, ToolError
from kernel.delegate.approvals import Approvals, RunGrant
from kernel.delegate.formats import formatter_for
from kernel.delegate.runner import CLIProcess, RunRequest
from kernel.store.db import Store
from kernel.tools.registry import ToolContext
from tests.conftest import write_config
from tests.delegate.conftest import ConfigFactory, cli_section, delegator_for, read, record_of
from tests.waiting import wait_until

URL = "http://127.0.0.1:8088/mcp"


async def _never(*args: object, **kw: object) -> Answer:
    return Answer(AskOutcome.TIMEOUT)


OWNER_CONTEXT = ToolContext(conversation="telegram:1", ask=_never)  # a turn the owner sees


@pytest.fixture
async def approvals(tmp_path: Path) -> AsyncIterator[Approvals]:
    store = Store(tmp_path / "approvals.db")
    await store.start()
    try:
        yield Approvals(store, AskRegistry(), ChannelRegistry())
    finally:
        await store.close()


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def exists(path: Path | str) -> bool:
    return Path(path).exists()


@pytest.mark.posix  # a stand-in CLI: a #! script made executable
async def test_claude_gets_the_endpoint_file_and_the_prompt_tool_and_the_file_goes_after(
    bin_dir: dict[str, Path],
    make_config: ConfigFactory,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    approvals: Approvals,
) -> None:
    record = tmp_path / "record.json"
    monkeypatch.setenv("STANDIN_RECORD", str(record))
    monkeypatch.setenv("STANDIN_MODE", "hang")
    section = cli_section("claude_code", command=str(bin_dir["claude_code"]), approvals="telegram")
    config = make_config(section)
    approvals.endpoint_url = URL
    delegator = delegator_for(config, approvals=approvals, kill_grace=0.2)
    task = asyncio.create_task(
        delegator.delegate("fix the tests", conversation="c", context=OWNER_CONTEXT)
    )
    await wait_until(record.exists)
    argv = record_of(record)["argv"]
    at = argv.index("--mcp-config")
    path = Path(argv[at + 1])
    assert argv[at + 2 : at + 4] == ["--permission-prompt-tool", "mcp__kernel__approve"]
    assert argv[-2:] == ["--", "fix the tests"] and at < argv.index("--")
    assert path.parent.parent == config.data_dir / "run"
    assert mode(path) == 0o600 and mode(path.parent) == 0o700
    text = read(path)
    server = json.loads(text)["mcpServers"]["kernel"]
    assert server["type"] == "http" and server["url"] == URL
    # claude's own limit on the call (ms; 300 s without it) outlasts the owner's time
    assert server["timeout"] > config.cli["claude_code"].approval_timeout * 1000 > 300_000
    token = server["headers"]["Authorization"].removeprefix("Bearer ")
    grant = approvals.resolve(token)
    assert isinstance(grant, RunGrant) and grant.cli == "claude_code"
    assert grant.delegation_id == path.parent.name
    assert set(json.loads(text)) == {"mcpServers"}  # nothing but the run's own token
    task.cancel()  # /cancel
    with pytest.raises(asyncio.CancelledError):
        await task
    assert not exists(path.parent)
    assert approvals.resolve(token) == "expired"


@pytest.mark.posix  # a stand-in CLI: a #! script made executable
async def test_a_run_that_ends_normally_also_removes_its_file_and_lists_its_decisions(
    bin_dir: dict[str, Path],
    make_config: ConfigFactory,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    approvals: Approvals,
) -> None:
    record = tmp_path / "record.json"
    monkeypatch.setenv("STANDIN_RECORD", str(record))
    section = cli_section("claude_code", command=str(bin_dir["claude_code"]), approvals="telegram")
    approvals.endpoint_url = URL
    delegator = delegator_for(make_config(section), approvals=approvals)
    stale = make_config(section).data_dir / "run" / "20200101-000000-old"
    stale.mkdir(parents=True)
    (stale / "mcp.json").write_text("{}")
    result = await delegator.delegate("x", conversation="c", context=OWNER_CONTEXT)
    assert result["ok"] is True and result["approvals"] == []
    argv = record_of(record)["argv"]
    assert not exists(argv[argv.index("--mcp-config") + 1])
    assert not exists(stale)  # a file a killed Kernel left is swept by the next run
    assert not approvals.running()


@pytest.mark.posix  # a stand-in CLI: a #! script made executable
async def test_a_turn_nobody_can_answer_does_not_start_a_cli_that_would_ask(
    bin_dir: dict[str, Path],
    make_config: ConfigFactory,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    approvals: Approvals,
) -> None:
    record = tmp_path / "record.json"
    monkeypatch.setenv("STANDIN_RECORD", str(record))
    section = cli_section("claude_code", command=str(bin_dir["claude_code"]), approvals="telegram")
    approvals.endpoint_url = URL
    delegator = delegator_for(make_config(section), approvals=approvals)
    unattended = ToolContext(conversation="agent:1")  # a sub-agent's: no ask
    with pytest.raises(ToolError) as refused:
        await delegator.delegate("x", conversation="c", context=unattended)
    assert "approvals" in str(refused.value) and "off" in str(refused.value)
    assert not exists(record) and not approvals.running()


@pytest.mark.posix  # a stand-in CLI: a #! script made executable
async def test_without_the_endpoint_the_delegation_is_refused_naming_the_settings(
    bin_dir: dict[str, Path], make_config: ConfigFactory, approvals: Approvals
) -> None:
    section = cli_section("claude_code", command=str(bin_dir["claude_code"]), approvals="telegram")
    delegator = delegator_for(make_config(section), approvals=approvals)
    with pytest.raises(ToolError) as refused:
        await delegator.delegate("x", conversation="c")
    assert "[mcp] serve" in str(refused.value) and "[gateway]" in str(refused.value)
    assert delegator.running is None


@pytest.mark.posix  # a stand-in CLI: a #! script made executable
async def test_without_approvals_the_argv_is_as_before(
    bin_dir: dict[str, Path],
    make_config: ConfigFactory,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    approvals: Approvals,
) -> None:
    record = tmp_path / "record.json"
    monkeypatch.setenv("STANDIN_RECORD", str(record))
    approvals.endpoint_url = URL
    config = make_config(cli_section("claude_code", command=str(bin_dir["claude_code"])))
    result = await delegator_for(config, approvals=approvals).delegate("x", conversation="c")
    assert "approvals" not in result
    assert "--permission-prompt-tool" not in record_of(record)["argv"]


@pytest.mark.parametrize(
    ("section", "key", "named"),
    [
        (cli_section("codex", approvals="telegram"), "cli.codex.approvals", "--sandbox"),
        (cli_section("gemini", approvals="telegram"), "cli.gemini.approvals", "--approval-mode"),
        (
            cli_section(
                "claude_code", approvals="telegram", args=["-p", "--dangerously-skip-permissions"]
            ),
            "cli.claude_code.args",
            "--dangerously-skip-permissions",
        ),
        (
            cli_section(
                "claude_code",
                approvals="telegram",
                args=["-p", "--permission-mode=bypassPermissions"],
            ),
            "cli.claude_code.args",
            "bypassPermissions",
        ),
        (
            cli_section(
                "claude_code",
                approvals="telegram",
                args=["-p", "--settings", '{"permissions": {"defaultMode": "bypassPermissions"}}'],
            ),
            "cli.claude_code.args",
            "bypassPermissions",
        ),
    ],
)
def test_what_cannot_ask_the_owner_is_refused_at_load(
    section: str, key: str, named: str, make_config: ConfigFactory
) -> None:
    with pytest.raises(ConfigError) as refused:
        make_config(section)
    assert refused.value.key == key
    assert named in str(refused.value)


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


@pytest.mark.posix  # a stand-in CLI: a #! script made executable
async def test_the_clis_limits_stand_still_while_the_owner_decides(
    bin_dir: dict[str, Path], tmp_path: Path
) -> None:
    clock = Clock()
    request = RunRequest(
        argv=[str(bin_dir["claude_code"]), "-p", "--", "x"],
        cwd=tmp_path,
        env={"PATH": "/usr/bin:/bin", "STANDIN_MODE": "hang"},
        timeout=100.0,
        idle_timeout=100.0,
        formatter=formatter_for("claude_code", True),
        output_path=tmp_path / "out.txt",
    )
    process = CLIProcess(request, kill_grace=0.2, clock=clock)
    run = asyncio.create_task(process.run())
    await wait_until(lambda: process.pid is not None)
    with process.hold():
        clock.now = 10_000.0  # far past every limit, all of it waiting for the owner
        for _ in range(5):
            await asyncio.sleep(0.15)  # the supervisor looks every 0.1 s
        assert not run.done(), run.result()
    clock.now = 10_050.0  # 50 s of the CLI's own time: still within its 100 s
    for _ in range(5):
        await asyncio.sleep(0.15)
    assert not run.done()
    clock.now = 10_101.0
    report = await run
    assert report.reason == "timeout"


@pytest.mark.parametrize("gateway", [True, False])
def test_approvals_without_the_endpoint_are_refused_at_load(gateway: bool, tmp_path: Path) -> None:
    path = write_config(tmp_path, "http://127.0.0.1:9", "claude", gateway={"enabled": gateway})
    extra = cli_section("claude_code", approvals="telegram")
    if gateway:  # the sidecar runs, its MCP endpoint does not
        extra += "[mcp]\nserve = false\n"
    path.write_text(read(path) + "\n" + extra, encoding="utf-8")
    with pytest.raises(ConfigError) as refused:
        load_config(path, env={}, require_telegram=False)
    assert refused.value.key == "cli.claude_code.approvals"
    assert "[mcp] serve" in str(refused.value)


def test_a_sidecar_claude_cannot_reach_on_loopback_is_refused_at_load(tmp_path: Path) -> None:
    gateway = {"host": "192.0.2.2", "api_key": "a-long-enough-sidecar-key-0123456789"}
    path = write_config(tmp_path, "http://127.0.0.1:9", "claude", gateway=gateway)
    extra = cli_section("claude_code", approvals="telegram")
    path.write_text(read(path) + "\n" + extra, encoding="utf-8")
    with pytest.raises(ConfigError) as refused:
        load_config(path, env={}, require_telegram=False)
    assert refused.value.key == "cli.claude_code.approvals"
    assert "[gateway] host" in str(refused.value) and "192.0.2.2" in str(refused.value)
