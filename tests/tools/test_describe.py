"""An approval a person can read (issue 34, item 12): the question names the tool and
what the call will do in one line; the full arguments come beside it as ``details``."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

from kernel.core import i18n
from kernel.core.asks import Answer, AskOutcome
from kernel.tools.describe import remote
from kernel.tools.registry import ToolContext, ToolRegistry


@pytest.fixture(autouse=True)
def chinese() -> Iterator[None]:
    """The catalogue's default language, whatever an earlier test left set."""
    before = i18n.get_language()
    i18n.set_language("zh")
    yield
    i18n.set_language(before)


async def asked_for(registry: ToolRegistry, name: str, args: dict[str, Any]) -> tuple[str, str]:
    """The question and details the approval gate put to the owner (who approves)."""
    seen: list[tuple[str, str]] = []

    async def ask(question: str, options: list[str], **kw: Any) -> Answer:
        seen.append((question, str(kw.get("details", ""))))
        return Answer(AskOutcome.ANSWERED, 0)

    outcome = await registry.call(name, args, ToolContext(ask=ask))
    assert outcome.ok, outcome.content
    [shown] = seen
    return shown


def gated(registry: ToolRegistry, name: str, **kw: Any) -> None:
    registry.register(
        name,
        "a test tool",
        {"type": "object", "properties": {}, "additionalProperties": True},
        lambda **args: "done",
        **kw,
    )
    registry.require_approval(name, 5.0)


async def test_a_command_is_shown_as_the_command() -> None:
    registry = ToolRegistry()
    gated(registry, "shell")
    question, details = await asked_for(
        registry, "shell", {"command": "rm -rf build\necho done", "cwd": "/srv"}
    )
    assert question == "🔐 需要你的批准：shell\n$ rm -rf build…"
    assert json.loads(details) == {"command": "rm -rf build\necho done", "cwd": "/srv"}


async def test_a_file_write_is_shown_as_its_path() -> None:
    registry = ToolRegistry()
    gated(registry, "write_file")
    question, _ = await asked_for(
        registry, "write_file", {"path": "/etc/hosts", "content": "x" * 5000}
    )
    assert question == "🔐 需要你的批准：write_file\n/etc/hosts"


async def test_an_mcp_tool_is_shown_by_server_and_name_with_its_arguments() -> None:
    registry = ToolRegistry()
    gated(registry, "mcp_github__create_issue", describe=remote("github", "create_issue"))
    long_body = "b" * 500
    question, details = await asked_for(
        registry,
        "mcp_github__create_issue",
        {"repo": "me/app", "title": "Crash on start", "body": long_body},
    )
    header, summary = question.split("\n")
    assert header == "🔐 需要你的批准：github · create_issue"
    assert summary.startswith("repo=me/app, title=Crash on start, body=bbb")
    assert len(summary) <= 120 and summary.endswith("…")
    assert json.loads(details)["body"] == long_body  # whole beside it


async def test_a_describer_that_fails_falls_back_to_the_generic_words() -> None:
    def broken(args: dict[str, Any]) -> tuple[str, str]:
        raise KeyError("oops")

    registry = ToolRegistry()
    gated(registry, "odd", describe=broken)
    question, _ = await asked_for(registry, "odd", {"x": 1})
    assert question == "🔐 需要你的批准：odd\nx=1"


@pytest.mark.parametrize(
    "hidden", ["\u202e", "\u2066", "\u061c", "\u2060", "\u2064", "\ufeff", "\x80", "\x9b"]
)
async def test_a_command_reads_as_it_will_run(hidden: str) -> None:
    """A direction override (or another invisible character) in model-written arguments
    cannot make the line read as a harmless command: it is taken out, and the full
    arguments show it as its escape."""
    registry = ToolRegistry()
    gated(registry, "shell")
    command = f"echo {hidden}fr- mr && ls"
    question, details = await asked_for(registry, "shell", {"command": command})
    assert question == "🔐 需要你的批准：shell\n$ echo fr- mr && ls"
    assert hidden not in details and f"\\u{ord(hidden):04x}" in details
    assert json.loads(details) == {"command": command}


async def test_a_command_cut_to_its_first_line_says_so() -> None:
    registry = ToolRegistry()
    gated(registry, "shell")
    question, _ = await asked_for(registry, "shell", {"command": "\u202e\n  ls\x85rm -rf ~"})
    assert question == "🔐 需要你的批准：shell\n$ ls…"  # the rest is there, one tap away
