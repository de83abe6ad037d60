"""Call results as the model reads them: text, images, resources, structured content."""

from __future__ import annotations

import base64
import json
import re
from pathlib import Path
from typing import Any

import mcp.types as mt
import pytest

from kernel.mcp.results import RESULT_LIMIT, clip, render_result

PNG = (  # a 1x1 PNG, 70 bytes
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg=="
)


def text(value: str) -> mt.TextContent:
    return mt.TextContent(type="text", text=value)


def test_text_blocks_are_joined() -> None:
    result = mt.CallToolResult(content=[text("one"), text("two")])
    assert render_result(result) == (True, "one\ntwo", [])


def test_is_error_is_reported() -> None:
    result = mt.CallToolResult(content=[text("no such city")], is_error=True)
    assert render_result(result) == (False, "no such city", [])


def test_images_go_to_the_model_and_the_rest_is_described() -> None:
    result = mt.CallToolResult(
        content=[
            mt.ImageContent(type="image", data=PNG, mime_type="image/png"),
            mt.ImageContent(type="image", data=PNG, mime_type="image/tiff"),
            mt.AudioContent(type="audio", data="A" * 4096, mime_type="audio/wav"),
        ]
    )
    ok, shown, images = render_result(result)
    assert ok
    assert [(i.media_type, i.data) for i in images] == [("image/png", PNG)]
    lines = shown.splitlines()
    assert lines[0] == "[image image/png, 70 bytes]"
    assert lines[1].startswith("[image image/tiff, 70 bytes: not shown (format or size")
    assert lines[2].startswith("[audio audio/wav, 3.0 KB: not shown (audio is not passed")


def test_resources_and_links() -> None:
    result = mt.CallToolResult(
        content=[
            mt.EmbeddedResource(
                type="resource",
                resource=mt.TextResourceContents(uri="file:///a.txt", text="inside a"),
            ),
            mt.EmbeddedResource(
                type="resource",
                resource=mt.BlobResourceContents(
                    uri="file:///b.bin", blob="AAAA", mime_type="application/zip"
                ),
            ),
            mt.ResourceLink(type="resource_link", uri="https://example.com/c", name="c"),
        ]
    )
    _, shown, _ = render_result(result)
    assert shown.splitlines() == [
        "[resource file:///a.txt]",
        "inside a",
        "[resource file:///b.bin, application/zip, 3 bytes: binary content not shown]",
        "[resource link: c (https://example.com/c)]",
    ]


def test_structured_content_is_added_unless_mirrored() -> None:
    data = {"city": "Paris", "celsius": 21.5}
    alone = mt.CallToolResult(content=[], structured_content=data)
    assert json.loads(render_result(alone)[1]) == data

    mirrored = mt.CallToolResult(
        content=[text(json.dumps(data, indent=2))], structured_content=data
    )
    assert json.loads(render_result(mirrored)[1]) == data  # once, not twice

    wrapped = mt.CallToolResult(content=[text("hello")], structured_content={"result": "hello"})
    assert render_result(wrapped)[1] == "hello"

    different = mt.CallToolResult(content=[text("see data")], structured_content={"n": 1})
    assert render_result(different)[1] == 'see data\n{"n": 1}'


def test_empty_and_huge_results() -> None:
    assert render_result(mt.CallToolResult(content=[])) == (
        True,
        "(the tool returned no content)",
        [],
    )
    huge = "a" * RESULT_LIMIT + "b" * 1000
    shown = clip(huge)
    assert len(shown) < RESULT_LIMIT + 100
    assert shown.startswith("a" * 100) and shown.endswith("b" * 100)
    assert "[1000 characters omitted]" in shown


# ------------------------------------------------------------ recorded shapes

FIXTURES = Path(__file__).with_name("fixtures")
BASE64_RUN = re.compile(r"[A-Za-z0-9+/]{64,}")  # no base64 of any size reaches the text


def recorded(fixture: str) -> list[dict[str, Any]]:
    return list(json.loads((FIXTURES / fixture).read_text(encoding="utf-8"))["calls"])


def call(fixture: str, tool: str, nth: int = 0) -> mt.CallToolResult:
    found = [c for c in recorded(fixture) if c["tool"] == tool]
    return mt.CallToolResult.model_validate(found[nth]["result"])


FILESYSTEM = "server-filesystem-2026.8.31.json"
EVERYTHING = "server-everything-2026.8.31.json"
TIME = "mcp-server-time-2026.10.19.json"
FETCH = "mcp-server-fetch-2026.10.24.json"


@pytest.mark.parametrize(
    ("fixture", "index"),
    [
        (name, i)
        for name in (FILESYSTEM, EVERYTHING, TIME, FETCH)
        for i, c in enumerate(recorded(name))
        if "result" in c
    ],
)
def test_every_recorded_result_says_each_thing_once(fixture: str, index: int) -> None:
    result = mt.CallToolResult.model_validate(recorded(fixture)[index]["result"])
    _, shown, images = render_result(result)
    assert BASE64_RUN.search(shown) is None, shown[:200]
    for block in result.content:
        if isinstance(block, mt.TextContent) and len(block.text) > 20:
            assert shown.count(block.text.strip()) == 1, (block.text, shown)
    distinct = {b.data for b in result.content if isinstance(b, mt.ImageContent)}
    assert len(images) == len(distinct)


