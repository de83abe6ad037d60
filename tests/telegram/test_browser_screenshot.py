"""A browser screenshot reaches the owner's chat (issue 38 item 4): a Kernel with
``[browser] enabled`` launches the system's Chromium itself at the model's first browser
call (the production path: Playwright's launch of ``[browser] executable``), the model
opens a local page and takes a screenshot, and the Telegram simulator receives it as a
photo; it is kept as an artifact of the chat's session, and Chromium ends with Kernel.

The page is on 127.0.0.1, so this Kernel sets ``[web] allow_private = true``: the
guard's refusals are tested in tests/browser/test_browser.py. One Chromium for the
module; skipped, saying why, where chromium or Playwright is absent."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.sim.script import text_reply, tool_reply
from tests.sim.telegram_sim import OWNER
from tests.telegram.conftest import Factory
from tests.webconsole.chromium import CHROMIUM

if not Path(CHROMIUM).is_file():
    pytest.skip(
        f"no chromium at {CHROMIUM} (apt-get install chromium, or set KERNEL_CHROMIUM)",
        allow_module_level=True,
    )
pytest.importorskip("playwright.async_api", reason="Playwright is not installed (uv sync --dev)")

from tests.browser.site import Site  # noqa: E402

pytestmark = pytest.mark.timeout(240)


async def test_a_screenshot_is_sent_to_the_chat_as_a_photo_and_kept(bot: Factory) -> None:
    async with Site() as site:
        h = await bot(
            extra=f"[browser]\nenabled = true\nexecutable = {json.dumps(CHROMIUM)}\n"
            "[web]\nallow_private = true\n"
        )
        h.model.enqueue(
            tool_reply("browser_open", {"url": f"http://127.0.0.1:{site.port}/about"}),
            tool_reply("browser_screenshot", {}),
            text_reply("Here it is."),
        )
        assert await h.converse("show me the about page") == "Here it is."
        [photo] = h.tg.calls_to("sendPhoto")
        assert photo.params["chat_id"] == OWNER
        assert photo.params["caption"] == "🖼 Screenshot: About us"
        assert photo.files["photo"].startswith(b"\x89PNG")
        [shown] = [m for m in h.bot_messages() if m.kind == "photo"]
        assert shown.text == "🖼 Screenshot: About us"
        # kept as an artifact of the chat's session, the file on disk as sent
        session = h.kernel.agent.sessions.current_session(f"telegram:{OWNER}")
        assert session is not None
        [artifact] = [
            a for a in await h.kernel.artifacts.list(session) if a.name.startswith("screenshot-")
        ]
        assert artifact.kind == "tool_output" and artifact.name.startswith("screenshot-")
        kept = h.kernel.config.data_dir / artifact.path
        assert kept.read_bytes() == photo.files["photo"]
        # the model saw it too, and was told where it went
        sent = json.dumps(h.model.requests[-1].body)
        assert '"type": "image"' in sent and "file #" in sent
        await h.channel.stop()
        await h.kernel.stop()  # Chromium ends with Kernel
    assert "/about" in site.hits
