"""The per-CLI stream formatters: steps, noise, completion, failures, the answer."""

from __future__ import annotations

import json
from typing import Any

from kernel.delegate.formats import ClaudeStream, CodexStream, GeminiStream, PlainText


def feed(formatter: Any, *events: Any) -> list[list[str]]:
    return [formatter.feed(e if isinstance(e, str) else json.dumps(e)) for e in events]


def test_claude_init_is_noise_and_result_ends_with_its_text() -> None:
    f = ClaudeStream()
    steps = feed(
        f,
        {"type": "system", "subtype": "init", "tools": ["Bash"]},
        "Warning: a banner that is not JSON",
        {
            "type": "assistant",
            "message": {
                "content": [
                    {"type": "text", "text": "**Plan**\nfirst I look"},
                    {"type": "tool_use", "name": "Read", "input": {"file_path": "/a/b.py"}},
                ]
            },
        },
    )
    assert steps == [[], [], ["Plan", "Read: /a/b.py"]]
    assert not f.done
    assert feed(f, {"type": "result", "subtype": "success", "result": "All good"}) == [[]]
    assert f.done and f.answer() == "All good" and not f.failure


def test_claude_error_result_is_a_failure_and_falls_back_to_the_last_text() -> None:
    f = ClaudeStream()
    feed(f, {"type": "assistant", "message": {"content": [{"type": "text", "text": "partial"}]}})
    feed(f, {"type": "result", "subtype": "error_max_turns", "is_error": True})
    assert f.done and f.failure == "error_max_turns" and f.answer() == "partial"


def test_codex_items_turn_completed_and_turn_failed() -> None:
    f = CodexStream()
    steps = feed(
        f,
        {"type": "thread.started", "thread_id": "t"},
        {"type": "turn.started"},
        {"type": "item.started", "item": {"type": "command_execution", "command": "pytest"}},
        {
            "type": "item.completed",
            "item": {"type": "command_execution", "command": "pytest", "exit_code": 1},
        },
        {"type": "item.completed", "item": {"type": "web_search", "query": "asyncio"}},
        {
            "type": "item.updated",
            "item": {
                "type": "todo_list",
                "items": [{"text": "a", "completed": True}, {"text": "b", "completed": False}],
            },
        },
        {"type": "item.completed", "item": {"type": "agent_message", "text": "Fixed."}},
    )
    assert steps == [
        [],
        [],
        ["$ pytest"],
        ["$ pytest (exit 1)"],
        ["search: asyncio"],
        ["[1/2] b"],
        ["Fixed."],
    ]
    feed(f, {"type": "turn.completed", "usage": {}})
    assert f.done and f.answer() == "Fixed."

    failed = CodexStream()
    assert feed(failed, {"type": "turn.failed", "error": {"message": "quota"}}) == [[]]
    assert failed.done and failed.failure == "quota"


def test_gemini_deltas_join_and_the_answer_is_the_text_after_the_last_tool() -> None:
    f = GeminiStream()
    steps = feed(
        f,
        {"type": "init", "session_id": "g", "model": "m"},
        {"type": "message", "role": "user", "content": "do it"},
        {"type": "message", "role": "assistant", "content": "Checking", "delta": True},
        {"type": "tool_use", "tool_name": "read_file", "parameters": {"file_path": "x.md"}},
        {"type": "tool_result", "tool_id": "1", "status": "success", "output": "..."},
        {"type": "message", "role": "assistant", "content": "It says ", "delta": True},
        {"type": "message", "role": "assistant", "content": "hello.", "delta": True},
    )
    assert steps == [[], [], ["Checking"], ["read_file: x.md"], [], ["It says"], ["It says hello."]]
    feed(f, {"type": "result", "status": "success", "stats": {}})
    assert f.done and f.answer() == "It says hello." and not f.failure

    broken = GeminiStream()
    feed(broken, {"type": "result", "status": "error", "error": {"message": "API key invalid"}})
    assert broken.done and broken.failure == "API key invalid"


def test_turn_finished_also_ends_a_stream_and_plain_text_lines_are_steps() -> None:
    f = GeminiStream()
    feed(f, {"type": "turn.finished"})
    assert f.done
    plain = PlainText()
    assert plain.feed("\x1b[32mcompiling\x1b[0m   step 1") == ["compiling step 1"]
    assert plain.feed("   ") == []
    assert len(plain.feed("y" * 1000)[0]) == 300
