import json

import pytest

from kernel.core.errors import ToolError
from kernel.tools.repair import repair_arguments, resolve_tool_name

SEARCH = {
    "type": "object",
    "properties": {"query": {"type": "string"}, "count": {"type": "integer"}},
    "required": ["query"],
}


def schema(**props: str) -> dict[str, object]:
    return {"type": "object", "properties": {k: {"type": v} for k, v in props.items()}}


# ---------------------------------------------------------------- parsing


@pytest.mark.parametrize("raw", [None, "", "   "])
def test_empty_arguments_become_empty_dict(raw: str | None) -> None:
    assert repair_arguments(raw, SEARCH) == {}


def test_plain_json_and_dict_pass_through() -> None:
    assert repair_arguments('{"query": "abc", "count": 2}', SEARCH) == {"query": "abc", "count": 2}
    assert repair_arguments({"query": "abc"}, SEARCH) == {"query": "abc"}


def test_dict_input_is_not_mutated() -> None:
    raw = {"q": "abc"}
    assert repair_arguments(raw, SEARCH) == {"query": "abc"}
    assert raw == {"q": "abc"}


def test_truncated_string_is_closed() -> None:
    assert repair_arguments('{"query": "abc', SEARCH) == {"query": "abc"}


def test_truncated_nested_containers_are_closed_in_order() -> None:
    raw = '{"a": [1, {"b": "x'
    assert repair_arguments(raw, {}) == {"a": [1, {"b": "x"}]}


def test_truncated_after_comma_or_colon() -> None:
    assert repair_arguments('{"query": "abc",', SEARCH) == {"query": "abc"}
    assert repair_arguments('{"query": "abc", "count":', SEARCH) == {"query": "abc", "count": None}


def test_truncated_mid_key_drops_the_incomplete_member() -> None:
    assert repair_arguments('{"query": "abc", "cou', SEARCH) == {"query": "abc"}
    assert repair_arguments('{"query": "abc", "count": tr', SEARCH) == {"query": "abc"}


def test_truncated_after_escaped_quote_and_dangling_backslash() -> None:
    assert repair_arguments('{"query": "say \\"hi\\" now', SEARCH) == {"query": 'say "hi" now'}
    assert repair_arguments('{"query": "a\\', SEARCH) == {"query": "a"}


def test_trailing_commas_are_removed_but_not_inside_strings() -> None:
    raw = '{"query": "a,}", "tags": ["x", "y",],}'
    assert repair_arguments(raw, {}) == {"query": "a,}", "tags": ["x", "y"]}


def test_double_encoded_object() -> None:
    raw = json.dumps(json.dumps({"query": "abc"}))
    assert repair_arguments(raw, SEARCH) == {"query": "abc"}


@pytest.mark.parametrize(
    "raw",
    ['```json\n{"query": "abc"}\n```', '```\n{"query": "abc"}\n```', '```json\n{"query": "abc"'],
)
def test_markdown_fences_are_stripped(raw: str) -> None:
    assert repair_arguments(raw, SEARCH) == {"query": "abc"}


def test_python_literal_dict() -> None:
    raw = "{'query': 'abc', 'flag': True, 'other': None}"
    assert repair_arguments(raw, {}) == {"query": "abc", "flag": True, "other": None}


@pytest.mark.parametrize("raw", ["not json at all", "{{{{ ]]", "{'a': undefined_name}"])
def test_garbage_raises_tool_error(raw: str) -> None:
    with pytest.raises(ToolError, match="not valid JSON"):
        repair_arguments(raw, SEARCH)


@pytest.mark.parametrize(
    ("raw", "kind"), [("[1, 2]", "array"), ('"hello"', "string"), ("3", "int")]
)
def test_non_object_raises_tool_error(raw: str, kind: str) -> None:
    with pytest.raises(ToolError, match=f"must be a JSON object.*{kind}"):
        repair_arguments(raw, SEARCH)


# ---------------------------------------------------------------- shaping


@pytest.mark.parametrize("wrapper", ["input", "arguments", "args", "parameters"])
def test_wrapper_is_unwrapped(wrapper: str) -> None:
    assert repair_arguments({wrapper: {"query": "abc"}}, SEARCH) == {"query": "abc"}


def test_wrapper_holding_a_json_string_is_unwrapped() -> None:
    raw = json.dumps({"arguments": json.dumps({"query": "abc"})})
    assert repair_arguments(raw, SEARCH) == {"query": "abc"}


def test_wrapper_kept_when_schema_has_that_property() -> None:
    s = schema(input="object")
    assert repair_arguments({"input": {"x": 1}}, s) == {"input": {"x": 1}}


def test_wrapper_kept_when_other_keys_present() -> None:
    raw = {"input": {"query": "abc"}, "count": 1}
    assert repair_arguments(raw, SEARCH) == raw


@pytest.mark.parametrize(
    ("source", "target"),
    [
        ("q", "query"),
        ("workdir", "cwd"),
        ("num_results", "count"),
        ("start_line", "start"),
        ("end_line", "end"),
        ("cmd", "task"),
        ("command", "task"),
    ],
)
def test_key_aliases(source: str, target: str) -> None:
    assert repair_arguments({source: "v"}, schema(**{target: "string"})) == {target: "v"}


def test_alias_not_applied_when_schema_has_source_or_target_missing() -> None:
    both = schema(q="string", query="string")
    assert repair_arguments({"q": "v"}, both) == {"q": "v"}
    assert repair_arguments({"q": "v"}, schema(other="string")) == {"q": "v"}


def test_alias_does_not_overwrite_target() -> None:
    result = repair_arguments({"q": "old", "query": "new"}, SEARCH)
    assert result == {"q": "old", "query": "new"}


@pytest.mark.parametrize(("ms", "seconds"), [(1500, 2), (1000, 1), (1, 1), ("2500", 3)])
def test_yield_time_ms_becomes_seconds_rounded_up(ms: object, seconds: int) -> None:
    s = schema(timeout_seconds="integer")
    assert repair_arguments({"yield_time_ms": ms}, s) == {"timeout_seconds": seconds}


def test_single_item_wrapped_for_array_property() -> None:
    s = schema(paths="array", name="string")
    assert repair_arguments({"paths": "a.txt", "name": "x"}, s) == {"paths": ["a.txt"], "name": "x"}
    assert repair_arguments({"paths": '["a", "b"]'}, s) == {"paths": ["a", "b"]}
    assert repair_arguments({"paths": ["a"]}, s) == {"paths": ["a"]}
    assert repair_arguments({"paths": None}, s) == {"paths": None}


# ---------------------------------------------------------------- names

TOOLS = ["web_search", "read_file", "delegate_to_cli"]


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("web_search", "web_search"),
        ("functions.web_search", "web_search"),
        ("tools.read_file", "read_file"),
        ("Web_Search", "web_search"),
        ("functions.READ_FILE", "read_file"),
        ("exec_command", "delegate_to_cli"),
        ("bash", "delegate_to_cli"),
        ("Shell", "delegate_to_cli"),
        ("run_command", "delegate_to_cli"),
        ("nope", None),
    ],
)
def test_resolve_tool_name(name: str, expected: str | None) -> None:
    assert resolve_tool_name(name, TOOLS) == expected


def test_shell_alias_needs_the_delegate_tool() -> None:
    assert resolve_tool_name("bash", ["web_search"]) is None


def test_ambiguous_case_insensitive_match_is_refused() -> None:
    assert resolve_tool_name("TOOL", ["Tool", "tool_"]) == "Tool"
    assert resolve_tool_name("TOOL", ["Tool", "tOOl"]) is None
