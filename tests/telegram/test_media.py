"""Photos and documents from the owner: what reaches the model, what is refused, and
what history keeps."""

from __future__ import annotations

import base64
import json
import struct
import zlib
from collections.abc import Callable

from tests.sim.context import context_index, owner_parts
from tests.sim.script import text_reply
from tests.telegram.conftest import CONV, Factory


def png(width: int = 4, height: int = 3) -> bytes:
    def chunk(kind: bytes, data: bytes) -> bytes:
        return (
            struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))
        )

    raw = b"".join(b"\x00" + b"\x00\x00\x00" * width for _ in range(height))
    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", header)
        + chunk(b"IDAT", zlib.compress(raw))
        + chunk(b"IEND", b"")
    )


async def stored_texts(h) -> list[str]:  # type: ignore[no-untyped-def]
    session = h.kernel.agent.sessions.current_session(CONV)
    return [m.text for m in await h.kernel.store.load_messages(session)]


async def test_photo_with_caption_reaches_the_model_and_history_keeps_a_marker(
    bot: Factory,
) -> None:
    h = await bot()
    image = png()
    h.model.enqueue(text_reply("A tiny black picture."))
    before = len(h.tg.calls_to("sendMessage"))
    h.tg.inject_photo(image, caption="what is this?")
    await h.tg.wait_until(lambda: len(h.tg.calls_to("sendMessage")) > before)
    await h.settle()

    assert h.texts()[-1] == "A tiny black picture."
    body = h.model.requests[-1].body
    assert context_index(body) == len(body["messages"]) - 1  # the time, after the photo
    content = owner_parts(body["messages"][-1])
    assert [b["type"] for b in content] == ["image", "text"]
    blocks = {b["type"]: b for b in content}
    assert blocks["image"]["source"]["data"] == base64.b64encode(image).decode()
    assert blocks["text"]["text"] == "what is this?"
    assert await stored_texts(h) == ["[image processed]\nwhat is this?", "A tiny black picture."]


async def test_oversized_photo_is_refused_before_download(bot: Factory) -> None:
    h = await bot()
    update = h.tg.inject_photo(png(), caption="big")
    # A second photo whose largest size claims 25 MB.
    message = dict(update["message"])
    message["message_id"] += 1000
    message["photo"] = [dict(p) for p in message["photo"]]
    message["photo"][-1]["file_size"] = 25 * 1024 * 1024
    h.model.enqueue(text_reply("first photo seen"))
    await h.tg.wait_until(lambda: "first photo seen" in h.texts(), timeout=30)
    await h.settle()
    gets = len(h.tg.calls_to("getFile"))
    reply = await h.ask_update({"message": message})
    assert "too big (25.0 MB; limit 20 MB)" in reply
    assert len(h.tg.calls_to("getFile")) == gets


async def answer_to(h, inject: Callable[[], object]) -> str:  # type: ignore[no-untyped-def]
    """The first message the bot sends after ``inject()`` puts an update in."""
    before = len(h.tg.calls_to("sendMessage"))
    inject()
    await h.tg.wait_until(lambda: len(h.tg.calls_to("sendMessage")) > before)
    return str(h.tg.calls_to("sendMessage")[before].params["text"])


THIRTY_MB = b"\xff\xd8\xff\xe0" + bytes(30 * 1024 * 1024)


async def test_photo_without_a_declared_size_is_checked_after_download(bot: Factory) -> None:
    h = await bot()
    h.tg.download_limit = None  # a local Bot API server serves files of any size
    requests = len(h.model.requests)

    reply = await answer_to(h, lambda: h.tg.inject_photo(THIRTY_MB, sizes=1, declare_size=False))

    assert "too big (30.0 MB; limit 20 MB)" in reply and "compress it" in reply
    assert len(h.tg.downloads) == 1  # nothing said how big it was before it came
    await h.settle()
    assert len(h.model.requests) == requests  # nothing was sent to the model
    assert h.kernel.agent.sessions.current_session(CONV) is None  # nor kept in any history


async def test_undeclared_document_is_refused_as_it_downloads(bot: Factory) -> None:
    """No size in the message, getFile or the answer (chunked): the download is counted
    and stopped at the limit; nothing is saved, nothing reaches the model."""
    h = await bot()
    h.tg.download_limit = None
    requests = len(h.model.requests)

    reply = await answer_to(
        h,
        lambda: h.tg.inject_document(
            b"", "notes.txt", declare_size=False, generated=30 * 1024 * 1024
        ),
    )

    assert "The file is over the 20 MB limit" in reply and "send only the part" in reply
    assert len(h.tg.downloads) == 1
    await h.settle()
    assert len(h.model.requests) == requests
    downloads = h.kernel.config.data_dir / "downloads"
    assert not downloads.exists() or list(downloads.iterdir()) == []


