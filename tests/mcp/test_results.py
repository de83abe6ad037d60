"""Call results as the model reads them: text, images, resources, structured content."""

from __future__ import annotations

import json

import mcp.types as mt

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
        "[resource file:///b.bin: application/zip, 3 bytes, binary content not shown]",
        "[resource link: c https://example.com/c]",
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
