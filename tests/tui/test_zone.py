"""One time zone on the TUI (issue 35, item 4): the chat list and the audit window both
show ``general.timezone`` (Asia/Shanghai here), never the machine's zone, which these
tests set to America/New_York. In-process and over the sidecar."""

from __future__ import annotations

import time
from collections.abc import Iterator
from datetime import datetime
from zoneinfo import ZoneInfo

import pytest

from tests.conftest import KernelFactory
from tests.gateway.conftest import SidecarFactory
from tests.sim.anthropic_sim import AnthropicSim
from tests.sim.script import text_reply
from tests.tui.conftest import TEXTUAL_MISSING, lines, send, until

pytest.importorskip("textual", reason=TEXTUAL_MISSING)

from kernel.app import Kernel  # noqa: E402
from kernel.tui.app import KernelTui  # noqa: E402
from kernel.tui.backend import Backend  # noqa: E402
from kernel.tui.local import LocalBackend  # noqa: E402
from kernel.tui.remote import HttpBackend  # noqa: E402
from kernel.tui.screens import AuditScreen  # noqa: E402

OWNER = ZoneInfo("Asia/Shanghai")  # tests/conftest.py's write_config sets it
MACHINE = "America/New_York"
API_KEY = "tui-zone-key-0123456789abcdef"


@pytest.fixture
def machine_zone(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """The process's own zone (what ``datetime.now()`` and ``time.localtime`` use) is
    New York for the test."""
    monkeypatch.setenv("TZ", MACHINE)
    time.tzset()
    assert time.strftime("%Z", time.localtime()) in ("EST", "EDT")
    yield
    monkeypatch.undo()
    time.tzset()


async def chat_and_audit(kernel: Kernel, backend: Backend, sim: AnthropicSim) -> None:
    """A turn, then the chat list's line and the audit window's rows, each asserted to
    be in the owner's zone."""
    sim.enqueue(text_reply("Hello."))
    app = KernelTui(backend)
    async with app.run_test() as pilot:
        await until(pilot, lambda: bool(app.query("#chats TextLine")))
        await send(pilot, "hi")
        try:
            await until(pilot, lambda: not app.busy and app.chat.stored)
        except TimeoutError:
            raise AssertionError(lines(app)) from None
        await app.refresh_chats()
        [row] = await kernel.store.list_sessions(limit=1, channel="console")
        session = row.id
        label = [w.text for w in app.query("#chats TextLine")][1]
        owner_time = row.updated_at.astimezone(OWNER).strftime("%Y-%m-%d %H:%M")
        machine_time = row.updated_at.astimezone(ZoneInfo(MACHINE)).strftime("%Y-%m-%d %H:%M")
        assert label.endswith("\n" + owner_time) and machine_time not in label

        await kernel.audit.record("tool.call", session_id=session, actor="model", tool="x")
        await pilot.press("f3")
        await until(pilot, lambda: isinstance(app.screen, AuditScreen))
        shown = [w.text for w in app.screen.query(".audit-row")]
        events = await kernel.audit.events(session, limit=200)
        assert shown and len(shown) == len(events)
        for text, event in zip(shown, events, strict=True):
            at = datetime.fromisoformat(event.at)
            assert at.astimezone(OWNER).strftime("%m-%d %H:%M:%S") in text
            assert at.astimezone(ZoneInfo(MACHINE)).strftime("%m-%d %H:%M:%S") not in text


async def test_in_process_the_chat_list_and_the_audit_show_the_owners_zone(
    machine_zone: None, make_kernel: KernelFactory, anthropic_sim: AnthropicSim
) -> None:
    kernel = await make_kernel(anthropic_sim, language="en")
    await chat_and_audit(kernel, LocalBackend(kernel), anthropic_sim)


async def test_over_the_sidecar_the_chat_list_and_the_audit_show_the_owners_zone(
    machine_zone: None, sidecar: SidecarFactory, anthropic_sim: AnthropicSim
) -> None:
    sc = await sidecar(anthropic_sim, api_key=API_KEY)
    backend = HttpBackend(sc.url, API_KEY)
    try:
        await chat_and_audit(sc.kernel, backend, anthropic_sim)
    finally:
        await backend.close()