async def test_photo_size_known_to_get_file_is_refused_before_download(bot: Factory) -> None:
    h = await bot()
    h.tg.download_limit = None
    reply = await answer_to(
        h,
        lambda: h.tg.inject_photo(THIRTY_MB, sizes=1, declare_size=False, size_on_get_file=True),
    )

    assert "too big (30.0 MB; limit 20 MB)" in reply
    assert h.tg.downloads == [] and len(h.tg.calls_to("getFile")) == 1


async def test_small_photo_without_a_declared_size_is_answered(bot: Factory) -> None:
    h = await bot()
    h.model.enqueue(text_reply("Seen it."))
    before = len(h.tg.calls_to("sendMessage"))
    h.tg.inject_photo(png(), caption="and this?", declare_size=False)
    await h.tg.wait_until(lambda: len(h.tg.calls_to("sendMessage")) > before)
    await h.settle()
    assert h.texts()[-1] == "Seen it."
    body = h.model.requests[-1].body
    assert context_index(body) == len(body["messages"]) - 1
    assert [b["type"] for b in owner_parts(body["messages"][-1])] == ["image", "text"]


async def test_text_document_is_read_and_slimmed_in_history(bot: Factory) -> None:
    h = await bot()
    code = "def add(a, b):\n    return a + b  # <sum> & more\n"
    h.model.enqueue(text_reply("It adds two numbers."))
    before = len(h.tg.calls_to("sendMessage"))
    h.tg.inject_document(code.encode(), "calc.py", caption="explain")
    await h.tg.wait_until(lambda: len(h.tg.calls_to("sendMessage")) > before)
    await h.settle()

    # The file is a block of Kernel's own, the caption the owner's words after it.
    content = h.model.requests[-1].body["messages"][-1]["content"]
    texts = [b["text"] for b in content if b["type"] == "text"]
    assert texts[:2] == [f"[file: calc.py]\n```\n{code}\n```", "explain"]
    assert (await stored_texts(h))[0] == "[file calc.py processed]\nexplain"
    assert h.texts()[-1] == "It adds two numbers."
    saved = list((h.kernel.config.data_dir / "downloads").iterdir())
    assert [p.name.endswith("_calc.py") for p in saved] == [True]


async def test_known_name_without_extension_is_read(bot: Factory) -> None:
    h = await bot()
    h.model.enqueue(text_reply("A build file."))
    before = len(h.tg.calls_to("sendMessage"))
    h.tg.inject_document(b"all:\n\techo hi\n", "Makefile")
    await h.tg.wait_until(lambda: len(h.tg.calls_to("sendMessage")) > before)
    await h.settle()
    assert "[file: Makefile]" in json.dumps(h.model.requests[-1].body["messages"][-1])


async def test_long_document_is_cut_to_50k(bot: Factory) -> None:
    h = await bot()
    h.model.enqueue(text_reply("long"))
    before = len(h.tg.calls_to("sendMessage"))
    h.tg.inject_document(("x" * 99 + "\n").encode() * 700, "big.log")
    await h.tg.wait_until(lambda: len(h.tg.calls_to("sendMessage")) > before)
    await h.settle()
    sent = h.model.requests[-1].body["messages"][-1]["content"][0]["text"]
    assert sent.count("x") == 49_500 and "first 50000 characters" in sent


async def test_refused_documents_name_the_reason(bot: Factory) -> None:
    h = await bot()
    cases = [
        (b"%PDF-1.7", "report.pdf", None, "PDF files are not supported yet (report.pdf)"),
        (b"PK\x03\x04", "notes.docx", None, "Word files are not supported yet"),
        (b"\x00\x01", "blob.xyz", None, "Unknown file type (blob.xyz)"),
        ("你好".encode("gbk"), "legacy.txt", None, "legacy.txt is not UTF-8 text"),
        (b"tiny", "huge.txt", 21 * 1024 * 1024, "too big (21.0 MB; limit 20 MB)"),
    ]
    for data, name, size, expected in cases:
        reply = await h.ask_document(data, name, file_size=size)
        assert expected in reply, (name, reply)
    assert h.model.requests == []
    assert not h.kernel.agent.sessions.is_busy(CONV)
