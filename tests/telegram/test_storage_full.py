"""Issue 33 item 6: storage trouble answers every message. The data directory is a real
4 MB tmpfs filled to the last byte while Kernel runs (root and mount(8), else skipped):
a command and a message alike get one notice, sent directly through the Bot API since
the outbox cannot be written, saying what is wrong (the disk is full, where) and what to
do, in the owner's language; once space is freed the same thing works again."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.sim.script import text_reply
from tests.storage import fill, free, tmpfs
from tests.telegram.conftest import BotHarness, Factory

FULL_EN = (
    "⚠️ Kernel cannot write to its database at {data} (no space left on device), so it "
    "could not handle what you just sent. Free space on that disk, then send it again."
)
FULL_ZH = (
    "⚠️ Kernel 无法写入它的数据库（{data}：no space left on device），刚才发来的内容没能处理。"
    "请释放该磁盘的空间，然后再发一次。"
)


async def send(h: BotHarness, text: str) -> list[str]:
    """Send ``text``; the chat's bot messages that are new once the bot said something."""
    before = len(h.bot_messages())
    h.tg.inject_text(text)
    await h.tg.wait_until(lambda: len(h.bot_messages()) > before)
    return h.texts()[before:]


@pytest.mark.parametrize("command", ["/remember buy milk", "/status"])
async def test_a_command_on_a_full_disk_is_answered(
    bot: Factory, tmp_path: Path, command: str
) -> None:
    with tmpfs(tmp_path / "mnt", size="4m") as mount:
        data = mount / "data"
        h = await bot(data_dir=str(data))
        fill(mount)
        notice = FULL_EN.format(data=data)
        before = len(h.bot_messages())
        assert await send(h, command) == [notice]
        assert await h.kernel.memories.count() == 0  # nothing was remembered
        free(mount)  # the same command works again; updates are handled in order, so
        await send(h, command)  # whatever the failed one still said came before it
        await h.settle()
        told, answer = h.texts()[before:]  # the notice once, then the answer
        assert told == notice
        if command.startswith("/remember"):
            assert answer == "Remembered (/memory lists them all)"
            assert await h.kernel.memories.count() == 1
        else:
            assert answer.startswith("Model: ")


async def test_a_command_on_a_full_disk_is_answered_in_the_owners_language(
    bot: Factory, tmp_path: Path
) -> None:
    with tmpfs(tmp_path / "mnt", size="4m") as mount:
        data = mount / "data"
        h = await bot(data_dir=str(data), language="zh")
        fill(mount)
        assert await send(h, "/remember 买牛奶") == [FULL_ZH.format(data=data)]


async def test_a_message_on_a_full_disk_is_told_once(bot: Factory, tmp_path: Path) -> None:
    with tmpfs(tmp_path / "mnt", size="4m") as mount:
        data = mount / "data"
        h = await bot(data_dir=str(data))
        fill(mount)
        notice = FULL_EN.format(data=data)
        before = len(h.bot_messages())
        h.tg.inject_text("what is on my list?")
        await h.tg.wait_until(lambda: notice in h.texts())
        await h.settle()
        free(mount)
        h.model.enqueue(text_reply("milk, once the disk has room"))
        h.tg.inject_text("and now?")
        await h.tg.wait_until(lambda: "milk, once the disk has room" in h.texts())
        await h.settle()
        # The placeholder became the notice; no second notice, no "Internal error".
        assert h.texts()[before:] == [notice, "milk, once the disk has room"]


async def test_a_message_from_while_kernel_was_down_is_told_when_it_cannot_be_kept(
    bot: Factory, tmp_path: Path
) -> None:
    """Such a message is kept to be offered later, not handled now: when the store
    cannot keep it either, the owner hears so instead of losing it in silence."""
    with tmpfs(tmp_path / "mnt", size="4m") as mount:
        data = mount / "data"
        h = await bot(data_dir=str(data))
        fill(mount)
        before = len(h.bot_messages())
        update = h.tg.inject_text("sent while you were down")
        update["message"]["date"] -= 300  # before polling began
        notice = FULL_EN.format(data=data)
        await h.tg.wait_until(lambda: notice in h.texts())
        free(mount)
        await send(h, "/remember buy milk")
        await h.settle()
        assert h.texts()[before:] == [notice, "Remembered (/memory lists them all)"]
        assert h.model.requests == []  # it was not handled blindly either
