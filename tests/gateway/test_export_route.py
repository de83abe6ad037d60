"""``GET /agent/export`` (issue 40): the console's download of the owner's data, the same
files ``kernel export`` writes, as one zip; refused without the key (or a console
sign-in), like every route."""

from __future__ import annotations

import io
import json
import zipfile
from datetime import UTC, datetime

from kernel.core.messages import Message, TextBlock
from kernel.core.usage import Usage
from kernel.store.usage import UsageEntry, UsageStore
from tests.gateway.conftest import API_KEY, SidecarFactory
from tests.gateway.test_console_auth import sign_in
from tests.sim.anthropic_sim import AnthropicSim
from tests.waiting import wait_until


async def test_the_export_downloads_as_a_zip_with_the_key_or_a_console_sign_in(
    sidecar: SidecarFactory, anthropic_sim: AnthropicSim
) -> None:
    sc = await sidecar(anthropic_sim, api_key=API_KEY)
    store = sc.kernel.store  # written as a turn writes them, without a model call
    await store.add_memory("喜欢 neovim", "user")
    chat = await store.create_session("telegram", title="Trip", user_id="42")
    question = Message("user", [TextBlock("plan a trip to 成都")])
    await store.append_messages(
        chat.id, [question, Message("assistant", [TextBlock("Go in April.")])]
    )
    call = UsageEntry(datetime.now(UTC), "main", "model-a", "turn", Usage(120, 30), 0.002)
    await UsageStore(store).record(call)

    async with sc.http.get(f"{sc.url}/agent/export") as response:  # no key
        assert response.status == 401
        assert (await response.json())["error"]["code"] == "unauthorized"
    async with sc.http.get(f"{sc.url}/agent/export", headers=sc.headers()) as response:
        assert response.status == 200
        assert response.content_type == "application/zip"
        assert response.headers["Content-Disposition"].startswith(
            'attachment; filename="kernel-export-'
        )
        assert response.headers["X-Content-Type-Options"] == "nosniff"
        body = await response.read()
    with zipfile.ZipFile(io.BytesIO(body)) as archive:
        names = set(archive.namelist())
        assert {"memories.jsonl", "memories.md", "sessions.jsonl", "cron_jobs.jsonl"} <= names
        assert {"usage.csv", "cron_jobs.csv"} <= names
        memories = [json.loads(x) for x in archive.read("memories.jsonl").splitlines()]
        sessions = [json.loads(x) for x in archive.read("sessions.jsonl").splitlines()]
        chats = [archive.read(n).decode() for n in names if n.startswith("sessions/")]
        usage = archive.read("usage.csv").decode().splitlines()
    assert memories[0]["type"] == "kernel_export"
    assert [m["text"] for m in memories[1:]] == ["喜欢 neovim"]
    said = [b["text"] for s in sessions[1:] for m in s["messages"] for b in m["content"]]
    assert "plan a trip to 成都" in said and "Go in April." in said
    assert any("plan a trip to 成都" in chat and "Go in April." in chat for chat in chats)
    assert len(usage) == 2 and "model-a" in usage[1]
    data = sc.kernel.config.data_dir  # its work folder goes once the answer is sent
    await wait_until(lambda: not [p for p in data.iterdir() if p.name.startswith(".export-")])

    status, cookie, csrf = await sign_in(sc)  # the console's own sign-in opens it too
    assert status == 200
    headers = {"Cookie": cookie, "X-CSRF-Token": csrf}
    async with sc.http.get(f"{sc.url}/agent/export", headers=headers) as response:
        assert response.status == 200 and response.content_type == "application/zip"