def test_filesystem_text_arrives_once() -> None:
    """Issue 13: ``text\\n{"content": "text"}`` for every filesystem tool."""
    assert render_result(call(FILESYSTEM, "read_text_file")) == (
        True,
        "hello from notes\nsecond line\n",
        [],
    )
    assert render_result(call(FILESYSTEM, "list_directory"))[1] == (
        "[FILE] big.png\n[FILE] notes.txt"
    )
    tree = call(FILESYSTEM, "directory_tree")
    assert render_result(tree)[1] == tree.content[0].text  # type: ignore[union-attr]


def test_filesystem_media_is_one_image_and_no_base64_text() -> None:
    """Issue 13: read_media_file put the PNG's base64 into the text and the image."""
    ok, shown, images = render_result(call(FILESYSTEM, "read_media_file"))
    assert ok and shown == "[image image/png, 70 bytes]"
    assert [(i.media_type, i.data) for i in images] == [("image/png", PNG)]


def test_structured_content_mirrored_by_pretty_json_is_shown_once() -> None:
    clock = call(TIME, "get_current_time")
    shown = render_result(clock)[1]
    assert shown == clock.content[0].text  # type: ignore[union-attr]
    weather = call(EVERYTHING, "get-structured-content")
    assert render_result(weather)[1] == (
        '{"temperature":36,"conditions":"Light rain / drizzle","humidity":82}'
    )
    # Key order and whitespace do not matter.
    reordered = mt.CallToolResult(
        content=[text('{ "b": 2,\n  "a": 1 }')], structured_content={"a": 1, "b": 2}
    )
    assert render_result(reordered)[1] == '{ "b": 2,\n  "a": 1 }'


def test_embedded_resources_and_links_from_server_everything() -> None:
    text_resource = render_result(call(EVERYTHING, "get-resource-reference", 0))[1]
    assert text_resource.splitlines() == [
        "Returning resource reference for Resource 1:",
        "[resource demo://resource/dynamic/text/1 (text/plain)]",
        "Resource 1: This is a plaintext resource created at 10:45:22 PM",
        "You can access this resource using the URI: demo://resource/dynamic/text/1",
    ]
    blob = render_result(call(EVERYTHING, "get-resource-reference", 1))[1]
    assert blob.splitlines()[1:3] == [  # a text/plain blob is decoded, once
        "[resource demo://resource/dynamic/blob/2 (text/plain)]",
        "Resource 2: This is a base64 blob created at 10:45:22 PM",
    ]
    gzip = render_result(call(EVERYTHING, "gzip-file-as-resource"))[1]
    assert gzip == (
        "[resource demo://resource/session/a.gz, application/gzip, 25 bytes: "
        "binary content not shown]"
    )
    links = render_result(call(EVERYTHING, "get-resource-links"))[1]
    assert links.splitlines()[1:] == [
        "[resource link: Blob Resource 1 (demo://resource/dynamic/blob/1, text/plain)] "
        "Resource 1: plaintext resource",
        "[resource link: Text Resource 2 (demo://resource/dynamic/text/2, text/plain)] "
        "Resource 2: plaintext resource",
    ]


def test_audio_and_binary_blobs_are_described_never_pasted() -> None:
    wav = base64.b64encode(b"RIFF" + bytes(4000)).decode()
    result = mt.CallToolResult(
        content=[
            mt.AudioContent(type="audio", data=wav, mime_type="audio/wav"),
            mt.EmbeddedResource(
                type="resource",
                resource=mt.BlobResourceContents(
                    uri="file:///p.png", blob=PNG, mime_type="image/png"
                ),
            ),
            mt.EmbeddedResource(  # binary carried as "text" with a binary MIME type
                type="resource",
                resource=mt.TextResourceContents(
                    uri="file:///x.bin", text=wav, mime_type="application/octet-stream"
                ),
            ),
            text(wav),  # a server pasting base64 into a text block
        ],
        structured_content={"file": {"name": "a.wav", "data": wav}},
    )
    _, shown, images = render_result(result)
    assert BASE64_RUN.search(shown) is None
    assert [i.data for i in images] == [PNG]  # the blob image goes to the model as an image
    lines = shown.splitlines()
    assert lines[0] == "[audio audio/wav, 3.9 KB: not shown (audio is not passed to models)]"
    assert lines[1] == "[image file:///p.png, image/png, 70 bytes]"
    assert lines[2].startswith("[resource file:///x.bin, application/octet-stream, 3.9 KB")
    assert lines[3] == "[base64 data, 3.9 KB, not shown]"
    assert json.loads(lines[4]) == {
        "file": {"name": "a.wav", "data": "[base64 data, 3.9 KB, not shown]"}
    }
